"""A power cut of a whole cluster (issue 14: "the same rules apply per replica"). Three brokers
keep their data on one cutfs mount (tests/support/cutfs.py; ZooKeeper's data is elsewhere): one cut
drops every broker's unsynced writes at once, as a power failure of their rack would, and all
three are ``kill -9``ed. Only the two followers of the partition come back, so one of them
must lead with what it had fsynced: every acks=all write acknowledged before the cut must be
there, at its offset. With ``log.flush.policy=group-commit`` a follower reports an offset to
the leader (which moves the high watermark, hence the acknowledgements) only once fsynced;
with Kafka's policy the same check finds acknowledged records lost (asserted: it catches). ``auto``,
the default, is group commit in a cluster too (issue 28): a cluster started with no flush setting
loses nothing acknowledged either."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from confluent_kafka import Producer

from support.cluster_harness import Cluster, create_topic, read_all
from support.cutfs import CutFs
from support.harness import in_parallel, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

TOPIC = "cut"
ACKED_BEFORE_CUT = 3000


class AckedWriter:
    """An idempotent acks=all producer writing numbered values to partition 0 until told to
    pause; remembers the offset each acknowledgement named."""

    def __init__(self, bootstrap: str) -> None:
        self.acked: dict[bytes, int] = {}
        self.paused = threading.Event()
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 5, "message.timeout.ms": 120_000})
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked[msg.value()] = msg.offset()

    def _run(self) -> None:
        i = 0
        while not self.paused.is_set():
            try:
                self.producer.produce(TOPIC, b"v-%d" % i, partition=0, on_delivery=self._delivered)
                i += 1
            except BufferError:
                pass
            self.producer.poll(0.002)

    def finish(self) -> None:
        """Stop sending; what was in flight is retried (to the new leader) until acknowledged."""
        self.paused.set()
        self.thread.join(30)
        self.producer.flush(120)


@pytest.mark.parametrize("policy", ["group-commit", "auto", "kafka"])
def test_acknowledged_writes_survive_a_power_cut_of_every_replica(cutfs: CutFs, cluster_on_cutfs: Cluster,
                                                                    policy: str) -> None:
    cluster = cluster_on_cutfs
    result = create_topic(cluster.any_alive().bootstrap, TOPIC, partitions=1, replication_factor=3,
                          configs={"min.insync.replicas": "2"})
    assert int(result.error_code) == 0, result
    meta = cluster.wait_for(lambda m: TOPIC in m.topics and len(m.topics[TOPIC][0].isr) == 3, "the ISR whole")
    old_leader = meta.topics[TOPIC][0].leader
    writer = AckedWriter(cluster.bootstrap)
    wait_until(lambda: len(writer.acked) >= ACKED_BEFORE_CUT, f"{ACKED_BEFORE_CUT} acknowledged writes", 180)
    dropped = cutfs.cut()
    acked = dict(writer.acked)  # acknowledged before the power went (later ones wait for it)
    for broker in cluster.brokers.values():
        broker.kill()
    cutfs.thaw()
    followers = [i for i in cluster.brokers if i != old_leader]
    in_parallel([cluster.brokers[i].start for i in followers])
    cluster.wait_for(lambda m: m.topics[TOPIC][0].leader in followers, "a former follower leads", 120,
                     via=followers[0])
    writer.finish()
    stored = dict(read_all(cluster.brokers[followers[0]].bootstrap, TOPIC, settle=False))
    lost = [(v, at) for v, at in acked.items() if stored.get(at) != v]
    report = (f"{policy}: {len(acked)} acknowledged before the cut, {len(stored)} stored; cut dropped {dropped}; "
              f"first lost {lost[:3]}")
    print(report)
    if policy != "kafka":
        assert not lost, f"{len(lost)} acknowledged records lost\n{report}"
    else:  # Kafka's policy leans on replicas not all losing power at once
        assert lost, f"no loss found with fsync off: this test cannot catch one\n{report}"

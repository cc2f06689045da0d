"""Issue 27, acceptance test 4: racks (KIP-36, KIP-392) on a real cluster of three racks of two
brokers (ZooKeeper + 6 brokers, each with ``broker.rack`` and a metrics endpoint, all with
``replica.selector.class=RackAwareReplicaSelector``).

New topics' replicas cover every rack (Kafka's rack-aware placement). A librdkafka consumer with
``client.rack`` set to a follower's rack is sent to that follower by the leader
(``preferred_read_replica``) and reads there — the follower's BytesOut for the topic grows, the
leader's and the third replica's do not — and its read_committed result over committed and
aborted transactions equals, record for record, what a consumer without a rack reads from the
leader. (Mutant, not committed: the follower bounding a consumer read by its log end instead of
its last stable offset — see the test's docstring for what it caught.)
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from eoslog.tools.placement import NOT_ALL_BROKERS_HAVE_RACKS
from support.cluster_harness import Cluster, create_topic, metadata, settled
from support.harness import free_ports, wait_until
from support.kafka_harness import KafkaCluster, cluster_marked, run_tool
from support.rawkafka import RawClient, fetch_request
from support.txn_batches import write_transactions

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

RACKS = {1: "rack-a", 2: "rack-a", 3: "rack-b", 4: "rack-b", 5: "rack-c", 6: "rack-c"}
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    metrics: dict[int, int] = {}

    def per_broker(i: int, port: int) -> dict[str, str]:
        [metrics[i]] = free_ports(1, avoid={*c.ports.values(), *metrics.values()})
        return {"broker.rack": RACKS[i], "metrics.listener": f"http://127.0.0.1:{metrics[i]}"}

    c = Cluster(tmp_path_factory.mktemp("racks"), size=6, per_broker=per_broker,
                overrides={"replica.selector.class": SELECTOR})
    c.metrics_ports = metrics  # type: ignore[attr-defined]
    c.start()
    yield c
    c.stop()


def bytes_out(cluster: Cluster, broker: int, topic: str) -> float:
    """The broker's kafka_server_brokertopicmetrics_bytesout_total for ``topic`` (consumer fetches)."""
    port = cluster.metrics_ports[broker]  # type: ignore[attr-defined]
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "kafka_server_brokertopicmetrics_bytesout_total" and s.labels.get("topic") == topic:
                return float(s.value)
    return 0.0


def test_new_topics_replicas_cover_every_rack(cluster: Cluster) -> None:
    result = create_topic(cluster.any_alive().bootstrap, "racked", 12, 3)
    assert int(result.error_code) == 0, result
    meta = cluster.wait_for(lambda m: len(m.topics.get("racked", {})) == 12, "racked's 12 partitions")
    placed = {p: m.replicas for p, m in meta.topics["racked"].items()}
    assert all(len({RACKS[b] for b in replicas}) == 3 for replicas in placed.values()), placed
    leaders = [replicas[0] for replicas in placed.values()]
    assert {RACKS[b] for b in leaders} == set(RACKS.values()) and max(map(leaders.count, RACKS)) == 2, placed


HALF_RACKED = {1: "rack-a", 2: None, 3: None}
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


def _eoslog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "eoslog", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("kind", cluster_marked(["eoslog", "kafka-cluster"]))
def test_brokers_without_a_rack_count_as_one_more_rack(tmp_path: Path, kind: str) -> None:
    """Racks on some brokers only (broker 1 in rack-a, 2 and 3 without), on eoslog's cluster and
    on Apache Kafka 4.4's three KRaft nodes alike: CreateTopics succeeds and, the rackless
    brokers placed as one more rack (Kafka's StripedReplicaPlacer), every partition has broker
    1 and one of the two others. Kafka <= 3.x refused; eoslog ignored the racks, putting
    partitions on (2, 3).

    A proposal is refused instead: Kafka 4.4's kafka-reassign-partitions.sh --generate reads
    the racks from DescribeCluster (a rackless broker's is null, on eoslog's wire as on
    Kafka's) and refuses the mix unless given --disable-rack-aware; ``eoslog partitions
    reassign --generate`` and ``eoslog cluster rebalance`` refuse it with Kafka's words."""
    rack = {i: {"broker.rack": r} if (r := HALF_RACKED[i]) else {} for i in HALF_RACKED}
    brokers: Cluster | KafkaCluster
    if kind == "eoslog":
        brokers = Cluster(tmp_path, size=3, per_broker=lambda i, _port: rack[i]).start()
        bootstrap = brokers.any_alive().bootstrap
    else:
        brokers = KafkaCluster(tmp_path)
        for node in brokers.nodes:
            node.overrides.update(rack[node.node_id])
        brokers.start()
        bootstrap = brokers.nodes[0].bootstrap
    try:
        result = create_topic(bootstrap, "half-racked", 12, 2)
        assert int(result.error_code) == 0, result
        placed: dict[int, tuple[int, ...]] = {}

        def created() -> bool:
            meta = metadata(bootstrap, ["half-racked"]).topics.get("half-racked", {})
            placed.update({p: m.replicas for p, m in meta.items()})
            return len(meta) == 12 and all(m.leader >= 0 for m in meta.values())

        wait_until(created, "half-racked's 12 partitions led", 60)
        assert all({HALF_RACKED[b] for b in replicas} == {"rack-a", None} for replicas in placed.values()), placed

        (tmp_path / "topics.json").write_text(json.dumps({"version": 1, "topics": [{"topic": "half-racked"}]}))
        generate = ["--bootstrap-server", bootstrap, "--topics-to-move-json-file", str(tmp_path / "topics.json"),
                    "--broker-list", "1,2,3", "--generate"]
        refused = run_tool(REASSIGN, generate, tmp_path, check=False)
        assert refused.returncode != 0 and NOT_ALL_BROKERS_HAVE_RACKS in refused.stdout + refused.stderr, refused
        allowed = run_tool(REASSIGN, [*generate, "--disable-rack-aware"], tmp_path)
        assert "Proposed partition reassignment configuration" in allowed.stdout, allowed
        for command in (["partitions", "reassign", "--generate"], ["cluster", "rebalance", "--yes"]):
            out = _eoslog(*command, "--topics", "half-racked", "--bootstrap-server", bootstrap)
            assert (out.returncode, out.stderr.strip()) == (
                1, f"eoslog {' '.join(command[:2])}: error: {NOT_ALL_BROKERS_HAVE_RACKS}"), out
        out = _eoslog("partitions", "reassign", "--generate", "--disable-rack-aware", "--topics", "half-racked",
                      "--bootstrap-server", bootstrap)
        assert out.returncode == 0 and "Proposed partition reassignment configuration" in out.stdout, out
    finally:
        if isinstance(brokers, KafkaCluster):
            brokers.kill()
        else:
            brokers.stop()


def _read(cluster: Cluster, rack: str | None, expected: int) -> list[tuple[int, bytes, bytes]]:
    """Every record a read_committed librdkafka consumer reads of txn-racked-0, up to ``expected``."""
    conf = {"bootstrap.servers": cluster.bootstrap, "group.id": f"racks-{rack}", "enable.auto.commit": False,
            "isolation.level": "read_committed", "enable.partition.eof": True, "fetch.wait.max.ms": 100}
    if rack is not None:
        conf["client.rack"] = rack
    c = Consumer(conf)
    c.assign([TopicPartition("txn-racked", 0, 0)])
    read: list[tuple[int, bytes, bytes]] = []

    def more() -> bool:
        for m in c.consume(500, 0.5):
            if m.error() is None:
                read.append((m.offset(), m.key(), m.value()))
        return len(read) >= expected

    try:
        wait_until(more, f"{expected} committed records read (client.rack={rack})", 120)
        c.consume(100, 1.0)  # nothing after them either
    finally:
        c.close()
    return read


def _raw_fetch(cluster: Cluster, broker: int, rack: str) -> tuple[Any, ...]:
    """(error, high watermark, LSO, preferred read replica, aborted transactions, records) of a
    Fetch v12 read_committed of txn-racked-0 from offset 0 by a consumer in ``rack``."""
    with RawClient(f"127.0.0.1:{cluster.ports[broker]}") as raw:
        request = dataclasses.replace(fetch_request("txn-racked", 0, 0, isolation_level=1), rack_id=rack)
        p = raw.call(request).responses[0].partitions[0]
    return (int(p.error_code), int(p.high_watermark), int(p.last_stable_offset), int(p.preferred_read_replica),
            sorted((int(a.producer_id), int(a.first_offset)) for a in p.aborted_transactions or ()),
            bytes(p.records or b""))


def test_a_client_rack_consumer_reads_committed_from_the_follower_in_its_rack(cluster: Cluster) -> None:
    """Transactions committed and aborted, then one left open (replicated, above the LSO); a
    consumer in a follower's rack reads from that follower exactly what a consumer without a rack
    reads from the leader: the committed records, none of the aborted or open ones.

    Mutants (not committed): a follower bounding a consumer's read by its high watermark whatever
    the isolation — MUTANT_LSO; a follower answering no aborted transactions — MUTANT_ABORTED."""
    result = create_topic(cluster.any_alive().bootstrap, "txn-racked", 1, 3, configs={"min.insync.replicas": "2"})
    assert int(result.error_code) == 0, result
    meta = cluster.wait_for(lambda m: m.topics.get("txn-racked", {}).get(0) is not None
                            and m.topics["txn-racked"][0].leader > 0 and len(m.topics["txn-racked"][0].isr) == 3,
                            "txn-racked led, its ISR full")
    state = meta.topics["txn-racked"][0]
    leader = state.leader
    follower = next(b for b in state.replicas if b != leader)
    third = next(b for b in state.replicas if b not in (leader, follower))
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "racks-tx", "acks": "all",
                  "linger.ms": 5})
    p.init_transactions(60)
    committed = write_transactions(p, "txn-racked", 10, 50, lambda n: n % 3 == 1, lambda n, i: b"v%d-%d" % (n, i))
    settled(cluster.any_alive().bootstrap, "txn-racked")
    # One more transaction left open: its records are replicated (acks=all) but above the LSO.
    held = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "racks-open", "acks": "all"})
    held.init_transactions(60)
    held.begin_transaction()
    for i in range(20):
        held.produce("txn-racked", b"open-%d" % i, key=b"open-%d" % i, partition=0)
    assert held.flush(60) == 0
    cluster.wait_for(lambda m: len(m.topics["txn-racked"][0].isr) == 3, "every replica in the ISR")

    # The same Fetch v12 (read_committed) answered by the leader and by the follower: records,
    # high watermark, last stable offset and aborted transactions alike, once the follower has
    # learnt the leader's high watermark; the leader sends a client of the follower's rack there.
    redirected = _raw_fetch(cluster, leader, RACKS[follower])
    assert redirected[0] == 0 and redirected[3] == follower and redirected[5] == b"", redirected[:5]
    wanted = _raw_fetch(cluster, leader, "")
    assert wanted[3] == -1 and wanted[4], "no aborted transaction in the leader's answer"
    served: list[tuple[Any, ...]] = []
    wait_until(lambda: served.append(_raw_fetch(cluster, follower, RACKS[follower])) or served[-1] == wanted,
               "the follower answers the read_committed fetch as the leader does",
               describe=lambda: (served[-1][:5], wanted[:5]) if served else None)

    before = {b: bytes_out(cluster, b, "txn-racked") for b in (leader, follower, third)}
    from_follower = _read(cluster, RACKS[follower], committed)
    after = {b: bytes_out(cluster, b, "txn-racked") for b in (leader, follower, third)}
    assert after[follower] > before[follower], "the follower in the client's rack served nothing"
    assert after[leader] == before[leader], "the leader sent records to the client.rack consumer"
    assert after[third] == before[third] == 0
    from_leader = _read(cluster, None, committed)
    assert bytes_out(cluster, leader, "txn-racked") > after[leader]
    assert len(from_leader) == committed and all(int(k.split(b"-")[0]) % 3 != 1 for _, k, _ in from_leader)
    assert from_follower == from_leader
    held.abort_transaction(60)

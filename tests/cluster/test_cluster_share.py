"""Issue 26, acceptance test 4 on a cluster (ZooKeeper + 3 brokers): share groups whose
share-partition leader and share coordinator are different brokers (ReadShareGroupState /
WriteShareGroupState over the wire), and the share coordinator killed -9 while two members accept
records: the ``__share_group_state`` partition's new leader loads the state, the leader's writes
go there, and

- no record whose acknowledgement the brokers confirmed is delivered again;
- no record is lost: every offset delivered and acknowledged by the member that had it (an
  answer lost with a killed broker may leave an acknowledgement unconfirmed, yet done), and the
  share-partition's start offset is the partition's end.

Then the partition's leader is killed -9 too: its follower takes over, reads the state from the
share coordinator, and the same holds.

Acceptance test 6 on the cluster: exactly-once queue workers (``tests/share/share_worker.py``,
eoslog's extension) killed at every point of their transactions while the share coordinator
and then the transaction coordinator of a worker are killed -9: the output holds every input
record exactly once. The share-partition's leader reaches the share coordinator over the wire
(WriteShareGroupState with eoslog's transaction) and learns the outcomes by reading its state.
"""

from __future__ import annotations

import random
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from eoslog.client import Admin
from eoslog.cluster.zookeeper_server import ZooKeeperServer
from eoslog.coordinator.partitioning import coordinator_partition_for
from eoslog.coordinator.share.state import topic_id_string
from eoslog.protocol.errors import ErrorCode
from support.cluster_harness import Cluster, create_topic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "share"))

from share_support import (
    BROKER_OVERRIDES,
    Member,
    group_configs,
    produce,
    share_offsets,
    start_member,
    until,
)
from test_share_durability import confirmed, confirmed_then_redelivered
from test_share_exactly_once import Workers, read_committed, run_until_done

STATE_PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("share"), zookeeper=zookeeper, overrides={
        **BROKER_OVERRIDES, "share.coordinator.state.topic.num.partitions": str(STATE_PARTITIONS)}).start()
    yield c
    c.stop()


def share_coordinator(cluster: Cluster, group: str, topic: str) -> int:
    """The broker leading the ``__share_group_state`` partition of the group's share-partition 0."""
    with Admin({"bootstrap.servers": cluster.bootstrap}) as admin:
        topic_id = admin.describe_topics([topic])[topic].topic_id
    key = f"{group}:{topic_id_string(topic_id)}:0"
    partition = coordinator_partition_for(key, STATE_PARTITIONS)
    state = cluster.wait_for(lambda m: m.topics["__share_group_state"][partition].leader > 0, "a share coordinator")
    return int(state.topics["__share_group_state"][partition].leader)


def test_share_state_moves_with_the_share_coordinator_and_the_leader(cluster: Cluster, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    topic, group, total = f"cs-{tag}", f"g-{tag}", 3000
    assert create_topic(cluster.any_alive().bootstrap, topic, partitions=1, replication_factor=3,
                        configs={"min.insync.replicas": "2"}).error_code == ErrorCode.none
    # Told one broker, applied by every one (cluster/group_config_store.py).
    group_configs(cluster.any_alive().bootstrap, group, share_auto_offset_reset="earliest",
                  share_record_lock_duration_ms=15000)
    produce(cluster.bootstrap, topic, (f"v{i}" for i in range(total)))
    members: list[Member] = [
        start_member(cluster.bootstrap, group, topic, name, tmp_path, client=client, max_records=20, sleep_ms=5)
        for name, client in (("c", "confluent"), ("e", "eoslog"))]
    try:
        until(lambda: confirmed(members) >= total * 0.2, "a fifth acknowledged", timeout=120)
        coordinator = share_coordinator(cluster, group, topic)
        leader = cluster.metadata([topic]).topics[topic][0].leader
        cluster.brokers[coordinator].kill()
        until(lambda: confirmed(members) >= total * 0.5, "half acknowledged", timeout=180)
        cluster.restart_dead()
        leader = cluster.metadata([topic]).topics[topic][0].leader
        cluster.brokers[leader].kill()
        until(lambda: confirmed(members) >= total * 0.8, "four fifths acknowledged", timeout=180)
        cluster.restart_dead()
        until(lambda: share_offsets(cluster.bootstrap, group, topic).start_offset == total, "every record done with",
              timeout=180, describe=lambda: share_offsets(cluster.bootstrap, group, topic))
    finally:
        for m in members:
            m.close()
    assert confirmed_then_redelivered(members) == []
    assert {r["offset"] for m in members for r in m.got()} == set(range(total))
    # Each record the brokers are done with was acknowledged by a member that had it (the answer
    # to some acknowledgements was lost with a killed broker: those are not confirmed, yet done).
    assert {o for m in members for a in m.acks for o in a["offsets"]} == set(range(total))
    deliveries = [r["offset"] for m in members for r in m.got()]
    print(f"{len(deliveries) - len(set(deliveries))} deliveries again after the kills; share coordinator "
          f"{coordinator}, leader {leader}")


def transaction_coordinator(cluster: Cluster, transactional_id: str) -> int:
    from eoslog.coordinator.transaction.log import transaction_partition_for

    state = cluster.wait_for(lambda m: "__transaction_state" in m.topics, "__transaction_state")
    partition = transaction_partition_for(transactional_id, len(state.topics["__transaction_state"]))
    return int(state.topics["__transaction_state"][partition].leader)


def test_exactly_once_queue_through_coordinator_kills(cluster: Cluster, tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    print("seed", seed)
    tag = uuid.uuid4().hex[:8]
    source, sink, group, total = f"eq-{tag}", f"eo-{tag}", f"g-{tag}", 300
    for topic in (source, sink):
        assert create_topic(cluster.any_alive().bootstrap, topic, partitions=1, replication_factor=3,
                            configs={"min.insync.replicas": "2"}).error_code == ErrorCode.none
    group_configs(cluster.any_alive().bootstrap, group, share_auto_offset_reset="earliest",
                  share_record_lock_duration_ms=15000)
    produce(cluster.bootstrap, source, (f"r{i}" for i in range(total)))
    workers = Workers(cluster.bootstrap, group, source, sink, "transactional", tmp_path, random.Random(seed),
                      slots=3, crashes=4)
    killed: list[tuple[str, int]] = []

    def kill_coordinators(start: int) -> None:
        if not killed and start >= total // 4:
            killed.append(("share coordinator", share_coordinator(cluster, group, source)))
            cluster.brokers[killed[-1][1]].kill()
        elif len(killed) == 1 and start >= total // 2:
            cluster.restart_dead()
            killed.append(("transaction coordinator",
                           transaction_coordinator(cluster, workers.workers[0].transactional_id)))
            cluster.brokers[killed[-1][1]].kill()
        elif len(killed) == 2 and start >= 3 * total // 4:
            cluster.restart_dead()
            killed.append(("", -1))

    workers.start()
    try:
        run_until_done(workers, cluster.bootstrap, group, source, total, timeout=420, on_progress=kill_coordinators)
    finally:
        workers.stop()
        cluster.restart_dead()
    counts = Counter(read_committed(cluster.bootstrap, sink))
    assert sorted(v for v, n in counts.items() if n > 1) == []
    assert set(counts) == {f"r{i}" for i in range(total)}
    leader = cluster.metadata([source]).topics[source][0].leader
    print(f"{workers.kills()} workers killed; killed {killed[:2]}; input leader now {leader}")
    assert workers.kills() >= 3 and len(killed) >= 2

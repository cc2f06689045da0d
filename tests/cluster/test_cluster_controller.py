"""The controller on a real cluster (ZooKeeper + 3 brokers): registration, topic creation
with Kafka's replica placement, leader election when a broker dies, controller failover,
controlled shutdown. Replication itself is not exercised here (no records are written)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from cluster_harness import Cluster, ClusterMeta, create_topic
from eoslog.protocol.errors import ErrorCode


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("cluster")).start()
    yield c
    c.stop()


@pytest.fixture(autouse=True)
def _all_brokers_up(cluster: Cluster) -> Iterator[None]:
    yield
    cluster.restart_dead()  # the next test starts with the whole cluster


def test_every_broker_sees_the_same_cluster(cluster: Cluster) -> None:
    views = [cluster.metadata(via=i) for i in cluster.brokers]
    assert {v.brokers for v in views} == {(1, 2, 3)}
    assert len({v.controller for v in views}) == 1 and views[0].controller in (1, 2, 3)
    assert len({v.cluster_id for v in views}) == 1
    for broker in cluster.brokers.values():  # the logs are tied to ZooKeeper's cluster id
        meta = (broker.data_dir / "meta.properties").read_text()
        assert f"cluster.id={views[0].cluster_id}" in meta


def test_create_topic_places_replicas_as_kafka(cluster: Cluster) -> None:
    result = create_topic(cluster.any_alive().bootstrap, "placed", partitions=6, replication_factor=3)
    assert (result.error_code, result.num_partitions, result.replication_factor) == (ErrorCode.none, 6, 3)
    partitions = cluster.metadata(["placed"]).topics["placed"]
    assert sorted(partitions) == list(range(6))
    for p in partitions.values():
        assert sorted(p.replicas) == [1, 2, 3]
        assert p.leader == p.replicas[0]  # the preferred replica leads a new partition
        assert (p.isr, p.leader_epoch, p.offline, p.error) == (p.replicas, 0, (), 0)
    assert Counter(p.leader for p in partitions.values()) == {1: 2, 2: 2, 3: 2}
    assert len({p.replicas for p in partitions.values()}) == 6  # followers spread too


def test_create_topic_refusals(cluster: Cluster) -> None:
    bootstrap = cluster.any_alive().bootstrap
    too_many = create_topic(bootstrap, "rf4", partitions=1, replication_factor=4)
    assert too_many.error_code == ErrorCode.invalid_replication_factor
    assert "only 3 broker(s) are registered" in too_many.error_message
    unknown = create_topic(bootstrap, "bad-assignment", assignment={0: [1, 7]})
    assert unknown.error_code == ErrorCode.invalid_replica_assignment
    manual = create_topic(bootstrap, "manual", assignment={0: [3, 1], 1: [2, 3]})
    assert (manual.error_code, manual.replication_factor) == (ErrorCode.none, 2)
    partitions = cluster.metadata(["manual"]).topics["manual"]
    assert {p: (m.leader, m.replicas) for p, m in partitions.items()} == {0: (3, (3, 1)), 1: (2, (2, 3))}
    again = create_topic(bootstrap, "manual", partitions=1)
    assert again.error_code == ErrorCode.topic_already_exists


def test_leader_killed_a_replica_of_the_isr_takes_over(cluster: Cluster) -> None:
    create_topic(cluster.any_alive().bootstrap, "failover", assignment={0: [2, 3, 1]})
    before = cluster.metadata(["failover"]).topics["failover"][0]
    assert (before.leader, before.leader_epoch) == (2, 0)
    cluster.brokers[2].kill()
    after = cluster.wait_for(lambda m: m.topics["failover"][0].leader not in (2, -1),
                             "a new leader of failover-0").topics["failover"][0]
    assert after.leader == 3  # the first live ISR member in assignment order
    assert after.leader_epoch == 1
    assert after.isr == (3, 1) and after.offline == (2,)
    cluster.brokers[2].start()
    back = cluster.wait_for(lambda m: 2 in m.brokers, "broker 2 registered again").topics["failover"][0]
    assert back.offline == () and back.leader == 3  # no leader change on return


def test_controller_killed_another_broker_takes_over(cluster: Cluster) -> None:
    create_topic(cluster.any_alive().bootstrap, "orphan", assignment={0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    first = cluster.metadata()
    old = first.controller
    cluster.brokers[old].kill()

    def moved(m: ClusterMeta) -> bool:
        return m.controller not in (old, -1) and all(p.leader not in (old, -1) for p in m.topics["orphan"].values())

    after = cluster.wait_for(moved, "a new controller that re-elected the dead one's partitions")
    assert after.controller != old
    for p, meta in after.topics["orphan"].items():
        if first.topics["orphan"][p].leader == old:
            assert meta.leader_epoch == first.topics["orphan"][p].leader_epoch + 1


def test_controlled_shutdown_moves_leadership_before_stopping(cluster: Cluster) -> None:
    create_topic(cluster.any_alive().bootstrap, "polite", assignment={0: [1, 2, 3], 1: [1, 3, 2], 2: [2, 1, 3]})
    broker = cluster.brokers[1]
    assert broker.stop() == 0
    log = broker.log_text().split(f"--- start {broker.starts - 1} ---")[-1]
    assert "controlled shutdown complete" in log, log[-2000:]
    meta = cluster.metadata(["polite"]).topics["polite"]
    assert meta[0].leader == 2 and meta[1].leader == 3 and meta[2].leader == 2
    assert all(1 not in p.isr for p in meta.values())
    assert meta[0].leader_epoch == 1 and meta[2].leader_epoch == 0  # partition 2 only lost a follower


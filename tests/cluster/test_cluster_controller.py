"""The controller on a real cluster (ZooKeeper + 3 brokers): registration, topic creation
with Kafka's replica placement, leader election when a broker dies, controller failover,
controlled shutdown, preferred and unclean elections (ElectLeaders, the admin client and
``eoslog leader-election``), topic configs in ZooKeeper and ``eoslog topics describe``.
Replication itself is not exercised here (one record is written)."""

from __future__ import annotations

import datetime
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from eoslog.client import Producer
from eoslog.client.admin import Admin, ElectionType, NewPartitions
from eoslog.client.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    MessageTooLargeError,
    PreferredLeaderNotAvailableError,
    UnknownTopicOrPartitionError,
)
from eoslog.client.types import TopicPartition
from eoslog.cluster import znodes
from eoslog.cluster.znodes import LeaderAndIsr
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import build
from support.cluster_harness import Cluster, ClusterMeta, create_topic, metadata
from support.harness import wait_until
from support.rawkafka import RawClient, request_module
from support.zk_harness import zookeeper_client


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    # A controlled shutdown may take 10 s here, not the harness's 3 s: broker 1's shows every
    # partition it is in leaving its ISR, each state learnt from a watch (~20 partitions).
    c = Cluster(tmp_path_factory.mktemp("cluster"), overrides={"controlled.shutdown.max.retries": "10"}).start()
    yield c
    c.stop()


@pytest.fixture(autouse=True)
def _all_brokers_up(cluster: Cluster) -> Iterator[None]:
    yield
    cluster.restart_dead()  # the next test starts with the whole cluster


def test_every_broker_sees_the_same_cluster(cluster: Cluster) -> None:
    views: list[ClusterMeta] = []

    def agree() -> bool:  # each learns of the registrations and the controller from its own watches
        views[:] = [cluster.metadata(via=i) for i in cluster.brokers]
        return len({(v.brokers, v.controller) for v in views}) == 1

    wait_until(agree, "every broker's Metadata naming the same brokers and controller", 60,
               describe=lambda: [(v.brokers, v.controller) for v in views])
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
    old = cluster.controller()
    first = cluster.metadata()
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
    # Before the broker stopped, ZooKeeper (the truth) had it out of every ISR...
    states = {p: _get_state(cluster, "polite", p) for p in range(3)}
    assert (states[0].leader, states[1].leader, states[2].leader) == (2, 3, 2), states
    assert all(1 not in s.isr for s in states.values()), states
    assert states[0].leader_epoch == 1 and states[2].leader_epoch == 0  # partition 2 only lost a follower
    # ...and the brokers' metadata caches follow from their watches a moment later.
    cluster.wait_for(lambda m: {p: (s.leader, s.leader_epoch, s.isr) for p, s in m.topics["polite"].items()}
                     == {p: (s.leader, s.leader_epoch, s.isr) for p, s in states.items()}, "Metadata as in ZooKeeper")


def test_a_restarted_broker_answers_once_it_has_joined(cluster: Cluster) -> None:
    """After a kill -9 the restarted broker's port opens seconds before it may register (its
    old session must expire first). Requests in between wait, as Kafka processes none before
    its start-up ends: answered from the empty metadata cache, a Metadata response without
    brokers made librdkafka decommission every broker it knew, the group coordinator with
    them, and its send_offsets_to_transaction hung (tests/chaos/test_copy.py cluster-confluent)."""
    victim = cluster.brokers[3]
    victim.kill()
    restart = threading.Thread(target=victim.start)
    restart.start()
    answers: list[tuple[int, ...]] = []
    while restart.is_alive():
        try:
            answers.append(metadata(victim.bootstrap).brokers)
        except OSError:  # not listening yet, or no answer within the client's timeout
            time.sleep(0.05)
    restart.join()
    answers.append(metadata(victim.bootstrap).brokers)
    assert set(answers) == {(1, 2, 3)}, answers


def _set_state(cluster: Cluster, topic: str, partition: int, state: LeaderAndIsr) -> None:
    """Write a partition state as an earlier controller would have (the test plays that part)."""
    assert cluster.zookeeper is not None
    with zookeeper_client(cluster.zookeeper.connect_string) as client:
        client.set(znodes.partition_state_path(topic, partition), state.encode())


def _get_state(cluster: Cluster, topic: str, partition: int) -> LeaderAndIsr:
    assert cluster.zookeeper is not None
    path = znodes.partition_state_path(topic, partition)
    with zookeeper_client(cluster.zookeeper.connect_string) as client:
        data, stat = client.get(path)
    return LeaderAndIsr.decode(path, data, stat.version)


def test_preferred_leader_election(cluster: Cluster) -> None:
    bootstrap = cluster.any_alive().bootstrap
    create_topic(bootstrap, "prefer", assignment={0: [1, 2, 3], 1: [2, 3, 1]})
    before = cluster.metadata(["prefer"]).topics["prefer"]
    _set_state(cluster, "prefer", 0, LeaderAndIsr(3, 5, (1, 2, 3), 1))  # 3 leads, 1 preferred
    cluster.wait_for(lambda m: m.topics["prefer"][0].leader == 3, "the state written")
    controller = cluster.controller()
    non_controller = next(b for i, b in cluster.brokers.items() if i != controller)
    not_controller = ErrorCode.not_controller
    assert _elect_raw(non_controller.bootstrap, "prefer", [0]) == (not_controller, {0: not_controller})
    out = subprocess.run([sys.executable, "-m", "eoslog", "leader-election", "--preferred", "--topic", "prefer",
                          "--bootstrap-server", bootstrap], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = {line.split()[1]: line.split()[2] for line in out.stdout.splitlines() if line.split()[:1] == ["prefer"]}
    assert rows == {"0": "elected", "1": "ELECTION_NOT_NEEDED"}
    after = cluster.wait_for(lambda m: m.topics["prefer"][0].leader != 3, "the new leader").topics["prefer"]
    assert (after[0].leader, after[0].leader_epoch) == (1, 6)
    assert after[1] == before[1]


def test_unclean_election_of_a_replica_outside_the_isr(cluster: Cluster) -> None:
    """Also the topic config: "unclean-allowed" (unclean.leader.election.enable=true, the broker's
    is false) elects broker 1 by itself when it returns, where "unclean" stays without a leader."""
    create_topic(cluster.any_alive().bootstrap, "unclean", assignment={0: [1, 2]})
    assert int(create_topic(cluster.any_alive().bootstrap, "unclean-allowed", assignment={0: [1, 2]},
                            configs={"unclean.leader.election.enable": "true"}).error_code) == 0
    cluster.brokers[1].kill()
    cluster.wait_for(lambda m: m.topics["unclean"][0].isr == (2,) and m.topics["unclean-allowed"][0].isr == (2,),
                     "broker 1 out of the ISRs")
    cluster.brokers[2].kill()
    offline = cluster.wait_for(lambda m: 2 not in m.brokers, "broker 2 gone").topics["unclean"][0]
    assert (offline.leader, offline.isr) == (-1, (2,))  # the last ISR member is remembered
    cluster.brokers[1].start()
    back = cluster.wait_for(lambda m: 1 in m.brokers, "broker 1 back").topics["unclean"][0]
    assert (back.leader, back.isr) == (-1, (2,))  # 1 may lack acknowledged records: no clean election
    allowed = cluster.wait_for(lambda m: m.topics["unclean-allowed"][0].leader != -1,
                               "the topic allowing unclean election elects 1").topics["unclean-allowed"][0]
    assert (allowed.leader, allowed.isr) == (1, (1,))
    assert cluster.wait_for(lambda m: 1 in m.brokers, "broker 1 back").topics["unclean"][0].leader == -1
    # The controller elects among the brokers its own cache holds: it must have seen 1 return.
    cluster.wait_for_every_broker(lambda m: 1 in m.brokers, "broker 1 back")
    with Admin({"bootstrap.servers": cluster.bootstrap}) as admin:
        assert admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("unclean", 0)]) == {
            TopicPartition("unclean", 0): ANY_PREFERRED_NOT_AVAILABLE}
        assert admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition("unclean", 0)]) == {
            TopicPartition("unclean", 0): None}
    # Every broker learns it from its watch, shortly after the controller answered.
    elected = cluster.wait_for(lambda m: m.topics["unclean"][0].leader != -1, "the elected leader").topics["unclean"][0]
    assert (elected.leader, elected.isr, elected.leader_epoch) == (1, (1,), back.leader_epoch + 1)


class _ErrorOf:
    """Equal to any exception of ``cls`` (the admin returns instances)."""

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def __eq__(self, other: object) -> bool:
        return isinstance(other, self.cls)


ANY_PREFERRED_NOT_AVAILABLE = _ErrorOf(PreferredLeaderNotAvailableError)


def _elect_raw(bootstrap: str, topic: str, partitions: list[int]) -> tuple[int, dict[int, int]]:
    m = request_module(43, 2)
    request = build(m.ElectLeadersRequest, election_type=0, timeout=datetime.timedelta(seconds=10),
                    topic_partitions=(build(m.TopicPartitions, topic=topic, partitions=tuple(partitions)),))
    with RawClient(bootstrap) as client:
        response = client.call(request)
    return int(response.error_code), {int(p.partition_id): int(p.error_code)
                                      for r in response.replica_election_results for p in r.partition_result}


def test_topics_grow_and_are_deleted(cluster: Cluster) -> None:
    bootstrap = cluster.any_alive().bootstrap
    create_topic(bootstrap, "grown", assignment={0: [1, 2], 1: [2, 3]})
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_partitions({"grown": NewPartitions(4, [[3, 1], [1, 3]])})
        for i in cluster.brokers:  # each learns it from its watch
            cluster.wait_for(lambda m: len(m.topics["grown"]) == 4, f"broker {i} sees 4 partitions", via=i)
        with pytest.raises(InvalidReplicaAssignmentError, match="Inconsistent replication factor"):
            admin.create_partitions({"grown": NewPartitions(5, [[1, 2, 3]])})
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({"grown": 3})
        admin.create_partitions({"grown": 6})  # Kafka's placement continues
        grown = cluster.wait_for(lambda m: len(m.topics.get("grown", {})) == 6
                                 and all(p.leader > 0 for p in m.topics["grown"].values()),
                                 "six partitions with leaders").topics["grown"]
        assert [grown[p].replicas for p in (2, 3)] == [(3, 1), (1, 3)]
        assert all(len(set(grown[p].replicas)) == 2 for p in (4, 5))
        admin.delete_topics(["grown"])  # answered once the answering broker saw it go
        for i in cluster.brokers:  # the others learn it from their watches
            cluster.wait_for(lambda m: "grown" not in m.topics, f"broker {i} forgot the topic", via=i)
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.delete_topics(["grown"])
    # ZooKeeper keeps nothing of it.
    with zookeeper_client(cluster.zookeeper.connect_string if cluster.zookeeper else "") as client:
        assert client.exists(znodes.topic_path("grown")) is None
        assert client.exists(znodes.topic_config_path("grown")) is None
        assert client.get_children(znodes.DELETE_TOPICS) == []
    assert create_topic(bootstrap, "grown", partitions=1, replication_factor=3).error_code == ErrorCode.none


def _alter_topic_raw(bootstrap: str, topic: str, name: str, value: str) -> tuple[int, str | None]:
    m = request_module(44, 1)  # IncrementalAlterConfigs, SET
    request = build(m.IncrementalAlterConfigsRequest, validate_only=False, resources=(build(
        m.AlterConfigsResource, resource_type=2, resource_name=topic,
        configs=(build(m.AlterableConfig, name=name, config_operation=0, value=value),)),))
    with RawClient(bootstrap) as client:
        r = client.call(request).responses[0]
    return int(r.error_code), r.error_message


def _topic_overrides_raw(bootstrap: str, topic: str) -> dict[str, str] | None:
    """None while the broker does not know the topic yet (its watch has not fired)."""
    m = request_module(32, 4)  # DescribeConfigs: the dynamic topic configs
    request = build(m.DescribeConfigsRequest, include_synonyms=False, include_documentation=False, resources=(
        build(m.DescribeConfigsResource, resource_type=2, resource_name=topic, configuration_keys=None),))
    with RawClient(bootstrap) as client:
        r = client.call(request).results[0]
    if int(r.error_code) == ErrorCode.unknown_topic_or_partition:
        return None
    assert int(r.error_code) == 0, r.error_message
    return {str(c.name): str(c.value) for c in r.configs if int(c.config_source) == 1}


def test_topic_configs_live_in_zookeeper_and_describe_shows_the_cluster(cluster: Cluster) -> None:
    """AlterConfigs through a broker that holds no replica of the topic writes
    /config/topics/T; every broker describes it and the leader enforces it.
    ``eoslog topics describe`` shows leaders with their epochs, ISR and offline replicas."""
    create_topic(cluster.any_alive().bootstrap, "tuned", assignment={0: [2, 3]})
    outsider = cluster.brokers[1].bootstrap
    assert _alter_topic_raw(outsider, "tuned", "max.message.bytes", "1024") == (ErrorCode.none, None)
    assert _alter_topic_raw(outsider, "absent", "max.message.bytes", "1024")[0] == ErrorCode.unknown_topic_or_partition
    for i, broker in cluster.brokers.items():  # the others learn it from their watches
        wait_until(lambda b=broker: _topic_overrides_raw(b.bootstrap, "tuned") == {"max.message.bytes": "1024"},
                   f"broker {i} describes the change", 30)
    with Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "batch.size": 4096}) as producer:
        producer.send("tuned", b"x" * 100, partition=0).result(30)
        with pytest.raises(MessageTooLargeError):
            producer.send("tuned", b"x" * 2000, partition=0).result(30)
    cluster.brokers[3].kill()
    cluster.wait_for(lambda m: m.topics["tuned"][0].isr == (2,), "broker 3 out of the ISR")
    out = subprocess.run([sys.executable, "-m", "eoslog", "topics", "describe", "tuned", "--bootstrap-server",
                          outsider], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Configs: max.message.bytes=1024" in out.stdout, out.stdout
    rows = [line.split() for line in out.stdout.splitlines() if line.split()[:1] == ["0"]]
    assert rows == [["0", "2", "0", "2,3", "2", "3", "0", "1"]], out.stdout  # leader, epoch, replicas, isr, offline

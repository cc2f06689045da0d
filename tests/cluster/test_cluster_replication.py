"""Replication on a real cluster (ZooKeeper + 3 brokers): followers fetch from the leader,
acks=all answers once the ISR has a batch, a leader killed with SIGKILL loses nothing that
was acknowledged, a returning replica truncates what it alone had (KIP-101) and catches up,
and the replicas end byte-identical. Every run feeds the Jepsen-style history checker."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from eoslog.client import Producer
from eoslog.client.errors import KafkaError, NotEnoughReplicasError
from eoslog.protocol.errors import ErrorCode
from support.cluster_harness import Cluster, create_topic, read_all, segment_bytes
from support.harness import wait_until
from support.history import FAIL, INFO, OK, History, check


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("replication"), overrides={"replica.lag.time.max.ms": "3000"}).start()
    yield c
    c.stop()


@pytest.fixture(autouse=True)
def _all_brokers_up(cluster: Cluster) -> Iterator[None]:
    yield
    cluster.heal()  # a test may have paused or killed one


def _produce(cluster: Cluster, topic: str, values: list[bytes], history: History, acks: str = "all") -> None:
    with Producer({"bootstrap.servers": cluster.bootstrap, "acks": acks, "enable.idempotence": acks == "all",
                   "delivery.timeout.ms": 60000, "retry.backoff.ms": 100}) as producer:
        futures = [(v, producer.send(topic, v, partition=0)) for v in values]
        producer.flush(90)
    for value, future in futures:
        try:
            future.result(0)
            history.send(value, OK)
        except NotEnoughReplicasError:
            history.send(value, FAIL)
        except KafkaError:
            history.send(value, INFO)


def _identical(cluster: Cluster, topic: str) -> bool:
    logs = {i: segment_bytes(b, topic) for i, b in cluster.brokers.items()}
    return len(set(logs.values())) == 1


def _checked(history: History, cluster: Cluster, topic: str) -> None:
    history.final_read(0, read_all(cluster.bootstrap, topic))
    report = check(history)
    print(report.summary())
    assert report.ok, report.summary()


def test_acks_all_survives_a_leader_kill_and_replicas_end_identical(cluster: Cluster) -> None:
    topic = "replicated"
    assert create_topic(cluster.any_alive().bootstrap, topic, assignment={0: [1, 2, 3]},
                        configs={"min.insync.replicas": "2"}).error_code == ErrorCode.none
    history = History()
    _produce(cluster, topic, [b"a%d" % i for i in range(300)], history)
    wait_until(lambda: _identical(cluster, topic), "three identical replicas", 60)
    cluster.brokers[1].kill()
    _produce(cluster, topic, [b"b%d" % i for i in range(300)], history)
    meta = cluster.metadata([topic]).topics[topic][0]
    assert meta.leader in (2, 3) and meta.leader_epoch == 1 and 1 not in meta.isr
    cluster.brokers[1].start()
    cluster.wait_for(lambda m: sorted(m.topics[topic][0].isr) == [1, 2, 3], "broker 1 back in the ISR")
    wait_until(lambda: _identical(cluster, topic), "identical replicas after the return", 60)
    values = [v for _, v in read_all(cluster.bootstrap, topic)]
    assert values == [b"a%d" % i for i in range(300)] + [b"b%d" % i for i in range(300)]
    _checked(history, cluster, topic)


def test_a_returning_leader_truncates_what_only_it_had(cluster: Cluster) -> None:
    """KIP-101: the followers are paused, the leader takes acks=1 records nobody else has and
    is killed; a follower becomes leader and takes other records. When the old leader comes
    back it cuts its own records and copies the new leader's: the replicas end identical."""
    topic = "diverged"
    create_topic(cluster.any_alive().bootstrap, topic, assignment={0: [1, 2, 3]},
                 configs={"min.insync.replicas": "1"})
    history = History()
    _produce(cluster, topic, [b"x%d" % i for i in range(50)], history)
    wait_until(lambda: _identical(cluster, topic), "identical replicas", 60)
    followers = [cluster.brokers[2], cluster.brokers[3]]
    for b in followers:
        assert b.proc is not None
        os.kill(b.proc.pid, signal.SIGSTOP)
    try:
        # A fetch already parked at the leader would still carry new records into the paused
        # follower's socket: let those answer empty first (replica.fetch.wait.max.ms 500).
        time.sleep(1.0)
        lonely = History()  # acks=1: acknowledged by the leader alone, so it may be lost
        _produce(cluster, topic, [b"lost%d" % i for i in range(20)], lonely, acks="1")
        assert len(segment_bytes(cluster.brokers[1], topic)) > len(segment_bytes(cluster.brokers[2], topic))
        cluster.brokers[1].kill()
    finally:
        for b in followers:
            assert b.proc is not None
            os.kill(b.proc.pid, signal.SIGCONT)
    cluster.wait_for(lambda m: m.topics[topic][0].leader in (2, 3), "a follower leads", 60)
    _produce(cluster, topic, [b"y%d" % i for i in range(50)], history)
    cluster.brokers[1].start()
    cluster.wait_for(lambda m: sorted(m.topics[topic][0].isr) == [1, 2, 3], "broker 1 back in the ISR", 60)
    wait_until(lambda: _identical(cluster, topic), "identical replicas after truncation", 60)
    values = [v for _, v in read_all(cluster.bootstrap, topic)]
    assert not any(v.startswith(b"lost") for v in values)
    assert values == [b"x%d" % i for i in range(50)] + [b"y%d" % i for i in range(50)]
    _checked(history, cluster, topic)


def test_min_insync_replicas_refuses_and_loses_nothing(cluster: Cluster) -> None:
    """Issue 13, test 2's second half: with two of three brokers down a min.isr 2 produce
    fails with NOT_ENOUGH_REPLICAS, and what was not acknowledged never appears later."""
    topic = "guarded"
    create_topic(cluster.any_alive().bootstrap, topic, assignment={0: [1, 2, 3]},
                 configs={"min.insync.replicas": "2"})
    history = History()
    _produce(cluster, topic, [b"ok%d" % i for i in range(20)], history)
    cluster.brokers[2].kill()
    cluster.brokers[3].kill()
    cluster.wait_for(lambda m: m.topics[topic][0].isr == (1,), "the ISR down to the leader", 60)
    refused = History()
    with Producer({"bootstrap.servers": cluster.brokers[1].bootstrap, "acks": "all", "retries": 0,
                   "enable.idempotence": False}) as producer:
        future = producer.send(topic, b"refused", partition=0)
        producer.flush(30)
    with pytest.raises(NotEnoughReplicasError):
        future.result(0)
    refused.send(b"refused", FAIL)
    cluster.restart_dead()
    cluster.wait_for(lambda m: len(m.topics[topic][0].isr) == 3, "the ISR whole again", 60)
    time.sleep(0.5)
    values = [v for _, v in read_all(cluster.bootstrap, topic)]
    assert b"refused" not in values and values == [b"ok%d" % i for i in range(20)]
    _checked(history, cluster, topic)

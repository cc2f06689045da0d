"""Transactions on a real cluster (ZooKeeper + 3 brokers): the coordinator of a
transactional id is the leader of its ``__transaction_state`` partition, markers reach the
leaders of the written partitions on other brokers (WriteTxnMarkers over the wire), and a
coordinator killed with SIGKILL — with a transaction open, or right after a commit — moves to
another broker that completes what was decided: read_committed consumers see every committed
record once and none of an aborted transaction, and the replicas end byte-identical."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from eoslog.client import Producer
from eoslog.protocol.errors import ErrorCode
from support.cluster_harness import Cluster, create_topic, find_coordinator, read_all, segment_bytes
from support.harness import wait_until
from support.history import ABORT, COMMIT, OK, History, check

TOPIC = "txn-out"
PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("transactions")).start()
    result = create_topic(c.any_alive().bootstrap, TOPIC, partitions=PARTITIONS, replication_factor=3,
                          configs={"min.insync.replicas": "2"})
    assert result.error_code == ErrorCode.none
    yield c
    c.stop()


@pytest.fixture(autouse=True)
def _all_brokers_up(cluster: Cluster) -> Iterator[None]:
    yield
    cluster.restart_dead()


def _transaction(producer: Producer, history: History, name: str, commit: bool, before_end: object = None) -> None:
    producer.begin_transaction()
    values = [f"{name}-{i}".encode() for i in range(3 * PARTITIONS)]
    for i, v in enumerate(values):
        producer.send(TOPIC, v, partition=i % PARTITIONS)
    producer.flush(60)
    if callable(before_end):
        before_end()
    if commit:
        producer.commit_transaction(120)
    else:
        producer.abort_transaction(120)
    for v in values:
        history.send(v, OK, txn=name)
    history.txn(name, COMMIT if commit else ABORT)


def _identical(cluster: Cluster, topic: str, partitions: int) -> bool:
    return all(len({segment_bytes(b, topic, p) for b in cluster.brokers.values()
                    if (b.data_dir / f"{topic}-{p}").exists()}) == 1 for p in range(partitions))


def test_commits_and_aborts_across_brokers(cluster: Cluster) -> None:
    history = History()
    with Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "across"}) as producer:
        producer.init_transactions(60)
        _transaction(producer, history, "across-1", commit=True)
        _transaction(producer, history, "across-2", commit=False)
        _transaction(producer, history, "across-3", commit=True)
    state = cluster.metadata(["__transaction_state"]).topics["__transaction_state"]
    assert all(len(p.replicas) == 3 for p in state.values())  # capped at 3 brokers, Kafka's default 3
    leaders = {p.leader for p in cluster.metadata([TOPIC]).topics[TOPIC].values()}
    assert len(leaders) > 1  # the markers went to other brokers than the coordinator's
    for p in range(PARTITIONS):
        history.final_read(p, read_all(cluster.bootstrap, TOPIC, p))
    report = check(history)
    print(report.summary())
    assert report.ok, report.summary()


def test_coordinator_killed_open_transaction_and_after_commit(cluster: Cluster) -> None:
    history = History()
    txn_id = "moving"
    with Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id,
                   "transaction.timeout.ms": 60000}) as producer:
        producer.init_transactions(60)
        first = find_coordinator(cluster, txn_id)
        # Killed with the transaction open: the commit goes to the next coordinator.
        _transaction(producer, history, "moving-1", commit=True, before_end=lambda: cluster.brokers[first].kill())
        second = find_coordinator(cluster, txn_id)
        assert second != first
        cluster.brokers[first].start()
        # Killed right after the commit was answered: the markers may still be on their way;
        # the coordinator that takes over rolls the PrepareCommit forward.
        _transaction(producer, history, "moving-2", commit=True)
        cluster.brokers[second].kill()
        _transaction(producer, history, "moving-3", commit=False)
        _transaction(producer, history, "moving-4", commit=True)
    cluster.restart_dead()
    for p in range(PARTITIONS):
        history.final_read(p, read_all(cluster.bootstrap, TOPIC, p))
    report = check(history)
    print(report.summary())
    assert report.ok, report.summary()
    wait_until(lambda: _identical(cluster, TOPIC, PARTITIONS), "identical replicas of the output", 60)


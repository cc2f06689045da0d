"""Issue 13, test 4: clients of librdkafka, kafka-python, aiokafka and eoslog.client ride
through leader changes, controlled shutdowns and coordinator moves on a ZooKeeper + 3-broker
cluster.

- Idempotent producers (acks=all) write while the partitions' leader is killed with SIGKILL,
  another broker shuts down cleanly (controlled shutdown) and leadership moves back to the
  preferred replicas: every acknowledged record is in the log exactly once, in send order.
- Transactional producers (one in three transactions aborted on purpose) and read_committed
  members of a consumer group run while the transaction coordinator is killed with SIGKILL,
  the group coordinator shuts down cleanly and leadership moves back to the preferred
  replicas: the group reads every committed record, none of an aborted transaction, each
  partition in offset order, and the log holds each committed record once.

The history checker (tests/support/history.py) checks both. The copy test on a cluster
(tests/chaos/test_copy.py cluster-*) and test_cluster_transactions.py kill coordinators too."""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from eoslog.client import Producer
from eoslog.client.admin import Admin, ElectionType
from eoslog.storage.txn_index import CorruptTxnIndexError, TxnIndex
from support.cluster_harness import Cluster, create_topic, find_coordinator, read_all
from support.harness import BrokerProcess, wait_until
from support.history import ABORT, COMMIT, INFO, OK, History, check
from support.txn_clients import KAFKA_PYTHON as WEDGING_CLIENT
from support.txn_clients import WedgedCall, Writer, reader, writer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "interop"))
from clients import AIOKAFKA, CONFLUENT, KAFKA_PYTHON, Record, produce

CHUNK = 200
EOSLOG = "eoslog"
IDEMPOTENT = {
    CONFLUENT: {"enable.idempotence": True, "max.in.flight.requests.per.connection": 5},
    KAFKA_PYTHON: {"enable_idempotence": True, "max_in_flight_requests_per_connection": 5},
    AIOKAFKA: {"enable_idempotence": True},
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("clients")).start()
    yield c
    c.stop()


def _produce(client: str, cluster: Cluster, topic: str, values: list[bytes]) -> None:
    if client == EOSLOG:
        with Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                       "delivery.timeout.ms": 120000}) as producer:
            futures = [producer.send(topic, v, partition=i % 2) for i, v in enumerate(values)]
            producer.flush(180)
        for f in futures:
            f.result(0)
        return
    records = [Record(None, v, partition=i % 2) for i, v in enumerate(values)]
    produce(client, cluster.bootstrap, topic, records, config=IDEMPOTENT[client], timeout_s=180)


@pytest.mark.parametrize("client", [CONFLUENT, KAFKA_PYTHON, AIOKAFKA, EOSLOG])
def test_idempotent_producer_rides_through_leader_changes(cluster: Cluster, client: str) -> None:
    topic = f"ride-{client}"
    create_topic(cluster.any_alive().bootstrap, topic, assignment={0: [1, 2, 3], 1: [2, 3, 1]},
                 configs={"min.insync.replicas": "2"})
    sent: list[bytes] = []
    failure: list[BaseException] = []
    done = threading.Event()

    def write() -> None:
        """Chunks of CHUNK records, one producer each, until the leader changes are over."""
        try:
            while not done.is_set():
                chunk = [f"{client}-{len(sent) + i}".encode() for i in range(CHUNK)]
                _produce(client, cluster, topic, chunk)
                sent.extend(chunk)
        except BaseException as e:
            failure.append(e)

    writer = threading.Thread(target=write)
    writer.start()
    progress: list[int] = []

    def writing() -> None:
        """The writer acknowledged more since the last change: it was writing through it."""
        wait_until(lambda: len(sent) > (progress[-1] if progress else 0) or bool(failure), "the writer", 120)
        progress.append(len(sent))

    writing()
    cluster.brokers[1].kill()  # partition 0's leader
    cluster.wait_for(lambda m: m.topics[topic][0].leader in (2, 3), "a new leader of partition 0", 60, via=2)
    cluster.brokers[1].start()
    cluster.wait_for(lambda m: len(m.topics[topic][0].isr) == 3, "broker 1 back in the ISR", 90)
    writing()
    assert cluster.brokers[2].stop() == 0  # partition 1's leader: controlled shutdown
    cluster.brokers[2].start()
    cluster.wait_for(lambda m: all(len(p.isr) == 3 for p in m.topics[topic].values()), "the ISRs whole", 90)
    writing()
    with Admin({"bootstrap.servers": cluster.bootstrap}) as admin:
        admin.elect_leaders(ElectionType.PREFERRED, None)
    writing()
    done.set()
    writer.join(240)
    assert not writer.is_alive()
    assert not failure, failure[0]
    history = History()
    for v in sent:
        history.send(v, OK)
    for p in (0, 1):
        records = read_all(cluster.bootstrap, topic, p)
        history.final_read(p, records)
        assert [v for _, v in records] == [v for i, v in enumerate(sent) if i % 2 == p]  # send order
    report = check(history)
    print(report.summary())
    assert report.ok, report.summary()


TXN_RECORDS = 20
INTERNAL = ("__transaction_state", "__consumer_offsets")


def _whole(cluster: Cluster, topic: str) -> None:
    """Every partition of ``topic`` and of the internal topics back to three in-sync replicas."""
    cluster.wait_for(lambda m: all(len(p.isr) == 3 for t in (topic, *INTERNAL) for p in m.topics[t].values()),
                     "the ISRs whole", 120)


class _TransactionalWriter:
    """Transactions of TXN_RECORDS records over two partitions, one in three aborted on
    purpose, each outcome in the history: committed, aborted, or (a commit that failed
    otherwise than by a refusal) indeterminate, after which a new producer instance takes
    over the transactional id."""

    def __init__(self, client: str, cluster: Cluster, topic: str, history: History) -> None:
        self.client, self.cluster, self.topic, self.history = client, cluster, topic, history
        self.committed: list[bytes] = []
        self.outcomes: list[str] = []
        self.wedged = 0

    def _new(self) -> Writer:
        last: list[BaseException] = []

        def created() -> bool:
            try:
                self.w = writer(self.client, self.cluster.bootstrap, self.topic, f"tid-{self.client}")
            except Exception as e:  # InitProducerId while the coordinator moves
                last[:] = [e]
                return False
            return True

        wait_until(created, f"a {self.client} transactional producer ({last})", 120)
        return self.w

    def run(self, done: threading.Event) -> None:
        w = self._new()
        try:
            while not done.is_set():
                n = len(self.outcomes)
                name, commit = f"{self.client}-t{n}", n % 3 != 2
                records = [(i % 2, f"{name}-{i}".encode()) for i in range(TXN_RECORDS)]
                try:
                    w.transaction(records, commit)
                    outcome = COMMIT if commit else ABORT
                except Exception as e:
                    outcome = INFO
                    self.wedged += isinstance(e, WedgedCall)
                    if w.abortable(e):
                        try:
                            w.abort()
                            outcome = ABORT
                        except Exception:
                            pass
                    if outcome == INFO:
                        w.close()
                        w = self._new()
                for _, v in records:
                    self.history.send(v, OK if outcome == COMMIT else INFO, txn=name)
                self.history.txn(name, outcome)
                if outcome == COMMIT:
                    self.committed += [v for _, v in records]
                self.outcomes.append(outcome)
        finally:
            w.close()


@pytest.mark.parametrize("client", [CONFLUENT, KAFKA_PYTHON, AIOKAFKA, EOSLOG])
def test_transactions_and_group_consumer_ride_through_coordinator_moves(cluster: Cluster, client: str) -> None:
    topic, group = f"txn-{client}", f"group-{client}"
    create_topic(cluster.any_alive().bootstrap, topic, assignment={0: [1, 2, 3], 1: [2, 3, 1]},
                 configs={"min.insync.replicas": "2"})
    history = History()
    producer = _TransactionalWriter(client, cluster, topic, history)
    seen: set[bytes] = set()
    failure: list[BaseException] = []
    writing, reading = threading.Event(), threading.Event()

    def guarded(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as e:
                failure.append(e)
        return run

    def consume() -> None:
        member = f"{client}-reader"
        r = reader(client, cluster.bootstrap, topic, group, lambda parts: [history.assign(member, p) for p in parts])
        try:
            while not reading.is_set():
                for p, o, v in r.poll():
                    history.poll(member, p, o, v)
                    seen.add(v)
        finally:
            r.close()

    threads = [threading.Thread(target=guarded(lambda: producer.run(writing)), daemon=True),
               threading.Thread(target=guarded(consume), daemon=True)]
    for t in threads:
        t.start()
    marks: list[tuple[int, int]] = []

    def progressing() -> None:
        """More commits and more records read since the last change: both ran through it."""
        before = marks[-1] if marks else (0, 0)
        wait_until(lambda: bool(failure) or (producer.outcomes.count(COMMIT) > before[0] and len(seen) > before[1]),
                   f"commits and reads (outcomes {producer.outcomes}, {len(seen)} read)", 180)
        assert not failure, _explain(failure[0])
        marks.append((producer.outcomes.count(COMMIT), len(seen)))

    try:
        _move_coordinators_and_leaders(cluster, f"tid-{client}", group, topic, progressing)
        writing.set()
        threads[0].join(180)
        assert not threads[0].is_alive(), "the transactional producer hangs"
        wait_until(lambda: bool(failure) or set(producer.committed) <= seen, "the group read every commit", 120)
    finally:
        writing.set()
        reading.set()
    threads[1].join(60)
    assert not failure, _explain(failure[0])
    for p in (0, 1):
        history.final_read(p, read_all(cluster.bootstrap, topic, p))
    # Replicas rebuild the aborted-transaction index from what they replicate: any of them
    # can lead and answer read_committed fetches with the same aborted transactions.
    def same_index(p: int) -> bool:
        indexes = [_aborted_index(b, topic, p) for b in cluster.brokers.values()]
        return None not in indexes and len(set(indexes)) == 1 and bool(indexes[0])

    try:
        wait_until(lambda: same_index(0) and same_index(1), "the same aborted-transaction index on every replica", 60)
    except AssertionError:
        indexes = {(i, p): _aborted_index(b, topic, p) or frozenset()
                   for i, b in cluster.brokers.items() for p in (0, 1)}
        union = frozenset().union(*indexes.values())
        raise AssertionError("aborted-transaction indexes differ; missing per replica: " + "; ".join(
            f"broker {i} p{p}: {sorted(union - e)} extra {sorted(e - union)}" for (i, p), e in indexes.items())
            + f"\noutcomes {producer.outcomes}") from None
    report = check(history)
    print(report.summary(), f"\noutcomes {producer.outcomes}, wedged {client} calls given up {producer.wedged}")
    assert report.ok, report.summary()
    assert ABORT in producer.outcomes and producer.outcomes.count(COMMIT) >= 4, producer.outcomes
    assert producer.wedged <= (3 if client == WEDGING_CLIENT else 0), producer.wedged


def _aborted_index(broker: BrokerProcess, topic: str, partition: int) -> frozenset[tuple[int, int, int]] | None:
    """(producer id, first offset, marker offset) of each aborted transaction in the replica's
    index files; None while a file is being written."""
    entries: set[tuple[int, int, int]] = set()
    for path in (broker.data_dir / f"{topic}-{partition}").glob("*.txnindex"):
        index = TxnIndex(path)
        try:
            index.load()
        except CorruptTxnIndexError:
            return None
        entries |= {(e.producer_id, e.first_offset, e.last_offset) for e in index.entries}
    return frozenset(entries)


def _explain(e: BaseException) -> str:
    return "".join(traceback.format_exception(e))


def _move_coordinators_and_leaders(cluster: Cluster, transactional_id: str, group: str, topic: str,
                                   progressing: Callable[[], None]) -> None:
    """The transaction coordinator killed with SIGKILL, the group coordinator shut down
    cleanly, leadership back to the preferred replicas; clients progress after each."""
    progressing()
    txn_coordinator = find_coordinator(cluster, transactional_id)
    cluster.brokers[txn_coordinator].kill()
    wait_until(lambda: find_coordinator(cluster, transactional_id) != txn_coordinator, "a new coordinator", 60)
    cluster.brokers[txn_coordinator].start()
    _whole(cluster, topic)
    progressing()
    group_coordinator = find_coordinator(cluster, group, key_type=0)
    assert cluster.brokers[group_coordinator].stop() == 0  # controlled shutdown
    cluster.brokers[group_coordinator].start()
    _whole(cluster, topic)
    progressing()
    with Admin({"bootstrap.servers": cluster.bootstrap}) as admin:
        admin.elect_leaders(ElectionType.PREFERRED, None)
    progressing()

"""Transactions across clients on the same topics: eoslog.client and librdkafka
(confluent-kafka), each as producer and as consumer.

Two transactional producers, eoslog's and librdkafka's, write numbered records into the
same three partitions at the same time, each transaction nested in one of the other's (so
each producer's batches lie on both sides of the other's markers); half of each one's
transactions abort, most after their records reached the log, some while still queued,
alongside a committed or an aborted transaction of the other. Then:

- librdkafka's read_committed consumer sees exactly eoslog's committed records, each
  partition in send order (and librdkafka's own);
- eoslog's read_committed consumer sees exactly librdkafka's committed records the same
  way (and eoslog's), and stops at the last stable offset;
- both readers see the same records at the same offsets.

And a consumer group of eoslog and librdkafka members (range, then cooperative-sticky)
reads a transactional topic read_committed while both producers write it, members joining
and leaving, each committing after every poll and when partitions are revoked: every
committed record is read exactly once, no aborted one, and the group's commits cover what
was read.

Waiting loops are hang guards; nothing asserts on timing.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from clients import ensure_topic
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import KafkaException as RdKafkaException
from confluent_kafka import Producer as RdProducer
from test_eoslog_producer import consume

from eoslog.client.admin import Admin
from eoslog.client.consumer import Consumer, TopicPartition
from eoslog.client.errors import KafkaError
from eoslog.client.producer import Producer
from support.harness import BrokerProcess, wait_until

WAIT_S = 60.0
PARTITIONS = 3
EOSLOG, LIBRDKAFKA = "eoslog", "librdkafka"
H_INTENT = "intent"


@dataclass(frozen=True, slots=True)
class Read:
    partition: int
    offset: int
    value: bytes
    intent: str


Expected = dict[str, dict[int, list[bytes]]]  # writer -> partition -> committed values in send order


def intent_of(headers: Any) -> str:
    for k, v in headers or ():
        if k == H_INTENT:
            return bytes(v).decode()
    return "?"


# -- writing ----------------------------------------------------------------------------------


class TxnWriter:
    """One client's transactional producer behind begin/send/flush/commit/abort."""

    def __init__(self, kind: str, bootstrap: str, txn_id: str) -> None:
        self.kind, self.bootstrap, self.txn_id = kind, bootstrap, txn_id
        if kind == EOSLOG:
            self.eos = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5})
            self.eos.init_transactions()
        else:
            self.rd = RdProducer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5})
            self.rd.init_transactions(WAIT_S)

    def begin(self) -> None:
        (self.eos if self.kind == EOSLOG else self.rd).begin_transaction()

    def send(self, topic: str, value: bytes, partition: int, intent: str) -> None:
        headers = [(H_INTENT, intent.encode())]
        if self.kind == EOSLOG:
            self.eos.send(topic, value, partition=partition, headers=headers)
        else:
            self.rd.produce(topic, value, partition=partition, headers=headers)

    def flush(self) -> None:
        if self.kind == EOSLOG:
            self.eos.flush(WAIT_S)
        else:
            assert self.rd.flush(WAIT_S) == 0

    def end(self, commit: bool) -> None:
        if self.kind == EOSLOG:
            (self.eos.commit_transaction if commit else self.eos.abort_transaction)(WAIT_S)
        else:
            (self.rd.commit_transaction if commit else self.rd.abort_transaction)(WAIT_S)

    def previous_completed(self) -> None:
        """Wait until the coordinator has written the last transaction's markers.

        Before aborting a transaction whose records are still queued: librdkafka counts an
        AddPartitionsToTxn refused with CONCURRENT_TRANSACTIONS (the last transaction's markers
        still being written: Apache Kafka answers so, eoslog holds it) as possibly registered, so
        an abort in its 20 ms retry back-off sends EndTxn(abort). Kafka finds the last commit's
        PrepareCommit/CompleteCommit there and answers INVALID_TXN_STATE, fatal to the producer
        (reproduced on Kafka 4.4: commit, produce, abort 2 ms later). Java's producer sends no
        EndTxn then (no partition added)."""
        with Admin({"bootstrap.servers": self.bootstrap}) as admin:
            wait_until(lambda: admin.describe_transactions([self.txn_id])[self.txn_id].state
                       in ("Empty", "CompleteCommit", "CompleteAbort"), f"{self.txn_id}'s markers written")

    def close(self) -> None:
        if self.kind == EOSLOG:
            self.eos.close()
        else:
            self.rd.flush(WAIT_S)


# Which transactions abort: both writers' at t % 3 == 0, one writer's alone at t % 6 == 1 or 4;
# an aborted one is flushed first (its records in the log) unless t % 4 == 3.
ABORTS = {EOSLOG: {0, 3, 4}, LIBRDKAFKA: {0, 1, 3}}  # t % 6


def write_transactions(kind: str, bootstrap: str, topic: str, partitions: int, transactions: int,
                       barrier: threading.Barrier, tag: str = "") -> tuple[dict[int, list[bytes]], int]:
    """``transactions`` transactions of 20-80 records over every partition, nested in the
    other writer's: at each ``t`` one writer (eoslog at even t) sends all its records and
    ends its transaction while the other's is open between its two halves, so every
    partition holds batches of one producer's transaction on both sides of the other's
    marker. Returns the committed values per partition in send order, and how many aborted
    records reached the log."""
    rng = random.Random(f"{kind}/{topic}/{tag}")
    w = TxnWriter(kind, bootstrap, f"{kind}-{topic}")
    committed: dict[int, list[bytes]] = defaultdict(list)
    aborted_in_log = 0
    try:
        for t in range(transactions):
            commit = t % 6 not in ABORTS[kind]
            flushed = commit or t % 4 != 3
            intent = "commit" if commit else "abort"
            inner = (kind == EOSLOG) == (t % 2 == 0)
            if not flushed and kind == LIBRDKAFKA:
                w.previous_completed()
            w.begin()
            values = [f"{kind}-{tag}t{t:03d}-r{i:03d}".encode() for i in range(rng.randint(20, 80))]
            sent = [((t + i) % partitions, v) for i, v in enumerate(values)]
            outer_rest = [] if inner else sent[len(sent) // 2:]
            for partition, value in sent[: len(sent) - len(outer_rest)]:
                w.send(topic, value, partition, intent)
            if flushed:
                w.flush()
            barrier.wait(WAIT_S)  # both have records in the log
            if inner:
                w.end(commit)  # inside the other's transaction
            barrier.wait(WAIT_S)
            if not inner:
                for partition, value in outer_rest:
                    w.send(topic, value, partition, intent)
                if flushed:
                    w.flush()
                w.end(commit)
            if commit:
                for partition, value in sent:
                    committed[partition].append(value)
            elif flushed:
                aborted_in_log += len(sent)
    except BaseException:
        barrier.abort()  # the other writer fails instead of waiting
        raise
    finally:
        w.close()
    return dict(committed), aborted_in_log


def write_concurrently(bootstrap: str, topic: str, partitions: int, transactions: int,
                       tag: str = "") -> tuple[Expected, int]:
    """Both writers at once, their transactions nested in each other's in every partition."""
    results: dict[str, tuple[dict[int, list[bytes]], int]] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def run(kind: str) -> None:
        try:
            results[kind] = write_transactions(kind, bootstrap, topic, partitions, transactions, barrier, tag)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in (EOSLOG, LIBRDKAFKA)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(4 * WAIT_S)
    assert not errors, errors
    return {k: r[0] for k, r in results.items()}, sum(r[1] for r in results.values())


# -- reading ----------------------------------------------------------------------------------


def read_librdkafka(bootstrap: str, topic: str, isolation: str) -> list[Read]:
    """Every partition from offset 0 up to its end offset (the LSO under read_committed), so
    a record beyond the expected ones (a duplicate, an aborted one) shows."""
    return [Read(m.partition, m.offset, m.value, intent_of(m.headers))
            for m in consume(bootstrap, topic, PARTITIONS, isolation=isolation)]


def read_eoslog(bootstrap: str, topic: str) -> tuple[list[Read], dict[int, int], dict[int, int]]:
    """Every partition from offset 0 until the positions reach the end offsets (the LSO
    under read_committed); the records, the final positions and the end offsets."""
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    got: list[Read] = []
    with Consumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed"}) as c:
        ends = {tp.partition: o for tp, o in c.end_offsets(tps).items()}
        c.assign(tps)
        for tp in tps:
            c.seek(tp, 0)
        deadline = time.monotonic() + WAIT_S
        while any(c.position(tp) < ends[tp.partition] for tp in tps) and time.monotonic() < deadline:
            got += [Read(r.partition, r.offset, r.value, intent_of(r.headers)) for r in c.poll(0.2)]
        got += [Read(r.partition, r.offset, r.value, intent_of(r.headers)) for r in c.poll(0.5)]
        positions = {tp.partition: c.position(tp) for tp in tps}
    return got, positions, ends


def by_writer(records: list[Read]) -> Expected:
    out: Expected = {EOSLOG: defaultdict(list), LIBRDKAFKA: defaultdict(list)}
    for r in records:
        out[r.value.decode().split("-")[0]][r.partition].append(r.value)
    return {k: dict(v) for k, v in out.items()}


@dataclass
class Written:
    bootstrap: str
    topic: str
    expected: Expected
    aborted_in_log: int

    @property
    def committed_count(self) -> int:
        return sum(len(vs) for parts in self.expected.values() for vs in parts.values())


@pytest.fixture(scope="module")
def written(shared_broker: BrokerProcess) -> Written:
    topic = "interop-txn"
    ensure_topic(shared_broker.bootstrap, topic, PARTITIONS)
    expected, aborted_in_log = write_concurrently(shared_broker.bootstrap, topic, PARTITIONS, 30)
    w = Written(shared_broker.bootstrap, topic, expected, aborted_in_log)
    # The test can fail: aborted records are really in the log, between committed ones.
    assert aborted_in_log > 0
    everything = read_librdkafka(w.bootstrap, topic, "read_uncommitted")
    intents = Counter(r.intent for r in everything)  # (an unflushed aborted record may have gone out too)
    assert intents["commit"] == w.committed_count and intents["abort"] >= aborted_in_log, intents
    return w


def assert_sees_exactly_the_committed(records: list[Read], w: Written, writer: str) -> None:
    assert not [r for r in records if r.intent != "commit"], "aborted records visible to read_committed"
    assert len({(r.partition, r.offset) for r in records}) == len(records), "an offset read twice"
    got = by_writer(records)[writer]
    for p in range(PARTITIONS):
        assert got.get(p, []) == w.expected[writer][p], f"{writer}'s records in partition {p}"


def test_eoslog_transactions_read_committed_by_librdkafka(written: Written) -> None:
    records = read_librdkafka(written.bootstrap, written.topic, "read_committed")
    assert_sees_exactly_the_committed(records, written, EOSLOG)
    assert_sees_exactly_the_committed(records, written, LIBRDKAFKA)


def test_librdkafka_transactions_read_committed_by_eoslog(written: Written) -> None:
    records, positions, ends = read_eoslog(written.bootstrap, written.topic)
    assert_sees_exactly_the_committed(records, written, LIBRDKAFKA)
    assert_sees_exactly_the_committed(records, written, EOSLOG)
    assert positions == ends  # past the last markers: at the last stable offset


def test_both_readers_see_the_same_records_at_the_same_offsets(written: Written) -> None:
    theirs = read_librdkafka(written.bootstrap, written.topic, "read_committed")
    ours, _, _ = read_eoslog(written.bootstrap, written.topic)
    assert len(ours) == written.committed_count
    assert sorted(ours, key=lambda r: (r.partition, r.offset)) == sorted(theirs, key=lambda r: (r.partition, r.offset))


# -- a mixed consumer group -----------------------------------------------------------------------

GROUP_PARTITIONS = 4
SESSION_MS = 6000  # the broker's group.min.session.timeout.ms


class GroupMember:
    """A read_committed group member polling on a thread of its own: it commits after every
    poll that returned records, and in on_revoke (a commit refused because a rebalance is
    under way is made there); ``consumed`` is everything it read."""

    def __init__(self, kind: str, bootstrap: str, group: str, topic: str, name: str, strategy: str) -> None:
        self.kind, self.name = kind, name
        self.consumed: list[Read] = []
        self.commit_errors: list[str] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        settings = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                    "isolation.level": "read_committed", "enable.auto.commit": False,
                    "auto.offset.reset": "earliest", "session.timeout.ms": SESSION_MS,
                    "heartbeat.interval.ms": 500, "partition.assignment.strategy": strategy}
        self._make: Callable[[], Any] = Consumer if kind == EOSLOG else RdConsumer
        self._settings = settings
        self.events: list[str] = []  # assign/revoke, for the failure message
        self.assignment: frozenset[int] = frozenset()  # partitions held, as the callbacks said
        self._t0 = time.monotonic()
        self._topic = topic
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _commit(self, c: Any) -> None:
        try:
            if self.kind == EOSLOG:
                c.commit()
            else:
                c.commit(asynchronous=False)
        except KafkaError as e:  # eoslog: a rebalance under way; committed again on revoke
            self.commit_errors.append(repr(e))
        except RdKafkaException as e:
            if e.args[0].code() != RdKafkaError._NO_OFFSET:  # nothing consumed since the last commit
                self.commit_errors.append(repr(e))

    def _event(self, what: str, partitions: list[Any]) -> None:
        self.events.append(f"{time.monotonic() - self._t0:.1f}s {what} {sorted(p.partition for p in partitions)}")

    def _on_assign(self, c: Any, partitions: list[Any]) -> None:
        self._event("assign", partitions)
        self.assignment = self.assignment | {p.partition for p in partitions}

    def _on_revoke(self, c: Any, partitions: list[Any]) -> None:
        self._event("revoke", partitions)
        self._commit(c)
        self.assignment = self.assignment - {p.partition for p in partitions}

    def _poll(self, c: Any) -> list[Read]:
        if self.kind == EOSLOG:
            return [Read(r.partition, r.offset, r.value, intent_of(r.headers)) for r in c.poll(0.2)]
        return [Read(m.partition(), m.offset(), m.value(), intent_of(m.headers()))
                for m in c.consume(500, 0.2) if m.error() is None]

    def _run(self) -> None:
        c = None
        try:
            c = self._make(self._settings)
            c.subscribe([self._topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
            while not self._stop.is_set():
                records = self._poll(c)
                if records:
                    self.consumed += records
                    self._commit(c)
            self._commit(c)
        except BaseException as e:
            self.error = e
        finally:
            if c is not None:
                c.close()
            self.assignment = frozenset()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise self.error


@pytest.fixture
def members() -> Iterator[list[GroupMember]]:
    started: list[GroupMember] = []
    yield started
    for m in started:
        m._stop.set()
    for m in started:
        m._thread.join(WAIT_S)


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_mixed_group_reads_a_transactional_topic_exactly_once(shared_broker: BrokerProcess, strategy: str,
                                                              members: list[GroupMember]) -> None:
    boot = shared_broker.bootstrap
    topic, group = f"interop-group-{strategy}", f"mixed-{strategy}"
    ensure_topic(boot, topic, GROUP_PARTITIONS)
    want: set[bytes] = set()

    def join(kind: str, name: str) -> None:
        members.append(GroupMember(kind, boot, group, topic, name, strategy))

    def write(tag: str) -> None:
        """Both producers write 10 transactions; then wait until the group read them."""
        expected, _ = write_concurrently(boot, topic, GROUP_PARTITIONS, 10, tag)
        want.update(v for parts in expected.values() for vs in parts.values() for v in vs)
        wait_until(lambda: want <= {r.value for m in members for r in m.consumed}, f"the group to read phase {tag}")

    def settled(group_members: list[GroupMember]) -> bool:
        held = [p for m in group_members for p in m.assignment]
        return sorted(held) == list(range(GROUP_PARTITIONS)) and all(m.assignment for m in group_members)

    # The membership changes between the writing phases: two members, then four, then three.
    join(EOSLOG, "eoslog-1")
    join(LIBRDKAFKA, "librdkafka-1")
    wait_until(lambda: settled(members), "two members to share the partitions")
    write("a")
    join(EOSLOG, "eoslog-2")
    join(LIBRDKAFKA, "librdkafka-2")
    wait_until(lambda: settled(members), "four members to share the partitions")
    write("b")
    members[0].stop()
    wait_until(lambda: settled(members[1:]), "three members to share the partitions")
    write("c")
    for m in members[1:]:
        m.stop()

    everything = [r for m in members for r in m.consumed]
    by_member = {m.name: len(m.consumed) for m in members}
    events = "\n".join(f"{m.name}: {m.events}" for m in members)
    assert not [r for r in everything if r.intent != "commit"], "aborted records read"
    twice = [v for v, n in Counter(r.value for r in everything).items() if n > 1]
    assert not twice, f"{len(twice)} records read twice, e.g. {twice[:5]}; per member {by_member}\n{events}"
    assert {r.value for r in everything} == want
    assert all(by_member.values()), f"a member read nothing: {by_member}\n{events}"
    for m in members:  # each member read each partition in offset order
        for p in range(GROUP_PARTITIONS):
            offsets = [r.offset for r in m.consumed if r.partition == p]
            assert offsets == sorted(offsets), f"{m.name} partition {p}"
    with Consumer({"bootstrap.servers": boot, "group.id": group, "isolation.level": "read_committed"}) as c:
        tps = [TopicPartition(topic, p) for p in range(GROUP_PARTITIONS)]
        committed, ends = c.committed(tps), c.end_offsets(tps)
    for tp in tps:  # the commits cover everything read
        last_read = max(r.offset for r in everything if r.partition == tp.partition)
        found = committed[tp]
        assert found is not None and last_read < found.offset <= ends[tp], f"{tp}: {found} {ends[tp]}"

"""eoslog.client's consumer with ``group.protocol=consumer`` (KIP-848), against eoslog's broker and
against Apache Kafka 4.4 (each test runs on both): members join and leave while records flow and every
record is consumed once; a kill -9'd member's partitions go to the others after its session timeout;
a static member comes back to its partitions; a regular expression (RE2/J, matched by the coordinator)
picks up a topic created later; a zombie's transactional offsets carrying a stale member epoch are
refused; and the exactly-once copy — read, process, write and ``send_offsets_to_transaction`` with the
consumer's group metadata (member id and epoch) — holds every input record exactly once in its output
while copiers join and leave.

Mutant shown (not committed): the member reporting its *target* as owned in its heartbeats (acknowledging
a revocation before it has stopped reading and committing the partitions, instead of after
``on_revoke``) -> the copy's output held input records twice (test_the_exactly_once_copy_...), on eoslog
and on Kafka 4.4.

Brokers are given short consumer-group heartbeats and sessions so that membership changes take seconds.
Waiting loops are hang guards; assertions are about what each member got, never about durations.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer as RdProducer
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.client import Consumer, Producer
from eoslog.client.consumer.errors import CommitFailedError
from eoslog.client.errors import IllegalGenerationError, KafkaError
from eoslog.client.types import ConsumerRecord, OffsetAndMetadata, TopicPartition
from support.feed import Feed
from support.harness import BrokerProcess, wait_until
from support.kafka_harness import KafkaBroker

WAIT_S = 120.0
SESSION_MS = 6000
BROKER_OVERRIDES = {
    "group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": str(SESSION_MS), "group.consumer.min.session.timeout.ms": str(SESSION_MS),
    # A joining member's target computed in its own heartbeat: partitions still fetched by their owner then.
    "group.consumer.assignment.interval.ms": "0",
}
KAFKA_OVERRIDES = {**BROKER_OVERRIDES, "group.consumer.assignor.offload.enable": "false",
                   "offsets.topic.num.partitions": "5", "transaction.state.log.num.partitions": "5"}

Broker = BrokerProcess | KafkaBroker
PROCESSING_S = 1.5  # a copier's work on each batch: a few heartbeat intervals


@pytest.fixture(scope="module", params=["eoslog", "kafka"])
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    data = tmp_path_factory.mktemp(f"client848-{request.param}") / "data"
    b: Broker = (BrokerProcess(data, overrides=BROKER_OVERRIDES) if request.param == "eoslog"
                 else KafkaBroker(data, KAFKA_OVERRIDES))
    b.start()
    yield b
    if isinstance(b, KafkaBroker):
        b.kill()
    else:
        b.stop()


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result()


def settings(bootstrap: str, group: str, name: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False, **extra}


@dataclass
class Member:
    """An eoslog.client consumer of the consumer protocol on a thread of its own: what it is given,
    takes away and loses, and every record it consumes, committed (synchronously) before the next
    poll; a record whose commit was refused is not counted (its partition's next owner reads it)."""

    bootstrap: str
    group: str
    topics: list[str]
    name: str
    instance: str | None = None
    pattern: str | None = None
    records: list[ConsumerRecord] = field(default_factory=list)
    uncommitted: list[ConsumerRecord] = field(default_factory=list)
    events: list[tuple[str, tuple[TopicPartition, ...]]] = field(default_factory=list)
    owned: set[TopicPartition] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    calls: queue.Queue[tuple[Callable[[Consumer], Any], queue.Queue[Any]]] = field(default_factory=queue.Queue)
    thread: threading.Thread | None = None

    def start(self) -> Member:
        self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self.thread.start()
        return self

    def _run(self) -> None:
        extra = {"group.instance.id": self.instance} if self.instance else {}
        c = Consumer(settings(self.bootstrap, self.group, self.name, **extra))

        def event(kind: str) -> Callable[[Any, list[TopicPartition]], None]:
            def on(_: Any, ps: list[TopicPartition]) -> None:
                if kind == "assigned":
                    self.owned |= set(ps)
                else:
                    self.owned -= set(ps)
                self.events.append((kind, tuple(ps)))
            return on

        c.subscribe(self.topics, pattern=self.pattern, on_assign=event("assigned"), on_revoke=event("revoked"),
                    on_lost=event("lost"))
        try:
            while not self.stop.is_set():
                while not self.calls.empty():
                    call, answer = self.calls.get()
                    answer.put(call(c))
                batch = c.poll(0.2)
                if not batch:
                    continue
                try:
                    c.commit()
                except CommitFailedError:
                    self.uncommitted.extend(batch)
                    continue
                self.records.extend(batch)
        except Exception as e:
            self.errors.append(repr(e))
        finally:
            c.close()

    def on_thread(self, call: Callable[[Consumer], Any]) -> Any:
        answer: queue.Queue[Any] = queue.Queue()
        self.calls.put((call, answer))
        return answer.get(timeout=60)

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(60)
            assert not self.thread.is_alive(), f"{self.name} did not close"

    def values(self) -> list[str]:
        return [r.value.decode() for r in self.records]


def produce(bootstrap: str, topic: str, count: int) -> None:
    p = RdProducer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(count):
        p.produce(topic, str(i).encode(), key=str(i).encode())
    assert p.flush(60) == 0


def test_members_join_and_leave_and_every_record_is_consumed_once(broker: Broker) -> None:
    bootstrap, topic, group = broker.bootstrap, "c848-flow", "c848-flow-group"
    create(bootstrap, topic, 6)
    feed = Feed(bootstrap, topic).start()
    m1 = Member(bootstrap, group, [topic], "m1").start()
    wait_until(lambda: len(m1.records) > 50, "m1 consuming", WAIT_S)
    m2 = Member(bootstrap, group, [topic], "m2").start()
    wait_until(lambda: len(m2.records) > 20, "m2 consuming", WAIT_S)
    m3 = Member(bootstrap, group, [topic], "m3").start()
    wait_until(lambda: len(m3.records) > 20, "m3 consuming", WAIT_S)
    wait_until(lambda: all(len(m.owned) == 2 for m in (m1, m2, m3)), "two partitions each", WAIT_S)
    m1.close()
    wait_until(lambda: len(m2.owned) + len(m3.owned) == 6, "m1's partitions taken over", WAIT_S)
    m2.close()
    wait_until(lambda: len(m3.owned) == 6, "m3 holding every partition", WAIT_S)
    sent = feed.close()
    members = (m1, m2, m3)
    wait_until(lambda: len({v for m in members for v in m.values()}) >= sent, f"all {sent} records consumed", WAIT_S)
    m3.close()
    assert [e for m in members for e in m.errors] == []
    values = [v for m in members for v in m.values()]
    assert sorted(values, key=int) == [str(i) for i in range(sent)], "a record lost or consumed twice"
    # Partitions moved by revocation (never lost) and no member gave up everything while staying.
    assert [e for m in members for e in m.events if e[0] == "lost"] == []
    assert all(len(ps) < 6 for kind, ps in m1.events[:-1] if kind == "revoked")


KILLED_MEMBER = textwrap.dedent("""
    import sys
    from eoslog.client import Consumer
    bootstrap, group, topic = sys.argv[1:4]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "doomed",
                  "group.protocol": "consumer", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    def assigned(_, ps):
        print("ASSIGNED", " ".join(str(p.partition) for p in ps), flush=True)
    c.subscribe([topic], on_assign=assigned)
    while True:
        c.poll(0.5)  # reads, never commits
""")


def test_a_killed_members_partitions_go_to_the_others_after_its_session_timeout(broker: Broker,
                                                                                 tmp_path: Path) -> None:
    """A member killed -9 sends no leave: the coordinator takes it out at its session timeout and its
    partitions go to the member left, which reads every record exactly once (the dead one committed
    nothing)."""
    bootstrap, topic, group, total = broker.bootstrap, "c848-kill", "c848-kill-group", 400
    create(bootstrap, topic, 4)
    produce(bootstrap, topic, total)
    script = tmp_path / "doomed.py"
    script.write_text(KILLED_MEMBER)
    doomed = subprocess.Popen([sys.executable, str(script), bootstrap, group, topic], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert doomed.stdout is not None
        line = doomed.stdout.readline()
        assert line.startswith("ASSIGNED"), line
        survivor = Member(bootstrap, group, [topic], "survivor").start()
        wait_until(lambda: len(survivor.owned) == 2, "the survivor holding half of the partitions", WAIT_S)
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.wait(30)
        wait_until(lambda: len(survivor.owned) == 4, "the dead member's partitions reassigned", WAIT_S)
        wait_until(lambda: len(survivor.records) >= total, f"all {total} records consumed", WAIT_S)
        assert [e for e in survivor.events if e[0] in ("lost", "revoked")] == []  # it only gained
        survivor.close()
        assert survivor.errors == []
        assert sorted(survivor.values(), key=int) == [str(i) for i in range(total)]
    finally:
        if doomed.poll() is None:
            doomed.kill()


def test_a_static_member_comes_back_to_its_partitions(broker: Broker) -> None:
    bootstrap, topic, group = broker.bootstrap, "c848-static", "c848-static-group"
    create(bootstrap, topic, 4)
    a = Member(bootstrap, group, [topic], "a", instance="inst-a").start()
    b = Member(bootstrap, group, [topic], "b", instance="inst-b").start()
    wait_until(lambda: len(a.owned) == 2 and len(b.owned) == 2, "both static members holding two", WAIT_S)
    before, a_events = set(b.owned), len(a.events)
    b.close()  # a static member leaves with epoch -2: its partitions wait for it
    b2 = Member(bootstrap, group, [topic], "b2", instance="inst-b").start()
    wait_until(lambda: b2.owned == before, "the same instance back with its partitions", WAIT_S)
    assert a.events[a_events:] == []  # a was not moved
    a.close()
    b2.close()
    assert a.errors == b.errors == b2.errors == []


def test_a_regex_subscription_picks_up_a_new_matching_topic(broker: Broker) -> None:
    bootstrap, group = broker.bootstrap, "c848-regex-group"
    create(bootstrap, "c848rx-first", 2)
    m = Member(bootstrap, group, [], "rx", pattern="c848rx-.*").start()
    wait_until(lambda: {tp.topic for tp in m.owned} == {"c848rx-first"}, "the first matching topic", WAIT_S)
    create(bootstrap, "c848rx-second", 2)
    create(bootstrap, "c848-other", 1)
    wait_until(lambda: {tp.topic for tp in m.owned} == {"c848rx-first", "c848rx-second"}, "the new topic", WAIT_S)
    produce(bootstrap, "c848rx-second", 1)
    wait_until(lambda: any(r.topic == "c848rx-second" for r in m.records), "the new topic's record", WAIT_S)
    m.close()
    assert m.errors == []


def test_a_zombie_whose_offsets_carry_a_stale_member_epoch_is_refused(broker: Broker) -> None:
    """KIP-447 under KIP-848 with eoslog's clients: a member's group metadata from before it lost a
    partition is refused in a transaction (STALE_MEMBER_EPOCH, abortable, as Kafka's Java producer
    makes it) and the partition's committed offset stays the new owner's."""
    bootstrap, topic, group = broker.bootstrap, "c848-zombie", "c848-zombie-group"
    create(bootstrap, topic, 2)
    create(bootstrap, "c848-zombie-out", 1)
    a = Member(bootstrap, group, [topic], "zombie").start()
    wait_until(lambda: len(a.owned) == 2, "the first member holding both partitions", WAIT_S)
    old = a.on_thread(lambda c: c.group_metadata())
    assert old.member_id and old.generation_id > 0
    b = Member(bootstrap, group, [topic], "new-owner").start()
    wait_until(lambda: len(a.owned) == 1 and len(b.owned) == 1, "one partition moved", WAIT_S)
    lost = next(iter(b.owned))
    assert a.on_thread(lambda c: c.group_metadata()).generation_id > old.generation_id
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "c848-zombie-txn"})
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.send("c848-zombie-out", b"zombie output")
        # A stale member epoch, which TxnOffsetCommit below version 6 (eoslog.client sends at most 5) carries
        # as ILLEGAL_GENERATION on both brokers (Kafka 4.4's TxnOffsetCommitRequest.supportsStaleMemberEpochError);
        # abortable, as Kafka's Java producer makes STALE_MEMBER_EPOCH too.
        with pytest.raises(IllegalGenerationError) as refused:
            producer.send_offsets_to_transaction({lost: 1000}, old, 30)
        assert getattr(refused.value, "txn_requires_abort", False)
        producer.abort_transaction(30)
    finally:
        producer.close()
    committed = b.on_thread(lambda c: c.committed([lost], 30))[lost]
    assert committed is None or committed.offset != 1000, "the zombie's offset was committed"
    a.close()
    b.close()


@dataclass
class Copier:
    """A read-process-write loop of eoslog.client: a read_committed consumer of the consumer protocol
    and a transactional producer; each poll's records copied in one transaction with their offsets
    (``send_offsets_to_transaction`` with the consumer's group metadata). A transaction that fails is
    aborted and the positions go back to the committed offsets, as an exactly-once application does."""

    bootstrap: str
    group: str
    source: str
    sink: str
    name: str
    copied: int = 0
    aborted: int = 0
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> Copier:
        self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self.thread.start()
        return self

    def _run(self) -> None:
        c = Consumer(settings(self.bootstrap, self.group, self.name, **{"isolation.level": "read_committed"}))
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": f"{self.name}-txn", "linger.ms": 5})
        try:
            p.init_transactions(60)
            c.subscribe([self.source])
            while not self.stop.is_set():
                batch = c.poll(0.2)
                if not batch:
                    continue
                p.begin_transaction()
                try:
                    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
                    for r in batch:
                        p.send(self.sink, r.value, key=r.key)
                        offsets[TopicPartition(r.topic, r.partition)] = OffsetAndMetadata(r.offset + 1)
                    # The processing, which takes a while: a heartbeat answered meanwhile may take
                    # partitions of this batch away, and the member must go on owning them until
                    # its next poll(), after this transaction.
                    time.sleep(PROCESSING_S)
                    p.send_offsets_to_transaction(offsets, c.group_metadata(), 30)
                    p.commit_transaction(60)
                    self.copied += len(batch)
                except KafkaError as e:
                    if not getattr(e, "txn_requires_abort", False):
                        raise
                    p.abort_transaction(60)
                    self.aborted += 1
                    committed = c.committed(c.assignment(), 30)
                    for tp in c.assignment():
                        found = committed.get(tp)
                        if found is not None:
                            c.seek(tp, found.offset)
                        else:
                            c.seek_to_beginning([tp])
        except Exception as e:
            self.errors.append(repr(e))
        finally:
            c.close()
            p.close()

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(90)
            assert not self.thread.is_alive(), f"{self.name} did not close"


def read_all(bootstrap: str, topic: str, partitions: int) -> list[str]:
    c = Consumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed",
                  "auto.offset.reset": "earliest"})
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        end = c.end_offsets(tps, 30)
        out: list[str] = []
        deadline = time.monotonic() + WAIT_S
        while any(c.position(tp, 30) < end[tp] for tp in tps):
            assert time.monotonic() < deadline, "the output was not read to its end"
            out.extend(r.value.decode() for r in c.poll(0.5))
        return out
    finally:
        c.close()


def test_the_exactly_once_copy_holds_every_record_once_while_copiers_join_and_leave(broker: Broker) -> None:
    bootstrap, source, sink, group = broker.bootstrap, "c848-eos-in", "c848-eos-out", "c848-eos-group"
    create(bootstrap, source, 4)
    create(bootstrap, sink, 2)
    feed = Feed(bootstrap, source).start()
    copiers = [Copier(bootstrap, group, source, sink, "copier-1").start()]
    wait_until(lambda: copiers[0].copied > 100, "the first copier copying", WAIT_S)
    for name in ("copier-2", "copier-3"):
        copiers.append(Copier(bootstrap, group, source, sink, name).start())
        wait_until(lambda: copiers[-1].copied > 50, f"{name} copying", WAIT_S)
    copiers[0].close()  # leaves: its partitions move to the others
    wait_until(lambda: copiers[1].copied + copiers[2].copied > 400, "the others taking over", WAIT_S)
    copiers.append(Copier(bootstrap, group, source, sink, "copier-4").start())
    wait_until(lambda: copiers[-1].copied > 50, "copier-4 copying", WAIT_S)
    copiers[1].close()
    sent = feed.close()
    wait_until(lambda: sum(c.copied for c in copiers) >= sent, f"{sent} records copied", WAIT_S)
    for c in copiers:
        c.close()
    assert [e for c in copiers for e in c.errors] == []
    output = read_all(bootstrap, sink, 2)
    doubled = sorted((v for v, n in Counter(output).items() if n > 1), key=int)
    assert doubled == [], f"{len(doubled)} input records copied twice: {doubled[:10]}"
    assert sorted(output, key=int) == [str(i) for i in range(sent)], "an input record lost"

"""eoslog.client's consumer in consumer groups (classic protocol) against the real broker.

- a group of three eoslog consumers and a librdkafka (confluent-kafka) member on six
  partitions: the members' default assignor lists (eoslog: range, cooperative-sticky;
  librdkafka: range, roundrobin) agree on range; whoever leads, the assignment is complete
  and disjoint — checked at every sample, not only at the end — through a member leaving,
  one joining and the librdkafka member leaving; every record is read and the final
  commits reach the end offsets;
- rebalance callbacks (eager: revoke everything, then assign), a pattern subscription,
  static membership (a restarted static member gets its partitions back without a
  rebalance), a member that stops polling for max.poll.interval.ms loses its partitions;
- cooperative-sticky: partitions that stay with their owner are never revoked (checked
  through the callbacks), moved ones are revoked first and handed over in a second round;
  with a librdkafka cooperative-sticky member leading, then an eoslog one.

Each member polls in a thread of its own. Waiting loops are hang guards; nothing asserts on
timing.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from clients import ensure_topic
from confluent_kafka import Consumer as RdConsumer

from eoslog.client.consumer import AIOConsumer, Consumer
from eoslog.client.producer import Producer
from eoslog.client.types import OffsetAndMetadata, TopicPartition
from support.harness import BrokerProcess, wait_until

WAIT_S = 60.0
SESSION_MS = 6000  # the broker's group.min.session.timeout.ms
STATIC_SESSION_MS = 45000  # static members: time for a restarted one to come back
PARTITIONS = 6


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("groups") / "data",
                      overrides={"group.initial.rebalance.delay.ms": "300"}).start()
    yield b
    if b.alive():
        b.stop()


class Member:
    """A consumer polling in its own thread; ``assignment`` is what it reported after its
    last poll, less what it revoked since, ``consumed`` every (partition, offset) it read,
    ``events`` its callbacks."""

    def __init__(self, name: str, make: Callable[[Member], Any], *, commit: bool = True) -> None:
        self.name = name
        self.assignment: frozenset[TopicPartition] = frozenset()
        self.final_assignment: frozenset[TopicPartition] = frozenset()
        self.consumed: list[tuple[int, int]] = []
        self.events: list[tuple[str, list[TopicPartition]]] = []
        self.error: BaseException | None = None
        self.polls = 0
        self.generation = -1
        self.paused = threading.Event()
        self._stop = threading.Event()
        self._commit = commit
        self._make = make
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def on_assign(self, _: Any, partitions: list[Any]) -> None:
        self.events.append(("assign", sorted(TopicPartition(p.topic, p.partition) for p in partitions)))

    def on_revoke(self, _: Any, partitions: list[Any]) -> None:
        self._give_up("revoke", partitions)

    def on_lost(self, _: Any, partitions: list[Any]) -> None:
        self._give_up("lost", partitions)

    def _give_up(self, event: str, partitions: list[Any]) -> None:
        # The member stops owning them here, before it rejoins: the overlap check relies on it.
        tps = sorted(TopicPartition(p.topic, p.partition) for p in partitions)
        self.events.append((event, tps))
        self.assignment = self.assignment - set(tps)

    def _run(self) -> None:
        c = None
        try:
            c = self._make(self)
            while not self._stop.is_set():
                if self.paused.is_set():
                    time.sleep(0.05)
                    continue
                records = self._poll(c)
                self.polls += 1
                if records:
                    self.consumed += records
                    if self._commit:
                        self._commit_now(c)
                self.assignment = frozenset(self._assignment(c))
                self.generation = self._generation(c)
        except BaseException as e:
            self.error = e
        finally:
            self.final_assignment = self.assignment
            if c is not None:
                c.close()
            self.assignment = frozenset()

    def _poll(self, c: Any) -> list[tuple[int, int]]:
        return [(r.partition, r.offset) for r in c.poll(0.2)]

    def _commit_now(self, c: Any) -> None:
        c.commit()

    def _assignment(self, c: Any) -> set[TopicPartition]:
        return set(c.assignment())

    def _generation(self, c: Any) -> int:
        return int(c.group_metadata().generation_id)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise self.error


class RdMember(Member):
    def _poll(self, c: Any) -> list[tuple[int, int]]:
        return [(m.partition(), m.offset()) for m in c.consume(500, 0.2) if m.error() is None]

    def _commit_now(self, c: Any) -> None:
        c.commit(asynchronous=False)

    def _assignment(self, c: Any) -> set[TopicPartition]:
        return {TopicPartition(p.topic, p.partition) for p in c.assignment()}

    def _generation(self, c: Any) -> int:
        return -1


def eoslog_member(broker: BrokerProcess, group: str, topics: Any, name: str, **settings: Any) -> Member:
    def make(m: Member) -> Consumer:
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": name,
                      "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 300, "fetch.max.wait.ms": 100,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      **{k.replace("_", "."): v for k, v in settings.items()}})
        c.subscribe(topics, on_assign=m.on_assign, on_revoke=m.on_revoke, on_lost=m.on_lost)
        return c

    return Member(name, make)


def librdkafka_member(broker: BrokerProcess, group: str, topic: str, name: str, **settings: Any) -> Member:
    def make(m: Member) -> RdConsumer:
        c = RdConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": name,
                        "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 300,
                        "auto.offset.reset": "earliest", "enable.auto.commit": False,
                        **{k.replace("_", "."): v for k, v in settings.items()}})
        c.subscribe([topic], on_assign=m.on_assign, on_revoke=m.on_revoke, on_lost=m.on_lost)
        return c

    return RdMember(name, make)


class Watch:
    """Samples the members' assignments in the background: no two ever overlap."""

    def __init__(self, members: list[Member]) -> None:
        self.members = members
        self.overlaps: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            seen: dict[TopicPartition, str] = {}
            for m in list(self.members):
                for tp in m.assignment:
                    if tp in seen:
                        self.overlaps.append(f"{tp} held by {seen[tp]} and {m.name}")
                    seen[tp] = m.name
            time.sleep(0.02)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def covered(members: list[Member], partitions: set[TopicPartition]) -> bool:
    """Every partition held by exactly one member, every member holding some."""
    held = [tp for m in members for tp in m.assignment]
    return sorted(held) == sorted(partitions) and all(m.assignment for m in members)


def produce(broker: BrokerProcess, topic: str, count: int, start: int = 0) -> None:
    with Producer({"bootstrap.servers": broker.bootstrap}) as p:
        for i in range(start, start + count):
            p.send(topic, b"%d" % i, partition=i % PARTITIONS)


def test_eoslog_and_librdkafka_members_share_a_group(group_broker: BrokerProcess) -> None:
    topic, group = "shared-group", "mixed"
    ensure_topic(group_broker.bootstrap, topic, PARTITIONS)
    all_tps = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    produce(group_broker, topic, 300)
    members: list[Member] = []
    watch = Watch(members)
    try:
        # librdkafka first: it is the first to join, so it leads the first generation.
        members.append(librdkafka_member(group_broker, group, topic, "rd-1"))
        for i in range(3):
            members.append(eoslog_member(group_broker, group, [topic], f"eos-{i}"))
        wait_until(lambda: covered(members, all_tps), "4 members covering 6 partitions")
        assert sorted(len(m.assignment) for m in members) == [1, 1, 2, 2]  # range
        gone = members.pop(1)
        gone.stop()  # LeaveGroup
        wait_until(lambda: covered(members, all_tps), "3 members after one left")
        members.append(eoslog_member(group_broker, group, [topic], "eos-3"))
        wait_until(lambda: covered(members, all_tps), "4 members after one joined")
        rd = members.pop(0)
        rd.stop()  # an eoslog member leads now
        wait_until(lambda: covered(members, all_tps), "3 eoslog members after librdkafka left")
        assert sorted(len(m.assignment) for m in members) == [2, 2, 2]
        produce(group_broker, topic, 300, start=300)
        everyone = [gone, rd, *members]
        wait_until(lambda: len({pr for m in everyone for pr in m.consumed}) == 600, "all 600 records read")
        for m in members:
            assert m.error is None, m.error
    finally:
        watch.stop()
        for m in members:
            m.stop()
    assert watch.overlaps == []
    with Consumer({"bootstrap.servers": group_broker.bootstrap, "group.id": group}) as check:
        committed = check.committed(sorted(all_tps))
        assert {tp: om.offset for tp, om in committed.items() if om} == check.end_offsets(sorted(all_tps))


def test_eager_callbacks_and_a_pattern_subscription(group_broker: BrokerProcess) -> None:
    group = "pattern"
    for t in ("pat-a", "pat-b", "other"):
        ensure_topic(group_broker.bootstrap, t, 2)
    a = eoslog_member(group_broker, group, "^pat-.*", "pat-1", partition_assignment_strategy="roundrobin")
    members = [a]
    try:
        wanted = {TopicPartition(t, p) for t in ("pat-a", "pat-b") for p in range(2)}
        wait_until(lambda: covered(members, wanted), "the pattern's 4 partitions")
        members.append(eoslog_member(group_broker, group, "^pat-.*", "pat-2",
                                     partition_assignment_strategy="roundrobin"))
        wait_until(lambda: covered(members, wanted) and len(a.assignment) == 2, "2 members x 2 partitions")
    finally:
        for m in members:
            m.stop()
    # Eager: the first member gave up everything before the second round, got its share,
    # and gave that up when it closed.
    share = sorted(a.final_assignment)
    assert len(share) == 2
    assert a.events == [("assign", sorted(wanted)), ("revoke", sorted(wanted)), ("assign", share), ("revoke", share)]


def test_a_restarted_static_member_gets_its_partitions_back_without_a_rebalance(group_broker: BrokerProcess) -> None:
    topic, group = "static", "static-group"
    ensure_topic(group_broker.bootstrap, topic, 4)
    all_tps = {TopicPartition(topic, p) for p in range(4)}
    # The restarted member must be back within the session timeout, or the coordinator expires
    # it and rebalances: 6 s was sometimes too short for a consumer to start on a loaded machine.
    settings = {"session_timeout_ms": STATIC_SESSION_MS}
    one = eoslog_member(group_broker, group, [topic], "static-1", group_instance_id="i-1", **settings)
    two = eoslog_member(group_broker, group, [topic], "static-2", group_instance_id="i-2", **settings)
    members = [one, two]
    try:
        wait_until(lambda: covered(members, all_tps) and one.generation == two.generation, "a stable group")
        generation, held, mark = two.generation, two.assignment, len(two.events)
        one.stop()  # a static member sends no LeaveGroup: its partitions wait for it
        assert one.events[-1] == ("revoke", sorted(one.final_assignment))
        again = eoslog_member(group_broker, group, [topic], "static-1-again", group_instance_id="i-1", **settings)
        members = [again, two]
        wait_until(lambda: covered(members, all_tps), "the static member back")
        assert again.assignment == one.final_assignment
        assert again.generation == two.generation == generation  # no rebalance happened
        assert two.assignment == held and two.events[mark:] == []  # nothing revoked or assigned
    finally:
        for m in members:
            m.stop()


def test_a_member_that_stops_polling_loses_its_partitions(group_broker: BrokerProcess) -> None:
    topic, group = "slow-poller", "slow-group"
    ensure_topic(group_broker.bootstrap, topic, 4)
    all_tps = {TopicPartition(topic, p) for p in range(4)}
    settings = {"max_poll_interval_ms": 2000}
    slow = eoslog_member(group_broker, group, [topic], "slow", **settings)
    busy = eoslog_member(group_broker, group, [topic], "busy", **settings)
    members = [slow, busy]
    try:
        wait_until(lambda: covered(members, all_tps), "two members")
        held = sorted(slow.assignment)
        slow.paused.set()  # no poll() for longer than max.poll.interval.ms: it leaves the group
        wait_until(lambda: busy.assignment == all_tps, "the busy member taking everything")
        slow.paused.clear()
        wait_until(lambda: covered(members, all_tps), "the slow member back")
    finally:
        for m in members:
            m.stop()
    # On its next poll() the slow member learnt that the partitions were no longer its own.
    assert ("lost", held) in slow.events and ("revoke", held) not in slow.events[:slow.events.index(("lost", held))]


def test_transactional_offsets_with_a_group_members_metadata(group_broker: BrokerProcess) -> None:
    """send_offsets_to_transaction with a subscribed member's group_metadata (generation and
    member id, KIP-447) commits the group's offsets with the transaction."""
    source, sink, group = "member-ctp-in", "member-ctp-out", "member-ctp"
    ensure_topic(group_broker.bootstrap, source, 2)
    ensure_topic(group_broker.bootstrap, sink, 1)
    with Producer({"bootstrap.servers": group_broker.bootstrap}) as p:
        for i in range(40):
            p.send(source, b"%d" % i, partition=i % 2)
    c = Consumer({"bootstrap.servers": group_broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "isolation.level": "read_committed",
                  "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 300})
    p = Producer({"bootstrap.servers": group_broker.bootstrap, "transactional.id": "member-ctp-1"})
    p.init_transactions()
    done: set[tuple[int, int]] = set()
    try:
        c.subscribe([source])
        deadline = time.monotonic() + WAIT_S
        while len(done) < 40 and time.monotonic() < deadline:
            records = c.poll(0.5)
            if not records:
                continue
            metadata = c.group_metadata()
            assert metadata.generation_id >= 1 and metadata.member_id
            p.begin_transaction()
            for r in records:
                p.send(sink, r.value)
                done.add((r.partition, r.offset))
            p.send_offsets_to_transaction({tp: c.position(tp) for tp in c.assignment()}, metadata)
            p.commit_transaction()
    finally:
        p.close()
        c.close()
    with Consumer({"bootstrap.servers": group_broker.bootstrap, "group.id": group,
                   "isolation.level": "read_committed"}) as check:
        tps = [TopicPartition(source, 0), TopicPartition(source, 1)]
        assert check.committed(tps) == {tp: OffsetAndMetadata(20, "", -1) for tp in tps}


# -- cooperative-sticky ------------------------------------------------------------------------------


def revoked_after(m: Member, start: int) -> set[TopicPartition]:
    return {tp for event, parts in m.events[start:] if event == "revoke" for tp in parts}


def test_cooperative_sticky_revokes_only_what_moves(group_broker: BrokerProcess) -> None:
    topic, group = "cooperative", "cooperative-group"
    ensure_topic(group_broker.bootstrap, topic, PARTITIONS)
    all_tps = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    produce(group_broker, topic, 120)
    coop = {"partition_assignment_strategy": "cooperative-sticky"}
    a = eoslog_member(group_broker, group, [topic], "coop-a", **coop)
    b = eoslog_member(group_broker, group, [topic], "coop-b", **coop)
    members = [a, b]
    watch = Watch(members)
    try:
        wait_until(lambda: covered(members, all_tps) and len(a.assignment) == 3, "two members with 3 each")
        before = {m.name: m.assignment for m in members}
        marks = {m.name: len(m.events) for m in members}
        c = eoslog_member(group_broker, group, [topic], "coop-c", **coop)
        members.append(c)
        wait_until(lambda: covered(members, all_tps) and len(c.assignment) == 2, "three members with 2 each")
        # A and B revoked exactly what C now has, and nothing they kept.
        for m in (a, b):
            assert revoked_after(m, marks[m.name]) == before[m.name] - m.assignment
            assert m.assignment < before[m.name]
        assert revoked_after(a, marks["coop-a"]) | revoked_after(b, marks["coop-b"]) == c.assignment
        # C got what the others had revoked, once they had (its first round may be overtaken
        # by the revokers' rejoin before its SyncGroup is answered), never giving anything back.
        assert all(event == "assign" for event, _ in c.events)
        assert {tp for _, parts in c.events for tp in parts} == c.assignment
        # B leaves: its partitions go to A and C, which revoke nothing.
        marks = {m.name: len(m.events) for m in members}
        held = {m.name: m.assignment for m in members}
        members.remove(b)
        b.stop()
        wait_until(lambda: covered(members, all_tps) and len(a.assignment) == 3, "A and C with 3 each")
        for m in (a, c):
            assert revoked_after(m, marks[m.name]) == set()
            assert m.assignment > held[m.name]
        everyone = [a, b, c]
        wait_until(lambda: len({pr for m in everyone for pr in m.consumed}) == 120, "all 120 records read")
    finally:
        watch.stop()
        for m in members:
            m.stop()
    assert watch.overlaps == []


def test_cooperative_sticky_with_a_librdkafka_member(group_broker: BrokerProcess) -> None:
    """librdkafka's cooperative-sticky leads, then eoslog's: both read the other's owned
    partitions; nobody revokes a partition that stays, no partition is ever held twice."""
    topic, group = "cooperative-mixed", "cooperative-mixed-group"
    ensure_topic(group_broker.bootstrap, topic, PARTITIONS)
    all_tps = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    coop = {"partition_assignment_strategy": "cooperative-sticky"}
    rd = librdkafka_member(group_broker, group, topic, "coop-rd", **coop)
    members = [rd]
    watch = Watch(members)
    try:
        wait_until(lambda: covered(members, all_tps), "librdkafka alone")
        history: list[dict[str, frozenset[TopicPartition]]] = []
        for step in ("join", "join", "leave"):
            before = {m.name: m.assignment for m in members}
            marks = {m.name: len(m.events) for m in members}
            if step == "join":
                members.append(eoslog_member(group_broker, group, [topic], f"coop-eos-{len(history)}", **coop))
            else:
                members.remove(rd)
                rd.stop()  # an eoslog member leads from here
            wait_until(lambda: covered(members, all_tps)
                       and max(len(m.assignment) for m in members) - min(len(m.assignment) for m in members) <= 1,
                       f"a balanced group after a {step}")
            for m in members:
                if m.name in before:  # what a member gave up went to another one; it kept the rest
                    assert revoked_after(m, marks[m.name]) == before[m.name] - m.assignment
            history.append({m.name: m.assignment for m in members})
    finally:
        watch.stop()
        for m in members:
            m.stop()
    assert watch.overlaps == []


def test_callbacks_may_call_the_consumer(group_broker: BrokerProcess) -> None:
    """Callbacks run in the thread that called poll()/close(), so they can commit (Java's
    pattern: commit what was processed in onPartitionsRevoked)."""
    topic, group = "callback-commit", "callback-group"
    ensure_topic(group_broker.bootstrap, topic, 2)
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    produce_to = Producer({"bootstrap.servers": group_broker.bootstrap})
    for i in range(30):
        produce_to.send(topic, b"%d" % i, partition=i % 2)
    produce_to.close()
    threads: list[str] = []

    def on_revoke(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        threads.append(threading.current_thread().name)
        consumer.commit({tp: consumer.position(tp) for tp in partitions})

    c = Consumer({"bootstrap.servers": group_broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": SESSION_MS})
    c.subscribe([topic], on_revoke=on_revoke)
    got = 0
    deadline = time.monotonic() + WAIT_S
    while got < 30 and time.monotonic() < deadline:
        got += len(c.poll(0.5))
    c.close()
    assert threads == [threading.current_thread().name]
    with Consumer({"bootstrap.servers": group_broker.bootstrap, "group.id": group}) as check:
        assert {tp: om.offset for tp, om in check.committed(tps).items() if om} == {tp: 15 for tp in tps}


def test_asyncio_consumer_in_a_group(group_broker: BrokerProcess) -> None:
    topic, group = "aio-group", "aio-group"
    ensure_topic(group_broker.bootstrap, topic, 3)
    with Producer({"bootstrap.servers": group_broker.bootstrap}) as p:
        for i in range(30):
            p.send(topic, b"%d" % i, partition=i % 3)

    async def main() -> tuple[list[list[TopicPartition]], int]:
        assigned: list[list[TopicPartition]] = []

        async def on_assign(consumer: AIOConsumer, partitions: list[TopicPartition]) -> None:
            await asyncio.sleep(0)
            assigned.append(partitions)

        async with AIOConsumer(bootstrap_servers=group_broker.bootstrap, group_id=group,
                               auto_offset_reset="earliest", session_timeout_ms=SESSION_MS) as c:
            c.subscribe([topic], on_assign=on_assign)
            count = 0
            deadline = time.monotonic() + WAIT_S
            while count < 30 and time.monotonic() < deadline:
                count += len(await c.poll(0.5))
            return assigned, count

    assigned, count = asyncio.run(main())
    assert assigned == [[TopicPartition(topic, p) for p in range(3)]] and count == 30


def test_more_partitions_trigger_a_rebalance(group_broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions

    topic, group = "growing", "growing-group"
    ensure_topic(group_broker.bootstrap, topic, 2)
    m = eoslog_member(group_broker, group, [topic], "grower", metadata_max_age_ms=500)
    try:
        wait_until(lambda: len(m.assignment) == 2, "two partitions")
        admin = AdminClient({"bootstrap.servers": group_broker.bootstrap})
        admin.create_partitions([NewPartitions(topic, 5)])[topic].result(WAIT_S)
        wait_until(lambda: m.assignment == {TopicPartition(topic, p) for p in range(5)}, "five partitions")
    finally:
        m.stop()


def test_a_member_reads_on_through_a_broker_kill(tmp_path: Any) -> None:
    broker = BrokerProcess(tmp_path / "data", overrides={"group.initial.rebalance.delay.ms": "0"}).start()
    topic, group = "through-kill", "kill-group"
    try:
        ensure_topic(broker.bootstrap, topic, 2)
        with Producer({"bootstrap.servers": broker.bootstrap}) as p:
            for i in range(100):
                p.send(topic, b"%d" % i, partition=i % 2)
        m = eoslog_member(broker, group, [topic], "survivor", reconnect_backoff_max_ms=200)
        try:
            wait_until(lambda: len(set(m.consumed)) == 100, "the first 100 records")
            broker.restart(kill=True)
            with Producer({"bootstrap.servers": broker.bootstrap}) as p:
                for i in range(100, 200):
                    p.send(topic, b"%d" % i, partition=i % 2)
            wait_until(lambda: len(set(m.consumed)) == 200, "200 records after the restart")
        finally:
            m.stop()
        for partition in (0, 1):
            offsets = sorted({o for p, o in m.consumed if p == partition})
            assert offsets == list(range(100))
    finally:
        broker.stop()

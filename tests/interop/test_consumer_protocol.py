"""KIP-848 consumer groups with librdkafka (confluent-kafka, ``group.protocol=consumer``): members
join and leave while records flow, partitions move without a stop-the-world rebalance, every record
is consumed exactly once across the group's life, static members come back to their partitions, and
a regular expression subscription picks up a topic created later.

One broker for the module, with short consumer-group heartbeats and sessions (the broker's bounds
lowered so), so that membership changes take seconds. Waiting loops are hang guards; the assertions
are about what each member got and when, relative to the others' events, never about durations.
"""

from __future__ import annotations

import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.client import Admin
from support.feed import Feed
from support.harness import BrokerProcess, wait_until

WAIT_S = 120.0
REBALANCING = {KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS}
BROKER_OVERRIDES = {
    "group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "6000", "group.consumer.min.session.timeout.ms": "6000",
    # A joining member's target is computed in its own heartbeat (not by the interval's timer): the
    # partitions it is to get are still fetched by their owner then, the moment a broker that handed
    # them out before their release would show as a record consumed twice.
    "group.consumer.assignment.interval.ms": "0",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("kip848") / "data", overrides=BROKER_OVERRIDES).start()
    yield b
    b.stop()


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result()


@dataclass
class Event:
    at: float
    what: str  # "assigned" | "revoked" | "record"
    partitions: tuple[int, ...] = ()
    value: str = ""
    topic: str = ""


@dataclass
class Member:
    """A consumer of the consumer protocol on a thread of its own: it records what it is given and
    takes away, and every record it consumes, each committed (synchronously) before the next poll."""

    bootstrap: str
    group: str
    topics: list[str]
    name: str
    instance: str | None = None
    protocol: str = "consumer"  # group.protocol
    events: list[Event] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    errors: list[str] = field(default_factory=list)
    uncommitted: list[Event] = field(default_factory=list)  # consumed, its commit refused
    thread: threading.Thread | None = None
    owned: set[tuple[str, int]] = field(default_factory=set)
    calls: queue.Queue[tuple[Any, queue.Queue[Any]]] = field(default_factory=queue.Queue)

    def start(self) -> Member:
        self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self.thread.start()
        return self

    def _run(self) -> None:
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap, "group.id": self.group, "client.id": self.name,
                                "group.protocol": self.protocol, "auto.offset.reset": "earliest",
                                "enable.auto.commit": False}
        if self.instance is not None:
            conf["group.instance.id"] = self.instance
        c = Consumer(conf)

        def assigned(_: Any, ps: list[TopicPartition]) -> None:
            self.owned |= {(p.topic, p.partition) for p in ps}
            self.events.append(Event(time.monotonic(), "assigned", tuple(sorted(p.partition for p in ps))))

        def revoked(_: Any, ps: list[TopicPartition]) -> None:
            self.owned -= {(p.topic, p.partition) for p in ps}
            self.events.append(Event(time.monotonic(), "revoked", tuple(sorted(p.partition for p in ps))))

        c.subscribe(self.topics, on_assign=assigned, on_revoke=revoked)
        try:
            while not self.stop.is_set():
                while not self.calls.empty():  # librdkafka's consumer: one thread at a time
                    call, answer = self.calls.get()
                    answer.put(call(c))
                m = c.poll(0.2)
                if m is None:
                    continue
                if m.error() is not None:
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        self.errors.append(str(m.error()))
                    continue
                record = Event(time.monotonic(), "record", (m.partition(),), m.value().decode(), m.topic())
                try:
                    c.commit(message=m, asynchronous=False)
                except KafkaException as e:
                    # A classic member's commit racing a rebalance (the generation moved on): not
                    # committed, so not consumed — the partition's next owner reads it again.
                    if e.args[0].code() not in REBALANCING:
                        raise
                    self.uncommitted.append(record)
                    continue
                self.events.append(record)
        except Exception as e:
            self.errors.append(repr(e))
        finally:
            c.close()

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(60)

    def on_thread(self, call: Any) -> Any:
        """``call(consumer)`` run by the member's own thread, between two polls."""
        answer: queue.Queue[Any] = queue.Queue()
        self.calls.put((call, answer))
        return answer.get(timeout=60)

    def group_metadata(self) -> Any:
        """The consumer's group metadata as it is now (member id and epoch), for a transaction."""
        return self.on_thread(lambda c: c.consumer_group_metadata())

    def committed(self, partition: int) -> int:
        topic = self.topics[0]
        return int(self.on_thread(lambda c: c.committed([TopicPartition(topic, partition)], 30))[0].offset)

    def records(self) -> list[Event]:
        return [e for e in self.events if e.what == "record"]

    def first_assigned_at(self) -> float | None:
        return next((e.at for e in self.events if e.what == "assigned" and e.partitions), None)


def test_members_join_and_leave_while_consuming_and_every_record_is_consumed_once(broker: BrokerProcess) -> None:
    bootstrap, topic, group = broker.bootstrap, "cp-flow", "cp-flow-group"
    create(bootstrap, topic, 6)
    feed = Feed(bootstrap, topic).start()
    m1 = Member(bootstrap, group, [topic], "m1").start()
    wait_until(lambda: len(m1.records()) > 50, "m1 consuming", WAIT_S)
    joined2 = time.monotonic()
    m2 = Member(bootstrap, group, [topic], "m2").start()
    wait_until(lambda: len(m2.records()) > 20, "m2 consuming", WAIT_S)
    m3 = Member(bootstrap, group, [topic], "m3").start()
    wait_until(lambda: len(m3.records()) > 20, "m3 consuming", WAIT_S)
    m1.close()
    wait_until(lambda: len(m2.owned) + len(m3.owned) == 6, "m1's partitions taken over", WAIT_S)
    m2.close()
    wait_until(lambda: len(m3.owned) == 6, "m3 holding every partition", WAIT_S)
    sent = feed.close()
    wait_until(lambda: len({e.value for m in (m1, m2, m3) for e in m.records()}) >= sent,
               f"all {sent} records consumed", WAIT_S)
    m3.close()
    assert m1.errors == m2.errors == m3.errors == []
    values = [e.value for m in (m1, m2, m3) for e in m.records()]
    assert sorted(values, key=int) == [str(i) for i in range(sent)], "a record lost or consumed twice"

    # No stop-the-world: m1 never gave up everything while staying in the group, and while m2 was
    # joining — from its start to its first partitions — m1 went on consuming what it kept.
    m1_revokes = [e for e in m1.events if e.what == "revoked"]
    assert m1_revokes and all(len(e.partitions) < 6 for e in m1_revokes[:-1])
    got2 = m2.first_assigned_at()
    assert got2 is not None
    kept = {p for e in m1.events if e.what == "assigned" for p in e.partitions} - {
        p for e in m1_revokes[:1] for p in e.partitions}
    during = [e for e in m1.records() if joined2 <= e.at <= got2 and e.partitions[0] in kept]
    assert during, "m1 stopped fetching its kept partitions while m2 joined"


def test_a_static_member_comes_back_to_its_partitions(broker: BrokerProcess) -> None:
    bootstrap, topic, group = broker.bootstrap, "cp-static", "cp-static-group"
    create(bootstrap, topic, 4)
    a = Member(bootstrap, group, [topic], "a", instance="inst-a").start()
    b = Member(bootstrap, group, [topic], "b", instance="inst-b").start()
    wait_until(lambda: len(a.owned) == 2 and len(b.owned) == 2, "both static members holding two", WAIT_S)
    before = set(b.owned)
    a_events = len(a.events)
    b.close()  # a static member leaves with epoch -2: its partitions wait for it
    b2 = Member(bootstrap, group, [topic], "b2", instance="inst-b").start()
    wait_until(lambda: b2.owned == before, "the same instance back with its partitions", WAIT_S)
    assert [e for e in a.events[a_events:] if e.what in ("assigned", "revoked")] == []  # a was not moved
    a.close()
    b2.close()


def test_a_regex_subscription_picks_up_a_new_matching_topic(broker: BrokerProcess) -> None:
    bootstrap, group = broker.bootstrap, "cp-regex-group"
    create(bootstrap, "rx-first", 2)
    m = Member(bootstrap, group, ["^rx-.*"], "rx").start()
    wait_until(lambda: {t for t, _ in m.owned} == {"rx-first"}, "the first matching topic assigned", WAIT_S)
    create(bootstrap, "rx-second", 2)
    create(bootstrap, "other-topic", 1)
    wait_until(lambda: {t for t, _ in m.owned} == {"rx-first", "rx-second"}, "the new topic assigned", WAIT_S)
    p = Producer({"bootstrap.servers": bootstrap})
    p.produce("rx-second", b"late")
    p.flush(30)
    wait_until(lambda: any(e.topic == "rx-second" and e.value == "late" for e in m.records()),
               "the new topic's record consumed", WAIT_S)
    m.close()
    assert m.errors == []



def test_a_zombie_whose_txn_offset_commit_carries_a_stale_member_epoch_is_refused(broker: BrokerProcess) -> None:
    """KIP-447 under KIP-848: a member that lost a partition to a rebalance cannot commit its offset in a
    transaction with the group metadata (member epoch) it had — TxnOffsetCommit answers
    STALE_MEMBER_EPOCH for it (ILLEGAL_GENERATION below version 6), the transaction cannot commit,
    and the committed offset is the new owner's business alone."""

    bootstrap, topic, group = broker.bootstrap, "cp-zombie", "cp-zombie-group"
    create(bootstrap, topic, 2)
    create(bootstrap, "cp-zombie-out", 1)
    a = Member(bootstrap, group, [topic], "zombie").start()
    wait_until(lambda: len(a.owned) == 2, "the first member holding both partitions", WAIT_S)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "cp-zombie-txn"})
    producer.init_transactions(30)
    old_metadata = a.group_metadata()
    b = Member(bootstrap, group, [topic], "new-owner").start()
    wait_until(lambda: len(a.owned) == 1 and len(b.owned) == 1, "one partition moved to the new member", WAIT_S)
    lost = next(p for (_, p) in b.owned)
    producer.begin_transaction()
    producer.produce("cp-zombie-out", b"zombie output")
    with pytest.raises(KafkaException) as refused:
        producer.send_offsets_to_transaction([TopicPartition(topic, lost, 1000)], old_metadata, 30)
    # The member epoch is stale; TxnOffsetCommit below version 6 (librdkafka's) carries that as
    # ILLEGAL_GENERATION, as Kafka 4.4 answers it (TxnOffsetCommitRequest.supportsStaleMemberEpochError).
    assert refused.value.args[0].name() == "ILLEGAL_GENERATION"
    producer.abort_transaction(30)
    committed = b.committed(lost)
    assert committed != 1000, "the zombie's offset was committed"
    a.close()
    b.close()


def test_eoslog_groups_lists_and_describes_consumer_and_classic_groups(broker: BrokerProcess) -> None:
    """``eoslog groups list/describe`` show a KIP-848 group (ConsumerGroupDescribe: its type, group and
    member epochs, assignments) beside a classic group (DescribeGroups) on the same topic."""
    bootstrap, topic, group, classic_group = broker.bootstrap, "cp-cli", "cp-cli-group", "cp-cli-classic"
    create(bootstrap, topic, 2)
    m = Member(bootstrap, group, [topic], "cli-member").start()
    classic = Consumer({"bootstrap.servers": bootstrap, "group.id": classic_group, "client.id": "cli-classic",
                        "group.protocol": "classic", "auto.offset.reset": "earliest"})
    classic.subscribe([topic])
    try:
        wait_until(lambda: len(m.owned) == 2, "the member holding both partitions", WAIT_S)
        wait_until(lambda: classic.poll(0.2) is None and len(classic.assignment()) == 2,
                   "the classic consumer holding both partitions", WAIT_S)

        def eoslog(*args: str) -> str:
            result = subprocess.run([sys.executable, "-m", "eoslog", *args, "--bootstrap-server", bootstrap],
                                    capture_output=True, text=True, timeout=60, check=False)
            assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
            return result.stdout

        listed = [line.split() for line in eoslog("groups", "list").splitlines()]
        assert [group, "consumer", "Stable", "consumer"] in listed
        assert [classic_group, "classic", "Stable", "consumer"] in listed
        described = eoslog("groups", "describe", group, "--members").splitlines()
        header = re.split(r"\s{2,}", described[0].strip())  # tabs, expanded by rich
        assert header[:3] == [f"Group: {group}", "Type: consumer", "State: Stable"], header
        assert "Protocol: consumer/uniform" in header and "Members: 1" in header
        epoch = int(next(h for h in header if h.startswith("Epoch: ")).removeprefix("Epoch: "))
        row = next(line.split() for line in described[1:] if "cli-member" in line)
        both = [f"{topic}-0,", f"{topic}-1"]
        # member epoch, #partitions, assignment, target assignment: reconciled to the group's epoch.
        assert row[-6:] == [str(epoch), "2", *both, *both], row
        described = eoslog("groups", "describe", classic_group, "--members").splitlines()
        header = re.split(r"\s{2,}", described[0].strip())  # tabs, expanded by rich
        assert header[:3] == [f"Group: {classic_group}", "Type: classic", "State: Stable"], header
        assert not any(h.startswith("Epoch: ") for h in header)
        row = next(line.split() for line in described[1:] if "cli-classic" in line)
        assert row[-5:] == ["-", "2", *both, "-"], row  # no member epoch, no target assignment
    finally:
        classic.close()
        m.close()


def test_a_group_changes_protocol_and_back_with_its_offsets(tmp_path: Path) -> None:
    """Acceptance 3, the empty group's migration: a classic group consumes part of a topic committing each
    record; its members stop and consumer-protocol members carry on from its offsets (the classic group
    gives way to a consumer group); the broker is killed -9 and restarted (the conversion and offsets
    loaded from __consumer_offsets); they stop and classic members carry on again — every record consumed
    exactly once across the three. Mutant (not committed): the consumer group not taking the classic
    group's offsets -> the second phase starts from the beginning (duplicates)."""
    broker = BrokerProcess(tmp_path / "data", overrides=BROKER_OVERRIDES).start()
    try:
        bootstrap, topic, group, total = broker.bootstrap, "cp-migrate", "cp-migrate-group", 600
        create(bootstrap, topic, 3)
        p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        for i in range(total):
            p.produce(topic, str(i).encode(), key=str(i).encode())
        assert p.flush(60) == 0
        phases: list[list[Member]] = []

        def phase(protocol: str, until: int) -> None:
            members = [Member(bootstrap, group, [topic], f"{protocol}-{len(phases)}-{i}", protocol=protocol).start()
                       for i in range(2)]
            phases.append(members)
            wait_until(lambda: len({e.value for ms in phases for m in ms for e in m.records()}) >= until,
                       f"{until} records consumed", WAIT_S)
            for m in members:
                m.close()
            assert [e for m in members for e in m.errors] == []
            assert all(not m.thread or not m.thread.is_alive() for m in members)

        phase("classic", 200)
        phase("consumer", 400)
        broker.restart(kill=True)
        phase("classic", total)
        values = [e.value for ms in phases for m in ms for e in m.records()]
        assert sorted(values, key=int) == [str(i) for i in range(total)], "a record lost or consumed twice"
    finally:
        broker.stop()


def group_type(bootstrap: str, group: str) -> str | None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        return next((g.type for g in admin.list_groups() if g.group_id == group), None)


def test_a_live_classic_group_is_upgraded_member_by_member_and_downgraded_again(broker: BrokerProcess) -> None:
    """Acceptance 3, online: records flow while a classic group's members are replaced one at a time by
    consumer-protocol members (the first one's ConsumerGroupHeartbeat converts the live classic group;
    the classic members left go on with JoinGroup/SyncGroup/Heartbeat inside the consumer group), and
    then back by classic members (JoinGroup into the consumer group) — every record consumed exactly
    once across the group's life, each committed before the next poll."""
    bootstrap, topic, group = broker.bootstrap, "cp-online", "cp-online-group"
    create(bootstrap, topic, 4)
    feed = Feed(bootstrap, topic).start()
    members: list[Member] = []

    def start(protocol: str) -> Member:
        m = Member(bootstrap, group, [topic], f"{protocol}-{len(members)}", protocol=protocol).start()
        members.append(m)
        return m

    def consuming(m: Member) -> None:
        seen = len(m.records())
        wait_until(lambda: len(m.owned) > 0 and len(m.records()) > seen + 5, f"{m.name} consuming", WAIT_S)

    c1, c2 = start("classic"), start("classic")
    consuming(c1)
    consuming(c2)
    assert group_type(bootstrap, group) == "classic"
    n1 = start("consumer")  # converts the live classic group
    consuming(n1)
    assert group_type(bootstrap, group) == "consumer"
    c1.close()
    n2 = start("consumer")
    consuming(n2)
    c2.close()
    wait_until(lambda: len(n1.owned) + len(n2.owned) == 4, "the consumer-protocol members holding everything",
               WAIT_S)
    c3 = start("classic")  # a classic member joins the consumer group
    consuming(c3)
    n1.close()
    c4 = start("classic")
    consuming(c4)
    n2.close()
    wait_until(lambda: len(c3.owned) + len(c4.owned) == 4, "the classic members holding everything", WAIT_S)
    assert group_type(bootstrap, group) == "classic"  # downgraded when the last consumer member left
    sent = feed.close()
    wait_until(lambda: len({e.value for m in members for e in m.records()}) >= sent, f"all {sent} records consumed",
               WAIT_S)
    c3.close()
    c4.close()
    assert [(m.name, e) for m in members for e in m.errors] == []
    values = [e.value for m in members for e in m.records()]
    assert sorted(values, key=int) == [str(i) for i in range(sent)], "a record lost or consumed twice"


# librdkafka's reports while the broker is down (poll errors, not failed commits).
OUTAGE = ("_TRANSPORT", "_ALL_BROKERS_DOWN", "Connection refused", "Disconnected")


def test_a_mixed_group_is_loaded_after_a_broker_kill(tmp_path: Path) -> None:
    """A consumer group holding a classic-protocol member (a live classic group upgraded) is loaded
    from __consumer_offsets after kill -9 — members, classic metadata, epochs, offsets: a new classic
    member takes the old one's place from the committed offsets, both go on consuming, then the
    consumer-protocol member leaves and the group is downgraded to a classic group; every record
    consumed exactly once. The feed pauses, and every record is consumed and committed, before the
    kill, so that no commit's fate is unknown. Mutant (not committed): the loader not giving the
    consumer group its offsets -> the new member reads its partition again from the start."""
    broker = BrokerProcess(tmp_path / "data", overrides=BROKER_OVERRIDES).start()
    try:
        bootstrap, topic, group = broker.bootstrap, "cp-mixed", "cp-mixed-group"
        create(bootstrap, topic, 2)
        feed = Feed(bootstrap, topic).start()
        classic = Member(bootstrap, group, [topic], "classic", protocol="classic").start()
        wait_until(lambda: len(classic.records()) > 20, "the classic member consuming", WAIT_S)
        modern = Member(bootstrap, group, [topic], "modern").start()
        wait_until(lambda: len(modern.owned) == 1 and len(classic.owned) == 1, "a partition each", WAIT_S)
        members = [classic, modern]

        def all_consumed(sent: int) -> None:
            wait_until(lambda: len({e.value for m in members for e in m.records()}) >= sent,
                       f"all {sent} records consumed", WAIT_S)

        sent = feed.close()
        all_consumed(sent)
        assert group_type(bootstrap, group) == "consumer"
        broker.restart(kill=True)
        classic.close()  # its partition goes to a new classic member, from the loaded offsets
        wait_until(lambda: len(modern.owned) == 2, "the consumer member holding both", WAIT_S)
        classic = Member(bootstrap, group, [topic], "classic-2", protocol="classic").start()
        members.append(classic)
        wait_until(lambda: len(modern.owned) == 1 and len(classic.owned) == 1, "a partition each again", WAIT_S)
        feed = Feed(bootstrap, topic, first=sent).start()
        for m in (classic, modern):
            seen = len(m.records())
            wait_until(lambda m=m, seen=seen: len(m.records()) > seen + 5, f"{m.name} consuming", WAIT_S)
        modern.close()
        wait_until(lambda: len(classic.owned) == 2, "the classic member holding both", WAIT_S)
        assert group_type(bootstrap, group) == "classic"
        sent = feed.close()
        all_consumed(sent)
        classic.close()
        assert [(m.name, e) for m in members for e in m.errors if not any(o in e for o in OUTAGE)] == []
        values = [e.value for m in members for e in m.records()]
        assert sorted(values, key=int) == [str(i) for i in range(sent)], "a record lost or consumed twice"
    finally:
        broker.stop()

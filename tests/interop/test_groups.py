"""Consumer groups with real clients: confluent-kafka (librdkafka), kafka-python, aiokafka, kcat.

Each group member is a separate process (``MEMBER`` below) so that it can leave cleanly
(SIGTERM → close → LeaveGroup) or die (SIGKILL) like a crashed consumer. A member prints
one JSON line per assignment change and one per committed poll (the records it consumed
and then committed), which is all the tests look at.

Waiting loops are hang guards with generous deadlines; the assertions are about which
partitions and records each member got, never about how long anything took.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clients import CLIENTS, CONFLUENT, Record, produce

from support.deps import require_kcat
from support.harness import BrokerProcess, wait_until

PARTITIONS = 6
SESSION_TIMEOUT_MS = 6000  # group.min.session.timeout.ms: the shortest a broker allows
WAIT_S = 90.0
BROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": "500"}

MEMBER = r'''
import json, signal, sys, asyncio
client, bootstrap, group, topic, name, session_ms = sys.argv[1:7]
session_ms = int(session_ms)
running = True

def stop(*_):
    global running
    running = False

signal.signal(signal.SIGTERM, stop)

def say(**event):
    print(json.dumps(event), flush=True)

if client == "confluent":
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                  "session.timeout.ms": session_ms, "heartbeat.interval.ms": 500,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic], on_assign=lambda _, ps: say(assigned=sorted(p.partition for p in ps)),
                on_revoke=lambda _, ps: say(assigned=[]))
    while running:
        msgs = [m for m in c.consume(500, 0.3) if m.error() is None]
        if msgs:
            c.commit(asynchronous=False)
            say(consumed=[[m.partition(), m.offset()] for m in msgs])
    c.close()
elif client == "kafka-python":
    from kafka import KafkaConsumer, ConsumerRebalanceListener
    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            say(assigned=[])
        def on_partitions_assigned(self, assigned):
            say(assigned=sorted(p.partition for p in assigned))
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, client_id=name,
                      session_timeout_ms=session_ms, heartbeat_interval_ms=500,
                      auto_offset_reset="earliest", enable_auto_commit=False)
    c.subscribe([topic], listener=Listener())
    while running:
        batches = c.poll(timeout_ms=1000)
        msgs = [m for b in batches.values() for m in b]
        if msgs:
            c.commit()
            say(consumed=[[m.partition, m.offset] for m in msgs])
    c.close()
else:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            say(assigned=[])
        def on_partitions_assigned(self, assigned):
            say(assigned=sorted(p.partition for p in assigned))
    async def main():
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, client_id=name,
                             session_timeout_ms=session_ms, heartbeat_interval_ms=500,
                             auto_offset_reset="earliest", enable_auto_commit=False)
        await c.start()
        c.subscribe([topic], listener=Listener())
        while running:
            batches = await c.getmany(timeout_ms=1000)
            msgs = [m for b in batches.values() for m in b]
            if msgs:
                await c.commit()
                say(consumed=[[m.partition, m.offset] for m in msgs])
        await c.stop()
    asyncio.run(main())
'''


class Member:
    """One group member process and what it reported."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str, name: str) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            [sys.executable, "-c", MEMBER, client, bootstrap, group, topic, name, str(SESSION_TIMEOUT_MS)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.assigned: list[int] = []
        self.consumed: list[tuple[int, int]] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_errors, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            event = json.loads(line)
            with self._lock:
                if "assigned" in event:
                    self.assigned = event["assigned"]
                else:
                    self.consumed.extend((p, o) for p, o in event["consumed"])

    def _read_errors(self) -> None:
        assert self.proc.stderr is not None
        self.errors.extend(self.proc.stderr)

    def leave(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(60)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(60)


def covers_all_disjointly(members: list[Member]) -> bool:
    parts = [p for m in members for p in m.assigned]
    return sorted(parts) == list(range(PARTITIONS))


def state(members: list[Member]) -> dict[str, Any]:
    return {m.name: {"assigned": m.assigned, "alive": m.proc.poll() is None,
                     "stderr": "".join(m.errors)[-500:]} for m in members}


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("groups") / "data", overrides=BROKER_OVERRIDES).start()
    yield b
    if b.alive():
        b.stop()


@pytest.fixture
def members() -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for m in started:
        m.stop()


def create_topic(bootstrap: str, name: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive its futures
    for future in admin.create_topics([NewTopic(name, PARTITIONS, 1)]).values():
        future.result(30)


def produce_evenly(bootstrap: str, topic: str, per_partition: int, start: int = 0) -> None:
    produce(CONFLUENT, bootstrap, topic, [
        Record(b"k%d" % i, b"v%d" % i, partition=p)
        for i in range(start, start + per_partition) for p in range(PARTITIONS)
    ])


@pytest.mark.parametrize("client", CLIENTS)
def test_members_share_partitions_and_take_over(group_broker: BrokerProcess, members: list[Member],
                                                client: str) -> None:
    bootstrap = group_broker.bootstrap
    topic = group = f"share-{client}"
    create_topic(bootstrap, topic)
    produce_evenly(bootstrap, topic, 20)
    a, b, c = (Member(client, bootstrap, group, topic, f"{client}-{n}") for n in "abc")
    members.extend([a, b, c])

    wait_until(lambda: all(m.assigned for m in (a, b, c)) and covers_all_disjointly([a, b, c]),
               "three members with disjoint assignments covering every partition", WAIT_S,
               describe=lambda: state(members))

    a.leave()  # close() sends LeaveGroup: the others take its partitions at once
    wait_until(lambda: covers_all_disjointly([b, c]) and bool(b.assigned) and bool(c.assigned),
               "b and c to cover every partition after a left", WAIT_S, describe=lambda: state(members))

    b.kill()  # no LeaveGroup: its partitions move when its session times out
    wait_until(lambda: covers_all_disjointly([c]), "c alone to own every partition after b's session expired", WAIT_S,
               describe=lambda: state(members))

    # Nothing was skipped: every record was consumed (and committed) by some member.
    produce_evenly(bootstrap, topic, 5, start=20)
    expected = {(p, o) for p in range(PARTITIONS) for o in range(25)}
    wait_until(lambda: expected <= set(a.consumed + b.consumed + c.consumed), "every record consumed", WAIT_S,
               describe=lambda: sorted(expected - set(a.consumed + b.consumed + c.consumed))[:10])


@pytest.mark.parametrize("client", CLIENTS)
def test_committed_offsets_survive_a_broker_kill(tmp_path: Path, members: list[Member], client: str) -> None:
    broker = BrokerProcess(tmp_path / "data", overrides=BROKER_OVERRIDES).start()
    try:
        bootstrap = broker.bootstrap
        topic = group = f"resume-{client}"
        create_topic(bootstrap, topic)
        produce_evenly(bootstrap, topic, 10)
        first = Member(client, bootstrap, group, topic, "first")
        members.append(first)
        wait_until(lambda: len(set(first.consumed)) == 10 * PARTITIONS,
                   "the first member to consume and commit all 60 records", WAIT_S, describe=lambda: state(members))
        first.kill()
        broker.restart(kill=True)  # kill -9: committed offsets must come back from the log
        produce_evenly(bootstrap, topic, 10, start=10)
        second = Member(client, bootstrap, group, topic, "second")
        members.append(second)
        expected = {(p, o) for p in range(PARTITIONS) for o in range(10, 20)}
        wait_until(lambda: expected <= set(second.consumed), "the second member to consume the new records", WAIT_S,
                   describe=lambda: (state(members), sorted(expected - set(second.consumed))[:10]))
        # It resumed exactly where the first one committed: nothing re-read, nothing skipped.
        assert min(o for _, o in second.consumed) == 10
        assert set(second.consumed) == expected
    finally:
        broker.stop()


def test_kcat_consumes_as_a_group(group_broker: BrokerProcess) -> None:
    kcat = require_kcat()
    bootstrap = group_broker.bootstrap
    topic = group = "kcat-group"
    create_topic(bootstrap, topic)
    produce_evenly(bootstrap, topic, 10)
    out = subprocess.run(
        [kcat, "-b", bootstrap, "-G", group, "-o", "beginning", "-c", str(10 * PARTITIONS),
         "-f", "%p %o\n", "-X", "auto.commit.interval.ms=100", topic],
        capture_output=True, text=True, timeout=120, env={**os.environ},
    )
    assert out.returncode == 0, out.stderr
    got = {tuple(map(int, line.split())) for line in out.stdout.splitlines() if line.strip()}
    assert got == {(p, o) for p in range(PARTITIONS) for o in range(10)}
    # kcat's group left offsets behind: a second run of the group sees nothing old.
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    committed = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    c.close()
    assert all(tp.offset == 10 for tp in committed), committed


def _cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "eoslog", "groups", *args, "--bootstrap-server", bootstrap],
                          capture_output=True, text=True, timeout=120)


def test_groups_cli(group_broker: BrokerProcess, members: list[Member]) -> None:
    bootstrap = group_broker.bootstrap
    topic = group = "cli-group"
    create_topic(bootstrap, topic)
    produce_evenly(bootstrap, topic, 10)
    member = Member(CONFLUENT, bootstrap, group, topic, "cli-member")
    members.append(member)
    wait_until(lambda: len(set(member.consumed)) == 10 * PARTITIONS, "the member to consume everything", WAIT_S,
               describe=lambda: state(members))
    member.leave()
    produce_evenly(bootstrap, topic, 3, start=10)  # lag: 3 records the group has not read

    listed = _cli(bootstrap, "list")
    assert listed.returncode == 0, listed.stderr
    # GROUP TYPE STATE PROTOCOL-TYPE (the TYPE column since 3a22059): a classic group, now empty.
    assert any(line.split()[:3] == [group, "classic", "Empty"] for line in listed.stdout.splitlines()), listed.stdout

    described = _cli(bootstrap, "describe", group)
    assert described.returncode == 0, described.stderr
    rows = [line.split() for line in described.stdout.splitlines() if line.startswith(topic)]
    # TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...: committed 10, end 13, lag 3.
    assert sorted((int(r[1]), r[2], r[3], r[4]) for r in rows) == [
        (p, "10", "13", "3") for p in range(PARTITIONS)]

    dry = _cli(bootstrap, "reset-offsets", group, "--topic", f"{topic}:0,1", "--shift-by", "-4")
    assert dry.returncode == 0 and "dry run" in dry.stdout
    done = _cli(bootstrap, "reset-offsets", group, "--all-topics", "--to-earliest", "--execute")
    assert done.returncode == 0, done.stderr
    after = _cli(bootstrap, "describe", group)
    rows = [line.split() for line in after.stdout.splitlines() if line.startswith(topic)]
    assert sorted((int(r[1]), r[2], r[4]) for r in rows) == [(p, "0", "13") for p in range(PARTITIONS)]

    deleted = _cli(bootstrap, "delete", group, "no-such-group")
    assert deleted.returncode == 1
    assert f"Deleted consumer group '{group}'" in deleted.stdout and "does not exist" in deleted.stderr
    gone = _cli(bootstrap, "describe", group)
    assert gone.returncode == 1 and "does not exist" in gone.stderr


def test_kafka_python_and_aiokafka_see_each_others_commits(group_broker: BrokerProcess) -> None:
    """OffsetCommit/OffsetFetch agree across client libraries (no group membership)."""
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import OffsetAndMetadata as AioOffset
    from aiokafka.structs import TopicPartition as AioTP
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTP
    from kafka.structs import OffsetAndMetadata as KpOffset

    bootstrap = group_broker.bootstrap
    topic = group = "cross-commit"
    create_topic(bootstrap, topic)
    kp = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    kp.commit({KpTP(topic, 0): KpOffset(7, "from kafka-python", -1)})

    async def aio() -> tuple[int | None, int | None]:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        await c.start()
        try:
            seen = await c.committed(AioTP(topic, 0))
            c.assign([AioTP(topic, 1)])
            await c.commit({AioTP(topic, 1): AioOffset(9, "")})
            return seen, await c.committed(AioTP(topic, 1))
        finally:
            await c.stop()

    seen, own = asyncio.run(aio())
    assert (seen, own) == (7, 9)
    assert kp.committed(KpTP(topic, 1)) == 9
    kp.close()

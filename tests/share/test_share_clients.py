"""Issue 26, acceptance test 4 with confluent-kafka's ShareConsumer (librdkafka's KIP-932 client)
and eoslog.client's ShareConsumer, each test once per client: share groups on one partition,
against one eoslog broker for the module.

- three members split one partition's records, and no record is handed to two of them;
- RELEASE hands a record out again (delivery count 2), REJECT never;
- a poison record released again and again is archived at share.delivery.count.limit;
- a member killed -9 holding records: its connection closes, its records go to the others; a
  member stopped (SIGSTOP, connection open) holding records: they go to the others once its
  acquisition lock runs out; a member stopped with a lock longer than its session: its group
  coordinator removes it at the session timeout and its records go at once;
- share.isolation.level=read_committed: no record of an aborted transaction is ever handed out.

Members are processes of their own (share_member.py) so that they can be killed and stopped.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from share_support import (
    BROKER_OVERRIDES,
    Member,
    create_topic,
    group_configs,
    high_watermark,
    produce,
    share_offsets,
    start_member,
    until,
    wait_for_offsets,
)

from eoslog.client import AcknowledgeType as EoslogAcknowledgeType
from eoslog.client import ShareConsumer as EoslogShareConsumer
from support.harness import BrokerProcess


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("share") / "data", overrides=BROKER_OVERRIDES).start()
    yield b
    if b.alive():
        b.stop()


@pytest.fixture(params=["confluent", "eoslog"])
def client(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def members(tmp_path: Path) -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for m in started:
        m.close()


def names() -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"q-{tag}", f"g-{tag}"


def test_three_members_split_one_partition_and_no_record_goes_to_two(
        broker: BrokerProcess, members: list[Member], tmp_path: Path, client: str) -> None:
    topic, group = names()
    create_topic(broker.bootstrap, topic)
    group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest", share_partition_max_record_locks=30)
    for name in ("a", "b", "c"):
        members.append(start_member(broker.bootstrap, group, topic, name, tmp_path, client=client, max_records=10,
                                    sleep_ms=3))
    total = 600
    produce(broker.bootstrap, topic, (f"v{i}" for i in range(total)))
    wait_for_offsets(members, set(range(total)), "every record handed out")
    until(lambda: share_offsets(broker.bootstrap, group, topic).start_offset == total, "every record accepted")
    deliveries = Counter(o for m in members for o in m.offsets())
    assert [o for o, n in deliveries.items() if n > 1] == []  # never to two members, never twice
    assert {r["count"] for m in members for r in m.got()} == {1}
    assert all(m.offsets() for m in members), [len(m.offsets()) for m in members]


class InProcess:
    """One explicit-mode share consumer of either client, in this process."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str) -> None:
        self.client = client
        settings = {"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"}
        if client == "confluent":
            self.consumer: Any = ShareConsumer(settings)
            self.kinds: Any = AcknowledgeType
        else:
            self.consumer = EoslogShareConsumer(settings)
            self.kinds = EoslogAcknowledgeType
        self.consumer.subscribe([topic])

    def poll_acking(self, into: list[tuple[int, int]], kind: Callable[[int], str]) -> int:
        """Poll once, acknowledge each record as ``kind(offset)`` names, commit; ``into`` gets
        (offset, delivery count) of each; returns how many it holds."""
        got = self.consumer.poll(1.0)
        if self.client == "confluent":
            records = [(m.offset(), m.delivery_count(), m) for m in got if m.error() is None]
        else:
            records = [(r.offset, r.delivery_count, r) for r in got]
        for offset, count, handle in records:
            into.append((offset, count))
            self.consumer.acknowledge(handle, getattr(self.kinds, kind(offset)))
        if records:
            self.consumer.commit_sync()
        return len(into)

    def close(self) -> None:
        self.consumer.close()


def test_release_hands_a_record_out_again_and_reject_never(broker: BrokerProcess, client: str) -> None:
    topic, group = names()
    create_topic(broker.bootstrap, topic)
    group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    produce(broker.bootstrap, topic, (f"v{i}" for i in range(10)))
    consumer = InProcess(client, broker.bootstrap, group, topic)
    try:
        first: list[tuple[int, int]] = []
        until(lambda: consumer.poll_acking(first, lambda o: "RELEASE" if o < 5 else "REJECT") >= 10,
              "the first deliveries")
        assert sorted(first) == [(o, 1) for o in range(10)]
        again: list[tuple[int, int]] = []
        until(lambda: consumer.poll_acking(again, lambda o: "ACCEPT") >= 5, "the released records")
        assert sorted(again) == [(o, 2) for o in range(5)]
        until(lambda: share_offsets(broker.bootstrap, group, topic).start_offset == 10,
              "the share-partition to be done with every record")
        late: list[tuple[int, int]] = []
        consumer.poll_acking(late, lambda o: "ACCEPT")
        assert late == []  # the rejected records never come back
    finally:
        consumer.close()


def test_a_poison_record_is_archived_at_the_delivery_count_limit(
        broker: BrokerProcess, members: list[Member], tmp_path: Path, client: str) -> None:
    topic, group = names()
    create_topic(broker.bootstrap, topic)
    group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest", share_delivery_count_limit=3)
    produce(broker.bootstrap, topic, ["poison"])
    m = start_member(broker.bootstrap, group, topic, "p", tmp_path, client=client, ack="release")
    members.append(m)
    until(lambda: share_offsets(broker.bootstrap, group, topic).start_offset == 1, "the poison record archived")
    assert [(r["offset"], r["count"]) for r in m.got()] == [(0, 1), (0, 2), (0, 3)]


def test_a_killed_member_s_records_go_to_the_others(
        broker: BrokerProcess, members: list[Member], tmp_path: Path, client: str) -> None:
    topic, group = names()
    create_topic(broker.bootstrap, topic)
    group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest", share_record_lock_duration_ms=60000)
    holder = start_member(broker.bootstrap, group, topic, "holder", tmp_path, client=client, ack="none")
    members.append(holder)
    produce(broker.bootstrap, topic, (f"v{i}" for i in range(20)))
    until(lambda: len(holder.offsets()) == 20, "the holder to acquire every record")
    other = start_member(broker.bootstrap, group, topic, "other", tmp_path, client=client)
    members.append(other)
    holder.kill()  # its connection closes: its share session ends, its records are released
    wait_for_offsets([other], set(range(20)), "the killed member's records at the other member", timeout=30)
    assert {r["count"] for r in other.got()} == {2}
    until(lambda: share_offsets(broker.bootstrap, group, topic).start_offset == 20, "every record accepted")


def test_a_stopped_member_s_records_go_to_the_others_when_its_lock_runs_out(
        broker: BrokerProcess, members: list[Member], tmp_path: Path, client: str) -> None:
    topic, group = names()
    create_topic(broker.bootstrap, topic)
    group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest", share_record_lock_duration_ms=2000)
    holder = start_member(broker.bootstrap, group, topic, "holder", tmp_path, client=client, ack="none")
    members.append(holder)
    produce(broker.bootstrap, topic, (f"v{i}" for i in range(20)))
    until(lambda: len(holder.offsets()) == 20, "the holder to acquire every record")
    holder.stop()  # connected, heartbeat-less for less than its session: only the lock can release
    other = start_member(broker.bootstrap, group, topic, "other", tmp_path, client=client)
    members.append(other)
    wait_for_offsets([other], set(range(20)), "the stopped member's records at the other member")
    assert holder.proc.poll() is None  # still there, still connected
    assert {r["count"] for r in other.got()} == {2}
    until(lambda: share_offsets(broker.bootstrap, group, topic).start_offset == 20, "every record accepted")
    holder.resume()


def test_a_member_gone_silent_is_removed_at_its_session_timeout_and_its_records_released(
        broker: BrokerProcess, members: list[Member], tmp_path: Path, client: str) -> None:
    topic, group = names()
    create_topic(broker.bootstrap, topic)
    group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest", share_record_lock_duration_ms=60000,
                  share_session_timeout_ms=3000)
    holder = start_member(broker.bootstrap, group, topic, "holder", tmp_path, client=client, ack="none")
    members.append(holder)
    produce(broker.bootstrap, topic, (f"v{i}" for i in range(10)))
    until(lambda: len(holder.offsets()) == 10, "the holder to acquire every record")
    holder.stop()
    other = start_member(broker.bootstrap, group, topic, "other", tmp_path, client=client)
    members.append(other)
    # Well before the 60 s lock: the group coordinator removes the silent member after 3 s.
    wait_for_offsets([other], set(range(10)), "the silent member's records at the other member", timeout=40)
    assert holder.proc.poll() is None
    holder.resume()


def test_read_committed_members_never_get_an_aborted_record(
        broker: BrokerProcess, members: list[Member], tmp_path: Path, client: str) -> None:
    topic, group = names()
    create_topic(broker.bootstrap, topic)
    group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest", share_isolation_level="read_committed")
    for name in ("a", "b"):
        members.append(start_member(broker.bootstrap, group, topic, name, tmp_path, client=client, max_records=7))
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{topic}"})
    producer.init_transactions(30)
    committed: set[str] = set()
    for txn in range(20):
        producer.begin_transaction()
        values = [f"t{txn}-{i}" for i in range(5)]
        for v in values:
            producer.produce(topic, value=v.encode(), partition=0)
        if txn % 3 == 1:
            assert producer.flush(30) == 0  # the records reach the log before the ABORT marker
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            committed.update(values)
    produce(broker.bootstrap, topic, ["plain"])
    committed.add("plain")
    until(lambda: committed <= {r["value"] for m in members for r in m.got()}, "every committed record")
    log_end = 20 * 6 + 1  # five records and a marker per transaction, then one
    assert high_watermark(broker.bootstrap, topic) == log_end  # the aborted records are in the log
    until(lambda: share_offsets(broker.bootstrap, group, topic).start_offset == log_end, "nothing left in flight",
          describe=lambda: share_offsets(broker.bootstrap, group, topic))
    seen = [r["value"] for m in members for r in m.got()]
    assert sorted(seen) == sorted(committed)  # each once, and nothing aborted

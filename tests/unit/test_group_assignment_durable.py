"""SyncGroup hands a generation's assignment out only once its group record is durable.

Kafka's storeGroup answers the members from the append's callback, after the record is in
every in-sync replica. eoslog's SyncGroup answer waits for the coordinator's writes to the
group's ``__consumer_offsets`` partition (``handlers.offsets.replicated``): acks=all in a
cluster, the group-commit fsync on one node. Here group commit's fsync is held closed by a
gate, so "not answered before the round" is looked at exactly, not timed; then a failed wait
(this broker no longer leads the partition) answers NOT_COORDINATOR instead of the assignment.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_connection_pipelining import Connection, until

from eoslog.broker.server import Broker
from eoslog.config import BrokerConfig
from eoslog.coordinator.internal_topic import InternalTopic
from eoslog.errors import Errors
from eoslog.protocol.messages import build, request_types
from support.fsync_gate import FsyncGate

JOIN_GROUP, SYNC_GROUP = 11, 14
GROUP = "g-durable"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    """One node, its default group-commit policy; a group's first join is not delayed."""
    b = Broker(BrokerConfig.load(overrides={"log.dirs": str(tmp_path / "data"),
                                            "group.initial.rebalance.delay.ms": 0}))
    b.logs.startup()
    b.state.serving.set()
    assert b.replicas.group_commit is not None
    yield b
    b.logs.shutdown()


def join_request() -> Any:
    m = request_types(JOIN_GROUP, 3)  # v3: no MEMBER_ID_REQUIRED round trip
    return build(m.JoinGroupRequest, group_id=GROUP, session_timeout=datetime.timedelta(seconds=30),
                 rebalance_timeout=datetime.timedelta(seconds=30), member_id="", group_instance_id=None,
                 protocol_type="consumer",
                 protocols=(build(m.JoinGroupRequestProtocol, name="range", metadata=b"sub"),), reason=None)


def sync_request(member_id: str, generation_id: int) -> Any:
    m = request_types(SYNC_GROUP, 3)
    return build(m.SyncGroupRequest, group_id=GROUP, generation_id=generation_id, member_id=member_id,
                 group_instance_id=None, protocol_type=None, protocol_name=None,
                 assignments=(build(m.SyncGroupRequestAssignment, member_id=member_id, assignment=b"mine"),))


async def joined(conn: Connection) -> Any:
    """``__consumer_offsets`` created (as FindCoordinator does), then one member's JoinGroup."""
    conn.broker.groups.ensure_offsets_topic()
    conn.send((1, JOIN_GROUP, 3, join_request()))
    assert await until(lambda: len(conn.transport.frames()) == 1), "JoinGroup not answered"
    (_, body), = conn.answered()
    assert body.error_code == 0
    return body


def test_the_assignment_waits_for_its_group_record_to_be_fsynced(broker: Broker, gate: FsyncGate) -> None:
    async def run() -> None:
        conn = Connection(broker)
        join = await joined(conn)
        topic = broker.state.group_coordinator.topic
        partition = broker.state.group_coordinator.partition_for(GROUP)
        end_before = topic.partition_log(partition).log_end_offset
        conn.send((2, SYNC_GROUP, 3, sync_request(join.member_id, join.generation_id)))
        written = await until(lambda: topic.partition_log(partition).log_end_offset > end_before)
        assert written, "no group record written"
        await asyncio.sleep(0.05)  # (an answer not waiting for the round would be written by now)
        assert len(conn.transport.frames()) == 1, "the assignment was handed out before its record was fsynced"
        gate.open()
        assert await until(lambda: len(conn.transport.frames()) == 2)
        _, sync = conn.answered()[1]
        assert (sync.error_code, sync.assignment) == (0, b"mine")
        conn.protocol.connection_lost(None)

    asyncio.run(run())


def test_an_assignment_whose_record_is_not_replicated_is_not_handed_out(
    broker: Broker, gate: FsyncGate, monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def not_leader(self: InternalTopic, partition: int, timeout_ms: int) -> Errors:
        return Errors.NOT_LEADER_OR_FOLLOWER  # the partition moved to another broker meanwhile

    gate.open()

    async def run() -> None:
        conn = Connection(broker)
        join = await joined(conn)
        monkeypatch.setattr(InternalTopic, "wait_replicated", not_leader)
        conn.send((2, SYNC_GROUP, 3, sync_request(join.member_id, join.generation_id)))
        assert await until(lambda: len(conn.transport.frames()) == 2)
        _, sync = conn.answered()[1]
        assert sync.error_code == Errors.NOT_COORDINATOR.value and sync.assignment == b""
        conn.protocol.connection_lost(None)

    asyncio.run(run())

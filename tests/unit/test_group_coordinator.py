"""The group coordinator driven directly, on a controllable clock, over a real log.

Every timeout (initial rebalance delay, session, rebalance, pending sync, retention) is
reached by advancing a ManualScheduler, never by sleeping. ``reload`` builds a second
coordinator over the same ``__consumer_offsets`` to check what was persisted.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

from eoslog.config import BrokerConfig
from eoslog.coordinator.group import (
    GroupConfig,
    GroupCoordinator,
    GroupState,
    JoinRequest,
    JoinResult,
    OffsetAndMetadata,
    OffsetsTopic,
    OffsetsTopicConfig,
    SyncRequest,
    SyncResult,
    TopicPartition,
)
from eoslog.coordinator.timers import ManualScheduler
from eoslog.errors import Errors
from eoslog.records import CompressionType, ControlRecordType, build_control_batch
from eoslog.replica import ReplicaManager
from eoslog.storage import AppendOrigin, LogManager
from support.leader_log import append

SESSION_MS = 10_000
REBALANCE_MS = 30_000
DELAY_MS = 3_000
RETENTION_MIN = 1


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", 0)


class Harness:
    def __init__(self, tmp_path: Path, **overrides: str) -> None:
        self.tmp_path = tmp_path
        self.sched = ManualScheduler(1_000_000)
        self.config = BrokerConfig.load(overrides={
            "log.dirs": str(tmp_path), "group.initial.rebalance.delay.ms": str(DELAY_MS),
            "offsets.retention.minutes": str(RETENTION_MIN), **overrides,
        })
        self.logs = LogManager(tmp_path, self.config.topic_defaults(), self.sched.now_ms)
        self.logs.startup()
        self.logs.create_topic("t", 4)
        self.replicas = ReplicaManager(0, self.logs, self.sched.now_ms)
        self.coord = self._coordinator()
        self.coord.ensure_offsets_topic()

    def _coordinator(self) -> GroupCoordinator:
        topic = OffsetsTopic(self.replicas, OffsetsTopicConfig(4, 1 << 20, CompressionType.NONE), self.sched.now_ms)
        return GroupCoordinator(GroupConfig.from_broker_config(self.config), topic, self.sched)

    def reload(self) -> GroupCoordinator:
        """A fresh coordinator that knows only what is in __consumer_offsets."""
        self.coord.shutdown()
        self.coord = self._coordinator()
        for p in self.coord.begin_loading():
            self.coord.load_partition_now(p)
        return self.coord

    def join(self, group: str, member_id: str = "", *, client: str = "c", instance: str | None = None,
             protocols: tuple[tuple[str, bytes], ...] = (("range", subscription("t")),),
             protocol_type: str = "consumer", session_ms: int = SESSION_MS,
             v4: bool = True, skip_assignment: bool = False) -> list[JoinResult]:
        out: list[JoinResult] = []
        self.coord.join_group(
            JoinRequest(group, member_id, instance, client, "/127.0.0.1", session_ms, REBALANCE_MS,
                        protocol_type, protocols, v4, skip_assignment),
            out.append,
        )
        return out

    def join_new(self, group: str, **kw: Any) -> tuple[str, list[JoinResult]]:
        """The two-round join of a JoinGroup v4+ dynamic member: returns (member id, pending)."""
        first = self.join(group, **kw)
        assert first and first[0].error == Errors.MEMBER_ID_REQUIRED
        member_id = first[0].member_id
        return member_id, self.join(group, member_id, **kw)

    def sync(self, group: str, member_id: str, generation: int,
             assignments: dict[str, bytes] | None = None, instance: str | None = None) -> list[SyncResult]:
        out: list[SyncResult] = []
        self.coord.sync_group(
            SyncRequest(group, member_id, instance, generation, "consumer", "range", assignments or {}),
            out.append,
        )
        return out

    def until_joined(self, *pending: list[JoinResult]) -> None:
        """Advance through the initial delay, which every newly joined member extends."""
        for _ in range(10):
            if all(pending):
                return
            self.sched.advance(DELAY_MS)
        raise AssertionError("the join phase did not complete")

    def stable_group(self, group: str, n: int) -> tuple[list[str], int]:
        """n dynamic members joined and synced; returns (member ids, generation)."""
        joins = [self.join_new(group, client=f"c{i}") for i in range(n)]
        self.until_joined(*(j[1] for j in joins))
        results = [j[1][0] for j in joins]
        assert all(r.error == Errors.NONE for r in results)
        generation = results[0].generation_id
        leader = results[0].leader_id
        ids = [r.member_id for r in results]
        syncs = {mid: self.sync(group, mid, generation, {m: m.encode() for m in ids} if mid == leader else None)
                 for mid in ids}
        assert all(s and s[0].error == Errors.NONE for s in syncs.values())
        return ids, generation

    def keep_alive(self, group: str, generation: int, members: list[str], ms: int) -> None:
        """Advance ``ms`` with the members heartbeating well within their sessions."""
        step = SESSION_MS // 2
        for _ in range(ms // step):
            self.sched.advance(step)
            for m in members:
                assert self.coord.heartbeat(group, m, None, generation) == Errors.NONE

    def state(self, group: str) -> GroupState:
        return self.coord.groups[group].state

    def commit(self, group: str, offsets: dict[TopicPartition, int], member_id: str = "",
               generation: int = -1, metadata: str = "") -> dict[TopicPartition, str]:
        now = self.sched.now_ms()
        return self.coord.commit_offsets(
            group, member_id, None, generation,
            {tp: OffsetAndMetadata(o, -1, metadata, now) for tp, o in offsets.items()},
        )

    def fetched(self, group: str, require_stable: bool = False) -> dict[TopicPartition, Any]:
        error, fetched = self.coord.fetch_offsets(group, None, require_stable)
        assert error == Errors.NONE
        return {f.tp: (f.offset.offset if f.offset else f.error) for f in fetched}


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


# -- joining ---------------------------------------------------------------------------------


def test_member_id_required_then_initial_delay(h: Harness) -> None:
    member_id, pending = h.join_new("g")
    assert member_id.startswith("c-")
    assert pending == []  # held for group.initial.rebalance.delay.ms
    h.sched.advance(DELAY_MS - 1)
    assert pending == []
    h.sched.advance(1)
    [result] = pending
    assert (result.error, result.generation_id, result.leader_id, result.protocol_name) == (
        Errors.NONE, 1, member_id, "range")
    assert [m.member_id for m in result.members] == [member_id]
    assert h.state("g") is GroupState.COMPLETING_REBALANCE


def test_pending_member_expires_without_second_join(h: Harness) -> None:
    first = h.join("g")
    pending_id = first[0].member_id
    h.sched.advance(SESSION_MS)
    late = h.join("g", pending_id)
    assert late[0].error == Errors.UNKNOWN_MEMBER_ID


def test_two_members_sync_and_persist(h: Harness) -> None:
    (a, ja), (b, jb) = h.join_new("g", client="a"), h.join_new("g", client="b")
    h.until_joined(ja, jb)
    leader = ja[0].leader_id
    assert ja[0].leader_id == jb[0].leader_id == a
    assert len(ja[0].members) == 2 and jb[0].members == ()
    follower_sync = h.sync("g", b, 1)
    assert follower_sync == []  # waits for the leader's assignment
    leader_sync = h.sync("g", leader, 1, {a: b"for-a", b: b"for-b"})
    assert leader_sync[0].assignment == b"for-a" and follower_sync[0].assignment == b"for-b"
    assert h.state("g") is GroupState.STABLE
    coord = h.reload()
    group = coord.groups["g"]
    assert group.state is GroupState.STABLE and group.generation_id == 1
    assert {m: group.get(m).assignment for m in group.members} == {a: b"for-a", b: b"for-b"}
    # The members carry on after the coordinator reloaded, without a rebalance.
    assert coord.heartbeat("g", a, None, 1) == Errors.NONE


def test_rejoin_during_delay_extends_it_and_later_members_all_join(h: Harness) -> None:
    a, ja = h.join_new("g", client="a")
    h.sched.advance(DELAY_MS - 100)
    b, jb = h.join_new("g", client="b")  # a new member: the delay starts again
    h.sched.advance(100)
    assert ja == [] and jb == []
    h.sched.advance(DELAY_MS)
    assert ja[0].generation_id == jb[0].generation_id == 1
    assert {m.member_id for m in ja[0].members} == {a, b}


def test_session_timeout_removes_silent_member(h: Harness) -> None:
    (a, b), gen = h.stable_group("g", 2)
    h.sched.advance(SESSION_MS // 2)
    assert h.coord.heartbeat("g", b, None, gen) == Errors.NONE
    h.sched.advance(SESSION_MS // 2)
    # a never heartbeat: it was removed and the group rebalances.
    assert a not in h.coord.groups["g"].members
    assert h.coord.heartbeat("g", b, None, gen) == Errors.REBALANCE_IN_PROGRESS
    rejoin = h.join("g", b)
    assert rejoin[0].error == Errors.NONE and rejoin[0].generation_id == gen + 1
    assert [m.member_id for m in rejoin[0].members] == [b]
    assert h.coord.heartbeat("g", a, None, gen) == Errors.UNKNOWN_MEMBER_ID


def test_rebalance_timeout_drops_members_that_do_not_rejoin(h: Harness) -> None:
    (a, b), gen = h.stable_group("g", 2)
    leader_rejoin = h.join("g", a)  # the leader rejoining starts a rebalance
    assert leader_rejoin == []
    assert h.state("g") is GroupState.PREPARING_REBALANCE
    for _ in range(REBALANCE_MS // 5000):
        h.sched.advance(5000)
        h.coord.heartbeat("g", b, None, gen)  # alive, but never rejoins
    assert leader_rejoin and leader_rejoin[0].generation_id == gen + 1
    assert [m.member_id for m in leader_rejoin[0].members] == [a]
    assert h.coord.heartbeat("g", b, None, gen) == Errors.UNKNOWN_MEMBER_ID


def test_follower_that_never_syncs_is_removed(h: Harness) -> None:
    (a, ja), (b, jb) = h.join_new("g", client="a"), h.join_new("g", client="b")
    h.until_joined(ja, jb)
    h.sync("g", a, 1, {a: b"1", b: b"2"})
    assert h.state("g") is GroupState.STABLE
    for _ in range(REBALANCE_MS // 5000):  # b got its join response but never sent SyncGroup
        h.sched.advance(5000)
        h.coord.heartbeat("g", a, None, 1)
    assert b not in h.coord.groups["g"].members
    assert h.state("g") is GroupState.PREPARING_REBALANCE


def test_leave_group_triggers_rebalance(h: Harness) -> None:
    (_a, b), _gen = h.stable_group("g", 2)
    error, per_member = h.coord.leave_group("g", [(b, None, "closing")])
    assert (error, per_member) == (Errors.NONE, [Errors.NONE])
    assert h.state("g") is GroupState.PREPARING_REBALANCE
    assert h.coord.leave_group("g", [(b, None, None)]) == (Errors.NONE, [Errors.UNKNOWN_MEMBER_ID])
    assert h.coord.leave_group("nope", [("x", None, None)]) == (Errors.NONE, [Errors.UNKNOWN_MEMBER_ID])


def test_protocol_selection_by_votes(h: Harness) -> None:
    r, rr, sticky = ("range", b""), ("roundrobin", b""), ("sticky", b"")
    joins = [h.join_new("g", client="a", protocols=(rr, r, sticky))[1],
             h.join_new("g", client="b", protocols=(rr, r))[1],
             h.join_new("g", client="c", protocols=(r, rr))[1]]
    h.until_joined(*joins)
    assert {j[0].protocol_name for j in joins} == {"roundrobin"}  # 2 votes to 1; sticky not common


def test_inconsistent_protocol_and_bad_session_timeout(h: Harness) -> None:
    h.join_new("g")
    other = h.join("g", protocols=(("other", b""),))
    assert other[0].error == Errors.INCONSISTENT_GROUP_PROTOCOL
    wrong_type = h.join("g", protocol_type="connect")
    assert wrong_type[0].error == Errors.INCONSISTENT_GROUP_PROTOCOL
    too_short = h.join("g2", session_ms=1000)
    assert too_short[0].error == Errors.INVALID_SESSION_TIMEOUT
    assert "g2" not in h.coord.groups  # a refused join creates no group
    assert h.join("", client="x")[0].error == Errors.INVALID_GROUP_ID


def test_static_member_restart_keeps_generation_and_fences_old_id(h: Harness) -> None:
    a = h.join("g", client="a", instance="inst-a")  # static members skip MEMBER_ID_REQUIRED
    h.sched.advance(DELAY_MS)
    old_id = a[0].member_id
    assert old_id.startswith("inst-a-") and a[0].generation_id == 1
    h.sync("g", old_id, 1, {old_id: b"asg"}, instance="inst-a")
    restarted = h.join("g", client="a", instance="inst-a", skip_assignment=True)
    new_id = restarted[0].member_id
    assert new_id != old_id and restarted[0].generation_id == 1  # no rebalance
    assert restarted[0].skip_assignment and restarted[0].leader_id == new_id
    assert h.state("g") is GroupState.STABLE
    assert h.coord.heartbeat("g", old_id, "inst-a", 1) == Errors.FENCED_INSTANCE_ID
    assert h.coord.heartbeat("g", new_id, "inst-a", 1) == Errors.NONE
    assert h.sync("g", new_id, 1, instance="inst-a")[0].assignment == b"asg"
    # The new member id is what a reloaded coordinator knows.
    assert new_id in h.reload().groups["g"].members


def test_loading_partition_answers_load_in_progress(h: Harness) -> None:
    (a, _), gen = h.stable_group("g", 2)
    h.coord.shutdown()
    h.coord = h._coordinator()
    h.coord.begin_loading()
    assert h.join("g")[0].error == Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert h.sync("g", a, gen)[0].error == Errors.REBALANCE_IN_PROGRESS
    assert h.coord.heartbeat("g", a, None, gen) == Errors.NONE
    assert h.coord.fetch_offsets("g", [TP0], False)[0] == Errors.COORDINATOR_LOAD_IN_PROGRESS
    partition = h.coord.partition_for("g")
    h.coord.load_partition_now(partition)
    assert h.coord.heartbeat("g", a, None, gen) == Errors.NONE
    assert h.state("g") is GroupState.STABLE


def test_shutdown_answers_waiting_joins(h: Harness) -> None:
    _, pending = h.join_new("g")
    h.coord.shutdown()
    assert pending[0].error == Errors.NOT_COORDINATOR


# -- offsets --------------------------------------------------------------------------------


def test_commit_fetch_and_reload(h: Harness) -> None:
    (a, b), gen = h.stable_group("g", 2)
    assert h.commit("g", {TP0: 5, TP1: 7}, a, gen, metadata="m") == {TP0: Errors.NONE, TP1: Errors.NONE}
    assert h.commit("g", {TP0: 6}, b, gen) == {TP0: Errors.NONE}
    assert h.fetched("g") == {TP0: 6, TP1: 7}
    coord = h.reload()
    error, fetched = coord.fetch_offsets("g", [TP0, TP1, TopicPartition("t", 3)], False)
    assert error == Errors.NONE
    assert [(f.tp, f.offset.offset if f.offset else None) for f in fetched] == [
        (TP0, 6), (TP1, 7), (TopicPartition("t", 3), None)]
    assert fetched[1].offset is not None and fetched[1].offset.metadata == "m"


def test_commit_validation(h: Harness) -> None:
    (a, b), gen = h.stable_group("g", 2)
    assert h.commit("g", {TP0: 1}, a, gen + 1) == {TP0: Errors.ILLEGAL_GENERATION}
    assert h.commit("g", {TP0: 1}, "stranger", gen) == {TP0: Errors.UNKNOWN_MEMBER_ID}
    assert h.commit("g", {TP0: 1}) == {TP0: Errors.UNKNOWN_MEMBER_ID}  # admin commit, group not empty
    assert h.commit("g", {TP0: 1}, a, gen, metadata="x" * 5000) == {TP0: Errors.OFFSET_METADATA_TOO_LARGE}
    h.join("g", a)  # leader rejoins: PreparingRebalance still accepts the old generation
    assert h.commit("g", {TP0: 2}, b, gen) == {TP0: Errors.NONE}
    h.join("g", b)  # all rejoined: CompletingRebalance
    assert h.state("g") is GroupState.COMPLETING_REBALANCE
    assert h.commit("g", {TP0: 3}, b, gen + 1) == {TP0: Errors.REBALANCE_IN_PROGRESS}
    # A standalone consumer commits to a group nobody joined.
    assert h.commit("solo", {TP0: 9}) == {TP0: Errors.NONE}
    assert h.coord.commit_offsets("nobody", "m", None, 3, {TP0: OffsetAndMetadata(1, -1, "", 0)}) == {
        TP0: Errors.ILLEGAL_GENERATION}


def test_transactional_offsets_wait_for_the_marker(h: Harness) -> None:
    h.commit("g", {TP0: 1})
    now = h.sched.now_ms()
    errors = h.coord.commit_transactional_offsets(
        "g", 1000, 0, "", None, -1, {TP0: OffsetAndMetadata(50, -1, "", now), TP1: OffsetAndMetadata(60, -1, "", now)})
    assert errors == {TP0: Errors.NONE, TP1: Errors.NONE}
    assert h.fetched("g") == {TP0: 1}
    assert h.fetched("g", require_stable=True) == {TP0: Errors.UNSTABLE_OFFSET_COMMIT}
    # A second producer's transaction is aborted.
    h.coord.commit_transactional_offsets("g", 2000, 0, "", None, -1, {TP1: OffsetAndMetadata(99, -1, "", now)})
    partition = h.coord.partition_for("g")
    h.coord.complete_transaction(partition, 2000, committed=False)
    h.coord.complete_transaction(partition, 1000, committed=True)
    assert h.fetched("g", require_stable=True) == {TP0: 50, TP1: 60}


def _write_marker(h: Harness, producer_id: int, marker: ControlRecordType) -> None:
    """What the transaction coordinator's WriteTxnMarkers will append."""
    plog = h.coord.topic.partition_log(h.coord.partition_for("g"))
    append(plog, build_control_batch(
        marker, producer_id=producer_id, producer_epoch=0, coordinator_epoch=0, timestamp=h.sched.now_ms()),
        AppendOrigin.COORDINATOR)


def test_loader_replays_transaction_markers(h: Harness) -> None:
    now = h.sched.now_ms()
    h.commit("g", {TP0: 1, TP1: 1})
    h.coord.commit_transactional_offsets("g", 7, 0, "", None, -1, {TP0: OffsetAndMetadata(70, -1, "", now)})
    h.coord.commit_transactional_offsets("g", 8, 0, "", None, -1, {TP1: OffsetAndMetadata(80, -1, "", now)})
    h.coord.commit_transactional_offsets("g", 9, 0, "", None, -1, {TopicPartition("t", 2): OffsetAndMetadata(
        90, -1, "", now)})
    _write_marker(h, 7, ControlRecordType.COMMIT)
    _write_marker(h, 8, ControlRecordType.ABORT)
    h.reload()
    assert h.fetched("g") == {TP0: 70, TP1: 1}
    # Producer 9 has no marker yet: its offset is still pending after the reload.
    assert h.fetched("g", require_stable=True)[TP0] == 70
    _, fetched = h.coord.fetch_offsets("g", [TopicPartition("t", 2)], True)
    assert fetched[0].error == Errors.UNSTABLE_OFFSET_COMMIT
    h.coord.complete_transaction(h.coord.partition_for("g"), 9, committed=True)
    assert h.fetched("g")[TopicPartition("t", 2)] == 90


def test_retention_of_an_empty_consumer_group(h: Harness) -> None:
    (a, b), gen = h.stable_group("g", 2)
    h.commit("g", {TP0: 5}, a, gen)
    retention_ms = RETENTION_MIN * 60_000
    h.keep_alive("g", gen, [a, b], retention_ms)  # a live group keeps offsets whatever their age
    assert h.coord.expire_offsets() == 0
    h.coord.leave_group("g", [(a, None, None), (b, None, None)])
    assert h.state("g") is GroupState.EMPTY
    h.sched.advance(retention_ms - 1)
    assert h.coord.expire_offsets() == 0
    h.sched.advance(1)  # retention counts from the moment the group became empty
    assert h.coord.expire_offsets() == 1
    assert "g" not in h.coord.groups  # no members, no offsets: the group is gone
    assert "g" not in h.reload().groups


def test_retention_of_unsubscribed_topics_and_standalone_offsets(h: Harness) -> None:
    h.logs.create_topic("other", 1)
    [a], gen = h.stable_group("g", 1)
    other = TopicPartition("other", 0)
    h.commit("g", {TP0: 5, other: 3}, a, gen)
    h.commit("solo", {TP0: 1})
    h.keep_alive("g", gen, [a], RETENTION_MIN * 60_000)
    assert h.coord.expire_offsets() == 2  # g's "other" (not subscribed) and solo's
    assert h.fetched("g") == {TP0: 5}
    assert "solo" not in h.coord.groups


def test_explicit_retention_time(h: Harness) -> None:
    now = h.sched.now_ms()
    h.coord.commit_offsets("solo", "", None, -1, {TP0: OffsetAndMetadata(1, -1, "", now, now + 1000)})
    h.sched.advance(1000)
    assert h.coord.expire_offsets() == 1


def test_delete_groups(h: Harness) -> None:
    h.stable_group("busy", 1)
    h.commit("idle", {TP0: 3})
    results = h.coord.delete_groups(["busy", "idle", "missing"])
    assert results == {"busy": Errors.NON_EMPTY_GROUP, "idle": Errors.NONE, "missing": Errors.GROUP_ID_NOT_FOUND}
    assert h.fetched("idle") == {}
    assert "idle" not in h.reload().groups
    assert "busy" in h.coord.groups


def test_delete_offsets(h: Harness) -> None:
    h.logs.create_topic("other", 1)
    [a], gen = h.stable_group("g", 1)
    other = TopicPartition("other", 0)
    h.commit("g", {TP0: 5, other: 3}, a, gen)
    error, results = h.coord.delete_offsets("g", [TP0, other])
    assert error == Errors.NONE
    assert results == {TP0: Errors.GROUP_SUBSCRIBED_TO_TOPIC, other: Errors.NONE}
    assert h.fetched("g") == {TP0: 5}
    assert h.coord.delete_offsets("missing", [TP0]) == (Errors.GROUP_ID_NOT_FOUND, {})
    assert h.reload() and h.fetched("g") == {TP0: 5}


def test_describe_and_list(h: Harness) -> None:
    (a, b), _gen = h.stable_group("g", 2)
    h.commit("solo", {TP0: 1})
    error, summary = h.coord.describe_group("g")
    assert error == Errors.NONE and summary.state is GroupState.STABLE and summary.protocol == "range"
    assert {m.member_id: m.assignment for m in summary.members} == {a: a.encode(), b: b.encode()}
    assert summary.members[0].metadata == subscription("t")
    assert h.coord.describe_group("missing")[1].state is GroupState.DEAD
    error, listed = h.coord.list_groups()
    assert error == Errors.NONE
    assert {(g.group_id, g.state, g.protocol_type) for g in listed} == {
        ("g", GroupState.STABLE, "consumer"), ("solo", GroupState.EMPTY, "")}
    assert [g.group_id for g in h.coord.list_groups({GroupState.EMPTY})[1]] == ["solo"]

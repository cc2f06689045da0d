"""KIP-848 consumer groups driven directly: ConsumerGroupHeartbeat on a controllable clock over a real
``__consumer_offsets`` log, as Kafka's GroupMetadataManagerTest does — member epochs, the target
assignment and its reconciliation (revoke before assign), static members, fencing, the offsets' member
epoch checks, and a reload that rebuilds every group from the log alone.

Timeouts (session, rebalance, the assignment interval) are reached by advancing a ManualScheduler.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from eoslog.config import BrokerConfig
from eoslog.coordinator.group import GroupConfig, GroupCoordinator, OffsetAndMetadata, OffsetsTopic, OffsetsTopicConfig
from eoslog.coordinator.group.consumer_group import ConsumerGroupState, MemberState
from eoslog.coordinator.group.consumer_groups import ConsumerHeartbeat, ConsumerHeartbeatResult
from eoslog.coordinator.timers import ManualScheduler
from eoslog.errors import Errors
from eoslog.records import CompressionType
from eoslog.replica import ReplicaManager
from eoslog.storage import LogManager
from eoslog.types import TopicPartition

T = TypeVar("T")
SESSION_MS = 45_000
REBALANCE_MS = 30_000


@pytest.fixture(autouse=True)
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    lp = asyncio.new_event_loop()
    asyncio.set_event_loop(lp)
    yield lp
    lp.close()


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.get_event_loop().run_until_complete(coro)


class Harness:
    def __init__(self, tmp_path: Path, **overrides: str) -> None:
        self.sched = ManualScheduler(1_000_000)
        self.config = BrokerConfig.load(overrides={
            "log.dirs": str(tmp_path), "group.consumer.assignment.interval.ms": "0", **overrides})
        self.logs = LogManager(tmp_path, self.config.topic_defaults(), self.sched.now_ms)
        self.logs.startup()
        self.topics: dict[str, tuple[uuid.UUID, int]] = {}
        self.create("t", 4)
        self.replicas = ReplicaManager(0, self.logs, self.sched.now_ms)
        self.coord = self._coordinator()
        self.coord.ensure_offsets_topic()

    def create(self, name: str, partitions: int) -> uuid.UUID:
        self.logs.create_topic(name, partitions)
        topic_id = uuid.uuid5(uuid.NAMESPACE_DNS, name)
        self.topics[name] = (topic_id, partitions)
        return topic_id

    def tid(self, name: str) -> uuid.UUID:
        return self.topics[name][0]

    def _coordinator(self) -> GroupCoordinator:
        topic = OffsetsTopic(self.replicas, OffsetsTopicConfig(4, 1 << 20, CompressionType.NONE), self.sched.now_ms)
        coord = GroupCoordinator(GroupConfig.from_broker_config(self.config), topic, self.sched)
        coord.consumer.topics = lambda: dict(self.topics)
        return coord

    def reload(self) -> GroupCoordinator:
        self.coord.shutdown()
        self.coord = self._coordinator()
        for p in self.coord.begin_loading():
            self.coord.load_partition_now(p)
        return self.coord

    def hb(self, member: str, epoch: int, *, group: str = "g", topics: tuple[str, ...] | None = None,
           regex: str | None = None, owned: dict[str, set[int]] | None = None, instance: str | None = None,
           assignor: str | None = None, rebalance_ms: int = -1) -> ConsumerHeartbeatResult:
        if epoch == 0:
            rebalance_ms = REBALANCE_MS if rebalance_ms == -1 else rebalance_ms
            owned = {} if owned is None else owned
            if topics is None and regex is None:
                topics = ("t",)
        return run(self.coord.consumer.heartbeat(ConsumerHeartbeat(
            group, member, epoch, instance, None, rebalance_ms, topics, regex, assignor,
            None if owned is None else {self.tid(t): frozenset(ps) for t, ps in owned.items()},
            "client", "/127.0.0.1")))

    def parts(self, result: ConsumerHeartbeatResult, topic: str = "t") -> set[int]:
        assert result.assignment is not None
        return set(result.assignment.get(self.tid(topic), frozenset()))


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


def test_first_member_gets_every_partition_at_epoch_1(h: Harness) -> None:
    r = h.hb("m1", 0)
    assert (r.error, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (Errors.NONE, "m1", 2, 5000)
    assert h.parts(r) == {0, 1, 2, 3}
    group = h.coord.consumer.groups["g"]
    assert (group.state, group.group_epoch, group.assignment_epoch) == (ConsumerGroupState.STABLE, 2, 2)
    r = h.hb("m1", 2)
    assert (r.error, r.member_epoch, r.assignment) == (Errors.NONE, 2, None)  # nothing new: no assignment


def test_a_second_member_is_given_partitions_only_after_the_first_revoked_them(h: Harness) -> None:
    """Revoke before assign: m1 keeps fetching what it keeps, m2 waits until m1 gave the rest up."""
    h.hb("m1", 0)
    r2 = h.hb("m2", 0)
    assert (r2.error, r2.member_epoch) == (Errors.NONE, 3)
    assert h.parts(r2) == set()  # everything it is to get is still m1's
    group = h.coord.consumer.groups["g"]
    assert group.members["m2"].state is MemberState.UNRELEASED_PARTITIONS
    # m1 learns which partitions it must give up and stays at epoch 1 meanwhile.
    r1 = h.hb("m1", 2, owned={"t": {0, 1, 2, 3}})
    kept = h.parts(r1)
    assert r1.member_epoch == 2 and len(kept) == 2
    assert group.members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    assert group.state is ConsumerGroupState.RECONCILING
    # Still owning them: nothing moves.
    assert h.hb("m1", 2, owned={"t": {0, 1, 2, 3}}).member_epoch == 2
    assert h.parts(h.hb("m2", 3, owned={}, topics=("t",), rebalance_ms=REBALANCE_MS)) == set()
    # Revoked: m1 moves to epoch 2, and m2 then gets the released ones.
    r1 = h.hb("m1", 2, owned={"t": kept})
    assert (r1.member_epoch, r1.assignment) == (3, None)
    r2 = h.hb("m2", 3, owned={})
    assert h.parts(r2) == {0, 1, 2, 3} - kept
    assert group.state is ConsumerGroupState.STABLE


def test_unknown_and_fenced_members(h: Harness) -> None:
    h.hb("m1", 0)
    r = h.hb("nobody", 2)
    assert (r.error, r.message) == (Errors.UNKNOWN_MEMBER_ID, "Member nobody is not a member of group g.")
    r = h.hb("m1", 6)
    assert r.error == Errors.FENCED_MEMBER_EPOCH
    assert r.message == ("The consumer group member has a greater member epoch (6) than the one known by the group "
                         "coordinator (2). The member must abandon all its partitions and rejoin.")
    assert h.hb("m1", 0).error == Errors.NONE  # a rejoin with epoch 0 is always allowed
    r = h.hb("x", 2, group="nothing")
    assert (r.error, r.message) == (Errors.GROUP_ID_NOT_FOUND, "Consumer group nothing not found.")


def test_invalid_requests_with_kafkas_messages(h: Harness) -> None:
    def message(**kw: Any) -> tuple[Errors, str | None]:
        base = dict(group_id="g", member_id="m", member_epoch=0, instance_id=None, rack_id=None,
                    rebalance_timeout_ms=1000, subscribed_topic_names=("t",), subscribed_topic_regex=None,
                    server_assignor=None, owned={}, client_id="c", client_host="h")
        base.update(kw)
        r = run(h.coord.consumer.heartbeat(ConsumerHeartbeat(**base)))
        return r.error, r.message
    assert message(member_id="") == (Errors.INVALID_REQUEST, "MemberId can't be empty.")
    assert message(rack_id=" ") == (Errors.INVALID_REQUEST, "RackId can't be empty.")
    assert message(rebalance_timeout_ms=-1) == (Errors.INVALID_REQUEST,
                                                "RebalanceTimeoutMs must be provided in first request.")
    assert message(owned=None) == (Errors.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
    assert message(subscribed_topic_names=None) == (
        Errors.INVALID_REQUEST,
        "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
    assert message(member_epoch=-2) == (Errors.INVALID_REQUEST, "InstanceId can't be null.")
    assert message(member_epoch=-3) == (Errors.INVALID_REQUEST, "MemberEpoch is invalid.")
    assert message(server_assignor="sticky") == (
        Errors.UNSUPPORTED_ASSIGNOR, "ServerAssignor sticky is not supported. Supported assignors: uniform, range.")
    assert message(subscribed_topic_names=None, subscribed_topic_regex="(")[0] == Errors.INVALID_REGULAR_EXPRESSION


def test_a_member_that_leaves_or_goes_silent_gives_its_partitions_back(h: Harness) -> None:
    h.hb("m1", 0)
    h.hb("m2", 0)
    r1 = h.hb("m1", 2, owned={"t": {0, 1, 2, 3}})
    h.hb("m1", 2, owned={"t": h.parts(r1)})
    h.hb("m2", 3, owned={})
    r = h.hb("m2", -1)
    assert (r.error, r.member_id, r.member_epoch) == (Errors.NONE, "m2", -1)
    r1 = h.hb("m1", 3, owned={"t": h.parts(r1)})
    assert (r1.member_epoch, h.parts(r1)) == (4, {0, 1, 2, 3})  # m2's leave: epoch 4, its target at once
    # m1 now goes silent: after its session it is fenced and the group is empty.
    h.sched.advance(SESSION_MS + 1)
    group = h.coord.consumer.groups["g"]
    assert (group.members, group.state) == ({}, ConsumerGroupState.EMPTY)
    assert h.hb("m1", 5).error == Errors.UNKNOWN_MEMBER_ID


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced(h: Harness) -> None:
    h.hb("m1", 0)
    h.hb("m2", 0)
    h.hb("m1", 2, owned={"t": {0, 1, 2, 3}})  # told to revoke two
    h.sched.advance(REBALANCE_MS + 1)
    group = h.coord.consumer.groups["g"]
    assert set(group.members) == {"m2"}
    assert h.parts(h.hb("m2", 3, owned={}, topics=("t",), rebalance_ms=REBALANCE_MS)) == {0, 1, 2, 3}


def test_static_member_rejoins_with_its_assignment_and_a_second_instance_is_refused(h: Harness) -> None:
    h.hb("a1", 0, instance="i-a")
    h.hb("b1", 0, instance="i-b")
    ra = h.hb("a1", 2, owned={"t": {0, 1, 2, 3}})
    h.hb("a1", 2, owned={"t": h.parts(ra)})
    rb = h.hb("b1", 3, owned={})
    mine = h.parts(rb)
    assert len(mine) == 2
    r = h.hb("b2", 0, instance="i-b")
    assert r.error == Errors.UNRELEASED_INSTANCE_ID
    assert r.message == ("Static member b2 with instance id i-b cannot join the group because the instance id is "
                         "owned by b1 member.")
    assert h.hb("b1", -2, instance="i-b").member_epoch == -2  # will be back
    back = h.hb("b2", 0, instance="i-b")  # a new process: a new member id, the same instance
    assert (back.error, h.parts(back)) == (Errors.NONE, mine)
    assert h.coord.consumer.groups["g"].group_epoch == 3  # no rebalance for the others
    assert h.hb("b1", 3, instance="i-b").error == Errors.FENCED_INSTANCE_ID


def test_group_max_size(tmp_path: Path) -> None:
    h = Harness(tmp_path, **{"group.consumer.max.size": "1"})
    h.hb("m1", 0)
    r = h.hb("m2", 0)
    assert (r.error, r.message) == (Errors.GROUP_MAX_SIZE_REACHED,
                                    "The consumer group has reached its maximum capacity of 1 members.")


def test_regex_subscription_picks_up_a_new_topic(h: Harness) -> None:
    r = h.hb("m1", 0, regex="t.*")
    assert h.parts(r) == {0, 1, 2, 3}
    h.create("t2", 2)
    r = h.hb("m1", 2, owned={"t": {0, 1, 2, 3}})
    assert r.member_epoch == 3 and h.parts(r, "t2") == {0, 1}
    h.create("other", 1)
    assert h.hb("m1", 3, owned={"t": {0, 1, 2, 3}, "t2": {0, 1}}).assignment is None


def test_offset_commits_check_the_member_epoch(h: Harness) -> None:
    """KIP-848 + KIP-1251: the current epoch commits; an older one only for partitions held since;
    a member that lost a partition cannot commit it (the zombie of an exactly-once app)."""
    tp0, tp3 = TopicPartition("t", 0), TopicPartition("t", 3)
    value = OffsetAndMetadata(5, -1, "", h.sched.now_ms())
    h.hb("m1", 0)
    assert h.coord.commit_offsets("g", "m1", None, 2, {tp0: value}) == {tp0: Errors.NONE}
    assert h.coord.commit_offsets("g", "m1", None, 3, {tp0: value}) == {tp0: Errors.STALE_MEMBER_EPOCH}
    assert h.coord.commit_offsets("g", "zz", None, 2, {tp0: value}) == {tp0: Errors.UNKNOWN_MEMBER_ID}
    assert h.coord.commit_offsets("g", "m1", None, 2, {tp0: value}, api_version=8) == {
        tp0: Errors.UNSUPPORTED_VERSION}
    h.hb("m2", 0)
    r1 = h.hb("m1", 2, owned={"t": {0, 1, 2, 3}})
    kept = h.parts(r1)
    h.hb("m1", 2, owned={"t": kept})  # m1 at epoch 3 now, holding `kept` since epoch 2
    lost = min({0, 1, 2, 3} - kept)
    tp_kept, tp_lost = TopicPartition("t", min(kept)), TopicPartition("t", lost)
    errors = h.coord.commit_transactional_offsets("g", 7, 0, "m1", None, 2, {tp_kept: value, tp_lost: value})
    assert errors == {tp_kept: Errors.NONE, tp_lost: Errors.STALE_MEMBER_EPOCH}
    assert h.coord.commit_offsets("g", "", None, -1, {tp3: value}) == {tp3: Errors.UNKNOWN_MEMBER_ID}
    error, fetched = h.coord.fetch_offsets("g", [tp0], False, "m1", 2)
    assert error == Errors.STALE_MEMBER_EPOCH
    error, fetched = h.coord.fetch_offsets("g", [tp0], False, "m1", 3)
    assert (error, fetched[0].offset) == (Errors.NONE, value)


def test_the_group_is_rebuilt_from_the_log(h: Harness) -> None:
    h.hb("m1", 0, instance="i1")
    h.hb("m2", 0, regex="t.*")
    r1 = h.hb("m1", 2, owned={"t": {0, 1, 2, 3}})
    h.hb("m1", 2, owned={"t": h.parts(r1)})
    tp = TopicPartition("t", min(h.parts(r1)))
    h.coord.commit_offsets("g", "m1", "i1", 3, {tp: OffsetAndMetadata(9, -1, "x", h.sched.now_ms())})
    before = h.coord.consumer.groups["g"]
    members = dict(before.members)
    coord = h.reload()
    after = coord.consumer.groups["g"]
    assert (after.group_epoch, after.assignment_epoch, after.state) == (
        before.group_epoch, before.assignment_epoch, before.state)
    assert after.members == members
    assert after.target == before.target
    assert after.static_members == {"i1": "m1"}
    assert set(after.resolved_regexes) == {"t.*"}
    assert after.offsets.get(tp) is not None and after.offsets.get(tp).offset == 9  # type: ignore[union-attr]
    # The reloaded coordinator goes on from there.
    r2 = h.hb("m2", 3, owned={})
    assert h.parts(r2) == {0, 1, 2, 3} - h.parts(r1)


def test_delete_and_list(h: Harness) -> None:
    h.hb("m1", 0)
    assert h.coord.delete_groups(["g"]) == {"g": Errors.NON_EMPTY_GROUP}
    assert [g.group_id for g in h.coord.list_consumer_groups()] == ["g"]
    h.hb("m1", -1)
    assert h.coord.delete_groups(["g"]) == {"g": Errors.NONE}
    assert "g" not in h.coord.consumer.groups
    assert "g" not in h.reload().consumer.groups


def test_the_assignment_interval_delays_a_new_target(tmp_path: Path) -> None:
    h = Harness(tmp_path, **{"group.consumer.assignment.interval.ms": "1000"})
    h.hb("m1", 0)
    r2 = h.hb("m2", 0)  # the group epoch moves to 2, the target waits for the interval
    group = h.coord.consumer.groups["g"]
    assert (group.group_epoch, group.assignment_epoch, r2.member_epoch) == (3, 2, 2)
    assert group.state is ConsumerGroupState.ASSIGNING
    h.sched.advance(1000)
    assert group.assignment_epoch == 3
    r1 = h.hb("m1", 2, owned={"t": {0, 1, 2, 3}})
    assert len(h.parts(r1)) == 2

"""Classic consumer groups: join/sync/heartbeat/leave with their errors and generations, a
rebalance, static membership, offset commit/fetch/delete — eoslog against Apache Kafka.

Member ids are compared as symbols (each broker makes its own): member#1 is the first one either
handed out.
"""

from __future__ import annotations

from typing import Any

from conformance.session import Broker, Catalogue, Target, i32, ms
from conformance.steps import (
    DESCRIBE_GROUPS,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    OFFSET_DELETE,
    SYNC_GROUP,
    call,
    create_topic,
    find_coordinator,
    offset_commit,
    offset_fetch,
)
from eoslog.client.types import TopicPartition
from eoslog.protocol.consumer_protocol import Assignment, Subscription, encode_assignment, encode_subscription
from eoslog.protocol.messages import build

CATALOGUE = Catalogue("groups")
session = CATALOGUE.session


def test_session(session_name: str, brokers: tuple[Broker, Broker]) -> None:
    CATALOGUE.run(session_name, brokers)


def join_request(t: Target, group: str, member: str = "", *, instance: str | None = None,
                 session_ms: int = 10000, protocol_type: str = "consumer", topics: tuple[str, ...] = ("g-topic",),
                 version: int | None = None) -> Any:
    v = t.v(JOIN_GROUP) if version is None else version
    m = t.types(JOIN_GROUP, v)
    metadata = encode_subscription(Subscription(topics=topics))
    return build(m.JoinGroupRequest, group_id=group, session_timeout=ms(session_ms), rebalance_timeout=ms(10000),
                 member_id=member, group_instance_id=instance, protocol_type=protocol_type,
                 protocols=(build(m.JoinGroupRequestProtocol, name="range", metadata=metadata),), reason=None)


def join(t: Target, group: str, member: str = "", *, label: str | None = None, conn: str = "main",
         **kw: Any) -> Any:
    return t.call(join_request(t, group, member, **kw), label, conn)


def join_new_member(t: Target, group: str, *, conn: str = "main", label: str = "join") -> Any:
    """A new dynamic member: MEMBER_ID_REQUIRED with an id, then the join with that id."""
    first = join(t, group, label=f"{label} (no member id)", conn=conn)
    return join(t, group, str(first.member_id), label=label, conn=conn)


def sync(t: Target, group: str, generation: int, member: str, assignments: dict[str, Assignment], *,
         instance: str | None = None, label: str | None = None, conn: str = "main", send_only: bool = False) -> Any:
    m = t.types(SYNC_GROUP, t.v(SYNC_GROUP))
    req = build(m.SyncGroupRequest, group_id=group, generation_id=i32(generation), member_id=member,
                group_instance_id=instance, protocol_type="consumer", protocol_name="range",
                assignments=tuple(build(m.SyncGroupRequestAssignment, member_id=k, assignment=encode_assignment(a))
                                  for k, a in assignments.items()))
    if send_only:
        return req, t.send(req, conn)
    return t.call(req, label, conn)


def heartbeat(t: Target, group: str, generation: int, member: str, *, instance: str | None = None,
              label: str | None = None, record: bool = True, conn: str = "main") -> Any:
    return call(t, HEARTBEAT, "HeartbeatRequest", label=label, record=record, conn=conn, group_id=group,
                generation_id=i32(generation), member_id=member, group_instance_id=instance)


def leave(t: Target, group: str, member: str, *, instance: str | None = None, label: str | None = None) -> Any:
    m = t.types(LEAVE_GROUP, t.v(LEAVE_GROUP))
    return call(t, LEAVE_GROUP, "LeaveGroupRequest", label=label, group_id=group,
                members=(build(m.MemberIdentity, member_id=member, group_instance_id=instance, reason=None),))


def describe(t: Target, *groups: str, label: str | None = None) -> Any:
    return call(t, DESCRIBE_GROUPS, "DescribeGroupsRequest", label=label, groups=groups,
                include_authorized_operations=False)


def offset_delete(t: Target, group: str, topic: str, partitions: list[int], *, label: str | None = None) -> Any:
    m = t.types(OFFSET_DELETE, t.v(OFFSET_DELETE))
    return call(t, OFFSET_DELETE, "OffsetDeleteRequest", label=label, group_id=group, topics=(
        build(m.OffsetDeleteRequestTopic, name=topic,
              partitions=tuple(build(m.OffsetDeleteRequestPartition, partition_index=i32(p)) for p in partitions)),))


def everything(topic: str = "g-topic") -> Assignment:
    return Assignment(partitions=(TopicPartition(topic, 0),))


@session("single-member", "a new member's join (MEMBER_ID_REQUIRED, then leader of generation 1), sync, "
         "heartbeat, DescribeGroups and ListGroups, leave, and its heartbeat after leaving")
def _single(t: Target) -> None:
    create_topic(t, "g-topic")
    find_coordinator(t, "g-single", key_type=0)
    joined = join_new_member(t, "g-single")
    member, gen = str(joined.member_id), int(joined.generation_id)
    sync(t, "g-single", gen, member, {member: everything()})
    heartbeat(t, "g-single", gen, member)
    describe(t, "g-single", label="describe stable")
    call(t, LIST_GROUPS, "ListGroupsRequest", label="list stable groups", states_filter=("Stable",),
         types_filter=())
    leave(t, "g-single", member)
    describe(t, "g-single", label="describe after leave")
    heartbeat(t, "g-single", gen, member, label="heartbeat after leave")


@session("member-errors", "heartbeat and sync with an unknown member, an old generation and an unknown "
         "group; a join with a session timeout out of bounds and one with another protocol type")
def _errors(t: Target) -> None:
    find_coordinator(t, "g-errors", key_type=0)
    joined = join_new_member(t, "g-errors")
    member, gen = str(joined.member_id), int(joined.generation_id)
    sync(t, "g-errors", gen, member, {member: everything()})
    heartbeat(t, "g-errors", gen, "someone-else", label="heartbeat unknown member")
    heartbeat(t, "g-errors", gen + 5, member, label="heartbeat wrong generation")
    heartbeat(t, "g-errors-none", 1, member, label="heartbeat unknown group")
    sync(t, "g-errors", gen + 5, member, {}, label="sync wrong generation")
    sync(t, "g-errors", gen, "someone-else", {}, label="sync unknown member")
    join(t, "g-errors", session_ms=1000, label="join session timeout too small")
    join(t, "g-errors", session_ms=1_900_000, label="join session timeout too large")
    join(t, "g-errors", protocol_type="connect", label="join another protocol type")
    leave(t, "g-errors", "someone-else", label="leave unknown member")


@session("rebalance", "a second member joins a stable group: the first sees REBALANCE_IN_PROGRESS, "
         "rejoins, both get generation 2 with the first still leader, then both sync")
def _rebalance(t: Target) -> None:
    find_coordinator(t, "g-rebalance", key_type=0)
    a = join_new_member(t, "g-rebalance", conn="a", label="A join")
    a_id, gen = str(a.member_id), int(a.generation_id)
    sync(t, "g-rebalance", gen, a_id, {a_id: everything()}, label="A sync", conn="a")
    b_first = join(t, "g-rebalance", label="B join (no member id)", conn="b")
    b_req = join_request(t, "g-rebalance", str(b_first.member_id))
    b_cid = t.send(b_req, "b")
    t.until("the rebalance to start", lambda: int(heartbeat(t, "g-rebalance", gen, a_id, record=False,
                                                              conn="a").error_code),
            lambda code: code != 0)
    heartbeat(t, "g-rebalance", gen, a_id, label="A heartbeat during the rebalance", conn="a")
    a2 = join(t, "g-rebalance", a_id, label="A rejoin", conn="a")
    b2 = t.receive(b_req, b_cid, "B join", "b")
    b_id, gen2 = str(b2.member_id), int(a2.generation_id)
    b_sync, b_sync_cid = sync(t, "g-rebalance", gen2, b_id, {}, conn="b", send_only=True)
    sync(t, "g-rebalance", gen2, a_id, {a_id: everything(), b_id: Assignment()}, label="A sync 2", conn="a")
    t.receive(b_sync, b_sync_cid, "B sync", "b")
    describe(t, "g-rebalance")


@session("static-membership", "a static member (group.instance.id) joins without MEMBER_ID_REQUIRED; a "
         "restarted instance takes its place; the old member id is fenced")
def _static(t: Target) -> None:
    find_coordinator(t, "g-static", key_type=0)
    first = join(t, "g-static", instance="instance-1", label="join static")
    old, gen = str(first.member_id), int(first.generation_id)
    sync(t, "g-static", gen, old, {old: everything()}, instance="instance-1")
    again = join(t, "g-static", instance="instance-1", label="rejoin after a restart")
    new = str(again.member_id)
    heartbeat(t, "g-static", gen, old, instance="instance-1", label="old member id")
    heartbeat(t, "g-static", int(again.generation_id), new, instance="instance-1", label="new member id")
    describe(t, "g-static")
    leave(t, "g-static", "", instance="instance-1", label="leave by instance id")
    describe(t, "g-static", label="describe after leave")


@session("offsets", "OffsetCommit and OffsetFetch of a standalone group, an unknown group and topic, "
         "metadata too large, offsets of an active group (generation checked), OffsetDelete")
def _offsets(t: Target) -> None:
    create_topic(t, "g-off", 2)
    find_coordinator(t, "g-off-simple", key_type=0)
    offset_commit(t, "g-off-simple", "g-off", 0, 5, metadata="m")
    offset_commit(t, "g-off-simple", "g-off", 1, 7)
    offset_fetch(t, "g-off-simple", "g-off", [0, 1], require_stable=True)
    offset_fetch(t, "g-off-never", "g-off", [0], require_stable=False, label="unknown group")
    offset_commit(t, "g-off-simple", "no-such-topic", 0, 1, label="unknown topic")
    offset_commit(t, "g-off-simple", "g-off", 0, 6, metadata="x" * 5000, label="metadata too large")
    offset_delete(t, "g-off-simple", "g-off", [1])
    offset_fetch(t, "g-off-simple", "g-off", [0, 1], require_stable=True, label="after delete")
    offset_delete(t, "g-off-never", "g-off", [0], label="delete unknown group")
    find_coordinator(t, "g-off-active", key_type=0)
    joined = join_new_member(t, "g-off-active")
    member, gen = str(joined.member_id), int(joined.generation_id)
    sync(t, "g-off-active", gen, member, {member: everything("g-off")})
    offset_commit(t, "g-off-active", "g-off", 0, 3, generation=gen, member=member, label="active group")
    offset_commit(t, "g-off-active", "g-off", 0, 4, generation=gen + 1, member=member, label="wrong generation")
    offset_commit(t, "g-off-active", "g-off", 0, 4, label="no generation in an active group")
    offset_delete(t, "g-off-active", "g-off", [0], label="delete subscribed topic")
    offset_fetch(t, "g-off-active", "g-off", [0], require_stable=True, label="active group offsets")


@session("describe-unknown", "DescribeGroups of a group that never existed, and ListGroups by state")
def _describe_unknown(t: Target) -> None:
    find_coordinator(t, "g-never", key_type=0)
    describe(t, "g-never")
    call(t, LIST_GROUPS, "ListGroupsRequest", label="list dead groups", states_filter=("Dead",), types_filter=())

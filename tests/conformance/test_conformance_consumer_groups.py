"""KIP-848 consumer groups: ConsumerGroupHeartbeat and ConsumerGroupDescribe answers for a fixed
membership — eoslog against Apache Kafka 4.4, both computing the target assignment in the heartbeat
that asks for it (``group.consumer.assignment.interval.ms=0``, the assignor not offloaded: conftest.py).

Member ids are the client's (ConsumerGroupHeartbeat v1, KIP-1082), the same on both brokers; topic
ids are each broker's own and compared as symbols. A member reports what it owns from its own
broker's answers, so both sessions take the same steps.
"""

from __future__ import annotations

from typing import Any

from conformance.session import Broker, Catalogue, Target, i32, ms
from conformance.steps import (
    OFFSET_COMMIT,
    OFFSET_FETCH,
    call,
    find_coordinator,
    offset_commit,
    offset_fetch,
)
from conformance.steps import create_topic as create_any_topic
from conformance.test_conformance_groups import describe as describe_classic
from conformance.test_conformance_groups import heartbeat as heartbeat_classic
from conformance.test_conformance_groups import join as join_classic
from conformance.test_conformance_groups import leave as leave_classic
from conformance.test_conformance_groups import sync
from eoslog.client.types import TopicPartition
from eoslog.protocol.consumer_protocol import Assignment
from eoslog.protocol.messages import build

CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69

CATALOGUE = Catalogue("consumer-groups")
session = CATALOGUE.session


def test_session(session_name: str, brokers: tuple[Broker, Broker]) -> None:
    CATALOGUE.run(session_name, brokers)


def heartbeat(t: Target, group: str, member: str, epoch: int, *, topics: tuple[str, ...] | None = None,
              regex: str | None = None, owned: tuple[tuple[Any, tuple[int, ...]], ...] | None = None,
              instance: str | None = None, assignor: str | None = None, rebalance_ms: int = -1,
              label: str | None = None, rack: str | None = None) -> Any:
    m = t.types(CONSUMER_GROUP_HEARTBEAT, t.v(CONSUMER_GROUP_HEARTBEAT))
    parts = None if owned is None else tuple(
        build(m.TopicPartitions, topic_id=tid, partitions=tuple(i32(p) for p in ps)) for tid, ps in owned)
    return call(t, CONSUMER_GROUP_HEARTBEAT, "ConsumerGroupHeartbeatRequest", label=label, group_id=group,
                member_id=member, member_epoch=i32(epoch), instance_id=instance, rack_id=rack,
                rebalance_timeout=ms(rebalance_ms), subscribed_topic_names=topics, subscribed_topic_regex=regex,
                server_assignor=assignor, topic_partitions=parts)


def create_topic(t: Target, name: str, partitions: int) -> Any:
    """CreateTopics, then wait until the group coordinator assigns the new topic: Kafka 4.4's
    coordinator learns of it from its own copy of the metadata image, a moment after the
    replica manager hosts it, and a first heartbeat in between is answered with no assignment
    (seen once in the suite: online-downgrade under the downgrade policy). A throw-away member
    of a group of its own asks, quietly, and leaves."""
    resp = create_any_topic(t, name, partitions)
    probe = f"probe-{name}"

    def ask() -> Any:
        return call(t, CONSUMER_GROUP_HEARTBEAT, "ConsumerGroupHeartbeatRequest", record=False, group_id=probe,
                    member_id=probe, member_epoch=i32(0), instance_id=None, rack_id=None,
                    rebalance_timeout=ms(30000), subscribed_topic_names=(name,), subscribed_topic_regex=None,
                    server_assignor=None, topic_partitions=())

    t.until(f"the group coordinator assigning {name}", ask,
            lambda r: r.assignment is not None
            and sum(len(tp.partitions) for tp in r.assignment.topic_partitions) == partitions)
    call(t, CONSUMER_GROUP_HEARTBEAT, "ConsumerGroupHeartbeatRequest", record=False, group_id=probe,
         member_id=probe, member_epoch=i32(-1), instance_id=None, rack_id=None, rebalance_timeout=ms(-1),
         subscribed_topic_names=None, subscribed_topic_regex=None, server_assignor=None,
         topic_partitions=None)
    return resp


def join(t: Target, group: str, member: str, topics: tuple[str, ...] = ("cg-topic",), *, label: str,
         **kw: Any) -> Any:
    return heartbeat(t, group, member, 0, topics=topics, owned=(), rebalance_ms=30000, label=label, **kw)


def owned_of(response: Any) -> tuple[tuple[Any, tuple[int, ...]], ...]:
    """What a member owns once it took the answer's assignment."""
    if response.assignment is None:
        return ()
    return tuple((tp.topic_id, tuple(int(p) for p in tp.partitions)) for tp in response.assignment.topic_partitions)


def describe(t: Target, *groups: str, label: str) -> Any:
    return call(t, CONSUMER_GROUP_DESCRIBE, "ConsumerGroupDescribeRequest", label=label, group_ids=groups,
                include_authorized_operations=False)


@session("join-reconcile-leave", "a first member takes every partition; a second joins: the first is told to "
         "revoke half and stays at its epoch until it does, the second waits for them; both stable; "
         "ConsumerGroupDescribe throughout; both leave")
def _join_reconcile_leave(t: Target) -> None:
    create_topic(t, "cg-topic", 4)
    find_coordinator(t, "cg-a", key_type=0)
    a = join(t, "cg-a", "member-a", label="a joins")
    everything = owned_of(a)
    describe(t, "cg-a", label="one member")
    a = heartbeat(t, "cg-a", "member-a", int(a.member_epoch), owned=everything, label="a steady")
    b = join(t, "cg-a", "member-b", label="b joins")
    describe(t, "cg-a", label="b waiting")
    a1 = heartbeat(t, "cg-a", "member-a", int(a.member_epoch), owned=everything, label="a told to revoke")
    kept = owned_of(a1)
    heartbeat(t, "cg-a", "member-a", int(a1.member_epoch), owned=kept, label="a revoked")
    b = heartbeat(t, "cg-a", "member-b", int(b.member_epoch), owned=(), label="b gets the rest")
    describe(t, "cg-a", label="stable")
    heartbeat(t, "cg-a", "member-b", int(b.member_epoch), owned=owned_of(b), label="b steady")
    heartbeat(t, "cg-a", "member-a", -1, label="a leaves")
    heartbeat(t, "cg-a", "member-b", -1, label="b leaves")
    describe(t, "cg-a", label="empty")


@session("errors", "Kafka's refusals and messages: each invalid request, an unknown member and group, a fenced "
         "epoch, an unsupported assignor, a second static member with the same instance id, describing a classic "
         "group and one that never existed")
def _errors(t: Target) -> None:
    find_coordinator(t, "cg-e", key_type=0)
    heartbeat(t, "cg-e", "", 0, topics=("cg-topic",), owned=(), rebalance_ms=1000, label="no member id")
    heartbeat(t, "cg-e", "m", 0, topics=("cg-topic",), owned=(), rebalance_ms=1000, rack=" ", label="blank rack")
    heartbeat(t, "cg-e", "m", 0, topics=("cg-topic",), owned=(), label="no rebalance timeout")
    heartbeat(t, "cg-e", "m", 0, topics=("cg-topic",), rebalance_ms=1000, label="no owned partitions")
    heartbeat(t, "cg-e", "m", 0, owned=(), rebalance_ms=1000, label="no subscription")
    heartbeat(t, "cg-e", "m", -2, label="static leave without instance")
    heartbeat(t, "cg-e", "m", -3, label="epoch -3")
    join(t, "cg-e", "m", assignor="sticky", label="unknown assignor")
    heartbeat(t, "cg-never", "m", 1, label="unknown group")
    a = join(t, "cg-e", "m1", label="m1 joins")
    heartbeat(t, "cg-e", "nobody", 1, label="unknown member")
    heartbeat(t, "cg-e", "m1", int(a.member_epoch) + 5, label="epoch ahead")
    join(t, "cg-e", "s1", instance="inst", label="static s1")
    join(t, "cg-e", "s2", instance="inst", label="second static, same instance")
    heartbeat(t, "cg-e", "s2", 1, instance="inst", label="heartbeat of the other instance member")
    heartbeat(t, "cg-e", "m1", -1, label="m1 leaves")
    heartbeat(t, "cg-e", "m1", -1, label="m1 leaves again")
    describe(t, "cg-never", label="never existed")
    create_topic(t, "cg-e-off", 1)
    offset_commit(t, "cg-e-classic", "cg-e-off", 0, 1, label="a classic group by its offsets")
    describe(t, "cg-e-classic", label="a classic group")
    heartbeat(t, "cg-e-classic", "m", 0, topics=("cg-e-off",), owned=(), rebalance_ms=1000,
              label="joining a classic group with offsets only")
    heartbeat(t, "cg-e-classic", "m", -1, label="leaving it")


@session("offsets", "OffsetCommit v9 and OffsetFetch v9 of a consumer group's member: the current epoch, a newer "
         "one, an unknown member, a standalone commit to a group with members")
def _offsets(t: Target) -> None:
    create_topic(t, "cg-off", 2)
    find_coordinator(t, "cg-o", key_type=0)
    a = join(t, "cg-o", "mo", topics=("cg-off",), label="joins")
    epoch = int(a.member_epoch)

    def commit(member: str, member_epoch: int, label: str) -> None:
        offset_commit(t, "cg-o", "cg-off", 0, 3, generation=member_epoch, member=member, version=t.v(OFFSET_COMMIT, 9),
                      label=label)

    def fetch(member: str | None, member_epoch: int, label: str) -> None:
        offset_fetch(t, "cg-o", "cg-off", [0], require_stable=True, member=member, member_epoch=member_epoch,
                     version=t.v(OFFSET_FETCH, 9), label=label)

    commit("mo", epoch, "current epoch")
    commit("mo", epoch + 1, "newer epoch")
    commit("nobody", epoch, "unknown member")
    commit("", -1, "standalone commit")
    fetch("mo", epoch, "fetch at current epoch")
    fetch("mo", epoch + 1, "fetch at a newer epoch")
    fetch(None, -1, "fetch without member")
    heartbeat(t, "cg-o", "mo", -1, label="leaves")


def join_classic_member(t: Target, group: str, topic: str, label: str, *, leader: bool) -> tuple[str, int]:
    """A classic member (JoinGroup without and with its member id, SyncGroup) subscribed to ``topic``'s two
    partitions — as the leader of a classic group, assigning them both to itself, or as a follower
    (a classic group's, or a consumer group's whose assignor assigns) → (member id, generation)."""
    first = join_classic(t, group, topics=(topic,), label=f"{label} (no member id)")
    joined = join_classic(t, group, str(first.member_id), topics=(topic,), label=label)
    member, generation = str(joined.member_id), int(joined.generation_id)
    both = Assignment(partitions=(TopicPartition(topic, 0), TopicPartition(topic, 1)))
    sync(t, group, generation, member, {member: both} if leader else {}, label=f"{label}: sync")
    return member, generation


@session("empty-group-migration", "an empty group changes protocol with its offsets (Kafka's migration of an empty "
         "group): a classic member commits and leaves; a ConsumerGroupHeartbeat joins, the classic group gives "
         "way to a consumer group that has the offsets; its member commits and leaves; a JoinGroup joins, the "
         "consumer group gives way to a classic group that has them")
def _empty_group_migration(t: Target) -> None:
    create_topic(t, "cg-mig", 2)
    find_coordinator(t, "cg-m", key_type=0)

    def classic_member(label: str) -> tuple[str, int]:
        return join_classic_member(t, "cg-m", "cg-mig", label, leader=True)

    member, generation = classic_member("classic member joins")
    offset_commit(t, "cg-m", "cg-mig", 0, 5, generation=generation, member=member, label="classic commit 0")
    offset_commit(t, "cg-m", "cg-mig", 1, 7, generation=generation, member=member, label="classic commit 1")
    leave_classic(t, "cg-m", member, label="classic member leaves")
    describe_classic(t, "cg-m", label="empty classic group")
    a = join(t, "cg-m", "cm1", topics=("cg-mig",), label="consumer member joins the empty classic group")
    epoch = int(a.member_epoch)
    describe(t, "cg-m", label="now a consumer group")
    describe_classic(t, "cg-m", label="DescribeGroups of it")
    offset_fetch(t, "cg-m", "cg-mig", [0, 1], require_stable=True, member="cm1", member_epoch=epoch,
                 version=t.v(OFFSET_FETCH, 9), label="the classic group's offsets")
    offset_commit(t, "cg-m", "cg-mig", 0, 9, generation=epoch, member="cm1", version=t.v(OFFSET_COMMIT, 9),
                  label="consumer commit")
    heartbeat(t, "cg-m", "cm1", -1, label="consumer member leaves")
    member, generation = classic_member("classic member joins the empty consumer group")
    describe_classic(t, "cg-m", label="a classic group again")
    describe(t, "cg-m", label="ConsumerGroupDescribe of it")
    offset_fetch(t, "cg-m", "cg-mig", [0, 1], require_stable=True, label="offsets kept")
    leave_classic(t, "cg-m", member, label="classic member leaves again")


@session("online-migration", "a live classic group upgraded by a ConsumerGroupHeartbeat: its member stays, told to "
         "rejoin by Heartbeat, joins the consumer group by JoinGroup (generation = member epoch) and gets its "
         "partitions by SyncGroup; the consumer member gets the rest once it revoked them; the classic member "
         "commits at its epoch and leaves by LeaveGroup; a second classic member joins the consumer group")
def _online_migration(t: Target) -> None:
    create_topic(t, "cg-live", 2)
    find_coordinator(t, "cg-l", key_type=0)
    classic, generation = join_classic_member(t, "cg-l", "cg-live", "classic joins", leader=True)
    offset_commit(t, "cg-l", "cg-live", 0, 4, generation=generation, member=classic, label="classic commit")
    n = join(t, "cg-l", "cn1", topics=("cg-live",), label="consumer member joins the live classic group")
    describe(t, "cg-l", label="converted")
    describe_classic(t, "cg-l", label="DescribeGroups of it")
    heartbeat_classic(t, "cg-l", generation, classic, label="classic heartbeat: rejoin")
    heartbeat_classic(t, "cg-l", generation + 7, classic, label="classic heartbeat, wrong generation")
    again = join_classic(t, "cg-l", classic, topics=("cg-live",), label="classic rejoins the consumer group")
    epoch = int(again.generation_id)
    sync(t, "cg-l", epoch + 1, classic, {}, label="classic sync, wrong generation")
    sync(t, "cg-l", epoch, classic, {}, label="classic syncs in the consumer group")
    heartbeat_classic(t, "cg-l", epoch, classic, label="classic heartbeat at its epoch")
    n = heartbeat(t, "cg-l", "cn1", int(n.member_epoch), owned=(), label="consumer member gets the released one")
    describe(t, "cg-l", label="both")
    offset_commit(t, "cg-l", "cg-live", 1, 6, generation=epoch, member=classic, label="classic commits at its epoch")
    offset_commit(t, "cg-l", "cg-live", 1, 6, generation=generation, member=classic,
                  label="classic commits at its old generation")
    second = join_classic(t, "cg-l", topics=("cg-live",), label="second classic joins (no member id)")
    join_classic(t, "cg-l", str(second.member_id), topics=("cg-live",), label="second classic joins")
    join_classic(t, "cg-l", topics=("cg-live",), protocol_type="other", label="a classic join of another type")
    leave_classic(t, "cg-l", str(second.member_id), label="second classic leaves")
    leave_classic(t, "cg-l", classic, label="classic leaves")
    describe(t, "cg-l", label="one consumer member")
    offset_fetch(t, "cg-l", "cg-live", [0, 1], require_stable=True, label="offsets")
    heartbeat(t, "cg-l", "cn1", -1, label="consumer member leaves")


@session("online-downgrade", "a consumer group with a consumer member and a classic member (JoinGroup into it): "
         "the consumer member leaves and the group becomes a classic group at the group epoch, rebalancing; the "
         "classic member is told to rejoin, rejoins as its leader and syncs; offsets kept")
def _online_downgrade(t: Target) -> None:
    create_topic(t, "cg-down", 2)
    find_coordinator(t, "cg-d", key_type=0)
    n = join(t, "cg-d", "dn1", topics=("cg-down",), label="consumer member joins")
    n = heartbeat(t, "cg-d", "dn1", int(n.member_epoch), owned=owned_of(n), label="consumer member steady")
    offset_commit(t, "cg-d", "cg-down", 0, 3, generation=int(n.member_epoch), member="dn1",
                  version=t.v(OFFSET_COMMIT, 9), label="consumer commit")
    classic, epoch = join_classic_member(t, "cg-d", "cg-down", "classic joins", leader=False)
    n = heartbeat(t, "cg-d", "dn1", int(n.member_epoch), owned=owned_of(n), label="consumer member told to revoke")
    n = heartbeat(t, "cg-d", "dn1", int(n.member_epoch), owned=owned_of(n), label="consumer member revoked")
    heartbeat_classic(t, "cg-d", epoch, classic, label="classic heartbeat")
    heartbeat(t, "cg-d", "dn1", -1, label="consumer member leaves: downgrade")
    describe_classic(t, "cg-d", label="a classic group, rebalancing")
    describe(t, "cg-d", label="ConsumerGroupDescribe of it")
    heartbeat_classic(t, "cg-d", epoch, classic, label="classic heartbeat: rejoin")
    again = join_classic(t, "cg-d", classic, topics=("cg-down",), label="classic rejoins the classic group")
    both = Assignment(partitions=(TopicPartition("cg-down", 0), TopicPartition("cg-down", 1)))
    sync(t, "cg-d", int(again.generation_id), classic, {classic: both}, label="classic leader syncs")
    describe_classic(t, "cg-d", label="stable classic group")
    offset_fetch(t, "cg-d", "cg-down", [0], require_stable=True, label="offsets kept")
    leave_classic(t, "cg-d", classic, label="classic leaves")


@session("static-member-downgrade", "a static consumer member (group.instance.id) commits and leaves for a moment "
         "(epoch -2, its partitions kept for it); the application comes back with a classic client and the same "
         "group.instance.id: its JoinGroup replaces the static member, the group becomes a classic group, the "
         "static classic member leads and syncs; offsets kept; it leaves")
def _static_member_downgrade(t: Target) -> None:
    create_topic(t, "cg-sdown", 2)
    find_coordinator(t, "cg-sd", key_type=0)
    n = join(t, "cg-sd", "sd1", topics=("cg-sdown",), instance="inst-sd", label="static consumer member joins")
    n = heartbeat(t, "cg-sd", "sd1", int(n.member_epoch), owned=owned_of(n), instance="inst-sd",
                  label="static consumer member steady")
    offset_commit(t, "cg-sd", "cg-sdown", 0, 11, generation=int(n.member_epoch), member="sd1",
                  version=t.v(OFFSET_COMMIT, 9), label="static consumer member commits")
    heartbeat(t, "cg-sd", "sd1", -2, instance="inst-sd", label="static consumer member leaves for a moment (-2)")
    describe(t, "cg-sd", label="its partitions kept for it")
    first = join_classic(t, "cg-sd", instance="inst-sd", topics=("cg-sdown",),
                         label="classic JoinGroup with the same group.instance.id")
    describe_classic(t, "cg-sd", label="DescribeGroups after the static replacement")
    describe(t, "cg-sd", label="ConsumerGroupDescribe after the static replacement")
    member, generation = str(first.member_id), int(first.generation_id)
    if int(first.error_code) == 0:
        both = Assignment(partitions=(TopicPartition("cg-sdown", 0), TopicPartition("cg-sdown", 1)))
        sync(t, "cg-sd", generation, member, {member: both}, instance="inst-sd", label="static classic member syncs")
        heartbeat_classic(t, "cg-sd", generation, member, instance="inst-sd", label="static classic heartbeat")
        describe_classic(t, "cg-sd", label="stable")
    offset_fetch(t, "cg-sd", "cg-sdown", [0, 1], require_stable=True, label="offsets kept")
    leave_classic(t, "cg-sd", member, instance="inst-sd", label="static classic member leaves")
    describe_classic(t, "cg-sd", label="after it left")

"""The consumer groups of a group coordinator (KIP-848, Kafka's GroupMetadataManager, its consumer
group parts): ConsumerGroupHeartbeat, ConsumerGroupDescribe, their timers, and the group side of
offsets, listing and deletion.

Jobs:

- membership: a member joins with epoch 0 (its member id its own from v1, KIP-1082), heartbeats
  with the epoch it was given, leaves with -1 (-2: a static member that will be back), or is fenced
  when it has not heartbeated for ``consumer.session.timeout.ms``, or has not revoked what it must
  within its rebalance timeout;
- each heartbeat, in Kafka's three steps: (1) the member's metadata — a change of subscription, of
  the subscribed regular expressions' topics or of the subscribed topics' partitions bumps the group
  epoch; (2) a group epoch ahead of the target assignment gets a new target from the group's assignor
  (``assignors``), at most once per ``consumer.assignment.interval.ms`` (KIP-1263; a delayed one is
  computed by a timer); (3) the member moves one step towards its target (``reconciliation``);
- persistence: every change is written to ``__consumer_offsets`` as Kafka's records
  (``consumer_records``) and only then applied (``ConsumerGroup.replay``, which the loader uses
  too); a heartbeat is answered once its records are replicated;
- static membership: an instance id's member may leave with -2 and come back within its session
  under a new member id, taking over its assignment; a second live member with the same instance id
  is refused UNRELEASED_INSTANCE_ID, an old member id FENCED_INSTANCE_ID;
- classic-protocol members (an online migration): JoinGroup/SyncGroup/Heartbeat/LeaveGroup of a
  consumer group's member, its subscription from the JoinGroup metadata, its assignment the
  server-side assignor's (``classic_*``); a live classic group's members taken over
  (``from_classic_members``) — the group coordinator decides when a group changes kind.

Errors are Kafka's (``Errors``) with Kafka's messages; handlers map them to codes. Share groups sit
beside this in the same shape (``share_groups``); classic groups are the ``Rebalancer``'s.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

import re2

from eoslog.coordinator.group.assignors import ASSIGNORS, GroupSpec, MemberSpec, PartitionAssignorError, member_order
from eoslog.coordinator.group.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupState,
    MemberState,
    TopicsImage,
    subscribed_names,
)
from eoslog.coordinator.group.consumer_records import (
    ClassicMetadata,
    ConsumerRecord,
    ConsumerRecordKind,
    GroupMetadata,
    ResolvedRegex,
    TargetMetadata,
    encode,
)
from eoslog.coordinator.group.member import JoinCallback, JoinResult, SyncCallback, SyncResult
from eoslog.coordinator.group.modern import ModernGroups
from eoslog.coordinator.group.rebalance import JoinRequest, SyncRequest
from eoslog.coordinator.group.reconciliation import FencedMemberError, Owned, next_member
from eoslog.coordinator.internal_topic import CoordinatorAppendError, InternalTopic, KeyValue
from eoslog.coordinator.timers import Scheduler
from eoslog.errors import Errors
from eoslog.protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ProtocolError,
    decode_subscription,
    encode_assignment,
)
from eoslog.protocol.consumer_protocol import Assignment as ProtocolAssignment
from eoslog.types import TopicPartition

log = logging.getLogger(__name__)

# A member's timers: its session, its revocation (rebalance timeout), and a classic-protocol member's
# JoinGroup after being told to rejoin and SyncGroup after its join (both within its rebalance timeout).
MEMBER_TIMERS = ("consumer-session", "consumer-rebalance", "consumer-join", "consumer-sync")


@dataclass(frozen=True, slots=True)
class ConsumerGroupSettings:
    """A consumer group's settings: the broker's ``group.consumer.*``, its own group configs over them."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = ("uniform", "range")  # the first is the default
    assignment_interval_ms: int = 1_000
    migration_policy: str = "bidirectional"  # group.consumer.migration.policy
    classic_max_size: int = 2**31 - 1  # group.max.size: a downgrade must fit

    @property
    def upgrade_enabled(self) -> bool:
        return self.migration_policy in ("upgrade", "bidirectional")

    @property
    def downgrade_enabled(self) -> bool:
        return self.migration_policy in ("downgrade", "bidirectional")


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: tuple[str, ...] | None  # None: unchanged
    subscribed_topic_regex: str | None  # None: unchanged; "": none any more
    server_assignor: str | None
    owned: Owned  # None: not sent
    client_id: str
    client_host: str
    api_version: int = 1


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatResult:
    error: Errors
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None  # None: not sent (unchanged)


class HeartbeatError(Exception):
    def __init__(self, error: Errors, message: str | None = None) -> None:
        super().__init__(message or error.name)
        self.error = error
        self.message = message


def invalid_heartbeat(req: ConsumerHeartbeat, assignors: Iterable[str]) -> ConsumerHeartbeatResult | None:
    """Kafka's GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid, in its order."""
    def blank(value: str | None) -> bool:
        return value is not None and not value.strip()

    def invalid(message: str) -> ConsumerHeartbeatResult:
        return ConsumerHeartbeatResult(Errors.INVALID_REQUEST, message)

    if (req.api_version >= 1 or req.member_epoch > 0 or req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH) and (
            blank(req.member_id) or req.member_id == ""):
        return invalid("MemberId can't be empty.")
    if blank(req.group_id) or req.group_id == "":
        return invalid("GroupId can't be empty.")
    if blank(req.instance_id):
        return invalid("InstanceId can't be empty.")
    if blank(req.rack_id):
        return invalid("RackId can't be empty.")
    if req.member_epoch == 0:
        if req.rebalance_timeout_ms == -1:
            return invalid("RebalanceTimeoutMs must be provided in first request.")
        if req.owned is None or any(req.owned.values()):
            return invalid("TopicPartitions must be empty when (re-)joining.")
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            return invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
    elif req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if req.instance_id is None:
            return invalid("InstanceId can't be null.")
    elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        return invalid("MemberEpoch is invalid.")
    names = list(assignors)
    if req.server_assignor is not None and req.server_assignor not in names:
        return ConsumerHeartbeatResult(Errors.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {req.server_assignor} is not "
                                       f"supported. Supported assignors: {', '.join(names)}.")
    return None


def compile_regex(regex: str) -> re2._Regexp[str]:
    """A subscription's regular expression, RE2 syntax (Kafka's RE2/J)."""
    try:
        return re2.compile(regex)
    except re2.error as e:
        raise HeartbeatError(Errors.INVALID_REGULAR_EXPRESSION,
                             f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {e}.") from None


def resolve_regex(regex: str, topic_names: Iterable[str]) -> frozenset[str]:
    """The topics a regular expression matches, whole names only (Kafka's Matcher.matches);
    internal topics are never matched (Kafka's metadata image of topics does not list them for
    consumer groups' regular expressions)."""
    pattern = compile_regex(regex)
    return frozenset(t for t in topic_names if not t.startswith("__") and pattern.fullmatch(t) is not None)


def metadata_hash(names: Iterable[str], topics: TopicsImage) -> int:
    """A hash of the subscribed topics as they are (id, name, partition count): a change — a topic
    created, deleted or grown — calls for a new assignment (KIP-1101's use; eoslog's own function)."""
    h = hashlib.blake2b(digest_size=8)
    for name in sorted(set(names)):
        meta = topics.get(name)
        if meta is not None:
            h.update(f"{meta[0]}/{name}/{meta[1]};".encode())
    value = int.from_bytes(h.digest(), "big", signed=True)
    return value


def _assignment_changed(old: ConsumerGroupMember, new: ConsumerGroupMember) -> bool:
    return old.assigned_partitions() != new.assigned_partitions()


class ConsumerGroupCoordinator(ModernGroups[ConsumerGroup, ConsumerGroupSettings, TopicsImage]):
    def __init__(self, topic: InternalTopic, scheduler: Scheduler, partition_for: Callable[[str], int],
                 status: Callable[[str], Errors], settings: Callable[[str], ConsumerGroupSettings],
                 topics: Callable[[], TopicsImage]) -> None:
        super().__init__(topic, scheduler, partition_for, status, settings, topics)
        # Set by the group coordinator: is the id a classic (or share) group's; a consumer group to take
        # a classic group's place, with the records that delete the classic one (None: refused); and
        # the classic group to forget once they are written.
        self.other_group_type: Callable[[str], str | None] = lambda _gid: None
        self.upgrade_classic: Callable[[str, ConsumerGroupSettings], tuple[ConsumerGroup, list[KeyValue]] | None] = (
            lambda _g, _s: None)
        self.on_classic_replaced: Callable[[str], None] = lambda _gid: None
        self.on_member_fenced: list[Callable[[ConsumerGroup, str], None]] = []
        # A classic JoinGroup replaced a static member (same group.instance.id): the group coordinator
        # may turn the group into a classic group (Kafka's downgrade on a static member's replacement);
        # True when it did.
        self.on_static_member_replaced: Callable[[ConsumerGroup], bool] = lambda _group: False
        self._answering: set[asyncio.Task[None]] = set()  # classic members' answers awaiting replication

    # -- records ----------------------------------------------------------------------------------

    def write(self, group: ConsumerGroup, records: list[ConsumerRecord], before: Iterable[KeyValue] = ()) -> Errors:
        """Append ``records`` to the group's partition (after ``before``, in the same batch: a
        replaced classic group's tombstones), then apply them to ``group`` (registered if new).
        Nothing changes when the append fails."""
        if not records:
            return Errors.NONE
        try:
            self.topic.append(self.partition_for(group.group_id), [*before, *(encode(r) for r in records)])
        except CoordinatorAppendError as e:
            log.error("failed to store consumer group %s: %s", group.group_id, e)
            return Errors.NOT_COORDINATOR if e.error in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.KAFKA_STORAGE_ERROR) \
                else Errors.COORDINATOR_NOT_AVAILABLE
        now = self.scheduler.now_ms()
        self.groups.setdefault(group.group_id, group)
        for record in records:
            group.replay(record, now)
        return Errors.NONE

    # -- ConsumerGroupHeartbeat ----------------------------------------------------------------

    async def heartbeat(self, req: ConsumerHeartbeat) -> ConsumerHeartbeatResult:
        settings = self.settings(req.group_id)
        invalid = invalid_heartbeat(req, settings.assignors)
        if invalid is not None:
            return invalid
        error = self.status(req.group_id)
        if error != Errors.NONE:
            return ConsumerHeartbeatResult(error)
        try:
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return await self._leave(req)
            return await self._heartbeat(req, settings)
        except HeartbeatError as e:
            return ConsumerHeartbeatResult(e.error, e.message)
        except FencedMemberError as e:
            return ConsumerHeartbeatResult(e.error, str(e))

    def _group(self, group_id: str, create: bool,
               settings: ConsumerGroupSettings) -> tuple[ConsumerGroup, list[KeyValue] | None]:
        """Kafka's getOrMaybeCreateConsumerGroup: the group, a new one, or one taking a classic group's
        place — with the records that delete the classic group, to be written with the new one's
        (None: no classic group replaced)."""
        group = self.groups.get(group_id)
        if group is not None:
            return group, None
        other = self.other_group_type(group_id)
        if other is None:
            if not create:
                raise HeartbeatError(Errors.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
            return ConsumerGroup(group_id), None
        if create and other == "classic":
            upgraded = self.upgrade_classic(group_id, settings)
            if upgraded is not None:
                return upgraded
        raise HeartbeatError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")

    async def _heartbeat(self, req: ConsumerHeartbeat, settings: ConsumerGroupSettings) -> ConsumerHeartbeatResult:
        joining = req.member_epoch == 0
        group, replacing = self._group(req.group_id, joining, settings)
        member_id = req.member_id or str(uuid.uuid4())  # v0: the coordinator names a new member
        if len(group.members) >= settings.max_size and member_id not in group.members and not (
                req.instance_id is not None and group.static_member(req.instance_id) is not None):
            raise HeartbeatError(Errors.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum "
                                 f"capacity of {settings.max_size} members.")
        records: list[ConsumerRecord] = []
        if req.instance_id is None:
            member = self._dynamic_member(group, member_id, req)
        else:
            member = self._static_member(group, member_id, req, records)
        updated = replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor,
            subscribed_topic_names=tuple(req.subscribed_topic_names) if req.subscribed_topic_names is not None
            else member.subscribed_topic_names,
            subscribed_topic_regex=(req.subscribed_topic_regex or None) if req.subscribed_topic_regex is not None
            else member.subscribed_topic_regex,
            client_id=req.client_id, client_host=req.client_host, classic=None)
        records += self.member_update_records(group, member, updated, settings)
        records += self._maybe_assign(group, settings, records, updated, member)
        target_epoch, target = self._target_for(group, updated, records)
        reconciled = self._reconcile(group, updated, target_epoch, target, req.owned, records)
        error = self.write(group, records, replacing or ())
        if error == Errors.NONE and replacing is not None:
            self.on_classic_replaced(group.group_id)
            for m in group.members.values():  # the classic group's members, now this group's
                if m.classic is not None:
                    self._schedule_session(group.group_id, m.member_id, m.classic.session_timeout_ms)
        error = await self._replicated(group.group_id, error)
        if error != Errors.NONE:
            return ConsumerHeartbeatResult(error)
        self._after_reconcile(group, reconciled, settings)
        self._schedule_session(group.group_id, reconciled.member_id, settings.session_timeout_ms)
        full = joining or (req.rebalance_timeout_ms != -1 and req.subscribed_topic_names is not None
                           and req.owned is not None)
        send = full or _assignment_changed(member, reconciled)
        return ConsumerHeartbeatResult(Errors.NONE, None, reconciled.member_id, reconciled.member_epoch,
                                       settings.heartbeat_interval_ms,
                                       reconciled.assigned_partitions() if send else None)

    def _dynamic_member(self, group: ConsumerGroup, member_id: str, req: ConsumerHeartbeat) -> ConsumerGroupMember:
        member = group.member(member_id)
        if member is None:
            if req.member_epoch != 0:
                raise HeartbeatError(Errors.UNKNOWN_MEMBER_ID,
                                     f"Member {member_id} is not a member of group {group.group_id}.")
            log.info("[GroupId %s] Member %s joins the consumer group using the consumer protocol.",
                     group.group_id, member_id)
            return ConsumerGroupMember(member_id)
        self._check_epoch(member, req.member_epoch, req.owned)
        return member

    def _static_member(self, group: ConsumerGroup, member_id: str, req: ConsumerHeartbeat,
                       records: list[ConsumerRecord]) -> ConsumerGroupMember:
        instance_id = req.instance_id
        assert instance_id is not None
        existing = group.static_member(instance_id)
        if req.member_epoch == 0:
            if existing is None:
                log.info("[GroupId %s] Static member %s with instance id %s joins the consumer group using the "
                         "consumer protocol.", group.group_id, member_id, instance_id)
                return ConsumerGroupMember(member_id, instance_id=instance_id)
            if not existing.uses_classic_protocol and existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise HeartbeatError(Errors.UNRELEASED_INSTANCE_ID, (
                    f"Static member {member_id} with instance id {instance_id} cannot join the group because the "
                    f"instance id is owned by {existing.member_id} member."))
            new = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
            records += self.replace_member_records(group, existing, new)
            log.info("[GroupId %s] Static member with instance id %s re-joins the consumer group using the "
                     "consumer protocol. Created a new member %s to replace the existing member %s.",
                     group.group_id, instance_id, member_id, existing.member_id)
            return new
        if existing is None:
            raise HeartbeatError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise HeartbeatError(Errors.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                 f"{instance_id} was fenced by member {existing.member_id}.")
        self._check_epoch(existing, req.member_epoch, req.owned)
        return existing

    @staticmethod
    def _check_epoch(member: ConsumerGroupMember, received: int, owned: Owned) -> None:
        """Kafka's throwIfConsumerGroupMemberEpochIsInvalid: the member's epoch, or its previous one
        if what it owns is part of its assignment (the answer with the new epoch was lost)."""
        if received > member.member_epoch:
            raise HeartbeatError(Errors.FENCED_MEMBER_EPOCH, (
                f"The consumer group member has a greater member epoch ({received}) than the one known by the "
                f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin."))
        if received < member.member_epoch:
            assigned = member.assigned_partitions()
            subset = owned is not None and all(set(ps) <= assigned.get(t, frozenset()) for t, ps in owned.items())
            if received != member.previous_member_epoch or not subset:
                raise HeartbeatError(Errors.FENCED_MEMBER_EPOCH, (
                    f"The consumer group member has a smaller member epoch ({received}) than the one known by the "
                    f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and "
                    f"rejoin."))

    # -- the three steps -----------------------------------------------------------------------------

    def member_update_records(self, group: ConsumerGroup, member: ConsumerGroupMember,
                              updated: ConsumerGroupMember, settings: ConsumerGroupSettings) -> list[ConsumerRecord]:
        """Step 1: the member's metadata record if it changed, its regular expression resolved, and a
        new group epoch (with the subscribed topics' hash) if the group's subscriptions changed."""
        gid = group.group_id
        records: list[ConsumerRecord] = []
        bump = False
        if updated.metadata() != member.metadata() or updated.member_id not in group.members:
            records.append(ConsumerRecord(ConsumerRecordKind.MEMBER_METADATA, gid, updated.member_id,
                                          updated.metadata()))
            bump |= updated.subscribed_topic_names != member.subscribed_topic_names
        resolved = dict(group.resolved_regexes)
        regex_records, changed = self._regex_records(group, member, updated, resolved)
        records += regex_records
        bump |= changed
        members = dict(group.members)
        members.pop(member.member_id, None)
        members[updated.member_id] = updated
        names = {n for m in members.values() for n in subscribed_names(m, resolved)}
        new_hash = metadata_hash(names, self.topics())
        bump |= new_hash != group.metadata_hash
        # A new group: Kafka 4.4 gives it epoch 1 as it is created, and the first member's subscription
        # bumps it again (its first member is at epoch 2; measured, tests/conformance consumer-groups).
        created = group.group_epoch == 0
        if bump or created:
            epoch = group.group_epoch + int(bump) + int(created)
            records.append(ConsumerRecord(ConsumerRecordKind.METADATA, gid, None, GroupMetadata(epoch, new_hash)))
            log.info("[GroupId %s] Bumped group epoch to %d with metadata hash %d.", gid, epoch, new_hash)
        return records

    def _regex_records(self, group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember,
                       resolved: dict[str, ResolvedRegex]) -> tuple[list[ConsumerRecord], bool]:
        """Resolve the group's regular expressions against the topics as they are now (eoslog
        resolves at once, where Kafka resolves in the background and bumps the epoch when done).
        ``resolved`` is updated in place; True if any subscribed topic set changed."""
        gid = group.group_id
        wanted = group.subscribed_regexes()
        if member.subscribed_topic_regex:
            wanted[member.subscribed_topic_regex] -= 1
        if updated.subscribed_topic_regex:
            wanted[updated.subscribed_topic_regex] += 1
        records: list[ConsumerRecord] = []
        # A member taking up a regex the group has resolved already changes the subscriptions too.
        changed = bool(updated.subscribed_topic_regex) and updated.subscribed_topic_regex != (
            member.subscribed_topic_regex) and updated.subscribed_topic_regex in resolved
        names = list(self.topics())
        for regex in list(resolved):
            if wanted[regex] <= 0:
                del resolved[regex]
                records.append(ConsumerRecord(ConsumerRecordKind.REGULAR_EXPRESSION, gid, regex, None))
        for regex, count in wanted.items():
            if count <= 0:
                continue
            topics = resolve_regex(regex, names)
            old = resolved.get(regex)
            if old is None or old.topics != topics:
                changed = True
                resolved[regex] = ResolvedRegex(topics, 0, self.scheduler.now_ms())
                records.append(ConsumerRecord(ConsumerRecordKind.REGULAR_EXPRESSION, gid, regex, resolved[regex]))
        return records, changed

    def _pending(self, group: ConsumerGroup,
                 records: list[ConsumerRecord]) -> tuple[int, int, dict[str, ResolvedRegex]]:
        """The group epoch, assignment epoch and regexes once ``records`` (not yet written) apply."""
        epoch, assignment_epoch, resolved = group.group_epoch, group.assignment_epoch, dict(group.resolved_regexes)
        for r in records:
            if r.kind is ConsumerRecordKind.METADATA and isinstance(r.value, GroupMetadata):
                epoch = r.value.epoch
            elif r.kind is ConsumerRecordKind.TARGET_ASSIGNMENT_METADATA and isinstance(r.value, TargetMetadata):
                assignment_epoch = r.value.assignment_epoch
            elif r.kind is ConsumerRecordKind.REGULAR_EXPRESSION and r.key is not None:
                if isinstance(r.value, ResolvedRegex):
                    resolved[r.key] = r.value
                else:
                    resolved.pop(r.key, None)
        return epoch, assignment_epoch, resolved

    def _maybe_assign(self, group: ConsumerGroup, settings: ConsumerGroupSettings, records: list[ConsumerRecord],
                      updated: ConsumerGroupMember | None = None, old: ConsumerGroupMember | None = None,
                      removed: Iterable[str] = ()) -> list[ConsumerRecord]:
        """Step 2: a new target assignment when the group epoch is ahead of it, unless the last one
        is younger than the assignment interval (a timer computes it then)."""
        epoch, assignment_epoch, resolved = self._pending(group, records)
        if epoch <= assignment_epoch:
            return []
        now = self.scheduler.now_ms()
        due = group.assignment_timestamp + settings.assignment_interval_ms
        if group.assignment_epoch > 0 and now < due:
            self._schedule_assignment(group.group_id, due - now)
            return []
        members = dict(group.members)
        for mid in removed:
            members.pop(mid, None)
        if old is not None:
            members.pop(old.member_id, None)
        if updated is not None:
            members[updated.member_id] = updated
        return self.target_records(group, epoch, members, resolved, settings, updated, old)

    def target_records(self, group: ConsumerGroup, epoch: int, members: Mapping[str, ConsumerGroupMember],
                       resolved: Mapping[str, ResolvedRegex], settings: ConsumerGroupSettings,
                       updated: ConsumerGroupMember | None = None,
                       old: ConsumerGroupMember | None = None) -> list[ConsumerRecord]:
        """Kafka's TargetAssignmentBuilder: the assignor's answer for ``members``, written as the
        members whose target changed and the new assignment epoch."""
        topics = self.topics()
        gid = group.group_id
        specs: dict[str, MemberSpec] = {}
        subscriptions: dict[str, frozenset[str]] = {}
        for mid in member_order(members):
            m = members[mid]
            current = group.target.get(mid)
            if current is None and m.instance_id is not None:
                previous = group.static_members.get(m.instance_id)
                if previous is not None:
                    current = group.target.get(previous)  # a static member takes over its predecessor's
            names = subscribed_names(m, resolved)
            subscriptions[mid] = names
            specs[mid] = MemberSpec(frozenset(topics[n][0] for n in names if n in topics), m.instance_id,
                                    m.rack_id, dict(current or {}))
        first = next(iter(subscriptions.values()), frozenset())
        homogeneous = all(s == first for s in subscriptions.values())
        counts = {topics[n][0]: topics[n][1] for s in subscriptions.values() for n in s if n in topics}
        assignor_name = self._assignor(members.values(), settings)
        try:
            assignment = ASSIGNORS[assignor_name](GroupSpec(specs, homogeneous, counts))
        except PartitionAssignorError as e:
            message = f"Failed to compute a new target assignment for epoch {epoch}: {e}"
            log.error("[GroupId %s] %s.", gid, message)
            raise HeartbeatError(Errors.UNKNOWN_SERVER_ERROR, message) from None
        records = []
        for mid in specs:
            new = {t: ps for t, ps in assignment.get(mid, {}).items() if ps}
            if new != group.target.get(mid):
                records.append(ConsumerRecord(ConsumerRecordKind.TARGET_ASSIGNMENT_MEMBER, gid, mid, new))
        records.append(ConsumerRecord(ConsumerRecordKind.TARGET_ASSIGNMENT_METADATA, gid, None,
                                      TargetMetadata(epoch, self.scheduler.now_ms())))
        log.info("[GroupId %s] Computed a new target assignment for epoch %d with '%s' assignor.", gid, epoch,
                 assignor_name)
        return records

    def preferred_assignor(self, group: ConsumerGroup, settings: ConsumerGroupSettings) -> str:
        return self._assignor(group.members.values(), settings)

    @staticmethod
    def _assignor(members: Iterable[ConsumerGroupMember], settings: ConsumerGroupSettings) -> str:
        """Kafka's computePreferredServerAssignor: the one most members ask for, else the default."""
        votes: dict[str, int] = {}
        for m in members:
            if m.server_assignor:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if not votes:
            return settings.assignors[0]
        return max(votes.items(), key=lambda kv: (kv[1], kv[0]))[0]

    def _target_for(self, group: ConsumerGroup, member: ConsumerGroupMember,
                    records: list[ConsumerRecord]) -> tuple[int, Assignment]:
        """The member's target epoch and assignment once ``records`` apply."""
        _, assignment_epoch, _ = self._pending(group, records)
        target: Assignment | None = None
        for r in records:
            if r.kind is ConsumerRecordKind.TARGET_ASSIGNMENT_MEMBER and r.key == member.member_id:
                target = r.value if isinstance(r.value, Mapping) else {}
        if target is None:
            target = group.target.get(member.member_id, {})
        return assignment_epoch, target

    def _reconcile(self, group: ConsumerGroup, member: ConsumerGroupMember, target_epoch: int, target: Assignment,
                   owned: Owned, records: list[ConsumerRecord]) -> ConsumerGroupMember:
        """Step 3: the member one step closer to its target (Kafka's maybeReconcile)."""
        if member.is_reconciled_to(target_epoch):
            return member
        _, _, resolved = self._pending(group, records)
        topics = self.topics()
        subscribed = frozenset(topics[n][0] for n in subscribed_names(member, resolved) if n in topics)

        def partition_epoch(topic_id: uuid.UUID, partition: int) -> int:
            return group.current_partition_epoch(topic_id, partition)
        new = next_member(member, target_epoch, target, subscribed, owned, partition_epoch)
        if new != member or member.member_id not in group.members:
            records.append(ConsumerRecord(ConsumerRecordKind.CURRENT_MEMBER_ASSIGNMENT, group.group_id,
                                          new.member_id, new.current()))
            log.info("[GroupId %s] Member %s new assignment state: epoch=%d, previousEpoch=%d, state=%s, "
                     "assignedPartitions=%s and revokedPartitions=%s.", group.group_id, new.member_id,
                     new.member_epoch, new.previous_member_epoch, new.state.name,
                     {str(t): sorted(ps) for t, ps in new.assigned.items()},
                     {str(t): sorted(ps) for t, ps in new.pending_revocation.items()})
        return new

    def _after_reconcile(self, group: ConsumerGroup, member: ConsumerGroupMember,
                         settings: ConsumerGroupSettings) -> None:
        """A member revoking partitions must be done within its rebalance timeout, or is fenced."""
        if member.uses_classic_protocol:
            return
        key = ("consumer-rebalance", group.group_id, member.member_id)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            epoch = member.member_epoch

            def expire() -> None:
                g = self.groups.get(group.group_id)
                m = g.member(member.member_id) if g is not None else None
                if (g is None or m is None or m.member_epoch != epoch
                        or m.state is not MemberState.UNREVOKED_PARTITIONS):
                    return
                log.info("[GroupId %s] Member %s fenced from the group because it failed to transition from epoch "
                         "%d within %dms.", group.group_id, m.member_id, epoch, m.rebalance_timeout_ms)
                self.fence(g, m.member_id)
            self.scheduler.schedule(key, max(member.rebalance_timeout_ms, 0), expire)
        else:
            self.scheduler.cancel(key)

    # -- members leaving -------------------------------------------------------------------------

    async def _leave(self, req: ConsumerHeartbeat) -> ConsumerHeartbeatResult:
        group = self.groups.get(req.group_id)
        if group is None:
            raise HeartbeatError(Errors.GROUP_ID_NOT_FOUND, f"Consumer group {req.group_id} not found.")
        if req.instance_id is None:
            if group.member(req.member_id) is None:
                raise HeartbeatError(Errors.UNKNOWN_MEMBER_ID,
                                     f"Member {req.member_id} is not a member of group {group.group_id}.")
            log.info("[GroupId %s] Member %s left the consumer group.", group.group_id, req.member_id)
            error = self.fence(group, req.member_id)
        else:
            member = group.static_member(req.instance_id)
            if member is None:
                raise HeartbeatError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
            if member.member_id != req.member_id:
                raise HeartbeatError(Errors.FENCED_INSTANCE_ID, f"Static member {req.member_id} with instance id "
                                     f"{req.instance_id} was fenced by member {member.member_id}.")
            if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                log.info("[GroupId %s] Static member %s with instance id %s temporarily left the consumer group.",
                         group.group_id, member.member_id, req.instance_id)
                leaving = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={})
                error = self.write(group, [ConsumerRecord(ConsumerRecordKind.CURRENT_MEMBER_ASSIGNMENT, group.group_id,
                                                          member.member_id, leaving.current())])
                self.scheduler.cancel(("consumer-rebalance", group.group_id, member.member_id))
            else:
                log.info("[GroupId %s] Static member %s with instance id %s left the consumer group.",
                         group.group_id, member.member_id, req.instance_id)
                error = self.fence(group, member.member_id)
        error = await self._replicated(group.group_id, error)
        if error != Errors.NONE:
            return ConsumerHeartbeatResult(error)
        return ConsumerHeartbeatResult(Errors.NONE, None, req.member_id, req.member_epoch)

    def remove_member_records(self, group: ConsumerGroup, member_id: str) -> list[ConsumerRecord]:
        gid = group.group_id
        return [ConsumerRecord(ConsumerRecordKind.CURRENT_MEMBER_ASSIGNMENT, gid, member_id, None),
                ConsumerRecord(ConsumerRecordKind.TARGET_ASSIGNMENT_MEMBER, gid, member_id, None),
                ConsumerRecord(ConsumerRecordKind.MEMBER_METADATA, gid, member_id, None)]

    def replace_member_records(self, group: ConsumerGroup, old: ConsumerGroupMember,
                               new: ConsumerGroupMember) -> list[ConsumerRecord]:
        """A static member's new member id takes the old one's place and target (Kafka's replaceMember)."""
        gid = group.group_id
        return [*self.remove_member_records(group, old.member_id),
                ConsumerRecord(ConsumerRecordKind.MEMBER_METADATA, gid, new.member_id, new.metadata()),
                ConsumerRecord(ConsumerRecordKind.TARGET_ASSIGNMENT_MEMBER, gid, new.member_id,
                               dict(group.target.get(old.member_id, {}))),
                ConsumerRecord(ConsumerRecordKind.CURRENT_MEMBER_ASSIGNMENT, gid, new.member_id, new.current())]

    def fence(self, group: ConsumerGroup, member_id: str, *, by_leave_group: bool = False) -> Errors:
        """Remove a member (left, expired, or too slow to revoke): its records go and the group
        epoch is bumped, so the others are reassigned what it held. A classic group may take over
        when only classic-protocol members are left (the online downgrade; not on a classic member's
        LeaveGroup, as Kafka 4.4)."""
        for listener in () if by_leave_group else self.on_member_fenced:
            listener(group, member_id)
            if self.groups.get(group.group_id) is not group:
                return Errors.NONE  # converted to a classic group by the listener
        gid = group.group_id
        for key in MEMBER_TIMERS:
            self.scheduler.cancel((key, gid, member_id))
        records = self.remove_member_records(group, member_id)
        member = group.member(member_id)
        members = {m: v for m, v in group.members.items() if m != member_id}
        resolved = dict(group.resolved_regexes)
        if member is not None:
            regex_records, _ = self._regex_records(group, member, replace(member, subscribed_topic_regex=None),
                                                   resolved)
            records += regex_records
        names = {n for m in members.values() for n in subscribed_names(m, resolved)}
        new_hash = metadata_hash(names, self.topics())
        records.append(ConsumerRecord(ConsumerRecordKind.METADATA, gid, None,
                                      GroupMetadata(group.group_epoch + 1, new_hash)))
        # No new target for the others here (Kafka 4.4's consumerGroupFenceMembers): their next heartbeat
        # computes it; only a group left empty has its assignment epoch follow at once.
        if not members:
            records.append(ConsumerRecord(ConsumerRecordKind.TARGET_ASSIGNMENT_METADATA, gid, None,
                                          TargetMetadata(group.group_epoch + 1, self.scheduler.now_ms())))
        return self.write(group, records)

    def _schedule_session(self, group_id: str, member_id: str, timeout_ms: int) -> None:
        def expire() -> None:
            g = self.groups.get(group_id)
            if g is None or g.member(member_id) is None:
                return
            log.info("[GroupId %s] Member %s fenced from the group because the member session expired.",
                     group_id, member_id)
            self.fence(g, member_id)
        self.scheduler.schedule(("consumer-session", group_id, member_id), timeout_ms, expire)

    def _schedule_assignment(self, group_id: str, delay_ms: int) -> None:
        key = ("consumer-assign", group_id)

        def assign() -> None:
            g = self.groups.get(group_id)
            if g is None or g.group_epoch <= g.assignment_epoch or not g.members:
                return
            try:
                records = self.target_records(g, g.group_epoch, g.members, g.resolved_regexes,
                                              self.settings(group_id))
            except HeartbeatError:
                return
            self.write(g, records)
        self.scheduler.schedule(key, delay_ms, assign)

    # -- describe, list, delete ------------------------------------------------------------------

    def describe(self, group_id: str) -> tuple[Errors, str | None, ConsumerGroup | None]:
        error = self.status(group_id)
        if error != Errors.NONE:
            return error, None, None
        group = self.groups.get(group_id)
        if group is None:
            if self.other_group_type(group_id) is not None:
                return Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.", None
            return Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
        return Errors.NONE, None, group

    def from_classic_members(self, group_id: str, generation: int,
                             members: Iterable[tuple[ConsumerGroupMember, Iterable[TopicPartition]]],
                             ) -> tuple[ConsumerGroup, list[KeyValue]]:
        """Kafka's ConsumerGroup.fromClassicGroup: a live classic group's members at its generation,
        each holding (and targeted at) what it was assigned, as a new consumer group — and the records
        that create it. The group is not registered: the heartbeat that converts it writes them."""
        topics = self.topics()
        group = ConsumerGroup(group_id)
        records: list[ConsumerRecord] = []
        names: set[str] = set()
        for member, partitions in members:
            assigned: dict[uuid.UUID, dict[int, int]] = {}
            for topic, partition in partitions:
                if topic in topics:
                    assigned.setdefault(topics[topic][0], {})[partition] = generation
            m = replace(member, state=MemberState.STABLE, member_epoch=generation, previous_member_epoch=generation,
                        assigned=assigned)
            names |= set(m.subscribed_topic_names)
            records += [ConsumerRecord(ConsumerRecordKind.MEMBER_METADATA, group_id, m.member_id, m.metadata()),
                        ConsumerRecord(ConsumerRecordKind.TARGET_ASSIGNMENT_MEMBER, group_id, m.member_id,
                                       {t: frozenset(ps) for t, ps in assigned.items()}),
                        ConsumerRecord(ConsumerRecordKind.CURRENT_MEMBER_ASSIGNMENT, group_id, m.member_id,
                                       m.current())]
        records += [ConsumerRecord(ConsumerRecordKind.METADATA, group_id, None,
                                   GroupMetadata(generation, metadata_hash(names, topics))),
                    ConsumerRecord(ConsumerRecordKind.TARGET_ASSIGNMENT_METADATA, group_id, None,
                                   TargetMetadata(generation, self.scheduler.now_ms()))]
        now = self.scheduler.now_ms()
        for record in records:
            group.replay(record, now)
        return group, [encode(r) for r in records]

    # -- classic-protocol members of a consumer group (Kafka's classicGroup*ToConsumerGroup) -------
    # A JoinGroup/SyncGroup/Heartbeat/LeaveGroup member of a consumer group that has members (an
    # online migration under way): its subscription and owned partitions come from its JoinGroup
    # metadata, its target from the group's server-side assignor; JoinGroup answers its member epoch
    # as the generation, SyncGroup its assigned partitions, Heartbeat REBALANCE_IN_PROGRESS when it
    # must rejoin to move on.

    def classic_join(self, group: ConsumerGroup, req: JoinRequest, callback: JoinCallback) -> None:
        existing = None if req.group_instance_id is None else group.static_member(req.group_instance_id)
        replacing = existing is not None and not req.member_id  # (with a member id: the same member, or fenced)
        try:
            result, records = self._classic_join(group, req)
        except HeartbeatError as e:
            callback(JoinResult(e.error, req.member_id))
            return
        if not records:
            callback(result)
            return
        error = self.write(group, records)
        if error == Errors.NONE and replacing and self.on_static_member_replaced(group):
            self._answer_when_replicated(group.group_id, error, lambda e: callback(
                result if e == Errors.NONE else JoinResult(e, req.member_id)))
            return  # now a classic group, the joining member in it at its generation
        member = group.member(result.member_id)
        if error == Errors.NONE and member is not None and member.classic is not None:
            gid, mid = group.group_id, result.member_id
            self.scheduler.cancel(("consumer-join", gid, mid))
            self._schedule_session(gid, mid, member.classic.session_timeout_ms)
            self._schedule_fence(("consumer-sync", gid, mid), req.rebalance_timeout_ms, "failed to sync within timeout")
        self._answer_when_replicated(group.group_id, error, lambda e: callback(
            result if e == Errors.NONE else JoinResult(e, req.member_id)))

    def _classic_join(self, group: ConsumerGroup, req: JoinRequest) -> tuple[JoinResult, list[ConsumerRecord]]:
        settings = self.settings(group.group_id)
        if settings.migration_policy == "disabled":  # Kafka's throwIfClassicMemberCannotJoinConsumerGroup
            raise HeartbeatError(Errors.INCONSISTENT_GROUP_PROTOCOL,
                                 f"Cannot join the consumer group {group.group_id} with the classic protocol because "
                                 "the group migration is disabled.")
        member_id = req.member_id or str(uuid.uuid4())
        if len(group.members) >= settings.max_size and member_id not in group.members and not (
                req.group_instance_id is not None and group.static_member(req.group_instance_id) is not None):
            raise HeartbeatError(Errors.GROUP_MAX_SIZE_REACHED)
        if req.protocol_type != CONSUMER_PROTOCOL_TYPE or not req.protocols or not self._common_protocol(
                group, member_id, [n for n, _ in req.protocols]):
            raise HeartbeatError(Errors.INCONSISTENT_GROUP_PROTOCOL)
        if not req.member_id and req.require_known_member_id and req.group_instance_id is None:
            log.info("[GroupId %s] Dynamic member with unknown member id joins the consumer group. Created a new "
                     "member id %s and requesting the member to rejoin with this id.", group.group_id, member_id)
            return JoinResult(Errors.MEMBER_ID_REQUIRED, member_id), []
        try:
            subscription = decode_subscription(req.protocols[0][1])
        except ProtocolError as e:
            raise HeartbeatError(Errors.INCONSISTENT_GROUP_PROTOCOL, str(e)) from e
        records: list[ConsumerRecord] = []
        member = self._classic_member(group, member_id, req, records)
        updated = replace(
            member, instance_id=req.group_instance_id, rack_id=subscription.rack_id or member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms, server_assignor=None,
            subscribed_topic_names=tuple(subscription.topics), subscribed_topic_regex=None,
            client_id=req.client_id, client_host=req.client_host,
            classic=ClassicMetadata(req.session_timeout_ms, tuple(req.protocols)))
        records += self.member_update_records(group, member, updated, settings)
        records += self._maybe_assign(group, settings, records, updated, member)
        target_epoch, target = self._target_for(group, updated, records)
        topics = self.topics()
        owned: dict[uuid.UUID, frozenset[int]] = {}
        for topic, partition in subscription.owned_partitions:
            if topic in topics:
                owned[topics[topic][0]] = owned.get(topics[topic][0], frozenset()) | {partition}
        reconciled = self._reconcile(group, updated, target_epoch, target, owned, records)
        return JoinResult(Errors.NONE, reconciled.member_id, reconciled.member_epoch, CONSUMER_PROTOCOL_TYPE,
                          req.protocols[0][0]), records

    def _classic_member(self, group: ConsumerGroup, member_id: str, req: JoinRequest,
                        records: list[ConsumerRecord]) -> ConsumerGroupMember:
        instance_id = req.group_instance_id
        if instance_id is None:
            member = group.member(member_id)
            if member is None:
                log.info("[GroupId %s] Member %s joins the consumer group using the classic protocol.",
                         group.group_id, member_id)
                return ConsumerGroupMember(member_id)
            return member
        existing = group.static_member(instance_id)
        if existing is None:
            return ConsumerGroupMember(member_id, instance_id=instance_id)
        if existing.member_id == member_id:
            return existing
        if req.member_id:
            raise HeartbeatError(Errors.FENCED_INSTANCE_ID)
        new = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        records += self.replace_member_records(group, existing, new)
        self._cancel_member_timers(group.group_id, existing.member_id)
        return new

    @staticmethod
    def _common_protocol(group: ConsumerGroup, member_id: str, names: list[str]) -> bool:
        """The classic members' protocols (their assignors' names) and ``names`` have one in common."""
        common = set(names)
        for mid, m in group.members.items():
            if m.classic is not None and mid != member_id:
                common &= {n for n, _ in m.classic.protocols}
        return bool(common)

    def _classic_member_of(self, group: ConsumerGroup, member_id: str,
                           instance_id: str | None) -> ConsumerGroupMember:
        """Kafka's validateConsumerGroupMember, then throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is None:
            member = group.member(member_id)
        else:
            member = group.static_member(instance_id)
            if member is not None and member.member_id != member_id:
                raise HeartbeatError(Errors.FENCED_INSTANCE_ID)
        if member is None or member.classic is None:
            raise HeartbeatError(Errors.UNKNOWN_MEMBER_ID)
        return member

    def classic_sync(self, group: ConsumerGroup, req: SyncRequest, callback: SyncCallback) -> None:
        try:
            member = self._classic_member_of(group, req.member_id, req.group_instance_id)
            assert member.classic is not None
            if req.generation_id != member.member_epoch:
                raise HeartbeatError(Errors.ILLEGAL_GENERATION)
            name = member.classic.protocols[0][0]
            if (req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE) or (
                    req.protocol_name is not None and req.protocol_name != name):
                raise HeartbeatError(Errors.INCONSISTENT_GROUP_PROTOCOL)
            self._raise_if_rebalancing(group, member)
        except HeartbeatError as e:
            callback(SyncResult(e.error))
            return
        gid = group.group_id
        self.scheduler.cancel(("consumer-sync", gid, member.member_id))
        self._schedule_session(gid, member.member_id, member.classic.session_timeout_ms)
        names = {topic_id: name for name, (topic_id, _) in self.topics().items()}
        partitions = tuple(sorted(TopicPartition(names[t], p) for t, ps in member.assigned_partitions().items()
                                  if t in names for p in ps))
        try:
            version = decode_subscription(member.classic.protocols[0][1]).version
        except ProtocolError:
            version = 0
        assignment = encode_assignment(ProtocolAssignment(partitions, None, min(version, 3)))
        callback(SyncResult(Errors.NONE, assignment, CONSUMER_PROTOCOL_TYPE, name))

    def _raise_if_rebalancing(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """A group epoch past the member's: it must rejoin (unless it is still revoking: it rejoins then)."""
        if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._schedule_join_timeout(group.group_id, member)
            raise HeartbeatError(Errors.REBALANCE_IN_PROGRESS)

    def classic_heartbeat(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
                          generation_id: int) -> Errors:
        try:
            member = self._classic_member_of(group, member_id, instance_id)
        except HeartbeatError as e:
            return e.error
        assert member.classic is not None
        if generation_id != member.member_epoch:
            return Errors.ILLEGAL_GENERATION
        self._schedule_session(group.group_id, member.member_id, member.classic.session_timeout_ms)
        waiting = member.state is MemberState.UNRELEASED_PARTITIONS and any(
            group.current_partition_epoch(t, p) != -1 for t, ps in group.target.get(member.member_id, {}).items()
            for p in ps if member.assignment_epoch(t, p) is None)
        if (member.member_epoch < group.group_epoch or member.state is MemberState.UNREVOKED_PARTITIONS
                or (member.state is MemberState.UNRELEASED_PARTITIONS and not waiting)):
            self._schedule_join_timeout(group.group_id, member)
            return Errors.REBALANCE_IN_PROGRESS
        return Errors.NONE

    def classic_leave(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> Errors:
        # Kafka 4.4's classicGroupLeaveToConsumerGroup: any member may be removed so, whatever its protocol
        # (an administrator removes a static member by its instance id alone).
        if instance_id is None:
            found = group.member(member_id)
        else:
            found = group.static_member(instance_id)
            if found is not None and member_id and found.member_id != member_id:
                return Errors.FENCED_INSTANCE_ID
        if found is None:
            return Errors.UNKNOWN_MEMBER_ID
        member = found
        log.info("[GroupId %s] Member %s left the consumer group through LeaveGroup.", group.group_id,
                 member.member_id)
        return self.fence(group, member.member_id, by_leave_group=True)

    def _schedule_join_timeout(self, group_id: str, member: ConsumerGroupMember) -> None:
        key = ("consumer-join", group_id, member.member_id)
        if not self.scheduler.pending(key):
            self._schedule_fence(key, member.rebalance_timeout_ms, "failed to rejoin within the rebalance timeout")

    def _schedule_fence(self, key: tuple[str, str, str], delay_ms: int, why: str) -> None:
        _, group_id, member_id = key

        def expire() -> None:
            g = self.groups.get(group_id)
            if g is not None and g.member(member_id) is not None:
                log.info("[GroupId %s] Member %s fenced from the group because it %s.", group_id, member_id, why)
                self.fence(g, member_id)
        self.scheduler.schedule(key, max(delay_ms, 0), expire)

    def _cancel_member_timers(self, group_id: str, member_id: str) -> None:
        for key in MEMBER_TIMERS:
            self.scheduler.cancel((key, group_id, member_id))

    def _answer_when_replicated(self, group_id: str, error: Errors, answer: Callable[[Errors], None]) -> None:
        """``answer`` once this coordinator's writes to the group's partition are replicated."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop (unit tests): nothing to wait for
            answer(error)
            return

        async def wait() -> None:
            answer(await self._replicated(group_id, error))
        task = loop.create_task(wait())
        self._answering.add(task)
        task.add_done_callback(self._answering.discard)

    def owned(self, owned_partition: Callable[[int], bool]) -> list[ConsumerGroup]:
        return [g for g in self.groups.values() if owned_partition(self.partition_for(g.group_id))]

    def delete(self, group_id: str) -> Errors:
        """DeleteGroups of a consumer group: only an empty one; its records become tombstones."""
        group = self.groups.get(group_id)
        if group is None:
            return Errors.GROUP_ID_NOT_FOUND
        if group.members:
            return Errors.NON_EMPTY_GROUP
        return self.remove(group)

    def remove(self, group: ConsumerGroup, then: Iterable[KeyValue] = ()) -> Errors:
        """Write the group's tombstones (and ``then``, in the same batch: the classic group replacing it)
        and forget it (deleted, or converted)."""
        try:
            self.topic.append(self.partition_for(group.group_id), [*(encode(r) for r in group.tombstones()), *then])
        except CoordinatorAppendError as e:
            log.error("failed to delete consumer group %s: %s", group.group_id, e)
            return Errors.COORDINATOR_NOT_AVAILABLE
        group.mark_dead(self.scheduler.now_ms())
        self.groups.pop(group.group_id, None)
        self.scheduler.cancel(("consumer-assign", group.group_id))
        for mid in group.members:
            for key in MEMBER_TIMERS:
                self.scheduler.cancel((key, group.group_id, mid))
        return Errors.NONE

    # -- loading ----------------------------------------------------------------------------------

    def replay(self, record: ConsumerRecord) -> None:
        """One consumer group record of a ``__consumer_offsets`` partition being loaded."""
        group = self.groups.get(record.group_id)
        if group is None:
            if record.value is None:
                return
            group = self.groups[record.group_id] = ConsumerGroup(record.group_id)
        group.replay(record, self.scheduler.now_ms())
        if record.kind is ConsumerRecordKind.METADATA and record.value is None:
            del self.groups[record.group_id]

    def loaded(self, partition: int) -> None:
        """The groups of ``partition`` are loaded: their members must heartbeat within a session;
        a target assignment left behind is computed again at the next heartbeat."""
        for group in list(self.groups.values()):
            if self.partition_for(group.group_id) != partition:
                continue
            settings = self.settings(group.group_id)
            for member in group.members.values():
                timeout = member.classic.session_timeout_ms if member.classic else settings.session_timeout_ms
                self._schedule_session(group.group_id, member.member_id, timeout)

    def unload(self, partition: int) -> None:
        for gid in [g for g in self.groups if self.partition_for(g) == partition]:
            group = self.groups.pop(gid)
            self._cancel_timers(group)

    def _cancel_timers(self, group: ConsumerGroup) -> None:
        self.scheduler.cancel(("consumer-assign", group.group_id))
        for mid in group.members:
            for key in MEMBER_TIMERS:
                self.scheduler.cancel((key, group.group_id, mid))

    def shutdown(self) -> None:
        for group in self.groups.values():
            self._cancel_timers(group)
        self.groups.clear()

    def is_empty_state(self, group: ConsumerGroup) -> bool:
        return group.state is ConsumerGroupState.EMPTY

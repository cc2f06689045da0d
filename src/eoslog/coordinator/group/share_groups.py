"""The share groups of a group coordinator (Kafka's GroupMetadataManager, its share-group
parts): ShareGroupHeartbeat, ShareGroupDescribe, and the group side of the admin APIs
(DeleteGroups, AlterShareGroupOffsets, DeleteShareGroupOffsets, DescribeShareGroupOffsets).

Jobs:

- membership: a member joins with epoch 0 (its member id is its own, KIP-1082), heartbeats
  with the epoch it was given, leaves with -1, or is removed when it has not heartbeated for
  ``share.session.timeout.ms``; each change of members or subscriptions bumps the group epoch
  and recomputes the target assignment (``share_group.simple_assignment``);
- share-partition states: a partition is handed to members only once the share coordinator
  has its state (InitializeShareGroupState, start offset -1: share.auto.offset.reset decides at
  the first fetch); which ones are initialized is recorded (ShareGroupStatePartitionMetadata)
  so a coordinator that takes over does not initialize them again;
- persistence in ``__consumer_offsets`` as Kafka's records (``share_records``), appended through
  the group coordinator's topic; a heartbeat is answered once its records are replicated;
- telling the share-partition leaders on this broker when a member is removed, so its
  acquired records are released at once (``on_member_removed``).

Errors are Kafka's (``Errors``); handlers map them to codes.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from eoslog.coordinator.group.modern import ModernGroups
from eoslog.coordinator.group.share_group import (
    Assignment,
    ShareGroup,
    ShareGroupState,
    ShareMember,
    TopicMetadata,
    simple_assignment,
)
from eoslog.coordinator.group.share_records import (
    CurrentAssignment,
    InitializedTopic,
    MemberMetadata,
    ShareRecord,
    ShareRecordKind,
    StatePartitions,
    encode,
)
from eoslog.coordinator.internal_topic import CoordinatorAppendError, InternalTopic
from eoslog.coordinator.share.persister import Persister
from eoslog.coordinator.share.state import NO_OFFSET, ShareGroupOffset, SharePartitionKey
from eoslog.coordinator.timers import Scheduler
from eoslog.errors import Errors

log = logging.getLogger(__name__)

LEAVE_EPOCH = -1


@dataclass(frozen=True, slots=True)
class ShareGroupSettings:
    session_timeout_ms: int
    heartbeat_interval_ms: int
    max_size: int


@dataclass(frozen=True, slots=True)
class ShareHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None
    subscribed_topic_names: tuple[str, ...] | None  # None: unchanged since the last heartbeat
    client_id: str
    client_host: str


@dataclass(frozen=True, slots=True)
class ShareHeartbeatResult:
    error: Errors
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None  # None: unchanged


@dataclass(frozen=True, slots=True)
class DescribedShareGroup:
    group_id: str
    state: ShareGroupState
    group_epoch: int
    assignment_epoch: int
    members: tuple[ShareMember, ...]


@dataclass(frozen=True, slots=True)
class ShareOffsetSummary:
    tp_topic: str
    partition: int
    error: Errors
    start_offset: int = NO_OFFSET
    leader_epoch: int = 0  # Kafka's answer for a share-partition without a state
    delivery_complete_count: int = -1


class ShareGroupCoordinator(ModernGroups[ShareGroup, ShareGroupSettings, TopicMetadata]):
    def __init__(self, topic: InternalTopic, scheduler: Scheduler, partition_for: Callable[[str], int],
                 status: Callable[[str], Errors], settings: Callable[[str], ShareGroupSettings],
                 topics: Callable[[], TopicMetadata]) -> None:
        super().__init__(topic, scheduler, partition_for, status, settings, topics)
        self.persister: Persister | None = None  # set by the broker: the share coordinators' door
        self.on_member_removed: list[Callable[[str, str], object]] = []
        self.is_classic_group: Callable[[str], bool] = lambda _group_id: False

    @property
    def _states(self) -> Persister:
        if self.persister is None:
            raise RuntimeError("share groups served before the broker gave them a way to the share coordinators")
        return self.persister

    # -- records --------------------------------------------------------------------------------

    def _append(self, group_id: str, records: list[ShareRecord]) -> Errors:
        if not records:
            return Errors.NONE
        now = self.scheduler.now_ms()
        try:
            self.topic.append(self.partition_for(group_id), [encode(r, now) for r in records])
        except CoordinatorAppendError as e:
            log.error("failed to store share group %s: %s", group_id, e)
            return Errors.COORDINATOR_NOT_AVAILABLE if e.error != Errors.NOT_LEADER_OR_FOLLOWER \
                else Errors.NOT_COORDINATOR
        return Errors.NONE

    @staticmethod
    def _member_records(group: ShareGroup, member: ShareMember) -> list[ShareRecord]:
        return [ShareRecord(ShareRecordKind.MEMBER_METADATA, group.group_id, member.member_id,
                            MemberMetadata(member.rack_id, member.client_id, member.client_host,
                                           member.subscribed_topic_names))]

    @staticmethod
    def _state_record(group: ShareGroup) -> ShareRecord:
        return ShareRecord(ShareRecordKind.STATE_PARTITION_METADATA, group.group_id, None, StatePartitions(
            (), tuple(InitializedTopic(t, name, ps) for t, (name, ps) in sorted(group.initialized.items(),
                                                                                   key=lambda kv: str(kv[0]))),
            tuple(sorted(group.deleting.items(), key=lambda kv: str(kv[0])))))

    # -- ShareGroupHeartbeat ------------------------------------------------------------------

    def _validate(self, req: ShareHeartbeat) -> str | None:
        if not req.group_id:
            return "GroupId can't be empty."
        if not req.member_id:
            return "MemberId can't be empty."
        if req.member_epoch < LEAVE_EPOCH:
            return f"MemberEpoch is invalid: {req.member_epoch}."
        if req.member_epoch == 0 and not req.subscribed_topic_names:
            return "SubscribedTopicNames must be set in first request."
        return None

    async def heartbeat(self, req: ShareHeartbeat) -> ShareHeartbeatResult:
        invalid = self._validate(req)
        if invalid is not None:
            return ShareHeartbeatResult(Errors.INVALID_REQUEST, invalid)
        error = self.status(req.group_id)
        if error != Errors.NONE:
            return ShareHeartbeatResult(error)
        if self.is_classic_group(req.group_id):
            return ShareHeartbeatResult(Errors.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a share group.")
        settings = self.settings(req.group_id)
        if req.member_epoch == LEAVE_EPOCH:
            return await self._leave(req)
        group = self.groups.get(req.group_id)
        member = group.members.get(req.member_id) if group is not None else None
        if member is None:
            if req.member_epoch != 0 and group is None:
                return ShareHeartbeatResult(Errors.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
            if req.member_epoch != 0:
                return ShareHeartbeatResult(Errors.UNKNOWN_MEMBER_ID,
                                            f"Member {req.member_id} is not a member of group {req.group_id}.")
            if group is None:
                group = self.groups[req.group_id] = ShareGroup(req.group_id)
            if len(group.members) >= settings.max_size:
                return ShareHeartbeatResult(Errors.GROUP_MAX_SIZE_REACHED,
                                            f"The share group has reached its maximum capacity of "
                                            f"{settings.max_size} members.")
            member = ShareMember(req.member_id, req.client_id, req.client_host)
        elif req.member_epoch not in (0, member.member_epoch):
            return ShareHeartbeatResult(Errors.FENCED_MEMBER_EPOCH,
                                        f"The share group member has a member epoch ({req.member_epoch}) which is "
                                        f"not equal to the current member epoch ({member.member_epoch}).")
        assert group is not None
        joining = req.member_epoch == 0
        records: list[ShareRecord] = []
        if self._update_member(group, member, req):
            group.members[member.member_id] = member
            group.settle_state()
            records += self._member_records(group, member)
        records += self._maybe_reassign(group)
        error = self._append(group.group_id, records)
        if error == Errors.NONE:
            error = await self._initialize(group)
        assignment_changed = error == Errors.NONE and self._reconcile(group, member)
        if error == Errors.NONE:
            error = await self._replicated(group.group_id, Errors.NONE)
        if error != Errors.NONE:
            return ShareHeartbeatResult(error)
        self._schedule_session(group, member, settings)
        return ShareHeartbeatResult(Errors.NONE, None, member.member_id, member.member_epoch,
                                    settings.heartbeat_interval_ms,
                                    dict(member.assignment) if joining or assignment_changed else None)

    def _update_member(self, group: ShareGroup, member: ShareMember, req: ShareHeartbeat) -> bool:
        """Apply what the heartbeat says of the member; True if its stored metadata changed."""
        new = member.member_id not in group.members
        changed = new
        if req.rack_id is not None and req.rack_id != member.rack_id:
            member.rack_id, changed = req.rack_id, True
        topics = req.subscribed_topic_names
        if topics is not None and tuple(topics) != member.subscribed_topic_names:
            member.subscribed_topic_names, changed = tuple(topics), True
        if (req.client_id, req.client_host) != (member.client_id, member.client_host):
            member.client_id, member.client_host, changed = req.client_id, req.client_host, True
        return changed

    def _maybe_reassign(self, group: ShareGroup) -> list[ShareRecord]:
        """A new target assignment (and group epoch) when the members' subscriptions or the
        subscribed topics' partitions changed."""
        target = simple_assignment(group.members, self.topics())
        if target == group.target and group.members.keys() == group.target.keys():
            return []
        group.group_epoch += 1
        group.assignment_epoch = group.group_epoch
        group.target = target
        gid = group.group_id
        records = [ShareRecord(ShareRecordKind.METADATA, gid, None, group.group_epoch)]
        records += [ShareRecord(ShareRecordKind.TARGET_ASSIGNMENT_MEMBER, gid, m, a) for m, a in target.items()]
        records.append(ShareRecord(ShareRecordKind.TARGET_ASSIGNMENT_METADATA, gid, None, group.assignment_epoch))
        log.info("share group %s: epoch %d, %d members, target assignment %s", gid, group.group_epoch,
                 len(group.members), {m: {str(t): sorted(ps) for t, ps in a.items()} for m, a in target.items()})
        return records

    async def _initialize(self, group: ShareGroup) -> Errors:
        """Ask the share coordinators for a state of every targeted share-partition that has none
        yet; those that got one are recorded (a failure leaves the partition out of the members'
        assignments until a later heartbeat succeeds)."""
        names = {tid: name for name, (tid, _) in self.topics().items()}
        wanted = {(t, p) for a in group.target.values() for t, ps in a.items() for p in ps
                  if not group.is_initialized(t, p)}
        if not wanted or self.persister is None:
            return Errors.NONE
        done: set[tuple[uuid.UUID, int]] = set()
        for topic_id, partition in sorted(wanted, key=lambda tp: (str(tp[0]), tp[1])):
            key = SharePartitionKey(group.group_id, topic_id, partition)
            error = await self.persister.initialize_state(key, 0, NO_OFFSET)
            if error in (Errors.NONE, Errors.FENCED_STATE_EPOCH):  # FENCED: it already has one
                done.add((topic_id, partition))
            else:
                log.warning("share group %s: initializing the state of %s failed: %s", group.group_id,
                            key.coordinator_key, error.name)
        for topic_id, partition in done:
            name, ps = group.initialized.get(topic_id, (names.get(topic_id, ""), frozenset()))
            group.initialized[topic_id] = (name, ps | {partition})
        return self._append(group.group_id, [self._state_record(group)]) if done else Errors.NONE

    def _reconcile(self, group: ShareGroup, member: ShareMember) -> bool:
        """The member takes its target assignment (initialized partitions only) at the group's
        assignment epoch; True if what it is assigned changed. Share groups revoke nothing
        first: a partition may be fetched by several members at once."""
        target = group.target.get(member.member_id, {})
        assigned: Assignment = {}
        for topic_id, ps in target.items():
            ready = frozenset(p for p in ps if group.is_initialized(topic_id, p))
            if ready:
                assigned[topic_id] = ready
        changed = assigned != member.assignment
        if not changed and member.member_epoch == group.assignment_epoch:
            return False
        member.previous_member_epoch, member.member_epoch = member.member_epoch, group.assignment_epoch
        member.assignment = assigned
        self._append(group.group_id, [ShareRecord(
            ShareRecordKind.CURRENT_MEMBER_ASSIGNMENT, group.group_id, member.member_id,
            CurrentAssignment(member.member_epoch, member.previous_member_epoch, assigned))])
        return changed

    async def _leave(self, req: ShareHeartbeat) -> ShareHeartbeatResult:
        group = self.groups.get(req.group_id)
        if group is None or req.member_id not in group.members:
            return ShareHeartbeatResult(Errors.UNKNOWN_MEMBER_ID,
                                        f"Member {req.member_id} is not a member of group {req.group_id}.")
        error = self._remove_member(group, req.member_id, "left")
        error = await self._replicated(group.group_id, error)
        return ShareHeartbeatResult(error, None, req.member_id, LEAVE_EPOCH)

    def _remove_member(self, group: ShareGroup, member_id: str, why: str) -> Errors:
        self.scheduler.cancel(("share-session", group.group_id, member_id))
        member = group.members.pop(member_id, None)
        if member is None:
            return Errors.NONE
        gid = group.group_id
        records = [ShareRecord(kind, gid, member_id, None) for kind in (
            ShareRecordKind.CURRENT_MEMBER_ASSIGNMENT, ShareRecordKind.TARGET_ASSIGNMENT_MEMBER,
            ShareRecordKind.MEMBER_METADATA)]
        group.settle_state()
        records += self._maybe_reassign(group)  # the member's target is gone: a new group epoch
        log.info("share group %s: member %s %s (epoch %d)", gid, member_id, why, group.group_epoch)
        for listener in self.on_member_removed:
            listener(gid, member_id)
        return self._append(gid, records)

    def _schedule_session(self, group: ShareGroup, member: ShareMember, settings: ShareGroupSettings) -> None:
        def expire() -> None:
            g = self.groups.get(group.group_id)
            if g is not None and member.member_id in g.members:
                self._remove_member(g, member.member_id, f"expired after {settings.session_timeout_ms} ms")
        self.scheduler.schedule(("share-session", group.group_id, member.member_id), settings.session_timeout_ms,
                                expire)

    # -- describe, list, delete -----------------------------------------------------------------

    def describe(self, group_id: str) -> tuple[Errors, DescribedShareGroup | None]:
        error = self.status(group_id)
        if error != Errors.NONE:
            return error, None
        group = self.groups.get(group_id)
        if group is None:
            if self.is_classic_group(group_id):
                return Errors.GROUP_ID_NOT_FOUND, None
            return Errors.GROUP_ID_NOT_FOUND, None
        return Errors.NONE, DescribedShareGroup(group.group_id, group.state, group.group_epoch,
                                                group.assignment_epoch, tuple(group.members.values()))

    def owned(self, owned_partition: Callable[[int], bool]) -> list[ShareGroup]:
        return [g for g in self.groups.values() if owned_partition(self.partition_for(g.group_id))]

    async def delete(self, group_id: str) -> Errors:
        """DeleteGroups of a share group: only empty; its share-partition states go first."""
        group = self.groups.get(group_id)
        if group is None:
            return Errors.GROUP_ID_NOT_FOUND
        if group.members:
            return Errors.NON_EMPTY_GROUP
        error = await self._delete_states(group, list(group.initialized))
        if error != Errors.NONE:
            return error
        gid = group.group_id
        group.move_to(ShareGroupState.DEAD)
        del self.groups[gid]
        records = [ShareRecord(k, gid, None, None) for k in (
            ShareRecordKind.STATE_PARTITION_METADATA, ShareRecordKind.TARGET_ASSIGNMENT_METADATA,
            ShareRecordKind.METADATA)]
        log.info("deleted share group %s", gid)
        return await self._replicated(gid, self._append(gid, records))

    async def _delete_states(self, group: ShareGroup, topic_ids: list[uuid.UUID]) -> Errors:
        if self.persister is None:
            return Errors.NONE
        for topic_id in topic_ids:
            name, partitions = group.initialized.get(topic_id, ("", frozenset()))
            group.deleting[topic_id] = name
            for partition in sorted(partitions):
                key = SharePartitionKey(group.group_id, topic_id, partition)
                error = await self.persister.delete_state(key)
                if error != Errors.NONE:
                    log.warning("share group %s: deleting the state of %s failed: %s", group.group_id,
                                key.coordinator_key, error.name)
                    return error
            group.initialized.pop(topic_id, None)
            group.deleting.pop(topic_id, None)
        return Errors.NONE

    # -- offsets (admin) ------------------------------------------------------------------------

    def _empty_or_refusal(self, group_id: str) -> tuple[Errors, ShareGroup | None]:
        error = self.status(group_id)
        if error != Errors.NONE:
            return error, None
        group = self.groups.get(group_id)
        if group is None:
            return Errors.GROUP_ID_NOT_FOUND, None
        if group.members:
            return Errors.NON_EMPTY_GROUP, None
        return Errors.NONE, group

    async def alter_offsets(self, group_id: str, offsets: dict[tuple[str, int], int]) -> tuple[
            Errors, dict[tuple[str, int], Errors]]:
        """AlterShareGroupOffsets: each share-partition starts again at the given offset (a new
        state epoch, so a leader still holding the old state is fenced); only an empty group."""
        error, group = self._empty_or_refusal(group_id)
        if group is None:
            return error, {}
        topics = self.topics()
        out: dict[tuple[str, int], Errors] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            meta = topics.get(topic)
            if meta is None or not 0 <= partition < meta[1]:
                out[(topic, partition)] = Errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            key = SharePartitionKey(group_id, meta[0], partition)
            epoch = await self._state_epoch(key)
            result = await self._states.initialize_state(key, epoch + 1, offset)
            out[(topic, partition)] = result
            if result == Errors.NONE:
                name, ps = group.initialized.get(meta[0], (topic, frozenset()))
                group.initialized[meta[0]] = (name, ps | {partition})
        if Errors.NONE in out.values():
            await self._replicated(group_id, self._append(group_id, [self._state_record(group)]))
        return Errors.NONE, out

    async def _state_epoch(self, key: SharePartitionKey) -> int:
        error, state = await self._states.read_summary(key)
        return state.state_epoch if error == Errors.NONE and state is not None else -1

    async def delete_offsets(self, group_id: str, topics: list[str]) -> tuple[Errors, dict[str, Errors]]:
        """DeleteShareGroupOffsets: the share-partition states of whole topics go (the next
        member starts where share.auto.offset.reset says); only an empty group."""
        error, group = self._empty_or_refusal(group_id)
        if group is None:
            return error, {}
        metadata = self.topics()
        out: dict[str, Errors] = {}
        changed = False
        for topic in topics:
            meta = metadata.get(topic)
            if meta is None:
                out[topic] = Errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if meta[0] in group.initialized:
                out[topic] = await self._delete_states(group, [meta[0]])
                changed = True
            else:
                out[topic] = Errors.NONE
        if changed:
            await self._replicated(group_id, self._append(group_id, [self._state_record(group)]))
        return Errors.NONE, out

    async def offsets(self, group_id: str, wanted: list[tuple[str, int]] | None) -> tuple[
            Errors, list[ShareOffsetSummary]]:
        """DescribeShareGroupOffsets: each share-partition's start offset (``wanted`` None: every
        initialized one)."""
        error = self.status(group_id)
        if error != Errors.NONE:
            return error, []
        group = self.groups.get(group_id)
        if group is None:
            return Errors.NONE, [ShareOffsetSummary(t, p, Errors.NONE) for t, p in wanted or []]
        metadata = self.topics()
        if wanted is None:
            wanted = sorted((name, p) for _, (name, ps) in group.initialized.items() for p in ps)
        out: list[ShareOffsetSummary] = []
        for topic, partition in wanted:
            meta = metadata.get(topic)
            if meta is None:
                out.append(ShareOffsetSummary(topic, partition, Errors.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            if not group.is_initialized(meta[0], partition) or self.persister is None:
                out.append(ShareOffsetSummary(topic, partition, Errors.NONE))
                continue
            err, state = await self.persister.read_summary(
                SharePartitionKey(group_id, meta[0], partition))
            out.append(_summary(topic, partition, err, state))
        return Errors.NONE, out

    # -- loading --------------------------------------------------------------------------------

    def replay(self, record: ShareRecord) -> None:
        """One share group record of a ``__consumer_offsets`` partition being loaded."""
        gid = record.group_id
        group = self.groups.get(gid)
        if group is None:
            if record.value is None:
                return
            group = self.groups[gid] = ShareGroup(gid)
        kind, value, mid = record.kind, record.value, record.member_id
        if kind is ShareRecordKind.METADATA:
            if value is None:
                del self.groups[gid]
                return
            assert isinstance(value, int)
            group.group_epoch = value
        elif kind is ShareRecordKind.TARGET_ASSIGNMENT_METADATA:
            group.assignment_epoch = value if isinstance(value, int) else 0
        elif kind is ShareRecordKind.STATE_PARTITION_METADATA:
            if isinstance(value, StatePartitions):
                group.initialized = {t.topic_id: (t.topic_name, t.partitions) for t in value.initialized}
                group.deleting = dict(value.deleting)
        elif mid is not None:
            self._replay_member(group, kind, mid, value)

    @staticmethod
    def _replay_member(group: ShareGroup, kind: ShareRecordKind, member_id: str, value: object) -> None:
        if kind is ShareRecordKind.TARGET_ASSIGNMENT_MEMBER:
            if isinstance(value, Mapping):
                group.target[member_id] = dict(value)
            else:
                group.target.pop(member_id, None)
            return
        if value is None:
            if kind is ShareRecordKind.MEMBER_METADATA:
                group.members.pop(member_id, None)
            return
        member = group.members.setdefault(member_id, ShareMember(member_id, "", ""))
        if isinstance(value, MemberMetadata):
            member.rack_id, member.client_id, member.client_host = value.rack_id, value.client_id, value.client_host
            member.subscribed_topic_names = value.subscribed_topic_names
        elif isinstance(value, CurrentAssignment):
            member.member_epoch, member.previous_member_epoch = value.member_epoch, value.previous_member_epoch
            member.assignment = dict(value.assigned)

    def loaded(self, partition: int) -> None:
        """The groups of ``partition`` are loaded: their states settle, their members must
        heartbeat within a session again."""
        for group in list(self.groups.values()):
            if self.partition_for(group.group_id) != partition:
                continue
            group.state = ShareGroupState.STABLE if group.members else ShareGroupState.EMPTY
            settings = self.settings(group.group_id)
            for member in group.members.values():
                self._schedule_session(group, member, settings)

    def unload(self, partition: int) -> None:
        for gid in [g for g in self.groups if self.partition_for(g) == partition]:
            group = self.groups.pop(gid)
            for member_id in group.members:
                self.scheduler.cancel(("share-session", gid, member_id))

    def shutdown(self) -> None:
        for gid in list(self.groups):
            for member_id in self.groups[gid].members:
                self.scheduler.cancel(("share-session", gid, member_id))
        self.groups.clear()


def _summary(topic: str, partition: int, error: Errors, state: ShareGroupOffset | None) -> ShareOffsetSummary:
    if error != Errors.NONE or state is None:
        return ShareOffsetSummary(topic, partition, error)
    return ShareOffsetSummary(topic, partition, Errors.NONE, state.start_offset, state.leader_epoch,
                              state.delivery_complete_count)

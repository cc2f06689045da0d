"""A consumer group of the KIP-848 protocol as its coordinator holds it (Kafka's ``ConsumerGroup``
and ``ConsumerGroupMember``): members with their epochs and assignments, the group epoch, the
target assignment, the partitions' current owners, resolved regular expressions, and the group's
committed offsets.

The state is only ever changed by ``replay``: the coordinator decides, writes the records to
``__consumer_offsets``, then replays them — the loader replays the same records after a restart
or a coordinator move, so both paths build the same group. Members are immutable values; a
heartbeat computes the next member and writes it as records.

The group's state follows from its members and epochs (Kafka's ``ConsumerGroup.maybeUpdateGroupState``)::

    Empty        no members
    Assigning    group epoch > target assignment epoch: a new target is due
    Reconciling  some member is not yet at the target assignment epoch, or still revoking/waiting
    Stable       every member holds its target
    Dead         deleted (DeleteGroups, or converted to a classic group)

``VALID_PREVIOUS`` is the whole contract; ``transition`` the only way to move. A member's own
reconciliation state (``MemberState``) and its table are in ``reconciliation``.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum, IntEnum

from eoslog.coordinator.group.consumer_records import (
    ClassicMetadata,
    ConsumerRecord,
    ConsumerRecordKind,
    CurrentAssignment,
    GroupMetadata,
    MemberMetadata,
    ResolvedRegex,
    TargetMetadata,
)
from eoslog.coordinator.group.offsets import GroupOffsets
from eoslog.errors import Errors

Assignment = Mapping[uuid.UUID, frozenset[int]]  # topic id → partitions
EpochAssignment = Mapping[uuid.UUID, Mapping[int, int]]  # topic id → partition → epoch it was assigned in
TopicsImage = Mapping[str, tuple[uuid.UUID, int]]  # topic name → (id, partition count)

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    @classmethod
    def parse(cls, name: str) -> ConsumerGroupState | None:
        for state in cls:
            if state.value.lower() == name.lower():
                return state
        return None


_LIVE = frozenset({ConsumerGroupState.EMPTY, ConsumerGroupState.ASSIGNING, ConsumerGroupState.RECONCILING,
                   ConsumerGroupState.STABLE})
VALID_PREVIOUS: dict[ConsumerGroupState, frozenset[ConsumerGroupState]] = {
    # The last member left or was fenced.
    ConsumerGroupState.EMPTY: _LIVE - {ConsumerGroupState.EMPTY},
    # A member joined, changed its subscription, or the subscribed topics changed: a new group epoch.
    ConsumerGroupState.ASSIGNING: _LIVE - {ConsumerGroupState.ASSIGNING},
    # A target assignment was computed, or a member moved to a state that is not its target's.
    ConsumerGroupState.RECONCILING: _LIVE - {ConsumerGroupState.RECONCILING},
    # The last member reached its target.
    ConsumerGroupState.STABLE: _LIVE - {ConsumerGroupState.STABLE},
    # Deleted, or converted to a classic group.
    ConsumerGroupState.DEAD: _LIVE,
}


class IllegalConsumerGroupTransition(RuntimeError):
    pass


def transition(group_id: str, current: ConsumerGroupState, target: ConsumerGroupState) -> ConsumerGroupState:
    if current is target:
        return current
    if current not in VALID_PREVIOUS[target]:
        raise IllegalConsumerGroupTransition(
            f"consumer group {group_id!r} cannot move from {current.value} to {target.value}")
    return target


class MemberState(IntEnum):
    """Where a member is in reaching its target (Kafka's ``MemberState``, its byte in the record)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @classmethod
    def of(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    classic: ClassicMetadata | None = None  # set: the member speaks JoinGroup/SyncGroup
    state: MemberState = MemberState.STABLE
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: EpochAssignment = field(default_factory=dict)
    pending_revocation: EpochAssignment = field(default_factory=dict)

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def is_reconciled_to(self, assignment_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == assignment_epoch

    def assigned_partitions(self) -> dict[uuid.UUID, frozenset[int]]:
        return {t: frozenset(ps) for t, ps in self.assigned.items() if ps}

    def assignment_epoch(self, topic_id: uuid.UUID, partition: int) -> int | None:
        return self.assigned.get(topic_id, {}).get(partition)

    def pending_revocation_epoch(self, topic_id: uuid.UUID, partition: int) -> int | None:
        return self.pending_revocation.get(topic_id, {}).get(partition)

    # -- records ----------------------------------------------------------------------------

    def metadata(self) -> MemberMetadata:
        return MemberMetadata(self.instance_id, self.rack_id, self.client_id, self.client_host,
                              self.subscribed_topic_names, self.subscribed_topic_regex, self.rebalance_timeout_ms,
                              self.server_assignor, self.classic)

    def current(self) -> CurrentAssignment:
        return CurrentAssignment(self.member_epoch, self.previous_member_epoch, int(self.state), self.assigned,
                                 self.pending_revocation)

    def with_metadata(self, m: MemberMetadata) -> ConsumerGroupMember:
        return replace(self, instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
                       client_host=m.client_host, subscribed_topic_names=tuple(m.subscribed_topic_names),
                       subscribed_topic_regex=m.subscribed_topic_regex, rebalance_timeout_ms=m.rebalance_timeout_ms,
                       server_assignor=m.server_assignor, classic=m.classic)

    def with_current(self, c: CurrentAssignment) -> ConsumerGroupMember:
        return replace(self, member_epoch=c.member_epoch, previous_member_epoch=c.previous_member_epoch,
                       state=MemberState.of(c.state), assigned=c.assigned, pending_revocation=c.pending_revocation)


def subscribed_names(member: ConsumerGroupMember, resolved: Mapping[str, ResolvedRegex]) -> frozenset[str]:
    """The topic names a member is subscribed to: by name, and those its regular expression
    resolved to (an unresolved one matches nothing)."""
    names = set(member.subscribed_topic_names)
    if member.subscribed_topic_regex:
        regex = resolved.get(member.subscribed_topic_regex)
        if regex is not None:
            names |= regex.topics
    return frozenset(names)


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.state = ConsumerGroupState.EMPTY
        self.group_epoch = 0
        self.metadata_hash = 0
        self.assignment_epoch = 0
        self.assignment_timestamp = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}  # instance id → member id
        self.target: dict[str, Assignment] = {}  # member id → target assignment
        self.resolved_regexes: dict[str, ResolvedRegex] = {}
        self.offsets = GroupOffsets()
        self.state_timestamp = 0  # when the group became empty (offsets retention)
        # Derived: which member's epoch owns (or is still revoking) each partition.
        self._partition_epochs: dict[tuple[uuid.UUID, int], int] = {}
        self._target_owner: dict[tuple[uuid.UUID, int], str] = {}

    def __repr__(self) -> str:
        return (f"ConsumerGroup({self.group_id!r}, {self.state.value}, epoch={self.group_epoch}, "
                f"assignment_epoch={self.assignment_epoch}, members={len(self.members)})")

    # -- queries ------------------------------------------------------------------------------

    def member(self, member_id: str) -> ConsumerGroupMember | None:
        return self.members.get(member_id)

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return self.members.get(member_id) if member_id is not None else None

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The epoch of the member owning the partition, or -1 if it is free."""
        return self._partition_epochs.get((topic_id, partition), -1)

    def target_owner(self, topic_id: uuid.UUID, partition: int) -> str | None:
        return self._target_owner.get((topic_id, partition))

    def subscribed_regexes(self) -> Counter[str]:
        return Counter(m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex)

    def subscribed_topic_names(self, resolved: Mapping[str, ResolvedRegex] | None = None) -> Counter[str]:
        """Topic name → how many members subscribe to it (names and resolved regexes)."""
        resolved = self.resolved_regexes if resolved is None else resolved
        counts: Counter[str] = Counter()
        for m in self.members.values():
            counts.update(subscribed_names(m, resolved))
        return counts

    def all_use_classic_protocol_except(self, member_id: str) -> bool:
        return all(m.uses_classic_protocol for mid, m in self.members.items() if mid != member_id)

    def compute_state(self) -> ConsumerGroupState:
        """Kafka's ConsumerGroup.maybeUpdateGroupState."""
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def settle_state(self, now_ms: int) -> None:
        if self.state is ConsumerGroupState.DEAD:
            return
        target = self.compute_state()
        if target is not self.state:
            self.state = transition(self.group_id, self.state, target)
            self.state_timestamp = now_ms

    def mark_dead(self, now_ms: int) -> None:
        self.state = transition(self.group_id, self.state, ConsumerGroupState.DEAD)
        self.state_timestamp = now_ms

    # -- offsets (Kafka's ConsumerGroup.validateOffsetCommit / validateOffsetFetch) ----------------

    def validate_offset_commit(self, member_id: str, instance_id: str | None, member_epoch: int,
                               transactional: bool, api_version: int) -> tuple[Errors, str | None,
                                                                                Callable[[uuid.UUID, int, str],
                                                                                         tuple[Errors, str | None]]]:
        """(error, message, per-partition check): KIP-848's fencing of stale commits. A commit with
        the member's current epoch passes; an older epoch passes only for partitions the member
        has held (or still revokes) since that epoch (KIP-1251); a newer one is refused."""
        def ok(_topic_id: uuid.UUID, _partition: int, _topic: str) -> tuple[Errors, str | None]:
            return Errors.NONE, None
        if member_epoch < 0 and not self.members:
            return Errors.NONE, None, ok  # a standalone consumer's commit, the group empty
        if transactional and member_epoch == -1 and member_id == "" and instance_id is None:
            return Errors.NONE, None, ok  # a transactional commit without group metadata
        member = self.members.get(member_id)
        if member is None:
            return Errors.UNKNOWN_MEMBER_ID, None, ok
        if not transactional and not member.uses_classic_protocol and api_version < 9:
            return (Errors.UNSUPPORTED_VERSION,
                    "OffsetCommit version 9 or above must be used by members using the consumer group protocol", ok)
        if member_epoch == member.member_epoch:
            return Errors.NONE, None, ok
        stale = Errors.ILLEGAL_GENERATION if member.uses_classic_protocol else Errors.STALE_MEMBER_EPOCH
        if member_epoch > member.member_epoch:
            what = "generation id" if member.uses_classic_protocol else "member epoch"
            return stale, (f"Received {what} {member_epoch} is newer than current member epoch "
                           f"{member.member_epoch}."), ok

        def by_assignment_epoch(topic_id: uuid.UUID, partition: int, topic: str) -> tuple[Errors, str | None]:
            epoch = member.assignment_epoch(topic_id, partition)
            if epoch is None:
                epoch = member.pending_revocation_epoch(topic_id, partition)
            if epoch is None:
                return stale, f"Partition {topic}-{partition} is not assigned or pending revocation for member."
            if member_epoch < epoch:
                what = "generation id" if member.uses_classic_protocol else "member epoch"
                return stale, (f"Received {what} {member_epoch} is older than assignment epoch {epoch} for "
                               f"partition {topic}-{partition}.")
            return Errors.NONE, None
        return Errors.NONE, None, by_assignment_epoch

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> Errors:
        """OffsetFetch v9+ with a member: it must be in the group at that epoch."""
        if member_epoch < 0 and member_id in (None, ""):
            return Errors.NONE
        member = self.members.get(member_id or "")
        if member is None:
            return Errors.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return Errors.ILLEGAL_GENERATION if member.uses_classic_protocol else Errors.STALE_MEMBER_EPOCH
        return Errors.NONE

    # -- replay: the one way the group changes ------------------------------------------------------

    def replay(self, record: ConsumerRecord, now_ms: int) -> None:
        kind, value, key = record.kind, record.value, record.key
        if kind is ConsumerRecordKind.METADATA:
            if isinstance(value, GroupMetadata):
                self.group_epoch, self.metadata_hash = value.epoch, value.metadata_hash
        elif kind is ConsumerRecordKind.TARGET_ASSIGNMENT_METADATA:
            if isinstance(value, TargetMetadata):
                self.assignment_epoch, self.assignment_timestamp = value.assignment_epoch, value.assignment_timestamp
        elif kind is ConsumerRecordKind.REGULAR_EXPRESSION:
            assert key is not None
            if isinstance(value, ResolvedRegex):
                self.resolved_regexes[key] = value
            else:
                self.resolved_regexes.pop(key, None)
        elif kind is ConsumerRecordKind.TARGET_ASSIGNMENT_MEMBER:
            assert key is not None
            self._set_target(key, value if isinstance(value, Mapping) else None)
        elif kind is ConsumerRecordKind.MEMBER_METADATA:
            assert key is not None
            if isinstance(value, MemberMetadata):
                old = self.members.get(key)
                self._put_member((old or ConsumerGroupMember(key)).with_metadata(value), old)
            else:
                old = self.members.get(key)
                if old is not None:
                    self._remove_partition_epochs(old)
                    del self.members[key]
                    if old.instance_id is not None and self.static_members.get(old.instance_id) == key:
                        del self.static_members[old.instance_id]
        elif kind is ConsumerRecordKind.CURRENT_MEMBER_ASSIGNMENT:
            assert key is not None
            old = self.members.get(key)
            if isinstance(value, CurrentAssignment):
                self._put_member((old or ConsumerGroupMember(key)).with_current(value), old)
            elif old is not None:
                # The member's assignment goes first; its metadata tombstone follows.
                self._put_member(replace(old, state=MemberState.STABLE, member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                         previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH, assigned={},
                                         pending_revocation={}), old)
        self.settle_state(now_ms)

    def _put_member(self, member: ConsumerGroupMember, old: ConsumerGroupMember | None) -> None:
        if old is not None:
            self._remove_partition_epochs(old)
            if old.instance_id is not None and old.instance_id != member.instance_id and (
                    self.static_members.get(old.instance_id) == old.member_id):
                del self.static_members[old.instance_id]
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._add_partition_epochs(member)

    def _add_partition_epochs(self, member: ConsumerGroupMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, ps in assignment.items():
                for p in ps:
                    self._partition_epochs[(topic_id, p)] = member.member_epoch

    def _remove_partition_epochs(self, member: ConsumerGroupMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, ps in assignment.items():
                for p in ps:
                    if self._partition_epochs.get((topic_id, p)) == member.member_epoch:
                        del self._partition_epochs[(topic_id, p)]

    def _set_target(self, member_id: str, assignment: Assignment | None) -> None:
        for topic_id, ps in self.target.pop(member_id, {}).items():
            for p in ps:
                if self._target_owner.get((topic_id, p)) == member_id:
                    del self._target_owner[(topic_id, p)]
        if assignment is not None:
            self.target[member_id] = dict(assignment)
            for topic_id, ps in assignment.items():
                for p in ps:
                    self._target_owner[(topic_id, p)] = member_id

    # -- records describing the whole group (conversions, deletion) ---------------------------------

    def tombstones(self) -> list[ConsumerRecord]:
        """Every record of the group, deleted in Kafka's order (members' assignments, targets,
        metadata, then the group's own records)."""
        gid = self.group_id
        out: list[ConsumerRecord] = []
        for mid in self.members:
            out.append(ConsumerRecord(ConsumerRecordKind.CURRENT_MEMBER_ASSIGNMENT, gid, mid, None))
        for mid in self.target:
            out.append(ConsumerRecord(ConsumerRecordKind.TARGET_ASSIGNMENT_MEMBER, gid, mid, None))
        out.append(ConsumerRecord(ConsumerRecordKind.TARGET_ASSIGNMENT_METADATA, gid, None, None))
        for mid in self.members:
            out.append(ConsumerRecord(ConsumerRecordKind.MEMBER_METADATA, gid, mid, None))
        for regex in self.resolved_regexes:
            out.append(ConsumerRecord(ConsumerRecordKind.REGULAR_EXPRESSION, gid, regex, None))
        out.append(ConsumerRecord(ConsumerRecordKind.METADATA, gid, None, None))
        return out

    def records(self) -> list[ConsumerRecord]:
        """The records that rebuild this group from nothing (an upgraded classic group's)."""
        gid = self.group_id
        out = [ConsumerRecord(ConsumerRecordKind.MEMBER_METADATA, gid, m.member_id, m.metadata())
               for m in self.members.values()]
        out.append(ConsumerRecord(ConsumerRecordKind.METADATA, gid, None,
                                  GroupMetadata(self.group_epoch, self.metadata_hash)))
        out += [ConsumerRecord(ConsumerRecordKind.TARGET_ASSIGNMENT_MEMBER, gid, mid, a)
                for mid, a in self.target.items()]
        out.append(ConsumerRecord(ConsumerRecordKind.TARGET_ASSIGNMENT_METADATA, gid, None,
                                  TargetMetadata(self.assignment_epoch, self.assignment_timestamp)))
        out += [ConsumerRecord(ConsumerRecordKind.CURRENT_MEMBER_ASSIGNMENT, gid, m.member_id, m.current())
                for m in self.members.values()]
        return out


def topic_ids(names: Iterable[str], topics: TopicsImage) -> set[uuid.UUID]:
    """The ids of those of ``names`` that exist."""
    return {topics[n][0] for n in names if n in topics}

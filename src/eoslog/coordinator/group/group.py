"""The in-memory state of one classic group (Kafka's ``GroupMetadata``).

Owns membership (members, pending members of the MEMBER_ID_REQUIRED round, static
members by instance id), the generation, the selected protocol, the leader, and the
group's offsets. It decides nothing about timing and writes nothing: the coordinator
drives it and persists what it must. Every state change goes through ``transition_to``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from eoslog.coordinator.group.member import (
    JoinCallback,
    JoinedMember,
    JoinResult,
    MemberMetadata,
    Protocols,
)
from eoslog.coordinator.group.offsets import GroupOffsets
from eoslog.coordinator.group.records import GroupMetadataValue, MemberRecord
from eoslog.coordinator.group.state import VALID_PREVIOUS, GroupState, transition
from eoslog.protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE, ProtocolError, decode_subscription


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group_id: str
    state: GroupState
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...]


class GroupMetadata:
    def __init__(self, group_id: str, state: GroupState, now_ms: int) -> None:
        self.group_id = group_id
        self.state = state
        self.state_timestamp = now_ms  # when the group entered its current state
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.pending_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.static_members: dict[str, str] = {}  # group.instance.id → member id
        self.new_member_added = False
        # None: unknown (not a consumer group, or a subscription that does not parse).
        self.subscribed_topics: frozenset[str] | None = None
        self.offsets = GroupOffsets()
        self._supported_protocols: Counter[str] = Counter()
        self._awaiting_join = 0

    def __repr__(self) -> str:
        return (
            f"GroupMetadata({self.group_id!r}, {self.state.value}, generation={self.generation_id}, "
            f"members={len(self.members)})"
        )

    # -- state ------------------------------------------------------------------------

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        self.state = transition(self.group_id, self.state, target)
        self.state_timestamp = now_ms

    @property
    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # -- membership ---------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def is_empty(self) -> bool:
        return not self.members

    def static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    def add(self, member: MemberMetadata) -> None:
        """Add a member (its pending JoinGroup, if any, already attached)."""
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._supported_protocols.update(member.protocol_names)
        if member.is_awaiting_join:
            self._awaiting_join += 1
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._supported_protocols.subtract(member.protocol_names)
            if member.is_awaiting_join:
                self._awaiting_join -= 1
            if member.group_instance_id is not None and (
                self.static_members.get(member.group_instance_id) == member_id
            ):
                del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return member

    def set_awaiting_join(self, member: MemberMetadata, callback: JoinCallback | None) -> None:
        """Attach (or clear, with None) the member's pending JoinGroup, keeping the count."""
        was = member.is_awaiting_join
        member.awaiting_join = callback
        self._awaiting_join += int(member.is_awaiting_join) - int(was)

    def complete_join(self, member: MemberMetadata, result: JoinResult) -> bool:
        """Answer the member's pending JoinGroup, if it has one."""
        if not member.is_awaiting_join:
            return False
        self._awaiting_join -= 1
        return member.complete_join(result)

    def update_member(
        self, member: MemberMetadata, protocols: Protocols, rebalance_timeout_ms: int,
        session_timeout_ms: int, join_callback: JoinCallback | None,
    ) -> None:
        self._supported_protocols.subtract(member.protocol_names)
        member.protocols = protocols
        self._supported_protocols.update(member.protocol_names)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        self.set_awaiting_join(member, join_callback)

    def replace_static_member(
        self, group_instance_id: str, old_member_id: str, new_member_id: str
    ) -> MemberMetadata:
        """Give a static member a new member id (the caller first answers any request still
        waiting under the old id with FENCED_INSTANCE_ID)."""
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        return member

    @property
    def has_all_members_joined(self) -> bool:
        return len(self.members) == self._awaiting_join and not self.pending_members

    @property
    def num_awaiting_join(self) -> int:
        return self._awaiting_join

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else pick any member that did; False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    # -- protocols -------------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, protocol_names: list[str]) -> bool:
        """An empty group takes any protocol type; a running one needs the same type and a
        protocol that every current member supports too."""
        if self.is_(GroupState.EMPTY) or not self.members:
            return bool(protocol_type) and bool(protocol_names)
        return self.protocol_type == protocol_type and any(
            self._supported_protocols[name] == len(self.members) for name in protocol_names
        )

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self._supported_protocols.items() if count == n}

    def select_protocol(self) -> str:
        """Kafka's choice: each member votes for its most preferred protocol among those all
        members support; the most votes win (ties go to the first member's vote)."""
        if not self.members:
            raise ValueError(f"cannot select a protocol for empty group {self.group_id!r}")
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter(m.vote(candidates) for m in self.members.values())
        return votes.most_common(1)[0][0]

    def current_member_metadata(self) -> tuple[JoinedMember, ...]:
        """What the leader receives to compute the assignment."""
        if self.protocol_name is None:
            raise ValueError(f"group {self.group_id!r} has no selected protocol")
        protocol = self.protocol_name
        return tuple(
            JoinedMember(m.member_id, m.group_instance_id, m.metadata(protocol))
            for m in self.members.values()
        )

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def _compute_subscribed_topics(self) -> frozenset[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for m in self.members.values():
                topics.update(decode_subscription(m.metadata(self.protocol_name)).topics)
        except (ProtocolError, KeyError):
            return None
        return frozenset(topics)

    def is_subscribed_to(self, topic: str) -> bool:
        return self.subscribed_topics is not None and topic in self.subscribed_topics

    # -- views and records -------------------------------------------------------------------

    def summary(self) -> GroupSummary:
        stable = self.is_(GroupState.STABLE) and self.protocol_name is not None
        protocol = self.protocol_name if stable and self.protocol_name else ""
        members = tuple(
            MemberSummary(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.metadata(protocol) if stable else b"", m.assignment,  # Kafka: the assignment in any state
            )
            for m in self.members.values()
        )
        return GroupSummary(self.group_id, self.state, self.protocol_type or "", protocol, members)

    def to_record(self, assignment: dict[str, bytes], now_ms: int) -> GroupMetadataValue:
        protocol = self.protocol_name
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=protocol,
            leader=self.leader_id,
            current_state_timestamp=now_ms,
            members=tuple(
                MemberRecord(
                    m.member_id, m.group_instance_id, m.client_id, m.client_host,
                    m.rebalance_timeout_ms, m.session_timeout_ms,
                    m.metadata(protocol) if protocol is not None else b"",
                    assignment.get(m.member_id, b""),
                )
                for m in self.members.values()
            ),
        )

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue, now_ms: int) -> GroupMetadata:
        """A group as the log last described it: Empty without members, else Stable with
        the stored assignment (members that are gone expire after their session timeout)."""
        state = GroupState.STABLE if value.members else GroupState.EMPTY
        ts = value.current_state_timestamp if value.current_state_timestamp >= 0 else now_ms
        group = cls(group_id, state, ts)
        group.protocol_type = value.protocol_type or None
        group.generation_id = value.generation
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        for rec in value.members:
            protocols: Protocols = (
                ((value.protocol, rec.subscription),) if value.protocol is not None else ()
            )
            member = MemberMetadata(
                rec.member_id, rec.group_instance_id, rec.client_id, rec.client_host,
                rec.rebalance_timeout_ms, rec.session_timeout_ms, value.protocol_type,
                protocols, assignment=rec.assignment,
            )
            group.members[member.member_id] = member
            group._supported_protocols.update(member.protocol_names)
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members), None)
        group.subscribed_topics = group._compute_subscribed_topics()
        return group

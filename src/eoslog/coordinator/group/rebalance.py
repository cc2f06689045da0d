"""The classic group membership protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup.

Kafka's ``GroupCoordinator`` (the pre-KIP-848 one) step by step, on one event loop and so
without locks:

- a member joins with no member id; on JoinGroup v4+ it first gets MEMBER_ID_REQUIRED and
  a fresh id (it is *pending* until it rejoins with it), static members (with a
  ``group.instance.id``) skip that round and take over their instance's member id;
- a join that changes the group moves it to PreparingRebalance; the join phase ends when
  every known member rejoined or the rebalance timeout passed (members that did not
  rejoin are dropped, static ones kept); a new group first waits
  ``group.initial.rebalance.delay.ms`` (longer while members keep arriving);
- the generation then increments, a protocol every member supports is selected by vote,
  the leader receives all members' metadata, and the group waits in CompletingRebalance
  for the leader's SyncGroup, whose assignment is stored in ``__consumer_offsets`` before
  any member sees it; members that never sync are dropped after the rebalance timeout;
- a member that misses its session timeout (heartbeats, joins, syncs and commits all
  count) is removed and the group rebalances.

It never touches storage itself: ``GroupStore.store_group`` persists a group.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Protocol

from eoslog.coordinator.group.group import GroupMetadata
from eoslog.coordinator.group.member import (
    UNKNOWN_MEMBER_ID,
    JoinCallback,
    JoinResult,
    MemberMetadata,
    Protocols,
    SyncCallback,
    SyncResult,
)
from eoslog.coordinator.group.state import GroupState
from eoslog.coordinator.timers import Scheduler
from eoslog.errors import Errors

log = logging.getLogger(__name__)

# Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: how long a member that joined but has
# not yet completed a join phase may wait before it is expired.
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000


@dataclass(frozen=True, slots=True)
class RebalanceConfig:
    min_session_timeout_ms: int
    max_session_timeout_ms: int
    initial_rebalance_delay_ms: int
    max_size: int
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    require_known_member_id: bool  # JoinGroup v4+: the MEMBER_ID_REQUIRED round
    supports_skip_assignment: bool  # JoinGroup v9+
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class SyncRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    assignments: dict[str, bytes]


class GroupStore(Protocol):
    def store_group(self, group: GroupMetadata, assignment: dict[str, bytes]) -> Errors:
        """Persist the group with this assignment; returns the error (Errors.NONE when stored)."""
        ...


def validate_member(group: GroupMetadata, member_id: str, group_instance_id: str | None) -> Errors:
    """UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID when the request does not come from a
    current member (a static member's instance id must map to this member id)."""
    if group_instance_id is not None:
        current = group.static_member_id(group_instance_id)
        if current is None:
            return Errors.UNKNOWN_MEMBER_ID
        if current != member_id:
            return Errors.FENCED_INSTANCE_ID
        return Errors.NONE
    return Errors.NONE if group.has(member_id) else Errors.UNKNOWN_MEMBER_ID


class Rebalancer:
    def __init__(self, config: RebalanceConfig, scheduler: Scheduler, store: GroupStore) -> None:
        self.config = config
        self.scheduler = scheduler
        self.store = store
        # Groups in their first join phase (InitialDelayedJoin) → rebalance time still left.
        self._initial_delay_left: dict[str, int] = {}

    # -- JoinGroup --------------------------------------------------------------------

    def check_session_timeout(self, session_timeout_ms: int) -> Errors:
        if not (self.config.min_session_timeout_ms <= session_timeout_ms
                <= self.config.max_session_timeout_ms):
            return Errors.INVALID_SESSION_TIMEOUT
        return Errors.NONE

    def join(self, group: GroupMetadata, req: JoinRequest, callback: JoinCallback) -> None:
        """Handle a JoinGroup for an existing group (the caller creates new groups)."""
        error = self.check_session_timeout(req.session_timeout_ms)
        if error != Errors.NONE:
            callback(JoinResult(error, req.member_id))
            return
        if not self._accept_joining_member(group, req.member_id):
            callback(JoinResult(Errors.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID))
        elif req.member_id == UNKNOWN_MEMBER_ID:
            self._join_new_member(group, req, callback)
        else:
            self._join_current_member(group, req, callback)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._check_join(group)

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        limit = self.config.max_size
        if group.is_(GroupState.EMPTY) or group.is_(GroupState.DEAD):
            return True
        if group.is_(GroupState.PREPARING_REBALANCE):
            return (group.has(member_id) and group.get(member_id).is_awaiting_join) or (
                group.num_awaiting_join < limit
            )
        return group.has(member_id) or len(group.members) < limit

    def _join_new_member(self, group: GroupMetadata, req: JoinRequest, callback: JoinCallback) -> None:
        if group.is_(GroupState.DEAD):
            callback(JoinResult(Errors.COORDINATOR_NOT_AVAILABLE, UNKNOWN_MEMBER_ID))
            return
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            callback(JoinResult(Errors.INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID))
            return
        new_id = f"{req.group_instance_id or req.client_id}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            old_id = group.static_member_id(req.group_instance_id)
            if old_id is None:
                self._add_member_and_rebalance(group, req, new_id, callback)
            else:
                self._update_static_member_and_rebalance(group, req, old_id, new_id, callback)
        elif req.require_known_member_id:
            # KIP-394: hand out the id first, so a client that retries a JoinGroup whose
            # response it lost does not leave a phantom member behind.
            group.pending_members.add(new_id)
            self.scheduler.schedule(
                ("pending", group.group_id, new_id), req.session_timeout_ms,
                lambda: self._on_pending_member_expired(group, new_id),
            )
            callback(JoinResult(Errors.MEMBER_ID_REQUIRED, new_id))
        else:
            self._add_member_and_rebalance(group, req, new_id, callback)

    def _join_current_member(self, group: GroupMetadata, req: JoinRequest, callback: JoinCallback) -> None:
        member_id = req.member_id
        if group.is_(GroupState.DEAD):
            callback(JoinResult(Errors.COORDINATOR_NOT_AVAILABLE, member_id))
            return
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            callback(JoinResult(Errors.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        if member_id in group.pending_members:
            self.scheduler.cancel(("pending", group.group_id, member_id))
            self._add_member_and_rebalance(group, req, member_id, callback)
            return
        error = validate_member(group, member_id, req.group_instance_id)
        if error != Errors.NONE:
            callback(JoinResult(error, member_id))
            return
        member = group.get(member_id)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, req, callback)
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(req.protocols):
                # A retry of a JoinGroup whose response the member did not get.
                self._schedule_heartbeat(group, member)
                callback(self._current_generation(group, member, with_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, req, callback)
        elif state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(req.protocols):
                # The leader rejoins to trigger a rebalance (e.g. its metadata changed).
                self._update_member_and_rebalance(group, member, req, callback)
            else:
                self._schedule_heartbeat(group, member)
                callback(self._current_generation(group, member, with_members=False))
        else:
            callback(JoinResult(Errors.UNKNOWN_MEMBER_ID, member_id))

    @staticmethod
    def _current_generation(group: GroupMetadata, member: MemberMetadata, with_members: bool,
                            leader_id: str | None = None, skip_assignment: bool = False) -> JoinResult:
        return JoinResult(
            Errors.NONE, member.member_id, group.generation_id, group.protocol_type, group.protocol_name,
            (leader_id if leader_id is not None else group.leader_id) or "",
            group.current_member_metadata() if with_members else (), skip_assignment,
        )

    def _add_member_and_rebalance(
        self, group: GroupMetadata, req: JoinRequest, member_id: str, callback: JoinCallback
    ) -> None:
        member = MemberMetadata(
            member_id, req.group_instance_id, req.client_id, req.client_host,
            req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type, req.protocols,
            awaiting_join=callback, is_new=True,
        )
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        self._schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id}"
                                      + (f" with group instance id {req.group_instance_id}"
                                         if req.group_instance_id else ""))

    def _update_member_and_rebalance(
        self, group: GroupMetadata, member: MemberMetadata, req: JoinRequest, callback: JoinCallback
    ) -> None:
        if member.is_awaiting_join:
            # A second JoinGroup from the same member replaces the first (whose connection is
            # gone); answer the first so nothing waits forever.
            group.complete_join(member, JoinResult(Errors.REBALANCE_IN_PROGRESS, member.member_id))
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms,
                            callback)
        self._schedule_heartbeat(group, member)
        self._maybe_prepare_rebalance(group, f"updating metadata for member {member.member_id}"
                                      + (f" (reason: {req.reason})" if req.reason else ""))

    def _update_static_member_and_rebalance(
        self, group: GroupMetadata, req: JoinRequest, old_id: str, new_id: str, callback: JoinCallback
    ) -> None:
        assert req.group_instance_id is not None
        previous_leader = group.leader_id
        old = group.get(old_id)
        # Whoever still waits under the old id is a fenced duplicate of this instance.
        group.complete_join(old, JoinResult(Errors.FENCED_INSTANCE_ID, old_id))
        old.complete_sync(SyncResult(Errors.FENCED_INSTANCE_ID))
        self.scheduler.cancel(("heartbeat", group.group_id, old_id))
        old_protocols, old_rebalance, old_session = (
            old.protocols, old.rebalance_timeout_ms, old.session_timeout_ms
        )
        member = group.replace_static_member(req.group_instance_id, old_id, new_id)
        self._schedule_heartbeat(group, member)
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms,
                            callback)
        state = group.state
        if state is GroupState.STABLE:
            if group.select_protocol() != group.protocol_name:
                self._maybe_prepare_rebalance(
                    group, f"static member {new_id} rejoined with a change of protocol"
                )
                return
            # Same protocol: persist the new member id and answer without a rebalance.
            error = self.store.store_group(group, {m.member_id: m.assignment for m in group.members.values()})
            if error != Errors.NONE:
                group.update_member(member, old_protocols, old_rebalance, old_session, None)
                group.replace_static_member(req.group_instance_id, new_id, old_id)
                self.scheduler.cancel(("heartbeat", group.group_id, new_id))
                self._schedule_heartbeat(group, member)
                callback(JoinResult(error, UNKNOWN_MEMBER_ID, group.generation_id, group.protocol_type,
                                    group.protocol_name, previous_leader or ""))
                return
            if req.supports_skip_assignment:
                # KIP-814: the leader learns it leads but must not reassign a stable group.
                is_leader = group.is_leader(new_id)
                group.complete_join(member, self._current_generation(
                    group, member, with_members=is_leader, skip_assignment=is_leader))
            else:
                # Older clients: report the previous leader id, so a rejoining leader does not
                # see itself as leader and compute an assignment nobody would receive.
                group.complete_join(member, self._current_generation(
                    group, member, with_members=False, leader_id=previous_leader or ""))
        elif state is GroupState.COMPLETING_REBALANCE:
            # The leader may be assigning to the old member id: start over.
            self._prepare_rebalance(group, f"static member {new_id} rejoined during CompletingRebalance")
        elif state is GroupState.PREPARING_REBALANCE:
            pass  # it joined this rebalance like any member
        else:
            group.complete_join(member, JoinResult(Errors.UNKNOWN_MEMBER_ID, new_id))

    # -- the join phase -----------------------------------------------------------------------

    def rebalance(self, group: GroupMetadata, reason: str) -> None:
        """A rebalance from outside the protocol (a consumer group downgraded to this classic one)."""
        self._maybe_prepare_rebalance(group, reason)

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, Errors.REBALANCE_IN_PROGRESS)
        self.scheduler.cancel(("sync", group.group_id))
        gid = group.group_id
        if group.is_(GroupState.EMPTY):
            delay = self.config.initial_rebalance_delay_ms
            self._initial_delay_left[gid] = max(group.rebalance_timeout_ms - delay, 0)
            self.scheduler.schedule(("join", gid), delay, lambda: self._on_initial_join_expired(group))
        else:
            self._initial_delay_left.pop(gid, None)
            self.scheduler.schedule(("join", gid), group.rebalance_timeout_ms,
                                    lambda: self._on_join_expired(group))
        group.transition_to(GroupState.PREPARING_REBALANCE, self.scheduler.now_ms())
        log.info(
            "preparing to rebalance group %s in state PreparingRebalance with old generation %d "
            "(reason: %s)", gid, group.generation_id, reason,
        )
        self._check_join(group)

    def _check_join(self, group: GroupMetadata) -> None:
        """Complete the join phase as soon as every member is in (not during the initial delay)."""
        if (group.is_(GroupState.PREPARING_REBALANCE) and group.group_id not in self._initial_delay_left
                and group.has_all_members_joined):
            self.scheduler.cancel(("join", group.group_id))
            self._on_complete_join(group)

    def _on_initial_join_expired(self, group: GroupMetadata) -> None:
        left = self._initial_delay_left.pop(group.group_id, 0)
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        if group.new_member_added and left > 0:
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, left)
            self._initial_delay_left[group.group_id] = max(left - delay, 0)
            self.scheduler.schedule(("join", group.group_id), delay,
                                    lambda: self._on_initial_join_expired(group))
        else:
            self._on_complete_join(group)

    def _on_join_expired(self, group: GroupMetadata) -> None:
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._on_complete_join(group)

    def _on_complete_join(self, group: GroupMetadata) -> None:
        gid = group.group_id
        self._initial_delay_left.pop(gid, None)
        for member in group.not_yet_rejoined():
            if not member.is_static:
                log.info("member %s of group %s did not rejoin in time; removing it", member.member_id, gid)
                self.scheduler.cancel(("heartbeat", gid, member.member_id))
                group.remove(member.member_id)
        if group.is_(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that did not rejoin are left: wait another round for
            # them to come back or for their sessions to expire.
            log.warning("group %s: no member rejoined, postponing the end of the join phase", gid)
            self.scheduler.schedule(("join", gid), group.rebalance_timeout_ms,
                                    lambda: self._on_join_expired(group))
            return
        now = self.scheduler.now_ms()
        group.init_next_generation(now)
        if group.is_(GroupState.EMPTY):
            log.info("group %s with generation %d is now empty", gid, group.generation_id)
            error = self.store.store_group(group, {})
            if error != Errors.NONE:
                log.warning("failed to store empty group %s generation %d: %s", gid, group.generation_id, error)
            return
        log.info(
            "stabilized group %s generation %d (protocol %s, %d members, leader %s)",
            gid, group.generation_id, group.protocol_name, len(group.members), group.leader_id,
        )
        for member in list(group.members.values()):
            group.complete_join(member, self._current_generation(
                group, member, with_members=group.is_leader(member.member_id)))
            self._schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        generation = group.generation_id
        self.scheduler.schedule(("sync", gid), group.rebalance_timeout_ms,
                                lambda: self._on_pending_sync_expired(group, generation))

    def _on_pending_sync_expired(self, group: GroupMetadata, generation: int) -> None:
        if generation != group.generation_id or not group.pending_sync_members:
            return
        if not (group.is_(GroupState.COMPLETING_REBALANCE) or group.is_(GroupState.STABLE)):
            return
        log.info("group %s: removing members that did not sync: %s", group.group_id,
                 sorted(group.pending_sync_members))
        for member_id in list(group.pending_sync_members):
            member = group.remove(member_id)
            self.scheduler.cancel(("heartbeat", group.group_id, member_id))
            if member is not None:
                member.complete_sync(SyncResult(Errors.UNKNOWN_MEMBER_ID))
        self._prepare_rebalance(group, "members did not send SyncGroup in time")

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            self.scheduler.cancel(("sync", group.group_id))

    # -- SyncGroup ----------------------------------------------------------------------------

    def sync(self, group: GroupMetadata, req: SyncRequest, callback: SyncCallback) -> None:
        if group.is_(GroupState.DEAD):
            callback(SyncResult(Errors.COORDINATOR_NOT_AVAILABLE))
            return
        error = validate_member(group, req.member_id, req.group_instance_id)
        if error != Errors.NONE:
            callback(SyncResult(error))
            return
        if req.generation_id != group.generation_id:
            callback(SyncResult(Errors.ILLEGAL_GENERATION))
            return
        if (req.protocol_type is not None and req.protocol_type != group.protocol_type) or (
            req.protocol_name is not None and req.protocol_name != group.protocol_name
        ):
            callback(SyncResult(Errors.INCONSISTENT_GROUP_PROTOCOL))
            return
        state = group.state
        if state is GroupState.EMPTY:
            callback(SyncResult(Errors.UNKNOWN_MEMBER_ID))
        elif state is GroupState.PREPARING_REBALANCE:
            callback(SyncResult(Errors.REBALANCE_IN_PROGRESS))
        elif state is GroupState.COMPLETING_REBALANCE:
            member = group.get(req.member_id)
            member.awaiting_sync = callback
            self._remove_pending_sync_member(group, req.member_id)
            if group.is_leader(req.member_id):
                log.info("assignment received from leader %s for group %s generation %d",
                         req.member_id, group.group_id, group.generation_id)
                # Members the leader left out get an empty assignment.
                assignment = {mid: req.assignments.get(mid, b"") for mid in group.members}
                error = self.store.store_group(group, assignment)
                if error != Errors.NONE:
                    self._reset_and_propagate_assignment_error(group, error)
                    self._maybe_prepare_rebalance(group, f"storing the assignment failed: {error}")
                else:
                    for m in group.members.values():
                        m.assignment = assignment[m.member_id]
                    self._propagate_assignment(group, Errors.NONE)
                    group.transition_to(GroupState.STABLE, self.scheduler.now_ms())
        else:  # Stable: a follower syncing after the leader, or a retry
            self._remove_pending_sync_member(group, req.member_id)
            member = group.get(req.member_id)
            callback(SyncResult(Errors.NONE, member.assignment, group.protocol_type, group.protocol_name))
            self._schedule_heartbeat(group, member)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: Errors) -> None:
        for m in group.members.values():
            m.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: Errors) -> None:
        for m in group.members.values():
            m.complete_sync(SyncResult(
                error, m.assignment if error == Errors.NONE else b"", group.protocol_type, group.protocol_name
            ))
            # Sessions restart now: a member's expiry was ignored while it awaited the sync.
            self._schedule_heartbeat(group, m)

    # -- Heartbeat and LeaveGroup ------------------------------------------------------------

    def heartbeat(self, group: GroupMetadata, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> Errors:
        if group.is_(GroupState.DEAD):
            return Errors.COORDINATOR_NOT_AVAILABLE
        error = validate_member(group, member_id, group_instance_id)
        if error != Errors.NONE:
            return error
        if generation_id != group.generation_id:
            return Errors.ILLEGAL_GENERATION
        if group.is_(GroupState.EMPTY):
            return Errors.UNKNOWN_MEMBER_ID
        self._schedule_heartbeat(group, group.get(member_id))
        if group.is_(GroupState.PREPARING_REBALANCE):
            return Errors.REBALANCE_IN_PROGRESS
        return Errors.NONE

    def leave(self, group: GroupMetadata, member_id: str, group_instance_id: str | None,
              reason: str | None = None) -> Errors:
        """Remove one member (by member id, or by instance id alone: admin removal)."""
        why = f"member {member_id or group_instance_id} left" + (f" ({reason})" if reason else "")
        if member_id == UNKNOWN_MEMBER_ID and group_instance_id is not None:
            current = group.static_member_id(group_instance_id)
            if current is None:
                return Errors.UNKNOWN_MEMBER_ID
            self.remove_member(group, group.get(current), why)
            return Errors.NONE
        if member_id in group.pending_members:
            self._remove_pending_member(group, member_id)
            return Errors.NONE
        error = validate_member(group, member_id, group_instance_id)
        if error != Errors.NONE:
            return error
        self.remove_member(group, group.get(member_id), why)
        return Errors.NONE

    # -- sessions --------------------------------------------------------------------------

    def schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata) -> None:
        """A sign of life from the member outside the membership APIs (an offset commit)."""
        self._schedule_heartbeat(group, member)

    def _schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata,
                            timeout_ms: int | None = None) -> None:
        member_id = member.member_id
        self.scheduler.schedule(
            ("heartbeat", group.group_id, member_id),
            member.session_timeout_ms if timeout_ms is None else timeout_ms,
            lambda: self._on_heartbeat_expired(group, member_id),
        )

    def _on_heartbeat_expired(self, group: GroupMetadata, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is None or group.is_(GroupState.DEAD):
            return
        # Members awaiting a join or sync response are waiting on the coordinator, not
        # silent, except new members, which may not wait forever.
        if member.is_new or not (member.is_awaiting_join or member.is_awaiting_sync):
            log.info("member %s in group %s has failed (session timeout %d ms); removing it",
                     member_id, group.group_id, member.session_timeout_ms)
            self.remove_member(group, member, f"session timeout of member {member_id} expired")

    def _on_pending_member_expired(self, group: GroupMetadata, member_id: str) -> None:
        if member_id in group.pending_members:
            log.info("pending member %s of group %s expired before rejoining", member_id, group.group_id)
            self._remove_pending_member(group, member_id)

    def _remove_pending_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_members.discard(member_id)
        self.scheduler.cancel(("pending", group.group_id, member_id))
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._check_join(group)

    def remove_member(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        # A member removed while its JoinGroup waits gets UNKNOWN_MEMBER_ID, so a live
        # client rejoins from scratch.
        group.complete_join(member, JoinResult(Errors.UNKNOWN_MEMBER_ID, member.member_id))
        member.complete_sync(SyncResult(Errors.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        self.scheduler.cancel(("heartbeat", group.group_id, member.member_id))
        if group.is_(GroupState.STABLE) or group.is_(GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._check_join(group)

    # -- unloading -------------------------------------------------------------------------------

    def unload(self, group: GroupMetadata, error: Errors) -> None:
        """The coordinator gives the group up (shutdown): answer whoever waits, drop timers."""
        gid = group.group_id
        for member in group.members.values():
            group.complete_join(member, JoinResult(error, member.member_id))
            member.complete_sync(SyncResult(error))
            self.scheduler.cancel(("heartbeat", gid, member.member_id))
        for member_id in group.pending_members:
            self.scheduler.cancel(("pending", gid, member_id))
        for kind in ("join", "sync"):
            self.scheduler.cancel((kind, gid))
        self._initial_delay_left.pop(gid, None)

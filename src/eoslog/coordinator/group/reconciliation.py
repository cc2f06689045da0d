"""How a member of a consumer group reaches its target assignment without a stop-the-world
rebalance (Kafka's ``CurrentAssignmentBuilder``): revoke before assign.

A member moves through ``MemberState`` one heartbeat at a time::

    STABLE ──target has a new epoch──▶ partitions to give up? ──yes──▶ UNREVOKED_PARTITIONS
                                        │ no                               │ the member's heartbeat no
                                        ▼                                  │ longer lists them
                      partitions still owned by others? ──yes──▶ UNRELEASED_PARTITIONS
                                        │ no                               │ their owners released them
                                        ▼                                  ▼
                                      STABLE (at the target's epoch) ◀──────┘

- Partitions it keeps stay assigned throughout, so a member that loses nothing keeps fetching.
- Partitions to revoke are taken away first; the member stays at its epoch (UNREVOKED_PARTITIONS)
  until it reports, in ``owned``, that it no longer holds them. Only then does it move to the
  target epoch.
- A partition is handed to a member only once no other member owns it (or is still revoking it):
  until then the member waits in UNRELEASED_PARTITIONS, at the target epoch.

``VALID_PREVIOUS`` lists which state may follow which; ``next_member`` is the one function that
decides, and it raises (never asserts) on a move the table forbids. An UNKNOWN state (written by a
newer coordinator) fences the member unless it owns nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace

from eoslog.coordinator.group.consumer_group import Assignment, ConsumerGroupMember, MemberState
from eoslog.errors import Errors, KafkaError

Owned = Mapping[uuid.UUID, frozenset[int]] | None  # what the member's heartbeat says it owns (None: not sent)

VALID_PREVIOUS: dict[MemberState, frozenset[MemberState]] = {
    MemberState.STABLE: frozenset(MemberState),
    MemberState.UNREVOKED_PARTITIONS: frozenset({MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS,
                                                 MemberState.UNRELEASED_PARTITIONS}),
    MemberState.UNRELEASED_PARTITIONS: frozenset(MemberState),
    MemberState.UNKNOWN: frozenset(),  # only ever read from a record, never chosen
}


class IllegalMemberStateTransition(RuntimeError):
    pass


class FencedMemberError(KafkaError):
    def __init__(self, message: str) -> None:
        super().__init__(Errors.FENCED_MEMBER_EPOCH, message)


def _move(member: ConsumerGroupMember, state: MemberState, epoch: int,
          assigned: Mapping[uuid.UUID, Mapping[int, int]],
          pending: Mapping[uuid.UUID, Mapping[int, int]]) -> ConsumerGroupMember:
    if member.state not in VALID_PREVIOUS[state]:
        raise IllegalMemberStateTransition(
            f"member {member.member_id} cannot move from {member.state.name} to {state.name}")
    # Kafka's Builder.updateMemberEpoch: the previous epoch is always the one the member had.
    return replace(member, state=state, member_epoch=epoch, previous_member_epoch=member.member_epoch,
                   assigned={t: dict(ps) for t, ps in assigned.items() if ps},
                   pending_revocation={t: dict(ps) for t, ps in pending.items() if ps})


def _owns_any(owned: Owned, partitions: Mapping[uuid.UUID, Mapping[int, int]]) -> bool:
    """The member still holds one of ``partitions`` (an unknown holding counts as holding)."""
    if owned is None:
        return True
    return any(p in partitions.get(t, {}) for t, ps in owned.items() for p in ps)


def next_member(member: ConsumerGroupMember, target_epoch: int, target: Assignment,
                subscribed: frozenset[uuid.UUID], owned: Owned,
                partition_epoch: Callable[[uuid.UUID, int], int],
                enforce_subscription: bool = False) -> ConsumerGroupMember:
    """The member one step closer to ``target`` (itself when it cannot move). ``subscribed``: the
    ids of the topics it subscribes to now (its assignment of others is taken away first)."""
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _compute_next(member, member.member_epoch, target_epoch, target, subscribed, owned,
                                 partition_epoch)
        if enforce_subscription:
            return _drop_unsubscribed(member, subscribed, owned)
        return member
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return _drop_unsubscribed(member, subscribed, owned) if enforce_subscription else member
        return _compute_next(member, member.member_epoch, target_epoch, target, subscribed, owned, partition_epoch)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _compute_next(member, member.member_epoch, target_epoch, target, subscribed, owned, partition_epoch)
    if owned is None or any(owned.values()):
        raise FencedMemberError("The consumer group member is in a unknown state. "
                                "The member must abandon all its partitions and rejoin.")
    return _compute_next(member, target_epoch, target_epoch, target, subscribed, owned, partition_epoch)


def _drop_unsubscribed(member: ConsumerGroupMember, subscribed: frozenset[uuid.UUID],
                       owned: Owned) -> ConsumerGroupMember:
    """Take topics the member no longer subscribes to out of its assignment at once (Kafka's
    updateCurrentAssignment), revoking those it still holds."""
    gone = {t: ps for t, ps in member.assigned.items() if t not in subscribed}
    if not gone:
        return member
    assigned = {t: ps for t, ps in member.assigned.items() if t in subscribed}
    pending: dict[uuid.UUID, dict[int, int]] = {t: dict(ps) for t, ps in member.pending_revocation.items()}
    for t, ps in gone.items():
        pending.setdefault(t, {}).update(ps)
    if _owns_any(owned, pending):
        return _move(member, MemberState.UNREVOKED_PARTITIONS, member.member_epoch, assigned, pending)
    return _move(member, member.state, member.member_epoch, assigned, member.pending_revocation)


def _compute_next(member: ConsumerGroupMember, epoch: int, target_epoch: int, target: Assignment,
                  subscribed: frozenset[uuid.UUID], owned: Owned,
                  partition_epoch: Callable[[uuid.UUID, int], int]) -> ConsumerGroupMember:
    assigned: dict[uuid.UUID, dict[int, int]] = {}
    revoke: dict[uuid.UUID, dict[int, int]] = {}
    to_assign: dict[uuid.UUID, set[int]] = {}
    unreleased = False
    for topic_id in set(target) | set(member.assigned):
        wanted = target.get(topic_id, frozenset()) if topic_id in subscribed else frozenset()
        current = member.assigned.get(topic_id, {})
        kept = {p: e for p, e in current.items() if p in wanted}
        if kept:
            assigned[topic_id] = kept
        gone = {p: e for p, e in current.items() if p not in kept}
        if gone:
            revoke[topic_id] = gone
        revoking_here = member.pending_revocation.get(topic_id, {})
        new = set()
        for p in wanted:
            if p in kept:
                continue
            # Owned by another member (not this one's own revocation): wait for its release.
            if partition_epoch(topic_id, p) != -1 and p not in revoking_here:
                unreleased = True
            else:
                new.add(p)
        if new:
            to_assign[topic_id] = new
    if revoke and _owns_any(owned, revoke):
        # Revoke first: the member stays at its epoch until it stops owning them.
        return _move(member, MemberState.UNREVOKED_PARTITIONS, epoch, assigned, revoke)
    for topic_id, ps in to_assign.items():
        assigned.setdefault(topic_id, {}).update(dict.fromkeys(ps, target_epoch))
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _move(member, state, target_epoch, assigned, {})

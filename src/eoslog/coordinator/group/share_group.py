"""A share group (KIP-932) as its group coordinator holds it: members, epochs, the target
assignment, and which share-partitions have a state at the share coordinator (Kafka's
``ShareGroup``, ``ShareGroupMember`` and ``SimpleAssignor``).

::

    Empty ──a member joins──▶ Stable ──the last member leaves or expires──▶ Empty
    Empty ──DeleteGroups, coordinator unloaded──▶ Dead

``VALID_PREVIOUS`` is the whole contract; ``transition`` the only way to move.

Members of a share group are not exclusive: several may be assigned the same partition and
fetch from it at once (the share-partition hands each record to one of them). The simple
assignor spreads every subscribed partition over the members subscribing to its topic: with
fewer members than partitions each partition goes to one member, round robin; with more,
every member gets one partition, round robin, so each partition is shared by several.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

Assignment = dict[uuid.UUID, frozenset[int]]  # topic id → partitions
TopicMetadata = Mapping[str, tuple[uuid.UUID, int]]  # topic name → (id, partition count)


class ShareGroupState(Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


VALID_PREVIOUS: dict[ShareGroupState, frozenset[ShareGroupState]] = {
    ShareGroupState.STABLE: frozenset({ShareGroupState.EMPTY}),
    ShareGroupState.EMPTY: frozenset({ShareGroupState.STABLE}),
    ShareGroupState.DEAD: frozenset({ShareGroupState.EMPTY, ShareGroupState.STABLE}),
}


class IllegalShareGroupTransition(RuntimeError):
    pass


def transition(group_id: str, current: ShareGroupState, target: ShareGroupState) -> ShareGroupState:
    if current not in VALID_PREVIOUS[target]:
        raise IllegalShareGroupTransition(f"share group {group_id!r} cannot move from {current.value} to "
                                          f"{target.value}")
    return target


@dataclass
class ShareMember:
    member_id: str
    client_id: str
    client_host: str
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assignment: Assignment = field(default_factory=dict)


@dataclass
class ShareGroup:
    group_id: str
    state: ShareGroupState = ShareGroupState.EMPTY
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)  # member id → target assignment
    # Share-partitions whose state the share coordinator has: topic id → (name, partitions).
    initialized: dict[uuid.UUID, tuple[str, frozenset[int]]] = field(default_factory=dict)
    # Topics whose share-partition states are being deleted (written, for Kafka's tools).
    deleting: dict[uuid.UUID, str] = field(default_factory=dict)

    def move_to(self, target: ShareGroupState) -> None:
        self.state = transition(self.group_id, self.state, target)

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def is_initialized(self, topic_id: uuid.UUID, partition: int) -> bool:
        entry = self.initialized.get(topic_id)
        return entry is not None and partition in entry[1]

    def settle_state(self) -> None:
        """Empty without members, Stable with."""
        wanted = ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY
        if self.state is not wanted and self.state is not ShareGroupState.DEAD:
            self.move_to(wanted)


def simple_assignment(members: Mapping[str, ShareMember], topics: TopicMetadata) -> dict[str, Assignment]:
    """Kafka's SimpleAssignor for share groups, homogeneous or not: per topic, its partitions
    spread over the members subscribing to it (see the module's docstring)."""
    out: dict[str, Assignment] = {m: {} for m in members}
    for topic in sorted({t for m in members.values() for t in m.subscribed_topic_names}):
        meta = topics.get(topic)
        if meta is None:
            continue
        topic_id, count = meta
        subscribers = sorted(m for m, member in members.items() if topic in member.subscribed_topic_names)
        if not subscribers or count <= 0:
            continue
        shares: dict[str, set[int]] = {m: set() for m in subscribers}
        if len(subscribers) <= count:
            for p in range(count):
                shares[subscribers[p % len(subscribers)]].add(p)
        else:
            for i, m in enumerate(subscribers):
                shares[m].add(i % count)
        for m, ps in shares.items():
            out[m][topic_id] = frozenset(ps)
    return out

"""The classic group state machine: Kafka's five states and the one table of legal moves.

::

    Empty ──join──▶ PreparingRebalance ──all joined──▶ CompletingRebalance ──leader sync──▶ Stable
      ▲                  ▲     │                            │                              │
      └── all left ──────┘     └────────────────────────────┴──── member change ───────────┘
    any state ──(group deleted or expired, coordinator unloaded)──▶ Dead

``VALID_PREVIOUS`` is the whole contract (Kafka's ``GroupState.validPreviousStates``);
``transition`` is the only way to move and raises on a move the table does not allow —
an illegal move is a coordinator bug, never an answer to a client.
"""

from __future__ import annotations

from enum import Enum


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    @classmethod
    def parse(cls, name: str) -> GroupState | None:
        """``"stable"`` → STABLE (ListGroups' state filter is case-insensitive)."""
        for state in cls:
            if state.value.lower() == name.lower():
                return state
        return None


VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    # A member joins or leaves a running group, or the first member joins an empty one.
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    # Every member rejoined (or the rebalance timeout passed): waiting for the leader's sync.
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    # The leader's assignment is stored and sent to the members.
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    # The last member left during a rebalance.
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(
        {
            GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
            GroupState.EMPTY, GroupState.DEAD,
        }
    ),
}


class IllegalGroupStateTransition(RuntimeError):
    def __init__(self, group_id: str, current: GroupState, target: GroupState) -> None:
        super().__init__(
            f"group {group_id!r} cannot move from {current.value} to {target.value}; "
            f"{target.value} may only follow "
            + ", ".join(sorted(s.value for s in VALID_PREVIOUS[target]))
        )
        self.current = current
        self.target = target


def transition(group_id: str, current: GroupState, target: GroupState) -> GroupState:
    """Check ``current`` → ``target`` against VALID_PREVIOUS and return ``target``."""
    if current not in VALID_PREVIOUS[target]:
        raise IllegalGroupStateTransition(group_id, current, target)
    return target

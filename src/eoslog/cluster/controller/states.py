"""Partition states and their legal transitions: one table, Kafka's PartitionStateMachine.

The controller moves a partition through these states; a transition not in the table is a
bug and raises, as Kafka's ``isValidTransition`` check does.
"""

from __future__ import annotations

from enum import Enum


class PartitionState(Enum):
    NON_EXISTENT = "NonExistentPartition"  # not created, or deleted
    NEW = "NewPartition"  # assigned replicas, no leader yet
    ONLINE = "OnlinePartition"  # has a live leader
    OFFLINE = "OfflinePartition"  # its leader died and none could be elected yet


# to-state → the states it may be entered from.
VALID_PREVIOUS: dict[PartitionState, frozenset[PartitionState]] = {
    PartitionState.NEW: frozenset({PartitionState.NON_EXISTENT}),
    PartitionState.ONLINE: frozenset({PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE}),
    PartitionState.OFFLINE: frozenset({PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE}),
    PartitionState.NON_EXISTENT: frozenset({PartitionState.OFFLINE}),
}


class IllegalStateTransition(RuntimeError):
    pass


def check_transition(partition: object, current: PartitionState, target: PartitionState) -> None:
    if current not in VALID_PREVIOUS[target]:
        raise IllegalStateTransition(f"{partition}: {current.value} → {target.value} is not a legal transition")

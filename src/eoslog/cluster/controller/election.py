"""Leader election, one pure function per reason (Kafka's PartitionLeaderElectionAlgorithms).

Each takes the partition's replica assignment (preferred replica first), its ISR and the
brokers that may lead (alive and not shutting down) and returns the new leader and ISR, or
None when no replica may lead. Unit-tested on their own; the controller only applies them.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Elected:
    leader: int
    isr: tuple[int, ...]
    unclean: bool = False  # the leader was not in the ISR: acknowledged records may be lost


def offline_election(assignment: Sequence[int], isr: Sequence[int], live: Collection[int],
                     unclean_enabled: bool) -> Elected | None:
    """The leader is gone: the first live ISR member in assignment order; if there is none,
    the first live replica only when unclean election is enabled."""
    for replica in assignment:
        if replica in live and replica in isr:
            return Elected(replica, tuple(r for r in isr if r in live))
    if unclean_enabled:
        for replica in assignment:
            if replica in live:
                return Elected(replica, (replica,), unclean=True)
    return None


def controlled_shutdown_election(assignment: Sequence[int], isr: Sequence[int], live: Collection[int],
                                 shutting_down: Collection[int]) -> Elected | None:
    """The leader asks to shut down: a live ISR member that is not shutting down; the ISR
    loses the brokers that are."""
    for replica in assignment:
        if replica in live and replica in isr and replica not in shutting_down:
            return Elected(replica, tuple(r for r in isr if r not in shutting_down))
    return None


def preferred_election(assignment: Sequence[int], isr: Sequence[int], live: Collection[int]) -> Elected | None:
    """Back to the preferred replica (the assignment's first) if it is alive and in the ISR."""
    if assignment and assignment[0] in live and assignment[0] in isr:
        return Elected(assignment[0], tuple(isr))
    return None


def isr_without(isr: Sequence[int], leader: int, gone: Collection[int]) -> tuple[tuple[int, ...], int]:
    """The ISR and leader once the replicas in ``gone`` stopped (Kafka's removeReplicasFromIsr).
    The last ISR member is kept even when it is gone: it is the one replica known to have every
    acknowledged record, so it is the one that may lead again (unclean election aside)."""
    kept = tuple(r for r in isr if r not in gone)
    new_leader = -1 if leader in gone else leader
    return (kept or tuple(isr[:1])), new_leader

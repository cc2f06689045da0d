"""A partition's reassignment (KIP-455), the pure part: Kafka's ``ReplicaAssignment`` and the
controller's checks and decisions about it, unit-tested without ZooKeeper.

RS is the partition's replica set while it moves: the target's replicas (TRS) in their order,
then the original ones (ORS) that are not in the target; AR = TRS - ORS are being added, RR =
ORS - TRS removed. Nothing but RS, AR and RR is stored (in the topic's znode, Kafka's
``adding_replicas`` / ``removing_replicas``), so a new controller resumes from them. A
reassignment is complete once every target replica is in the ISR; then leadership moves into
the target if it is not there and the removed replicas leave the ISR in one state write, and
the assignment becomes TRS (``complete``). Until then a removed replica may rejoin the ISR
(``may_join_isr``), as in Kafka.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from eoslog.cluster.znodes import LeaderAndIsr
from eoslog.errors import Errors


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def origin(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target: Sequence[int]) -> ReplicaAssignment:
        """Kafka's ReplicaAssignment.reassignTo: a new target replaces any ongoing one; the
        original replicas stay the ones before any reassignment began."""
        origin = self.origin
        full = tuple(dict.fromkeys((*target, *origin)))
        return ReplicaAssignment(full, tuple(r for r in full if r not in origin),
                                 tuple(r for r in full if r not in target))

    def may_join_isr(self, replica: int, isr: Collection[int]) -> bool:
        """Whether the leader may take ``replica`` back into the ISR, as far as the reassignment
        goes. Every replica of RS may, a removed one too, as Kafka's leader counts the full
        replica set until the controller's step B3 (a removed replica that fell out — its broker
        was killed and restarted — keeps the partition writable at min.insync.replicas while
        the added ones copy). Not once the reassignment is complete (every target replica in
        sync): the controller is then taking the removed ones out — Kafka's step B3 tells the
        leader RS = TRS; here the leader sees completeness itself."""
        return replica not in self.removing or not is_complete(self, isr)

    def cancelled(self) -> ReplicaAssignment:
        """Back to the original replicas (Kafka cannot promise their original order)."""
        return self.reassign_to(self.origin)


@dataclass(frozen=True, slots=True)
class Refusal:
    error: Errors
    message: str


def check_target(target: Sequence[int], current: ReplicaAssignment, live: Collection[int],
                 allow_replication_factor_change: bool = True) -> Refusal | None:
    """Kafka's validateReplicas (and KIP-860's replication factor check): a target is
    non-empty, has no broker twice nor a negative id, and every replica it adds is alive."""
    if not target:
        return Refusal(Errors.INVALID_REPLICA_ASSIGNMENT, "Empty replica list specified in partition reassignment.")
    if len(set(target)) != len(target):
        return Refusal(Errors.INVALID_REPLICA_ASSIGNMENT,
                       f"Duplicate replica ids in partition reassignment replica list: {list(target)}")
    if any(r < 0 for r in target):
        return Refusal(Errors.INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in replica list: {list(target)}")
    if not allow_replication_factor_change and len(target) != len(current.origin):
        return Refusal(Errors.INVALID_REPLICATION_FACTOR,
                       f"The replication factor is changed from {len(current.origin)} to {len(target)}")
    adding = current.reassign_to(target).adding
    if not set(adding) <= set(live):
        return Refusal(Errors.INVALID_REPLICA_ASSIGNMENT,
                       f"Replica assignment has brokers that are not alive. Replica list: {list(adding)}, "
                       f"live broker list: {sorted(live)}")
    return None


def is_complete(assignment: ReplicaAssignment, isr: Collection[int]) -> bool:
    """Kafka's isReassignmentComplete: every target replica is in sync."""
    return not assignment.being_reassigned or set(assignment.target) <= set(isr)


def complete(assignment: ReplicaAssignment, state: LeaderAndIsr, live: Collection[int],
             controller_epoch: int) -> LeaderAndIsr | None:
    """The state that ends a complete reassignment (Kafka's steps B3 and B4 in one write): the
    leader stays if it is a live target replica, else the first live in-sync target replica
    leads (ReassignPartitionLeaderElectionStrategy) in a new epoch; the removed replicas leave
    the ISR. ``state`` itself when it already is that state; None when no target replica may
    lead yet (the reassignment waits)."""
    target = assignment.target
    isr = tuple(r for r in target if r in state.isr)
    if state.leader in target and state.leader in live:
        if set(isr) == set(state.isr):
            return state
        return LeaderAndIsr(state.leader, state.leader_epoch, isr, controller_epoch, state.zk_version)
    leader = next((r for r in target if r in live and r in state.isr), None)
    if leader is None:
        return None
    return state.new_leader(leader, isr, controller_epoch)

"""Replica placement of new partitions: Kafka's rack-unaware ``assignReplicasToBrokers``.

Partition p's first replica is broker ``(p + start) % n``; the others follow it at a shift
that grows each time the partitions have gone once round the brokers, so leaders and
followers both spread evenly. ``start`` and the first shift are random in Kafka (so that many
small topics do not all lead on one broker); tests pass them.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from eoslog.errors import Errors, KafkaError


class AssignmentError(KafkaError):
    """Kafka's InvalidReplicationFactorException / InvalidPartitionsException /
    InvalidReplicaAssignmentException, with Kafka's message."""


def assign_replicas(brokers: Sequence[int], partitions: int, replication_factor: int,
                    first_partition: int = 0, start: int | None = None,
                    shift: int | None = None) -> dict[int, tuple[int, ...]]:
    if partitions <= 0:
        raise AssignmentError(Errors.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise AssignmentError(Errors.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise AssignmentError(Errors.INVALID_REPLICATION_FACTOR,
                              f"Replication factor: {replication_factor} larger than available brokers: "
                              f"{len(brokers)}.")
    ids = sorted(brokers)
    n = len(ids)
    start = random.randrange(n) if start is None else start
    shift = random.randrange(n) if shift is None else shift
    out: dict[int, tuple[int, ...]] = {}
    for p in range(first_partition, first_partition + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [ids[first]]
        for j in range(replication_factor - 1):
            replicas.append(ids[(first + 1 + (shift + j) % (n - 1)) % n])
        out[p] = tuple(replicas)
    return out


def validate_manual_assignment(assignment: Mapping[int, Sequence[int]], brokers: Sequence[int]) -> None:
    """Kafka's validateManualPartitionAssignment: replicas registered, none twice, every
    partition the same replication factor."""
    factors = {len(r) for r in assignment.values()}
    for replicas in assignment.values():
        if not replicas:
            raise AssignmentError(Errors.INVALID_REPLICA_ASSIGNMENT,
                                  "The manual partition assignment includes an empty replica list.")
        for broker in replicas:
            if broker not in brokers:
                raise AssignmentError(Errors.INVALID_REPLICA_ASSIGNMENT,
                                      f"The manual partition assignment includes broker {broker}, but no "
                                      "such broker is registered.")
        if len(set(replicas)) != len(replicas):
            twice = next(b for b in replicas if list(replicas).count(b) > 1)
            raise AssignmentError(Errors.INVALID_REPLICA_ASSIGNMENT,
                                  f"The manual partition assignment includes the broker {twice} more than once.")
    if len(factors) > 1:
        raise AssignmentError(Errors.INVALID_REPLICA_ASSIGNMENT,
                              "All partitions in the manual partition assignment must have the same "
                              "number of replicas.")


def check_partition_replicas(broker_ids: Sequence[int], registered: Sequence[int], replicas: int | None) -> None:
    """One partition of a manual assignment, as Kafka's validateManualPartitionAssignment
    checks it in turn: replicas registered, none twice, as many as the partitions before it
    had (``replicas``; None for the first)."""
    if not broker_ids:
        raise AssignmentError(Errors.INVALID_REPLICA_ASSIGNMENT,
                              "The manual partition assignment includes an empty replica list.")
    previous = None
    for broker_id in sorted(broker_ids):
        if broker_id not in registered:
            raise AssignmentError(Errors.INVALID_REPLICA_ASSIGNMENT,
                                  f"The manual partition assignment includes broker {broker_id}, "
                                  "but no such broker is registered.")
        if broker_id == previous:
            raise AssignmentError(Errors.INVALID_REPLICA_ASSIGNMENT,
                                  f"The manual partition assignment includes the broker {broker_id} more than once.")
        previous = broker_id
    if replicas is not None and len(broker_ids) != replicas:
        raise AssignmentError(Errors.INVALID_REPLICA_ASSIGNMENT,
                              f"The manual partition assignment includes a partition with {len(broker_ids)} "
                              "replica(s), but this is not consistent with previous partitions, which have "
                              f"{replicas} replica(s).")

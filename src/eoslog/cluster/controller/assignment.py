"""Replica placement of new partitions: Kafka's ``assignReplicasToBrokers`` (AdminUtils).

Partition p's first replica is broker ``(p + start) % n``; the others follow it at a shift
that grows each time the partitions have gone once round the brokers, so leaders and
followers both spread evenly. ``start`` and the first shift are random in Kafka (so that many
small topics do not all lead on one broker); tests pass them.

When every broker has a ``broker.rack`` (KIP-36), the brokers are first listed alternating
between racks (rack by rack in name order, each rack's brokers in id order), and a further
replica skips a broker whose rack already has one of the partition's replicas while some rack
has none (and a broker that has one while some broker has none): each partition spans
min(replication factor, racks) racks, and leaders spread over racks too. With racks on some
brokers only, the brokers without one count as one more rack, as Kafka 4.4's controller
places them (StripedReplicaPlacer keys its racks by ``Optional<String>``, the empty one among
them; seen running it: brokers a,a,b,b,-,- at RF 3 give every partition one replica of each).
Kafka ≤ 3.x's ZooKeeper-era AdminUtils refused that case instead ("Not all brokers have rack
information for replica rack aware assignment."), answering CreateTopics UNKNOWN_SERVER_ERROR.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from eoslog.errors import Errors, KafkaError
from eoslog.types import NO_RACK, rack_of


class AssignmentError(KafkaError):
    """Kafka's InvalidReplicationFactorException / InvalidPartitionsException /
    InvalidReplicaAssignmentException, with Kafka's message."""


def assign_replicas(brokers: Sequence[int], partitions: int, replication_factor: int,
                    first_partition: int = 0, start: int | None = None,
                    shift: int | None = None, racks: Mapping[int, str | None] | None = None
                    ) -> dict[int, tuple[int, ...]]:
    """``racks``: each broker's rack; rack-aware placement when any broker has one."""
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
    placed_racks = {b: rack_of(racks or {}, b) for b in ids}
    if any(r != NO_RACK for r in placed_racks.values()):
        return _assign_rack_aware(ids, placed_racks, partitions, replication_factor, first_partition, start, shift)
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


def _rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Kafka's getRackAlternatedBrokerList: one broker of each rack in turn."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    columns = [by_rack[r] for r in sorted(by_rack)]
    return [col[i] for i in range(max(map(len, columns))) for col in columns if i < len(col)]


def _assign_rack_aware(brokers: Sequence[int], racks: Mapping[int, str], partitions: int, replication_factor: int,
                       first_partition: int, start: int, shift: int) -> dict[int, tuple[int, ...]]:
    """Kafka's assignReplicasToBrokersRackAware."""
    arranged = _rack_alternated(racks)
    n, rack_count = len(arranged), len(set(racks.values()))
    out: dict[int, tuple[int, ...]] = {}
    for p in range(first_partition, first_partition + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        leader = arranged[first]
        replicas, used_racks, used = [leader], {racks[leader]}, {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[(first + 1 + (shift * rack_count + k) % (n - 1)) % n]
                k += 1
                if ((racks[broker] not in used_racks or len(used_racks) == rack_count)
                        and (broker not in used or len(used) == n)):
                    replicas.append(broker)
                    used_racks.add(racks[broker])
                    used.add(broker)
                    break
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

"""Topic administration in a cluster, as any broker of Kafka's ZooKeeper era does it: write
the request to ZooKeeper, let the controller act on it, and wait (up to the request's timeout)
until this broker's metadata shows the result. Raises KafkaError with Kafka's error."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from kazoo.exceptions import NodeExistsError

from eoslog.cluster import znodes
from eoslog.cluster.controller.assignment import assign_replicas, validate_manual_assignment
from eoslog.cluster.member import ClusterMember
from eoslog.cluster.registry import add_partitions
from eoslog.errors import Errors, KafkaError


async def delete_topic(member: ClusterMember, topic: str, timeout_s: float) -> None:
    """Ask for the deletion (``/admin/delete_topics/<T>``) and wait until the topic is gone."""
    with contextlib.suppress(NodeExistsError):  # asked already
        await member.zk.create(f"{znodes.DELETE_TOPICS}/{topic}", makepath=True)
    if not await member.metadata.wait_for(lambda: topic not in member.metadata.topics, timeout_s):
        raise KafkaError(Errors.REQUEST_TIMED_OUT, f"topic {topic} is marked for deletion; not deleted yet")


async def grow_topic(member: ClusterMember, topic: str, new_assignments: Sequence[Sequence[int]] | None,
                     count: int, validate_only: bool, timeout_s: float) -> None:
    """CreatePartitions: the new partitions' replicas (given, or Kafka's placement continuing
    after the existing partitions), written into the topic's assignment conditionally."""
    assignment = member.metadata.topics.get(topic)
    if assignment is None:
        raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic} does not exist")
    current = len(assignment.partitions)
    factor = len(next(iter(assignment.partitions.values())))
    brokers = sorted(member.metadata.brokers)
    if new_assignments is None:
        added = assign_replicas(brokers, count - current, factor, first_partition=current,
                                racks=member.broker_racks())
    else:
        added = {current + i: tuple(int(b) for b in replicas) for i, replicas in enumerate(new_assignments)}
        validate_manual_assignment(added, brokers)
        wrong = sorted(p for p, replicas in added.items() if len(replicas) != factor)
        if wrong:
            raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                             f"Inconsistent replication factor between partitions, partition 0 has {factor} "
                             f"while partitions {wrong} have replication factors "
                             f"{[len(added[p]) for p in wrong]}, respectively.")
    if validate_only:
        return
    await add_partitions(member.zk, topic, added, current)
    await member.wait_for_leaders(topic, timeout_s)

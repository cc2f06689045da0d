"""Partition reassignments as Kafka's ``kafka-reassign-partitions.sh`` runs them, over the public
admin client (so they work against Apache Kafka too): the reassignment JSON, starting moves with
Kafka's throttle configs, how far each moving replica has copied, verifying (and then removing
the throttles), cancelling. ``eoslog partitions reassign`` and ``eoslog cluster rebalance`` print
and draw what these return.

Throttles are set as Kafka's tool sets them (ReassignPartitionsCommand.modifyTopicThrottles /
modifyInterBrokerThrottle): each moving topic's ``leader.replication.throttled.replicas`` lists
its moving partitions' current replicas and ``follower.replication.throttled.replicas`` the added
ones; every broker taking part gets ``leader/follower.replication.throttled.rate``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from eoslog.client.admin import (
    Admin,
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    ConfigResourceType,
    PartitionReassignment,
)
from eoslog.client.types import TopicPartition
from eoslog.tools import ToolError

Assignment = dict[TopicPartition, tuple[int, ...]]
LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LEADER_REPLICAS, FOLLOWER_REPLICAS = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"
LOG_DIR_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"


# -- the reassignment JSON (Kafka's format) ------------------------------------------------------


def to_json(assignment: Mapping[TopicPartition, tuple[int, ...]]) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for tp, r in sorted(assignment.items())]}, separators=(",", ":"))


def parse_json(text: str) -> Assignment:
    """Kafka's parsePartitionReassignmentData and its checks (ToolError on each)."""
    try:
        doc: Any = json.loads(text)
        entries = [(TopicPartition(str(e["topic"]), int(e["partition"])), tuple(int(r) for r in e["replicas"]))
                   for e in doc["partitions"]]
    except (ValueError, KeyError, TypeError) as e:
        raise ToolError(f"not a reassignment JSON ({{\"version\":1,\"partitions\":[...]}}): {e!r}",
                        exit_code=2) from None
    if not entries:
        raise ToolError("Partition reassignment list cannot be empty", exit_code=2)
    if any(not r for _, r in entries):
        raise ToolError("Partition replica list cannot be empty", exit_code=2)
    seen = [tp for tp, _ in entries]
    twice = sorted({tp for tp in seen if seen.count(tp) > 1})
    if twice:
        raise ToolError("Partition reassignment contains duplicate topic partitions: "
                        + ",".join(f"{tp.topic}-{tp.partition}" for tp in twice), exit_code=2)
    for tp, r in entries:
        if len(set(r)) != len(r):
            twice_in = ",".join(str(b) for b in sorted(set(r)) if r.count(b) > 1)
            raise ToolError(f"Partition replica lists may not contain duplicate entries: {tp.topic}-{tp.partition} "
                            f"contains multiple entries for {twice_in}", exit_code=2)
    return dict(entries)


# -- reading ----------------------------------------------------------------------------------


def current(admin: Admin, topics: Iterable[str] | None = None) -> Assignment:
    """Each partition's replicas (every topic, internal ones included, when ``topics`` is None)."""
    names = list(topics) if topics is not None else list(admin.list_topics(internal=True))
    described = admin.describe_topics(names)
    return {TopicPartition(t, p.partition): tuple(p.replicas) for t, d in described.items() for p in d.partitions}


@dataclass(frozen=True, slots=True)
class ReplicaProgress:
    """One replica a reassignment adds: how much of the leader's log it has (bytes)."""

    tp: TopicPartition
    broker: int
    copied: int
    total: int


def progress(admin: Admin, ongoing: Mapping[TopicPartition, PartitionReassignment]) -> list[ReplicaProgress]:
    """How far each replica being added has copied, from the brokers' DescribeLogDirs."""
    if not ongoing:
        return []
    leaders = {tp: p.leader for t, d in admin.describe_topics(sorted({tp.topic for tp in ongoing})).items()
               for p in d.partitions if (tp := TopicPartition(t, p.partition)) in ongoing}
    brokers = {b for r in ongoing.values() for b in r.adding_replicas} | {b for b in leaders.values() if b >= 0}
    alive = {n.id for n in admin.describe_cluster().nodes}
    sizes: dict[tuple[TopicPartition, int], int] = {}
    for broker, dirs in admin.describe_log_dirs(sorted(brokers & alive)).items():
        for d in dirs.values():
            for tp, info in d.replica_infos.items():
                sizes[(tp, broker)] = max(sizes.get((tp, broker), 0), info.size)
    return [ReplicaProgress(tp, b, sizes.get((tp, b), 0), sizes.get((tp, leaders.get(tp, -1)), 0))
            for tp, r in sorted(ongoing.items()) for b in r.adding_replicas]


# -- acting -----------------------------------------------------------------------------------


def start(admin: Admin, target: Mapping[TopicPartition, tuple[int, ...]], throttle: int | None = None) -> None:
    """Begin moving each partition to its target (with the throttles first, as Kafka's tool);
    ToolError naming every partition the controller refused."""
    if throttle is not None:
        set_throttles(admin, target, throttle)
    refused = {tp: e for tp, e in admin.alter_partition_reassignments(dict(target)).items() if e is not None}
    if refused:
        raise ToolError("reassignment refused for " + "; ".join(
            f"{tp.topic}-{tp.partition}: {e}" for tp, e in sorted(refused.items())))


def set_throttles(admin: Admin, target: Mapping[TopicPartition, tuple[int, ...]], rate: int) -> None:
    existing = current(admin, sorted({tp.topic for tp in target}))
    leader: dict[str, list[str]] = {}
    follower: dict[str, list[str]] = {}
    brokers: set[int] = set()
    for tp, replicas in sorted(target.items()):
        now = existing.get(tp, ())
        leader.setdefault(tp.topic, []).extend(f"{tp.partition}:{b}" for b in now)
        follower.setdefault(tp.topic, []).extend(f"{tp.partition}:{b}" for b in replicas if b not in now)
        brokers |= set(now) | set(replicas)
    ops: dict[ConfigResource, list[AlterConfigOp]] = {
        ConfigResource(ConfigResourceType.TOPIC, t): [AlterConfigOp(LEADER_REPLICAS, ",".join(leader[t])),
                                                      AlterConfigOp(FOLLOWER_REPLICAS, ",".join(follower[t]))]
        for t in leader}
    for b in sorted(brokers):
        ops[ConfigResource(ConfigResourceType.BROKER, str(b))] = [
            AlterConfigOp(LEADER_RATE, str(rate)), AlterConfigOp(FOLLOWER_RATE, str(rate))]
    admin.incremental_alter_configs(ops)


def clear_throttles(admin: Admin, topics: Iterable[str]) -> None:
    """Kafka's clearAllThrottles: the rates off every broker, the lists off these topics."""
    delete = AlterConfigOpType.DELETE
    ops = {ConfigResource(ConfigResourceType.BROKER, str(n.id)): [
        AlterConfigOp(name, None, delete) for name in (LEADER_RATE, FOLLOWER_RATE, LOG_DIR_RATE)]
        for n in admin.describe_cluster().nodes}
    for t in sorted(set(topics)):
        ops[ConfigResource(ConfigResourceType.TOPIC, t)] = [
            AlterConfigOp(LEADER_REPLICAS, None, delete), AlterConfigOp(FOLLOWER_REPLICAS, None, delete)]
    admin.incremental_alter_configs(ops)


def verify(admin: Admin, target: Mapping[TopicPartition, tuple[int, ...]]) -> dict[TopicPartition, str]:
    """Each partition's state as Kafka's --verify words it; once none is moving any more, the
    throttles are removed."""
    ongoing = admin.list_partition_reassignments(list(target))
    now = current(admin, sorted({tp.topic for tp in target}))
    out = {}
    for tp, replicas in sorted(target.items()):
        name = f"{tp.topic}-{tp.partition}"
        if tp in ongoing:
            out[tp] = f"Reassignment of partition {name} is still in progress."
        elif now.get(tp) == replicas:
            out[tp] = f"Reassignment of partition {name} is completed."
        else:
            have = ",".join(map(str, now.get(tp, ())))
            out[tp] = (f"There is no active reassignment of partition {name}, but replica set is {have} rather "
                       f"than {','.join(map(str, replicas))}.")
    if not ongoing:
        clear_throttles(admin, {tp.topic for tp in target})
    return out


def cancel(admin: Admin, target: Mapping[TopicPartition, tuple[int, ...]]) -> list[TopicPartition]:
    """Cancel the ones still moving (back to their original replicas) and remove the throttles."""
    ongoing = sorted(admin.list_partition_reassignments(list(target)))
    if ongoing:
        refused = {tp: e for tp, e in admin.alter_partition_reassignments(dict.fromkeys(ongoing)).items()
                   if e is not None}
        if refused:
            raise ToolError("cancelling refused for " + "; ".join(
                f"{tp.topic}-{tp.partition}: {e}" for tp, e in sorted(refused.items())))
    clear_throttles(admin, {tp.topic for tp in target})
    return ongoing

"""Coordinators in a cluster: where a group's or transactional id's coordinator is, and the
internal topics they live in.

The coordinator of a key is the leader of its partition of ``__consumer_offsets`` /
``__transaction_state`` (Kafka's partitionFor + the partition's leader), so FindCoordinator
answers from the metadata cache. The internal topics are created in ZooKeeper on first use,
with the replication ``internal_topic_replication`` caps at the live brokers (and Kafka's
warning); until they have leaders, COORDINATOR_NOT_AVAILABLE (retriable).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from eoslog.cluster.errors import TopicExists
from eoslog.cluster.member import ClusterMember
from eoslog.cluster.znodes import BrokerRegistration
from eoslog.config import BrokerConfig
from eoslog.coordinator.internal_topic import InternalTopic, internal_topic_replication
from eoslog.errors import Errors
from eoslog.types import TopicPartition

log = logging.getLogger(__name__)

def find_coordinator(member: ClusterMember, config: BrokerConfig, topic: InternalTopic,
                     partition_for: Callable[[str, int], int], key: str) -> tuple[Errors, BrokerRegistration | None]:
    """(NONE, the coordinator broker) or (COORDINATOR_NOT_AVAILABLE, None); starts creating
    the internal topic when it does not exist yet."""
    assignment = member.metadata.topics.get(topic.name)
    if assignment is None:
        _start_creating(member, config, topic)
        return Errors.COORDINATOR_NOT_AVAILABLE, None
    tp = TopicPartition(topic.name, partition_for(key, len(assignment.partitions)))
    leader = member.metadata.brokers.get(member.metadata.leader(tp))
    return (Errors.NONE, leader) if leader is not None else (Errors.COORDINATOR_NOT_AVAILABLE, None)


def _start_creating(member: ClusterMember, config: BrokerConfig, topic: InternalTopic) -> None:
    task = member.internal_topic_creations.get(topic.name)
    if task is None or task.done():
        member.internal_topic_creations[topic.name] = asyncio.get_running_loop().create_task(
            _create(member, config, topic))


async def _create(member: ClusterMember, config: BrokerConfig, topic: InternalTopic) -> None:
    replication = internal_topic_replication(config, len(member.metadata.brokers))
    if replication.warning is not None:
        log.warning(replication.warning)
    factor, min_isr = replication.for_topic(topic.name)
    overrides = {k: str(v) for k, v in topic.overrides(min_isr).items()}
    try:
        await member.create_topic(topic.name, member.assign(topic.config.num_partitions, factor), overrides)
        log.info("created %s: %d partitions, replication factor %d", topic.name, topic.config.num_partitions, factor)
    except TopicExists:
        pass
    except Exception as e:  # ZooKeeper unreachable: the next FindCoordinator tries again
        log.warning("creating %s failed: %s", topic.name, e)

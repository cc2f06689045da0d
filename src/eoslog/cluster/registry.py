"""Typed reads and writes of the cluster's znodes (no decisions: those are the controller's
and the broker's). The watches of ``ClusterMember`` and the controller's fresh reads use the
same readers, so both see a znode the same way."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from eoslog.cluster import znodes
from eoslog.cluster.metadata import ClusterMetadata
from eoslog.cluster.zk import ZkSession
from eoslog.cluster.znodes import BrokerRegistration, LeaderAndIsr, TopicAssignment
from eoslog.errors import Errors, KafkaError
from eoslog.types import TopicPartition

log = logging.getLogger(__name__)


async def read_broker(zk: ZkSession, broker_id: int) -> BrokerRegistration | None:
    node = await zk.get(znodes.broker_path(broker_id))
    return None if node is None else BrokerRegistration.decode(broker_id, node.data, node.czxid)


async def read_brokers(zk: ZkSession, ids: list[str] | None = None) -> dict[int, BrokerRegistration]:
    names = await zk.children(znodes.BROKER_IDS) if ids is None else ids
    found = await asyncio.gather(*(read_broker(zk, int(n)) for n in names if n.isdigit()))
    return {reg.broker_id: reg for reg in found if reg is not None}


async def read_assignment(zk: ZkSession, topic: str) -> TopicAssignment | None:
    node = await zk.get(znodes.topic_path(topic))
    return None if node is None else TopicAssignment.decode(topic, node.data, node.version)


async def read_state(zk: ZkSession, tp: TopicPartition) -> LeaderAndIsr | None:
    path = znodes.partition_state_path(*tp)
    node = await zk.get(path)
    return None if node is None else LeaderAndIsr.decode(path, node.data, node.version)


async def read_controller(zk: ZkSession) -> int:
    node = await zk.get(znodes.CONTROLLER)
    return znodes.NO_LEADER if node is None or not node.data else znodes.decode_controller(node.data)


async def read_shutdown_requests(zk: ZkSession) -> dict[int, int]:
    """Broker id → the broker epoch it asked with."""
    out: dict[int, int] = {}
    for name in await zk.children(znodes.CONTROLLED_SHUTDOWN):
        node = await zk.get(znodes.controlled_shutdown_path(int(name))) if name.isdigit() else None
        if node is not None:
            try:
                out[int(name)] = int(node.data.decode() or -1)
            except ValueError:
                out[int(name)] = -1
    return out


async def load_metadata(zk: ZkSession, metadata: ClusterMetadata) -> None:
    """Read everything the metadata cache holds, fresh from ZooKeeper (start-up, and a new
    controller's first step, as Kafka's initializeControllerContext)."""
    metadata.set_brokers(await read_brokers(zk))
    metadata.set_controller(await read_controller(zk))
    topics = await zk.children(znodes.TOPICS)
    assignments = await asyncio.gather(*(read_assignment(zk, t) for t in topics))
    for topic, assignment in zip(topics, assignments, strict=True):
        metadata.set_topic(topic, assignment)
    for topic in set(metadata.topics) - set(topics):
        metadata.set_topic(topic, None)
    tps = [tp for t in metadata.topics for tp in metadata.partitions_of(t)]
    for tp, state in zip(tps, await asyncio.gather(*(read_state(zk, tp) for tp in tps)), strict=True):
        if state is not None:
            metadata.set_state(tp, state)
    metadata.set_shutdown_requests(await read_shutdown_requests(zk))


async def ensure_cluster_id(zk: ZkSession, proposed: str) -> str:
    """The cluster's id: ``/cluster/id`` if some broker created it, else ``proposed``, created
    there conditionally (the first broker of a new cluster wins)."""
    while True:
        node = await zk.get(znodes.CLUSTER_ID)
        if node is not None:
            return znodes.decode_cluster_id(node.data)
        try:
            await zk.create(znodes.CLUSTER_ID, znodes.encode_cluster_id(proposed), makepath=True)
            log.info("created cluster id %s", proposed)
            return proposed
        except NodeExistsError:
            continue


async def create_topic(zk: ZkSession, topic: str, assignment: Mapping[int, tuple[int, ...]],
                       overrides: Mapping[str, str], topic_id: uuid.UUID | None = None) -> TopicAssignment:
    """Kafka's AdminZkClient.createTopicWithAssignment: the config first, then the assignment,
    whose creation is the topic's creation (NodeExistsError: it exists). The controller sees
    the new assignment and elects the partitions' first leaders."""
    new = TopicAssignment(topic, topic_id or uuid.uuid4(), dict(assignment))
    if await zk.get(znodes.topic_path(topic)) is not None:
        raise NodeExistsError()
    config_path = znodes.topic_config_path(topic)
    data = znodes.encode_topic_config(overrides)
    try:
        await zk.create(config_path, data, makepath=True)
    except NodeExistsError:
        await zk.set(config_path, data, -1)  # left by a deleted topic of that name
    await zk.create(znodes.topic_path(topic), new.encode(), makepath=True)
    return new


async def add_partitions(zk: ZkSession, topic: str, added: Mapping[int, tuple[int, ...]], expected: int) -> None:
    """CreatePartitions: the assignment with the new partitions, written conditionally on the
    version read; KafkaError(INVALID_PARTITIONS) when the topic no longer has ``expected``
    partitions (another request grew it meanwhile)."""
    path = znodes.topic_path(topic)
    while True:
        node = await zk.get(path)
        if node is None:
            raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic} does not exist")
        current = TopicAssignment.decode(topic, node.data)
        if len(current.partitions) != expected:
            raise KafkaError(Errors.INVALID_PARTITIONS,
                             f"Topic {topic} now has {len(current.partitions)} partition(s), not {expected}.")
        if current.reassigning:
            raise KafkaError(Errors.REASSIGNMENT_IN_PROGRESS,
                             f"A partition reassignment is in progress for the topic {topic}.")
        updated = TopicAssignment(topic, current.topic_id, {**current.partitions, **added})
        try:
            await zk.set(path, updated.encode(), node.version)
            return
        except BadVersionError:
            continue  # changed between the read and the write: read again


async def update_isr(zk: ZkSession, tp: TopicPartition, current: LeaderAndIsr,
                     isr: tuple[int, ...]) -> LeaderAndIsr | None:
    """The leader's own ISR change (Kafka ≤ 2.6's Partition.updateIsr): a set conditional on the
    state znode version the leader last saw. The accepted state, or None when the znode moved
    on (a new leader or a controller's ISR change): the caller keeps its ISR and waits for the
    watch to deliver the newer state."""
    new = current.with_isr(isr)
    try:
        version = await zk.set(znodes.partition_state_path(*tp), new.encode(), current.zk_version)
    except (BadVersionError, NoNodeError):
        return None
    return LeaderAndIsr(new.leader, new.leader_epoch, new.isr, new.controller_epoch, version)

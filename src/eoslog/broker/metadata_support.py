"""The one switch point between a single node and a cluster on ZooKeeper.

Kafka's KafkaApis holds one ``MetadataSupport`` (ZkSupport or RaftSupport), chosen when the
broker is built, and asks it whatever depends on where metadata lives. eoslog does the same:
``Broker`` chooses once (``server.metadata_support_for``), and handlers, the request state and
the server's lifecycle ask the ``MetadataSupport`` they are given — never which mode they run in.

What both answer: the live brokers and the controller; the topics, their partitions and
configs; topic administration (create, delete, add partitions, alter configs), leader
elections, where a coordinator is, which clients are other brokers; and the steps of the
broker's life that differ (producer ids, marker delivery, the coordinators' loading, joining
and leaving). ``SingleNode`` (here) is one node leading every partition it has;
``ZkSupport`` (``zk_support.py``, imported only when ``zookeeper.connect`` is set: it loads
kazoo) is a member of a cluster whose metadata ZooKeeper holds (docs/cluster.md).

Both raise ``KafkaError`` with Kafka's error for a refusal; handlers translate.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Collection, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from eoslog.cluster.controller.assignment import check_partition_replicas
from eoslog.cluster.controller.reassignment import Refusal, ReplicaAssignment, check_target
from eoslog.cluster.metadata import PartitionView
from eoslog.config import BrokerConfig, TopicConfig, config_string
from eoslog.coordinator.group import GroupCoordinator
from eoslog.coordinator.internal_topic import (
    OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    InternalTopic,
    internal_topic_replication,
)
from eoslog.coordinator.producer_id_manager import ProducerIdGenerator, ProducerIdManager
from eoslog.coordinator.share import ShareCoordinator
from eoslog.coordinator.transaction import TransactionCoordinator
from eoslog.coordinator.transaction.marker_channel import LeaderLookup
from eoslog.errors import Errors, KafkaError
from eoslog.features import Features, FeatureStore
from eoslog.quotas.entities import QuotaEntity
from eoslog.replica import ReplicaManager
from eoslog.replica.verification import TransactionVerifier
from eoslog.security.authorizer import Security
from eoslog.storage import LogManager, TopicInfo
from eoslog.storage.config_store import ConfigStore
from eoslog.storage.feature_file import FeatureFile
from eoslog.types import INTERNAL_TOPICS, TopicPartition

if TYPE_CHECKING:
    from eoslog.broker.txn_verifier import LocalTransactionVerifier
    from eoslog.cluster.channel import BrokerChannel

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """A broker as Metadata and DescribeCluster list it."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass
class Advertised:
    """This broker's advertised addresses, known once its listeners are bound: listener
    name → (host, port); the first listener's is the default (the ready line, registration)."""

    by_listener: dict[str, tuple[str, int]] = field(default_factory=dict)
    default: tuple[str, int] = ("127.0.0.1", 9092)

    def endpoint(self, listener: str | None = None) -> tuple[str, int]:
        if listener is not None and listener in self.by_listener:
            return self.by_listener[listener]
        return self.default


@dataclass(frozen=True, slots=True)
class TopicDescription:
    """One topic as Metadata reports it."""

    name: str
    topic_id: uuid.UUID
    internal: bool
    partitions: list[PartitionView]


class MetadataSupport(Protocol):
    """What differs between one node and a ZooKeeper cluster (see the module doc)."""

    # -- built with the broker: what the replica layer and the coordinators are made with --
    leads_every_local_log: bool  # one node leads what it has; a member waits for the partition states
    producer_ids: ProducerIdGenerator
    marker_channel: BrokerChannel | None  # the inter-broker channel markers for other brokers take
    leader_for: LeaderLookup | None  # where each partition's leader is (None: this node, if it has it)
    # Where the finalized features are kept (a file of the log directory, the /feature znode);
    # it publishes them to the broker's ``Features`` before the listeners open.
    feature_store: FeatureStore

    def bind(self, replicas: ReplicaManager, groups: GroupCoordinator, txns: TransactionCoordinator,
             shares: ShareCoordinator) -> None:
        """The broker's partitions and coordinators, once they are built."""

    def transaction_verifier(self, local: LocalTransactionVerifier) -> TransactionVerifier: ...

    # -- the broker's life ------------------------------------------------------------------
    async def connect(self, security: Security) -> str | None:
        """Before the logs load: the cluster id they are checked against (None: theirs)."""

    def begin_loading(self) -> None:
        """Before the listeners open, the logs loaded: the finalized features (one node), what
        the coordinators will load at start-up."""

    async def join(self) -> None:
        """Once the listeners are bound: take part (register, follow the partition states)."""

    async def load_coordinators(self) -> dict[str, float]:
        """The coordinators' partitions loaded at start-up; seconds per coordinator."""

    def ready_note(self, cluster_id: str) -> str:
        """What the ready line adds about the mode."""

    async def controlled_shutdown(self) -> None:
        """While still serving, before the listeners close: hand work to others."""

    async def close(self) -> None: ...

    # -- what requests ask ------------------------------------------------------------------
    def live_brokers(self, listener: str | None = None) -> list[BrokerEndpoint]:
        """Every live broker, at the address it has on ``listener`` (default: its first)."""

    @property
    def controller_id(self) -> int: ...

    def is_inter_broker(self, client_id: str | None) -> bool:
        """A request from another broker of this cluster (the channel's client.id)."""

    def partition_exists(self, tp: TopicPartition) -> bool: ...

    def topic_names(self) -> Collection[str]:
        """Every topic, in the order Metadata lists them."""

    def partition_count(self, name: str) -> int | None: ...

    def topic_id(self, name: str) -> uuid.UUID | None: ...

    def topic_named(self, topic_id: uuid.UUID) -> str | None: ...

    def describe_topic(self, name: str) -> TopicDescription | None: ...

    def topic_version(self, name: str) -> Hashable | None:
        """Changes whenever ``describe_topic(name)`` may (None: no such topic): Metadata keeps
        each topic's encoded entry while it is the same (``broker/metadata_cache.py``)."""

    def topic_config(self, name: str) -> TopicConfig | None:
        """The topic's effective configs; None when there is no such topic."""

    def topic_overrides(self, name: str) -> dict[str, str] | None:
        """The topic's config overrides; None when there is no such topic."""

    def alter_topic_config(self, name: str, overrides: dict[str, str]) -> Awaitable[None] | None:
        """Replace the topic's overrides: done on return, or the write to await."""

    def alter_group_config(self, group: str, overrides: dict[str, str]) -> Awaitable[None] | None:
        """Share a group's configs (stored by ConfigAdmin) with the other brokers: the write to await."""

    def watch_entity_configs(self, store: ConfigStore) -> None:
        """Keep ``store``'s group configs and client quotas as the other brokers change them
        (from ``connect`` on)."""

    def alter_client_quotas(self, entity: QuotaEntity, values: dict[str, float]) -> Awaitable[None] | None:
        """Share an entity's client quotas (stored by QuotaAdmin) with the other brokers: the
        write to await."""

    async def create_topic(self, name: str, num_partitions: int, overrides: dict[str, str], replication_factor: int,
                           assignment: dict[int, tuple[int, ...]] | None, validate_only: bool,
                           timeout_s: float) -> TopicInfo:
        """Create (or only validate) a topic whose request has been checked."""

    async def delete_topic(self, name: str, timeout_s: float) -> None: ...

    async def add_partitions(self, name: str, count: int, assignments: Sequence[Sequence[int]] | None,
                             validate_only: bool, timeout_s: float) -> None:
        """CreatePartitions for one topic, up to ``count`` partitions."""

    async def elect_leaders(self, partitions: list[TopicPartition] | None,
                            unclean: bool) -> dict[TopicPartition, Errors]: ...

    async def alter_reassignments(self, targets: dict[TopicPartition, tuple[int, ...] | None],
                                  allow_replication_factor_change: bool) -> dict[TopicPartition, Refusal | None]:
        """AlterPartitionReassignments (KIP-455): each partition's refusal, or None once its
        reassignment has begun (a target None cancels); KafkaError(NOT_CONTROLLER) off the
        controller."""

    async def list_reassignments(self, partitions: list[TopicPartition] | None
                                 ) -> dict[TopicPartition, ReplicaAssignment]:
        """The reassignments in progress (of ``partitions``, None: all)."""

    def find_coordinator(self, topic: InternalTopic, partition_for: Callable[[str, int], int], key: str,
                         listener: str | None) -> tuple[Errors, BrokerEndpoint | None]:
        """The coordinator of ``key``: the leader of its partition of ``topic``, made on first use."""


class SingleNode:
    """One node: it leads every partition it has, in epoch 0, is the whole ISR and the
    controller, and keeps its topics in ``topics.json`` (docs/architecture.md, "A single node")."""

    leads_every_local_log = True
    marker_channel: BrokerChannel | None = None
    leader_for: LeaderLookup | None = None

    def __init__(self, config: BrokerConfig, logs: LogManager, advertised: Advertised,
                 features: Features | None = None) -> None:
        self.config = config
        self.logs = logs
        self.advertised = advertised
        self.node_id = config.node_id
        self.producer_ids: ProducerIdGenerator = ProducerIdManager(config.log_dir, config.node_id)
        self._feature_file = FeatureFile(config.log_dir, features or Features())
        self.feature_store: FeatureStore = self._feature_file
        self._replicas: ReplicaManager
        self._groups: GroupCoordinator
        self._txns: TransactionCoordinator
        self._shares: ShareCoordinator

    def bind(self, replicas: ReplicaManager, groups: GroupCoordinator, txns: TransactionCoordinator,
             shares: ShareCoordinator) -> None:
        self._replicas, self._groups, self._txns, self._shares = replicas, groups, txns, shares

    def transaction_verifier(self, local: LocalTransactionVerifier) -> TransactionVerifier:
        return local

    # -- the broker's life ------------------------------------------------------------------

    async def connect(self, security: Security) -> str | None:
        replication = internal_topic_replication(self.config, brokers=1)
        if replication.warning is not None:
            log.warning(replication.warning)
        return None

    def begin_loading(self) -> None:
        self._feature_file.load()  # the log directory is locked by now: one broker owns the file
        # Groups of every __consumer_offsets partition answer COORDINATOR_LOAD_IN_PROGRESS
        # until the loader (load_coordinators) has replayed it.
        self._groups.begin_loading()
        self._shares.begin_loading()
        self._txns.begin_loading()

    async def join(self) -> None:
        return None

    async def load_coordinators(self) -> dict[str, float]:
        started = time.monotonic()
        await self._groups.load_all()
        # Share states before transactions: markers the transaction loader sends again may
        # decide transactional share acknowledgements (docs/consumer.md).
        await self._shares.load_all()
        loaded = time.monotonic()
        await self._txns.load_all()
        return {"group": loaded - started, "transaction": time.monotonic() - loaded}

    def ready_note(self, cluster_id: str) -> str:
        return ""

    async def controlled_shutdown(self) -> None:
        return None

    async def close(self) -> None:
        return None

    # -- what requests ask ------------------------------------------------------------------

    def live_brokers(self, listener: str | None = None) -> list[BrokerEndpoint]:
        return [BrokerEndpoint(self.node_id, *self.advertised.endpoint(listener))]

    @property
    def controller_id(self) -> int:
        return self.node_id

    def is_inter_broker(self, client_id: str | None) -> bool:
        return False

    def partition_exists(self, tp: TopicPartition) -> bool:
        return self.logs.get_log(tp.topic, tp.partition) is not None

    def topic_names(self) -> Collection[str]:
        return self.logs.topics.keys()

    def partition_count(self, name: str) -> int | None:
        info = self.logs.topics.get(name)
        return None if info is None else info.num_partitions

    def topic_id(self, name: str) -> uuid.UUID | None:
        info = self.logs.topics.get(name)
        return None if info is None else info.topic_id

    def topic_named(self, topic_id: uuid.UUID) -> str | None:
        info = self.logs.topic_by_id(topic_id)
        return None if info is None else info.name

    def describe_topic(self, name: str) -> TopicDescription | None:
        info = self.logs.topics.get(name)
        if info is None:
            return None
        node = (self.node_id,)
        views = [PartitionView(p, self.node_id, 0, node, node, (), Errors.NONE) for p in range(info.num_partitions)]
        return TopicDescription(info.name, info.topic_id, info.internal, views)

    def topic_version(self, name: str) -> Hashable | None:
        # One node leads every partition in epoch 0: only a new id or more partitions change it.
        info = self.logs.topics.get(name)
        return None if info is None else (info.topic_id, info.num_partitions)

    def topic_config(self, name: str) -> TopicConfig | None:
        info = self.logs.topics.get(name)
        return None if info is None else info.config

    def topic_overrides(self, name: str) -> dict[str, str] | None:
        info = self.logs.topics.get(name)
        return None if info is None else {k: str(config_string(v)) for k, v in info.config.overrides.items()}

    def alter_topic_config(self, name: str, overrides: dict[str, str]) -> Awaitable[None] | None:
        self.logs.alter_topic_config(name, dict(overrides))
        return None

    def alter_group_config(self, group: str, overrides: dict[str, str]) -> Awaitable[None] | None:
        return None  # one node: its ConfigStore is the only one

    def watch_entity_configs(self, store: ConfigStore) -> None:
        return None

    def alter_client_quotas(self, entity: QuotaEntity, values: dict[str, float]) -> Awaitable[None] | None:
        return None  # one node: its ConfigStore is the only one

    async def create_topic(self, name: str, num_partitions: int, overrides: dict[str, str], replication_factor: int,
                           assignment: dict[int, tuple[int, ...]] | None, validate_only: bool,
                           timeout_s: float) -> TopicInfo:
        try:
            return await self.logs.create_topic_async(name, num_partitions, overrides, internal=name in INTERNAL_TOPICS,
                                                      validate_only=validate_only)
        except OSError as e:
            raise KafkaError(Errors.KAFKA_STORAGE_ERROR, f"cannot create topic {name}: {e}") from None

    async def delete_topic(self, name: str, timeout_s: float) -> None:
        try:
            self._replicas.delete_topic(name)
        except OSError as e:
            raise KafkaError(Errors.KAFKA_STORAGE_ERROR, f"cannot delete topic {name}: {e}") from None

    async def add_partitions(self, name: str, count: int, assignments: Sequence[Sequence[int]] | None,
                             validate_only: bool, timeout_s: float) -> None:
        for replicas in assignments or ():
            check_partition_replicas(replicas, [self.node_id], replicas=1)  # one node holds every replica
        try:
            self.logs.create_partitions(name, count, validate_only=validate_only)
        except OSError as e:
            raise KafkaError(Errors.KAFKA_STORAGE_ERROR, f"cannot create partitions of {name}: {e}") from None

    async def elect_leaders(self, partitions: list[TopicPartition] | None,
                            unclean: bool) -> dict[TopicPartition, Errors]:
        # One node leads every partition it has.
        return {tp: Errors.ELECTION_NOT_NEEDED if self.logs.get_log(*tp) is not None
                else Errors.UNKNOWN_TOPIC_OR_PARTITION for tp in partitions or ()}

    async def alter_reassignments(self, targets: dict[TopicPartition, tuple[int, ...] | None],
                                  allow_replication_factor_change: bool) -> dict[TopicPartition, Refusal | None]:
        # One node holds every replica: only "this node" is a target, and nothing ever moves.
        here = ReplicaAssignment((self.node_id,))
        out: dict[TopicPartition, Refusal | None] = {}
        for tp, target in targets.items():
            if self.logs.get_log(*tp) is None:
                out[tp] = Refusal(Errors.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            elif target is None:
                out[tp] = Refusal(Errors.NO_REASSIGNMENT_IN_PROGRESS,
                                  "No reassignment is in progress for this partition.")
            else:
                out[tp] = check_target(target, here, [self.node_id], allow_replication_factor_change)
        return out

    async def list_reassignments(self, partitions: list[TopicPartition] | None
                                 ) -> dict[TopicPartition, ReplicaAssignment]:
        return {}

    def find_coordinator(self, topic: InternalTopic, partition_for: Callable[[str, int], int], key: str,
                         listener: str | None) -> tuple[Errors, BrokerEndpoint | None]:
        # This node coordinates every key; the internal topic is created on first use, as
        # Kafka does.
        if topic.name == OFFSETS_TOPIC:
            self._groups.ensure_offsets_topic()
        elif topic.name == TRANSACTION_STATE_TOPIC:
            self._txns.ensure_state_topic()
        return Errors.NONE, BrokerEndpoint(self.node_id, *self.advertised.endpoint(listener))

"""``MetadataSupport`` for a member of a cluster on ZooKeeper (docs/cluster.md), as Kafka's
ZkSupport: the metadata cache its watches feed answers what requests ask; topic
administration writes to ZooKeeper and waits for the controller's result; the coordinators
load and resign as their internal partitions' leadership comes and goes.

Imported only when ``zookeeper.connect`` is set (``server.metadata_support_for``): it loads
kazoo.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Collection, Coroutine, Hashable, Sequence
from typing import Any

from eoslog.broker.context import wall_clock_ms
from eoslog.broker.metadata_support import Advertised, BrokerEndpoint, TopicDescription
from eoslog.broker.txn_verifier import ClusterTransactionVerifier, LocalTransactionVerifier
from eoslog.cluster.channel import BrokerChannel, inter_broker_client_id
from eoslog.cluster.controller.reassignment import Refusal, ReplicaAssignment
from eoslog.cluster.coordination import find_coordinator
from eoslog.cluster.errors import TopicExists
from eoslog.cluster.feature_store import ZkFeatureStore
from eoslog.cluster.group_config_store import write_group_config, zk_group_configs
from eoslog.cluster.member import ClusterMember
from eoslog.cluster.quota_store import write_quotas, zk_quotas
from eoslog.cluster.security_store import ZkSecurityStore
from eoslog.cluster.topic_admin import delete_topic, grow_topic
from eoslog.config import BrokerConfig, TopicConfig
from eoslog.coordinator.group import GroupCoordinator
from eoslog.coordinator.internal_topic import (
    OFFSETS_TOPIC,
    SHARE_GROUP_STATE_TOPIC,
    TRANSACTION_STATE_TOPIC,
    InternalTopic,
)
from eoslog.coordinator.producer_id_manager import ProducerIdGenerator
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
from eoslog.types import INTERNAL_TOPICS, TopicPartition

log = logging.getLogger(__name__)


class ZkSupport:
    """This broker as a member of a ZooKeeper cluster (``ClusterMember``)."""

    leads_every_local_log = False

    def __init__(self, config: BrokerConfig, logs: LogManager, advertised: Advertised,
                 features: Features | None = None) -> None:
        self.config = config
        self.logs = logs
        self.advertised = advertised
        self.member = ClusterMember(config)
        self._zk_features = ZkFeatureStore(self.member.zk, features or Features())
        self.feature_store: FeatureStore = self._zk_features
        self.producer_ids: ProducerIdGenerator = self.member.producer_ids
        self.marker_channel: BrokerChannel | None = self.member.channel
        self.leader_for: LeaderLookup | None = self._live_leader
        self._replicas: ReplicaManager
        self._groups: GroupCoordinator
        self._txns: TransactionCoordinator
        self._shares: ShareCoordinator
        self._background: set[asyncio.Task[None]] = set()
        self._group_configs: ConfigStore | None = None

    def bind(self, replicas: ReplicaManager, groups: GroupCoordinator, txns: TransactionCoordinator,
             shares: ShareCoordinator) -> None:
        self._replicas, self._groups, self._txns, self._shares = replicas, groups, txns, shares

    def transaction_verifier(self, local: LocalTransactionVerifier) -> TransactionVerifier:
        return ClusterTransactionVerifier(local, self.member)

    def _live_leader(self, tp: TopicPartition) -> int | None:
        """The marker channel's LeaderLookup: None only when the partition does not exist; -1
        while it has no live leader (a marker then waits, it is never dropped)."""
        return self.member.metadata.leader(tp) if self.member.partition_exists(tp) else None

    # -- the broker's life ------------------------------------------------------------------

    async def connect(self, security: Security) -> str | None:
        cluster_id = await self.member.connect(self.logs.stored_cluster_id() or uuid.uuid4().hex[:22])
        await ZkSecurityStore(self.member.zk, security,
                              int(self.config["zookeeper.change.notification.expiration.ms"])).start()
        await self._zk_features.start()
        if self._group_configs is not None:
            await zk_group_configs(self.member.zk, self._group_configs).start()
            await zk_quotas(self.member.zk, self._group_configs).start()
        return cluster_id

    def begin_loading(self) -> None:
        return None  # the coordinators load as their partitions' leadership arrives

    async def join(self) -> None:
        await self.member.join(*self.advertised.default, self.advertised.by_listener)
        self.member.start_replication(self.logs, self._replicas, wall_clock_ms,
                                      self._coordinator_elected, self._coordinator_resigned)

    async def load_coordinators(self) -> dict[str, float]:
        return {}

    def ready_note(self, cluster_id: str) -> str:
        return f", cluster {cluster_id} via ZooKeeper {self.config.zookeeper_connect}"

    async def controlled_shutdown(self) -> None:
        if not self.config["controlled.shutdown.enable"]:
            return
        # While still serving: clients get NOT_LEADER_OR_FOLLOWER and move on.
        timeout_s = (int(self.config["controlled.shutdown.max.retries"])
                     * int(self.config["controlled.shutdown.retry.backoff.ms"]) / 1000)
        if await self.member.controlled_shutdown(timeout_s):
            log.info("controlled shutdown complete: in no ISR another eligible replica could carry on")
        else:
            log.warning("controlled shutdown did not end within %.0fs: still in an ISR", timeout_s)

    async def close(self) -> None:
        await self.member.close()

    def _coordinator_elected(self, tp: TopicPartition, leader_epoch: int) -> None:
        """This broker leads an internal partition: its coordinator loads it."""
        if tp.topic == OFFSETS_TOPIC:
            self._spawn(self._groups.become_leader(tp.partition, leader_epoch))
        elif tp.topic == TRANSACTION_STATE_TOPIC:
            self._spawn(self._txns.become_leader(tp.partition, leader_epoch))
        elif tp.topic == SHARE_GROUP_STATE_TOPIC:
            self._spawn(self._shares.become_leader(tp.partition, leader_epoch))

    def _coordinator_resigned(self, tp: TopicPartition, _leader_epoch: int) -> None:
        if tp.topic == OFFSETS_TOPIC:
            self._groups.resign(tp.partition)
        elif tp.topic == TRANSACTION_STATE_TOPIC:
            self._txns.resign(tp.partition)
        elif tp.topic == SHARE_GROUP_STATE_TOPIC:
            self._shares.resign(tp.partition)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- what requests ask ------------------------------------------------------------------

    def live_brokers(self, listener: str | None = None) -> list[BrokerEndpoint]:
        return [BrokerEndpoint(b.broker_id, *b.address(listener), b.rack)
                for _, b in sorted(self.member.metadata.brokers.items())]

    @property
    def controller_id(self) -> int:
        return self.member.metadata.controller_id

    def is_inter_broker(self, client_id: str | None) -> bool:
        return client_id in {inter_broker_client_id(b.node_id) for b in self.live_brokers()}

    def partition_exists(self, tp: TopicPartition) -> bool:
        return self.member.partition_exists(tp)

    def topic_names(self) -> Collection[str]:
        return sorted(self.member.metadata.topics)

    def partition_count(self, name: str) -> int | None:
        assignment = self.member.metadata.topics.get(name)
        return None if assignment is None else len(assignment.partitions)

    def topic_id(self, name: str) -> uuid.UUID | None:
        assignment = self.member.metadata.topics.get(name)
        return None if assignment is None else assignment.topic_id

    def topic_named(self, topic_id: uuid.UUID) -> str | None:
        return next((t for t, a in self.member.metadata.topics.items() if a.topic_id == topic_id), None)

    def describe_topic(self, name: str) -> TopicDescription | None:
        metadata = self.member.metadata
        assignment = metadata.topics.get(name)
        if assignment is None:
            return None
        views = [metadata.view(tp) for tp in metadata.partitions_of(name)]
        return TopicDescription(name, assignment.topic_id, name in INTERNAL_TOPICS, views)

    def topic_version(self, name: str) -> Hashable | None:
        return self.member.metadata.topic_version(name)

    def topic_config(self, name: str) -> TopicConfig | None:
        # ZooKeeper's overrides: this broker may hold no replica of the topic.
        overrides = self.member.topic_overrides(name)
        return None if overrides is None else self.logs.stored_topic_config(name, overrides)

    def topic_overrides(self, name: str) -> dict[str, str] | None:
        return self.member.topic_overrides(name)

    def alter_topic_config(self, name: str, overrides: dict[str, str]) -> Awaitable[None] | None:
        return self.member.alter_topic_config(name, overrides)

    def alter_group_config(self, group: str, overrides: dict[str, str]) -> Awaitable[None] | None:
        return write_group_config(self.member.zk, group, overrides)

    def watch_entity_configs(self, store: ConfigStore) -> None:
        self._group_configs = store

    def alter_client_quotas(self, entity: QuotaEntity, values: dict[str, float]) -> Awaitable[None] | None:
        return write_quotas(self.member.zk, entity, values)

    async def create_topic(self, name: str, num_partitions: int, overrides: dict[str, str], replication_factor: int,
                           assignment: dict[int, tuple[int, ...]] | None, validate_only: bool,
                           timeout_s: float) -> TopicInfo:
        placed = assignment or self.member.assign(num_partitions, replication_factor)
        config = TopicConfig(self.logs.topic_defaults, overrides)
        info = TopicInfo(name, uuid.uuid4(), num_partitions, config, name in INTERNAL_TOPICS)
        if validate_only:
            return info
        try:
            created = await self.member.create_topic(name, placed, overrides)
        except TopicExists:
            raise KafkaError(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.") from None
        except Exception as e:  # ZooKeeper unreachable
            raise KafkaError(Errors.REQUEST_TIMED_OUT, f"cannot create topic {name} in ZooKeeper: {e}") from None
        # As Kafka's DelayedCreatePartitions: answer once the controller has elected the leaders
        # (or at the request's timeout: the topic exists either way).
        await self.member.wait_for_leaders(name, max(timeout_s, 0.0))
        return TopicInfo(name, created.topic_id, num_partitions, config, info.internal)

    async def delete_topic(self, name: str, timeout_s: float) -> None:
        await delete_topic(self.member, name, timeout_s)

    async def add_partitions(self, name: str, count: int, assignments: Sequence[Sequence[int]] | None,
                             validate_only: bool, timeout_s: float) -> None:
        await grow_topic(self.member, name, assignments, count, validate_only, timeout_s)

    async def elect_leaders(self, partitions: list[TopicPartition] | None,
                            unclean: bool) -> dict[TopicPartition, Errors]:
        return await self.member.elect_leaders(partitions, unclean)

    async def alter_reassignments(self, targets: dict[TopicPartition, tuple[int, ...] | None],
                                  allow_replication_factor_change: bool) -> dict[TopicPartition, Refusal | None]:
        return await self.member.alter_reassignments(targets, allow_replication_factor_change)

    async def list_reassignments(self, partitions: list[TopicPartition] | None
                                 ) -> dict[TopicPartition, ReplicaAssignment]:
        return await self.member.list_reassignments(partitions)

    def find_coordinator(self, topic: InternalTopic, partition_for: Callable[[str, int], int], key: str,
                         listener: str | None) -> tuple[Errors, BrokerEndpoint | None]:
        error, broker = find_coordinator(self.member, self.config, topic, partition_for, key)
        if broker is None:
            return error, None
        # At the address of the listener the client came in on, as Metadata answers.
        return error, BrokerEndpoint(broker.broker_id, *broker.address(listener), broker.rack)

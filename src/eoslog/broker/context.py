"""State shared by every connection of one broker, and the per-request context.

Handlers receive both instead of reaching for globals (as uvicorn passes its
ServerState), so tests can build a broker state around a temporary directory.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from eoslog.broker.config_admin import ConfigAdmin
from eoslog.broker.metadata_cache import TopicEntries
from eoslog.broker.metadata_support import Advertised, BrokerEndpoint, MetadataSupport
from eoslog.broker.quota_admin import QuotaAdmin
from eoslog.config import BrokerConfig
from eoslog.coordinator.group import GroupCoordinator
from eoslog.coordinator.producer_id_manager import ProducerIdGenerator
from eoslog.coordinator.share import ShareCoordinator
from eoslog.coordinator.transaction import TransactionCoordinator
from eoslog.features import Features
from eoslog.protocol.api_keys import ApiKey
from eoslog.quotas.client import ClientQuotas, MutationQuota, QuotaType
from eoslog.replica import ReplicaManager
from eoslog.security.acls import CLUSTER_NAME, SUPPORTED_OPERATIONS, AclOperation, ResourceType
from eoslog.security.authorizer import Security
from eoslog.security.session import Principal, Session
from eoslog.share.manager import SharePartitionManager
from eoslog.storage import LogManager
from eoslog.types import TopicPartition


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class Throttle:
    """The longest throttle a request earned, and the quota that earned it."""

    ms: int = 0
    quota: QuotaType | None = None

    def earned(self, quota: QuotaType, ms: int) -> None:
        if ms > self.ms:
            self.ms, self.quota = ms, quota


@dataclass
class BrokerState:
    config: BrokerConfig
    logs: LogManager
    producer_ids: ProducerIdGenerator
    # This broker's partitions (every produce, fetch and marker goes through it) and the
    # coordinators, all built before the state: a handler never finds one missing.
    replicas: ReplicaManager
    group_coordinator: GroupCoordinator
    txn_coordinator: TransactionCoordinator
    share_coordinator: ShareCoordinator
    # The share-partitions this broker leads and their members' share sessions (KIP-932).
    share_partitions: SharePartitionManager
    # One node or a ZooKeeper cluster: what depends on where metadata lives (metadata_support.py).
    metadata_support: MetadataSupport
    # The finalized features (KIP-584) as this broker knows them; the metadata support keeps
    # them (a file of the log directory on one node, the /feature znode in a cluster).
    features: Features
    clock_ms: Callable[[], int] = wall_clock_ms
    # This broker's addresses per listener; Metadata answers with the client's listener.
    advertised: Advertised = field(default_factory=Advertised)
    # Requests wait until the broker serves: in a cluster the listener opens (its port is
    # part of the registration) before the broker has joined and knows the cluster's
    # metadata, as Kafka's socket server does not process requests before start-up ends.
    serving: asyncio.Event = field(default_factory=asyncio.Event)
    # Metadata's topic entries, kept encoded while the topics do not change (metadata_cache.py).
    metadata_entries: TopicEntries = field(default_factory=TopicEntries)
    # Dynamic configs (AlterConfigs): built here, so the stored ones apply before the logs load.
    config_admin: ConfigAdmin = field(init=False)
    # Credentials, ACLs and the authorizer (security/authorizer.py).
    security: Security = field(init=False)
    # Client quotas (KIP-546): what AlterClientQuotas stores and the managers that enforce it.
    quota_admin: QuotaAdmin = field(init=False)

    def __post_init__(self) -> None:
        self.config_admin = ConfigAdmin(self.config, self.logs, self.metadata_support)
        self.security = Security(self.config)
        self.quota_admin = QuotaAdmin(self.config_admin.store, self.metadata_support, self.clock_ms,
                                      (int(self.config["quota.window.num"]),
                                       int(self.config["quota.window.size.seconds"]) * 1000),
                                      (int(self.config["controller.quota.window.num"]),
                                       int(self.config["controller.quota.window.size.seconds"]) * 1000))

    @property
    def node_id(self) -> int:
        return self.config.node_id

    @property
    def client_quotas(self) -> ClientQuotas:
        return self.quota_admin.quotas

    @property
    def cluster_id(self) -> str:
        return self.logs.cluster_id

    def endpoint(self, listener: str | None = None) -> tuple[str, int]:
        """This broker's advertised (host, port) on ``listener`` (default: the first)."""
        return self.advertised.endpoint(listener)

    def live_brokers(self, listener: str | None = None) -> list[BrokerEndpoint]:
        """This node alone (at ``listener``'s address), or every registered broker of the
        cluster (by id, at the address each registered for ``listener``)."""
        return self.metadata_support.live_brokers(listener)

    def topic_ids(self) -> dict[str, tuple[uuid.UUID, int]]:
        """Topic name → (topic id, partition count): this node's topics, or the cluster's."""
        support = self.metadata_support
        out: dict[str, tuple[uuid.UUID, int]] = {}
        for name in list(support.topic_names()):
            topic_id, count = support.topic_id(name), support.partition_count(name)
            if topic_id is not None and count is not None:
                out[name] = (topic_id, count)
        return out

    def topic_names(self) -> dict[uuid.UUID, str]:
        return {topic_id: name for name, (topic_id, _) in self.topic_ids().items()}

    def partition_exists(self, topic: str, partition: int) -> bool:
        """In this broker's logs, or (cluster mode) in the cluster's metadata."""
        return self.metadata_support.partition_exists(TopicPartition(topic, partition))

    @property
    def controller_id(self) -> int:
        return self.metadata_support.controller_id


@dataclass(frozen=True, slots=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    principal: Principal
    client_address: str
    state: BrokerState
    session: Session | None = None  # None only in tests that build a context by hand
    # Called by a handler once all that is left is waiting (an acks=all produce's appends are
    # done): its connection reads and processes the next requests meanwhile and still answers
    # in order (``broker.connection``). None: the request keeps its connection to the end.
    detach: Callable[[], None] | None = None
    request_size: int = 0  # the request's frame, in bytes (what a produce quota counts)
    # Client quotas (KIP-219): the throttle the request earned, which the dispatcher puts in
    # the response's throttle_time_ms, and ``mute(ms)``, which holds the connection's next
    # requests for as long (at once: a pipelined produce's successors must wait too).
    throttle: Throttle = field(default_factory=lambda: Throttle())
    mute: Callable[[int], None] | None = None

    def record_quota(self, qtype: QuotaType, value: float) -> int:
        """Add ``value`` to this client's ``qtype`` rate (Kafka's maybeRecordAndGetThrottleTimeMs);
        the throttle time in ms it earned (kept as the request's throttle if the longest), for
        which the connection is muted from now on."""
        ms = self.state.quota_admin.quotas.record(qtype, self.principal.name, self.client_id or "", value)
        self.throttled(qtype, ms)
        return ms

    def throttled(self, qtype: QuotaType, ms: int) -> None:
        """The request earned ``ms`` of throttle under ``qtype``: the response says so and the
        connection is muted for as long."""
        self.throttle.earned(qtype, ms)
        if ms > 0 and self.mute is not None:
            self.mute(ms)

    def mutation_quota(self, strict_since: int) -> MutationQuota:
        """The controller-mutation quota this request records against: strict from the API's
        version ``strict_since`` on (it knows THROTTLING_QUOTA_EXCEEDED), permissive before."""
        return self.state.quota_admin.quotas.mutation_quota(self.principal.name, self.client_id or "",
                                                            self.api_version >= strict_since)

    @property
    def listener(self) -> str | None:
        return None if self.session is None else self.session.listener.name

    @property
    def host(self) -> str:
        return self.client_address.rsplit(":", 1)[0]

    # Without an authorizer every check is True and nothing is logged: answered before the
    # host, the API's name and the decision's arguments are worked out (Produce and Fetch ask
    # per topic of every request).
    def allowed(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """May this request's principal perform ``operation`` on the resource? (Logged.)"""
        security = self.state.security
        return not security.acls_enabled or security.allowed(self.principal, self.host, operation, resource_type,
                                                              name, ApiKey(self.api_key).name)

    def allowed_operations(self, resource_type: ResourceType, name: str) -> list[AclOperation]:
        """The operations of ``resource_type`` this principal may perform on the resource
        (the *_authorized_operations fields); not logged, as Kafka does not log them."""
        security = self.state.security
        operations = sorted(SUPPORTED_OPERATIONS[resource_type])
        if not security.acls_enabled:
            return operations
        return [op for op in operations
                if security.allowed(self.principal, self.host, op, resource_type, name, "", log=False)]

    def allowed_on_cluster(self, operation: AclOperation) -> bool:
        return self.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def allowed_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        security = self.state.security
        return not security.acls_enabled or security.allowed_any(self.principal, self.host, operation,
                                                                  resource_type, ApiKey(self.api_key).name)

"""What the admin client takes and returns: frozen dataclasses named as in Kafka's Admin API
(``NewTopic``, ``TopicDescription``, ``ConfigEntry``, ``TransactionDescription``, ...).

Nothing here holds kio types: the admin's modules translate responses into these, so an
application never sees the protocol. Optional values Java wraps in ``Optional`` are None.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from eoslog.client.types import TopicPartition
from eoslog.protocol.configs import AlterConfigOpType, ConfigResourceType, ConfigSource, ConfigSynonym, ConfigType

# -- topics ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NewTopic:
    """A topic to create. -1 (the default) leaves the partition count or the replication
    factor to the broker's ``num.partitions`` / ``default.replication.factor``;
    ``replica_assignment`` (partition → broker ids) replaces both."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)
    replica_assignment: Mapping[int, Sequence[int]] | None = None


class ElectionType(enum.IntEnum):
    """Kafka's ElectionType: back to the preferred replica, or (KIP-460) any live replica of a
    partition that has no leader, even one outside the ISR."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """One replica in a log directory (Java's ReplicaInfo)."""

    size: int
    offset_lag: int  # behind its high watermark (or, a future replica, behind the current one)
    is_future: bool


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    """One log directory of a broker (Java's LogDirDescription): ``error`` None when usable."""

    error: Exception | None
    replica_infos: Mapping[TopicPartition, ReplicaInfo]
    total_bytes: int = -1
    usable_bytes: int = -1


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """A reassignment in progress (Java's PartitionReassignment): every replica the partition
    has while it moves, and those being added and removed."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class NewPartitions:
    """The partition count a topic should grow to, optionally with the new partitions'
    replicas (one broker-id list per new partition)."""

    total_count: int
    new_assignments: Sequence[Sequence[int]] | None = None


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    """What CreateTopics answered for a topic (Java's CreateTopicsResult per topic)."""

    name: str
    topic_id: uuid.UUID | None
    num_partitions: int
    replication_factor: int
    configs: Mapping[str, str | None]


@dataclass(frozen=True, slots=True)
class TopicListing:
    name: str
    topic_id: uuid.UUID | None
    is_internal: bool


@dataclass(frozen=True, slots=True)
class TopicPartitionInfo:
    partition: int
    leader: int  # -1: no leader
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader_epoch: int = -1  # -1: not known (Metadata before v7)
    offline: tuple[int, ...] = ()  # replicas on brokers that are not alive


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID | None
    is_internal: bool
    partitions: tuple[TopicPartitionInfo, ...]

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


# -- configs -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigResource:
    """A topic (by name) or a broker (by node id, as a string; "" for the cluster-wide
    dynamic defaults)."""

    type: ConfigResourceType
    name: str


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None  # None for sensitive values
    source: ConfigSource
    is_sensitive: bool
    is_read_only: bool
    synonyms: tuple[ConfigSynonym, ...] = ()
    type: ConfigType = ConfigType.UNKNOWN
    documentation: str | None = None

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    """One change of ``incremental_alter_configs`` (Java's AlterConfigOp of a ConfigEntry)."""

    name: str
    value: str | None = None
    op_type: AlterConfigOpType = AlterConfigOpType.SET


# -- cluster -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Node:
    id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller: Node | None
    nodes: tuple[Node, ...]


# -- features ----------------------------------------------------------------------------------


class UpgradeType(enum.IntEnum):
    """Kafka's FeatureUpdate.UpgradeType: what an update may do to a finalized level."""

    UPGRADE = 1
    SAFE_DOWNGRADE = 2  # lossless
    UNSAFE_DOWNGRADE = 3  # may lose metadata


@dataclass(frozen=True, slots=True)
class FeatureUpdate:
    """The level a feature should be finalized at (0: not at all), as Kafka's FeatureUpdate."""

    max_version_level: int
    upgrade_type: UpgradeType = UpgradeType.UPGRADE


@dataclass(frozen=True, slots=True)
class FeatureMetadata:
    """What a broker's ApiVersions says about features (Kafka's FeatureMetadata): the finalized
    level of each feature above 0, their epoch (None when nothing was ever finalized) and the
    (min, max) levels the broker supports."""

    finalized_features: Mapping[str, int]
    finalized_features_epoch: int | None
    supported_features: Mapping[str, tuple[int, int]]


# -- groups ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str  # "consumer" for consumer groups, "" for groups that only commit offsets
    state: str | None  # None from brokers before ListGroups v4
    type: str | None = None  # "classic", "consumer", ... (ListGroups v5)


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]  # empty when the group is not a consumer group
    member_epoch: int | None = None  # a KIP-848 consumer group's member
    target_assignment: tuple[TopicPartition, ...] = ()  # a KIP-848 member's target


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """A group as its coordinator sees it. A group that does not exist is described as
    ``Dead`` with no members (Kafka's classic DescribeGroups answer)."""

    group_id: str
    state: str
    protocol_type: str
    partition_assignor: str  # the protocol the group chose, e.g. "range"
    members: tuple[MemberDescription, ...]
    coordinator: Node | None
    type: str = "classic"  # "consumer": a KIP-848 consumer group (described by ConsumerGroupDescribe)
    group_epoch: int | None = None  # a KIP-848 group's epoch

    @property
    def is_simple_consumer_group(self) -> bool:
        return not self.protocol_type


# -- transactions ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    coordinator_id: int


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    coordinator_id: int
    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int | None  # None: no transaction in progress
    topic_partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class ProducerState:
    """An active producer of a partition (DescribeProducers)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int | None  # None: no marker written for this producer yet
    current_transaction_start_offset: int | None  # None: no open transaction here


@dataclass(frozen=True, slots=True)
class AbortTransactionSpec:
    """The open transaction to end with an ABORT marker in one partition: its producer id
    and epoch and the coordinator epoch the marker claims (from ``describe_producers``)."""

    topic_partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


# -- offsets -----------------------------------------------------------------------------------


class IsolationLevel(enum.IntEnum):
    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Which offset ``list_offsets`` looks up: ``OffsetSpec.earliest()``, ``.latest()``
    (the high watermark, or the last stable offset under read_committed),
    ``.max_timestamp()`` or ``.for_timestamp(ms)`` (the first offset at or after it)."""

    timestamp: int

    EARLIEST = -2
    LATEST = -1
    MAX_TIMESTAMP = -3

    @classmethod
    def earliest(cls) -> OffsetSpec:
        return cls(cls.EARLIEST)

    @classmethod
    def latest(cls) -> OffsetSpec:
        return cls(cls.LATEST)

    @classmethod
    def max_timestamp(cls) -> OffsetSpec:
        return cls(cls.MAX_TIMESTAMP)

    @classmethod
    def for_timestamp(cls, timestamp_ms: int) -> OffsetSpec:
        if timestamp_ms < 0:
            raise ValueError(f"a timestamp is not negative: {timestamp_ms}")
        return cls(timestamp_ms)


@dataclass(frozen=True, slots=True)
class ListOffsetsResultInfo:
    offset: int  # -1: no record at or after the timestamp
    timestamp: int  # -1 for earliest/latest
    leader_epoch: int | None


@dataclass(frozen=True, slots=True)
class RecordsToDelete:
    """What ``delete_records`` removes from a partition: every record before
    ``before_offset`` (-1: before the high watermark, i.e. all of them)."""

    before_offset: int

    @classmethod
    def before(cls, offset: int) -> RecordsToDelete:
        """Java's RecordsToDelete.beforeOffset."""
        return cls(offset)


@dataclass(frozen=True, slots=True)
class DeletedRecords:
    """A partition's low watermark (its log start offset) after ``delete_records``."""

    low_watermark: int


__all__ = [
    "AbortTransactionSpec", "AlterConfigOp", "AlterConfigOpType", "ClusterDescription", "ConfigEntry",
    "ConfigResource", "ConfigResourceType",
    "ConfigSource", "ConfigSynonym", "ConfigType", "CreatedTopic", "DeletedRecords", "GroupDescription", "GroupListing",
    "IsolationLevel", "ListOffsetsResultInfo", "MemberDescription", "NewPartitions", "NewTopic", "Node",
    "OffsetSpec", "ProducerState", "RecordsToDelete", "TopicDescription", "TopicListing", "TopicPartitionInfo",
    "TransactionDescription", "TransactionListing",
]


# -- share groups (KIP-932) ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShareMemberDescription:
    member_id: str
    client_id: str
    host: str
    rack: str | None
    member_epoch: int
    subscribed_topics: tuple[str, ...]
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupDescription:
    """A share group as its coordinator sees it (ShareGroupDescribe)."""

    group_id: str
    state: str  # Empty, Stable, Dead
    group_epoch: int
    assignment_epoch: int
    partition_assignor: str
    members: tuple[ShareMemberDescription, ...]
    coordinator: Node | None


@dataclass(frozen=True, slots=True)
class SharePartitionOffsetInfo:
    """A share-partition's start offset (every record below it is done with), its leader epoch,
    and its lag (records not yet delivered for good; None when the broker does not say)."""

    start_offset: int
    leader_epoch: int | None
    lag: int | None

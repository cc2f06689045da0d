"""eoslog's admin client: topics, configs, the cluster, consumer groups, offsets and
transactions, features, in Kafka's Admin vocabulary (``create_topics``, ``describe_transactions``,
``abort_transaction``, ...).

Modules: ``admin`` (AIOAdmin and the blocking Admin), ``core`` (connecting, routing to
the controller / a leader / a coordinator, retries), one module per API family
(``topics``, ``groups``, ``transactions``, ``features``, ...), ``types`` (what calls take and return) and
``config`` (AdminClientConfig names and defaults).
"""

from eoslog.client.admin.admin import Admin, AIOAdmin
from eoslog.client.admin.config import AdminConfig
from eoslog.client.admin.types import (
    AbortTransactionSpec,
    AlterConfigOp,
    AlterConfigOpType,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    CreatedTopic,
    DeletedRecords,
    ElectionType,
    FeatureMetadata,
    FeatureUpdate,
    GroupDescription,
    GroupListing,
    IsolationLevel,
    ListOffsetsResultInfo,
    MemberDescription,
    NewPartitions,
    NewTopic,
    Node,
    OffsetSpec,
    ProducerState,
    RecordsToDelete,
    TopicDescription,
    TopicListing,
    TopicPartitionInfo,
    TransactionDescription,
    TransactionListing,
    UpgradeType,
)

__all__ = [
    "AIOAdmin", "AbortTransactionSpec", "Admin", "AdminConfig", "AlterConfigOp", "AlterConfigOpType",
    "ClusterDescription", "ConfigEntry", "ConfigResource", "ConfigResourceType", "ConfigSource", "ConfigSynonym",
    "ConfigType", "CreatedTopic", "DeletedRecords",
    "ElectionType", "FeatureMetadata", "FeatureUpdate", "GroupDescription", "GroupListing", "IsolationLevel",
    "ListOffsetsResultInfo", "MemberDescription", "NewPartitions", "NewTopic", "Node", "OffsetSpec",
    "ProducerState", "RecordsToDelete", "TopicDescription", "TopicListing", "TopicPartitionInfo",
    "TransactionDescription", "TransactionListing", "UpgradeType",
]

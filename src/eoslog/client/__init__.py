"""eoslog.client: a pure-Python Kafka client — producer, consumer and admin, each an asyncio
core (``AIO*``) with a blocking facade. The names users need are exported here."""

from eoslog.client.admin import (
    AbortTransactionSpec,
    Admin,
    AIOAdmin,
    AlterConfigOp,
    AlterConfigOpType,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    CreatedTopic,
    DeletedRecords,
    FeatureMetadata,
    FeatureUpdate,
    GroupDescription,
    GroupListing,
    IsolationLevel,
    ListOffsetsResultInfo,
    MemberDescription,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ProducerState,
    RecordsToDelete,
    ShareGroupDescription,
    ShareMemberDescription,
    SharePartitionOffsetInfo,
    TopicDescription,
    TopicListing,
    TransactionDescription,
    TransactionListing,
    UpgradeType,
)
from eoslog.client.consumer import AIOConsumer, Consumer
from eoslog.client.producer import AIOProducer, Producer, RecordMetadata
from eoslog.client.share import AcknowledgeType, AIOShareConsumer, ShareConsumer, ShareRecord
from eoslog.client.types import (
    ConsumerGroupMetadata,
    ConsumerRecord,
    OffsetAndMetadata,
    PreparedTxnState,
    TopicPartition,
)

__all__ = ["ConsumerGroupMetadata", "OffsetAndMetadata", "PreparedTxnState", "TopicPartition"]
__all__ += ["AIOProducer", "Producer", "RecordMetadata"]  # the producer
__all__ += [  # the admin client
    "AIOAdmin", "AbortTransactionSpec", "Admin", "AlterConfigOp", "AlterConfigOpType", "ClusterDescription",
    "ConfigEntry", "ConfigResource", "ConfigResourceType", "ConfigSource", "CreatedTopic", "DeletedRecords",
    "FeatureMetadata", "FeatureUpdate", "GroupDescription", "GroupListing", "IsolationLevel",
    "ListOffsetsResultInfo", "MemberDescription", "NewPartitions", "NewTopic", "OffsetSpec", "ProducerState",
    "RecordsToDelete", "TopicDescription", "TopicListing", "TransactionDescription", "TransactionListing",
    "UpgradeType",
]
__all__ += ["AIOConsumer", "Consumer", "ConsumerRecord"]  # the consumer
__all__ += ["ShareGroupDescription", "ShareMemberDescription", "SharePartitionOffsetInfo"]  # share admin
__all__ += ["AIOShareConsumer", "AcknowledgeType", "ShareConsumer", "ShareRecord"]  # the share consumer (KIP-932)

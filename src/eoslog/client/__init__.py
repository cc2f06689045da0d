"""eoslog.client: a pure-Python Kafka client — producer, consumer and admin, each an asyncio
core (``AIO*``) with a blocking facade. The names users need are exported here."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# Where each exported name lives. They are imported on first use (PEP 562), so a process that
# needs only a leaf module — the broker imports eoslog.client.errors, versions and security —
# does not load the producer, consumer, admin and share clients (a third of its start-up).
_HOMES = {
    "eoslog.client.admin": (
        "AbortTransactionSpec", "Admin", "AIOAdmin", "AlterConfigOp", "AlterConfigOpType", "ClusterDescription",
        "ConfigEntry", "ConfigResource", "ConfigResourceType", "ConfigSource", "CreatedTopic", "DeletedRecords",
        "FeatureMetadata", "FeatureUpdate", "GroupDescription", "GroupListing", "IsolationLevel",
        "ListOffsetsResultInfo", "MemberDescription", "NewPartitions", "NewTopic", "OffsetSpec", "ProducerState",
        "RecordsToDelete", "ShareGroupDescription", "ShareMemberDescription", "SharePartitionOffsetInfo",
        "TopicDescription", "TopicListing", "TransactionDescription", "TransactionListing", "UpgradeType",
    ),
    "eoslog.client.consumer": ("AIOConsumer", "Consumer"),
    "eoslog.client.producer": ("AIOProducer", "Producer", "RecordMetadata"),
    "eoslog.client.share": ("AcknowledgeType", "AIOShareConsumer", "ShareConsumer", "ShareRecord"),
    "eoslog.client.types": (
        "ConsumerGroupMetadata", "ConsumerRecord", "OffsetAndMetadata", "PreparedTxnState", "TopicPartition",
    ),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME_OF})


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

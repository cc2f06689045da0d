"""client"""

from eoslog.client.admin import (
    AbortTransactionSpec,
    Admin,
    AIOAdmin,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    CreatedTopic,
    GroupDescription,
    GroupListing,
    IsolationLevel,
    ListOffsetsResultInfo,
    MemberDescription,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ProducerState,
    TopicDescription,
    TopicListing,
    TransactionDescription,
    TransactionListing,
)
from eoslog.client.consumer import AIOConsumer, Consumer
from eoslog.client.types import ConsumerRecord, PreparedTxnState

__all__ = ["PreparedTxnState"]
__all__ += [  # the admin client
    "AIOAdmin", "AbortTransactionSpec", "Admin", "ClusterDescription", "ConfigEntry", "ConfigResource",
    "ConfigResourceType", "ConfigSource", "CreatedTopic", "GroupDescription", "GroupListing", "IsolationLevel",
    "ListOffsetsResultInfo", "MemberDescription", "NewPartitions", "NewTopic", "OffsetSpec", "ProducerState",
    "TopicDescription", "TopicListing", "TransactionDescription", "TransactionListing",
]
__all__ += ["AIOConsumer", "Consumer", "ConsumerRecord"]  # the consumer

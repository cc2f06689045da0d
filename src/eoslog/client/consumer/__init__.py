"""eoslog's Kafka consumer: assign or subscribe (classic group protocol), read_committed.

Modules, as Kafka's consumer internals: ``consumer`` (the API: AIOConsumer and the threaded
Consumer), ``fetcher`` (Fetch and ListOffsets) with ``completed_fetch`` (batches → records,
the aborted-transaction filter), ``coordinator`` (group membership, commits),
``assignors`` and ``protocol`` (the consumer protocol's JoinGroup/SyncGroup metadata),
``subscription_state`` (what is read from where), ``config``, ``metrics``, ``errors``.
"""

from eoslog.client.consumer.config import ConsumerConfig, consumer_config
from eoslog.client.consumer.consumer import AIOConsumer, Consumer
from eoslog.client.consumer.errors import CommitFailedError, NoOffsetForPartitionError, OffsetOutOfRangeNoResetError
from eoslog.client.types import ConsumerGroupMetadata, ConsumerRecord, OffsetAndMetadata, TopicPartition

__all__ = [
    "AIOConsumer", "CommitFailedError", "Consumer", "ConsumerConfig", "ConsumerGroupMetadata", "ConsumerRecord",
    "NoOffsetForPartitionError", "OffsetAndMetadata", "OffsetOutOfRangeNoResetError", "TopicPartition",
    "consumer_config",
]

"""eoslog's Kafka producer: idempotent by default, transactional with ``transactional.id``.

Modules, as in aiokafka's producer package: ``producer`` (the API: AIOProducer and the
threaded Producer), ``accumulator`` (batching), ``sender`` (all I/O), ``transaction_manager``
(state only) with ``txn_requests`` (one handler per coordinator request), ``batch``
(record batches built as records arrive), ``wire`` (Produce encoded by hand), ``config``.
"""

from eoslog.client.producer.config import ProducerConfig, producer_config
from eoslog.client.producer.futures import RecordFuture, RecordMetadata
from eoslog.client.producer.producer import AIOProducer, Producer
from eoslog.client.producer.transaction_manager import State as TransactionState
from eoslog.client.types import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition

__all__ = [
    "AIOProducer", "ConsumerGroupMetadata", "OffsetAndMetadata", "Producer", "ProducerConfig", "RecordFuture",
    "RecordMetadata", "TopicPartition", "TransactionState", "producer_config",
]

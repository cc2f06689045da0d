"""``__transaction_state`` as the transaction coordinator sees it: create, append, read.

The only module of the transaction coordinator that touches storage. Appends take
``PartitionLog.append_from_coordinator`` (offsets assigned, no producer checks), always
uncompressed, as Kafka enforces for this topic. Storage failures come back as
``CoordinatorAppendError`` with the storage's Kafka error name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from eoslog.coordinator.group.offsets_topic import CoordinatorAppendError, KeyValue
from eoslog.coordinator.transaction.log import TRANSACTION_STATE_TOPIC
from eoslog.records import InvalidRecordError, build_batch
from eoslog.storage import LogManager, PartitionLog, TopicError


@dataclass(frozen=True, slots=True)
class TransactionStateTopicConfig:
    num_partitions: int
    segment_bytes: int


class TransactionStateTopic:
    def __init__(self, logs: LogManager, config: TransactionStateTopicConfig,
                 clock_ms: Callable[[], int]) -> None:
        self.logs = logs
        self.config = config
        self._clock_ms = clock_ms

    @property
    def exists(self) -> bool:
        return TRANSACTION_STATE_TOPIC in self.logs.topics

    @property
    def num_partitions(self) -> int:
        """The existing topic's partition count wins over the config, as in Kafka."""
        info = self.logs.topics.get(TRANSACTION_STATE_TOPIC)
        return info.num_partitions if info is not None else self.config.num_partitions

    def create(self) -> bool:
        """Create the topic (compacted) if it does not exist; True if this call created it."""
        if self.exists:
            return False
        try:
            self.logs.create_topic(
                TRANSACTION_STATE_TOPIC, self.config.num_partitions,
                {"cleanup.policy": "compact", "segment.bytes": self.config.segment_bytes,
                 "compression.type": "producer"},
                internal=True,
            )
        except TopicError as e:
            if e.error_name != "TOPIC_ALREADY_EXISTS":
                raise
            return False
        return True

    def partition_log(self, partition: int) -> PartitionLog:
        plog = self.logs.get_log(TRANSACTION_STATE_TOPIC, partition)
        if plog is None:
            raise CoordinatorAppendError(
                "UNKNOWN_TOPIC_OR_PARTITION", f"{TRANSACTION_STATE_TOPIC}-{partition} does not exist"
            )
        return plog

    def append(self, partition: int, records: Sequence[KeyValue]) -> int:
        """Append one batch of (key, value) records; returns the batch's base offset."""
        plog = self.partition_log(partition)
        batch = build_batch([(k, v, ()) for k, v in records], timestamp=self._clock_ms())
        try:
            return plog.append_from_coordinator(batch).first_offset
        except InvalidRecordError as e:
            raise CoordinatorAppendError(e.error_name, str(e)) from e
        except OSError as e:
            raise CoordinatorAppendError(
                "KAFKA_STORAGE_ERROR", f"{TRANSACTION_STATE_TOPIC}-{partition}: {e}"
            ) from e

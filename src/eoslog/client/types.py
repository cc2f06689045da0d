"""Small value types shared by the client's producer and consumer."""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, TypeVar

# The one (topic, partition) value: the consumer protocol's codec (``eoslog.protocol``), which
# the client shares with the broker, yields it.
from eoslog.types import TopicPartition as TopicPartition


class HasTopicPartition(Protocol):
    """confluent-kafka's TopicPartition, or any object naming a topic and a partition."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...


# What the consumer's partition arguments accept: eoslog's TopicPartition, a (topic,
# partition) tuple, or confluent-kafka's TopicPartition.
PartitionLike = tuple[str, int] | HasTopicPartition
# A mapping's key type is invariant: methods taking a Mapping keyed by partitions are generic in it.
P = TypeVar("P", bound=PartitionLike)


class OffsetAndMetadata(NamedTuple):
    """A consumer position to commit: the offset of the next record to read."""

    offset: int
    metadata: str | None = None
    leader_epoch: int = -1


class ConsumerGroupMetadata(NamedTuple):
    """What a transactional producer needs to commit a consumer group's offsets (KIP-447):
    the consumer's ``group_metadata()``, or just a group id (generation -1, no member id)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class ConsumerRecord(NamedTuple):
    """A record returned by the consumer's ``poll``. ``timestamp_type`` is 0 (CreateTime) or
    1 (LogAppendTime); ``leader_epoch`` is the batch's partition leader epoch, None when unset."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: tuple[tuple[str, bytes | None], ...]
    leader_epoch: int | None


class TransactionIdentity(NamedTuple):
    """A transactional producer's open transaction, as eoslog's share acknowledgements inside
    it name it (``Producer.send_acknowledgements_to_transaction``; docs/consumer.md)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


class PreparedTxnState(NamedTuple):
    """A prepared two-phase-commit transaction (KIP-939): the producer id and epoch it was
    prepared under. Store ``to_string()`` with the external decision; after a crash, a new
    producer's ``complete_transaction(PreparedTxnState.from_string(stored))`` commits the
    transaction if it is still that one and aborts it otherwise. Kafka's format: "123:4"."""

    producer_id: int = -1
    epoch: int = -1

    @property
    def has_transaction(self) -> bool:
        return self.producer_id >= 0 and self.epoch >= 0

    def to_string(self) -> str:
        """``"producer_id:epoch"``; the empty string for the empty state, as Kafka's."""
        return f"{self.producer_id}:{self.epoch}" if self.has_transaction else ""

    @classmethod
    def from_string(cls, text: str | None) -> PreparedTxnState:
        """Parse ``to_string()``'s form; None or "" is the empty state. ValueError otherwise."""
        if not text:
            return cls()
        parts = text.split(":")
        try:
            if len(parts) != 2:
                raise ValueError
            producer_id, epoch = int(parts[0]), int(parts[1])
        except ValueError:
            raise ValueError(f"invalid prepared transaction state {text!r}: expected 'producerId:epoch'") from None
        if producer_id < 0 or not 0 <= epoch <= 32767:
            raise ValueError(f"invalid prepared transaction state {text!r}: producer id or epoch out of range")
        return cls(producer_id, epoch)

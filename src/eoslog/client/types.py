"""Small value types shared by the client's producer and consumer."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int


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

"""Keys and values of ``__share_group_state`` records, in Kafka's exact formats
(``ShareSnapshotKey/Value.json``, ``ShareUpdateKey/Value.json`` of Kafka's share coordinator),
so ``kafka-dump-log.sh --share-group-state-decoder`` reads what eoslog writes::

    key    int16 type (0 snapshot, 1 update), group string, topic_id uuid, partition int32
           (version 0, not flexible)
    ShareSnapshotValue  int16 version 0 (flexible): snapshot_epoch, state_epoch, leader_epoch int32,
                        start_offset int64, create_timestamp, write_timestamp int64,
                        state_batches [first_offset int64, last_offset int64,
                        delivery_state int8, delivery_count int16],
                        tagged 0: delivery_complete_count int32 (default -1)
    ShareUpdateValue    int16 version 0 (flexible): snapshot_epoch, leader_epoch int32,
                        start_offset int64, state_batches [...], tagged 0: delivery_complete_count

A snapshot is a share-partition's whole state; an update carries the batches that changed
since, laid over it (``state.combine``). A null value is a tombstone: the state was deleted.
"""

# No ``from __future__ import annotations``: kio reads the dataclasses' field types at run time.

import uuid
from dataclasses import dataclass, field
from enum import IntEnum
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i64

from eoslog.coordinator import record_codec
from eoslog.coordinator.partitioning import coordinator_partition_for
from eoslog.coordinator.record_codec import CoordinatorRecordError
from eoslog.coordinator.share.state import DeliveryState, ShareGroupOffset, SharePartitionKey, StateBatch

__all__ = [
    "CoordinatorRecordError", "ShareRecordType", "decode_key", "decode_value", "encode_snapshot",
    "encode_tombstones", "encode_update", "share_state_partition_for",
]


class ShareRecordType(IntEnum):
    SNAPSHOT = 0
    UPDATE = 1


def share_state_partition_for(key: SharePartitionKey, num_partitions: int) -> int:
    """Kafka's ``ShareCoordinatorService.partitionFor``: ``abs("group:topicId:partition".hashCode)
    % share.coordinator.state.topic.num.partitions``."""
    return coordinator_partition_for(key.coordinator_key, num_partitions)


@dataclass(frozen=True, slots=True, kw_only=True)
class _StateBatch:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    first_offset: i64 = field(metadata={"kafka_type": "int64"})
    last_offset: i64 = field(metadata={"kafka_type": "int64"})
    delivery_state: i8 = field(metadata={"kafka_type": "int8"})
    delivery_count: i16 = field(metadata={"kafka_type": "int16"})


@dataclass(frozen=True, slots=True, kw_only=True)
class _Key:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    group_id: str = field(metadata={"kafka_type": "string"})
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    partition: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class _SnapshotValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    snapshot_epoch: i32 = field(metadata={"kafka_type": "int32"})
    state_epoch: i32 = field(metadata={"kafka_type": "int32"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"})
    start_offset: i64 = field(metadata={"kafka_type": "int64"})
    delivery_complete_count: i32 = field(metadata={"kafka_type": "int32", "tag": 0}, default=i32(-1))
    create_timestamp: i64 = field(metadata={"kafka_type": "int64"})
    write_timestamp: i64 = field(metadata={"kafka_type": "int64"})
    state_batches: tuple[_StateBatch, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class _UpdateValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    snapshot_epoch: i32 = field(metadata={"kafka_type": "int32"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"})
    start_offset: i64 = field(metadata={"kafka_type": "int64"})
    delivery_complete_count: i32 = field(metadata={"kafka_type": "int32", "tag": 0}, default=i32(-1))
    state_batches: tuple[_StateBatch, ...]


VALUE_VERSION = 0


@dataclass(frozen=True, slots=True)
class ShareUpdate:
    """A decoded ShareUpdateValue: the batches that changed, and the start offset after them."""

    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    state_batches: tuple[StateBatch, ...]


def _key(record_type: ShareRecordType, key: SharePartitionKey) -> bytes:
    return record_codec.encode(record_type, _Key(group_id=key.group_id, topic_id=key.topic_id,
                                                 partition=i32(key.partition)))


def _batches(batches: tuple[StateBatch, ...]) -> tuple[_StateBatch, ...]:
    return tuple(_StateBatch(first_offset=i64(b.first_offset), last_offset=i64(b.last_offset),
                             delivery_state=i8(b.delivery_state), delivery_count=i16(b.delivery_count))
                 for b in batches)


def _from_batches(batches: tuple[_StateBatch, ...]) -> tuple[StateBatch, ...]:
    try:
        return tuple(StateBatch(int(b.first_offset), int(b.last_offset), DeliveryState(int(b.delivery_state)),
                                int(b.delivery_count)) for b in batches)
    except ValueError as e:
        raise CoordinatorRecordError(f"state batch with an unknown delivery state: {e}") from e


def encode_snapshot(key: SharePartitionKey, state: ShareGroupOffset) -> tuple[bytes, bytes]:
    return _key(ShareRecordType.SNAPSHOT, key), record_codec.encode(VALUE_VERSION, _SnapshotValue(
        snapshot_epoch=i32(state.snapshot_epoch), state_epoch=i32(state.state_epoch),
        leader_epoch=i32(state.leader_epoch), start_offset=i64(state.start_offset),
        delivery_complete_count=i32(state.delivery_complete_count),
        create_timestamp=i64(state.create_timestamp), write_timestamp=i64(state.write_timestamp),
        state_batches=_batches(state.state_batches)))


def encode_update(key: SharePartitionKey, update: ShareUpdate) -> tuple[bytes, bytes]:
    return _key(ShareRecordType.UPDATE, key), record_codec.encode(VALUE_VERSION, _UpdateValue(
        snapshot_epoch=i32(update.snapshot_epoch), leader_epoch=i32(update.leader_epoch),
        start_offset=i64(update.start_offset), delivery_complete_count=i32(update.delivery_complete_count),
        state_batches=_batches(update.state_batches)))


def encode_tombstones(key: SharePartitionKey) -> list[tuple[bytes, bytes | None]]:
    """Deleting a share-partition's state: a tombstone for each of its keys (Kafka's
    ``ShareCoordinatorRecordHelpers.newShareStateTombstoneRecord``)."""
    return [(_key(ShareRecordType.SNAPSHOT, key), None), (_key(ShareRecordType.UPDATE, key), None)]


def decode_key(data: bytes) -> tuple[ShareRecordType, SharePartitionKey] | None:
    """The record's type and share-partition; None for a record type this broker does not know."""
    prefix = record_codec.prefix_of(data)
    if prefix not in (ShareRecordType.SNAPSHOT, ShareRecordType.UPDATE):
        return None
    key = record_codec.decode(_Key, data)
    return ShareRecordType(prefix), SharePartitionKey(key.group_id, key.topic_id, int(key.partition))


def decode_value(record_type: ShareRecordType, data: bytes) -> ShareGroupOffset | ShareUpdate:
    version = record_codec.prefix_of(data)
    if version != VALUE_VERSION:
        raise CoordinatorRecordError(f"share state value version {version} (this broker knows {VALUE_VERSION})")
    if record_type is ShareRecordType.SNAPSHOT:
        s = record_codec.decode(_SnapshotValue, data)
        return ShareGroupOffset(int(s.snapshot_epoch), int(s.state_epoch), int(s.leader_epoch),
                                int(s.start_offset), int(s.delivery_complete_count), int(s.create_timestamp),
                                int(s.write_timestamp), _from_batches(s.state_batches))
    u = record_codec.decode(_UpdateValue, data)
    return ShareUpdate(int(u.snapshot_epoch), int(u.leader_epoch), int(u.start_offset),
                       int(u.delivery_complete_count), _from_batches(u.state_batches))

"""Share groups' records in ``__consumer_offsets``, in Kafka's formats (the group coordinator's
``ShareGroup*Key/Value.json``, record types 10 to 15), so a Kafka broker or
``kafka-dump-log.sh --offsets-decoder`` reads what eoslog writes::

    type 10 ShareGroupMemberMetadata        key (group, member)  value rack?, client_id, client_host,
                                                                        subscribed_topic_names [string]
    type 11 ShareGroupMetadata              key (group)          value epoch int32, metadata_hash int64
    type 12 ShareGroupTargetAssignmentMetadata  key (group)      value assignment_epoch int32,
                                                                        tagged 0 assignment_timestamp int64
    type 13 ShareGroupTargetAssignmentMember    key (group, member)  value [topic_id uuid, partitions [int32]]
    type 14 ShareGroupCurrentMemberAssignment   key (group, member)  value member_epoch, previous_member_epoch
                                                                        int32, state int8, assigned [topic_id,
                                                                        partitions]
    type 15 ShareGroupStatePartitionMetadata    key (group)      value initializing / initialized
                                                                        [topic_id, topic_name, partitions],
                                                                        deleting [topic_id, topic_name]

Keys are version 0, not flexible; values version 0, flexible. A null value is a tombstone.
"""

# No ``from __future__ import annotations``: kio reads the dataclasses' field types at run time.

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i64

from eoslog.coordinator import record_codec
from eoslog.coordinator.group.modern_records import GroupKey, MemberKey, TargetAssignmentMember, TopicPartitions
from eoslog.coordinator.group.modern_records import TargetAssignmentMetadata as _TargetAssignmentMetadata
from eoslog.coordinator.record_codec import CoordinatorRecordError

__all__ = ["CoordinatorRecordError", "ShareRecord", "ShareRecordKind", "decode", "encode", "topic_partitions"]

VALUE_VERSION = 0
Assignment = Mapping[uuid.UUID, frozenset[int]]  # topic id → partitions


class ShareRecordKind(IntEnum):
    MEMBER_METADATA = 10
    METADATA = 11
    TARGET_ASSIGNMENT_METADATA = 12
    TARGET_ASSIGNMENT_MEMBER = 13
    CURRENT_MEMBER_ASSIGNMENT = 14
    STATE_PARTITION_METADATA = 15


_WITH_MEMBER = frozenset({ShareRecordKind.MEMBER_METADATA, ShareRecordKind.TARGET_ASSIGNMENT_MEMBER,
                          ShareRecordKind.CURRENT_MEMBER_ASSIGNMENT})


@dataclass(frozen=True, slots=True, kw_only=True)
class _MemberMetadata:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    rack_id: str | None = field(metadata={"kafka_type": "string"})
    client_id: str = field(metadata={"kafka_type": "string"})
    client_host: str = field(metadata={"kafka_type": "string"})
    subscribed_topic_names: tuple[str, ...] = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class _Metadata:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    epoch: i32 = field(metadata={"kafka_type": "int32"})
    metadata_hash: i64 = field(metadata={"kafka_type": "int64"})


@dataclass(frozen=True, slots=True, kw_only=True)
class _CurrentMemberAssignment:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    previous_member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    state: i8 = field(metadata={"kafka_type": "int8"})
    assigned_partitions: tuple[TopicPartitions, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitionsInfo:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    topic_name: str = field(metadata={"kafka_type": "string"})
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class _TopicInfo:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    topic_name: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class _StatePartitionMetadata:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    initializing_topics: tuple[TopicPartitionsInfo, ...]
    initialized_topics: tuple[TopicPartitionsInfo, ...]
    deleting_topics: tuple[_TopicInfo, ...]


# -- the domain's view ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CurrentAssignment:
    member_epoch: int
    previous_member_epoch: int
    assigned: Assignment


@dataclass(frozen=True, slots=True)
class InitializedTopic:
    topic_id: uuid.UUID
    topic_name: str
    partitions: frozenset[int]


@dataclass(frozen=True, slots=True)
class StatePartitions:
    initializing: tuple[InitializedTopic, ...]
    initialized: tuple[InitializedTopic, ...]
    deleting: tuple[tuple[uuid.UUID, str], ...]


ShareValue = MemberMetadata | int | Assignment | CurrentAssignment | StatePartitions


@dataclass(frozen=True, slots=True)
class ShareRecord:
    """One decoded record: ``value`` None is a tombstone. For METADATA and
    TARGET_ASSIGNMENT_METADATA the value is the epoch."""

    kind: ShareRecordKind
    group_id: str
    member_id: str | None
    value: ShareValue | None


def topic_partitions(assignment: Assignment) -> tuple[TopicPartitions, ...]:
    return tuple(TopicPartitions(topic_id=t, partitions=tuple(i32(p) for p in sorted(ps)))
                 for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0])) if ps)


def _assignment(tps: tuple[TopicPartitions, ...]) -> dict[uuid.UUID, frozenset[int]]:
    return {t.topic_id: frozenset(int(p) for p in t.partitions) for t in tps}


def _infos(topics: tuple[InitializedTopic, ...]) -> tuple[TopicPartitionsInfo, ...]:
    return tuple(TopicPartitionsInfo(topic_id=t.topic_id, topic_name=t.topic_name,
                                      partitions=tuple(i32(p) for p in sorted(t.partitions))) for t in topics)


def encode(record: ShareRecord, now_ms: int = 0) -> tuple[bytes, bytes | None]:
    kind, value = record.kind, record.value
    if kind in _WITH_MEMBER:
        assert record.member_id is not None
        key = record_codec.encode(kind, MemberKey(group_id=record.group_id, member_id=record.member_id))
    else:
        key = record_codec.encode(kind, GroupKey(group_id=record.group_id))
    if value is None:
        return key, None
    entity: Any
    if kind is ShareRecordKind.MEMBER_METADATA:
        assert isinstance(value, MemberMetadata)
        entity = _MemberMetadata(rack_id=value.rack_id, client_id=value.client_id, client_host=value.client_host,
                                 subscribed_topic_names=tuple(value.subscribed_topic_names))
    elif kind is ShareRecordKind.METADATA:
        assert isinstance(value, int)
        entity = _Metadata(epoch=i32(value), metadata_hash=i64(0))
    elif kind is ShareRecordKind.TARGET_ASSIGNMENT_METADATA:
        assert isinstance(value, int)
        entity = _TargetAssignmentMetadata(assignment_epoch=i32(value), assignment_timestamp=i64(now_ms))
    elif kind is ShareRecordKind.TARGET_ASSIGNMENT_MEMBER:
        assert isinstance(value, Mapping)
        entity = TargetAssignmentMember(topic_partitions=topic_partitions(value))
    elif kind is ShareRecordKind.CURRENT_MEMBER_ASSIGNMENT:
        assert isinstance(value, CurrentAssignment)
        entity = _CurrentMemberAssignment(member_epoch=i32(value.member_epoch),
                                          previous_member_epoch=i32(value.previous_member_epoch), state=i8(0),
                                          assigned_partitions=topic_partitions(value.assigned))
    else:
        assert isinstance(value, StatePartitions)
        entity = _StatePartitionMetadata(
            initializing_topics=_infos(value.initializing), initialized_topics=_infos(value.initialized),
            deleting_topics=tuple(_TopicInfo(topic_id=t, topic_name=n) for t, n in value.deleting))
    return key, record_codec.encode(VALUE_VERSION, entity)


_KINDS = frozenset(int(k) for k in ShareRecordKind)


def is_share_key(key: bytes) -> bool:
    """A key of a share group's record (types 10 to 15)."""
    return record_codec.has_type(key, _KINDS)


def decode(key: bytes, value: bytes | None) -> ShareRecord:
    kind = ShareRecordKind(record_codec.prefix_of(key))
    member_id: str | None = None
    if kind in _WITH_MEMBER:
        mk = record_codec.decode(MemberKey, key)
        group_id, member_id = mk.group_id, mk.member_id
    else:
        group_id = record_codec.decode(GroupKey, key).group_id
    if value is None:
        return ShareRecord(kind, group_id, member_id, None)
    if record_codec.prefix_of(value) != VALUE_VERSION:
        raise CoordinatorRecordError(f"{kind.name} value version {record_codec.prefix_of(value)}")
    decoded: ShareValue
    if kind is ShareRecordKind.MEMBER_METADATA:
        m = record_codec.decode(_MemberMetadata, value)
        decoded = MemberMetadata(m.rack_id, m.client_id, m.client_host, tuple(m.subscribed_topic_names))
    elif kind is ShareRecordKind.METADATA:
        decoded = int(record_codec.decode(_Metadata, value).epoch)
    elif kind is ShareRecordKind.TARGET_ASSIGNMENT_METADATA:
        decoded = int(record_codec.decode(_TargetAssignmentMetadata, value).assignment_epoch)
    elif kind is ShareRecordKind.TARGET_ASSIGNMENT_MEMBER:
        decoded = _assignment(record_codec.decode(TargetAssignmentMember, value).topic_partitions)
    elif kind is ShareRecordKind.CURRENT_MEMBER_ASSIGNMENT:
        c = record_codec.decode(_CurrentMemberAssignment, value)
        decoded = CurrentAssignment(int(c.member_epoch), int(c.previous_member_epoch),
                                    _assignment(c.assigned_partitions))
    else:
        s = record_codec.decode(_StatePartitionMetadata, value)

        def topics(infos: tuple[TopicPartitionsInfo, ...]) -> tuple[InitializedTopic, ...]:
            return tuple(InitializedTopic(t.topic_id, t.topic_name, frozenset(int(p) for p in t.partitions))
                         for t in infos)
        decoded = StatePartitions(topics(s.initializing_topics), topics(s.initialized_topics),
                                  tuple((t.topic_id, t.topic_name) for t in s.deleting_topics))
    return ShareRecord(kind, group_id, member_id, decoded)

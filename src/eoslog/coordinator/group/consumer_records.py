"""Consumer groups' records in ``__consumer_offsets`` (KIP-848), in Kafka 4.4's formats (the group
coordinator's ``ConsumerGroup*Key/Value.json``), so a Kafka broker or ``kafka-dump-log.sh
--offsets-decoder`` reads what eoslog writes::

    type 3  ConsumerGroupMetadata              key (group)          value epoch int32, tagged 0 metadata_hash int64
    type 4  ConsumerGroupPartitionMetadata     key (group)          (Kafka ≤ 4.0's; read and ignored)
    type 5  ConsumerGroupMemberMetadata        key (group, member)  value instance_id?, rack_id?, client_id,
                                                                          client_host, subscribed_topic_names [string],
                                                                          subscribed_topic_regex?, rebalance_timeout_ms,
                                                                          server_assignor?, tagged 0
                                                                          classic_member_metadata? {session_timeout_ms,
                                                                          supported_protocols [name, metadata bytes]}
    type 6  ConsumerGroupTargetAssignmentMetadata  key (group)      value assignment_epoch int32,
                                                                          tagged 0 assignment_timestamp int64
    type 7  ConsumerGroupTargetAssignmentMember    key (group, member)  value [topic_id uuid, partitions [int32]]
    type 8  ConsumerGroupCurrentMemberAssignment   key (group, member)  value member_epoch, previous_member_epoch,
                                                                          state int8, assigned_partitions and
                                                                          partitions_pending_revocation [topic_id,
                                                                          partitions, tagged 0 assignment_epochs?]
    type 16 ConsumerGroupRegularExpression     key (group, regex)   value topics [string], version int64,
                                                                          timestamp int64

Keys are version 0 and not flexible; values version 0, flexible. A null value is a tombstone. The
per-partition assignment epochs (KIP-1251) are what an offset commit with an older member epoch is
judged by (``consumer_group.ConsumerGroup.validate_offset_commit``).
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

__all__ = ["ConsumerRecord", "ConsumerRecordKind", "CoordinatorRecordError", "decode", "encode", "is_consumer_key"]

VALUE_VERSION = 0
Assignment = Mapping[uuid.UUID, frozenset[int]]  # topic id → partitions
EpochAssignment = Mapping[uuid.UUID, Mapping[int, int]]  # topic id → partition → assignment epoch


class ConsumerRecordKind(IntEnum):
    METADATA = 3
    PARTITION_METADATA = 4  # Kafka 4.0's subscription metadata: replaced by the metadata hash (KIP-1101)
    MEMBER_METADATA = 5
    TARGET_ASSIGNMENT_METADATA = 6
    TARGET_ASSIGNMENT_MEMBER = 7
    CURRENT_MEMBER_ASSIGNMENT = 8
    REGULAR_EXPRESSION = 16


_WITH_MEMBER = frozenset({ConsumerRecordKind.MEMBER_METADATA, ConsumerRecordKind.TARGET_ASSIGNMENT_MEMBER,
                          ConsumerRecordKind.CURRENT_MEMBER_ASSIGNMENT})


@dataclass(frozen=True, slots=True, kw_only=True)
class _RegexKey:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    group_id: str = field(metadata={"kafka_type": "string"})
    regular_expression: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class _Metadata:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    epoch: i32 = field(metadata={"kafka_type": "int32"})
    metadata_hash: i64 = field(metadata={"kafka_type": "int64", "tag": 0}, default=i64(0))


@dataclass(frozen=True, slots=True, kw_only=True)
class _ClassicProtocol:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    name: str = field(metadata={"kafka_type": "string"})
    metadata: bytes = field(metadata={"kafka_type": "bytes"})


@dataclass(frozen=True, slots=True, kw_only=True)
class _ClassicMemberMetadata:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    session_timeout_ms: i32 = field(metadata={"kafka_type": "int32"})
    supported_protocols: tuple[_ClassicProtocol, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class _MemberMetadata:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    instance_id: str | None = field(metadata={"kafka_type": "string"})
    rack_id: str | None = field(metadata={"kafka_type": "string"})
    client_id: str = field(metadata={"kafka_type": "string"})
    client_host: str = field(metadata={"kafka_type": "string"})
    subscribed_topic_names: tuple[str, ...] = field(metadata={"kafka_type": "string"})
    subscribed_topic_regex: str | None = field(metadata={"kafka_type": "string"})
    rebalance_timeout_ms: i32 = field(metadata={"kafka_type": "int32"})
    server_assignor: str | None = field(metadata={"kafka_type": "string"})
    # tagged 0, ClassicMemberMetadata: written and read by hand (_encode_member, _decode_member)


@dataclass(frozen=True, slots=True, kw_only=True)
class _TopicPartitions:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"})
    assignment_epochs: tuple[i32, ...] | None = field(metadata={"kafka_type": "int32", "tag": 0}, default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class _CurrentMemberAssignment:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    previous_member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    state: i8 = field(metadata={"kafka_type": "int8"})
    assigned_partitions: tuple[_TopicPartitions, ...]
    partitions_pending_revocation: tuple[_TopicPartitions, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class _RegularExpression:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topics: tuple[str, ...] = field(metadata={"kafka_type": "string"})
    version: i64 = field(metadata={"kafka_type": "int64"})
    timestamp: i64 = field(metadata={"kafka_type": "int64"})


# -- the domain's view ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroupMetadata:
    epoch: int
    metadata_hash: int


@dataclass(frozen=True, slots=True)
class ClassicMetadata:
    """A member that speaks the classic protocol (JoinGroup/SyncGroup) in a consumer group."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # (name, subscription), the member's preference order


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicMetadata | None = None


@dataclass(frozen=True, slots=True)
class TargetMetadata:
    assignment_epoch: int
    assignment_timestamp: int


@dataclass(frozen=True, slots=True)
class CurrentAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: EpochAssignment
    pending_revocation: EpochAssignment


@dataclass(frozen=True, slots=True)
class ResolvedRegex:
    topics: frozenset[str]
    version: int
    timestamp: int


ConsumerValue = GroupMetadata | MemberMetadata | TargetMetadata | Assignment | CurrentAssignment | ResolvedRegex


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    """One decoded record: ``value`` None is a tombstone. ``key`` is the member id (member records)
    or the regular expression (REGULAR_EXPRESSION), else None."""

    kind: ConsumerRecordKind
    group_id: str
    key: str | None
    value: ConsumerValue | None


def _sorted_topics(items: Mapping[uuid.UUID, Any]) -> list[tuple[uuid.UUID, Any]]:
    return sorted(items.items(), key=lambda kv: str(kv[0]))


def _epoch_partitions(assignment: EpochAssignment) -> tuple[_TopicPartitions, ...]:
    out = []
    for topic_id, epochs in _sorted_topics(assignment):
        if epochs:
            ps = sorted(epochs)
            out.append(_TopicPartitions(topic_id=topic_id, partitions=tuple(i32(p) for p in ps),
                                        assignment_epochs=tuple(i32(epochs[p]) for p in ps)))
    return tuple(out)


def _epochs(tps: tuple[_TopicPartitions, ...], default_epoch: int) -> dict[uuid.UUID, dict[int, int]]:
    """Kafka's reading: a missing (or misaligned) assignment_epochs gives every partition the
    member's epoch (written by a Kafka before KIP-1251)."""
    out: dict[uuid.UUID, dict[int, int]] = {}
    for t in tps:
        epochs = t.assignment_epochs
        if epochs is None or len(epochs) != len(t.partitions):
            out[t.topic_id] = {int(p): default_epoch for p in t.partitions}
        else:
            out[t.topic_id] = {int(p): int(e) for p, e in zip(t.partitions, epochs, strict=True)}
    return out


def _encode_member(value: MemberMetadata) -> bytes:
    """The member's value; its tagged ClassicMemberMetadata (a nullable struct) as Kafka's generated
    code writes one that is set: tag 0, size, the presence marker 1, the struct. A member of the
    consumer protocol has none (null, the default): the tag is left out."""
    base = record_codec.encode(VALUE_VERSION, _MemberMetadata(
        instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
        client_host=value.client_host, subscribed_topic_names=tuple(value.subscribed_topic_names),
        subscribed_topic_regex=value.subscribed_topic_regex, rebalance_timeout_ms=i32(value.rebalance_timeout_ms),
        server_assignor=value.server_assignor))
    if value.classic is None:
        return base
    struct_bytes = record_codec.encode(0, _ClassicMemberMetadata(
        session_timeout_ms=i32(value.classic.session_timeout_ms),
        supported_protocols=tuple(_ClassicProtocol(name=n, metadata=m) for n, m in value.classic.protocols)))[2:]
    payload = b"\x01" + struct_bytes
    # base ends with its tagged fields' count, 0: one tagged field instead.
    return base[:-1] + record_codec.uvarint(1) + record_codec.uvarint(0) + record_codec.uvarint(len(payload)) + payload


def _decode_member(value: bytes) -> MemberMetadata:
    r = record_codec.FlexibleReader(value)
    instance_id, rack_id, client_id, client_host = r.string(), r.string(), r.string(), r.string()
    topics = tuple(str(t) for t in r.array(r.string))
    regex, rebalance_timeout, assignor = r.string(), r.int32(), r.string()
    classic = None
    tag = r.tagged_fields().get(0)
    if tag is not None and tag[:1] == b"\x01":
        c = record_codec.FlexibleReader(tag, 1)
        session_timeout = c.int32()

        def protocol() -> tuple[str, bytes]:
            name, metadata = c.string() or "", c.compact_bytes()
            c.tagged_fields()
            return name, metadata
        classic = ClassicMetadata(session_timeout, tuple(c.array(protocol)))
    if client_id is None or client_host is None:
        raise CoordinatorRecordError("ConsumerGroupMemberMetadataValue without a client id or host")
    return MemberMetadata(instance_id, rack_id, client_id, client_host, topics, regex, rebalance_timeout, assignor,
                          classic)


def encode(record: ConsumerRecord) -> tuple[bytes, bytes | None]:
    kind, value = record.kind, record.value
    if kind in _WITH_MEMBER:
        assert record.key is not None
        key = record_codec.encode(kind, MemberKey(group_id=record.group_id, member_id=record.key))
    elif kind is ConsumerRecordKind.REGULAR_EXPRESSION:
        assert record.key is not None
        key = record_codec.encode(kind, _RegexKey(group_id=record.group_id, regular_expression=record.key))
    else:
        key = record_codec.encode(kind, GroupKey(group_id=record.group_id))
    if value is None:
        return key, None
    entity: Any
    if kind is ConsumerRecordKind.METADATA:
        assert isinstance(value, GroupMetadata)
        entity = _Metadata(epoch=i32(value.epoch), metadata_hash=i64(value.metadata_hash))
    elif kind is ConsumerRecordKind.MEMBER_METADATA:
        assert isinstance(value, MemberMetadata)
        return key, _encode_member(value)
    elif kind is ConsumerRecordKind.TARGET_ASSIGNMENT_METADATA:
        assert isinstance(value, TargetMetadata)
        entity = _TargetAssignmentMetadata(assignment_epoch=i32(value.assignment_epoch),
                                           assignment_timestamp=i64(value.assignment_timestamp))
    elif kind is ConsumerRecordKind.TARGET_ASSIGNMENT_MEMBER:
        assert isinstance(value, Mapping)
        entity = TargetAssignmentMember(topic_partitions=tuple(
            TopicPartitions(topic_id=t, partitions=tuple(i32(p) for p in sorted(ps)))
            for t, ps in _sorted_topics(value) if ps))
    elif kind is ConsumerRecordKind.CURRENT_MEMBER_ASSIGNMENT:
        assert isinstance(value, CurrentAssignment)
        entity = _CurrentMemberAssignment(
            member_epoch=i32(value.member_epoch), previous_member_epoch=i32(value.previous_member_epoch),
            state=i8(value.state), assigned_partitions=_epoch_partitions(value.assigned),
            partitions_pending_revocation=_epoch_partitions(value.pending_revocation))
    elif kind is ConsumerRecordKind.REGULAR_EXPRESSION:
        assert isinstance(value, ResolvedRegex)
        entity = _RegularExpression(topics=tuple(sorted(value.topics)), version=i64(value.version),
                                    timestamp=i64(value.timestamp))
    else:
        raise CoordinatorRecordError(f"eoslog does not write {kind.name} records")
    return key, record_codec.encode(VALUE_VERSION, entity)


_KINDS = frozenset(int(k) for k in ConsumerRecordKind)


def is_consumer_key(key: bytes) -> bool:
    """A key of a consumer group's record (types 3 to 8 and 16)."""
    return record_codec.has_type(key, _KINDS)


def decode(key: bytes, value: bytes | None) -> ConsumerRecord:
    kind = ConsumerRecordKind(record_codec.prefix_of(key))
    rkey: str | None = None
    if kind in _WITH_MEMBER:
        mk = record_codec.decode(MemberKey, key)
        group_id, rkey = mk.group_id, mk.member_id
    elif kind is ConsumerRecordKind.REGULAR_EXPRESSION:
        rk = record_codec.decode(_RegexKey, key)
        group_id, rkey = rk.group_id, rk.regular_expression
    else:
        group_id = record_codec.decode(GroupKey, key).group_id
    if value is None or kind is ConsumerRecordKind.PARTITION_METADATA:
        return ConsumerRecord(kind, group_id, rkey, None)
    if record_codec.prefix_of(value) != VALUE_VERSION:
        raise CoordinatorRecordError(f"{kind.name} value version {record_codec.prefix_of(value)}")
    decoded: ConsumerValue
    if kind is ConsumerRecordKind.METADATA:
        m = record_codec.decode(_Metadata, value)
        decoded = GroupMetadata(int(m.epoch), int(m.metadata_hash))
    elif kind is ConsumerRecordKind.MEMBER_METADATA:
        decoded = _decode_member(value)
    elif kind is ConsumerRecordKind.TARGET_ASSIGNMENT_METADATA:
        t = record_codec.decode(_TargetAssignmentMetadata, value)
        decoded = TargetMetadata(int(t.assignment_epoch), int(t.assignment_timestamp))
    elif kind is ConsumerRecordKind.TARGET_ASSIGNMENT_MEMBER:
        a = record_codec.decode(TargetAssignmentMember, value)
        decoded = {tp.topic_id: frozenset(int(p) for p in tp.partitions) for tp in a.topic_partitions}
    elif kind is ConsumerRecordKind.CURRENT_MEMBER_ASSIGNMENT:
        cur = record_codec.decode(_CurrentMemberAssignment, value)
        epoch = int(cur.member_epoch)
        decoded = CurrentAssignment(epoch, int(cur.previous_member_epoch), int(cur.state),
                                    _epochs(cur.assigned_partitions, epoch),
                                    _epochs(cur.partitions_pending_revocation, epoch))
    else:
        r = record_codec.decode(_RegularExpression, value)
        decoded = ResolvedRegex(frozenset(r.topics), int(r.version), int(r.timestamp))
    return ConsumerRecord(kind, group_id, rkey, decoded)

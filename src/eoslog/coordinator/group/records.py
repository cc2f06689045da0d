"""Keys and values of ``__consumer_offsets`` records, in Kafka's exact on-disk formats.

Kafka's tools (and a Kafka broker reading an eoslog data directory) decode these, so the
layouts are Kafka's, field by field. Non-flexible encoding throughout: int16-length
strings (-1 = null), int32-length bytes, int32-count arrays, all big-endian.

Keys (the first int16 is the key version, which also says what the record is)::

    OffsetCommitKey   v0/v1  version, group string, topic string, partition int32
    GroupMetadataKey  v2     version, group string

Values (int16 version first)::

    OffsetCommitValue v0  offset int64, metadata string, commit_timestamp int64
                      v1  ... v0 ..., expire_timestamp int64
                      v2  same as v0
                      v3  offset int64, leader_epoch int32, metadata string, commit_timestamp int64
    GroupMetadataValue v0  protocol_type string, generation int32, protocol string?,
                           leader string?, members [member]
                       v2+ current_state_timestamp int64 after leader
        member v0: member_id, client_id, client_host, session_timeout int32,
                   subscription bytes, assignment bytes
               v1+: rebalance_timeout int32 before session_timeout
               v3+: group_instance_id string? after member_id

A null value is a tombstone: the offset (or the group) was deleted.

Written: OffsetCommitKey v1; OffsetCommitValue v3, or v1 when the commit carried an
explicit retention time (Kafka does the same); GroupMetadataKey v2, GroupMetadataValue v3.
Keys of later versions (KIP-848 consumer groups, share groups) are reported as unknown
and skipped by the loader.

Also here: Java's ``String.hashCode`` (the group → partition mapping must agree with
Kafka's) and the topics of a ConsumerProtocolSubscription.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from eoslog.coordinator.partitioning import coordinator_partition_for

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A ``__consumer_offsets`` record this broker cannot decode."""


# -- group → partition ---------------------------------------------------------------


def offsets_partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition of a group."""
    return coordinator_partition_for(group_id, num_partitions)


# -- primitive codecs ----------------------------------------------------------------


class _Writer:
    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def i16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def i32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def i64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def string(self, v: str | None) -> None:
        if v is None:
            self.i16(-1)
            return
        data = v.encode()
        if len(data) > 0x7FFF:
            raise RecordFormatError(f"string of {len(data)} bytes does not fit an int16 length")
        self.i16(len(data))
        self.buf += data

    def bytes_(self, v: bytes | None) -> None:
        if v is None:
            self.i32(-1)
            return
        self.i32(len(v))
        self.buf += v


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError(
                f"record ends at byte {len(self.data)}, field needs bytes {self.pos}..{self.pos + n}"
            )
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def nullable_string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self._take(n).decode("utf-8", "replace")

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise RecordFormatError(f"null where a string is required at byte {self.pos - 2}")
        return value

    def nullable_bytes(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else bytes(self._take(n))

    def bytes_(self) -> bytes:
        return self.nullable_bytes() or b""


# -- keys ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class UnknownKey:
    version: int


RecordKey = OffsetCommitKey | GroupMetadataKey | UnknownKey


def encode_offset_commit_key(key: OffsetCommitKey) -> bytes:
    w = _Writer()
    w.i16(OFFSET_COMMIT_KEY_VERSION)
    w.string(key.group)
    w.string(key.topic)
    w.i32(key.partition)
    return bytes(w.buf)


def encode_group_metadata_key(key: GroupMetadataKey) -> bytes:
    w = _Writer()
    w.i16(GROUP_METADATA_KEY_VERSION)
    w.string(key.group)
    return bytes(w.buf)


def decode_key(data: bytes) -> RecordKey:
    r = _Reader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetCommitKey(r.string(), r.string(), r.i32())
    if version == 2:
        return GroupMetadataKey(r.string())
    return UnknownKey(version)


# -- offset commit values -------------------------------------------------------------------

NO_LEADER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = NO_LEADER_EPOCH
    expire_timestamp: int | None = None  # only v1 carries it


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    w = _Writer()
    if value.expire_timestamp is not None:
        w.i16(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY)
        w.i64(value.offset)
        w.string(value.metadata)
        w.i64(value.commit_timestamp)
        w.i64(value.expire_timestamp)
    else:
        w.i16(OFFSET_COMMIT_VALUE_VERSION)
        w.i64(value.offset)
        w.i32(value.leader_epoch)
        w.string(value.metadata)
        w.i64(value.commit_timestamp)
    return bytes(w.buf)


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    r = _Reader(data)
    version = r.i16()
    if version in (0, 2):
        return OffsetCommitValue(r.i64(), r.string(), r.i64())
    if version == 1:
        offset, metadata, commit_ts = r.i64(), r.string(), r.i64()
        return OffsetCommitValue(offset, metadata, commit_ts, expire_timestamp=r.i64())
    if version == 3:
        offset, epoch, metadata = r.i64(), r.i32(), r.string()
        return OffsetCommitValue(offset, metadata, r.i64(), leader_epoch=epoch)
    raise RecordFormatError(f"unsupported OffsetCommitValue version {version}")


# -- group metadata values --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int  # -1 when unknown (values before v2)
    members: tuple[MemberRecord, ...]


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    w = _Writer()
    w.i16(GROUP_METADATA_VALUE_VERSION)
    w.string(value.protocol_type)
    w.i32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    w.i64(value.current_state_timestamp)
    w.i32(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.i32(m.rebalance_timeout_ms)
        w.i32(m.session_timeout_ms)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return bytes(w.buf)


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    r = _Reader(data)
    version = r.i16()
    if not 0 <= version <= 3:
        raise RecordFormatError(f"unsupported GroupMetadataValue version {version}")
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    state_ts = r.i64() if version >= 2 else -1
    count = r.i32()
    members = []
    for _ in range(max(count, 0)):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        session_timeout = r.i32() if version == 0 else -1
        rebalance_timeout = r.i32() if version >= 1 else session_timeout
        if version >= 1:
            session_timeout = r.i32()
        members.append(
            MemberRecord(
                member_id, instance_id, client_id, client_host, rebalance_timeout,
                session_timeout, r.bytes_(), r.bytes_(),
            )
        )
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))

"""``__consumer_offsets`` record formats and the group → partition mapping."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eoslog.coordinator.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberRecord,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    UnknownKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    offsets_partition_for,
)
from eoslog.coordinator.partitioning import java_string_hash
from eoslog.protocol.consumer_protocol import ProtocolError, decode_assignment, decode_subscription


def _s(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def _b(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


@pytest.mark.parametrize(
    "text,expected",
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("Hello World", -862545276),
        ("polygenelubricants", -(2**31)),  # Java's famous Integer.MIN_VALUE hash
        ("\U0001F600", 55357 * 31 + 56832),  # a surrogate pair: two UTF-16 code units
    ],
)
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_partition_mapping_matches_kafka_utils_abs() -> None:
    assert offsets_partition_for("hello", 50) == 99162322 % 50
    assert offsets_partition_for("Hello World", 50) == 862545276 % 50
    # Utils.abs(Integer.MIN_VALUE) is 0, not MIN_VALUE.
    assert offsets_partition_for("polygenelubricants", 50) == 0
    assert all(0 <= offsets_partition_for(f"group-{i}", 50) < 50 for i in range(200))


def test_offset_commit_key_layout() -> None:
    data = encode_offset_commit_key(OffsetCommitKey("grp", "topic", 7))
    assert data == struct.pack(">h", 1) + _s("grp") + _s("topic") + struct.pack(">i", 7)
    assert decode_key(data) == OffsetCommitKey("grp", "topic", 7)
    # Version 0 keys (written by older brokers) have the same layout.
    assert decode_key(struct.pack(">h", 0) + data[2:]) == OffsetCommitKey("grp", "topic", 7)


def test_group_metadata_key_layout_and_unknown_versions() -> None:
    data = encode_group_metadata_key(GroupMetadataKey("grp"))
    assert data == struct.pack(">h", 2) + _s("grp")
    assert decode_key(data) == GroupMetadataKey("grp")
    assert decode_key(struct.pack(">h", 3) + _s("grp")) == UnknownKey(3)


def test_offset_commit_value_versions() -> None:
    v3 = encode_offset_commit_value(OffsetCommitValue(42, "meta", 1000, leader_epoch=5))
    assert v3 == struct.pack(">hqi", 3, 42, 5) + _s("meta") + struct.pack(">q", 1000)
    v1 = encode_offset_commit_value(OffsetCommitValue(42, "", 1000, expire_timestamp=9000))
    assert v1 == struct.pack(">hq", 1, 42) + _s("") + struct.pack(">qq", 1000, 9000)
    v0 = struct.pack(">hq", 0, 42) + _s("m") + struct.pack(">q", 7)
    assert decode_offset_commit_value(v0) == OffsetCommitValue(42, "m", 7)
    v2 = struct.pack(">hq", 2, 43) + _s("") + struct.pack(">q", 8)
    assert decode_offset_commit_value(v2) == OffsetCommitValue(43, "", 8)
    with pytest.raises(RecordFormatError):
        decode_offset_commit_value(struct.pack(">hq", 9, 1))
    with pytest.raises(RecordFormatError):
        decode_offset_commit_value(v3[:-3])


@given(
    offset=st.integers(-1, 2**63 - 1), metadata=st.text(max_size=50),
    ts=st.integers(0, 2**62), epoch=st.integers(-1, 2**31 - 1),
    expire=st.none() | st.integers(0, 2**62),
)
def test_offset_commit_value_round_trip(offset: int, metadata: str, ts: int, epoch: int,
                                        expire: int | None) -> None:
    value = OffsetCommitValue(offset, metadata, ts, epoch if expire is None else -1, expire)
    assert decode_offset_commit_value(encode_offset_commit_value(value)) == value


_members = st.lists(
    st.builds(
        MemberRecord, st.text(min_size=1, max_size=20), st.none() | st.text(max_size=10),
        st.text(max_size=10), st.text(max_size=10), st.integers(0, 2**31 - 1),
        st.integers(0, 2**31 - 1), st.binary(max_size=40), st.binary(max_size=40),
    ),
    max_size=4,
)


@given(
    protocol_type=st.text(max_size=10), generation=st.integers(0, 2**31 - 1),
    protocol=st.none() | st.text(max_size=10), leader=st.none() | st.text(max_size=10),
    ts=st.integers(-1, 2**62), members=_members,
)
def test_group_metadata_value_round_trip(protocol_type: str, generation: int, protocol: str | None,
                                         leader: str | None, ts: int, members: list[MemberRecord]) -> None:
    value = GroupMetadataValue(protocol_type, generation, protocol, leader, ts, tuple(members))
    assert decode_group_metadata_value(encode_group_metadata_value(value)) == value


def test_group_metadata_value_old_versions() -> None:
    head = _s("consumer") + struct.pack(">i", 3) + _s("range") + _s("m1")
    v0 = (struct.pack(">h", 0) + head + struct.pack(">i", 1) + _s("m1") + _s("cid") + _s("/h")
          + struct.pack(">i", 10000) + _b(b"sub") + _b(b"asg"))
    assert decode_group_metadata_value(v0) == GroupMetadataValue(
        "consumer", 3, "range", "m1", -1,
        (MemberRecord("m1", None, "cid", "/h", 10000, 10000, b"sub", b"asg"),),
    )
    v1 = (struct.pack(">h", 1) + head + struct.pack(">i", 1) + _s("m1") + _s("cid") + _s("/h")
          + struct.pack(">ii", 60000, 10000) + _b(b"sub") + _b(b"asg"))
    v2 = (struct.pack(">h", 2) + head + struct.pack(">q", 1234) + struct.pack(">i", 1) + _s("m1")
          + _s("cid") + _s("/h") + struct.pack(">ii", 60000, 10000) + _b(b"sub") + _b(b"asg"))
    expected = MemberRecord("m1", None, "cid", "/h", 60000, 10000, b"sub", b"asg")
    assert decode_group_metadata_value(v1).members == (expected,)
    assert decode_group_metadata_value(v2) == GroupMetadataValue("consumer", 3, "range", "m1", 1234, (expected,))


def test_consumer_protocol_parsing() -> None:
    """The group reads members' subscriptions and the admin client their assignments with the
    one codec (protocol/consumer_protocol.py), from hand-built bytes of old versions."""
    subscription = struct.pack(">hi", 1, 2) + _s("a") + _s("b") + _b(b"") + struct.pack(">i", 0)
    assert decode_subscription(subscription).topics == ("a", "b")
    with pytest.raises(ProtocolError):
        decode_subscription(b"\x00")
    assignment = (struct.pack(">hi", 0, 2) + _s("a") + struct.pack(">iii", 2, 0, 3) + _s("b")
                  + struct.pack(">ii", 1, 1) + _b(b""))
    assert decode_assignment(assignment).partitions == (("a", 0), ("a", 3), ("b", 1))
    assert decode_assignment(b"").partitions == ()

"""Record batch v2: building, decoding, validation and offset assignment.

The CRC is checked against a bit-by-bit CRC-32C written here from the polynomial, so
the tests do not trust the library the code under test uses.
"""

from __future__ import annotations

import struct
from typing import Any

import cramjam
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eoslog.errors import Errors
from eoslog.records import (
    BATCH_HEADER_SIZE,
    CompressionType,
    ControlRecordType,
    InvalidRecordError,
    TimestampType,
    assign_offsets,
    build_batch,
    build_control_batch,
    decode_records,
    iter_batch_headers,
    parse_control_record,
    read_batch_header,
    validate_produce_batches,
)
from eoslog.records.batch import _read_varint, _write_varint

MAX_MESSAGE_BYTES = 1048588


def crc32c_reference(data: bytes) -> int:
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), one bit at a time."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def stored_crc(batch: bytes) -> int:
    return int(struct.unpack_from(">I", batch, 17)[0])


def patch(batch: bytes, pos: int, fmt: str, value: int) -> bytes:
    out = bytearray(batch)
    struct.pack_into(fmt, out, pos, value)
    return bytes(out)


def with_fixed_crc(batch: bytes) -> bytes:
    return patch(batch, 17, ">I", crc32c_reference(batch[21:]))


def simple_batch(n: int = 3, **kw: object) -> bytes:
    records = [(b"k%d" % i, b"v%d" % i, (("h", b"x"),)) for i in range(n)]
    return build_batch(records, timestamp=1_700_000_000_000, **kw)  # type: ignore[arg-type]


def rejected(records: bytes, max_message_bytes: int = MAX_MESSAGE_BYTES) -> str:
    with pytest.raises(InvalidRecordError) as info:
        validate_produce_batches(records, max_message_bytes)
    return info.value.error


# -- CRC and layout ----------------------------------------------------------------


def test_reference_crc32c_matches_the_published_check_value() -> None:
    assert crc32c_reference(b"123456789") == 0xE3069283


@pytest.mark.parametrize("codec", list(CompressionType))
def test_built_batch_layout_and_crc(codec: CompressionType) -> None:
    batch = simple_batch(5, compression=codec, producer_id=7, producer_epoch=2, base_sequence=11)
    h = read_batch_header(batch)
    assert h.size == len(batch)
    assert h.magic == 2
    assert h.crc == crc32c_reference(batch[21:])
    assert h.records_count == 5 and h.last_offset_delta == 4
    assert h.compression is codec
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (7, 2, 11, 15)
    assert h.timestamp_type is TimestampType.CREATE_TIME
    assert not h.is_transactional and not h.is_control


def test_last_sequence_wraps_at_int32_max() -> None:
    h = read_batch_header(simple_batch(3, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2))
    assert h.last_sequence == 0


# -- round trip ------------------------------------------------------------------------

_blobs = st.one_of(st.none(), st.binary(max_size=300))
_headers = st.lists(
    st.tuples(st.text(max_size=20), st.one_of(st.none(), st.binary(max_size=40))), max_size=4
).map(tuple)
_records = st.lists(st.tuples(_blobs, _blobs, _headers), min_size=1, max_size=40)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=_records,
    codec=st.sampled_from(list(CompressionType)),
    base_ts=st.integers(0, 2**50),
    deltas=st.lists(st.integers(-(2**31), 2**31), min_size=40, max_size=40),
    base_offset=st.integers(0, 2**62),
)
def test_build_decode_round_trip(
    records: list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]],
    codec: CompressionType,
    base_ts: int,
    deltas: list[int],
    base_offset: int,
) -> None:
    timestamps = [base_ts + d for d in deltas[: len(records)]]
    batch = build_batch(
        records, timestamp=base_ts, timestamps=timestamps, compression=codec,
        base_offset=base_offset,
    )
    [(pos, h)] = list(iter_batch_headers(batch, verify_crc=True))
    assert pos == 0 and h.size == len(batch)
    assert h.base_timestamp == timestamps[0] and h.max_timestamp == max(timestamps)
    decoded = decode_records(batch)
    assert [(r.key, r.value, r.headers) for r in decoded] == records
    assert [r.offset for r in decoded] == list(range(base_offset, base_offset + len(records)))
    assert [r.timestamp for r in decoded] == timestamps


@given(st.integers(-(2**63), 2**63 - 1))
def test_varint_round_trip(value: int) -> None:
    out = bytearray()
    _write_varint(out, value)
    assert _read_varint(bytes(out), 0) == (value, len(out))


def test_varint_zigzag_encoding_matches_protobuf() -> None:
    for value, encoded in [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-64, b"\x7f"),
                           (64, b"\x80\x01"), (2**31 - 1, b"\xfe\xff\xff\xff\x0f")]:
        out = bytearray()
        _write_varint(out, value)
        assert bytes(out) == encoded


def test_snappy_xerial_framing_is_read() -> None:
    """Kafka's Java client frames snappy as xerial blocks; librdkafka writes raw snappy."""
    plain = build_batch([(b"key", b"value" * 50, ())], timestamp=5)
    body = plain[BATCH_HEADER_SIZE:]
    chunks = [body[:100], body[100:]]
    framed = bytearray(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    for chunk in chunks:
        raw = bytes(cramjam.snappy.compress_raw(chunk))
        framed += struct.pack(">i", len(raw)) + raw
    batch = bytearray(plain[:BATCH_HEADER_SIZE] + framed)
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">h", batch, 21, int(CompressionType.SNAPPY))
    [record] = decode_records(with_fixed_crc(bytes(batch)))
    assert (record.key, record.value) == (b"key", b"value" * 50)


@settings(max_examples=200, deadline=None)
@given(
    codec=st.sampled_from(list(CompressionType)),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), min_size=1, max_size=4),
)
def test_decode_of_a_damaged_batch_fails_cleanly(
    codec: CompressionType, flips: list[tuple[int, int]]
) -> None:
    """Damage inside the records either still decodes or raises InvalidRecordError."""
    batch = bytearray(simple_batch(6, compression=codec))
    for pos, mask in flips:
        batch[BATCH_HEADER_SIZE + pos % (len(batch) - BATCH_HEADER_SIZE)] ^= mask
    try:
        decode_records(bytes(batch))
    except InvalidRecordError as e:
        assert e.error == Errors.CORRUPT_MESSAGE


# -- control batches ---------------------------------------------------------------------


@pytest.mark.parametrize("marker", list(ControlRecordType))
def test_control_batch(marker: ControlRecordType) -> None:
    batch = build_control_batch(
        marker, producer_id=42, producer_epoch=3, coordinator_epoch=9, timestamp=1000
    )
    h = read_batch_header(batch)
    assert h.is_control and h.is_transactional and h.producer_id == 42
    [record] = decode_records(batch)
    assert parse_control_record(record) == (marker, 9)


# -- validation of produced batches -----------------------------------------------------


def test_valid_batch_passes() -> None:
    batch = simple_batch(4)
    [(pos, h)] = validate_produce_batches(batch, MAX_MESSAGE_BYTES)
    assert pos == 0 and h.records_count == 4


def test_bad_crc_is_corrupt_message() -> None:
    batch = bytearray(simple_batch())
    batch[-1] ^= 0x01
    assert rejected(bytes(batch)) == Errors.CORRUPT_MESSAGE
    assert rejected(patch(simple_batch(), 17, ">I", stored_crc(simple_batch()) ^ 1)) == (
        Errors.CORRUPT_MESSAGE
    )


@pytest.mark.parametrize("magic", [0, 1, 3, 255])
def test_magic_other_than_2_is_invalid_record(magic: int) -> None:
    """ProduceRequest.validateRecords: produce v3+ carries magic 2 only."""
    batch = bytearray(simple_batch())
    batch[16] = magic
    assert rejected(bytes(batch)) == Errors.INVALID_RECORD


def test_legacy_message_set_is_invalid_record() -> None:
    # A magic 1 message: offset, size, crc, magic, attributes, timestamp, key, value.
    body = struct.pack(">bbqi", 1, 0, 1000, -1) + struct.pack(">i", 3) + b"abc"
    message = struct.pack(">I", 0) + body
    legacy = struct.pack(">qi", 0, len(message)) + message
    assert rejected(legacy) == Errors.INVALID_RECORD


def test_oversized_batch_is_message_too_large() -> None:
    batch = simple_batch(50)
    assert rejected(batch, max_message_bytes=len(batch) - 1) == Errors.MESSAGE_TOO_LARGE
    validate_produce_batches(batch, len(batch))
    # Kafka checks the size before the CRC.
    damaged = patch(batch, 17, ">I", stored_crc(batch) ^ 1)
    assert rejected(damaged, max_message_bytes=len(batch) - 1) == Errors.MESSAGE_TOO_LARGE


@pytest.mark.parametrize("cut", [1, 10, 60])
def test_truncated_batch_is_corrupt_message(cut: int) -> None:
    assert rejected(simple_batch()[:-cut]) == Errors.CORRUPT_MESSAGE


@pytest.mark.parametrize("length", [-1, -(2**31), 0, 48])
def test_impossible_batch_length_is_corrupt_message(length: int) -> None:
    assert rejected(patch(simple_batch(), 8, ">i", length)) == Errors.CORRUPT_MESSAGE


def test_empty_and_headerless_record_sets() -> None:
    assert rejected(b"") == Errors.INVALID_RECORD
    assert rejected(simple_batch()[:30]) == Errors.CORRUPT_MESSAGE


def test_two_batches_in_one_partition_are_invalid_record() -> None:
    assert rejected(simple_batch(2) + simple_batch(3)) == Errors.INVALID_RECORD


def test_record_count_must_match_last_offset_delta() -> None:
    assert rejected(with_fixed_crc(patch(simple_batch(3), 57, ">i", 2))) == Errors.INVALID_RECORD
    assert rejected(with_fixed_crc(patch(simple_batch(3), 57, ">i", 0))) == Errors.INVALID_RECORD
    assert rejected(with_fixed_crc(patch(simple_batch(3), 23, ">i", 5))) == Errors.INVALID_RECORD


def test_client_base_offset_must_be_zero() -> None:
    assert rejected(simple_batch(base_offset=5)) == Errors.INVALID_RECORD


def test_clients_may_not_send_control_batches() -> None:
    batch = build_control_batch(
        ControlRecordType.COMMIT, producer_id=1, producer_epoch=0, coordinator_epoch=0,
        timestamp=1,
    )
    assert rejected(batch) == Errors.INVALID_RECORD


def test_producer_id_without_sequence_is_invalid_record() -> None:
    assert rejected(simple_batch(producer_id=5, producer_epoch=0)) == Errors.INVALID_RECORD


def test_unknown_codec_is_corrupt_message() -> None:
    assert rejected(with_fixed_crc(patch(simple_batch(), 21, ">h", 5))) == Errors.CORRUPT_MESSAGE


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=200))
def test_random_bytes_never_pass_or_crash(data: bytes) -> None:
    with pytest.raises(InvalidRecordError) as info:
        validate_produce_batches(data, MAX_MESSAGE_BYTES)
    assert info.value.error in (Errors.CORRUPT_MESSAGE, Errors.INVALID_RECORD)


# -- offset assignment ---------------------------------------------------------------------


def test_assign_offsets_patches_only_the_base_offset() -> None:
    batch = simple_batch(4)
    buf = bytearray(batch)
    batches = validate_produce_batches(batch, MAX_MESSAGE_BYTES)
    next_offset, [(_, h)] = assign_offsets(buf, batches, 1234)
    assert next_offset == 1238 and h.base_offset == 1234
    assert bytes(buf[8:]) == batch[8:]
    assert struct.unpack_from(">q", buf, 0)[0] == 1234
    list(iter_batch_headers(bytes(buf), verify_crc=True))  # baseOffset is outside the CRC
    assert [r.offset for r in decode_records(bytes(buf))] == [1234, 1235, 1236, 1237]


def test_assign_offsets_with_log_append_time() -> None:
    """LogAppendTime changes maxTimestamp, the timestamp-type bit and the CRC; nothing else."""
    batch = simple_batch(2, compression=CompressionType.LZ4)
    buf = bytearray(batch)
    batches = validate_produce_batches(batch, MAX_MESSAGE_BYTES)
    _, [(_, h)] = assign_offsets(buf, batches, 10, log_append_time=1_800_000_000_000)
    assert h.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert h.max_timestamp == 1_800_000_000_000
    assert h.crc == crc32c_reference(bytes(buf[21:])) == stored_crc(bytes(buf))
    assert read_batch_header(bytes(buf)) == h
    changed = {i for i in range(len(batch)) if buf[i] != batch[i]}
    assert changed <= set(range(0, 8)) | set(range(17, 23)) | set(range(35, 43))
    assert buf[BATCH_HEADER_SIZE:] == batch[BATCH_HEADER_SIZE:]


def _checks(now: int, before: int = 2**63 - 1, after: int = 3_600_000, *, compacted: bool = False,
            create_time: bool = True, max_record_bytes: int = 2147483639) -> Any:
    from eoslog.records import RecordChecks
    return RecordChecks("t-0", now, create_time, before, after, compacted, max_record_bytes)


def test_timestamps_outside_the_topic_bounds_are_refused_per_record() -> None:
    from eoslog.records import RecordValidationError, validate_records

    now = 1_800_000_000_000
    records = build_batch([(None, b"a", ()), (None, b"b", ()), (None, b"c", ())], timestamp=now,
                          timestamps=[now, now + 3_600_001, now - 10])
    h = read_batch_header(records)
    with pytest.raises(RecordValidationError) as refused:
        validate_records(records, h, _checks(now))
    assert refused.value.error.name == "INVALID_TIMESTAMP"
    assert [i for i, _ in refused.value.record_errors] == [1]
    # A lower bound needs every record decoded: the third is 10 ms too old for before=5.
    with pytest.raises(RecordValidationError) as refused:
        validate_records(records, h, _checks(now, 5, 10**10))
    assert [i for i, _ in refused.value.record_errors] == [2]
    validate_records(records, h, _checks(now, 10, 3_600_001))  # all within bounds
    validate_records(records, h, _checks(now, 5, 5, create_time=False))  # LogAppendTime: not judged


def test_keyless_records_of_a_compacted_topic_are_refused_one_by_one_as_kafka_names_them() -> None:
    """KIP-467 as Kafka 4.4 answers (conformance: produce-fetch/record-errors): each keyless
    record named by its index, the others not; INVALID_RECORD with Kafka's message showing three
    at most; a timestamp error among them makes it INVALID_TIMESTAMP; one error per record, the
    key's first."""
    from eoslog.records import RecordValidationError, validate_records

    now = 1_800_000_000_000
    keys = [None if i % 10 == 0 else b"k%d" % i for i in range(100)]
    records = build_batch([(k, b"v", ()) for k in keys], timestamp=now)
    h = read_batch_header(records)
    validate_records(records, h, _checks(now))  # not compacted: keys do not matter
    with pytest.raises(RecordValidationError) as refused:
        validate_records(records, h, _checks(now, compacted=True))
    assert refused.value.error.name == "INVALID_RECORD"
    assert [i for i, _ in refused.value.record_errors] == list(range(0, 100, 10))
    why = "Compacted topic cannot accept message without key in topic partition t-0"
    assert {m for _, m in refused.value.record_errors} == {why}
    assert str(refused.value) == (
        "One or more records have been rejected due to 10 record errors in total, and only showing the first "
        f"three errors at most: [RecordError(batchIndex=0, message='{why}'), RecordError(batchIndex=10, "
        f"message='{why}'), RecordError(batchIndex=20, message='{why}')]")
    mixed = build_batch([(None, b"a", ()), (b"k", b"b", ()), (None, b"c", ())], timestamp=now,
                        timestamps=[now - 10, now - 10, now])
    with pytest.raises(RecordValidationError) as refused:
        validate_records(mixed, read_batch_header(mixed), _checks(now, 5, compacted=True))
    assert refused.value.error.name == "INVALID_TIMESTAMP"
    assert [(i, m.split(" ")[0]) for i, m in refused.value.record_errors] == [
        (0, "Compacted"), (1, "Timestamp"), (2, "Compacted")]


def test_a_producer_setting_log_append_time_is_refused_per_record() -> None:
    from eoslog.records import RecordValidationError, validate_records

    now = 1_800_000_000_000
    records = bytearray(build_batch([(b"k", b"v", ())], timestamp=now))
    records[22] |= 0x08  # attributes: timestampType = LogAppendTime
    struct.pack_into(">I", records, 17, crc32c_reference(bytes(records[21:])))
    h = read_batch_header(bytes(records))
    validate_records(bytes(records), h, _checks(now))  # a CreateTime topic judges the timestamp only
    with pytest.raises(RecordValidationError) as refused:
        validate_records(bytes(records), h, _checks(now, create_time=False))
    assert refused.value.error.name == "INVALID_TIMESTAMP"
    assert refused.value.record_errors == [(0, (
        f"Invalid timestamp type in message DefaultRecord(offset=0, timestamp={now}, key=1 bytes, value=1 bytes). "
        "Producer should not set timestamp type to LogAppendTime."))]


def test_a_compressed_record_over_max_decompressed_message_bytes_refuses_the_batch() -> None:
    """Kafka 4.4 counts a record's body (after its length): 93 bytes of value make 100."""
    from eoslog.records import CompressionType, InvalidRecordError, RecordValidationError, validate_records

    now = 1_800_000_000_000
    for size, ok in ((93, True), (94, False)):
        records = build_batch([(None, b"x" * size, ())], timestamp=now, compression=CompressionType.GZIP)
        check = _checks(now, max_record_bytes=100)
        if ok:
            validate_records(records, read_batch_header(records), check)
            continue
        with pytest.raises(InvalidRecordError) as refused:
            validate_records(records, read_batch_header(records), check)
        assert refused.value.error.name == "INVALID_RECORD"
        assert not isinstance(refused.value, RecordValidationError)  # the whole batch, no record errors
    plain = build_batch([(None, b"x" * 500, ())], timestamp=now)
    validate_records(plain, read_batch_header(plain), _checks(now, max_record_bytes=100))  # not decompressed

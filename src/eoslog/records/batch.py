"""Record batch v2 (magic 2): the unit that producers send, the log stores and fetch returns.

Wire layout of a batch header, 61 bytes, big-endian::

    offset  size  field
    0       8     baseOffset            assigned by the broker on append
    8       4     batchLength           bytes after this field
    12      4     partitionLeaderEpoch
    16      1     magic                 must be 2
    17      4     crc                   CRC-32C of bytes [21, end)
    21      2     attributes            bits 0-2 compression, 3 timestampType,
                                        4 isTransactional, 5 isControl, 6 hasDeleteHorizonMs
    23      4     lastOffsetDelta
    27      8     baseTimestamp
    35      8     maxTimestamp
    43      8     producerId
    51      2     producerEpoch
    53      4     baseSequence
    57      4     recordsCount
    61      ...   records (compressed as a whole when bits 0-2 are set)

Each record: length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
key (varint length, -1 = null), value (likewise), headers (varint count, then
key varint-length string, value varint-length bytes).

Because the CRC does not cover baseOffset, the broker can assign offsets by patching
eight bytes; everything else is stored exactly as the producer sent it.

A control batch (isControl) holds one record whose key is (version int16, type int16:
0 = ABORT, 1 = COMMIT) and whose value is (version int16, coordinatorEpoch int32).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import IntEnum
from types import ModuleType
from typing import NamedTuple

import crc32c

from eoslog.errors import Errors, KafkaError
from eoslog.records.compression import CompressionType, compress, decompress
from eoslog.records.varint import encode_varint

speedups: ModuleType | None
try:  # the optional C decoder (setup.py, scripts/build_speedups.py); EOSLOG_NO_EXTENSIONS=1 turns it off
    from eoslog.records import _speedups as speedups
except ImportError:
    speedups = None
if os.environ.get("EOSLOG_NO_EXTENSIONS"):
    speedups = None

BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: bytes not counted in batchLength
MAGIC_V2 = 2
CRC_START = 21

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_BATCH_HEAD = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
_LEADER_EPOCH = struct.Struct(">i")
_CRC = struct.Struct(">I")
_MAX_TIMESTAMP = struct.Struct(">q")
_ATTRIBUTES = struct.Struct(">h")


class TimestampType(IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ControlRecordType(IntEnum):
    ABORT = 0
    COMMIT = 1


class InvalidRecordError(KafkaError, ValueError):
    """A batch that must be refused; ``error`` is the Kafka error to answer with."""


class RecordValidationError(InvalidRecordError):
    """Records refused one by one (Kafka's RecordValidationException): ``record_errors`` holds
    (index of the record in its batch, why), answered in the Produce response's record_errors."""

    def __init__(self, error: Errors, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(error, message)
        self.record_errors = record_errors


_LONG_MAX = 2**63 - 1  # Kafka's "no limit" for message.timestamp.before.max.ms
INVALID_TIMESTAMP_MESSAGE = "One or more records have been rejected due to invalid timestamp"
# max.decompressed.message.bytes' default (and ceiling): Kafka's largest allocatable array.
MAX_DECOMPRESSED_RECORD_BYTES = 2147483639


@dataclass(frozen=True, slots=True)
class RecordChecks:
    """What a topic asks of each record of a producer's batch (Kafka's LogValidator inputs)."""

    topic_partition: str  # "topic-partition", as Kafka's TopicPartition prints
    now: int
    create_time: bool  # message.timestamp.type=CreateTime
    before_max_ms: int
    after_max_ms: int
    compacted: bool
    max_record_bytes: int = MAX_DECOMPRESSED_RECORD_BYTES  # max.decompressed.message.bytes


def _varint_size(value: int) -> int:
    return len(encode_varint(value))


def _record_body_size(r: Record, h: BatchHeader) -> int:
    """A record's size after its length prefix, as Kafka's DefaultRecord.sizeInBytes counts it."""
    size = 1 + _varint_size(r.timestamp - h.base_timestamp) + _varint_size(r.offset - h.base_offset)
    for blob in (r.key, r.value):
        size += _varint_size(-1) if blob is None else _varint_size(len(blob)) + len(blob)
    size += _varint_size(len(r.headers))
    for hk, hv in r.headers:
        kb = hk.encode()
        size += _varint_size(len(kb)) + len(kb)
        size += _varint_size(-1) if hv is None else _varint_size(len(hv)) + len(hv)
    return size


def _describe(r: Record) -> str:
    """A record as Kafka's DefaultRecord.toString names it in error messages."""
    return (f"DefaultRecord(offset={r.offset}, timestamp={r.timestamp}, key={len(r.key or b'')} bytes, "
            f"value={len(r.value or b'')} bytes)")


def validate_records(batch: bytes | memoryview, h: BatchHeader, checks: RecordChecks) -> None:
    """Kafka's LogValidator.validateRecord on every record of a producer's batch (KIP-467).

    A compressed batch holding a record whose body exceeds max.decompressed.message.bytes is
    refused whole, INVALID_RECORD (Kafka's decompressing iterator throws before any record is
    judged). Then each record gets at most one error: no key on a compacted topic
    (INVALID_RECORD), else on a CreateTime topic a timestamp outside [now - before.max.ms,
    now + after.max.ms], else a producer that set LogAppendTime (both INVALID_TIMESTAMP). Any
    error refuses the batch: RecordValidationError names each bad record by its index, which
    clients use to fail only those records (the others fail as "part of a batch with an
    invalid record"); the partition's error is INVALID_TIMESTAMP if any record's is, else
    INVALID_RECORD, with Kafka's message. The common case (no compaction, no lower timestamp
    bound, an uncompressed or unlimited batch) is settled from the header without decoding."""
    append_time_batch = bool(h.attributes & TIMESTAMP_TYPE_MASK)
    compressed = bool(h.attributes & COMPRESSION_MASK)
    limited = compressed and checks.max_record_bytes < MAX_DECOMPRESSED_RECORD_BYTES
    now, before, after = checks.now, checks.before_max_ms, checks.after_max_ms

    def out_of_range(ts: int) -> bool:
        diff = now - ts
        return diff > before or -diff > after

    if not (checks.compacted or append_time_batch or limited) and (
            not checks.create_time or (before >= _LONG_MAX and not out_of_range(h.max_timestamp))):
        return
    records = decode_records(batch)
    if limited:
        for r in records:
            if _record_body_size(r, h) > checks.max_record_bytes:
                raise InvalidRecordError(
                    Errors.INVALID_RECORD,
                    f"a record of {_record_body_size(r, h)} bytes decompressed exceeds "
                    f"max.decompressed.message.bytes={checks.max_record_bytes} of {checks.topic_partition}")
    errors: list[tuple[int, str]] = []
    timestamp_error = False
    for i, r in enumerate(records):
        if checks.compacted and r.key is None:
            errors.append((i, "Compacted topic cannot accept message without key in topic partition "
                              f"{checks.topic_partition}"))
        elif checks.create_time and r.timestamp != NO_TIMESTAMP:
            if out_of_range(r.timestamp):
                timestamp_error = True
                errors.append((i, f"Timestamp {r.timestamp} of message with offset {r.offset} is out of range. "
                                  f"The timestamp should be within [{now - before}, {now + after}]"))
        elif append_time_batch:
            timestamp_error = True
            errors.append((i, f"Invalid timestamp type in message {_describe(r)}. Producer should not set "
                              "timestamp type to LogAppendTime."))
    if not errors:
        return
    if timestamp_error:
        raise RecordValidationError(Errors.INVALID_TIMESTAMP, INVALID_TIMESTAMP_MESSAGE, errors)
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    raise RecordValidationError(
        Errors.INVALID_RECORD,
        f"One or more records have been rejected due to {len(errors)} record errors in total, and only "
        f"showing the first three errors at most: [{shown}]", errors)


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies in the log."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> CompressionType:
        return CompressionType(self.attributes & COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType((self.attributes & TIMESTAMP_TYPE_MASK) >> 3)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        # Sequences wrap at Int.MaxValue (Kafka's DefaultRecordBatch.incrementSequence).
        return (self.base_sequence + self.last_offset_delta) % (2**31)


def read_batch_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    return int(crc32c.crc32c(memoryview(buf)[pos + CRC_START : pos + size]))


def iter_batch_headers(
    buf: bytes | bytearray | memoryview, *, verify_crc: bool = False
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for every complete batch in ``buf``.

    Raises InvalidRecordError at the first batch that is truncated, not magic 2, or
    (with verify_crc) fails its checksum. Callers that recover a log catch it to find
    where the valid prefix ends.
    """
    end = len(buf)
    pos = 0
    while pos < end:
        if end - pos < BATCH_HEADER_SIZE:
            raise InvalidRecordError(
                Errors.CORRUPT_MESSAGE, f"truncated batch header at position {pos}"
            )
        header = read_batch_header(buf, pos)
        if header.magic != MAGIC_V2:
            raise InvalidRecordError(
                Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT
                if header.magic in (0, 1)
                else Errors.CORRUPT_MESSAGE,
                f"record batch magic {header.magic} at position {pos}; only magic 2 is supported",
            )
        size = header.size
        if header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD or pos + size > end:
            raise InvalidRecordError(
                Errors.CORRUPT_MESSAGE,
                f"batch at position {pos} claims {size} bytes, {end - pos} available",
            )
        if verify_crc:
            actual = compute_crc(buf, pos, size)
            if actual != header.crc:
                raise InvalidRecordError(
                    Errors.CORRUPT_MESSAGE,
                    f"batch at position {pos} (baseOffset {header.base_offset}) has CRC "
                    f"{header.crc:#010x}, computed {actual:#010x}",
                )
        yield pos, header
        pos += size


def validate_produce_batches(
    records: bytes, max_message_bytes: int
) -> list[tuple[int, BatchHeader]]:
    """Check a Produce request's record set before anything is written.

    Kafka's rules, in Kafka's order (ProduceRequest.validateRecords, then
    UnifiedLog.analyzeAndValidateRecords and LogValidator.validateBatch):

    - exactly one batch, of magic 2 → else INVALID_RECORD;
    - a complete batch whose length covers at least a header → else CORRUPT_MESSAGE;
    - baseOffset 0, as every client sends it → else INVALID_RECORD;
    - at most ``max.message.bytes`` → else MESSAGE_TOO_LARGE;
    - a valid CRC-32C → else CORRUPT_MESSAGE;
    - recordsCount > 0 and equal to lastOffsetDelta + 1, no control batch, a base
      sequence when there is a producer id → else INVALID_RECORD.
    """
    end = len(records)
    if end < BATCH_HEADER_SIZE:
        if end >= 17 and records[16] != MAGIC_V2:
            raise InvalidRecordError(
                Errors.INVALID_RECORD, f"record batch magic {records[16]}; produce v3+ needs magic 2"
            )
        raise InvalidRecordError(
            Errors.CORRUPT_MESSAGE if end else Errors.INVALID_RECORD,
            f"record set of {end} bytes holds no complete record batch",
        )
    h = read_batch_header(records)
    if h.magic != MAGIC_V2:
        raise InvalidRecordError(
            Errors.INVALID_RECORD, f"record batch magic {h.magic}; produce v3+ needs magic 2"
        )
    if h.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD or h.size > end:
        raise InvalidRecordError(
            Errors.CORRUPT_MESSAGE,
            f"record batch claims {h.batch_length + LOG_OVERHEAD} bytes, {end} were sent",
        )
    if h.size != end:
        raise InvalidRecordError(
            Errors.INVALID_RECORD,
            f"{end - h.size} bytes after the first record batch; a produce request "
            "carries exactly one batch per partition",
        )
    if h.base_offset != 0:
        raise InvalidRecordError(
            Errors.INVALID_RECORD, f"record batch baseOffset is {h.base_offset}; clients send 0"
        )
    if h.size > max_message_bytes:
        raise InvalidRecordError(
            Errors.MESSAGE_TOO_LARGE,
            f"batch of {h.size} bytes exceeds max.message.bytes={max_message_bytes}",
        )
    actual = compute_crc(records, 0, h.size)
    if actual != h.crc:
        raise InvalidRecordError(
            Errors.CORRUPT_MESSAGE, f"record batch CRC is {h.crc:#010x}, computed {actual:#010x}"
        )
    if h.records_count <= 0 or h.last_offset_delta != h.records_count - 1:
        raise InvalidRecordError(
            Errors.INVALID_RECORD,
            f"batch has {h.records_count} records but lastOffsetDelta {h.last_offset_delta}",
        )
    if h.is_control:
        raise InvalidRecordError(Errors.INVALID_RECORD, "clients may not produce control batches")
    if h.producer_id >= 0 and h.base_sequence < 0:
        raise InvalidRecordError(
            Errors.INVALID_RECORD, f"producer id {h.producer_id} sent a batch without a base sequence"
        )
    if (h.attributes & COMPRESSION_MASK) > CompressionType.ZSTD:
        raise InvalidRecordError(
            Errors.CORRUPT_MESSAGE, f"unknown compression codec {h.attributes & COMPRESSION_MASK}"
        )
    return [(0, h)]


def offset_chunks(
    records: bytes | bytearray,
    batches: list[tuple[int, BatchHeader]],
    base_offset: int,
    leader_epoch: int,
) -> tuple[int, list[bytes | memoryview], list[tuple[int, BatchHeader]]]:
    """The batches with broker-assigned offsets, as buffers for one ``pwritev`` and without
    copying them: per batch, its new 16-byte head (baseOffset, batchLength, and the leader's
    partitionLeaderEpoch, which Kafka's leader stamps and the CRC does not cover) and a view
    of the rest.

    Returns the next offset after the last batch, the buffers and the patched headers.
    (LogAppendTime also rewrites maxTimestamp and the CRC: that path uses assign_offsets.)
    """
    view = memoryview(records)
    offset = base_offset
    chunks: list[bytes | memoryview] = []
    patched = []
    for pos, h in batches:
        chunks.append(_BATCH_HEAD.pack(offset, h.batch_length, leader_epoch))
        chunks.append(view[pos + _BATCH_HEAD.size : pos + h.size])
        patched.append((pos, h._replace(base_offset=offset, partition_leader_epoch=leader_epoch)))
        offset += h.last_offset_delta + 1
    return offset, chunks, patched


def assign_offsets(
    buf: bytearray,
    batches: list[tuple[int, BatchHeader]],
    base_offset: int,
    log_append_time: int | None = None,
    leader_epoch: int | None = None,
) -> tuple[int, list[tuple[int, BatchHeader]]]:
    """Patch each batch's baseOffset in place (and maxTimestamp for LogAppendTime, and
    partitionLeaderEpoch when ``leader_epoch`` is given).

    Returns the next offset after the last batch and the patched headers.
    """
    offset = base_offset
    patched = []
    for pos, h in batches:
        _BASE_OFFSET.pack_into(buf, pos, offset)
        if leader_epoch is not None:
            _LEADER_EPOCH.pack_into(buf, pos + 12, leader_epoch)
            h = h._replace(partition_leader_epoch=leader_epoch)
        if log_append_time is not None:
            attributes = h.attributes | TIMESTAMP_TYPE_MASK
            _ATTRIBUTES.pack_into(buf, pos + 21, attributes)
            _MAX_TIMESTAMP.pack_into(buf, pos + 35, log_append_time)
            crc = compute_crc(buf, pos, h.size)
            _CRC.pack_into(buf, pos + 17, crc)
            h = h._replace(attributes=attributes, max_timestamp=log_append_time, crc=crc)
        patched.append((pos, h._replace(base_offset=offset)))
        offset += h.last_offset_delta + 1
    return offset, patched


# ---------------------------------------------------------------------------
# Records inside a batch
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = field(default=())


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = 0
    raw = 0
    while True:
        if pos >= len(buf):
            raise InvalidRecordError(Errors.CORRUPT_MESSAGE, "truncated varint")
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise InvalidRecordError(Errors.CORRUPT_MESSAGE, "varint too long")
    return (raw >> 1) ^ -(raw & 1), pos


def _write_varint(out: bytearray, value: int) -> None:
    out += encode_varint(value)


def _read_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = _read_varint(buf, pos)
    if length < 0:
        return None, pos
    if pos + length > len(buf):
        raise InvalidRecordError(Errors.CORRUPT_MESSAGE, "record field runs past the batch")
    return bytes(buf[pos : pos + length]), pos + length


RecordFields = tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]
# The value of every one- and two-byte zigzag varint (14 bits), looked up by
# decode_record_fields instead of computed: ~15% of its time per record (~0.5 MB, once).
_ZIGZAG: list[int] = [(raw >> 1) ^ -(raw & 1) for raw in range(1 << 14)]


def batch_body(batch: bytes | bytearray | memoryview, start: int = 0) -> tuple[BatchHeader, bytes, int, int]:
    """The header of the complete batch at ``start`` and where its records are: (header,
    buffer, start, end). An uncompressed batch inside ``bytes`` (a whole Fetch response's
    records) is read in place; a compressed one is decompressed into a buffer of its own."""
    h = read_batch_header(batch, start)
    if len(batch) - start < h.size:
        raise InvalidRecordError(
            Errors.CORRUPT_MESSAGE, f"batch claims {h.size} bytes, {len(batch) - start} available"
        )
    codec = h.attributes & COMPRESSION_MASK
    if codec > CompressionType.ZSTD:
        raise InvalidRecordError(Errors.CORRUPT_MESSAGE, f"unknown compression codec {codec}")
    if codec == CompressionType.NONE and isinstance(batch, bytes):
        return h, batch, start + BATCH_HEADER_SIZE, start + h.size
    try:
        body = decompress(CompressionType(codec), bytes(batch[start + BATCH_HEADER_SIZE : start + h.size]))
    except Exception as e:  # each codec library raises its own error type
        raise InvalidRecordError(
            Errors.CORRUPT_MESSAGE, f"cannot decompress {CompressionType(codec).name} batch: {e}"
        ) from e
    return h, body, 0, len(body)


def decode_record_fields(
    batch: bytes | bytearray | memoryview, start: int = 0
) -> tuple[BatchHeader, list[RecordFields]]:
    """The header and the records of the complete batch at ``start`` of ``batch``
    (decompressed when needed) as (offset, timestamp, key, value, headers) tuples, by the C
    decoder when it is built, else in Python (the same results: tests run both)."""
    h, body, pos, size = batch_body(batch, start)
    if speedups is None:
        return h, decode_fields_py(body, pos, size, h.records_count, h.base_offset, h.base_timestamp)
    try:
        return h, speedups.decode_fields(body, pos, size, h.records_count, h.base_offset, h.base_timestamp)
    except ValueError as e:
        raise InvalidRecordError(Errors.CORRUPT_MESSAGE, str(e)) from None


def decode_fields_py(
    body: bytes, pos: int, size: int, count: int, base_offset: int, base_timestamp: int
) -> list[RecordFields]:
    """``count`` records from ``pos`` of ``body`` (ending by ``size``): the pure-Python
    decoder. Varints of one or two bytes, which most fields are, are decoded inline rather
    than by a call; each key and value is its one copy."""
    records: list[RecordFields] = []
    append = records.append
    read = _read_varint
    zigzag = _ZIGZAG
    try:
        for _ in range(count):
            b = body[pos]
            if b < 0x80:
                length, pos = zigzag[b], pos + 1
            elif body[pos + 1] < 0x80:
                b = (b & 0x7F) | (body[pos + 1] << 7)
                length, pos = zigzag[b], pos + 2
            else:
                length, pos = read(body, pos)
            end = pos + length
            if length < 0 or end > size:
                raise InvalidRecordError(Errors.CORRUPT_MESSAGE, f"record length {length} out of bounds")
            pos += 1  # record attributes, unused
            b = body[pos]
            if b < 0x80:
                ts_delta, pos = zigzag[b], pos + 1
            elif body[pos + 1] < 0x80:
                b = (b & 0x7F) | (body[pos + 1] << 7)
                ts_delta, pos = zigzag[b], pos + 2
            else:
                ts_delta, pos = read(body, pos)
            b = body[pos]
            if b < 0x80:
                off_delta, pos = zigzag[b], pos + 1
            elif body[pos + 1] < 0x80:
                b = (b & 0x7F) | (body[pos + 1] << 7)
                off_delta, pos = zigzag[b], pos + 2
            else:
                off_delta, pos = read(body, pos)
            b = body[pos]
            if b < 0x80:
                n, pos = zigzag[b], pos + 1
            elif body[pos + 1] < 0x80:
                b = (b & 0x7F) | (body[pos + 1] << 7)
                n, pos = zigzag[b], pos + 2
            else:
                n, pos = read(body, pos)
            if n < 0:
                key = None
            else:
                key, pos = body[pos : pos + n], pos + n
            b = body[pos]
            if b < 0x80:
                n, pos = zigzag[b], pos + 1
            elif body[pos + 1] < 0x80:
                b = (b & 0x7F) | (body[pos + 1] << 7)
                n, pos = zigzag[b], pos + 2
            else:
                n, pos = read(body, pos)
            if n < 0:
                value = None
            else:
                value, pos = body[pos : pos + n], pos + n
            if body[pos] == 0:  # no headers
                headers: tuple[tuple[str, bytes | None], ...] = ()
                pos += 1
            else:
                n, pos = read(body, pos)
                found = []
                for _ in range(n):
                    hk, pos = _read_bytes(body, pos)
                    hv, pos = _read_bytes(body, pos)
                    found.append(((hk or b"").decode("utf-8", "replace"), hv))
                headers = tuple(found)
            if pos != end:
                raise InvalidRecordError(Errors.CORRUPT_MESSAGE, "record length does not match its fields")
            append((base_offset + off_delta, base_timestamp + ts_delta, key, value, headers))
    except IndexError:
        raise InvalidRecordError(Errors.CORRUPT_MESSAGE, "record runs past the batch") from None
    return records


def decode_records(batch: bytes | bytearray | memoryview) -> list[Record]:
    """Decode the records of one complete batch (decompressing it when needed)."""
    return [Record(*fields) for fields in decode_record_fields(batch)[1]]


def encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: tuple[tuple[str, bytes | None], ...],
) -> None:
    """Append one record (length-prefixed, Kafka's record v2 layout) to ``out``; shared by
    batch building and the log cleaner's rebuilt batches."""
    body = bytearray(b"\x00")
    _write_varint(body, timestamp_delta)
    _write_varint(body, offset_delta)
    for blob in (key, value):
        if blob is None:
            _write_varint(body, -1)
        else:
            _write_varint(body, len(blob))
            body += blob
    _write_varint(body, len(headers))
    for hk, hv in headers:
        kb = hk.encode()
        _write_varint(body, len(kb))
        body += kb
        if hv is None:
            _write_varint(body, -1)
        else:
            _write_varint(body, len(hv))
            body += hv
    _write_varint(out, len(body))
    out += body


def build_batch(
    records: list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]],
    *,
    timestamp: int,
    base_offset: int = 0,
    compression: CompressionType = CompressionType.NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = -1,
    timestamps: list[int] | None = None,
) -> bytes:
    """Build one batch of (key, value, headers) records."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    ts = timestamps or [timestamp] * len(records)
    base_ts = ts[0]
    body = bytearray()
    for i, (key, value, headers) in enumerate(records):
        encode_record(body, i, ts[i] - base_ts, key, value, headers)
    payload = compress(compression, bytes(body))
    attributes = int(compression)
    if transactional:
        attributes |= TRANSACTIONAL_MASK
    if control:
        attributes |= CONTROL_MASK
    batch_length = BATCH_HEADER_SIZE - LOG_OVERHEAD + len(payload)
    out = bytearray(
        _HEADER.pack(
            base_offset, batch_length, partition_leader_epoch, MAGIC_V2, 0, attributes,
            len(records) - 1, base_ts, max(ts), producer_id, producer_epoch,
            base_sequence, len(records),
        )
    )
    out += payload
    _CRC.pack_into(out, 17, compute_crc(out, 0, len(out)))
    return bytes(out)


def build_control_batch(
    marker: ControlRecordType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
) -> bytes:
    key = struct.pack(">hh", 0, int(marker))
    value = struct.pack(">hi", 0, coordinator_epoch)
    return build_batch(
        [(key, value, ())],
        timestamp=timestamp,
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
    )


def parse_control_record(record: Record) -> tuple[ControlRecordType, int]:
    """Return (marker type, coordinator epoch) of a control record."""
    if record.key is None or len(record.key) < 4:
        raise InvalidRecordError(Errors.CORRUPT_MESSAGE, "control record without a valid key")
    _, kind = struct.unpack_from(">hh", record.key)
    epoch = -1
    if record.value is not None and len(record.value) >= 6:
        _, epoch = struct.unpack_from(">hi", record.value)
    return ControlRecordType(kind), epoch


def control_marker(batch: bytes | bytearray | memoryview) -> tuple[bool, int]:
    """(is_commit, coordinator epoch) of a whole COMMIT/ABORT control batch."""
    kind, coordinator_epoch = parse_control_record(decode_records(batch)[0])
    return kind == ControlRecordType.COMMIT, coordinator_epoch

"""ProducerBatch: the records bound for one partition, encoded as they arrive.

What it owns: a record batch v2 (layout in ``eoslog.records.batch``) under construction.
``try_append`` encodes each record straight into one bytearray behind a 61-byte space for
the header — no per-record objects are kept, and nothing is re-encoded at drain time.
``close`` fills the header in (producer id, epoch, base sequence, transactional bit,
timestamps), compresses the records when a codec is set, and computes the CRC-32C; the
result (``wire``) is what every attempt sends. ``reset_producer_state`` rewrites the
producer fields of a closed batch after an epoch bump (KIP-360); ``split`` re-reads the
records into smaller batches after MESSAGE_TOO_LARGE, keeping their sequence numbers.

What it must never do: decide when it is sent, retried or failed (the accumulator and
the sender do), or change the bytes of a batch that may be on the wire except through
``reset_producer_state``, which only the sender calls, for batches it will resend.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import crc32c

from eoslog.client.producer.futures import ProduceResult, RecordFuture
from eoslog.records.batch import (
    BATCH_HEADER_SIZE,
    CRC_START,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TRANSACTIONAL_MASK,
    decode_records,
)
from eoslog.records.compression import CompressionType, compress
from eoslog.records.varint import encode_varint

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PRODUCER_STATE = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence at offset 43
_PRODUCER_STATE_OFFSET = 43
_CRC = struct.Struct(">I")
MAX_SEQUENCE = 2**31 - 1

Header = tuple[str, bytes | None]


# Varints of -1 .. 16383 (at most two bytes), looked up as _VARINT[n + 1]: every length,
# offset delta and timestamp delta of a typical batch; larger values take encode_varint.
_VARINT_LIMIT = 1 << 14
_VARINT = [encode_varint(n) for n in range(-1, _VARINT_LIMIT)]
_NO_HEADERS = _VARINT[1]
_ATTRIBUTES = b"\x00"


def varint(value: int) -> bytes:
    return _VARINT[value + 1] if -1 <= value < _VARINT_LIMIT else encode_varint(value)


def encode_headers(headers: Sequence[Header]) -> bytes:
    out = bytearray(varint(len(headers)))
    for name, value in headers:
        key = name.encode()
        out += varint(len(key))
        out += key
        if value is None:
            out += _VARINT[0]
        else:
            out += varint(len(value))
            out += value
    return bytes(out)


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequences wrap from Int.MaxValue to 0 (Kafka's DefaultRecordBatch.incrementSequence)."""
    if sequence > MAX_SEQUENCE - increment:
        return increment - (MAX_SEQUENCE - sequence) - 1
    return sequence + increment


def record_size_upper_bound(key: bytes | None, value: bytes | None, headers: bytes) -> int:
    """Bytes a record can take in a batch (Java's estimateSizeInBytesUpperBound, per record)."""
    return 21 + (len(key) if key else 0) + (len(value) if value else 0) + len(headers)


class ProducerBatch:
    __slots__ = (
        "attempts", "base_sequence", "base_ts", "buf", "compression", "count", "created", "drained",
        "full", "last_attempt", "limit", "max_ts", "partition", "producer_epoch", "producer_id",
        "reserved", "result", "sequence_reset", "topic", "transactional", "wire",
    )

    def __init__(self, topic: str, partition: int, created: float, limit: int,
                 compression: CompressionType = CompressionType.NONE, reserved: int = 0) -> None:
        self.topic = topic
        self.partition = partition
        self.created = created  # time.monotonic() seconds
        self.limit = limit  # batch.size: bytes of records after which the batch is full
        self.compression = compression
        self.reserved = reserved  # buffer.memory bytes held until the batch completes
        self.buf = bytearray(BATCH_HEADER_SIZE)
        self.count = 0
        self.base_ts = 0
        self.max_ts = 0
        self.full = False
        self.result = ProduceResult(topic, partition)
        self.wire: bytearray | None = None  # the closed batch, as sent
        self.attempts = 0
        self.last_attempt = created
        self.drained = 0.0
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.base_sequence = NO_SEQUENCE
        self.transactional = False
        self.sequence_reset = False  # its sequence was rewritten after an epoch bump

    def __repr__(self) -> str:
        return (f"ProducerBatch({self.topic}-{self.partition}, {self.count} records, "
                f"seq {self.base_sequence}, attempts {self.attempts})")

    # -- appending (producer threads, under the accumulator's lock) ----------------------

    def try_append(self, timestamp: int, key: bytes | None, value: bytes | None,
                   headers: bytes = _NO_HEADERS) -> RecordFuture | None:
        """Encode one record into the batch; None when it does not fit (the batch is then full)."""
        count = self.count
        if count:
            delta = timestamp - self.base_ts
            ts_v = _VARINT[delta + 1] if -1 <= delta < _VARINT_LIMIT else encode_varint(delta)
            od_v = _VARINT[count + 1] if count < _VARINT_LIMIT else encode_varint(count)
        else:
            ts_v = od_v = _VARINT[1]
        if key is None:
            key_v = _VARINT[0]
            key_len = 0
        else:
            key_len = len(key)
            key_v = _VARINT[key_len + 1] if key_len < _VARINT_LIMIT else encode_varint(key_len)
        if value is None:
            value_v = _VARINT[0]
            value_len = 0
        else:
            value_len = len(value)
            value_v = _VARINT[value_len + 1] if value_len < _VARINT_LIMIT else encode_varint(value_len)
        body = 1 + len(ts_v) + len(od_v) + len(key_v) + key_len + len(value_v) + value_len + len(headers)
        length_v = _VARINT[body + 1] if body < _VARINT_LIMIT else encode_varint(body)
        buf = self.buf
        if count and len(buf) + len(length_v) + body > self.limit:
            self.full = True
            return None
        buf += length_v
        buf += _ATTRIBUTES
        buf += ts_v
        buf += od_v
        buf += key_v
        if key:
            buf += key
        buf += value_v
        if value:
            buf += value
        buf += headers
        if count:
            if timestamp > self.max_ts:
                self.max_ts = timestamp
        else:
            self.base_ts = self.max_ts = timestamp
        self.count = count + 1
        if len(buf) >= self.limit:
            self.full = True
        return RecordFuture(self.result, count, timestamp)

    @property
    def size(self) -> int:
        """Bytes the batch takes (closed: on the wire; open: uncompressed so far)."""
        return len(self.wire) if self.wire is not None else len(self.buf)

    # -- producer state (sender thread) ----------------------------------------------------

    @property
    def has_sequence(self) -> bool:
        return self.base_sequence != NO_SEQUENCE

    @property
    def last_sequence(self) -> int:
        return increment_sequence(self.base_sequence, self.count - 1)

    def set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int,
                           transactional: bool) -> None:
        if self.wire is not None:
            # Changing the sequence of a batch that may have reached the broker risks a duplicate.
            raise RuntimeError(f"{self!r} is closed; its producer state cannot change")
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.transactional = transactional

    def reset_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """After an epoch bump: the same records under the new epoch, from a new sequence."""
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.sequence_reset = True
        if self.wire is not None:
            # A copy: the old bytes may still sit in a transport's buffer, unsent.
            wire = self.wire = bytearray(self.wire)
            _PRODUCER_STATE.pack_into(wire, _PRODUCER_STATE_OFFSET, producer_id, producer_epoch, base_sequence)
            _CRC.pack_into(wire, 17, crc32c.crc32c(memoryview(wire)[CRC_START:]))

    def close(self) -> bytearray:
        """Fill in the header (and compress): the batch as it goes on the wire."""
        if self.wire is not None:
            return self.wire
        if self.compression is CompressionType.NONE:
            wire = self.buf
        else:
            payload = compress(self.compression, bytes(memoryview(self.buf)[BATCH_HEADER_SIZE:]))
            wire = bytearray(BATCH_HEADER_SIZE)
            wire += payload
        attributes = int(self.compression) | (TRANSACTIONAL_MASK if self.transactional else 0)
        _HEADER.pack_into(
            wire, 0, 0, len(wire) - LOG_OVERHEAD, -1, MAGIC_V2, 0, attributes, self.count - 1,
            self.base_ts, self.max_ts, self.producer_id, self.producer_epoch, self.base_sequence, self.count,
        )
        _CRC.pack_into(wire, 17, crc32c.crc32c(memoryview(wire)[CRC_START:]))
        self.wire = wire
        return wire

    # -- splitting (MESSAGE_TOO_LARGE) -------------------------------------------------------

    def split(self, target_size: int, now: float) -> list[ProducerBatch]:
        """The records in batches of at most ``target_size`` bytes (at least two batches when
        there are two records or more); sequences continue from this batch's base sequence."""
        plain = bytearray(self.buf)
        _HEADER.pack_into(
            plain, 0, 0, len(plain) - LOG_OVERHEAD, -1, MAGIC_V2, 0, 0, self.count - 1,
            self.base_ts, self.max_ts, -1, -1, -1, self.count,
        )
        records = decode_records(plain)
        limit = min(target_size, max(BATCH_HEADER_SIZE + 1, len(self.buf) // 2))
        batches: list[ProducerBatch] = []
        current: ProducerBatch | None = None
        for record in records:
            headers = encode_headers(record.headers) if record.headers else _NO_HEADERS
            if current is None or current.try_append(record.timestamp, record.key, record.value, headers) is None:
                current = ProducerBatch(self.topic, self.partition, self.created, limit, self.compression)
                current.attempts = self.attempts
                current.last_attempt = now
                current.try_append(record.timestamp, record.key, record.value, headers)
                batches.append(current)
        sequence = self.base_sequence
        parts: list[tuple[int, ProduceResult]] = []
        first = 0
        for batch in batches:
            batch.transactional = self.transactional
            if sequence != NO_SEQUENCE:
                batch.set_producer_state(self.producer_id, self.producer_epoch, sequence, self.transactional)
                sequence = increment_sequence(sequence, batch.count)
            parts.append((first, batch.result))
            first += batch.count
        # The records' futures now follow the new batches' results.
        self.result.complete_split(parts)
        return batches

"""Produce v3-v11 requests and responses, encoded and decoded by hand.

Produce is the one request a producer sends thousands of times a second; building kio
dataclasses for it and encoding them costs ~40 µs a request, more than the rest of the
sender's work per batch. So the request is written here field by field — as a list of
buffers in which each record batch is referenced, not copied — and the response is read
into plain tuples. Everything else the client sends goes through kio.
``tests/unit/test_client_wire.py`` checks both directions against kio for every version.

Layout (Kafka's ProduceRequest.json / ProduceResponse.json): v3-v8 use int16-length
strings and int32-length arrays and bytes; v9+ are "flexible": compact strings, arrays and
bytes (unsigned varint length + 1, 0 = null) and a tagged-field section after each
structure, and the request header v2 carries one too.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from eoslog.client.producer.batch import ProducerBatch
from eoslog.protocol.api_keys import ApiKey
from eoslog.records.varint import decode_uvarint, encode_uvarint

PRODUCE = ApiKey.PRODUCE
MIN_VERSION = 3
MAX_VERSION = 12  # v12: transaction version 2 (the leader adds the partition); same bytes as v11
MAX_TRANSACTION_V1_VERSION = 11
FLEXIBLE_VERSION = 9

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")
_ACKS_TIMEOUT = struct.Struct(">hi")
_PARTITION_V8 = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time
_I64 = struct.Struct(">q")

Buffer = bytes | bytearray | memoryview


def _string(s: str | None, flexible: bool) -> bytes:
    if s is None:
        return b"\x00" if flexible else b"\xff\xff"
    data = s.encode()
    return (encode_uvarint(len(data) + 1) if flexible else _I16.pack(len(data))) + data


def encode_produce(
    version: int,
    correlation_id: int,
    client_id: str | None,
    transactional_id: str | None,
    acks: int,
    timeout_ms: int,
    batches: Sequence[ProducerBatch],
) -> list[Buffer]:
    """The request as buffers for ``transport.writelines`` (size prefix included); each
    batch's bytes (``batch.wire``, already closed) are referenced, not copied."""
    flexible = version >= FLEXIBLE_VERSION
    by_topic: dict[str, list[ProducerBatch]] = {}
    for batch in batches:
        by_topic.setdefault(batch.topic, []).append(batch)
    head = bytearray(b"\0\0\0\0")
    head += _HEADER.pack(PRODUCE, version, correlation_id)
    head += _string(client_id, False)  # the header's client id is never compact
    if flexible:
        head += b"\x00"
    head += _string(transactional_id, flexible)
    head += _ACKS_TIMEOUT.pack(acks, timeout_ms)
    head += encode_uvarint(len(by_topic) + 1) if flexible else _I32.pack(len(by_topic))
    chunks: list[Buffer] = []
    small = head  # fixed-size fields collect here until the next batch's bytes
    for topic, topic_batches in by_topic.items():
        small += _string(topic, flexible)
        small += encode_uvarint(len(topic_batches) + 1) if flexible else _I32.pack(len(topic_batches))
        for batch in topic_batches:
            wire = batch.wire
            assert wire is not None, "batches are closed before they are sent"
            small += _I32.pack(batch.partition)
            small += encode_uvarint(len(wire) + 1) if flexible else _I32.pack(len(wire))
            chunks.append(small)
            chunks.append(wire)
            small = bytearray()
            if flexible:
                small += b"\x00"  # partition tagged fields
        if flexible:
            small += b"\x00"  # topic tagged fields
    if flexible:
        small += b"\x00"  # request tagged fields
    chunks.append(small)
    _I32.pack_into(head, 0, sum(len(c) for c in chunks) - 4)
    return [c for c in chunks if len(c)]


class PartitionResponse(NamedTuple):
    topic: str
    partition: int
    error_code: int
    base_offset: int
    log_append_time: int
    log_start_offset: int
    error_message: str | None
    record_errors: tuple[tuple[int, str | None], ...] = ()  # KIP-467: (batch index, why)


class ProduceAnswer(NamedTuple):
    partitions: list[PartitionResponse]
    throttle_ms: int  # KIP-219: how long the broker asks this client to send it nothing


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: Buffer, pos: int) -> None:
        self.buf = buf
        self.pos = pos

    def uvarint(self) -> int:
        value, self.pos = decode_uvarint(self.buf, self.pos)
        return value

    def int32(self) -> int:
        (v,) = _I32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(v)

    def int64(self) -> int:
        (v,) = _I64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return int(v)

    def int16(self) -> int:
        (v,) = _I16.unpack_from(self.buf, self.pos)
        self.pos += 2
        return int(v)

    def string(self, flexible: bool) -> str | None:
        n = self.uvarint() - 1 if flexible else self.int16()
        if n < 0:
            return None
        start = self.pos
        self.pos += n
        return bytes(self.buf[start : start + n]).decode()

    def array_len(self, flexible: bool) -> int:
        return self.uvarint() - 1 if flexible else self.int32()

    def skip_tagged(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            # Not ``self.pos += self.uvarint()``: that adds the size to the position from
            # before the size was read, and the next field is read one byte early.
            size = self.uvarint()
            self.pos += size


def decode_produce_response(frame: Buffer, version: int) -> ProduceAnswer:
    """Per-partition results of a Produce response frame (without its size prefix), and its
    throttle time."""
    flexible = version >= FLEXIBLE_VERSION
    r = _Reader(frame, 4)  # after the correlation id
    if flexible:
        r.skip_tagged()  # response header v1
    out: list[PartitionResponse] = []
    for _ in range(r.array_len(flexible)):
        topic = r.string(flexible) or ""
        for _ in range(r.array_len(flexible)):
            index, error_code, base_offset, log_append_time = _PARTITION_V8.unpack_from(r.buf, r.pos)
            r.pos += _PARTITION_V8.size
            log_start_offset = r.int64() if version >= 5 else -1
            message = None
            record_errors: list[tuple[int, str | None]] = []
            if version >= 8:
                for _ in range(r.array_len(flexible)):
                    record_errors.append((r.int32(), r.string(flexible)))
                    if flexible:
                        r.skip_tagged()
                message = r.string(flexible)
            if flexible:
                r.skip_tagged()
            out.append(PartitionResponse(topic, index, error_code, base_offset, log_append_time,
                                         log_start_offset, message, tuple(record_errors)))
        if flexible:
            r.skip_tagged()
    return ProduceAnswer(out, r.int32() if version >= 1 else 0)

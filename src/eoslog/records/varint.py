"""Unsigned varints: the protocol's compact lengths and tagged fields (KIP-482), as the
transaction log's flexible records (coordinator) and the producer's hand-written Produce
codec (client) read and write them; and the record format's zigzag varints as written by
batch.py, the log cleaner (storage) and the producer's batches (client). Here because all
of them may import ``records``; the record decoder's zigzag reads stay inline in its hot loop.

Example::

    encode_uvarint(300)                 # b"\\xac\\x02"
    decode_uvarint(b"\\xac\\x02", 0)    # (300, 2)
"""

from __future__ import annotations

UVARINT_MAX_BYTES = 5  # an unsigned 32-bit value, as Kafka's ByteUtils.readUnsignedVarint


class VarintError(ValueError):
    """Truncated, or longer than ``UVARINT_MAX_BYTES``."""


def encode_uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """A signed 64-bit value as a zigzag varint (the record format's lengths and deltas)."""
    return encode_uvarint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def decode_uvarint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """(value, position after it) of the unsigned varint at ``pos``."""
    value = shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise VarintError(f"unsigned varint runs past byte {end}")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift >= 7 * UVARINT_MAX_BYTES:
            raise VarintError(f"unsigned varint longer than {UVARINT_MAX_BYTES} bytes")


__all__ = ["UVARINT_MAX_BYTES", "VarintError", "decode_uvarint", "encode_uvarint", "encode_varint"]

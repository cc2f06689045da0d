"""Batch compression codecs (attribute bits 0-2), backed by cramjam.

Kafka's Java client writes snappy in the xerial block framing; librdkafka and most
other clients write raw snappy. Both are read here; raw snappy is written.
"""

from __future__ import annotations

import struct
from enum import IntEnum

import cramjam


class CompressionType(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> CompressionType:
        try:
            return cls[name.upper()]
        except KeyError:
            raise ValueError(
                f"unknown compression type {name!r}; use one of "
                + ", ".join(c.name.lower() for c in cls)
            ) from None


_XERIAL_MAGIC = b"\x82SNAPPY\x00"


def _snappy_decompress(data: bytes) -> bytes:
    if data[:8] != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(data))
    out = bytearray()
    pos = 16  # magic, version, compatible version
    while pos < len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out += bytes(cramjam.snappy.decompress_raw(data[pos : pos + size]))
        pos += size
    return bytes(out)


def compress(codec: CompressionType, data: bytes) -> bytes:
    if codec is CompressionType.NONE:
        return data
    if codec is CompressionType.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec is CompressionType.SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec is CompressionType.LZ4:
        # Independent blocks: Kafka's reader refuses a linked-block frame ("Dependent block
        # stream is unsupported"), the frame cramjam.lz4.compress writes.
        lz4 = cramjam.lz4.Compressor(block_linked=False)
        lz4.compress(data)
        return bytes(lz4.finish())
    if codec is CompressionType.ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"unsupported compression codec {codec}")


def decompress(codec: CompressionType, data: bytes) -> bytes:
    if codec is CompressionType.NONE:
        return data
    if codec is CompressionType.GZIP:
        return bytes(cramjam.gzip.decompress(data))
    if codec is CompressionType.SNAPPY:
        return _snappy_decompress(data)
    if codec is CompressionType.LZ4:
        return bytes(cramjam.lz4.decompress(data))
    if codec is CompressionType.ZSTD:
        return bytes(cramjam.zstd.decompress(data))
    raise ValueError(f"unsupported compression codec {codec}")

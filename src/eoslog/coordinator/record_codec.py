"""Coordinator records whose layout Kafka generates from a message schema (flexible values
with tagged fields, UUIDs): declared as kio-style frozen dataclasses and encoded by kio's own
entity writer and reader, so eoslog writes no codec of its own for them.

A record is ``int16 type-or-version`` followed by the message, key and value alike (Kafka's
``CoordinatorRecordSerde``): for a key the int16 is the record type, for a value its version.
"""

from __future__ import annotations

import io
import struct
from typing import Any, TypeVar

from kio.serial import entity_reader, entity_writer

_I16 = struct.Struct(">h")
E = TypeVar("E")


class CoordinatorRecordError(ValueError):
    """A coordinator record this broker cannot decode."""


def encode(prefix: int, entity: Any) -> bytes:
    """``int16 prefix`` + ``entity`` in its class's layout."""
    out = io.BytesIO()
    out.write(_I16.pack(prefix))
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


def prefix_of(data: bytes) -> int:
    """The leading int16 of a key (its record type) or a value (its version)."""
    if len(data) < _I16.size:
        raise CoordinatorRecordError(f"record of {len(data)} bytes has no type")
    return int(_I16.unpack_from(data)[0])


def has_type(key: bytes, types: frozenset[int]) -> bool:
    """The key is one of a record family's (its record type among ``types``)."""
    try:
        return prefix_of(key) in types
    except CoordinatorRecordError:
        return False


def decode(cls: type[E], data: bytes) -> E:
    """The message after the int16 prefix, as ``cls``."""
    reader: Any = entity_reader(cls)
    try:
        entity, _ = reader(memoryview(data), _I16.size)
    except Exception as e:  # kio raises several types on truncated or malformed input
        raise CoordinatorRecordError(f"undecodable {cls.__name__}: {e}") from e
    result: E = entity
    return result


class FlexibleReader:
    """A cursor over a flexible message's fields, for the few records whose tagged fields kio's
    reader does not take (a tagged nullable struct). Raises CoordinatorRecordError when short."""

    def __init__(self, data: bytes, offset: int = _I16.size) -> None:
        self._data = memoryview(data)
        self.pos = offset

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self._data):
            raise CoordinatorRecordError(f"record ends at byte {len(self._data)}, {n} more wanted at {self.pos}")
        out = bytes(self._data[self.pos:self.pos + n])
        self.pos += n
        return out

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            byte = self._take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 35:
                raise CoordinatorRecordError("unsigned varint too long")

    def int32(self) -> int:
        return int(struct.unpack(">i", self._take(4))[0])

    def string(self) -> str | None:
        n = self.uvarint() - 1
        return None if n < 0 else self._take(n).decode()

    def compact_bytes(self) -> bytes:
        return self._take(max(self.uvarint() - 1, 0))

    def array(self, item: Any) -> list[Any]:
        n = self.uvarint() - 1
        return [item() for _ in range(max(n, 0))]

    def tagged_fields(self) -> dict[int, bytes]:
        return {self.uvarint(): self._take(self.uvarint()) for _ in range(self.uvarint())}


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)

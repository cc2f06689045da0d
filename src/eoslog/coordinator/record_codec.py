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


def decode(cls: type[E], data: bytes) -> E:
    """The message after the int16 prefix, as ``cls``."""
    reader: Any = entity_reader(cls)
    try:
        entity, _ = reader(memoryview(data), _I16.size)
    except Exception as e:  # kio raises several types on truncated or malformed input
        raise CoordinatorRecordError(f"undecodable {cls.__name__}: {e}") from e
    result: E = entity
    return result

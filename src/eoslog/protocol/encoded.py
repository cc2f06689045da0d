"""Parts of a message encoded ahead of the message, byte for byte as kio would encode them there
(issue 28: a Metadata response over 5,000 partitions spent its time building kio objects and
encoding them, again at every request).

- ``EncodedItems``: an array field's items already encoded; ``spliced`` writes a message with
  such an array: kio encodes the rest with the array empty, the items go where it was. Only
  int32 fields and a flexible version's (empty) tagged-field count may follow the array in the
  schema (true of Metadata's topics in a response and partitions in a topic); anything else
  raises rather than send a wrong frame.
- ``encode_flat``: a struct of int16/int32 fields and int32 arrays (a Metadata partition)
  encoded straight from its values, without making the kio object: ~10 times faster.

``tests/unit/test_metadata_cache.py`` checks both against kio's encoding at every version.
"""

from __future__ import annotations

import dataclasses
import io
import struct
import typing
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from kio.serial import entity_writer
from kio.serial.writers import write_compact_array_length

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT32_ARRAYS = [struct.Struct(f">{n}i") for n in range(32)]  # replica lists: short


class EncodedItems:
    """The items of a response's array field already encoded, each for the response's version,
    written as they are (``codec.encode_response_chunks``): a Metadata response's topics, which
    a broker keeps encoded while they do not change (``broker/metadata_cache.py``).
    ``error_codes``: the items' non-zero error codes, nested ones included (the request metrics
    count them)."""

    __slots__ = ("error_codes", "items")

    def __init__(self, items: list[bytes], error_codes: Iterable[int] = ()) -> None:
        self.items = items
        self.error_codes = list(error_codes)

    def __len__(self) -> int:
        return len(self.items)

    def __repr__(self) -> str:
        return f"EncodedItems({len(self.items)} items, {sum(map(len, self.items))} bytes)"


def encode_entity(entity: Any) -> bytes:
    """One kio entity's encoding."""
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def _compact_length(n: int) -> bytes:
    buf = io.BytesIO()
    write_compact_array_length(buf, n)
    return buf.getvalue()


_COMPACT_LENGTHS = [_compact_length(n) for n in range(256)]  # kio's, kept: every array writes one


def _array_length(flexible: bool, n: int) -> bytes:
    if not flexible:
        return _INT32.pack(n)
    return _COMPACT_LENGTHS[n] if n < len(_COMPACT_LENGTHS) else _compact_length(n)


_AFTER: dict[tuple[type[Any], str], int] = {}


def _after_field(cls: type[Any], name: str) -> int:
    """How many bytes ``cls``'s encoding has after field ``name``'s: only int32 fields may
    follow it, and the (empty) tagged-field count of a flexible version."""
    known = _AFTER.get((cls, name))
    if known is not None:
        return known
    fields = dataclasses.fields(cls)
    after = fields[[f.name for f in fields].index(name) + 1:]
    if any("tag" in f.metadata for f in fields):
        raise TypeError(f"{cls.__name__} has tagged fields: {name} cannot be spliced")
    if any(f.metadata.get("kafka_type") != "int32" or typing.get_origin(f.type) is tuple for f in after):
        raise TypeError(f"{cls.__name__}: a field after {name} is not an int32")
    size = _AFTER[cls, name] = 4 * len(after) + (1 if cls.__flexible__ else 0)
    return size


def spliced(entity: Any, name: str, items: list[bytes]) -> Iterator[bytes]:
    """The encoding of ``entity`` with its array field ``name`` made of ``items`` (each an
    item's encoding), in parts: before the array, its length, the items, after it."""
    cls = type(entity)
    raw = encode_entity(dataclasses.replace(entity, **{name: ()}))
    empty = _array_length(cls.__flexible__, 0)
    end = len(raw) - _after_field(cls, name)
    start = end - len(empty)
    if raw[start:end] != empty:  # cannot happen while _after_field holds; never send a wrong frame
        raise AssertionError(f"{cls.__name__}: no empty {name} array at byte {start}")
    yield raw[:start]
    yield _array_length(cls.__flexible__, len(items))
    yield from items
    yield raw[end:]


FlatEncoder = Callable[[dict[str, Any]], bytes]
_FLAT: dict[type[Any], FlatEncoder] = {}


def flat_encoder(cls: type[Any]) -> FlatEncoder:
    """An encoder of ``cls``'s values (field name → value; a missing one takes the field's
    default, as ``build`` leaves it to kio) for a struct whose fields are all int16 / int32 /
    error codes or int32 arrays; TypeError for any other struct."""
    known = _FLAT.get(cls)
    if known is not None:
        return known
    flexible = bool(cls.__flexible__)

    def array(value: tuple[int, ...]) -> bytes:
        n = len(value)
        return _array_length(flexible, n) + (_INT32_ARRAYS[n].pack(*value) if n < len(_INT32_ARRAYS)
                                              else struct.pack(f">{n}i", *value))

    plan: list[tuple[str, Callable[[Any], bytes], Any]] = []
    for f in dataclasses.fields(cls):
        kafka_type = f.metadata.get("kafka_type")
        is_array = typing.get_origin(f.type) is tuple
        scalar = kafka_type in ("int16", "error_code") and not is_array
        if "tag" in f.metadata or not (kafka_type == "int32" or scalar):
            raise TypeError(f"{cls.__name__}.{f.name} ({kafka_type}) cannot be encoded flat")
        default = f.default if f.default is not dataclasses.MISSING else None
        plan.append((f.name, array if is_array else _INT32.pack if kafka_type == "int32" else _INT16.pack, default))
    tail = [b"\x00"] if flexible else []  # a flexible struct's (empty) tagged fields

    def encode(values: dict[str, Any]) -> bytes:
        return b"".join([pack(values.get(name, default)) for name, pack, default in plan] + tail)

    _FLAT[cls] = encode
    return encode

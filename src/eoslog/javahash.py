"""Java's hashing, where Kafka's answers depend on it: ``String.hashCode`` (which partition of an
internal topic owns a key) and the iteration order of a ``java.util.HashMap`` (the order of the
lists Kafka builds from one). Below every package; imports nothing of eoslog's."""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable


@functools.lru_cache(maxsize=1 << 16)
def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, in signed 32-bit arithmetic. Cached: a
    coordinator asks it for the same transactional and group ids on every request."""
    h = 0
    for (unit,) in struct.iter_unpack(">H", s.encode("utf-16-be")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def java_hash_map_order(keys: Iterable[str], capacity: int) -> list[str]:
    """``keys`` (in insertion order) as a ``java.util.HashMap`` with ``capacity`` buckets iterates
    them: by bucket (the hash spread by ``h ^ (h >>> 16)``), then in insertion order."""
    def bucket(key: str) -> int:
        h = java_string_hash(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(keys, key=bucket)  # sorted() is stable: insertion order within a bucket

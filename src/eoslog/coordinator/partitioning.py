"""Which partition of a coordinator's internal topic owns a key.

Kafka maps a group id to its ``__consumer_offsets`` partition and a transactional id to
its ``__transaction_state`` partition the same way: ``Utils.abs(key.hashCode) % partitions``
with Java's ``String.hashCode``. Clients and tools rely on the same answer.
"""

from __future__ import annotations

import struct


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, in signed 32-bit arithmetic."""
    units = s.encode("utf-16-be")
    h = 0
    for (unit,) in struct.iter_unpack(">H", units):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def coordinator_partition_for(key: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode) % num_partitions`` (abs(Integer.MIN_VALUE) is 0)."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions

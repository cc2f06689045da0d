"""Kafka's default key partitioner: ``toPositive(murmur2(key)) % numPartitions``.

The hash must match the Java client's ``Utils.murmur2`` bit for bit (and librdkafka's
``murmur2_random``, which uses the same function), or records with the same key would
land on different partitions depending on which client produced them. Java computes
in wrapping 32-bit signed arithmetic with logical right shifts (``>>>``); here every
step is masked to 32 unsigned bits and the result converted back to a signed int.
"""

from __future__ import annotations

import random

_MASK32 = 0xFFFFFFFF
_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24


def murmur2(data: bytes) -> int:
    """Java's ``org.apache.kafka.common.utils.Utils.murmur2``: a signed 32-bit hash."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    tail = length & ~3
    for i in range(0, tail, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> _R
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    rest = length & 3
    # Java's switch falls through from case 3 to case 1.
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Java's ``Utils.toPositive``: clear the sign bit (not ``abs``, which overflows)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a non-null key."""
    if num_partitions <= 0:
        raise ValueError(f"a topic needs at least one partition, got {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions


class RoundRobin:
    """Spreads keyless records over partitions one at a time, starting at 0."""

    def __init__(self) -> None:
        self._next = 0

    def partition(self, num_partitions: int) -> int:
        p = self._next % num_partitions
        self._next += 1
        return p


class StickyPartitioner:
    """Kafka's partitioner for keyless records (KIP-480): every record of a topic goes to one
    partition until the producer's batch there is full, then to another partition picked at
    random among those with a leader. Batches fill up sooner and requests carry fewer,
    fuller batches than with round-robin."""

    def __init__(self) -> None:
        self._current: dict[str, int] = {}

    def partition(self, topic: str, available: list[int], num_partitions: int) -> int:
        """The topic's sticky partition (chosen on first use)."""
        p = self._current.get(topic)
        if p is None or p >= num_partitions:
            p = self.next_partition(topic, available, num_partitions, None)
        return p

    def next_partition(self, topic: str, available: list[int], num_partitions: int, current: int | None) -> int:
        """Move on from ``current``: its batch is full."""
        choices = available or list(range(num_partitions))
        if len(choices) > 1 and current is not None:
            choices = [p for p in choices if p != current]
        p = choices[random.randrange(len(choices))]
        self._current[topic] = p
        return p

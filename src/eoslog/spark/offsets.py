"""Offsets as the eoslog source keeps them: per-partition maps, their JSON, ranges and limits.

What it owns: the JSON shape of Spark's Kafka source — ``{"topic": {"0": 123}}``, used for
the ``startingOffsets``/``endingOffsets`` options (-2 earliest, -1 latest) and for the
offsets Spark writes to a streaming query's checkpoint, so a restarted query resumes at
exactly the offsets it stopped at — and the arithmetic on offset maps: the per-partition
share of ``maxOffsetsPerTrigger`` (Spark's ``KafkaMicroBatchStream.rateLimit``) and the
split of large ranges over ``minPartitions`` tasks (Spark's ``KafkaOffsetRangeCalculator``).
What it must never do: I/O. Pure functions over plain values, unit-tested without Spark.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from eoslog.client.types import TopicPartition

EARLIEST = -2  # ListOffsets timestamp, and Spark's marker in an offsets JSON
LATEST = -1

PartitionOffsets = dict[TopicPartition, int]
OffsetSpec = Literal["earliest", "latest"] | PartitionOffsets


class OffsetJsonError(ValueError):
    pass


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{tp: offset}`` → ``{"topic": {"partition": offset}}``, partitions in order."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def from_json(data: Mapping[str, Any]) -> PartitionOffsets:
    """The inverse of ``to_json`` (also reads what Spark's Kafka source wrote)."""
    try:
        return {
            TopicPartition(str(topic), int(p)): int(offset)
            for topic, partitions in data.items()
            for p, offset in partitions.items()
        }
    except (AttributeError, TypeError, ValueError):
        raise OffsetJsonError(
            f'expected e.g. {{"topicA":{{"0":23,"1":-1}},"topicB":{{"0":-2}}}}, got {json.dumps(data)}'
        ) from None


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one partition; ``size`` counts offsets, not records
    (transaction markers and aborted records take offsets too)."""

    tp: TopicPartition
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def _round_half_up(x: float) -> int:
    return math.floor(x + 0.5)  # Scala's math.round, which Spark's calculator uses


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Drop empty ranges and, when there are fewer than ``min_partitions``, split the large
    ones so that about ``min_partitions`` tasks read similar numbers of offsets.

    As Spark's KafkaOffsetRangeCalculator: a range whose share of the total would be one
    part stays whole and is taken out of the proportional math for the others."""
    ranges = [r for r in ranges if r.size > 0]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges

    def parts_for(size: int, total: int, parts: int) -> int:
        return max(_round_half_up(size / total * parts), 1)

    total = sum(r.size for r in ranges)
    whole = {r.tp for r in ranges if parts_for(r.size, total, min_partitions) == 1}
    split_total = total - sum(r.size for r in ranges if r.tp in whole)
    split_parts = max(min_partitions - len(whole), 1)
    out: list[OffsetRange] = []
    for r in ranges:
        parts = 1 if r.tp in whole else parts_for(r.size, split_total, split_parts)
        remaining, start = r.size, r.start
        for i in range(parts):
            # Integer division; the last part takes the remainder.
            piece = remaining // (parts - i)
            remaining -= piece
            end = min(start + piece, r.end)
            if end > start:
                out.append(OffsetRange(r.tp, start, end))
            start = end
    return out


def rate_limit(
    limit: int, start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]
) -> PartitionOffsets:
    """End offsets that advance at most about ``limit`` offsets past ``start`` in total,
    shared among partitions in proportion to what each has to read (Spark's rateLimit: a
    share below one offset is rounded up so that no partition starves)."""
    sizes = {tp: end - start[tp] for tp, end in latest.items() if tp in start and end - start[tp] > 0}
    total = sum(sizes.values())
    if total < 1:
        return dict(latest)
    out: PartitionOffsets = {}
    for tp, end in latest.items():
        size = sizes.get(tp)
        if size is None:
            out[tp] = end
            continue
        share = limit * (size / total)
        step = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(end, start[tp] + step)
    return out

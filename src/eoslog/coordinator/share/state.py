"""The durable state of one share-partition (a share group's view of one topic partition), as
the share coordinator keeps it (Kafka's ``ShareGroupOffset``), and how updates lay over it
(Kafka's ``PersisterStateBatchCombiner``).

The state is the share-partition start offset (every record below it is done with) and the
state batches of the in-flight records above it: ranges of offsets with one delivery state
and delivery count each. An update carries only the ranges that changed; ``combine`` lays
them over the current ranges (newer wins offset by offset), drops what fell below the start
offset and joins neighbouring ranges that say the same thing.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

NO_OFFSET = -1  # a share-partition initialized without a start offset: share.auto.offset.reset decides


class DeliveryState(IntEnum):
    """A record's delivery state as stored (Kafka's ``RecordState`` ids)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4

    @property
    def complete(self) -> bool:
        """Delivery is over: the record will never be handed out again."""
        return self in (DeliveryState.ACKNOWLEDGED, DeliveryState.ARCHIVED)


def topic_id_string(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: base64url of the 16 bytes without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


@dataclass(frozen=True, slots=True)
class SharePartitionKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int

    @property
    def coordinator_key(self) -> str:
        """Kafka's ``SharePartitionKey.asCoordinatorKey``: ``group:topicId:partition``."""
        return f"{self.group_id}:{topic_id_string(self.topic_id)}:{self.partition}"


@dataclass(frozen=True, slots=True)
class StateBatch:
    first_offset: int
    last_offset: int  # inclusive
    delivery_state: DeliveryState
    delivery_count: int

    @property
    def count(self) -> int:
        return self.last_offset - self.first_offset + 1


@dataclass(frozen=True, slots=True)
class ShareGroupOffset:
    """A share-partition's whole state (what a ShareSnapshot record holds)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    create_timestamp: int
    write_timestamp: int
    state_batches: tuple[StateBatch, ...]


def combine(current: Iterable[StateBatch], updates: Iterable[StateBatch], start_offset: int) -> tuple[StateBatch, ...]:
    """``updates`` laid over ``current`` offset by offset, cut at ``start_offset``, neighbours
    with the same state and count joined; sorted by offset."""
    ranges = sorted(current, key=lambda b: b.first_offset)
    for new in updates:
        kept: list[StateBatch] = []
        for old in ranges:
            if old.last_offset < new.first_offset or old.first_offset > new.last_offset:
                kept.append(old)
                continue
            if old.first_offset < new.first_offset:
                kept.append(StateBatch(old.first_offset, new.first_offset - 1, old.delivery_state, old.delivery_count))
            if old.last_offset > new.last_offset:
                kept.append(StateBatch(new.last_offset + 1, old.last_offset, old.delivery_state, old.delivery_count))
        kept.append(new)
        ranges = sorted(kept, key=lambda b: b.first_offset)
    out: list[StateBatch] = []
    for b in ranges:
        if b.last_offset < start_offset:
            continue
        if b.first_offset < start_offset:
            b = StateBatch(start_offset, b.last_offset, b.delivery_state, b.delivery_count)
        prev = out[-1] if out else None
        if (prev is not None and prev.last_offset + 1 == b.first_offset
                and (prev.delivery_state, prev.delivery_count) == (b.delivery_state, b.delivery_count)):
            out[-1] = StateBatch(prev.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        else:
            out.append(b)
    return tuple(out)


def delivery_complete_count(batches: Iterable[StateBatch]) -> int:
    """Offsets at or above the start offset whose delivery is over (the field of that name)."""
    return sum(b.count for b in batches if b.delivery_state.complete)

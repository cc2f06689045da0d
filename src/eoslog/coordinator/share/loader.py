"""Rebuild the share-partition states of one ``__share_group_state`` partition from its log.

Replays the partition from its log start offset as Kafka's ``ShareCoordinatorShard.replay``
does: a snapshot replaces a share-partition's state, an update is laid over it
(``state.combine``), a tombstone removes it. Updates written inside a producer's transaction
(eoslog's exactly-once acknowledgement, docs/consumer.md) wait under their producer id for the
transaction's marker: COMMIT lays them over the state, ABORT drops them; without a marker yet
they stay pending. Records of types this broker does not know are skipped.

``load_partition`` is a generator: it yields after every chunk read so that the caller can give
the event loop a turn, and returns what it loaded.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from dataclasses import dataclass, field

from eoslog.coordinator.internal_topic import InternalTopic, read_chunks
from eoslog.coordinator.share.records import (
    CoordinatorRecordError,
    ShareRecordType,
    ShareUpdate,
    decode_key,
    decode_value,
)
from eoslog.coordinator.share.state import ShareGroupOffset, SharePartitionKey, combine, delivery_complete_count
from eoslog.records import BatchHeader, ControlRecordType, decode_records, parse_control_record
from eoslog.records.batch import InvalidRecordError

log = logging.getLogger(__name__)


@dataclass
class HeldState:
    """One share-partition's state and where its last snapshot is (pruning keeps it)."""

    state: ShareGroupOffset
    updates: int = 0  # updates written since the snapshot
    snapshot_offset: int = 0


@dataclass(frozen=True, slots=True)
class PendingUpdate:
    """An update inside an open transaction: laid over the state only if it commits."""

    key: SharePartitionKey
    update: ShareUpdate
    producer_epoch: int
    offset: int


@dataclass
class LoadedShareStates:
    states: dict[SharePartitionKey, HeldState] = field(default_factory=dict)
    pending: dict[int, list[PendingUpdate]] = field(default_factory=dict)  # producer id → updates


def apply_update(held: HeldState, update: ShareUpdate, now_ms: int) -> None:
    """Lay an update over the state it belongs to (Kafka's ShareCoordinatorShard.merge)."""
    old = held.state
    start = update.start_offset if update.start_offset >= 0 else old.start_offset
    batches = combine(old.state_batches, update.state_batches, start)
    held.state = ShareGroupOffset(old.snapshot_epoch, old.state_epoch, max(old.leader_epoch, update.leader_epoch),
                                  start, delivery_complete_count(batches), old.create_timestamp, now_ms, batches)
    held.updates += 1


def complete_pending(loaded: LoadedShareStates, producer_id: int, committed: bool,
                     now_ms: int) -> list[PendingUpdate]:
    """A COMMIT or ABORT marker of ``producer_id``: its pending updates are laid over their
    states (COMMIT) or dropped; returns them."""
    done = loaded.pending.pop(producer_id, [])
    if committed:
        for p in done:
            held = loaded.states.get(p.key)
            if held is not None:
                apply_update(held, p.update, now_ms)
    return done


def load_partition(topic: InternalTopic, partition: int, now_ms: int,
                   chunk_bytes: int) -> Generator[None, None, LoadedShareStates]:
    plog = topic.partition_log(partition)
    start, end = plog.log_start_offset, plog.log_end_offset
    loaded = LoadedShareStates()
    records = 0
    for chunk in read_chunks(topic, partition, chunk_bytes):
        for h, batch in chunk:
            try:
                decoded = decode_records(batch)
                if h.is_control:
                    if decoded:
                        kind = parse_control_record(decoded[0])[0]
                        complete_pending(loaded, h.producer_id, kind is ControlRecordType.COMMIT, now_ms)
                    continue
                for rec in decoded:
                    typed = decode_key(rec.key) if rec.key is not None else None
                    if typed is None:
                        continue
                    records += 1
                    _replay(loaded, h, rec.offset, *typed, rec.value, now_ms)
            except (CoordinatorRecordError, InvalidRecordError) as e:
                log.error("%s-%d: skipping undecodable batch at offset %d: %s", topic.name, partition,
                          h.base_offset, e)
        yield
    log.log(logging.INFO if records else logging.DEBUG,
            "loaded %d share-partition states from %s-%d (%d records, offsets %d..%d, %d open transactions)",
            len(loaded.states), topic.name, partition, records, start, end, len(loaded.pending))
    return loaded


def _replay(loaded: LoadedShareStates, h: BatchHeader, offset: int, kind: ShareRecordType, key: SharePartitionKey,
            value: bytes | None, now_ms: int) -> None:
    if value is None:
        loaded.states.pop(key, None)
        return
    decoded = decode_value(kind, value)
    if isinstance(decoded, ShareGroupOffset):
        loaded.states[key] = HeldState(decoded, 0, offset)
    elif h.is_transactional:
        loaded.pending.setdefault(h.producer_id, []).append(PendingUpdate(key, decoded, h.producer_epoch, offset))
    elif key in loaded.states:  # an update of a share-partition without a snapshot has nothing to lie over
        apply_update(loaded.states[key], decoded, now_ms)

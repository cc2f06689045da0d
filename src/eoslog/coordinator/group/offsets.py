"""Committed offsets of one group, including transactional commits still in flight.

A plain OffsetCommit is materialized as soon as its record is in ``__consumer_offsets``.
A transactional one (TxnOffsetCommit, sendOffsetsToTransaction) stays *pending* under its
producer id until the transaction's marker reaches the group's ``__consumer_offsets``
partition: COMMIT materializes it, ABORT drops it (Kafka's
``GroupMetadata.completePendingTxnOffsetCommit``). Where a plain and a transactional
commit of the same partition race, the one whose record sits later in the log wins, so
the loader and the live path always agree.

Retention follows Kafka 2.1+ (KIP-211): offsets never expire while the group has members
subscribed to their topic. An empty group's offsets expire ``offsets.retention.minutes``
after the group became empty (its current-state timestamp); a group used only for offset
storage (no protocol type) expires each offset that long after its commit; a stable
consumer group expires the offsets of topics none of its members subscribes to any more.
An offset committed with an explicit retention time (OffsetCommit v2-v4) expires at
commit time + that retention instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from eoslog.types import TopicPartition


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class CommitRecord:
    """An offset and the position of its record in ``__consumer_offsets``."""

    log_offset: int
    value: OffsetAndMetadata

    def older_than(self, other: CommitRecord) -> bool:
        return self.log_offset < other.log_offset


class GroupOffsets:
    def __init__(self) -> None:
        self.committed: dict[TopicPartition, CommitRecord] = {}
        self.pending_txn: dict[int, dict[TopicPartition, CommitRecord]] = {}

    # -- plain commits --------------------------------------------------------------

    def commit(self, tp: TopicPartition, record: CommitRecord) -> None:
        self.committed[tp] = record

    def get(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        record = self.committed.get(tp)
        return record.value if record else None

    def remove(self, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Forget these offsets (and pending transactional ones); returns those that existed."""
        removed = []
        for tp in tps:
            if self.committed.pop(tp, None) is not None:
                removed.append(tp)
            for pending in self.pending_txn.values():
                pending.pop(tp, None)
        return removed

    def remove_all(self) -> list[TopicPartition]:
        tps = list(self.committed)
        self.committed.clear()
        self.pending_txn.clear()
        return tps

    @property
    def has_offsets(self) -> bool:
        """Committed or pending offsets keep a group alive (Kafka's hasOffsets)."""
        return bool(self.committed) or any(self.pending_txn.values())

    # -- transactional commits ----------------------------------------------------------

    def prepare_txn(self, producer_id: int, tp: TopicPartition, record: CommitRecord) -> None:
        self.pending_txn.setdefault(producer_id, {})[tp] = record

    def has_pending(self, tp: TopicPartition) -> bool:
        """A transaction holds an offset for ``tp`` that is neither committed nor aborted
        (OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for it)."""
        return any(tp in pending for pending in self.pending_txn.values())

    def has_pending_from(self, producer_id: int) -> bool:
        return producer_id in self.pending_txn

    def complete_txn(self, producer_id: int, commit: bool) -> list[TopicPartition]:
        """Apply a COMMIT (materialize) or ABORT (drop) marker; returns what changed."""
        pending = self.pending_txn.pop(producer_id, {})
        if not commit:
            return []
        changed = []
        for tp, record in pending.items():
            current = self.committed.get(tp)
            if current is None or current.older_than(record):
                self.committed[tp] = record
                changed.append(tp)
        return changed

    # -- retention --------------------------------------------------------------------------

    def expired(
        self, now_ms: int, retention_ms: int, base_timestamp: Callable[[OffsetAndMetadata], int],
        subscribed_topics: frozenset[str] = frozenset(),
    ) -> list[TopicPartition]:
        """Offsets past retention, measured from ``base_timestamp(offset)``; offsets of
        subscribed topics and of partitions with a pending transactional commit stay."""
        out = []
        for tp, record in self.committed.items():
            if tp.topic in subscribed_topics or self.has_pending(tp):
                continue
            value = record.value
            if value.expire_timestamp is not None:
                if now_ms >= value.expire_timestamp:
                    out.append(tp)
            elif now_ms - base_timestamp(value) >= retention_ms:
                out.append(tp)
        return out

"""A partition's leader-epoch cache: which leader epoch began at which offset (Kafka's
``LeaderEpochFileCache``, file ``leader-epoch-checkpoint`` in the partition directory).

Every batch a leader appends carries its leader epoch (``partitionLeaderEpoch``); the first
offset written in each epoch is remembered here. After a leader change a follower asks the new
leader, with OffsetForLeaderEpoch, where its own latest epoch ended on the leader, and
truncates there (KIP-101, KIP-279): records written by a deposed leader that the new leader
never had are cut, so replicas never diverge. The file is Kafka's text format — a version
line ``0``, the number of entries, then ``epoch start_offset`` lines — replaced atomically.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from eoslog.storage.fileio import atomic_write

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


def write_first_checkpoint(partition_dir: Path, epoch: int, start_offset: int) -> None:
    """A new partition's first checkpoint, before its cache exists (``LeaderEpochCache.first``):
    written where partitions are created in bulk, off the event loop, as ``_flush`` would."""
    _write_in_place(partition_dir / CHECKPOINT_FILE, _encode([EpochEntry(epoch, start_offset)]))


def _encode(entries: list[EpochEntry]) -> bytes:
    lines = ["0", str(len(entries))] + [f"{e.epoch} {e.start_offset}" for e in entries]
    return ("\n".join(lines) + "\n").encode()


def _write_in_place(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


class LeaderEpochCache:
    def __init__(self, partition_dir: Path, *, read: bool = True) -> None:
        """``read``: False for a new log's cache (there is no file to read)."""
        self.path = partition_dir / CHECKPOINT_FILE
        self._on_disk = False  # a file exists (the first write needs no fsync: ``_flush``)
        self.entries: list[EpochEntry] = self._read() if read else []

    @classmethod
    def first(cls, partition_dir: Path, epoch: int, start_offset: int) -> LeaderEpochCache:
        """The cache of a new partition whose first checkpoint ``write_first_checkpoint`` wrote."""
        cache = cls(partition_dir, read=False)
        cache.entries = [EpochEntry(epoch, start_offset)]
        cache._on_disk = True
        return cache

    def _read(self) -> list[EpochEntry]:
        if not self.path.exists():
            return []
        self._on_disk = True
        try:
            lines = self.path.read_text().split("\n")
            if lines[0].strip() != "0":
                raise ValueError(f"version {lines[0]!r}")
            count = int(lines[1])
            entries = [EpochEntry(*map(int, line.split())) for line in lines[2:2 + count]]
            if len(entries) != count:
                raise ValueError(f"{len(entries)} entries, header says {count}")
        except (ValueError, IndexError, TypeError) as e:
            # As Kafka: an unreadable cache is rebuilt from the batches' epochs on recovery.
            log.warning("ignoring malformed %s: %s", self.path, e)
            return []
        return entries

    def _flush(self) -> None:
        """Write the cache. Replacing a file is atomic and durable at once (Kafka's rule: the
        checkpoint never misses an entry the log relies on). The first file of a cache is written
        in place without an fsync: if a crash loses it, the cache starts empty and is rebuilt from
        the batches' epochs (``PartitionLog._load_epochs``), so a new partition's first epoch costs
        no fsync, rename and directory fsync (issue 28: they were 55% of the broker's samples when
        producing to 5,000 new partitions)."""
        data = _encode(self.entries)
        if self._on_disk:
            atomic_write(self.path, data)
        else:
            _write_in_place(self.path, data)
            self._on_disk = True

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> bool:
        """The first batch of ``epoch`` is at ``start_offset``. Entries it contradicts (a later
        or equal epoch, or a start at or after it) are removed first; a batch of the latest
        epoch that is not earlier changes nothing. True when the cache changed."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"leader epoch {epoch} at offset {start_offset}")
        last = self.entries[-1] if self.entries else None
        if last is not None and epoch == last.epoch and start_offset >= last.start_offset:
            return False
        kept = [e for e in self.entries if e.epoch < epoch and e.start_offset < start_offset]
        if len(kept) < len(self.entries):
            log.info("%s: epoch %d at %d replaces %s", self.path.parent.name, epoch, start_offset,
                     self.entries[len(kept):])
        self.entries = [*kept, EpochEntry(epoch, start_offset)]
        self._flush()
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (the largest epoch ≤ ``requested_epoch``, the offset where it
        ended — the next epoch's start, or the log end for the latest). (UNDEFINED_EPOCH,
        UNDEFINED_EPOCH_OFFSET) when the cache cannot tell (empty, or an epoch above the latest)."""
        if requested_epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self.latest_epoch:
            return requested_epoch, log_end_offset
        higher = next((e for e in self.entries if e.epoch > requested_epoch), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = next((e for e in reversed(self.entries) if e.epoch <= requested_epoch), None)
        # Below the first epoch known: Kafka answers the requested epoch itself, ended where
        # the first known one began.
        return (requested_epoch if floor is None else floor.epoch), higher.start_offset

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was cut at ``end_offset``: epochs that began there or later are gone."""
        kept = [e for e in self.entries if e.start_offset < end_offset]
        if end_offset >= 0 and len(kept) < len(self.entries):
            self.entries = kept
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: the epoch in force there starts there."""
        before = [e for e in self.entries if e.start_offset <= start_offset]
        if not before or (len(before) == 1 and before[0].start_offset == start_offset):
            return
        first = EpochEntry(before[-1].epoch, start_offset)
        self.entries = [first, *self.entries[len(before):]]
        self._flush()

    def clear(self) -> None:
        self.entries = []
        self._flush()


@dataclass(frozen=True, slots=True)
class Truncation:
    """Where a follower cuts its log, and whether it may fetch after that (False: ask the
    leader again, with the follower's new latest epoch)."""

    offset: int
    complete: bool


def follower_truncation(cache: LeaderEpochCache, log_end_offset: int, high_watermark: int,
                        leader_epoch: int, leader_end_offset: int) -> Truncation:
    """Kafka's AbstractFetcherThread.getOffsetTruncationState: the leader answered
    OffsetForLeaderEpoch for the follower's latest epoch with (``leader_epoch``,
    ``leader_end_offset``)."""
    if leader_end_offset == UNDEFINED_EPOCH_OFFSET:
        # The leader cannot tell (no epochs): Kafka's pre-KIP-101 rule, the high watermark.
        return Truncation(min(high_watermark, log_end_offset), True)
    if leader_epoch == UNDEFINED_EPOCH:
        return Truncation(min(leader_end_offset, log_end_offset), True)
    follower_epoch, follower_end = cache.end_offset_for(leader_epoch, log_end_offset)
    if follower_end == UNDEFINED_EPOCH_OFFSET:
        return Truncation(min(leader_end_offset, log_end_offset), True)
    if follower_epoch != leader_epoch:
        # The follower never had the leader's epoch: cut to where its own earlier epoch ended,
        # then ask again about the epoch before (KIP-279).
        return Truncation(min(follower_end, log_end_offset), False)
    return Truncation(min(follower_end, leader_end_offset, log_end_offset), True)

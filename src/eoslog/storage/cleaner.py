"""Log compaction for ``cleanup.policy=compact`` topics (Kafka's LogCleaner).

A pass over one partition, when its dirty ratio reaches ``min.cleanable.dirty.ratio``:

1. the *cleanable range* ends at the first uncleanable offset: the active segment's base,
   the last stable offset, and the first segment younger than ``min.compaction.lag.ms``,
   whichever comes first; only whole segments below it are cleaned;
2. an offset map (key → last offset) is built over the *dirty* part, from the cleaner
   checkpoint (``cleaner-offset-checkpoint``, Kafka's file) to that end, capped by
   ``log.cleaner.dedupe.buffer.size`` at 24 bytes a key as in Kafka;
3. the segments below the end are rewritten in groups no larger than ``segment.bytes``:
   a record survives if no later record has its key; a surviving tombstone gets a
   delete horizon (KIP-534: the batch's hasDeleteHorizonMs bit, its base timestamp set to
   now + ``delete.retention.ms``) and is dropped by the first pass after that horizon.
   Keyless records are dropped, as Kafka does.

Batches keep their base offset and last offset delta (so producer sequence numbers stay
valid) and their codec; a batch that keeps every record is copied byte for byte, one that
keeps none disappears. Offsets are never reassigned: readers skip the gaps.

Each group of segments is replaced atomically: write ``<base>.log.cleaned``, fsync,
rename to ``<base>.log.swap`` (the commit point), delete the old segments, rename the
swap to ``<base>.log``. ``swap.complete_interrupted_swaps`` (run when a partition loads)
finishes a replacement cut short by a crash, or discards one that never committed.

The active segment is never touched. Transactions (KIP-98, Kafka's CleanedTransactionMetadata):
the cleanable range ends at the LSO, so every transaction in it is decided. Records of aborted
transactions (known from the ``.txnindex`` entries) stay out of the offset map and are removed;
committed ones are compacted by key like any record. A COMMIT/ABORT marker stays while a batch
of its transaction was seen in the pass; once none is, it gets a delete horizon (now +
``delete.retention.ms``, KIP-534) and a later pass after the horizon removes it. A batch
emptied by cleaning keeps its header when it holds its producer's last sequence, so a replay
of the log keeps the producer's epoch and sequence. The cleaned segment gets a ``.txnindex``
of the aborted transactions whose marker it still holds; after cleaning, producer-state
snapshots below the cleaned offset are dropped (one at the log end is taken), so a reload
never replays a cleaned range on top of a snapshot that predates it.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from eoslog.config import LONG_MAX
from eoslog.records.batch import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    DELETE_HORIZON_MASK,
    LOG_OVERHEAD,
    MAGIC_V2,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    Record,
    compute_crc,
    decode_records,
    encode_record,
)
from eoslog.records.compression import CompressionType, compress
from eoslog.storage.checkpoint import read_checkpoint, write_checkpoint
from eoslog.storage.fileio import fsync_dir, fsync_file
from eoslog.storage.log import PartitionLog
from eoslog.storage.log_manager import LogManager
from eoslog.storage.segment import LogSegment, segment_file_name
from eoslog.storage.swap import CLEANED_SUFFIX, SWAP_SUFFIX
from eoslog.storage.txn_index import AbortedTxn

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "cleaner-offset-checkpoint"
MAP_ENTRY_BYTES = 24  # Kafka's SkimpyOffsetMap: a 16-byte hash and an 8-byte offset
MAP_LOAD_FACTOR = 0.9
INT32_MAX = 2**31 - 1
_HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte batch header (see records.batch)


@dataclass(frozen=True, slots=True)
class CleanerStats:
    topic: str
    partition: int
    segments_before: int
    segments_after: int
    bytes_before: int
    bytes_after: int
    records_removed: int
    tombstones_removed: int
    cleaned_up_to: int


# -- crash recovery ------------------------------------------------------------------------


# -- rebuilding batches -----------------------------------------------------------------------


def rebuild_batch(h: BatchHeader, records: list[Record], delete_horizon: int | None) -> bytes:
    """The batch ``h`` holding only ``records``, at their original offsets.

    With a delete horizon the base timestamp carries it (record timestamps stay exact:
    they are deltas from the base).
    """
    log_append_time = bool(h.attributes & TIMESTAMP_TYPE_MASK)
    if not records:  # an empty batch kept for its producer id, epoch and sequences
        base_ts = delete_horizon if delete_horizon is not None else h.max_timestamp
        max_ts = h.max_timestamp
    else:
        base_ts = delete_horizon if delete_horizon is not None else records[0].timestamp
        max_ts = h.max_timestamp if log_append_time else max(r.timestamp for r in records)
    body = bytearray()
    for r in records:
        encode_record(body, r.offset - h.base_offset, r.timestamp - base_ts, r.key, r.value, r.headers)
    payload = compress(CompressionType(h.attributes & COMPRESSION_MASK), bytes(body))
    attributes = (
        h.attributes | DELETE_HORIZON_MASK if delete_horizon is not None
        else h.attributes & ~DELETE_HORIZON_MASK
    )
    out = bytearray(_HEADER.pack(
        h.base_offset, BATCH_HEADER_SIZE - LOG_OVERHEAD + len(payload), h.partition_leader_epoch,
        MAGIC_V2, 0, attributes, h.last_offset_delta, base_ts, max_ts, h.producer_id,
        h.producer_epoch, h.base_sequence, len(records),
    ))
    out += payload
    struct.pack_into(">I", out, 17, compute_crc(out, 0, len(out)))
    return bytes(out)


# -- the cleaner ---------------------------------------------------------------------------------


class LogCleaner:
    def __init__(self, logs: LogManager, clock_ms: Callable[[], int], dedupe_buffer_bytes: int) -> None:
        self.logs = logs
        self._clock_ms = clock_ms
        self.map_capacity = 1
        self.set_dedupe_buffer(dedupe_buffer_bytes)
        self._checkpoint_path = logs.log_dir / CHECKPOINT_FILE
        self._first_dirty = read_checkpoint(self._checkpoint_path)
        # Earliest delete horizon of a retained tombstone, per partition: once it passes,
        # the partition is cleaned whatever its dirty ratio.
        self._horizons: dict[tuple[str, int], int] = {}

    def set_dedupe_buffer(self, dedupe_buffer_bytes: int) -> None:
        """log.cleaner.dedupe.buffer.size (dynamic, as in Kafka): used from the next pass on."""
        self.map_capacity = max(int(dedupe_buffer_bytes / MAP_ENTRY_BYTES * MAP_LOAD_FACTOR), 1)

    def run(self) -> list[CleanerStats]:
        """One pass over every compacted partition that needs cleaning."""
        done = []
        for plog in self.logs.all_logs():
            # (Not a partition being moved to another log directory: Kafka's abortAndPauseCleaning.)
            if plog.config.compact and (plog.topic, plog.partition) not in self.logs.futures:
                stats = self.clean_if_needed(plog)
                if stats is not None:
                    done.append(stats)
        if done:
            self._write_checkpoint()
        return done

    def _write_checkpoint(self) -> None:
        live = {tp: off for tp, off in self._first_dirty.items() if tp in self.logs.logs}
        write_checkpoint(self._checkpoint_path, live)

    # -- ranges ---------------------------------------------------------------------------

    def first_uncleanable_offset(self, plog: PartitionLog) -> int:
        end = min(plog.active_segment.base_offset, plog.last_stable_offset)
        lag = int(plog.config["min.compaction.lag.ms"])
        if lag > 0:
            now = self._clock_ms()
            for seg in plog.segments:
                if seg.max_timestamp > now - lag:
                    end = min(end, seg.base_offset)
                    break
        return end

    def _cleanable_segments(self, plog: PartitionLog, end: int) -> list[LogSegment]:
        """Whole segments below ``end`` (never the active one)."""
        segs = plog.segments
        return [s for i, s in enumerate(segs[:-1]) if segs[i + 1].base_offset <= end]

    def first_dirty_offset(self, plog: PartitionLog) -> int:
        tp = (plog.topic, plog.partition)
        checkpoint = self._first_dirty.get(tp, plog.log_start_offset)
        if not plog.log_start_offset <= checkpoint <= plog.log_end_offset:
            return plog.log_start_offset
        return checkpoint

    def dirty_ratio(self, plog: PartitionLog) -> float:
        segments = self._cleanable_segments(plog, self.first_uncleanable_offset(plog))
        first_dirty = self.first_dirty_offset(plog)
        total = sum(s.size for s in segments)
        if total == 0:
            return 0.0
        dirty = sum(s.size for s in segments if s.next_offset > first_dirty)
        return dirty / total

    def must_clean_now(self, plog: PartitionLog) -> bool:
        """max.compaction.lag.ms (KIP-354, Kafka's LogCleanerManager.maxCompactionDelay): the
        oldest dirty cleanable segment's first batch is older than the lag, so the log is
        cleaned whatever its dirty ratio."""
        lag = plog.config.max_compaction_lag_ms
        if lag >= LONG_MAX:
            return False
        first_dirty = self.first_dirty_offset(plog)
        stamps = [s.first_batch_timestamp for s in self._cleanable_segments(plog, self.first_uncleanable_offset(plog))
                  if s.next_offset > first_dirty and s.first_batch_timestamp is not None
                  and s.first_batch_timestamp > 0]
        return bool(stamps) and min(stamps) < self._clock_ms() - lag

    def clean_if_needed(self, plog: PartitionLog) -> CleanerStats | None:
        tp = (plog.topic, plog.partition)
        horizon = self._horizons.get(tp)
        horizon_passed = horizon is not None and self._clock_ms() >= horizon
        ratio = self.dirty_ratio(plog)
        if ratio <= 0 and not horizon_passed:
            return None
        if (ratio < float(plog.config["min.cleanable.dirty.ratio"]) and not horizon_passed
                and not self.must_clean_now(plog)):
            return None
        try:
            return self.clean(plog)
        except OSError as e:  # as Kafka's cleaner: the log's directory goes offline
            raise plog.io_failed("cleaning", e) from e

    # -- cleaning --------------------------------------------------------------------------------

    def _build_offset_map(
        self, segments: list[LogSegment], first_dirty: int, aborted: _AbortedRanges
    ) -> tuple[dict[bytes, int], int]:
        """key → last offset over the dirty segments; stops at a segment boundary when the
        map is full. Returns the map and the offset up to which it is complete."""
        offsets: dict[bytes, int] = {}
        covered = first_dirty
        for seg in segments:
            if seg.next_offset <= first_dirty:
                continue
            if offsets and len(offsets) >= self.map_capacity:
                break
            for pos, h in seg.iter_headers():
                if h.is_control or h.last_offset < first_dirty:
                    continue
                if h.is_transactional and aborted.contains(h):
                    continue  # aborted records never shadow a committed or plain one
                for rec in decode_records(seg.pread(pos, h.size)):
                    if rec.key is not None and rec.offset >= first_dirty:
                        offsets[rec.key] = rec.offset
            covered = seg.next_offset
        return offsets, covered

    def clean(self, plog: PartitionLog) -> CleanerStats:
        tp = (plog.topic, plog.partition)
        first_dirty = self.first_dirty_offset(plog)
        end = self.first_uncleanable_offset(plog)
        segments = self._cleanable_segments(plog, end)
        start = segments[0].base_offset if segments else plog.log_start_offset
        aborted = _AbortedRanges(plog.aborted_transactions(start, end))
        offset_map, covered = self._build_offset_map(segments, first_dirty, aborted)
        # Only the segments the map covers can be cleaned with it.
        cleaned_up_to = max(covered, first_dirty)
        segments = [s for s in segments if s.next_offset <= cleaned_up_to]
        last_offsets = {pid: e.last_offset for pid, e in plog.producer_state.producers.items()}
        work = _Pass(offset_map, self._clock_ms(), int(plog.config["delete.retention.ms"]),
                     aborted, last_offsets)
        before_count, before_bytes = len(plog.segments), plog.size_bytes
        # Consecutive segments share one output segment while their *cleaned* bytes fit
        # segment.bytes and their offsets fit its int32 relative offsets, so segments
        # emptied by earlier passes merge.
        out: _Output | None = None
        for seg in segments:
            data, kept_markers = work.clean_segment(seg)
            if out is not None and (
                out.size + len(data) > plog.config.segment_bytes
                or seg.next_offset - out.base_offset > INT32_MAX
            ):
                self._swap_in(plog, out)
                out = None
            if out is None:
                out = _Output(plog.dir, seg.base_offset)
            out.write(seg, data, kept_markers)
        if out is not None:
            self._swap_in(plog, out)
        if segments:
            self._drop_stale_snapshots(plog, cleaned_up_to)
        self._first_dirty[tp] = cleaned_up_to
        if work.next_horizon is None:
            self._horizons.pop(tp, None)
        else:
            self._horizons[tp] = work.next_horizon
        stats = CleanerStats(
            plog.topic, plog.partition, before_count, len(plog.segments), before_bytes,
            plog.size_bytes, work.removed, work.tombstones, cleaned_up_to,
        )
        log.info(
            "cleaned %s-%d up to offset %d: %d → %d segments, %d → %d bytes, %d records removed "
            "(%d tombstones)", stats.topic, stats.partition, stats.cleaned_up_to,
            stats.segments_before, stats.segments_after, stats.bytes_before, stats.bytes_after,
            work.removed, work.tombstones,
        )
        return stats

    @staticmethod
    def _drop_stale_snapshots(plog: PartitionLog, cleaned_up_to: int) -> None:
        """A snapshot below ``cleaned_up_to`` may hold a transaction open whose data and
        marker cleaning removed; replaying the cleaned log on top of it would keep it open
        forever. Take one at the log end first, then drop those."""
        state = plog.producer_state
        if not any(off >= cleaned_up_to for off, _ in state._snapshots()):
            plog.snapshot_producer_state()
        for off, path in state._snapshots():
            if off < cleaned_up_to:
                path.unlink(missing_ok=True)

    def _swap_in(self, plog: PartitionLog, out: _Output) -> None:
        """Replace ``out.segments`` by the cleaned file, atomically on disk."""
        directory = plog.dir
        base = out.base_offset
        swap = out.commit()  # from here on a crash completes the swap
        for seg in out.segments:
            plog.retire_segment(seg)  # file.delete.delay.ms: renamed .deleted, removed later
        os.replace(swap, directory / segment_file_name(base, ".log"))
        fsync_dir(directory)
        new = LogSegment(directory, base, plog.config.index_interval_bytes, self._clock_ms())
        new.load(verify=False)
        new.txn_index.entries = []
        new.txn_index.create_empty()
        for txn in out.aborted:
            new.txn_index.append(txn)
        new.flush(fsync=True)
        start = plog.segments.index(out.segments[0])
        plog.segments[start : start + len(out.segments)] = [new]


class _Output:
    """One ``<base>.log.cleaned`` file being written."""

    def __init__(self, directory: Path, base_offset: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.path = directory / (segment_file_name(base_offset, ".log") + CLEANED_SUFFIX)
        self._fh = open(self.path, "wb")  # noqa: SIM115 - closed by commit()
        self.size = 0
        self.segments: list[LogSegment] = []
        self.aborted: list[AbortedTxn] = []  # txn-index entries whose ABORT marker is kept

    def write(self, seg: LogSegment, data: bytes, kept_markers: set[int]) -> None:
        self._fh.write(data)
        self.size += len(data)
        self.segments.append(seg)
        self.aborted += [e for e in seg.txn_index.entries if e.last_offset in kept_markers]

    def commit(self) -> Path:
        """fsync and rename to ``.swap``: the replacement is decided."""
        self._fh.flush()
        fsync_file(self._fh.fileno(), self.path)
        self._fh.close()
        swap = self.path.with_name(self.path.name.removesuffix(CLEANED_SUFFIX) + SWAP_SUFFIX)
        os.replace(self.path, swap)
        fsync_dir(self.directory)
        return swap


class _AbortedRanges:
    """The aborted transactions of the cleanable range, by producer id. A producer has one
    transaction open at a time, so a transactional batch is aborted iff it lies in one of
    its producer's [first offset, ABORT marker] ranges."""

    def __init__(self, txns: list[AbortedTxn]) -> None:
        self.by_pid: dict[int, list[tuple[int, int]]] = {}
        for t in txns:
            self.by_pid.setdefault(t.producer_id, []).append((t.first_offset, t.last_offset))

    def contains(self, h: BatchHeader) -> bool:
        return any(first <= h.base_offset <= last for first, last in self.by_pid.get(h.producer_id, ()))


class _Pass:
    """What one cleaning pass decides per batch and record, and what it counted."""

    def __init__(self, offset_map: dict[bytes, int], now_ms: int, delete_retention_ms: int,
                 aborted: _AbortedRanges, producer_last_offsets: dict[int, int]) -> None:
        self.offset_map = offset_map
        self.now = now_ms
        self.delete_retention_ms = delete_retention_ms
        self.aborted = aborted
        self.producer_last_offsets = producer_last_offsets
        # Producers with a transactional batch read since their last marker: their next
        # marker still has data in the log and must stay.
        self.txn_data_seen: set[int] = set()
        self.removed = 0
        self.tombstones = 0
        self.markers_removed = 0
        self.next_horizon: int | None = None  # earliest horizon of a tombstone or marker kept

    def _note_horizon(self, horizon: int) -> None:
        self.next_horizon = horizon if self.next_horizon is None else min(self.next_horizon, horizon)

    def clean_segment(self, seg: LogSegment) -> tuple[bytes, set[int]]:
        """The cleaned bytes of ``seg`` and the offsets of the markers kept in them."""
        out = bytearray()
        kept_markers: set[int] = set()
        for pos, h in seg.iter_headers():
            raw = seg.pread(pos, h.size)
            if h.is_control:
                kept = self._clean_marker(h, raw)
                if kept:
                    kept_markers.add(h.base_offset)
                out += kept
                continue
            if h.is_transactional:
                self.txn_data_seen.add(h.producer_id)
                if self.aborted.contains(h):
                    self.removed += h.records_count
                    out += self._empty_or_nothing(h)
                    continue
            out += self._clean_batch(h, raw)
        return bytes(out), kept_markers

    def _holds_last_sequence(self, h: BatchHeader) -> bool:
        return h.producer_id >= 0 and self.producer_last_offsets.get(h.producer_id) == h.last_offset

    def _empty_or_nothing(self, h: BatchHeader) -> bytes:
        """A batch that keeps no record: its header stays when it holds its producer's last
        sequence (Kafka's RETAIN_EMPTY), so a replay still knows the producer's sequence."""
        return rebuild_batch(h, [], None) if self._holds_last_sequence(h) else b""

    def _clean_marker(self, h: BatchHeader, raw: bytes) -> bytes:
        if h.producer_id in self.txn_data_seen:
            self.txn_data_seen.discard(h.producer_id)
            return raw  # its transaction still has batches in the log
        if h.attributes & DELETE_HORIZON_MASK:
            if self.now >= h.base_timestamp:
                self.markers_removed += 1
                return b""
            self._note_horizon(h.base_timestamp)
            return raw
        horizon = self.now + self.delete_retention_ms
        self._note_horizon(horizon)
        return rebuild_batch(h, decode_records(raw), horizon)

    def _clean_batch(self, h: BatchHeader, raw: bytes) -> bytes:
        records = decode_records(raw)
        horizon = h.base_timestamp if h.attributes & DELETE_HORIZON_MASK else None
        kept: list[Record] = []
        has_tombstone = False
        for r in records:
            if r.key is None or self.offset_map.get(r.key, r.offset) > r.offset:
                self.removed += 1  # keyless, or a later record has the key
                continue
            if r.value is None:
                if horizon is not None and self.now >= horizon:
                    self.tombstones += 1
                    self.removed += 1
                    continue
                has_tombstone = True
            kept.append(r)
        if has_tombstone:
            if horizon is None:
                horizon = self.now + self.delete_retention_ms
            self._note_horizon(horizon)
            if not h.attributes & DELETE_HORIZON_MASK or len(kept) != len(records):
                return rebuild_batch(h, kept, horizon)
        if len(kept) == len(records):
            return raw
        return rebuild_batch(h, kept, None) if kept else self._empty_or_nothing(h)

"""The log of one partition: an ordered list of segments in ``<topic>-<partition>/``.

Owns offsets (log start offset, log end offset, high watermark, recovery point),
segment roll, retention and recovery. It never parses records beyond batch headers on
the append path and never looks at the wire protocol.

Single node: the high watermark equals the log end offset once an append returns.
The last stable offset arrives with transactions; until then it is the high watermark.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import re
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from eoslog.config import TopicConfig
from eoslog.errors import Errors
from eoslog.records.batch import (
    BatchHeader,
    InvalidRecordError,
    RecordChecks,
    assign_offsets,
    control_marker,
    iter_batch_headers,
    offset_chunks,
    validate_produce_batches,
    validate_records,
)
from eoslog.records.file_records import FileRecords
from eoslog.storage.fileio import OUT_OF_DESCRIPTORS, DescriptorsExhausted, SyncFile, fsync_dir, open_dir
from eoslog.storage.leader_epoch import LeaderEpochCache
from eoslog.storage.log_dir_failure import KafkaStorageError, LogDirState
from eoslog.storage.producer_state import CompletedTxn, ProducerAppendInfo, ProducerStateManager
from eoslog.storage.segment import DELETED_SUFFIX, LogSegment, RecoveryResult, parse_segment_base
from eoslog.storage.swap import complete_interrupted_swaps
from eoslog.storage.txn_index import AbortedTxn, CorruptTxnIndexError

log = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1
_DIR_RE = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
# Kafka's future log (AlterReplicaLogDirs): <topic>-<partition>.<uuid without dashes>-future.
_FUTURE_DIR_RE = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)\.[0-9a-f]{32}-future$")


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    m = _DIR_RE.match(name)
    return (m.group("topic"), int(m.group("partition"))) if m else None


def future_dir_name(topic: str, partition: int) -> str:
    """A new future log's directory name (Kafka's UnifiedLog.logFutureDirName)."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}-future"


def parse_future_dir(name: str) -> tuple[str, int] | None:
    m = _FUTURE_DIR_RE.match(name)
    return (m.group("topic"), int(m.group("partition"))) if m else None


@dataclass(frozen=True, slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    records: int
    duplicate: bool = False  # an idempotent retry of a batch already in the log


@dataclass(frozen=True, slots=True)
class FetchInfo:
    records: bytes
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int


class OffsetOutOfRange(Exception):
    pass


@dataclass(frozen=True, slots=True)
class SyncPlan:
    """One log's part of a group-commit round: descriptors to sync off the event loop
    (duplicated or opened for it, closed by the sync) with their files' paths — segment files,
    and the directories whose new entries must be durable too — and the log end offset they make
    durable."""

    log: PartitionLog
    target: int
    truncations: int
    files: list[SyncFile]
    created: tuple[LogSegment, ...] = ()  # segments whose directory entries the round makes durable
    parent: bool = False  # and the partition directory's own entry in the log directory


# The leader epoch a single eoslog node stamps on the batches it appends (Kafka's leader
# stamps its epoch; a one-node partition never changes leader, so its epoch stays 0).
SINGLE_NODE_LEADER_EPOCH = 0


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _storage_io(what: str) -> Callable[[Callable[Concatenate[PartitionLog, _P], _R]],
                                       Callable[Concatenate[PartitionLog, _P], _R]]:
    """A log operation that touches its files (Kafka's maybeHandleIOException): refused while
    the log directory is offline, and an OSError takes the directory offline."""
    def wrap(method: Callable[Concatenate[PartitionLog, _P], _R]) -> Callable[Concatenate[PartitionLog, _P], _R]:
        @functools.wraps(method)
        def run(self: PartitionLog, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
            if self.log_dir.offline is not None:
                raise self._offline_error(what)
            try:
                return method(self, *args, **kwargs)
            except OSError as e:
                raise self.io_failed(what, e) from e
        return run
    return wrap


class AppendOrigin(Enum):
    """Who appends, which decides the checks a batch gets (Kafka's AppendOrigin)."""

    CLIENT = "client"  # a producer: full validation, sequences, offsets assigned
    COORDINATOR = "coordinator"  # a coordinator of this broker: its batches and markers
    REPLICATION = "replication"  # a follower copying its leader: offsets kept (append_as_follower)


class PartitionLog:
    leader_epoch = SINGLE_NODE_LEADER_EPOCH

    def __init__(
        self,
        directory: Path,
        config: TopicConfig,
        clock_ms: Callable[[], int],
        *,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        clean_shutdown: bool = True,
        producer_id_expiration_ms: int = 86_400_000,
        high_watermark: int | None = None,
        log_dir: LogDirState | None = None,
        new: bool = False,
        first_epoch: int | None = None,
    ) -> None:
        """``log_dir``: the state of the log directory holding ``directory``, shared by its logs
        (the log manager's; a log opened on its own has one of its own). ``new``: a log just
        created (``LogManager.create_topic``): its directory exists and is empty, nothing is
        read; ``first_epoch``: the leader epoch its creator wrote to its new leader-epoch
        checkpoint (``write_first_checkpoint``; a single node's 0), which it starts in."""
        parsed = parse_partition_dir(directory.name)
        # A future log (AlterReplicaLogDirs): the copy of a partition being moved to another
        # log directory of this broker.
        future = parse_future_dir(directory.name)
        found = parsed or future
        if found is None:
            raise ValueError(f"{directory} is not a <topic>-<partition> directory")
        self.is_future = future is not None
        # Why this log object is no longer the partition's log on this broker, if it is not: its
        # replica was swapped for its future log (LogManager.replace_current_with_future) or
        # deleted (the replica moved to other brokers, or its topic was deleted).
        self.retired: str | None = None
        self.topic, self.partition = found
        self.dir = directory
        self.log_dir = log_dir or LogDirState(directory.parent)
        self.config = config
        self._clock_ms = clock_ms
        # False while the partition directory's own name may not be durable (created here and not
        # fsynced since): the next flush or round fsyncs the log directory before a record of
        # this log counts as durable. Created lazily so that creating many partitions costs no
        # directory fsync each.
        self._entry_durable = not new
        if not new and not self.dir.exists():
            self.dir.mkdir(parents=True)
            self._entry_durable = False
        self._truncations = 0  # a group-commit round started before a truncation is void
        self.segments: list[LogSegment] = []
        # Segments retention or compaction dropped, awaiting file.delete.delay.ms: (due, files).
        self.retired_files: list[tuple[int, list[Path]]] = []
        self.recovery_results: list[tuple[Path, RecoveryResult]] = []
        self.recovery_point = recovery_point
        self._last_flush_ms = clock_ms()
        if new:
            self.segments.append(self._new_segment(0))
        else:
            self._load(clean_shutdown, log_start_offset)
        self.log_start_offset = max(log_start_offset, self.segments[0].base_offset)
        # The checkpointed high watermark (replication-offset-checkpoint) when there is one:
        # a replica must not expose what its ISR may not have. A leader moves it on at once
        # when it is alone in the ISR, as a single node always is.
        self.high_watermark = self.log_end_offset if high_watermark is None else max(
            self.log_start_offset, min(high_watermark, self.log_end_offset))
        self.producer_state = ProducerStateManager(
            directory, f"{self.topic}-{self.partition}", producer_id_expiration_ms
        )
        if not new:
            self._load_producer_state()
            self.epochs = LeaderEpochCache(directory)
            self._load_epochs()
        elif first_epoch is None:
            self.epochs = LeaderEpochCache(directory, read=False)
        else:
            self.leader_epoch = first_epoch
            self.epochs = LeaderEpochCache.first(directory, first_epoch, 0)

    def _load_epochs(self) -> None:
        """The leader-epoch cache agrees with the log: entries past a recovered log's end or
        below its start go; a missing cache is rebuilt from the batches' leader epochs."""
        self.epochs.truncate_from_end(self.log_end_offset)
        self.epochs.truncate_from_start(self.log_start_offset)
        if not self.epochs.entries and self.log_end_offset > self.log_start_offset:
            for seg in self._segments_from(self.log_start_offset):
                for _, h in seg.iter_headers():
                    if h.partition_leader_epoch >= 0 and h.last_offset >= self.log_start_offset:
                        self.epochs.assign(h.partition_leader_epoch, max(h.base_offset, self.log_start_offset))

    def _load_producer_state(self) -> None:
        """Producer state and the aborted-transaction indexes, which derive from the log.

        The newest usable snapshot is loaded and the log after it replayed (no
        validation); the txn-index entries of markers in the replayed range are rebuilt
        by the replay. If any segment's txn index cannot be trusted, everything is
        rebuilt from the log start.
        """
        trusted = True
        for seg in self.segments:
            try:
                seg.txn_index.load()
            except CorruptTxnIndexError as e:
                if seg.size == 0:
                    seg.txn_index.create_empty()
                    continue
                log.warning("rebuilding transaction state of %s-%d from the log: %s",
                            self.topic, self.partition, e)
                trusted = False
        if trusted:
            start = self.producer_state.load(self.log_start_offset, self.log_end_offset)
        else:
            start = self.log_start_offset
            self.producer_state.reset(start)
        if start < self.log_end_offset:
            for seg in self.segments:
                if not trusted:
                    seg.txn_index.create_empty()
                elif seg.next_offset > start:
                    seg.txn_index.truncate_from(start)
            completed = self.producer_state.replay(self._batches_with_markers_from(start))
            for txn in completed:
                if txn.is_aborted:
                    self._index_aborted(txn)
        self.producer_state.map_end_offset = self.log_end_offset
        self.producer_state.on_high_watermark(self.high_watermark)

    def _batches_with_markers_from(
        self, offset: int
    ) -> Iterator[tuple[BatchHeader, tuple[bool, int] | None]]:
        """Batches from ``offset``; control batches with (is_commit, coordinator epoch)."""
        for seg in self._segments_from(offset):
            found = seg.find_position(offset)
            if found is None:
                continue
            for pos, h in seg.iter_headers(found[0]):
                yield h, control_marker(seg.pread(pos, h.size)) if h.is_control else None

    def _index_aborted(self, txn: CompletedTxn) -> None:
        """Add an aborted transaction to the txn index of the segment holding its marker."""
        seg = self._segments_from(txn.last_offset)[0]
        seg.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset,
                                        self._stable_offset(self.log_end_offset,
                                                            self.producer_state.first_unstable_offset)))

    # -- loading -------------------------------------------------------------

    def _new_segment(self, base_offset: int, *, new: bool = True) -> LogSegment:
        """A segment starting at ``base_offset``: ``new`` (its files created by its first write),
        or one on disk."""
        config = self.config
        jitter = config.segment_jitter_ms
        return LogSegment(self.dir, base_offset, config.index_interval_bytes, self._clock_ms(),
                          preallocate=config.segment_bytes if config.preallocate else 0,
                          roll_jitter_ms=random.randrange(min(jitter, config.segment_ms)) if jitter > 0 else 0,
                          new=new)

    def retire_segment(self, seg: LogSegment) -> None:
        """Delete a segment retention or compaction dropped: at once, or with file.delete.delay.ms
        set (Kafka's default 60 s) renamed ``.deleted`` and removed by ``delete_due_files``."""
        delay = self.config.file_delete_delay_ms
        if delay <= 0:
            seg.delete()
        else:
            self.retired_files.append((self._clock_ms() + delay, seg.retire()))

    def delete_due_files(self, now: int) -> int:
        """Remove the retired segments' files whose file.delete.delay.ms has passed."""
        due = [paths for at, paths in self.retired_files if at <= now]
        if not due:
            return 0
        self.retired_files = [(at, paths) for at, paths in self.retired_files if at > now]
        for paths in due:
            for p in paths:
                p.unlink(missing_ok=True)
        return len(due)

    def _load(self, clean_shutdown: bool, log_start_offset: int) -> None:
        for leftover in [*self.dir.glob("*.tmp"), *self.dir.glob(f"*{DELETED_SUFFIX}")]:
            leftover.unlink()
        complete_interrupted_swaps(self.dir)  # a compaction cut short by a crash
        bases = sorted(
            b for p in self.dir.glob("*.log") if (b := parse_segment_base(p)) is not None
        )
        # Indexes without a log file are debris from an interrupted delete.
        for p in list(self.dir.glob("*.index")) + list(self.dir.glob("*.timeindex")):
            if parse_segment_base(p) not in bases:
                p.unlink()
        truncated = False
        for base in bases:
            seg = self._new_segment(base, new=False)
            if truncated:
                # Everything after a truncated segment is unreachable: Kafka deletes it.
                log.warning("deleting %s: it follows a truncated segment", seg.log_path)
                seg.delete()
                continue
            if self.segments:
                seg.next_offset = base
            verify = not clean_shutdown and base >= self._recovery_floor(bases)
            if verify:
                seg.read_from_disk()
                # Written after the last flush: its name (and its directory's) may not be
                # durable yet, nor its transaction index.
                seg.entry_durable = self._entry_durable = False
            if not clean_shutdown:
                seg.txn_index.mark_unsynced()
            result = seg.load(verify=verify)
            if result.reason is not None:
                self.recovery_results.append((seg.log_path, result))
                truncated = True
            self.segments.append(seg)
        if not self.segments:
            # As Kafka's LogLoader: an empty log starts at its log start offset.
            self.segments.append(self._new_segment(max(log_start_offset, 0)))
        # As Kafka's LogLoader: a clean shutdown flushed everything; after a crash the
        # recovered data is not yet fsynced, so the recovery point only moves back.
        if clean_shutdown and not self.recovery_results:
            self.recovery_point = self.log_end_offset
        else:
            self.recovery_point = min(self.recovery_point, self.log_end_offset)

    def _recovery_floor(self, bases: list[int]) -> int:
        """Base offset of the first segment that may hold unflushed data."""
        floor = 0
        for b in bases:
            if b <= self.recovery_point:
                floor = b
        return floor

    # -- the log directory's failures (storage/log_dir_failure.py) --------------------

    @property
    def offline(self) -> bool:
        """Its log directory failed: nothing of this log is served or made durable any more."""
        return self.log_dir.offline is not None

    def _offline_error(self, what: str) -> KafkaStorageError:
        return KafkaStorageError(f"{what} {self.topic}-{self.partition}: log directory {self.log_dir.path} is "
                                 f"offline ({self.log_dir.offline})")

    def io_failed(self, what: str, error: OSError) -> KafkaStorageError:
        """An I/O error of this log: its directory goes offline — unless the log was retired (moved
        to another directory, or deleted) and the error is of a reader or an fsync round still
        holding it, whose files are gone: the directory is sound."""
        if self.retired is not None:
            return KafkaStorageError(f"{what} {self.topic}-{self.partition}: {self.retired}")
        self.log_dir.fail(f"error while {what} {self.topic}-{self.partition}", error)
        return KafkaStorageError(f"{what} {self.topic}-{self.partition} failed: {error}")

    # -- offsets ---------------------------------------------------------------

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.active_segment.next_offset

    @property
    def last_stable_offset(self) -> int:
        """Offsets below it are decided: no open transaction has records there, nor an ended
        one whose marker the high watermark has not passed yet (Kafka's unreplicatedTxns).

        An open transaction that began below the log start offset (DeleteRecords may cut
        into it, as in Kafka) holds the LSO at the log start offset, as Kafka's
        maybeIncrementFirstUnstableOffset does."""
        return self._stable_offset(self.high_watermark,
                                   self.producer_state.first_unstable_offset_at(self.high_watermark))

    def _stable_offset(self, bound: int, first_unstable: int | None) -> int:
        if first_unstable is None:
            return bound
        return min(max(first_unstable, self.log_start_offset), bound)

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    # -- appending ----------------------------------------------------------------

    def append_as_leader(self, records: bytes, origin: AppendOrigin = AppendOrigin.CLIENT,
                         transaction_version: int = 0) -> AppendInfo:
        """Validate a record set as ``origin`` requires, assign offsets and append it.

        CLIENT (a producer's batch): Kafka's full validation (magic, CRC, sizes, one batch,
        no control batch, a key on every record of a compacted topic), a retried batch
        among its producer's last five is answered with its first offsets and not written
        again, and the producer's epoch and sequence are checked. COORDINATOR (a coordinator
        of this broker: its own batches and COMMIT/ABORT markers): batch structure and sizes,
        the producer epoch (and a marker's coordinator epoch), no sequences; a marker of a
        transaction of ``transaction_version`` 2+ must carry an epoch above its producer's (for
        CLIENT: a v2 transaction just added here, which must start at sequence 0).

        Raises InvalidRecordError / ProducerStateError (carrying the Kafka error) without
        writing anything. The high watermark is not moved: that is the replica layer's job
        (``update_high_watermark``), as only it knows which replicas have the records.
        KafkaStorageError when the log directory is offline (a retried batch too: it may be
        one the failed fsync lost) or fails now.
        """
        if self.log_dir.offline is not None:
            raise self._offline_error("appending to")
        client = origin is AppendOrigin.CLIENT
        if client:
            batches = validate_produce_batches(records, self.config.max_message_bytes)
            checks = RecordChecks(
                f"{self.topic}-{self.partition}", self._clock_ms(), not self.config.log_append_time,
                self.config.timestamp_before_max_ms, self.config.timestamp_after_max_ms, self.config.compact,
                self.config.max_decompressed_message_bytes)
            for pos, h in batches:
                validate_records(memoryview(records)[pos : pos + h.size], h, checks)
        else:
            batches = self._coordinator_batches(records)
        if len(records) > self.config.segment_bytes:
            # Checked after the batch itself, as in Kafka's UnifiedLog.append.
            raise InvalidRecordError(
                Errors.RECORD_LIST_TOO_LARGE,
                f"record set of {len(records)} bytes exceeds segment.bytes="
                f"{self.config.segment_bytes} of {self.topic}-{self.partition}",
            )
        producers = self.producer_state.prepare()
        offset = self.log_end_offset
        markers: dict[int, tuple[bool, int]] | None = None
        if client:
            for _, h in batches:
                if h.producer_id >= 0 and (dup := producers.find_duplicate(h)) is not None:
                    # Kafka answers a retried batch with where it was first written, and with that
                    # batch's max timestamp in log_append_time (its BatchMetadata.timestamp),
                    # whatever the topic's timestamp type.
                    return AppendInfo(dup.first_offset, dup.last_offset, dup.timestamp, self.log_start_offset, 0,
                                      True)
            for _, h in batches:
                if h.producer_id >= 0:
                    producers.validate(h, offset, transaction_version)  # raises ProducerStateError
                offset += h.last_offset_delta + 1
        else:
            view = memoryview(records)
            for pos, h in batches:
                if h.is_control:
                    markers = markers or {}
                    _, coordinator_epoch = markers[pos] = control_marker(view[pos : pos + h.size])
                    producers.validate_marker(h.producer_id, h.producer_epoch, coordinator_epoch, offset,
                                              transaction_version)
                elif h.producer_id >= 0:
                    producers.validate_epoch(h, offset)
                offset += h.last_offset_delta + 1
        try:
            return self._append(records, batches, producers, markers, assign=True)
        except OSError as e:
            raise self.io_failed("appending to", e) from e

    def append_as_follower(self, records: bytes) -> AppendInfo:
        """Append a leader's batches as they are (Kafka's AppendOrigin.REPLICATION): offsets
        kept, CRCs checked, no producer validation — the leader validated them — while
        producer state, open transactions and the aborted-transaction index are rebuilt
        from them exactly as the leader's were."""
        if self.log_dir.offline is not None:
            raise self._offline_error("appending to")
        batches = list(iter_batch_headers(records))
        if not batches:
            return AppendInfo(self.log_end_offset, self.log_end_offset - 1, -1, self.log_start_offset, 0)
        expected = self.log_end_offset
        for _, h in batches:
            if h.base_offset < expected:
                raise InvalidRecordError(
                    Errors.CORRUPT_MESSAGE,
                    f"replicated batch at offset {h.base_offset} of {self.topic}-{self.partition} is "
                    f"below the log end offset {expected}: offsets must increase",
                )
            expected = h.next_offset
        view = memoryview(records)
        markers = {pos: control_marker(view[pos : pos + h.size]) for pos, h in batches if h.is_control} or None
        try:
            return self._append(records, batches, self.producer_state.prepare(), markers, assign=False)
        except OSError as e:
            raise self.io_failed("appending to", e) from e

    def _coordinator_batches(self, records: bytes) -> list[tuple[int, BatchHeader]]:
        batches = list(iter_batch_headers(records))
        if not batches:
            raise InvalidRecordError(Errors.INVALID_RECORD, "coordinator append without a batch")
        for _, h in batches:
            if h.size > self.config.max_message_bytes:
                raise InvalidRecordError(
                    Errors.MESSAGE_TOO_LARGE,
                    f"batch of {h.size} bytes exceeds max.message.bytes={self.config.max_message_bytes}",
                )
        return batches

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark (kept within [log start offset, log end offset]); the
        replica layer moves it once the in-sync replicas have the records below it."""
        self.high_watermark = max(self.log_start_offset, min(offset, self.log_end_offset))
        self.producer_state.on_high_watermark(self.high_watermark)
        return self.high_watermark

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions that may hold records in [start, end), for read_committed
        fetches (from the segment holding ``start`` on: a marker follows its records)."""
        # An entry lives with its ABORT marker, which may be in any later segment, so every
        # segment from ``start`` on is consulted (Kafka stops early on entries' stored LSOs;
        # ours are exact only for live appends, not for indexes rebuilt by replay).
        out: list[AbortedTxn] = []
        for seg in self._segments_from(start):
            out += seg.txn_index.overlapping(start, end)
        return out

    def _append(
        self, records: bytes, batches: list[tuple[int, BatchHeader]], producers: ProducerAppendInfo,
        markers: dict[int, tuple[bool, int]] | None, *, assign: bool,
    ) -> AppendInfo:
        """Write validated batches; ``markers`` holds (is_commit, coordinator epoch) of each
        control batch by its position in ``records`` (an OSError: the callers take the directory offline)."""
        now = self._clock_ms()
        append_time = now if self.config.log_append_time and assign else None
        first = self.log_end_offset if assign else batches[0][1].base_offset
        incoming_ts = (
            append_time if append_time is not None else max(h.max_timestamp for _, h in batches)
        )
        incoming_offsets = sum(h.last_offset_delta + 1 for _, h in batches)
        self._maybe_roll(len(records), incoming_offsets, incoming_ts, now)
        chunks: list[bytes | bytearray | memoryview]
        if not assign:
            next_offset, chunks, patched = batches[-1][1].next_offset, [records], batches
        elif append_time is None:
            # The common case: only baseOffset changes, so the batch is written from the
            # request's buffer as it is, with 8 new bytes in front of each batch's rest.
            next_offset, offset_bufs, patched = offset_chunks(records, batches, first, self.leader_epoch)
            chunks = list(offset_bufs)
        else:
            buf = bytearray(records)
            next_offset, patched = assign_offsets(buf, batches, first, append_time, self.leader_epoch)
            chunks = [buf]
        seg = self.active_segment
        seg.append(chunks, patched)
        for _, h in patched:
            if h.partition_leader_epoch >= 0:
                self.epochs.assign(h.partition_leader_epoch, h.base_offset)  # no-op within an epoch
        for pos, h in patched:
            if markers is not None and (marker := markers.get(pos)) is not None:
                producers.append_marker(h, marker[1], marker[0])
            else:
                producers.append(h)
        self.producer_state.commit(producers, next_offset)
        for txn in producers.completed:
            if txn.is_aborted:
                self._index_aborted(txn)
        if seg.unflushed_messages >= self.config.flush_messages:
            self.flush()
        return AppendInfo(
            first, next_offset - 1, append_time if append_time is not None else -1,
            self.log_start_offset, next_offset - first,
        )

    def _maybe_roll(self, incoming_bytes: int, incoming_offsets: int, incoming_ts: int,
                    now: int) -> None:
        """Roll as Kafka's LogSegment.shouldRoll decides: the batch would overflow
        segment.bytes, segment.ms has passed since the first batch's timestamp, or the
        segment's int32 relative offsets / positions would overflow."""
        seg = self.active_segment
        if seg.size == 0:
            return
        too_big = seg.size + incoming_bytes > min(self.config.segment_bytes, INT32_MAX)
        too_old = seg.time_waited_for_roll(now, incoming_ts) > self.config.max_segment_ms - seg.roll_jitter_ms
        offsets_overflow = self.log_end_offset + incoming_offsets - seg.base_offset > INT32_MAX
        if too_big or too_old or offsets_overflow:
            self.roll()

    @_storage_io("rolling")
    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset; the old ones are flushed."""
        old = self.active_segment
        if old.size == 0:
            return old
        self._flush_segments()
        old.trim()
        new = self._new_segment(self.log_end_offset)
        # Its files now, as Kafka's roll: retention may roll the active segment and delete every
        # other, and then the empty segment's name on disk is what keeps the log end offset.
        new.create()
        new.next_offset = old.next_offset
        self.segments.append(new)
        self.recovery_point = new.base_offset
        # Kafka snapshots producer state at every roll, so recovery replays one segment at most.
        self.producer_state.take_snapshot()
        self.producer_state.delete_snapshots_except_latest(keep=3)
        log.info("rolled %s-%d at offset %d", self.topic, self.partition, new.base_offset)
        return new

    def _flush_segments(self) -> None:
        """fsync every segment that may hold data past the recovery point (after an unclean
        start-up that can be more than the active segment) and the active one's indexes, then
        the directory entries created since the last sync."""
        created = []
        for seg in self.segments:
            unsynced = seg.next_offset > self.recovery_point
            if unsynced or seg is self.active_segment:
                seg.flush(fsync=True, data=unsynced)
            if not seg.entry_durable:
                created.append(seg)
        if created:
            fsync_dir(self.dir)
            for seg in created:
                seg.entry_durable = True
        if not self._entry_durable and self.size_bytes:
            fsync_dir(self.dir.parent)
            self._entry_durable = True

    def parent_entry_synced(self) -> None:
        """The log directory was fsynced after this log's directory was made (the log manager
        does it once for all of its logs)."""
        self._entry_durable = True

    @_storage_io("flushing")
    def flush(self) -> None:
        self._flush_segments()
        self.recovery_point = self.log_end_offset
        self._last_flush_ms = self._clock_ms()

    @_storage_io("syncing")
    def begin_sync(self) -> SyncPlan | None:
        """What an fsync round must sync so that everything appended so far survives a power
        cut (None: it already does): the segments past the recovery point, and the directories
        holding names created since the last sync. The caller syncs ``files`` and then calls
        ``end_sync``."""
        target = self.log_end_offset
        if target <= self.recovery_point:
            return None
        last = self.topic.startswith("__")  # internal topics: synced after the rest of a round
        created = tuple(seg for seg in self.segments if not seg.entry_durable)
        parent = not self._entry_durable
        files: list[SyncFile] = []
        try:
            for seg in self.segments:
                if seg.exists and (seg.next_offset > self.recovery_point or seg is self.active_segment):
                    files.append(SyncFile(seg.dup_fd(), seg.log_path, last=last))
            if created:
                files.append(SyncFile(open_dir(self.dir), self.dir, directory=True, last=last))
            if parent:
                files.append(SyncFile(open_dir(self.dir.parent), self.dir.parent, directory=True, last=last))
        except OSError as e:
            for f in files:
                os.close(f.fd)
            if e.errno in OUT_OF_DESCRIPTORS:
                raise DescriptorsExhausted(f"syncing {self.topic}-{self.partition}: {e}") from e
            raise
        return SyncPlan(self, target, self._truncations, files, created, parent)

    def end_sync(self, plan: SyncPlan) -> None:
        """The round of ``plan`` is on disk: the recovery point moves to its target, unless the
        log was truncated meanwhile (offsets below the target may now be other, unsynced data), or
        its directory went offline (a failed fsync: the round's data may be lost, and only a start
        that recovers from what is on disk can tell)."""
        if self.log_dir.offline is not None:
            return
        for seg in plan.created:
            seg.entry_durable = True
        if plan.parent:
            self._entry_durable = True
        if plan.truncations == self._truncations:
            self.recovery_point = max(self.recovery_point, min(plan.target, self.log_end_offset))

    def maybe_flush_on_time(self, now: int) -> bool:
        if self.active_segment.unflushed_messages and now - self._last_flush_ms >= self.config.flush_ms:
            self.flush()
            return True
        return False

    # -- reading ----------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, upper_bound: int | None = None,
             min_one: bool = True) -> FetchInfo:
        """Batches from ``offset`` below ``upper_bound`` (default: the high watermark)."""
        records, _ = self.read_file_records(offset, max_bytes, upper_bound, min_one)
        try:
            data = b"" if records is None else records if isinstance(records, bytes) else records.read()
        except OSError as e:
            raise self.io_failed("reading", e) from e
        return FetchInfo(data, self.high_watermark, self.last_stable_offset, self.log_start_offset)

    def read_file_records(self, offset: int, max_bytes: int, upper_bound: int | None = None,
                          min_one: bool = True) -> tuple[FileRecords | bytes | None, int]:
        """Where the batches ``read`` would return lie: their slice of a segment file (None
        when there are none; their bytes when the descriptor cache could not pin another
        descriptor this turn) and the offset after the last of them. The slice must be sent or
        read before the event loop moves on (``FileRecords``)."""
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRange(
                f"offset {offset} is outside [{self.log_start_offset}, {self.log_end_offset}] "
                f"of {self.topic}-{self.partition}"
            )
        bound = self.high_watermark if upper_bound is None else upper_bound
        if offset < bound:
            # Only a segment with no batch at or after ``offset`` passes the read on: when
            # its first batch does not fit, the answer is empty, never a later batch.
            try:
                for seg in self._segments_from(offset):
                    found = seg.locate(offset, max_bytes, bound, min_one)
                    if found is not None:
                        start, end, next_offset = found
                        return (seg.file_records(start, end) if end > start else None), next_offset
            except OSError as e:
                raise self.io_failed("reading", e) from e
        return None, offset

    def batch_timestamp(self, offset: int) -> int | None:
        """The first timestamp of the batch holding ``offset`` (an open transaction's start,
        for the metrics), or None when no batch holds it."""
        for _, h in self._batch_headers_from(offset):
            return h.base_timestamp if h.base_offset <= offset else None
        return None

    def _batch_headers_from(self, offset: int) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of every batch whose last offset is >= ``offset``."""
        for seg in self._segments_from(offset):
            found = seg.find_position(offset)
            if found is None:
                continue
            yield from seg.iter_headers(found[0])

    def _segments_from(self, offset: int) -> list[LogSegment]:
        lo, hi = 0, len(self.segments) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.segments[mid].base_offset <= offset:
                lo = mid
            else:
                hi = mid - 1
        return self.segments[lo:]

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after the log start offset whose
        timestamp is >= ``timestamp``."""
        for seg in self._segments_from(self.log_start_offset):
            found = seg.find_offset_by_timestamp(timestamp, self.log_start_offset)
            if found is not None:
                return found
        return None

    def max_timestamp(self) -> tuple[int, int]:
        """(timestamp, offset) of the record with the largest timestamp (ListOffsets -3)."""
        best = (-1, -1)
        for seg in self.segments:
            if seg.max_timestamp > best[0]:
                best = (seg.max_timestamp, seg.offset_of_max_timestamp)
        return best

    # -- log start offset (DeleteRecords) ------------------------------------------

    @_storage_io("advancing the log start offset of")
    def advance_log_start_offset(self, offset: int) -> bool:
        """Kafka's UnifiedLog.maybeIncrementLogStartOffset: records below ``offset`` are no
        longer readable. Refused above the high watermark; a lower offset changes nothing.

        Kafka does not stop at the last stable offset: an open transaction may be cut into,
        and the LSO then stays at the new log start offset until the transaction ends.
        Whole segments below the offset go with ``delete_segments_below_log_start``, which
        the caller runs once the new offset is checkpointed (a crash in between must not
        bring the deleted records back)."""
        if offset > self.high_watermark:
            raise OffsetOutOfRange(
                f"Cannot increment the log start offset to {offset} of partition "
                f"{self.topic}-{self.partition} since it is larger than the high watermark "
                f"{self.high_watermark}"
            )
        if offset <= self.log_start_offset:
            return False
        self.log_start_offset = offset
        self.producer_state.on_log_start_offset(offset)
        self.epochs.truncate_from_start(offset)
        log.info("log start offset of %s-%d advanced to %d", self.topic, self.partition, offset)
        return True

    @_storage_io("deleting segments of")
    def delete_segments_below_log_start(self) -> int:
        """Delete the segments wholly below the log start offset (Kafka's
        deleteLogStartOffsetBreachedSegments: a segment goes once the next one starts at or
        below it, so the active segment always stays)."""
        deleted = 0
        while len(self.segments) > 1 and self.segments[1].base_offset <= self.log_start_offset:
            seg = self.segments.pop(0)
            self.retire_segment(seg)
            deleted += 1
            log.info("deleted segment %s of %s-%d: below the log start offset %d",
                     seg.log_path.name, self.topic, self.partition, self.log_start_offset)
        return deleted

    # -- retention ---------------------------------------------------------------

    @_storage_io("applying retention to")
    def delete_old_segments(self) -> int:
        """Apply retention.ms and retention.bytes; returns how many segments went.

        As Kafka's UnifiedLog.deleteOldSegments: whole segments from the oldest, while
        the oldest's newest record is older than retention.ms or the log would still
        hold at least retention.bytes without it. The active segment qualifies too (an
        empty one never does); it is rolled first so that a partition always has one.
        """
        deleted = self.delete_segments_below_log_start()  # whatever the cleanup.policy
        if not self.config.delete:
            return deleted
        now = self._clock_ms()
        retention_ms = self.config.retention_ms
        retention_bytes = self.config.retention_bytes
        total = self.size_bytes
        while self.segments[0].size > 0:
            seg = self.segments[0]
            expired = (
                retention_ms >= 0 and seg.max_timestamp >= 0
                and now - seg.max_timestamp > retention_ms
            )
            oversize = retention_bytes >= 0 and total - seg.size >= retention_bytes
            if not (expired or oversize):
                break
            if seg is self.active_segment:
                self.roll()
            self.segments.pop(0)
            total -= seg.size
            self.retire_segment(seg)
            deleted += 1
            self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
            log.info(
                "retention (%s) deleted segment %s of %s-%d; log start offset now %d",
                "retention.ms" if expired else "retention.bytes", seg.log_path.name,
                self.topic, self.partition, self.log_start_offset,
            )
        if deleted:
            self.producer_state.on_log_start_offset(self.log_start_offset)
            self.epochs.truncate_from_start(self.log_start_offset)
        return deleted

    # -- truncation (a follower diverged from its new leader) ------------------------

    @_storage_io("truncating")
    def truncate_to(self, offset: int) -> int:
        """Cut the log at ``offset`` (KIP-101: records a deposed leader wrote that the new
        leader never had): the batch holding ``offset`` and everything after go, with their
        index entries, producer state, aborted-transaction entries and leader epochs. Returns
        the new log end offset. Below the log start offset the log starts over at ``offset``."""
        if offset >= self.log_end_offset:
            return self.log_end_offset
        if offset <= self.log_start_offset:
            return self.truncate_fully_and_start_at(max(offset, 0))
        log.warning("truncating %s-%d from %d to %d", self.topic, self.partition, self.log_end_offset, offset)
        while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
            self.segments.pop().delete()
        seg = self.active_segment
        found = seg.find_position(offset)
        if found is not None:
            seg.truncate_to_position(found[0])
            seg.recover()  # offsets, timestamps and both indexes from what remains
        self._after_truncation()
        return self.log_end_offset

    @_storage_io("truncating")
    def truncate_fully_and_start_at(self, offset: int) -> int:
        """Drop the whole log and start it at ``offset`` (a follower far behind a leader
        whose log now starts later, Kafka's truncateFullyAndStartAt)."""
        log.warning("truncating all of %s-%d; it now starts at %d", self.topic, self.partition, offset)
        for seg in self.segments:
            seg.delete()
        self.segments = [self._new_segment(offset)]
        self.log_start_offset = offset
        self.epochs.clear()
        self._after_truncation()
        return offset

    def _after_truncation(self) -> None:
        self._truncations += 1
        end = self.log_end_offset
        self.epochs.truncate_from_end(end)
        self.high_watermark = min(self.high_watermark, end)
        self.recovery_point = min(self.recovery_point, end)
        self._load_producer_state()  # snapshots past the end are deleted; the rest replayed

    # -- lifecycle --------------------------------------------------------------

    @_storage_io("snapshotting the producer state of")
    def snapshot_producer_state(self) -> None:
        """At clean shutdown: a snapshot at the log end, so start-up replays nothing. None when the
        newest one is there already, or the log is empty (Kafka's takeSnapshot: only for a new
        offset), so that an idle partition costs no write at each shutdown."""
        state = self.producer_state
        newest = state.latest_snapshot if state.latest_snapshot is not None else self.log_start_offset
        if state.map_end_offset <= newest:
            return
        state.take_snapshot()
        state.delete_snapshots_except_latest(keep=3)

    def close(self) -> None:
        for seg in self.segments:
            seg.close()

    def delete(self) -> None:
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)

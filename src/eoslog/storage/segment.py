"""One log segment: ``<baseOffset:020d>.log`` with its ``.index`` and ``.timeindex``.

The segment owns its files and positions; it knows nothing of producers, topics or
the wire. Batches go in and come out as raw bytes. Reads use ``os.pread`` on the
file descriptor, so a fetch reads exactly the bytes it returns.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from eoslog.records.batch import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    BatchHeader,
    TimestampType,
    compute_crc,
    decode_records,
    read_batch_header,
)
from eoslog.records.file_records import FileRecords
from eoslog.storage.fd_cache import SEGMENT_FILES, FdCache
from eoslog.storage.fileio import fsync_file, reserve, timed_fsync
from eoslog.storage.index import CorruptIndexError, OffsetIndex, TimeIndex
from eoslog.storage.txn_index import TxnIndex

log = logging.getLogger(__name__)

_SCAN_CHUNK = 1 << 20
_IOV_MAX = 1024  # buffers per pwritev (Linux's IOV_MAX)
_HEADER_WINDOW = 8192  # bytes read at a time when walking batch headers


DELETED_SUFFIX = ".deleted"


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    valid_bytes: int
    truncated_bytes: int
    reason: str | None


class LogSegment:
    def __init__(
        self, directory: Path, base_offset: int, index_interval_bytes: int, created_ms: int,
        *, preallocate: int = 0, roll_jitter_ms: int = 0, new: bool = False, files: FdCache = SEGMENT_FILES,
    ) -> None:
        """``new``: a segment that does not exist yet (a new log's, a roll's); its files are
        created by its first write or ``create``. Otherwise the segment's log file must exist."""
        self.base_offset = base_offset
        # segment.jitter.ms: a random part of the roll age drawn once per segment, as Kafka's
        # rollJitterMs, so that partitions created together do not all roll at once.
        self.roll_jitter_ms = roll_jitter_ms
        self.log_path = directory / segment_file_name(base_offset, ".log")
        index_path = directory / segment_file_name(base_offset, ".index")
        time_index_path = directory / segment_file_name(base_offset, ".timeindex")
        self._files = files
        self._open_fd: int | None = None  # the descriptor while ``files`` holds it open
        self._preallocate = preallocate
        self._preallocated = False
        if new:
            self.exists = False
            self._indexes_existed = True
            self.size = 0
            index_exists = time_index_exists = False
        else:
            self.exists = True
            index_exists, time_index_exists = index_path.exists(), time_index_path.exists()
            # Remember whether both indexes were there (else they are rebuilt).
            self._indexes_existed = index_exists and time_index_exists
            self.size = os.stat(self.log_path).st_size
        # False once this object created its files: the directory is fsynced (by the log's next
        # flush or group-commit round) before a record in them counts as durable, since an fsync
        # of the file alone does not make its name durable.
        self.entry_durable = True
        self.index = OffsetIndex(index_path, base_offset, index_exists)
        self.time_index = TimeIndex(time_index_path, base_offset, time_index_exists)
        # Loaded (or rebuilt) by the partition log, which owns transaction state.
        self.txn_index = TxnIndex(directory / segment_file_name(base_offset, ".txnindex"))
        self.index_interval_bytes = index_interval_bytes
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        # Max timestamp of the first batch (Kafka's rollingBasedTimestamp): segment.ms is
        # measured from it, or from ``created_ms`` when the batch carries no timestamp.
        self.first_batch_timestamp: int | None = None
        self.created_ms = created_ms
        self._bytes_since_index = 0
        self.unflushed_messages = 0

    @property
    def _fd(self) -> int:
        """The log file's descriptor, from the process's descriptor cache (``fd_cache``)."""
        fd = self._open_fd
        if fd is None:
            return self._files.open(self, self._open)
        self._files.touch(self)
        return fd

    def _open(self) -> int:
        if self.exists:
            return os.open(self.log_path, os.O_RDWR)
        # The first write of a new segment creates its files: the log, and an empty txn index,
        # so that a missing one on a later start means damage, not "never had an abort".
        fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            self.txn_index.create_empty()
        except OSError:
            os.close(fd)
            raise
        self.exists = True
        self.entry_durable = False
        self._preallocated = self._preallocate > 0 and reserve(fd, self._preallocate)
        return fd

    def create(self) -> None:
        """Create the files of a new segment now rather than at its first write."""
        if not self.exists:
            self._files.open(self, self._open)

    # -- writing -----------------------------------------------------------

    def append(
        self, chunks: list[bytes | bytearray | memoryview], headers: list[tuple[int, BatchHeader]]
    ) -> int:
        """Append whole batches (offsets already assigned), given as buffers written with
        one ``pwritev``. Returns the position written at."""
        position = self.size
        size = sum(len(c) for c in chunks)
        written = 0
        for i in range(0, len(chunks), _IOV_MAX):
            written += os.pwritev(self._fd, chunks[i : i + _IOV_MAX], position + written)
        if written != size:  # pragma: no cover - disk full and friends
            raise OSError(f"short write to {self.log_path}: {written} of {size} bytes")
        for rel_pos, h in headers:
            self._track_batch(position + rel_pos, h)
            self.unflushed_messages += h.records_count
        self.size += size
        return position

    def time_waited_for_roll(self, now: int, incoming_max_timestamp: int) -> int:
        """How old the segment is for segment.ms, as Kafka's LogSegment.timeWaitedForRoll
        measures it: incoming batch timestamp minus the first batch's, or wall time since
        the segment was created when the first batch has no timestamp."""
        if self.first_batch_timestamp is not None and self.first_batch_timestamp >= 0:
            return incoming_max_timestamp - self.first_batch_timestamp
        return now - self.created_ms

    def _track_batch(self, position: int, h: BatchHeader) -> None:
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = h.max_timestamp
        if h.max_timestamp > self.max_timestamp:
            self.max_timestamp = h.max_timestamp
            self.offset_of_max_timestamp = h.last_offset
        if self._bytes_since_index >= self.index_interval_bytes:
            self.index.append(h.base_offset, position)
            self.time_index.append(self.max_timestamp, h.base_offset)
            self._bytes_since_index = 0
        self._bytes_since_index += h.size
        self.next_offset = h.next_offset

    def flush(self, fsync: bool = True, data: bool = True) -> None:
        """Write the indexes' pending entries; with ``fsync`` make the files durable (the log
        file's data only with ``data``: a group-commit round may have synced it already). A
        segment never written has no files and nothing to flush."""
        if not self.exists:
            return
        self.index.flush(fsync)
        self.time_index.flush(fsync)
        if fsync:
            self.txn_index.flush()
            if data:
                timed_fsync(self._fd, self.log_path)
        self.unflushed_messages = 0

    def dup_fd(self) -> int:
        """A descriptor of the log file that stays valid if the segment is closed (a
        group-commit round syncs through it off the event loop)."""
        return os.dup(self._fd)

    def trim(self) -> None:
        """Give back the disk ``preallocate`` reserved past the data (Kafka trims a segment
        when it stops being the active one, and at close)."""
        if self._preallocated:
            os.ftruncate(self._fd, self.size)
            self._preallocated = False

    def close(self) -> None:
        self.trim()
        self.index.close()
        self.time_index.close()
        self._files.close(self)

    def _paths(self) -> tuple[Path, ...]:
        return (self.log_path, self.index.path, self.time_index.path, self.txn_index.path)

    def delete(self) -> None:
        self.close()
        for p in self._paths():
            p.unlink(missing_ok=True)

    def retire(self) -> list[Path]:
        """Close and rename the files to ``<name>.deleted`` (Kafka's asynchronous delete:
        file.delete.delay.ms later they are removed; a start-up removes any left over).
        Returns the renamed files."""
        self.close()
        renamed = []
        for p in self._paths():
            if p.exists():
                target = p.with_name(p.name + DELETED_SUFFIX)
                os.replace(p, target)
                renamed.append(target)
        return renamed

    def truncate_to_position(self, position: int) -> None:
        """Cut the log at a batch boundary found by a scan; ``next_offset`` and the
        timestamps must already describe the batches before ``position``."""
        os.ftruncate(self._fd, position)
        self.size = position
        self.index.truncate_to_position(position)
        self.time_index.truncate_to_offset(self.next_offset)

    # -- reading -----------------------------------------------------------

    def pread(self, position: int, size: int) -> bytes:
        return os.pread(self._fd, size, position)

    def header_at(self, position: int) -> BatchHeader | None:
        if position + BATCH_HEADER_SIZE > self.size:
            return None
        return read_batch_header(self.pread(position, BATCH_HEADER_SIZE))

    def _walk(self, pos: int) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch from ``pos`` on, the headers read a window at a
        time: small batches cost one ``pread`` per window, not one each."""
        size = self.size
        window, start = b"", pos
        while pos + BATCH_HEADER_SIZE <= size:
            at = pos - start
            if at + BATCH_HEADER_SIZE > len(window):
                window, start, at = self.pread(pos, min(_HEADER_WINDOW, size - pos)), pos, 0
            h = read_batch_header(window, at)
            yield pos, h
            pos += h.size

    def find_position(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is >= ``offset``, with its position."""
        for pos, h in self._walk(self.index.lookup(offset)):
            if h.last_offset >= offset:
                return pos, h
        return None

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None,
             min_one: bool = True) -> bytes | None:
        """Whole batches from the one holding ``offset``, up to ``max_bytes`` (``locate``),
        read into memory."""
        found = self.locate(offset, max_bytes, max_offset, min_one)
        if found is None:
            return None
        start, end, _ = found
        return self.pread(start, end - start) if end > start else b""

    def file_records(self, start: int, end: int) -> FileRecords | bytes:
        """The bytes [start, end) of the log file, to be sent or read before the event loop
        moves on (``FileRecords``); read at once when the descriptor cache has pinned as many
        descriptors this turn as it may (``FdCache.pin``)."""
        fd = self._fd
        records = FileRecords(fd, start, end - start)
        return records if self._files.pin(fd) else records.read()

    def locate(self, offset: int, max_bytes: int, max_offset: int | None = None,
               min_one: bool = True) -> tuple[int, int, int] | None:
        """(start, end, next offset) of the whole batches from the one holding ``offset``, up
        to ``max_bytes``.

        With ``min_one`` the first batch is returned even if it alone exceeds
        max_bytes (KIP-74), so a consumer can always make progress.
        ``max_offset`` (exclusive) keeps batches at or past it out, e.g. the high watermark.
        None when this segment holds no batch at or after ``offset`` (the caller moves on to
        the next segment); start == end when the first batch does not fit.

        Only the batches near the two ends are looked at: the rest of the segment is passed
        over by the offset index (every entry is a batch boundary), so a fetch of many small
        batches reads a few windows of headers, not one header per batch.
        """
        found = self.find_position(offset)
        if found is None:
            return None
        start, first = found
        bound = max_offset if max_offset is not None else self.next_offset + 1
        if first.base_offset >= bound:
            return start, start, first.base_offset
        if first.size > max_bytes:
            return (start, start + first.size, first.next_offset) if min_one else (start, start, first.base_offset)
        if bound >= self.next_offset and self.size - start <= max_bytes:
            return start, self.size, self.next_offset  # the rest of the segment
        # Every batch before an index entry at or below the limit is in: start the walk there.
        limit = start + max_bytes
        index = self.index
        i = min(bisect_right(index.positions, limit), bisect_left(index.relative_offsets, bound - self.base_offset))
        end, next_offset = start, first.base_offset
        if i and index.positions[i - 1] > start:
            end, next_offset = int(index.positions[i - 1]), self.base_offset + int(index.relative_offsets[i - 1])
        for pos, h in self._walk(end):
            if h.base_offset >= bound or pos + h.size > limit:
                break
            end, next_offset = pos + h.size, h.next_offset
        return start, end, next_offset

    def iter_headers(self, start: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        return self._walk(start)

    def find_offset_by_timestamp(
        self, timestamp: int, start_offset: int = 0
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``start_offset`` with a
        timestamp >= ``timestamp``: the time index narrows the scan, batch headers skip
        whole batches, and only the batch holding the answer is decoded."""
        if self.max_timestamp < timestamp:
            return None
        found = self.find_position(max(self.time_index.lookup(timestamp), start_offset))
        if found is None:
            return None
        for pos, h in self.iter_headers(found[0]):
            if h.max_timestamp < timestamp or h.is_control or h.last_offset < start_offset:
                continue
            if h.timestamp_type is TimestampType.LOG_APPEND_TIME:
                # Every record of a LogAppendTime batch has the batch's maxTimestamp.
                return max(h.base_offset, start_offset), h.max_timestamp
            for rec in decode_records(self.pread(pos, h.size)):
                if rec.offset >= start_offset and rec.timestamp >= timestamp:
                    return rec.offset, rec.timestamp
        return None

    # -- recovery ----------------------------------------------------------

    def load(self, verify: bool) -> RecoveryResult:
        """Read the segment's state from disk.

        With ``verify`` (a segment past the recovery point after an unclean shutdown)
        every batch is CRC-checked, the valid prefix is kept, the rest is cut off, and
        both indexes are rebuilt. Without it the indexes are trusted after a sanity
        check and only the batches after the last index entry are walked (and
        CRC-checked); anything inconsistent (a damaged index, a torn or corrupt batch)
        falls back to the full recovery.
        """
        if not verify:
            try:
                return self._load_trusted()
            except CorruptIndexError as e:
                log.warning("%s: %s; re-validating the segment", self.log_path, e)
        return self.recover()

    def _load_trusted(self) -> RecoveryResult:
        if self.size and not self._indexes_existed:
            raise CorruptIndexError("index files missing")
        self.index.load(self.size)
        self.time_index.load(2**63 - 1)
        start = int(self.index.positions[-1]) if len(self.index.positions) else 0
        first = self.header_at(0)
        self.first_batch_timestamp = first.max_timestamp if first is not None else None
        if len(self.time_index.timestamps):
            self.max_timestamp = int(self.time_index.timestamps[-1])
            self.offset_of_max_timestamp = self.base_offset + int(
                self.time_index.relative_offsets[-1]
            )
        if start:
            h = self.header_at(start)
            expected = self.base_offset + int(self.index.relative_offsets[-1])
            if h is None or h.magic != MAGIC_V2 or h.base_offset != expected:
                raise CorruptIndexError(
                    f"{self.index.path}: last entry (offset {expected}, position {start}) "
                    "does not point at that batch"
                )
            self.next_offset = h.base_offset
        # The batches after the last index entry (at most index.interval.bytes and one
        # batch) are read anyway; checking their CRCs too costs little.
        result = self._scan(start, verify=True)
        if result.reason is not None:
            raise CorruptIndexError(result.reason)
        if len(self.time_index.relative_offsets) and (
            self.base_offset + int(self.time_index.relative_offsets[-1]) >= self.next_offset
        ):
            raise CorruptIndexError(f"{self.time_index.path}: entry past the log end")
        return result

    def read_from_disk(self) -> None:
        """Before a segment is re-validated after an unclean shutdown: write out what the page
        cache holds dirty (a crashed process's appends), then drop its cached pages, so that the
        scan reads the disk. After a failed write-back Linux keeps the pages it could not write,
        clean, in the cache: read from there they would pass for records on disk, and recovery
        would keep (and a later fsync would never write) what a power cut then takes."""
        fsync_file(self._fd, self.log_path)
        try:
            os.posix_fadvise(self._fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError as e:  # advice a file system may refuse: recovery then reads what the cache has
            log.warning("%s: the page cache could not be dropped before recovery: %s", self.log_path, e)

    def recover(self) -> RecoveryResult:
        """Re-validate every batch, rebuild both indexes, cut whatever follows the valid
        prefix (a torn write, garbage, a batch failing its CRC)."""
        self.next_offset = self.base_offset
        self.max_timestamp = self.offset_of_max_timestamp = -1
        self.first_batch_timestamp = None
        self.index.reset()
        self.time_index.reset()
        result = self._scan(0, verify=True)
        if result.reason is not None:
            log.warning(
                "truncating %s at position %d (next offset %d): %s; %d bytes removed",
                self.log_path, result.valid_bytes, self.next_offset, result.reason,
                result.truncated_bytes,
            )
            self.truncate_to_position(result.valid_bytes)
        self.index.flush()
        self.time_index.flush()
        return result

    def _scan(self, start: int, verify: bool) -> RecoveryResult:
        """Walk the batches from ``start``, tracking offsets, timestamps and index entries.

        Stops at the first batch that is torn, malformed, out of offset order, or (with
        ``verify``) fails its CRC; the result says where and why.
        """
        pos = start
        self._bytes_since_index = 0
        reason: str | None = None
        while pos < self.size:
            if self.size - pos < BATCH_HEADER_SIZE:
                reason = f"{self.size - pos} trailing bytes, too short for a batch header"
                break
            h = read_batch_header(self.pread(pos, BATCH_HEADER_SIZE))
            if h.magic != MAGIC_V2 or h.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
                reason = (
                    f"invalid batch header at position {pos} "
                    f"(magic {h.magic}, length {h.batch_length})"
                )
                break
            if pos + h.size > self.size:
                reason = (
                    f"batch at position {pos} claims {h.size} bytes, "
                    f"only {self.size - pos} remain"
                )
                break
            # (No recordsCount check: a compacted batch keeps its lastOffsetDelta with
            # fewer records, as in Kafka.)
            if h.base_offset < self.next_offset or h.last_offset_delta < 0:
                reason = (
                    f"batch at position {pos} has offsets {h.base_offset}..{h.last_offset}, "
                    f"expected to start at or after {self.next_offset}"
                )
                break
            if verify and compute_crc(self.pread(pos, h.size), 0, h.size) != h.crc:
                reason = f"batch at position {pos} (offset {h.base_offset}) fails its CRC"
                break
            if pos == start and start > 0:
                # Already indexed: account for it without adding a duplicate entry.
                self._bytes_since_index = h.size
                self.next_offset = h.next_offset
                if h.max_timestamp > self.max_timestamp:
                    self.max_timestamp = h.max_timestamp
                    self.offset_of_max_timestamp = h.last_offset
            else:
                self._track_batch(pos, h)
            pos += h.size
        return RecoveryResult(pos, self.size - pos, reason)


def parse_segment_base(path: Path) -> int | None:
    try:
        return int(path.stem)
    except ValueError:
        return None


"""One log segment: ``<baseOffset:020d>.log`` with its ``.index`` and ``.timeindex``.

The segment owns its files and positions; it knows nothing of producers, topics or
the wire. Batches go in and come out as raw bytes. Reads use ``os.pread`` on the
file descriptor, so a fetch reads exactly the bytes it returns.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from eoslog.records.batch import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    compute_crc,
    decode_records,
    read_batch_header,
)
from eoslog.storage.index import CorruptIndexError, OffsetIndex, TimeIndex

log = logging.getLogger(__name__)

_SCAN_CHUNK = 1 << 20


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    valid_bytes: int
    truncated_bytes: int
    reason: str | None


class LogSegment:
    def __init__(
        self, directory: Path, base_offset: int, index_interval_bytes: int, created_ms: int
    ) -> None:
        self.base_offset = base_offset
        self.log_path = directory / segment_file_name(base_offset, ".log")
        self.index = OffsetIndex(directory / segment_file_name(base_offset, ".index"), base_offset)
        self.time_index = TimeIndex(
            directory / segment_file_name(base_offset, ".timeindex"), base_offset
        )
        self.index_interval_bytes = index_interval_bytes
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(self._fd).st_size
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        # Time the first batch arrived (Kafka rolls on the first batch's timestamp).
        self.rolling_base_ms: int | None = None
        self.created_ms = created_ms
        self._bytes_since_index = 0
        self.unflushed_messages = 0

    # -- writing -----------------------------------------------------------

    def append(self, data: bytes | bytearray, headers: list[tuple[int, BatchHeader]]) -> int:
        """Append whole batches (offsets already assigned). Returns the position written at."""
        position = self.size
        written = os.pwrite(self._fd, data, position)
        if written != len(data):  # pragma: no cover - disk full and friends
            raise OSError(f"short write to {self.log_path}: {written} of {len(data)} bytes")
        for rel_pos, h in headers:
            self._track_batch(position + rel_pos, h)
            self.unflushed_messages += h.records_count
        self.size += len(data)
        return position

    def _track_batch(self, position: int, h: BatchHeader) -> None:
        if self.rolling_base_ms is None:
            self.rolling_base_ms = h.max_timestamp if h.max_timestamp >= 0 else self.created_ms
        if h.max_timestamp > self.max_timestamp:
            self.max_timestamp = h.max_timestamp
            self.offset_of_max_timestamp = h.last_offset
        if self._bytes_since_index >= self.index_interval_bytes:
            self.index.append(h.base_offset, position)
            self.time_index.append(self.max_timestamp, h.base_offset)
            self._bytes_since_index = 0
        self._bytes_since_index += h.size
        self.next_offset = h.next_offset

    def flush(self, fsync: bool = True) -> None:
        self.index.flush(fsync)
        self.time_index.flush(fsync)
        if fsync:
            os.fsync(self._fd)
        self.unflushed_messages = 0

    def close(self) -> None:
        self.index.close()
        self.time_index.close()
        os.close(self._fd)

    def delete(self) -> None:
        self.close()
        for p in (self.log_path, self.index.path, self.time_index.path):
            p.unlink(missing_ok=True)

    def truncate_to_position(self, position: int) -> None:
        os.ftruncate(self._fd, position)
        self.size = position
        self.index.truncate_to_position(position)

    # -- reading -----------------------------------------------------------

    def pread(self, position: int, size: int) -> bytes:
        return os.pread(self._fd, size, position)

    def header_at(self, position: int) -> BatchHeader | None:
        if position + BATCH_HEADER_SIZE > self.size:
            return None
        return read_batch_header(self.pread(position, BATCH_HEADER_SIZE))

    def find_position(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is >= ``offset``, with its position."""
        pos = self.index.lookup(offset)
        while pos < self.size:
            h = self.header_at(pos)
            if h is None:
                return None
            if h.last_offset >= offset:
                return pos, h
            pos += h.size
        return None

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None,
             min_one: bool = True) -> bytes:
        """Whole batches from the one holding ``offset``, up to ``max_bytes``.

        With ``min_one`` the first batch is returned even if it alone exceeds
        max_bytes (KIP-74), so a consumer can always make progress.
        ``max_offset`` (exclusive) keeps batches at or past it out, e.g. the high watermark.
        """
        found = self.find_position(offset)
        if found is None:
            return b""
        start, h = found
        end = start
        # Walk headers to find how many whole batches fit; read them in one pread.
        while h is not None:
            if max_offset is not None and h.base_offset >= max_offset:
                break
            if end - start + h.size > max_bytes and not (min_one and end == start):
                break
            end += h.size
            h = self.header_at(end)
        return self.pread(start, end - start) if end > start else b""

    def iter_headers(self, start: int = 0) -> list[tuple[int, BatchHeader]]:
        out = []
        pos = start
        while (h := self.header_at(pos)) is not None:
            out.append((pos, h))
            pos += h.size
        return out

    def find_offset_by_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp``."""
        if self.max_timestamp < timestamp:
            return None
        start_offset = self.time_index.lookup(timestamp)
        found = self.find_position(start_offset)
        if found is None:
            return None
        pos, h = found
        while h is not None:
            if h.max_timestamp >= timestamp and not h.is_control:
                for rec in decode_records(self.pread(pos, h.size)):
                    if rec.timestamp >= timestamp:
                        return rec.offset, rec.timestamp
                # LogAppendTime batches carry the time in maxTimestamp only.
                return h.base_offset, h.max_timestamp
            pos += h.size
            h = self.header_at(pos)
        return None

    # -- recovery ----------------------------------------------------------

    def load(self, verify: bool) -> RecoveryResult:
        """Read the segment's state from disk.

        With ``verify`` (after an unclean shutdown) every batch is CRC-checked, the valid
        prefix is kept, the rest is cut off, and both indexes are rebuilt. Without it
        (clean shutdown) the indexes are loaded and checked for sanity and only the
        batches after the last index entry are walked; a bad index is rebuilt.
        """
        if not verify:
            try:
                self.index.load(self.size)
                start = int(self.index.positions[-1]) if len(self.index.positions) else 0
                first = self.header_at(0)
                if first is not None:
                    self.rolling_base_ms = (
                        first.max_timestamp if first.max_timestamp >= 0 else self.created_ms
                    )
                self.time_index.load(2**63 - 1)
                if len(self.time_index.timestamps):
                    self.max_timestamp = int(self.time_index.timestamps[-1])
                    self.offset_of_max_timestamp = self.base_offset + int(
                        self.time_index.relative_offsets[-1]
                    )
                if start:
                    h = self.header_at(start)
                    if h is None:
                        raise CorruptIndexError(f"{self.index.path}: last entry past the log")
                    self.next_offset = h.base_offset
                result = self._scan(start, verify=False)
                if result.reason is not None:
                    raise CorruptIndexError(f"{self.log_path}: {result.reason}")
                if len(self.time_index.relative_offsets) and (
                    self.base_offset + int(self.time_index.relative_offsets[-1]) >= self.next_offset
                ):
                    raise CorruptIndexError(f"{self.time_index.path}: entry past the log end")
                return result
            except CorruptIndexError as e:
                log.warning("rebuilding indexes of %s: %s", self.log_path, e)
                self.next_offset = self.base_offset
                self.max_timestamp = self.offset_of_max_timestamp = -1
        self.index.reset()
        self.time_index.reset()
        result = self._scan(0, verify=verify)
        if result.reason is not None:
            if not verify:
                raise CorruptIndexError(f"{self.log_path}: {result.reason}")
            log.warning(
                "truncating %s at position %d: %s; %d bytes removed",
                self.log_path, result.valid_bytes, result.reason, result.truncated_bytes,
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
        self._bytes_since_index = 0 if start else self._bytes_since_index
        reason: str | None = None
        while pos < self.size:
            if self.size - pos < BATCH_HEADER_SIZE:
                reason = f"{self.size - pos} trailing bytes, too short for a batch header"
                break
            h = read_batch_header(self.pread(pos, BATCH_HEADER_SIZE))
            if h.magic != 2 or h.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
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
            if h.base_offset < self.next_offset or h.records_count != h.last_offset_delta + 1:
                reason = (
                    f"batch at position {pos} has base offset {h.base_offset} "
                    f"(expected >= {self.next_offset}) or a bad record count"
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


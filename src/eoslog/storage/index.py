"""Sparse offset and time indexes of one segment.

Both are append-only files of fixed-size big-endian entries, mirrored in memory as
``array`` columns so a lookup is a bisect and no per-entry Python objects exist:

- offset index (``.index``): (relative offset int32, file position int32), one entry
  every ``index.interval.bytes`` of log;
- time index (``.timeindex``): (timestamp int64, relative offset int32), written with
  the offset index entry whenever the segment's max timestamp grew.

Indexes are never trusted after an unclean shutdown: the segment rebuilds them while
it re-validates its batches. ``load`` rejects a damaged file (wrong size, entries not
increasing, entries pointing past the log), which also triggers a rebuild.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_right
from pathlib import Path

from eoslog.storage.fileio import fsync_file

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class CorruptIndexError(Exception):
    pass


class _IndexFile:
    """The file behind an in-memory index: appended entries wait in ``_pending`` and are
    written by ``flush``, which opens the file only for that (no descriptor is held between
    flushes: a partition costs one descriptor, its log's, and only while it is used)."""

    entry: struct.Struct

    def __init__(self, path: Path, exists: bool = True) -> None:
        """``exists``: False for a new segment's index, created by its first flush."""
        self.path = path
        self._pending = bytearray()
        self._exists = exists
        self._unsynced = False  # written since its last fsync

    def _write(self, data: bytes) -> None:
        self._pending += data

    def flush(self, fsync: bool = False) -> None:
        """Write the pending entries (creating the file); with ``fsync`` make the file durable."""
        if not (self._pending or not self._exists or (fsync and self._unsynced)):
            return
        with open(self.path, "ab") as fh:
            if self._pending:
                fh.write(self._pending)
                self._pending.clear()
            fh.flush()
            if fsync:
                fsync_file(fh.fileno(), self.path)
        self._exists = True
        self._unsynced = not fsync

    def close(self) -> None:
        if self._pending:
            self.flush()

    def rewrite(self, data: bytes) -> None:
        """Replace the file's contents (after truncation or a rebuild)."""
        self._pending.clear()
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, self.path)
        self._exists = self._unsynced = True

    def read_entries(self) -> bytes:
        self.flush()
        data = self.path.read_bytes()
        if len(data) % self.entry.size:
            raise CorruptIndexError(f"{self.path}: size {len(data)} is not a multiple of {self.entry.size}")
        return data


class OffsetIndex(_IndexFile):
    entry = _OFFSET_ENTRY

    def __init__(self, path: Path, base_offset: int, exists: bool = True) -> None:
        super().__init__(path, exists)
        self.base_offset = base_offset
        self.relative_offsets = array("q")
        self.positions = array("q")

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        self.relative_offsets.append(rel)
        self.positions.append(position)
        self._write(_OFFSET_ENTRY.pack(rel, position))

    def lookup(self, offset: int) -> int:
        """Position of the last indexed batch starting at or before ``offset`` (0 if none)."""
        i = bisect_right(self.relative_offsets, offset - self.base_offset)
        return int(self.positions[i - 1]) if i else 0

    def load(self, log_size: int) -> None:
        data = self.read_entries()
        rels, poss = array("q"), array("q")
        prev_rel, prev_pos = -1, -1
        for rel, pos in _OFFSET_ENTRY.iter_unpack(data):
            if rel <= prev_rel or pos <= prev_pos or pos >= log_size or rel < 0:
                raise CorruptIndexError(f"{self.path}: entry ({rel}, {pos}) out of order or past the log")
            rels.append(rel)
            poss.append(pos)
            prev_rel, prev_pos = rel, pos
        self.relative_offsets, self.positions = rels, poss

    def truncate_to_position(self, position: int) -> None:
        """Drop entries at or past ``position`` in the log."""
        i = bisect_right(self.positions, position - 1)
        del self.relative_offsets[i:]
        del self.positions[i:]
        self.rewrite(b"".join(
            _OFFSET_ENTRY.pack(r, p)
            for r, p in zip(self.relative_offsets, self.positions, strict=True)
        ))

    def reset(self) -> None:
        self.relative_offsets, self.positions = array("q"), array("q")
        self.rewrite(b"")


class TimeIndex(_IndexFile):
    entry = _TIME_ENTRY

    def __init__(self, path: Path, base_offset: int, exists: bool = True) -> None:
        super().__init__(path, exists)
        self.base_offset = base_offset
        self.timestamps = array("q")
        self.relative_offsets = array("q")

    def append(self, timestamp: int, offset: int) -> None:
        if self.timestamps and timestamp <= self.timestamps[-1]:
            return
        rel = offset - self.base_offset
        self.timestamps.append(timestamp)
        self.relative_offsets.append(rel)
        self._write(_TIME_ENTRY.pack(timestamp, rel))

    def lookup(self, timestamp: int) -> int:
        """An offset whose batch starts at or before the first record with ts >= ``timestamp``."""
        i = bisect_right(self.timestamps, timestamp - 1)
        # Entries before i all have ts < timestamp: the answer lies after entry i-1's offset.
        return self.base_offset + (int(self.relative_offsets[i - 1]) if i else 0)

    def load(self, next_offset: int) -> None:
        data = self.read_entries()
        tss, rels = array("q"), array("q")
        prev_ts, prev_rel = -(2**63), -1
        for ts, rel in _TIME_ENTRY.iter_unpack(data):
            if ts <= prev_ts or rel < prev_rel or self.base_offset + rel >= next_offset:
                raise CorruptIndexError(f"{self.path}: entry ({ts}, {rel}) out of order or past the log")
            tss.append(ts)
            rels.append(rel)
            prev_ts, prev_rel = ts, rel
        self.timestamps, self.relative_offsets = tss, rels

    def truncate_to_offset(self, next_offset: int) -> None:
        keep = bisect_right(self.relative_offsets, next_offset - 1 - self.base_offset)
        del self.timestamps[keep:]
        del self.relative_offsets[keep:]
        self.rewrite(b"".join(
            _TIME_ENTRY.pack(t, r)
            for t, r in zip(self.timestamps, self.relative_offsets, strict=True)
        ))

    def reset(self) -> None:
        self.timestamps, self.relative_offsets = array("q"), array("q")
        self.rewrite(b"")

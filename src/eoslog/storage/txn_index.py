"""The aborted-transaction index of one segment (``<baseOffset>.txnindex``).

Kafka's format: fixed 34-byte entries (version int16 = 0, producerId int64, firstOffset
int64, lastOffset int64, lastStableOffset int64), one per transaction whose ABORT marker
is in this segment. ``lastOffset`` is the marker's offset; ``firstOffset`` the
transaction's first offset in the partition (possibly in an earlier segment). A
read_committed fetch collects the entries overlapping its range, and the consumer drops
those producers' records from ``firstOffset`` until it sees their ABORT marker.

The index is derived data: the partition log rebuilds it by replaying its batches
whenever it cannot trust it (a damaged file, or segments recovered after a crash).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

from eoslog.storage.fileio import fsync_file

_ENTRY = struct.Struct(">hqqqq")
VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class CorruptTxnIndexError(Exception):
    pass


class TxnIndex:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []
        self._unsynced = False  # written since its last fsync

    def load(self) -> None:
        """Read the file; raises CorruptTxnIndexError when it cannot be trusted."""
        if not self.path.exists():
            raise CorruptTxnIndexError(f"{self.path} is missing")
        data = self.path.read_bytes()
        if len(data) % _ENTRY.size:
            raise CorruptTxnIndexError(f"{self.path}: size {len(data)} is not a multiple of {_ENTRY.size}")
        entries = []
        for version, pid, first, last, lso in _ENTRY.iter_unpack(data):
            if version != VERSION or first > last or pid < 0:
                raise CorruptTxnIndexError(f"{self.path}: invalid entry ({version}, {pid}, {first}, {last})")
            entries.append(AbortedTxn(pid, first, last, lso))
        self.entries = entries

    def create_empty(self) -> None:
        self.entries = []
        self._rewrite()

    def append(self, txn: AbortedTxn) -> None:
        self.entries.append(txn)
        with open(self.path, "ab") as fh:
            fh.write(_ENTRY.pack(VERSION, *txn))
        self._unsynced = True

    def truncate_from(self, offset: int) -> None:
        """Drop the entries whose ABORT marker is at or after ``offset``."""
        kept = [e for e in self.entries if e.last_offset < offset]
        if len(kept) != len(self.entries):
            self.entries = kept
            self._rewrite()

    def overlapping(self, start: int, end: int) -> list[AbortedTxn]:
        """Entries of transactions that may hold records in [start, end)."""
        return [e for e in self.entries if e.last_offset >= start and e.first_offset < end]

    def mark_unsynced(self) -> None:
        """Loaded after an unclean shutdown: its last writes may never have been fsynced."""
        self._unsynced = True

    def flush(self) -> None:
        """fsync what was written since the last flush (nothing to do otherwise)."""
        if not self._unsynced:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            self._unsynced = False
            return
        try:
            fsync_file(fd, self.path)
        finally:
            os.close(fd)
        self._unsynced = False

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)

    def _rewrite(self) -> None:
        if not self.entries:
            # Empty: created in place (a new segment's, the common case), no temporary file.
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
        else:
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_bytes(b"".join(_ENTRY.pack(VERSION, *e) for e in self.entries))
            os.replace(tmp, self.path)
        self._unsynced = True

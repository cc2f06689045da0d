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

    def truncate_from(self, offset: int) -> None:
        """Drop the entries whose ABORT marker is at or after ``offset``."""
        kept = [e for e in self.entries if e.last_offset < offset]
        if len(kept) != len(self.entries):
            self.entries = kept
            self._rewrite()

    def overlapping(self, start: int, end: int) -> list[AbortedTxn]:
        """Entries of transactions that may hold records in [start, end)."""
        return [e for e in self.entries if e.last_offset >= start and e.first_offset < end]

    def flush(self) -> None:
        if self.path.exists():
            fd = os.open(self.path, os.O_RDONLY)
            try:
                fsync_file(fd, self.path)
            finally:
                os.close(fd)

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)

    def _rewrite(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(b"".join(_ENTRY.pack(VERSION, *e) for e in self.entries))
        os.replace(tmp, self.path)

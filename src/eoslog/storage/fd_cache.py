"""The open descriptors of segment files: at most ``capacity`` at once, the least recently used
closed first (issue 28).

Kafka keeps one descriptor per segment open for good and maps its indexes; with one descriptor
per segment and its two index files open for good, eoslog ran out of descriptors (EMFILE) at
about 6,600 partitions under a limit of 20,000. Index files are now opened only to be written
(``index.py``), and a segment's log file is opened when it is first read or written and stays in
this cache while it is used: cold partitions hold no descriptor, and however many partitions
there are, segment files never hold more than ``capacity`` descriptors — the rest of the
process's limit stays free for sockets. A segment ``touch``es its descriptor at each use; a closed
one is opened again (``open``), so an evicted segment costs one ``open`` on its next use.

A fetch answer refers to the descriptors of the segment slices it sends (``FileRecords``) until
the loop moves on, so a segment opened by a later partition of the same answer must not close an
earlier one's: such descriptors are ``pin``ned for the turn, and an evicted pinned descriptor is
closed on the loop's next turn, any other at once. At most half the capacity is pinned in one
turn; past that a slice is read into memory at once (``LogSegment.file_records``). So the
descriptors open never exceed 1.5 times the capacity, whatever one answer spans (before, an
answer over 300 partitions under a limit of 256 held every one of their descriptors, hit EMFILE
and took the log directory offline).
Group commit syncs through duplicated descriptors (``LogSegment.dup_fd``), which eviction never
touches. Process-wide, as the descriptor limit is (one broker per process).
"""

from __future__ import annotations

import asyncio
import os
import resource
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

# Descriptors left for everything else (sockets, index writes, snapshots, the metrics listener)
# when the capacity is derived from the process's limit.
_SHARE_OF_LIMIT = 0.5
_MIN_CAPACITY = 16


class _Owner(Protocol):
    """A segment as the cache sees it: where its descriptor is kept."""

    _open_fd: int | None


def default_capacity() -> int:
    """Half of the process's soft RLIMIT_NOFILE (the rest for sockets and short-lived files)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1 << 16
    return max(_MIN_CAPACITY, int(soft * _SHARE_OF_LIMIT))


class FdCache:
    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = default_capacity() if capacity is None else max(1, capacity)
        self._open: OrderedDict[int, _Owner] = OrderedDict()  # id(owner) → owner, least recent first
        # Descriptors a slice refers to until the loop's next turn (``pin``).
        self._pinned: set[int] = set()
        self._pin_limit = max(1, self.capacity // 2)
        self.opened = 0  # descriptors opened (a first use or a use after eviction)
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._open)

    def touch(self, owner: _Owner) -> None:
        """``owner``'s open descriptor was just used: it is the last to be closed."""
        self._open.move_to_end(id(owner))

    def open(self, owner: _Owner, open_file: Callable[[], int]) -> int:
        """Open ``owner``'s file with ``open_file`` (it has no descriptor): the least recently
        used descriptors beyond the capacity are closed."""
        fd = open_file()
        owner._open_fd = fd
        self._open[id(owner)] = owner
        self.opened += 1
        while len(self._open) > self.capacity:
            _, victim = self._open.popitem(last=False)
            closing, victim._open_fd = victim._open_fd, None
            if closing is not None:
                self.evicted += 1
                if closing in self._pinned:
                    _close_later(closing)
                else:
                    os.close(closing)
        return fd

    def pin(self, fd: int) -> bool:
        """Keep ``fd`` (an open descriptor of the cache) open until the event loop's next turn,
        for a slice that refers to it; False when half the capacity is pinned already this turn
        (the caller reads the bytes now). Without a running loop nothing needs pinning: an
        evicted descriptor is then closed at once either way, and slices are read at once."""
        if fd in self._pinned:
            return True
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return True
        if len(self._pinned) >= self._pin_limit:
            return False
        if not self._pinned:
            loop.call_soon(self._pinned.clear)
        self._pinned.add(fd)
        return True

    def close(self, owner: _Owner) -> None:
        """``owner`` is closed for good (its segment closed, deleted or retired)."""
        fd = owner._open_fd
        if fd is None:
            return
        owner._open_fd = None
        self._open.pop(id(owner), None)
        _close_later(fd)


def _close_later(fd: int) -> None:
    """Close ``fd`` once the event loop has finished what it is doing (at once without a loop)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        os.close(fd)
        return
    loop.call_soon(os.close, fd)


# The process's cache: one broker per process, and the descriptor limit is the process's.
SEGMENT_FILES = FdCache()

"""Crash-safe replacement of small metadata files (checkpoints, snapshots, topic metadata).

Write a temporary file, fsync it, rename it over the target, fsync the directory: after
a crash the file holds either the old or the new contents, never a mix. Also the fsyncs of
segments and group-commit rounds, each timed in ``eoslog.stats.LOG_FLUSH``.
"""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path
from typing import Any

from eoslog.stats import LOG_FLUSH


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def timed_fsync(fd: int) -> None:
    """``os.fsync(fd)`` of a segment, counted and timed in ``LOG_FLUSH``."""
    start = time.perf_counter()
    os.fsync(fd)
    LOG_FLUSH.observe(time.perf_counter() - start)


def sync_files(fds: list[int]) -> None:
    """fdatasync each descriptor, then close it (a group-commit round, run off the event
    loop on duplicated descriptors, so a segment closed meanwhile cannot hand its number to
    another file). Every descriptor is closed even when one fails."""
    try:
        for fd in fds:
            start = time.perf_counter()
            os.fdatasync(fd)
            LOG_FLUSH.observe(time.perf_counter() - start)  # LogFlushRateAndTimeMs, as Kafka's flushes
    finally:
        for fd in fds:
            os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


_FALLOC_FL_KEEP_SIZE = 1


def reserve(fd: int, length: int) -> bool:
    """Reserve ``length`` bytes of disk for the file (Linux fallocate with FALLOC_FL_KEEP_SIZE:
    blocks allocated, the file's size unchanged, so a reader or a recovery never sees
    preallocated zeros). False where the file system cannot (the reservation is an
    optimisation: nothing depends on it)."""
    libc = _libc()
    if libc is None or length <= 0:
        return False
    return int(libc.fallocate(fd, _FALLOC_FL_KEEP_SIZE, 0, length)) == 0


_LIBC: list[Any] = []


def _libc() -> Any:
    if not _LIBC:
        try:
            lib = ctypes.CDLL(None, use_errno=True)
            lib.fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
            lib.fallocate.restype = ctypes.c_int
            _LIBC.append(lib)
        except (OSError, AttributeError):
            _LIBC.append(None)
    return _LIBC[0]

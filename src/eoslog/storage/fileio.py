"""Crash-safe replacement of small metadata files (checkpoints, snapshots, topic metadata).

Write a temporary file, fsync it, rename it over the target, fsync the directory: after
a crash the file holds either the old or the new contents, never a mix. Also the fsyncs of
segments and group-commit rounds, each timed in ``eoslog.stats.LOG_FLUSH``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

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

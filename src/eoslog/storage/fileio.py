"""Every fsync of storage, and crash-safe replacement of small metadata files (checkpoints,
snapshots, topic metadata).

Write a temporary file, fsync it, rename it over the target, fsync the directory: after
a crash the file holds either the old or the new contents, never a mix. Also the fsyncs of
segments and group-commit rounds, each timed in ``eoslog.stats.LOG_FLUSH``.

A failed fsync is never retried here or by a caller: it takes the file's log directory
offline (``log_dir_failure``), whoever catches the error afterwards, because Linux drops the
dirty pages of a failed write-back and a second fsync would succeed without writing them.
No module of storage calls ``os.fsync``/``os.fdatasync`` but this one (a unit test holds it).
"""

from __future__ import annotations

import ctypes
import errno
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

from eoslog.stats import LOG_FLUSH
from eoslog.storage.log_dir_failure import LOG_DIR_FAILURES


class DescriptorsExhausted(Exception):
    """The process is out of file descriptors (EMFILE, ENFILE) while taking one for a sync:
    nothing was written or synced, the disk is sound, so no log directory goes offline; the
    caller tries again once descriptors are free (clients' sockets can use them all up)."""


OUT_OF_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE})


def _failed(kind: str, path: Path | str, error: OSError) -> None:
    LOG_DIR_FAILURES.maybe_add_offline_log_dir(path, f"{kind} of {path} failed", error)


def fsync_file(fd: int, path: Path) -> None:
    """``os.fsync(fd)`` of ``path`` (an index, a transaction index, a cleaned segment)."""
    try:
        os.fsync(fd)
    except OSError as e:
        _failed("fsync", path, e)
        raise


def open_dir(directory: Path) -> int:
    """A descriptor of ``directory``, for fsyncing its entries."""
    return os.open(directory, os.O_RDONLY | os.O_DIRECTORY)


def fsync_dir(directory: Path) -> None:
    fd = open_dir(directory)
    try:
        os.fsync(fd)
    except OSError as e:
        _failed("fsync", directory, e)
        raise
    finally:
        os.close(fd)


def timed_fsync(fd: int, path: Path) -> None:
    """``os.fsync(fd)`` of a segment, counted and timed in ``LOG_FLUSH``."""
    start = time.perf_counter()
    fsync_file(fd, path)
    LOG_FLUSH.observe(time.perf_counter() - start)


class SyncFile(NamedTuple):
    """A descriptor a group-commit round syncs (and closes): a segment's log file (fdatasync) or
    a directory whose new entries must be durable (fsync). ``last``: an internal topic's, synced
    after the others of the round."""

    fd: int
    path: Path
    directory: bool = False
    last: bool = False


# fsyncs of different files in flight at once: the file system's journal commits them together,
# so 400 fdatasyncs take ~50 ms from 4 threads where one after the other they took ~1 s here.
_SYNC_THREADS = 8
_SYNC_POOL: list[ThreadPoolExecutor] = []


def sync_files(files: list[SyncFile]) -> list[tuple[Path, OSError]]:
    """fdatasync each file and fsync each directory (one descriptor per directory: duplicates
    are closed unsynced), then close every descriptor — a group-commit round, run off the event
    loop on descriptors of its own, so a segment closed meanwhile cannot hand its number to
    another file. Several at once (``_SYNC_THREADS``); the ``last`` ones only once the others are
    done. Returns the files whose sync failed, with the error, for the caller to report on the
    event loop (``report_failed_syncs``); every descriptor is closed."""
    failed: list[tuple[Path, OSError]] = []
    try:
        seen: set[Path] = set()
        first: list[SyncFile] = []
        last: list[SyncFile] = []
        for f in files:
            if f.directory:
                if f.path in seen:
                    continue
                seen.add(f.path)
            (last if f.last else first).append(f)
        for batch in (first, last):
            if len(batch) == 1:
                failed += _sync_one(batch[0])
            elif batch:
                for result in _pool().map(_sync_one, batch):
                    failed += result
    finally:
        for f in files:
            os.close(f.fd)
    return failed


def _sync_one(f: SyncFile) -> list[tuple[Path, OSError]]:
    start = time.perf_counter()
    try:
        if f.directory:
            os.fsync(f.fd)
        else:
            os.fdatasync(f.fd)
    except OSError as e:
        return [(f.path, e)]
    if not f.directory:
        LOG_FLUSH.observe(time.perf_counter() - start)  # LogFlushRateAndTimeMs, as Kafka's flushes
    return []


def _pool() -> ThreadPoolExecutor:
    if not _SYNC_POOL:
        _SYNC_POOL.append(ThreadPoolExecutor(_SYNC_THREADS, thread_name_prefix="eoslog-fsync"))
    return _SYNC_POOL[0]


def report_failed_syncs(failed: list[tuple[Path, OSError]]) -> None:
    """``sync_files``' failures: their log directories go offline."""
    for path, error in failed:
        _failed("fdatasync", path, error)


def atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        fsync_file(fh.fileno(), tmp)
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

"""Log directories that failed, and what stops when one does (Kafka's LogDirFailureChannel, KIP-112).

After a failed fsync nothing written to that file since its last successful one may ever be
acknowledged: Linux marks the pages of a failed write-back clean, so a retried fsync succeeds
without writing them, and a power cut then leaves a hole where acknowledged records were
(PostgreSQL's "fsyncgate"). As Kafka does for any I/O error in a log directory, the whole
directory goes offline at the first failure and stays offline until the broker restarts: its
logs refuse every append, flush, fsync round and read (``KafkaStorageError``,
KAFKA_STORAGE_ERROR on the wire), no recovery point or high watermark of theirs moves again,
and the log manager's handler runs (``LogManager``: the replica layer answers what waits on
those partitions; with no log directory left the broker halts, so that the next start
recovers from what is on disk).

Who reports: ``fileio`` every failed fsync of a file in a watched directory (segments, indexes,
checkpoints, snapshots, metadata files, directories), and ``PartitionLog`` any ``OSError`` of
its own I/O. Reports come from the event loop's thread (group commit's worker thread hands its
failures back first); the handler runs on the loop after the failing call has unwound.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

from eoslog.errors import Errors, KafkaError

log = logging.getLogger(__name__)


class KafkaStorageError(KafkaError):
    """Kafka's KafkaStorageException: the log's directory is offline (or its I/O just failed)."""

    def __init__(self, message: str) -> None:
        super().__init__(Errors.KAFKA_STORAGE_ERROR, message)


class LogDirState:
    """One log directory's state, shared by the logs in it: ``offline`` is None while online,
    then says why (set once, never cleared: a restart starts with a new state)."""

    __slots__ = ("_handler", "offline", "path")

    def __init__(self, path: Path, handler: Callable[[LogDirState], None] | None = None) -> None:
        self.path = path
        self.offline: str | None = None
        self._handler = handler

    def check_online(self, what: str) -> None:
        if self.offline is not None:
            raise KafkaStorageError(f"{what}: log directory {self.path} is offline ({self.offline})")

    def fail(self, message: str, error: OSError) -> None:
        """Take the directory offline (the first time) because of ``error``; idempotent."""
        log.error("%s: %s", message, error)
        with _LOCK:
            first = self.offline is None
            if first:
                self.offline = f"{message}: {error}"
        if not first:
            return
        log.error("log directory %s is offline: %s; nothing in it is served or acknowledged any more",
                  self.path, self.offline)
        if self._handler is not None:
            try:
                asyncio.get_running_loop().call_soon(self._handler, self)
            except RuntimeError:  # no event loop (start-up code, tools, unit tests): at once
                self._handler(self)


_LOCK = threading.Lock()


class LogDirFailureChannel:
    """The watched log directories of this process, by absolute path, so that a failed fsync
    anywhere under one takes it offline whoever called it (Kafka has one channel per broker)."""

    def __init__(self) -> None:
        self._dirs: dict[str, LogDirState] = {}

    def watch(self, log_dir: Path, handler: Callable[[LogDirState], None] | None) -> LogDirState:
        """A new (online) state for ``log_dir``, replacing an earlier one: a log manager opening it."""
        state = LogDirState(log_dir, handler)
        with _LOCK:
            self._dirs[os.path.abspath(log_dir)] = state
        return state

    def state_of(self, path: Path | str) -> LogDirState | None:
        """The watched log directory holding ``path`` (the nearest), or None."""
        current = os.path.abspath(path)
        with _LOCK:
            while True:
                state = self._dirs.get(current)
                if state is not None:
                    return state
                parent = os.path.dirname(current)
                if parent == current:
                    return None
                current = parent

    def maybe_add_offline_log_dir(self, path: Path | str, message: str, error: OSError) -> None:
        """Kafka's maybeAddOfflineLogDir: ``path`` (a file or directory) failed; its log
        directory goes offline. Outside any watched directory the error is only logged."""
        state = self.state_of(path)
        if state is None:
            log.error("%s: %s", message, error)
        else:
            state.fail(message, error)


LOG_DIR_FAILURES = LogDirFailureChannel()

"""Group commit's fsync held closed by a gate, so a test looks at what a broker has appended and
answered while a round is pending exactly, not timed (the ``gate`` fixture: tests/unit/conftest.py;
used by test_connection_pipelining.py and test_group_assignment_durable.py)."""

from __future__ import annotations

import threading
from pathlib import Path

from eoslog.storage.fileio import sync_files

HANG_GUARD_S = 10.0  # a round left closed by a failing test opens by itself after this


class FsyncGate:
    """Stands in for group commit's ``sync_files``: each round blocks until ``open()`` (or the
    hang guard), then fsyncs for real."""

    def __init__(self) -> None:
        self._open = threading.Event()
        self.rounds_started = 0

    def __call__(self, files: list[tuple[int, Path]]) -> list[tuple[Path, OSError]]:
        self.rounds_started += 1
        self._open.wait(HANG_GUARD_S)
        return sync_files(files)

    def open(self) -> None:
        self._open.set()

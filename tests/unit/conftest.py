from __future__ import annotations

from collections.abc import Iterator

import pytest

from eoslog.replica import group_commit
from support.fsync_gate import FsyncGate


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[FsyncGate]:
    """Group commit's fsync rounds block until ``gate.open()`` (see tests/support/fsync_gate.py)."""
    g = FsyncGate()
    monkeypatch.setattr(group_commit, "sync_files", g)
    yield g
    g.open()

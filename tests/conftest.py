from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from harness import BrokerProcess


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A fresh broker with its own data directory, stopped cleanly afterwards."""
    b = BrokerProcess(tmp_path / "data").start()
    yield b
    if b.alive():
        b.stop()


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for a whole test module (tests use distinct topic names)."""
    b = BrokerProcess(tmp_path_factory.mktemp("shared") / "data").start()
    yield b
    if b.alive():
        b.stop()

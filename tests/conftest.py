from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from support import deps
from support.cutfs import FUSE_HINT, CutFs, fuse_missing
from support.harness import BrokerProcess


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(deps.ALLOW_SKIPS_OPTION, action="store_true", dest="allow_skips",
                     help="skip (instead of fail) tests whose system dependency (Java, kcat, ...) "
                          f"is missing; same as {deps.ALLOW_SKIPS_ENV}=1; refused under CI=true")


def pytest_configure(config: pytest.Config) -> None:
    deps.configure(config)


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


@pytest.fixture(scope="module")
def cutfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CutFs]:
    """A cutfs mount (tests/support/cutfs.py) for a module's power-cut tests; fails naming what to
    install when FUSE is missing."""
    missing = fuse_missing()
    deps.require("FUSE for the power-cut file system", missing is None, f"{missing}; {FUSE_HINT}")
    base = tmp_path_factory.mktemp("powercut")
    fs = CutFs(base / "mnt", base / "cutfs.log")
    yield fs
    fs.unmount()

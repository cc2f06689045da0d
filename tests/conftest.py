from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from support import deps, distribution, kafka_harness
from support.cutfs import FUSE_HINT, CutFs, fuse_missing
from support.harness import BrokerProcess


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(deps.ALLOW_SKIPS_OPTION, action="store_true", dest="allow_skips",
                     help="skip (instead of fail) tests whose system dependency (Java, kcat, ...) "
                          f"is missing; same as {deps.ALLOW_SKIPS_ENV}=1; refused under CI=true")


def pytest_configure(config: pytest.Config) -> None:
    deps.configure(config)
    kafka_harness.brokers_favour_start_up()
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        _hide_hypothesis_from_children(config)


def _hide_hypothesis_from_children(config: pytest.Config) -> None:
    """The processes the tests start (brokers, eoslog's CLI, copiers, Spark's Python workers) run
    without hypothesis, as they do where eoslog is installed: kio registers a hypothesis strategy
    for each of its types when hypothesis can be imported, a third of a second of every such
    process's start. Only this process's children see it: the tests themselves use hypothesis,
    and the pytest-xdist controller does not call this, so its workers keep it."""
    hidden = Path(tempfile.mkdtemp(prefix="eoslog-tests-"))
    (hidden / "hypothesis").mkdir()
    (hidden / "hypothesis" / "__init__.py").write_text(
        'raise ImportError("hypothesis is hidden from processes started by the tests (tests/conftest.py)")\n')
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(hidden), os.environ.get("PYTHONPATH")) if p)
    config.add_cleanup(lambda: shutil.rmtree(hidden, ignore_errors=True))


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Only workers collect, and xdist sets their "dist" to "no" and "loadgroup" to what it was.
    if getattr(config.option, "loadgroup", False):
        distribution.assign(items)


@pytest.hookimpl(tryfirst=True)  # before the worker sends its collection to xdist's scheduler
def pytest_collection_finish(session: pytest.Session) -> None:
    if getattr(session.config.option, "loadgroup", False):
        distribution.check_grouped(session.items)


# The conformance table (tests/conformance/report.py): filled by the process that ran the sessions,
# a pytest-xdist worker hands its rows to the controller, which prints and saves the table.
def _conformance_report() -> ModuleType | None:
    return sys.modules.get("conformance.report")


def pytest_sessionfinish(session: pytest.Session) -> None:
    report = _conformance_report()
    if report is not None and hasattr(session.config, "workeroutput"):
        session.config.workeroutput["conformance"] = report.rows()


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: a worker ended
def pytest_testnodedown(node: Any, error: object) -> None:
    rows = getattr(node, "workeroutput", {}).get("conformance")
    if rows:
        from conformance import report

        report.merge(rows)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    report = _conformance_report()
    if report is None or hasattr(config, "workeroutput") or not report.rows():
        return
    table = report.rows()
    terminalreporter.section("conformance against Apache Kafka")
    for line in report.text_table(table):
        terminalreporter.write_line(line)
    path = report.save()
    terminalreporter.write_line(f"{len(table)} sessions: {report.summary(table)}; saved to {path} "
                                "(docs: python tests/conformance/report.py)")


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

"""A broker on cutfs (tests/support/cutfs.py) that suffers power cuts, shared by the power-cut tests
(tests/chaos/test_power_cut.py, tests/spark/test_sink_power_cut.py); the module-scoped
``cutfs`` fixture that mounts the file system is in tests/conftest.py."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from eoslog.faults import CRASH_ENV
from eoslog.storage.fileio import fsync_dir
from support.cutfs import CutFs
from support.harness import BrokerProcess

SMALL_INTERNAL_TOPICS = {
    "offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
}


class PowerCutBroker:
    """A broker whose data directory is on cutfs; ``power_cut`` drops what was not fsynced."""

    def __init__(self, fs: CutFs, name: str, logs: Path, overrides: dict[str, str]) -> None:
        self.fs = fs
        data = fs.mountpoint / name
        data.mkdir()
        fsync_dir(fs.mountpoint)  # the test's own directory is durable from the start
        self.broker = BrokerProcess(data, overrides={**SMALL_INTERNAL_TOPICS, **overrides})
        self.broker.log_path = logs / f"broker-{name}.log"  # never on the file system that gets cut
        self.dropped: list[dict[str, Any]] = []

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def start(self, crash_at: str | None = None) -> PowerCutBroker:
        if crash_at is None:
            os.environ.pop(CRASH_ENV, None)
            self.broker.start()
        else:
            os.environ[CRASH_ENV] = crash_at
            try:
                self.broker.start()
            finally:
                os.environ.pop(CRASH_ENV, None)
        return self

    def power_cut(self, written_back: list[str] | None = None) -> None:
        """The power goes: unsynced state is gone (but for files matching ``written_back``) and
        nothing more is written (cutfs refuses every operation until thawed); the broker dies;
        the file system comes back."""
        self.dropped.append(self.fs.cut(written_back))
        self.broker.kill()
        self.fs.thaw()

    def stop(self) -> None:
        """A clean stop: the next test's cut drops nothing of this one's."""
        if self.broker.alive():
            self.broker.stop()

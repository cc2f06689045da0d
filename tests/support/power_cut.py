"""A broker on cutfs (tests/support/cutfs.py) that suffers power cuts, shared by the power-cut tests
(tests/chaos/test_power_cut.py, tests/spark/test_sink_power_cut.py); the module-scoped
``cutfs`` fixture that mounts the file system is in tests/conftest.py."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.faults import CRASH_ENV
from eoslog.storage.fileio import fsync_dir
from support.cutfs import CutFs
from support.harness import BrokerProcess, wait_until

SMALL_INTERNAL_TOPICS = {
    "offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
}


# A bystander topic whose segment's fsync the disk stops answering (PowerCutBroker.stall_group_commit).
STALLED_TOPIC = "stalled-disk"


class PowerCutBroker:
    """A broker whose data directory is on cutfs; ``power_cut`` drops what was not fsynced."""

    def __init__(self, fs: CutFs, name: str, logs: Path, overrides: dict[str, str]) -> None:
        self.fs = fs
        self.name = name  # its data directory's, under the mount point
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

    def kill(self) -> None:
        """kill -9 (no cut: the page cache keeps every write). A broker blocked in a stalled fsync
        dies only once the file system answers it: the stalls end with the signal sent."""
        proc = self.broker.proc
        assert proc is not None
        proc.send_signal(signal.SIGKILL)
        self.fs.release_stalls()
        proc.wait(30)

    def stop(self) -> None:
        """A clean stop: the next test's cut drops nothing of this one's (a stall left by a
        failed test ends first: the clean shutdown fsyncs everything)."""
        self.fs.release_stalls()
        if self.broker.alive():
            self.broker.stop()

    def stall_group_commit(self) -> None:
        """The disk stops answering fsyncs of a bystander topic's segment, and one record is
        written to it: the broker's group-commit round waits on that fsync and no later round
        starts, so whatever the broker appends from now on — a transaction's records, answered
        once appended — stays unsynced until the power goes (``power_cut``; cutfs'
        ``release_stalls`` ends the stall without a cut). The fsync of the writes' own file is
        not the one stalled: FUSE holds a file's inode lock through its fsync, which would stop
        the broker's writes to that file, and its event loop with them."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        if STALLED_TOPIC not in admin.list_topics(timeout=30).topics:
            admin.create_topics([NewTopic(STALLED_TOPIC, 1, 1)])[STALLED_TOPIC].result(60)
        before = int(self.fs.stats()["stalled_fsyncs"])
        self.fs.stall_fsync(f"/{self.name}/{STALLED_TOPIC}-*/*.log")
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": 0, "linger.ms": 0})
        producer.produce(STALLED_TOPIC, b"the record whose fsync the disk never answers")
        assert producer.flush(30) == 0
        wait_until(lambda: int(self.fs.stats()["stalled_fsyncs"]) > before,
                   "the broker's group-commit round waiting on the stalled fsync", 60, interval_s=0.02)

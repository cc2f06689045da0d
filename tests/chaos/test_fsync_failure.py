"""A failed fsync is never acknowledged (issue 30), on cutfs (tests/support/cutfs.py) made to fail
one fsync of a chosen file with EIO and to lose that file's unsynced writes as Linux does: the
failed write-back leaves the pages clean, so the next fsync succeeds without writing them, and
the disk keeps a hole where they were (PostgreSQL's "fsyncgate"). A power cut follows.

- acks=all idempotent producers of librdkafka and eoslog.client: the broker takes its log
  directory offline at the failed fsync of a partition's segment, or of the recovery-point
  checkpoint (a metadata file written with write-temp/fsync/rename) — its only one, so it
  halts, as Kafka does when every log directory has failed — and says so in its log; restarted
  after the cut, every acknowledged record is at the offset its acknowledgement named;
- the transactional copy (test_copy.py) with an EIO on an output partition's segment, on
  ``__transaction_state`` and on ``__consumer_offsets``, each followed by a cut: no committed
  transaction lost, no duplicate, no aborted read.

Mutant shown (not committed): the code before issue 30, which logged the failure, synced the
partitions again 0.5 s later and acknowledged what that second fsync "made durable", lost
acknowledged records in the acks=all test (the recovery after the cut truncates the log at the
hole, taking the later acknowledged records with it): see the commit message for its figures.

One cutfs mount per module (tests/conftest.py); each test has its own data directory on it and its own broker.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from copier import CONFLUENT, EOSLOG
from test_copy import OUTPUT, Scenario
from test_power_cut import AckedWriter, PowerCutCopyRun, check_copy_run, create_topic, stop_and_check

from eoslog.storage.fileio import fsync_dir
from support.cutfs import CutFs
from support.harness import wait_until
from support.power_cut import PowerCutBroker

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

HALT_EXIT_CODE = 1  # Kafka's Exit.halt(1) when every log directory has failed
OFFLINE_LINE = "is offline"  # the broker log's line for a log directory taken offline


def test_cutfs_fails_an_fsync_as_linux_does(cutfs: CutFs) -> None:
    """The fault itself: EIO, the unsynced writes still read back but never written, a later
    fsync succeeding, and after a cut a hole where they were."""
    root = cutfs.mountpoint / "eio-model"
    root.mkdir()
    fsync_dir(cutfs.mountpoint)
    fd = os.open(root / "segment", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fsync_dir(root)
        os.write(fd, b"synced.")
        os.fsync(fd)
        os.write(fd, b"lost.")
        cutfs.fail_fsync("/eio-model/segment")
        with pytest.raises(OSError) as failed:
            os.fdatasync(fd)
        assert failed.value.errno == errno.EIO
        assert os.pread(fd, 64, 0) == b"synced.lost.", "the page cache keeps what the write-back lost"
        os.write(fd, b"later.")
        os.fdatasync(fd)  # succeeds, and does not write "lost." again
    finally:
        os.close(fd)
    assert cutfs.stats()["failed_fsyncs"] == ["/eio-model/segment"]
    cutfs.cut()
    cutfs.thaw()
    assert (root / "segment").read_bytes() == b"synced." + bytes(len(b"lost.")) + b"later."


# What fails: a partition's segment (the next group-commit round), or the recovery-point
# checkpoint's write-temp/fsync/rename (a topic deleted meanwhile writes it; a topic created writes
# none since issue 28: its new partitions add nothing to it).
TARGETS = {"segment": "acked-0/*.log", "checkpoint": "recovery-point-offset-checkpoint.tmp"}


@pytest.mark.parametrize("target", list(TARGETS))
def test_a_failed_fsync_is_never_acknowledged(cutfs: CutFs, tmp_path: Path, target: str) -> None:
    name = f"eio-acks-{target}"
    node = PowerCutBroker(cutfs, name, tmp_path, {}).start()  # one node: log.flush.policy=group-commit
    exit_code: int | None = None
    try:
        create_topic(node.bootstrap, "acked", 2)
        writers = [AckedWriter(client, node.bootstrap, "acked").start() for client in (CONFLUENT, EOSLOG)]
        wait_until(lambda: all(len(w.acked) > 300 for w in writers), "acknowledged writes before the failure", 120)
        if target == "checkpoint":
            create_topic(node.bootstrap, "another", 1)
        failed_before = len(cutfs.stats()["failed_fsyncs"])
        cutfs.fail_fsync(f"/{name}/{TARGETS[target]}")
        if target == "checkpoint":
            # (The client kept alive until its answer: librdkafka drops the request of a client
            # collected meanwhile, and the checkpoint then failed only at its 60 s interval.)
            admin = AdminClient({"bootstrap.servers": node.bootstrap})
            with contextlib.suppress(Exception):  # its answer, if any, does not matter
                admin.delete_topics(["another"])["another"].result(30)
        wait_until(lambda: len(cutfs.stats()["failed_fsyncs"]) > failed_before, "the armed fsync to fail", 60)
        at_failure = [len(w.acked) for w in writers]
        # The broker halts. Code that retries the fsync goes on acknowledging instead, and what it
        # acknowledges from now on is what the cut takes away: wait for whichever comes first.
        wait_until(lambda: not node.broker.alive()
                   or all(len(w.acked) > n + 300 for w, n in zip(writers, at_failure, strict=True)),
                   "the broker to halt, or to acknowledge on", 120)
        assert node.broker.proc is not None
        exit_code = node.broker.proc.poll()
        node.power_cut()
        node.start()
        restarted = [len(w.acked) for w in writers]
        # (A client whose acknowledged records are gone may fail for good: librdkafka's fatal
        # OUT_OF_ORDER_SEQUENCE_NUMBER. The check below says what was lost.)
        wait_until(lambda: all(len(w.acked) > n + 200 or not w.running
                               for w, n in zip(writers, restarted, strict=True)),
                   "every writer acknowledged after the restart", 120)
        acked, log, problems = stop_and_check(writers, node.bootstrap)
    finally:
        node.stop()
    report = (f"{target}: {len(acked)} acknowledged ({at_failure} when the fsync failed), {len(log)} stored, "
              f"broker exit code {exit_code}, cuts dropped {node.dropped}, writer errors "
              f"{({w.client: dict(w.errors) for w in writers})}, writers failed "
              f"{[w.fatal for w in writers if w.fatal]}")
    print(report)
    assert not problems, "\n".join(problems) + "\n" + report
    assert exit_code == HALT_EXIT_CODE, f"the broker did not halt on the failed fsync: {report}"
    broker_log = node.broker.log_text()
    assert "Input/output error" in broker_log and OFFLINE_LINE in broker_log, broker_log[-3000:]


class EioCopyRun(PowerCutCopyRun):
    """test_copy's run on cutfs whose every broker bounce is an fsync failing with EIO, the broker
    halting on it, then a power cut: in turn on an output partition's segment, on
    ``__transaction_state`` and on ``__consumer_offsets``."""

    TARGETS = (f"{OUTPUT}-*", "__transaction_state-*", "__consumer_offsets-*")

    def before_cut(self) -> None:
        target = self.TARGETS[(self.broker_kills - 1) % len(self.TARGETS)]
        failed = len(self.node.fs.stats()["failed_fsyncs"])
        self.node.fs.fail_fsync(f"/{self.node.broker.data_dir.name}/{target}/*.log")
        wait_until(lambda: len(self.node.fs.stats()["failed_fsyncs"]) > failed, f"an fsync of {target} to fail", 120)
        wait_until(lambda: not self.broker.alive(), "the broker to halt on the failed fsync", 60)
        self.note(f"fsync of {self.node.fs.stats()['failed_fsyncs'][-1]} failed: broker exited with "
                  f"{self.broker.proc.returncode if self.broker.proc else None}")


COPY_SCENARIO = Scenario(CONFLUENT, 12_000, 2, 3, broker_kills=3, copier_kills=1, deadline_s=300.0)


def test_transactional_copy_survives_failed_fsyncs(cutfs: CutFs, tmp_path: Path) -> None:
    node = PowerCutBroker(cutfs, "eio-copy", tmp_path, {})
    failed_before = len(cutfs.stats()["failed_fsyncs"])
    run = EioCopyRun(COPY_SCENARIO, tmp_path, node)
    try:
        check_copy_run(run)
    finally:
        run.close()
    assert len(cutfs.stats()["failed_fsyncs"]) - failed_before == COPY_SCENARIO.broker_kills
    assert node.broker.log_text().count(OFFLINE_LINE) >= COPY_SCENARIO.broker_kills

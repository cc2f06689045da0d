"""The exactly-once sink across power cuts of its broker (issue 14): the broker's data, the
decisions topic's included, is on cutfs (tests/support/cutfs.py); a pass-through query runs in a
driver process of its own (``sink_driver.py``) while the power goes twice — once while
batch CUT_AT's transactions are prepared and its driver holds its commit just before the
decision (fault point pause-before-decision), once at a random moment while a later batch
is writing or committing — and the broker restarts on what survived. The query goes on, or
is started again from its checkpoint until it has written everything: a read_committed
consumer sees every input row once, nothing is left open (find-hanging agrees), and the
decisions topic holds one decision per batch, each of whose transactions completed."""

from __future__ import annotations

import random
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from cluster_support import all_decisions, assert_nothing_left_open
from sink_support import (
    WAIT_S,
    assert_exactly_once,
    committed_output,
    create_topics,
    kill_session,
    open_transactions,
    produce_input,
    start_driver,
)

from eoslog.client.admin import Admin
from support.cutfs import CutFs
from support.harness import wait_until
from support.power_cut import PowerCutBroker

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

CUT_AT = 2  # the batch whose prepared transactions are open at the first cut
RESTARTS = 3  # drivers started again from the checkpoint after the first, at most


def test_sink_keeps_exactly_once_across_power_cuts(cutfs: CutFs, tmp_path: Path) -> None:
    node = PowerCutBroker(cutfs, "sink", tmp_path, {"transaction.two.phase.commit.enable": "true"}).start()
    b = node.bootstrap
    src, dst, decisions = "cut-in", "cut-out", "cut-decisions"
    marker = tmp_path / "paused"
    sink_args = ("--max-per-trigger", "15", "--sink-option", f"eoslog.sink.decisions.topic={decisions}")
    drivers: list[subprocess.Popen[bytes]] = []
    try:
        create_topics(b, (src, 2), (dst, 2))
        expected = produce_input(b, src, 300, 2)
        drivers.append(start_driver(b, src, dst, tmp_path, *sink_args, "--fail-at",
                                    f"pause-before-decision@{CUT_AT}:{marker}"))
        wait_until(lambda: marker.exists() or drivers[0].poll() is not None,
                   f"the commit of batch {CUT_AT} to pause before its decision", WAIT_S * 2)
        assert drivers[0].poll() is None, (tmp_path / "driver.log").read_text()[-3000:]
        assert open_transactions(b, dst), f"batch {CUT_AT}'s prepared transactions are not open"
        node.power_cut()
        node.start()
        marker.unlink()  # the driver's commit goes on against the restarted broker
        # The second cut: at a random moment once a later batch's transactions are open.
        wait_until(lambda: (len(committed_output(b, dst)) > 15 * (CUT_AT + 1) and open_transactions(b, dst))
                   or drivers[0].poll() is not None, "a later batch to be writing", WAIT_S * 2)
        time.sleep(random.uniform(0.0, 0.5))
        node.power_cut()
        node.start()
        while drivers[-1].wait(WAIT_S * 3) != 0:
            assert len(drivers) <= RESTARTS, (tmp_path / "driver.log").read_text()[-3000:]
            drivers.append(start_driver(b, src, dst, tmp_path, *sink_args))
        print(f"power cuts dropped {node.dropped}; drivers' exit codes {[d.returncode for d in drivers]}")

        assert_exactly_once(committed_output(b, dst), expected)
        assert_nothing_left_open(b, dst)
        decided = all_decisions(b, decisions)
        batches = Counter(d.batch_id for d in decided)
        assert set(batches) == set(range(max(batches) + 1)) and set(batches.values()) == {1}, batches
        # A task's transactional id serves every batch of its run (a new transaction each), so
        # DescribeTransactions shows the id's latest transaction: for an earlier decided batch
        # that may be a later batch's, aborted because its decision never committed (the decider's
        # commit refused after a power cut, then Spark's abort) — which is right. The last decision's
        # transactions are their ids' latest: those must be committed. (Earlier decided batches'
        # rows are in the output exactly once: assert_exactly_once.)
        last = max(decided, key=lambda d: d.batch_id)
        with Admin({"bootstrap.servers": b}) as admin:
            states = admin.describe_transactions(sorted(tid for tid, _ in last.transactions))
        undone = {tid: d.state for tid, d in states.items() if d.state not in ("CompleteCommit", "Empty")}
        assert not undone, f"batch {last.batch_id}'s decided transactions not committed: {undone}"
    finally:
        for d in drivers:
            if d.poll() is None:
                kill_session(d)
        node.stop()

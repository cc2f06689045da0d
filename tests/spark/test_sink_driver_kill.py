"""The Spark driver kill -9'ed under a running query (the query runs in a subprocess with
its own JVM: ``sink_driver.py``), then restarted from its checkpoint: a read_committed
consumer sees every row exactly once, and never one of an undecided batch.

The first run is killed in its commit of batch 1, either just after it recorded the
decision (none of the transactions completed: the prepared transactions hold every reader
at the last stable offset) or just before (the tasks' transactions prepared, nothing
decided). The restarted query — in the test's own SparkSession, another driver process on
the same checkpoint — replays batch 1: after the decision its tasks find it and write
nothing and its commit completes the old run's transactions; before it, the batch is
written again and the old run's transactions are aborted. Then it finishes the input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sink_support import (
    WAIT_S,
    assert_exactly_once,
    committed_output,
    create_topics,
    kill_session,
    open_transactions,
    pass_through,
    produce_input,
    raw_output,
    start_driver,
)

from support.harness import BrokerProcess, wait_until


@pytest.mark.parametrize("moment", ["pause-after-decision", "pause-before-decision"])
def test_driver_killed_mid_stream_and_restarted(spark: Any, spark_broker: BrokerProcess, topic_name: str,
                                                tmp_path: Path, moment: str) -> None:
    b = spark_broker.bootstrap
    src, dst = f"{topic_name}-in", f"{topic_name}-out"
    create_topics(b, (src, 2), (dst, 2))
    expected = produce_input(b, src, 200, 2)
    marker = tmp_path / "paused"

    first = start_driver(b, src, dst, tmp_path, "--max-per-trigger", "50", "--fail-at", f"{moment}@1:{marker}")
    try:
        wait_until(lambda: marker.exists() or first.poll() is not None, "the commit of batch 1 to pause", WAIT_S)
        assert first.poll() is None, (tmp_path / "driver.log").read_text()[-3000:]
    finally:
        kill_session(first)
    visible = committed_output(b, dst)
    assert_exactly_once(visible, set(visible))
    assert 0 < len(visible) < len(expected)
    assert open_transactions(b, dst), "batch 1's prepared transactions are left open"

    # The restart runs in this test's own SparkSession: another driver process, same checkpoint.
    second = pass_through(spark, b, src, dst, tmp_path / "ck", max_per_trigger=50)
    second.awaitTermination(WAIT_S)
    assert second.exception() is None
    assert_exactly_once(committed_output(b, dst), expected)
    assert open_transactions(b, dst) == {}
    written = len(raw_output(b, dst))
    if moment == "pause-after-decision":
        # Nothing was written twice, not even aborted: the replayed batch 1 wrote nothing.
        assert written == len(expected)
    else:
        # Batch 1 was written again; the dead driver's undecided transactions were aborted.
        assert written > len(expected)

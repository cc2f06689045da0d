"""df.writeStream / df.write format("eoslog") against the real broker: every input row
reaches a read_committed consumer exactly once — also when the driver's commit fails just
before or just after it records its decision and the query is restarted from its
checkpoint — and nothing of an undecided batch is ever visible."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sink_support import (
    assert_exactly_once,
    committed_output,
    create_topics,
    open_transactions,
    pass_through,
    produce_input,
    raw_output,
)

from eoslog.spark.decisions import read_latest_decision
from eoslog.spark.sink_options import parse_sink_options
from harness import BrokerProcess


def _committed_rows(query: Any) -> int:
    """Input rows of the batches Spark finished (committed) in this run."""
    return sum(p["numInputRows"] for p in query.recentProgress)


def test_stream_pass_through_writes_every_row_once(spark: Any, spark_broker: BrokerProcess, topic_name: str,
                                                   tmp_path: Path) -> None:
    b = spark_broker.bootstrap
    src, dst = f"{topic_name}-in", f"{topic_name}-out"
    create_topics(b, (src, 2), (dst, 3))
    expected = produce_input(b, src, 150, 2)
    query = pass_through(spark, b, src, dst, tmp_path / "ck")
    query.awaitTermination(300)
    assert query.exception() is None
    assert_exactly_once(committed_output(b, dst), expected)
    assert open_transactions(b, dst) == {}
    decision = read_latest_decision(parse_sink_options({"kafka.bootstrap.servers": b}), str(query.id))
    assert decision is not None and decision.batch_id == query.lastProgress["batchId"]


@pytest.mark.parametrize("fault", ["commit-before-decision", "commit-after-decision"])
def test_commit_failure_then_restart_from_checkpoint(spark: Any, spark_broker: BrokerProcess, topic_name: str,
                                                     tmp_path: Path, fault: str) -> None:
    b = spark_broker.bootstrap
    src, dst = f"{topic_name}-in", f"{topic_name}-out"
    create_topics(b, (src, 2), (dst, 2))
    expected = produce_input(b, src, 200, 2)
    checkpoint = tmp_path / "ck"

    failing = pass_through(spark, b, src, dst, checkpoint, sink_options={"eoslog.sink.test.failAt": f"{fault}@2"})
    with pytest.raises(Exception, match="test fault"):
        failing.awaitTermination(300)
    done_before = _committed_rows(failing)  # batches 0 and 1
    visible = committed_output(b, dst)
    assert_exactly_once(visible, set(visible))
    if fault == "commit-before-decision":
        # Batch 2 was never decided: none of its rows is visible, and its transactions are gone.
        assert len(visible) == done_before
        assert open_transactions(b, dst) == {}
    else:
        # Batch 2 was decided: Spark's abort() finished it instead of undoing it.
        assert len(visible) > done_before

    restarted = pass_through(spark, b, src, dst, checkpoint)
    restarted.awaitTermination(300)
    assert restarted.exception() is None
    assert_exactly_once(committed_output(b, dst), expected)
    assert open_transactions(b, dst) == {}
    if fault == "commit-after-decision":
        # The replayed batch 2 found its decision and wrote nothing, not even aborted copies.
        assert len(raw_output(b, dst)) == len(expected)

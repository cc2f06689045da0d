"""The broker kill -9'ed and restarted under a running exactly-once query: whatever the
query does meanwhile (tasks retried, a commit failing, the query failing), once it is
stopped and restarted from its checkpoint a read_committed consumer sees every row once
and no transaction is left open — two-phase transactions prepared before the kill survive
it and are completed or aborted by the driver, never by a timeout."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sink_support import (
    WAIT_S,
    assert_exactly_once,
    committed_output,
    create_topics,
    open_transactions,
    pass_through,
    produce_input,
)

from harness import BrokerProcess, wait_until


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of this test alone (it gets killed), two-phase commit on."""
    (tmp_path / "broker").mkdir()
    b = BrokerProcess(tmp_path / "broker" / "data", overrides={"transaction.two.phase.commit.enable": "true"}).start()
    yield b
    if b.alive():
        b.stop()


def _last_batch(query: Any) -> int:
    progress = query.lastProgress
    return -1 if progress is None else int(progress["batchId"])


def test_broker_killed_and_restarted_under_a_running_query(spark: Any, own_broker: BrokerProcess,
                                                            tmp_path: Path) -> None:
    b = own_broker.bootstrap
    src, dst = "kill-in", "kill-out"
    create_topics(b, (src, 2), (dst, 2))
    expected = produce_input(b, src, 300, 2)
    checkpoint = tmp_path / "ck"

    query = pass_through(spark, b, src, dst, checkpoint, max_per_trigger=15, available_now=False)
    try:
        wait_until(lambda: _last_batch(query) >= 2 or not query.isActive, "the query to commit a few batches", WAIT_S)
        before_kill = _last_batch(query)
        own_broker.kill()
        time.sleep(1.0)  # the query meets a dead broker
        own_broker.start()
        wait_until(lambda: _last_batch(query) >= before_kill + 3 or not query.isActive,
                   "the query to go on after the broker restart, or to fail", WAIT_S)
    finally:
        query.stop()

    finisher = pass_through(spark, b, src, dst, checkpoint, max_per_trigger=100)
    finisher.awaitTermination(WAIT_S)
    assert finisher.exception() is None
    assert_exactly_once(committed_output(b, dst), expected)
    assert open_transactions(b, dst) == {}

"""The broker kill -9'ed and restarted under a running exactly-once query: whatever the
query does meanwhile (tasks retried, a commit failing, the query failing), once it is
stopped and restarted from its checkpoint a read_committed consumer sees every row once
and no transaction is left open — two-phase transactions prepared before the kill survive
it and are completed or aborted by the driver, never by a timeout."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sink_support import (
    WAIT_S,
    assert_exactly_once,
    committed_output,
    create_topics,
    last_batch,
    ongoing_transactions,
    open_transactions,
    pass_through,
    produce_input,
)

from support.harness import BrokerProcess, wait_until

KILL_AT = 2  # the batch whose commit is held while the broker is killed


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of this test alone (it gets killed), two-phase commit on."""
    (tmp_path / "broker").mkdir()
    b = BrokerProcess(tmp_path / "broker" / "data", overrides={"transaction.two.phase.commit.enable": "true"}).start()
    yield b
    if b.alive():
        b.stop()


def test_broker_killed_and_restarted_under_a_running_query(spark: Any, own_broker: BrokerProcess,
                                                            tmp_path: Path) -> None:
    """The kill lands while batch KILL_AT's prepared transactions are open: the driver's commit
    is held just before its decision (fault point pause-before-decision), the transactions are
    observed through the admin API, the broker is killed and restarted, they are observed
    again unchanged, and only then is the commit let go on."""
    b = own_broker.bootstrap
    src, dst = "kill-in", "kill-out"
    create_topics(b, (src, 2), (dst, 2))
    expected = produce_input(b, src, 300, 2)
    checkpoint = tmp_path / "ck"
    paused = tmp_path / "paused"

    query = pass_through(spark, b, src, dst, checkpoint, max_per_trigger=15, available_now=False,
                         sink_options={"eoslog.sink.test.failAt": f"pause-before-decision@{KILL_AT}:{paused}"})
    try:
        wait_until(lambda: paused.exists() or not query.isActive,
                   f"the commit of batch {KILL_AT} to pause before its decision", WAIT_S)
        assert query.isActive, query.exception()
        prepared = ongoing_transactions(b, dst)
        assert prepared, f"batch {KILL_AT} has no prepared transaction open on {dst}"
        assert set(open_transactions(b, dst)) == set().union(*(parts for *_, parts in prepared.values()))
        own_broker.kill()
        own_broker.start()
        # Prepared transactions survive a kill -9 of the broker as they were.
        assert ongoing_transactions(b, dst) == prepared
        paused.unlink()  # the driver's commit goes on against the restarted broker
        wait_until(lambda: last_batch(query) >= KILL_AT + 2 or not query.isActive,
                   "the query to go on after the broker restart, or to fail", WAIT_S)
        print("after the restart the query", "went on" if query.isActive else f"failed: {query.exception()}")
    finally:
        paused.unlink(missing_ok=True)
        query.stop()

    finisher = pass_through(spark, b, src, dst, checkpoint, max_per_trigger=100)
    finisher.awaitTermination(WAIT_S)
    assert finisher.exception() is None
    assert_exactly_once(committed_output(b, dst), expected)
    assert open_transactions(b, dst) == {}

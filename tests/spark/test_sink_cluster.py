"""Issue 13, test 4 (Spark): the exactly-once sink on a ZooKeeper + 3-broker cluster while the
transaction coordinator of a batch's prepared transactions is killed with SIGKILL. Prepared
(two-phase) transactions move with their coordinator unchanged, the driver's decision then
completes them, and once the query is restarted from its checkpoint a read_committed
consumer sees every row once and no transaction is left open."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sink_support import (
    WAIT_S,
    assert_exactly_once,
    committed_output,
    last_batch,
    ongoing_transactions,
    open_transactions,
    pass_through,
    produce_input,
)

from support.cluster_harness import Cluster, create_topic, find_coordinator
from support.harness import wait_until

KILL_AT = 2  # the batch whose commit is held while its coordinator is killed


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path / "cluster", overrides={"transaction.two.phase.commit.enable": "true"}).start()
    yield c
    c.stop()


def test_sink_through_a_transaction_coordinator_kill(spark: Any, cluster: Cluster, tmp_path: Path) -> None:
    src, dst = "ckill-in", "ckill-out"
    for topic in (src, dst):
        create_topic(cluster.any_alive().bootstrap, topic, partitions=2, replication_factor=3,
                     configs={"min.insync.replicas": "2"})
    expected = produce_input(cluster.bootstrap, src, 300, 2)
    checkpoint, paused = tmp_path / "ck", tmp_path / "paused"
    query = pass_through(spark, cluster.bootstrap, src, dst, checkpoint, max_per_trigger=15, available_now=False,
                         sink_options={"eoslog.sink.test.failAt": f"pause-before-decision@{KILL_AT}:{paused}"})
    try:
        wait_until(lambda: paused.exists() or not query.isActive,
                   f"the commit of batch {KILL_AT} to pause before its decision", WAIT_S)
        assert query.isActive, query.exception()
        prepared = ongoing_transactions(cluster.bootstrap, dst)
        assert prepared, f"batch {KILL_AT} has no prepared transaction open on {dst}"
        moving = sorted(prepared)[0]
        victim = find_coordinator(cluster, moving)
        cluster.brokers[victim].kill()
        wait_until(lambda: find_coordinator(cluster, moving) != victim, f"a new coordinator of {moving}", WAIT_S)
        # The prepared transactions moved with their coordinator unchanged.
        wait_until(lambda: ongoing_transactions(cluster.bootstrap, dst) == prepared,
                   "the prepared transactions described by their new coordinators", WAIT_S)
        cluster.brokers[victim].start()
        paused.unlink()  # the driver's decision and commit go on
        wait_until(lambda: last_batch(query) >= KILL_AT + 2 or not query.isActive,
                   "the query to go on after the coordinator moved, or to fail", WAIT_S)
        print("after the coordinator moved the query", "went on" if query.isActive else f"failed: {query.exception()}")
    finally:
        paused.unlink(missing_ok=True)
        query.stop()

    finisher = pass_through(spark, cluster.bootstrap, src, dst, checkpoint, max_per_trigger=100)
    finisher.awaitTermination(WAIT_S)
    assert finisher.exception() is None
    assert_exactly_once(committed_output(cluster.bootstrap, dst), expected)
    assert open_transactions(cluster.bootstrap, dst) == {}

"""The coordinator holds a request it would answer CONCURRENT_TRANSACTIONS because the id's own
previous step is under way (``TransactionCoordinator.held``, ``transaction.concurrent.hold.ms``),
and then handles it as the client's retry would be handled.

Real coordinator, real logs, markers on the real path (test_txn_coordinator's Harness); the
event loop is the test's, so "held" means the request's task has not finished while the markers
have not been written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from test_txn_coordinator import T0, T1, TIMEOUT_MS, Harness

from eoslog.coordinator.internal_topic import OFFSETS_TOPIC
from eoslog.coordinator.transaction import InitProducerIdResult, TxnState
from eoslog.errors import Errors
from eoslog.types import TopicPartition

MARKERS = "PrepareCommit>CompleteCommit"


def run(h: Harness, scenario: Callable[[Harness], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(scenario(h))


def itself(error: Errors) -> Errors:
    return error


def add_offsets(h: Harness, pid: int, epoch: int) -> asyncio.Task[Errors]:
    """A held AddOffsetsToTxn, as the handler makes it."""
    return asyncio.create_task(h.coord.held("AddOffsetsToTxn", "tx", lambda: h.coord.add_offsets(
        "tx", pid, epoch, "group"), itself))


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def committing(h: Harness) -> tuple[int, int]:
    """A committed transaction whose markers have not been written: PrepareCommit, pending CompleteCommit."""
    pid, epoch = h.begin(tps=(T0, T1))
    assert h.coord.end_transaction("tx", pid, epoch, commit=True).error == Errors.NONE
    assert h.coord.under_way("tx") == MARKERS
    return pid, epoch


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


def test_the_next_transaction_waits_for_the_markers_instead_of_concurrent_transactions(h: Harness) -> None:
    async def scenario(h: Harness) -> None:
        pid, epoch = await committing(h)
        held = add_offsets(h, pid, epoch)
        await settle()
        assert not held.done(), "answered before the previous transaction's markers were written"
        await h.coord.markers.drain()
        assert await held == Errors.NONE
        group_tp = TopicPartition(OFFSETS_TOPIC, h.groups.partition_for("group"))
        m = h.coord.state.transactions["tx"]
        assert m.state is TxnState.ONGOING and m.partitions == {group_tp}
        assert h.markers(T0) == [(2, epoch, "COMMIT", 0)]  # the previous transaction completed first
        # AddOffsets right after AddPartitions: no transition of this id is left pending by an
        # append (its replication/fsync is waited for afterwards), so nothing is refused or held.
        assert h.coord.add_partitions("tx", pid, epoch, [T1]) == Errors.NONE
        assert await h.coord.held("AddOffsetsToTxn", "tx", lambda: h.coord.add_offsets(
            "tx", pid, epoch, "other-group"), itself) == Errors.NONE
        assert h.coord.counts.concurrent == {}
        assert h.coord.counts.held["AddOffsetsToTxn"].count == 1  # the first one only

    run(h, scenario)


def test_end_txn_retried_during_the_markers_gets_the_final_answer(h: Harness) -> None:
    async def scenario(h: Harness) -> None:
        pid, epoch = await committing(h)
        same = asyncio.create_task(h.coord.held("EndTxn", "tx", lambda: h.coord.end_transaction(
            "tx", pid, epoch, commit=True), lambda r: r.error))
        other = asyncio.create_task(h.coord.held("EndTxn", "tx", lambda: h.coord.end_transaction(
            "tx", pid, epoch, commit=False), lambda r: r.error))
        await settle()
        assert not same.done() and not other.done()
        await h.coord.markers.drain()
        assert ((await same).error, (await other).error) == (Errors.NONE, Errors.INVALID_TXN_STATE)

    run(h, scenario)


def test_init_producer_id_is_held_through_the_abort_it_starts(h: Harness) -> None:
    async def scenario(h: Harness) -> None:
        pid, epoch = h.begin()
        init = asyncio.create_task(h.coord.held("InitProducerId", "tx", lambda: h.coord.init_producer_id(
            "tx", TIMEOUT_MS), lambda r: r.error))
        await settle()
        assert not init.done() and h.state_of() is TxnState.PREPARE_ABORT
        await h.coord.markers.drain()
        # As the client's retry after the abort: the epoch after the fencing one.
        assert await init == InitProducerIdResult(Errors.NONE, pid, epoch + 2)
        assert h.markers(T0) == [(2, epoch + 1, "ABORT", 0)]

    run(h, scenario)


def test_an_epoch_bump_while_held_fences_the_held_request(h: Harness) -> None:
    async def scenario(h: Harness) -> None:
        pid, epoch = await committing(h)
        held = add_offsets(h, pid, epoch)
        await settle()
        await h.coord.markers.drain()
        # A new instance takes the id before the held request runs again.
        assert h.coord.init_producer_id("tx", TIMEOUT_MS) == InitProducerIdResult(Errors.NONE, pid, epoch + 1)
        assert await held == Errors.PRODUCER_FENCED
        assert h.state_of() is TxnState.EMPTY

    run(h, scenario)


def test_a_fenced_request_is_not_held(h: Harness) -> None:
    async def scenario(h: Harness) -> None:
        pid, epoch = await committing(h)
        # The old epoch is fenced whatever is under way: answered at once, as today.
        assert await h.coord.held("AddOffsetsToTxn", "tx", lambda: h.coord.add_offsets(
            "tx", pid, epoch - 1 if epoch else epoch + 1, "group"), itself) == Errors.PRODUCER_FENCED
        assert h.coord.counts.held == {}

    run(h, scenario)


@pytest.mark.parametrize("how", ["resign", "shutdown"])
def test_a_coordinator_that_moves_away_answers_held_requests(tmp_path: Path, how: str) -> None:
    h = Harness(tmp_path, **{"transaction.concurrent.hold.ms": "60000"})  # woken, not timed out

    async def scenario(h: Harness) -> None:
        pid, epoch = await committing(h)
        held = add_offsets(h, pid, epoch)
        await settle()
        if how == "resign":
            h.coord.resign(h.coord.state.partition_for("tx"))
        else:
            h.coord.shutdown()
        assert await asyncio.wait_for(held, 5) == Errors.NOT_COORDINATOR

    run(h, scenario)


@pytest.mark.parametrize("hold_ms", [0, 50])
def test_nothing_is_held_past_the_cap(tmp_path: Path, hold_ms: int) -> None:
    h = Harness(tmp_path, **{"transaction.concurrent.hold.ms": str(hold_ms)})

    async def scenario(h: Harness) -> None:
        pid, epoch = await committing(h)
        loop = asyncio.get_running_loop()
        started = loop.time()
        # The markers are never written: after the cap the answer is today's.
        assert await asyncio.wait_for(add_offsets(h, pid, epoch), 5) == Errors.CONCURRENT_TRANSACTIONS
        assert loop.time() - started >= hold_ms / 1000
        assert h.coord.counts.concurrent == {("AddOffsetsToTxn", MARKERS): 1}
        assert ("AddOffsetsToTxn" in h.coord.counts.held) == (hold_ms > 0)
        assert h.state_of() is TxnState.PREPARE_COMMIT

    run(h, scenario)

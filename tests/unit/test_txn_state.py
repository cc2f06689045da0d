"""The transaction state table: every one of the 64 (from, to) pairs, against Kafka 4.4's
TransactionState.validPreviousStates written out independently here (transaction version 2's
abort of nothing enters PrepareAbort from Empty and the completed states), and the prepare /
complete discipline of TransactionMetadata around it."""

from __future__ import annotations

import itertools

import pytest

from eoslog.coordinator.transaction.metadata import TransactionMetadata
from eoslog.coordinator.transaction.state import (
    VALID_PREVIOUS,
    IllegalTransitionError,
    TxnState,
    validate_transition,
)
from eoslog.errors import Errors
from eoslog.types import TopicPartition

S = TxnState
# Kafka 4.4 (TransactionState.VALID_PREVIOUS_STATES), one line per legal transition: from → to.
LEGAL = {
    (S.EMPTY, S.EMPTY), (S.COMPLETE_COMMIT, S.EMPTY), (S.COMPLETE_ABORT, S.EMPTY),
    (S.ONGOING, S.ONGOING), (S.EMPTY, S.ONGOING), (S.COMPLETE_COMMIT, S.ONGOING),
    (S.COMPLETE_ABORT, S.ONGOING),
    (S.ONGOING, S.PREPARE_COMMIT),
    (S.ONGOING, S.PREPARE_ABORT), (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT),
    (S.EMPTY, S.PREPARE_ABORT), (S.COMPLETE_COMMIT, S.PREPARE_ABORT), (S.COMPLETE_ABORT, S.PREPARE_ABORT),
    (S.PREPARE_COMMIT, S.COMPLETE_COMMIT),
    (S.PREPARE_ABORT, S.COMPLETE_ABORT),
    (S.EMPTY, S.DEAD), (S.COMPLETE_COMMIT, S.DEAD), (S.COMPLETE_ABORT, S.DEAD),
    (S.ONGOING, S.PREPARE_EPOCH_FENCE),
}
ALL_PAIRS = list(itertools.product(TxnState, TxnState))


def test_table_covers_every_state() -> None:
    assert set(VALID_PREVIOUS) == set(TxnState)


@pytest.mark.parametrize(("current", "target"), ALL_PAIRS, ids=lambda s: s.kafka_name)
def test_transition(current: TxnState, target: TxnState) -> None:
    if (current, target) in LEGAL:
        assert validate_transition(current, target) is target
    else:
        with pytest.raises(IllegalTransitionError, match=f"{current.kafka_name} cannot move to"):
            validate_transition(current, target)


def test_ids_and_names_are_kafkas() -> None:
    names = ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
             "CompleteAbort", "Dead", "PrepareEpochFence"]
    assert [(s.value, s.kafka_name) for s in TxnState] == list(enumerate(names))
    assert all(TxnState.from_kafka_name(n) is TxnState(i) for i, n in enumerate(names))
    assert TxnState.from_kafka_name("Bogus") is None
    assert {s for s in TxnState if s.expiration_allowed} == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}


def meta(state: TxnState = S.EMPTY, epoch: int = 3) -> TransactionMetadata:
    parts = () if state is S.EMPTY else (TopicPartition("t", 0),)
    return TransactionMetadata("tx", 7, producer_epoch=epoch, txn_timeout_ms=1000, state=state,
                               partitions=parts, txn_start_timestamp=-1 if state is S.EMPTY else 10,
                               txn_last_update_timestamp=10)


def test_prepare_leaves_metadata_until_complete() -> None:
    m = meta()
    transit = m.prepare_add_partitions([TopicPartition("t", 1)], now=50)
    assert m.state is S.EMPTY and m.partitions == set() and m.pending_state is S.ONGOING
    with pytest.raises(IllegalTransitionError, match="pending"):
        m.prepare_add_partitions([TopicPartition("t", 2)], now=51)
    m.complete_transition(transit)
    assert m.state is S.ONGOING and m.partitions == {TopicPartition("t", 1)}
    assert m.txn_start_timestamp == 50 and m.pending_state is None


def test_abandoned_transition_changes_nothing() -> None:
    m = meta(S.ONGOING)
    m.prepare_abort_or_commit(S.PREPARE_COMMIT, now=99)
    m.abandon_transition()
    assert m.state is S.ONGOING and m.pending_state is None and m.txn_last_update_timestamp == 10


def test_complete_checks_the_transit_matches_the_pending_state() -> None:
    m = meta(S.ONGOING)
    transit = m.prepare_abort_or_commit(S.PREPARE_ABORT, now=20)
    other = meta(S.ONGOING)
    with pytest.raises(IllegalTransitionError):
        other.complete_transition(transit)  # nothing pending there
    m.complete_transition(transit)
    assert m.state is S.PREPARE_ABORT


def test_illegal_prepare_raises_and_leaves_nothing_pending() -> None:
    m = meta(S.EMPTY)
    with pytest.raises(IllegalTransitionError):
        m.prepare_abort_or_commit(S.PREPARE_COMMIT, now=1)
    assert m.pending_state is None


def test_fence_then_abort_bumps_the_epoch_once() -> None:
    m = meta(S.ONGOING, epoch=5)
    fence = m.prepare_fence_producer_epoch()
    assert fence.producer_epoch == 6 and fence.state is S.PREPARE_EPOCH_FENCE
    m.begin_fenced_abort(fence.producer_epoch)
    abort = m.prepare_abort_or_commit(S.PREPARE_ABORT, now=30)
    m.abandon_transition()  # the PrepareAbort append failed
    m.has_failed_epoch_fence = True
    again = m.prepare_fence_producer_epoch()
    assert again.producer_epoch == 6  # not bumped twice
    assert abort.producer_epoch == 6


@pytest.mark.parametrize(
    ("expected", "result"),
    [(None, (4, -1)), (3, (4, 3)), (2, (3, 2)), (1, Errors.PRODUCER_FENCED)],
)
def test_increment_epoch_kip360(expected: int | None, result: tuple[int, int] | str) -> None:
    m = meta(epoch=3)
    m.last_producer_epoch = 2
    transit = m.prepare_increment_producer_epoch(2000, expected, now=5)
    if isinstance(result, Errors):
        assert transit == result and m.pending_state is None
    else:
        assert not isinstance(transit, Errors)
        assert (transit.producer_epoch, transit.last_producer_epoch) == result

"""KIP-939 two-phase commit in the transaction coordinator, driven directly over real logs.

The same harness as ``test_txn_coordinator``: markers travel the real WriteTxnMarkers
path into real partition logs, time is a ManualScheduler, ``reload`` is a new coordinator
that knows only ``__transaction_state``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_txn_coordinator import ABORT_INTERVAL_MS, T0, T1, TIMEOUT_MS, Harness

from eoslog.coordinator.transaction import InitProducerIdResult, TxnState
from eoslog.coordinator.transaction.log import (
    TWO_PHASE_COMMIT_TIMEOUT_MS,
    TransactionLogValue,
    decode_value,
    encode_value,
)
from eoslog.errors import Errors

TWO_PC = {"transaction.two.phase.commit.enable": "true"}


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path, **TWO_PC)


def init_2pc(h: Harness, txn_id: str = "tx", keep: bool = False) -> InitProducerIdResult:
    r = h.coord.init_producer_id(txn_id, TIMEOUT_MS, enable_2pc=True, keep_prepared_txn=keep)
    assert r.error == Errors.NONE, r
    return r


def begin_2pc(h: Harness, txn_id: str = "tx", tps: tuple = (T0, T1)) -> tuple[int, int]:
    """A 2PC producer writes two records to each partition and stops (it prepared)."""
    r = init_2pc(h, txn_id)
    assert h.coord.add_partitions(txn_id, r.producer_id, r.producer_epoch, list(tps)) == Errors.NONE
    for tp in tps:
        h.produce(r.producer_id, r.producer_epoch, 0, tp, n=2)
    return r.producer_id, r.producer_epoch


def test_refused_unless_the_broker_allows_it(tmp_path: Path) -> None:
    h = Harness(tmp_path)  # transaction.two.phase.commit.enable defaults to false, as Kafka's
    r = h.coord.init_producer_id("tx", TIMEOUT_MS, enable_2pc=True)
    assert r.error == Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED and r.producer_id == -1
    assert "tx" not in h.coord.state.transactions
    r = h.coord.init_producer_id("tx", TIMEOUT_MS, enable_2pc=True, keep_prepared_txn=True)
    assert r.error == Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert h.coord.init_producer_id("tx", TIMEOUT_MS).error == Errors.NONE  # plain transactions still work


def test_keep_without_2pc_is_an_invalid_request(h: Harness) -> None:
    assert h.coord.init_producer_id("tx", TIMEOUT_MS, keep_prepared_txn=True).error == Errors.INVALID_REQUEST


def test_a_2pc_id_has_no_timeout_and_keeps_that_across_restarts(h: Harness) -> None:
    # The requested timeout is not checked: the id's transactions never time out.
    r = h.coord.init_producer_id("tx", 10 * 900_000, enable_2pc=True)
    assert r.error == Errors.NONE
    assert h.coord.describe("tx").timeout_ms == TWO_PHASE_COMMIT_TIMEOUT_MS
    assert h.coord.describe("tx").two_phase_commit
    h.reload()
    assert h.coord.describe("tx").two_phase_commit
    # A plain InitProducerId turns the id back into an ordinary one.
    h.init()
    assert h.coord.describe("tx").timeout_ms == TIMEOUT_MS


def test_the_timeout_aborts_a_plain_transaction_but_never_a_2pc_one(h: Harness) -> None:
    begin_2pc(h, "two-pc")
    h.begin("plain", tps=(T0,))
    h.sched.advance(TIMEOUT_MS + 2 * ABORT_INTERVAL_MS)
    h.drain()
    assert h.state_of("plain") is TxnState.COMPLETE_ABORT
    assert h.state_of("two-pc") is TxnState.ONGOING
    h.reload()
    h.sched.advance(30 * 24 * 3600 * 1000)  # longer than Integer.MAX_VALUE ms
    h.drain()
    assert h.state_of("two-pc") is TxnState.ONGOING
    assert h.lso(T0)[0] == 0  # the prepared transaction still pins the LSO


def test_keep_prepared_hands_a_newer_epoch_and_reports_the_kept_transaction(h: Harness) -> None:
    pid, epoch = begin_2pc(h)
    r = init_2pc(h, keep=True)
    assert (r.producer_id, r.producer_epoch) == (pid, epoch + 1)
    assert (r.ongoing_txn_producer_id, r.ongoing_txn_producer_epoch) == (pid, epoch)
    assert h.state_of() is TxnState.ONGOING
    assert h.coord.describe("tx").partitions == {T0, T1}
    assert h.markers(T0) == [] and h.lso(T0) == (0, 2)  # nothing aborted
    # The old instance is fenced at the coordinator, and in the partitions it wrote to.
    assert h.coord.end_transaction("tx", pid, epoch, commit=True).error == Errors.PRODUCER_FENCED
    assert h.coord.add_partitions("tx", pid, epoch, [T0]) == Errors.PRODUCER_FENCED
    assert h.coord.is_fenced_by_kept_transaction("tx", pid, epoch)
    assert not h.coord.is_fenced_by_kept_transaction("tx", pid, epoch + 1)
    # The new instance may only end the kept transaction.
    assert h.coord.add_partitions("tx", pid, epoch + 1, [T0]) == Errors.INVALID_TXN_STATE
    assert h.coord.verify_partition("tx", pid, epoch + 1, "t", 0) == Errors.INVALID_TXN_STATE
    # A crash loop: every keep bumps the client's epoch, the kept transaction stays.
    r = init_2pc(h, keep=True)
    assert (r.producer_id, r.producer_epoch, r.ongoing_txn_producer_epoch) == (pid, epoch + 2, epoch)
    h.reload()  # both pairs are in __transaction_state
    r = init_2pc(h, keep=True)
    assert (r.producer_id, r.producer_epoch) == (pid, epoch + 3)
    assert (r.ongoing_txn_producer_id, r.ongoing_txn_producer_epoch) == (pid, epoch)


@pytest.mark.parametrize("commit", [True, False])
def test_the_new_instance_ends_the_kept_transaction(h: Harness, commit: bool) -> None:
    pid, epoch = begin_2pc(h)
    r = init_2pc(h, keep=True)
    client = (r.producer_id, r.producer_epoch)
    assert h.coord.end_transaction("tx", *client, commit=commit).error == Errors.NONE
    h.drain()
    state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
    assert h.state_of() is state
    kind = "COMMIT" if commit else "ABORT"
    # The markers carry the client's (newer) epoch: the partitions accept them and from
    # then on refuse the old instance.
    assert h.markers(T0) == [(2, epoch + 1, kind, 0)] and h.markers(T1) == [(2, epoch + 1, kind, 0)]
    assert h.lso(T0) == (3, 3)
    assert h.coord.end_transaction("tx", *client, commit=commit).error == Errors.NONE  # a retry
    assert h.coord.end_transaction("tx", pid, epoch, commit=commit).error == Errors.PRODUCER_FENCED
    assert not h.coord.is_fenced_by_kept_transaction("tx", pid, epoch)
    # The client goes on with its pair.
    assert h.coord.add_partitions("tx", *client, [T0]) == Errors.NONE
    h.produce(*client, 0, T0)
    h.reload()
    assert h.coord.end_transaction("tx", *client, commit=True).error == Errors.NONE
    h.drain()
    assert init_2pc(h, keep=True).ongoing_txn_producer_id == -1
    assert h.coord.describe("tx").producer_epoch == epoch + 2


def test_keep_prepared_false_aborts_a_kept_transaction_above_every_epoch_handed_out(h: Harness) -> None:
    pid, epoch = begin_2pc(h)
    init_2pc(h, keep=True)
    init_2pc(h, keep=True)  # the client now has epoch + 2
    r = h.coord.init_producer_id("tx", TIMEOUT_MS, enable_2pc=True)
    assert r.error == Errors.CONCURRENT_TRANSACTIONS
    h.drain()
    assert h.state_of() is TxnState.COMPLETE_ABORT
    assert h.markers(T0) == [(2, epoch + 3, "ABORT", 0)]
    assert h.coord.end_transaction("tx", pid, epoch + 2, commit=True).error == Errors.PRODUCER_FENCED
    r = init_2pc(h)
    assert (r.producer_id, r.producer_epoch, r.ongoing_txn_producer_id) == (pid, epoch + 4, -1)


def test_keep_prepared_aborts_a_transaction_that_is_not_2pc(h: Harness) -> None:
    pid, epoch = h.begin("tx", tps=(T0,))
    r = h.coord.init_producer_id("tx", TIMEOUT_MS, enable_2pc=True, keep_prepared_txn=True)
    assert r.error == Errors.CONCURRENT_TRANSACTIONS  # never safe from its timeout: aborted
    h.drain()
    assert h.markers(T0) == [(2, epoch + 1, "ABORT", 0)]
    r = init_2pc(h, keep=True)
    assert (r.producer_id, r.producer_epoch, r.ongoing_txn_producer_id) == (pid, epoch + 2, -1)


def test_keep_prepared_with_nothing_open(h: Harness) -> None:
    r = init_2pc(h, keep=True)
    assert r.ongoing_txn_producer_id == -1 and r.ongoing_txn_producer_epoch == -1
    pid, epoch = r.producer_id, r.producer_epoch
    assert h.coord.add_partitions("tx", pid, epoch, [T0]) == Errors.NONE
    assert h.coord.end_transaction("tx", pid, epoch, commit=True).error == Errors.NONE
    h.drain()
    r = init_2pc(h, keep=True)  # the outcome was reached before: nothing to keep
    assert (r.producer_epoch, r.ongoing_txn_producer_id) == (epoch + 1, -1)


def test_a_kept_transaction_in_prepare_commit_rolls_forward_after_a_restart(h: Harness) -> None:
    _, epoch = begin_2pc(h)
    r = init_2pc(h, keep=True)
    assert h.coord.end_transaction("tx", r.producer_id, r.producer_epoch, commit=True).error == Errors.NONE
    h.reload()  # the broker died before any marker
    h.drain()
    assert h.state_of() is TxnState.COMPLETE_COMMIT
    assert h.markers(T0) == [(2, epoch + 1, "COMMIT", 0)]
    assert h.coord.describe("tx").producer_epoch == epoch + 1


def test_exhausted_client_epochs_move_the_client_to_a_new_producer_id(h: Harness) -> None:
    pid, _ = begin_2pc(h)
    m = h.coord.state.transactions["tx"]
    m.producer_epoch = 32764  # as if 32764 instances had come and gone (the partitions only see higher epochs)
    assert h.coord.add_partitions("tx", pid, 32764, [T0]) == Errors.NONE
    r = init_2pc(h, keep=True)
    assert (r.producer_id, r.producer_epoch, r.ongoing_txn_producer_epoch) == (pid, 32765, 32764)
    r = init_2pc(h, keep=True)
    assert (r.producer_id, r.producer_epoch) == (pid, 32766)
    r = init_2pc(h, keep=True)  # 32766 is exhausted: epoch 0 of a new producer id
    new_pid = r.producer_id
    assert new_pid != pid and r.producer_epoch == 0
    assert (r.ongoing_txn_producer_id, r.ongoing_txn_producer_epoch) == (pid, 32764)
    h.reload()
    assert h.coord.end_transaction("tx", new_pid, 0, commit=True).error == Errors.NONE
    h.drain()
    # The markers end the old producer id's transaction under its last epoch, above every
    # epoch handed out to an instance of that id.
    assert h.markers(T0) == [(2, 32767, "COMMIT", 0)]
    assert h.coord.describe("tx").producer_id == new_pid
    assert h.coord.end_transaction("tx", new_pid, 0, commit=True).error == Errors.NONE  # a retry


def test_aborting_a_kept_transaction_whose_client_moved_to_a_new_producer_id(h: Harness) -> None:
    pid, _ = begin_2pc(h)
    h.coord.state.transactions["tx"].producer_epoch = 32764
    for _ in range(3):
        r = init_2pc(h, keep=True)  # 32765, 32766, then epoch 0 of a new producer id
    assert r.producer_id != pid
    assert h.coord.init_producer_id("tx", TIMEOUT_MS, enable_2pc=True).error == Errors.CONCURRENT_TRANSACTIONS
    h.drain()
    assert h.markers(T0) == [(2, 32767, "ABORT", 0)]  # above every epoch of pid handed out
    r = init_2pc(h)
    assert r.producer_id not in (pid, -1) and r.producer_epoch == 0  # pid's epochs are used up


def test_log_value_with_the_kept_pair_is_flexible_and_round_trips() -> None:
    kept = TransactionLogValue(7, 3, TWO_PHASE_COMMIT_TIMEOUT_MS, TxnState.ONGOING, frozenset({T0, T1}),
                               1000, 900, next_producer_id=7, next_producer_epoch=5)
    data = encode_value(kept)
    assert data[:2] == b"\x00\x01"  # version 1
    assert decode_value(data) == kept
    plain = TransactionLogValue(7, 3, TWO_PHASE_COMMIT_TIMEOUT_MS, TxnState.ONGOING, frozenset({T0}), 1000, 900)
    assert encode_value(plain)[:2] == b"\x00\x00" and decode_value(encode_value(plain)) == plain
    empty = TransactionLogValue(7, 3, 100, TxnState.EMPTY, frozenset(), 1000, -1, 8, 0)
    assert decode_value(encode_value(empty)) == empty

"""The producer's TransactionManager: its state table (every one of the 64 pairs), the API
methods' state checks, the order of coordinator requests, sequence bookkeeping (Java's TxnPartitionMap)
and the error tables of the request handlers, driven with kio responses — no I/O."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from eoslog.client.errors import (
    ConcurrentTransactionsError,
    IllegalStateError,
    InvalidTxnStateError,
    KafkaTimeoutError,
    OutOfOrderSequenceNumberError,
    ProducerFencedError,
    TopicAuthorizationFailedError,
    UnresolvedSequenceError,
    error_for,
)
from eoslog.client.producer.batch import ProducerBatch
from eoslog.client.producer.transaction_manager import (
    VALID_PREVIOUS,
    ProducerIdAndEpoch,
    State,
    TransactionManager,
    TxnResult,
)
from eoslog.client.producer.txn_requests import (
    AddOffsetsToTxnHandler,
    AddPartitionsToTxnHandler,
    EndTxnHandler,
    InitProducerIdHandler,
    Outcome,
    TxnOffsetCommitHandler,
)
from eoslog.client.types import ConsumerGroupMetadata, OffsetAndMetadata, PreparedTxnState
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import build, request_types, response_types

S = State
# Kafka's TransactionManager.isTransitionValid, written out here as (from, to) pairs.
LEGAL = {
    (S.READY, S.UNINITIALIZED), (S.ABORTABLE_ERROR, S.UNINITIALIZED),
    (S.UNINITIALIZED, S.INITIALIZING), (S.ABORTING_TRANSACTION, S.INITIALIZING),
    (S.COMMITTING_TRANSACTION, S.INITIALIZING),
    (S.INITIALIZING, S.READY), (S.COMMITTING_TRANSACTION, S.READY), (S.ABORTING_TRANSACTION, S.READY),
    (S.READY, S.IN_TRANSACTION),
    (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION),
    (S.IN_TRANSACTION, S.ABORTING_TRANSACTION), (S.ABORTABLE_ERROR, S.ABORTING_TRANSACTION),
    # KIP-939: prepare_transaction(), or init_transactions(keep_prepared_txn) found one open.
    (S.IN_TRANSACTION, S.PREPARED_TRANSACTION), (S.INITIALIZING, S.PREPARED_TRANSACTION),
    (S.PREPARED_TRANSACTION, S.COMMITTING_TRANSACTION), (S.PREPARED_TRANSACTION, S.ABORTING_TRANSACTION),
    (S.IN_TRANSACTION, S.ABORTABLE_ERROR), (S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR),
    (S.ABORTABLE_ERROR, S.ABORTABLE_ERROR), (S.INITIALIZING, S.ABORTABLE_ERROR),
    *((s, S.FATAL_ERROR) for s in State),
}


def tm_in(state: State, txn_id: str | None = "txn") -> TransactionManager:
    tm = TransactionManager(transactional_id=txn_id)
    tm.state = state
    tm.producer = ProducerIdAndEpoch(1000, 3)
    return tm


def test_table_names_every_state() -> None:
    assert set(VALID_PREVIOUS) == set(State)


@pytest.mark.parametrize(("source", "target"), list(itertools.product(State, State)),
                         ids=lambda s: s.name)
def test_transition(source: State, target: State) -> None:
    tm = tm_in(source)
    if (source, target) in LEGAL:
        tm.transition_to(target, RuntimeError("cause"))
        assert tm.state is target
    else:
        with pytest.raises(IllegalStateError, match=f"from state {source.name} to state {target.name}"):
            tm.transition_to(target)
        assert tm.state is source


# -- API methods and their state checks -----------------------------------------------------

def test_transactional_methods_on_an_idempotent_producer() -> None:
    tm = tm_in(S.READY, txn_id=None)
    with pytest.raises(IllegalStateError, match="non-transactional"):
        tm.begin_transaction()


@pytest.mark.parametrize("state", [S.UNINITIALIZED, S.INITIALIZING, S.IN_TRANSACTION, S.COMMITTING_TRANSACTION,
                                   S.ABORTING_TRANSACTION])
def test_begin_transaction_needs_ready(state: State) -> None:
    with pytest.raises(IllegalStateError):
        tm_in(state).begin_transaction()


def test_begin_in_an_error_state_raises_the_error_that_caused_it() -> None:
    tm = tm_in(S.IN_TRANSACTION)
    cause = TopicAuthorizationFailedError("no")
    tm.transition_to_abortable(cause)
    with pytest.raises(TopicAuthorizationFailedError):
        tm.begin_transaction()
    with pytest.raises(TopicAuthorizationFailedError):
        tm.begin_commit()
    tm.begin_abort()  # the way out of ABORTABLE_ERROR
    assert tm.state is S.ABORTING_TRANSACTION


def test_commit_then_abort_is_illegal() -> None:
    tm = tm_in(S.IN_TRANSACTION)
    tm.begin_commit()
    with pytest.raises(IllegalStateError):
        tm.begin_abort()


def test_a_timed_out_call_is_retried_by_calling_it_again() -> None:
    tm = tm_in(S.IN_TRANSACTION)
    first = tm.begin_commit()
    assert tm.begin_commit() is first  # the pending result, not a second EndTxn
    with pytest.raises(IllegalStateError, match="previous call to `commit_transaction` timed out"):
        tm.begin_abort()


def test_a_commit_that_completed_after_its_call_timed_out_is_what_the_retry_gets() -> None:
    """Java's isAcked: seen in CI on Kafka's cluster, a commit_transaction timed out after 30 s,
    completed a moment later, and the retry raised 'Cannot commit a transaction in state READY'."""
    tm = tm_in(S.IN_TRANSACTION)
    first = tm.begin_commit()
    first.succeed()  # the EndTxn answered after the caller's wait timed out (never acked)
    tm.transition_to(S.READY)
    assert tm.begin_commit() is first
    asyncio.run(first.wait(0))  # the retry sees the success: acked now
    with pytest.raises(IllegalStateError, match="READY"):
        tm.begin_commit()  # a second commit with no transaction begun is still refused
    tm.begin_transaction()
    assert tm.begin_commit() is not first


def test_send_needs_a_transaction() -> None:
    with pytest.raises(IllegalStateError, match="init_transactions"):
        tm_in(S.UNINITIALIZED).fail_if_not_ready_for_send()
    with pytest.raises(IllegalStateError, match="READY"):
        tm_in(S.READY).fail_if_not_ready_for_send()
    tm_in(S.IN_TRANSACTION).fail_if_not_ready_for_send()
    tm_in(S.READY, txn_id=None).fail_if_not_ready_for_send()  # idempotent: always


def test_fatal_error_is_final() -> None:
    tm = tm_in(S.IN_TRANSACTION)
    tm.transition_to_fatal(ProducerFencedError("fenced"))
    for call in (tm.begin_transaction, tm.begin_commit, tm.begin_abort, tm.fail_if_not_ready_for_send):
        with pytest.raises(ProducerFencedError):
            call()


# -- coordinator request order --------------------------------------------------------------

def test_first_write_to_a_partition_adds_it_before_anything_else() -> None:
    tm = tm_in(S.IN_TRANSACTION)
    tm.maybe_add_partition(("t", 0))
    tm.maybe_add_partition(("t", 1))
    tm.maybe_add_partition(("t", 0))
    handler = tm.next_request_handler(has_incomplete_batches=True)
    assert isinstance(handler, AddPartitionsToTxnHandler)
    assert handler.partitions == {("t", 0), ("t", 1)}
    assert not tm.is_send_to_partition_allowed(("t", 0))  # not until the coordinator said yes
    assert handler.handle_response(add_partitions_response({("t", 0): 0, ("t", 1): 0})) is Outcome.DONE
    assert tm.is_send_to_partition_allowed(("t", 0)) and tm.transaction_started
    tm.maybe_add_partition(("t", 0))
    assert tm.next_request_handler(has_incomplete_batches=True) is None  # already in the transaction


def test_end_txn_waits_for_the_batches_and_is_skipped_when_nothing_was_added() -> None:
    tm = tm_in(S.IN_TRANSACTION)
    result = tm.begin_commit()
    assert tm.next_request_handler(has_incomplete_batches=True) is None
    assert tm.next_request_handler(has_incomplete_batches=False) is None  # nothing added: no EndTxn
    assert result.done and result.error is None and tm.state is S.READY

    tm = tm_in(S.IN_TRANSACTION)
    tm.transaction_started = True
    tm.begin_commit()
    assert tm.next_request_handler(has_incomplete_batches=True) is None
    handler = tm.next_request_handler(has_incomplete_batches=False)
    assert isinstance(handler, EndTxnHandler) and handler.commit


def test_requests_go_in_priority_order() -> None:
    tm = tm_in(S.IN_TRANSACTION)
    tm.transaction_started = True
    tm.send_offsets_to_transaction({("in", 0): OffsetAndMetadata(5)}, ConsumerGroupMetadata("g"))
    tm.maybe_add_partition(("out", 0))
    kinds = []
    while (h := tm.next_request_handler(has_incomplete_batches=False)) is not None:
        kinds.append(type(h))
    assert kinds == [AddOffsetsToTxnHandler, AddPartitionsToTxnHandler]


def test_handlers_queued_in_an_error_state_fail_with_that_error() -> None:
    tm = tm_in(S.IN_TRANSACTION)
    tm.transaction_started = True
    result = tm.begin_commit()
    tm.transition_to_abortable(TopicAuthorizationFailedError("x"))
    assert tm.next_request_handler(has_incomplete_batches=False) is None
    assert isinstance(result.error, TopicAuthorizationFailedError)


# -- handler error tables ---------------------------------------------------------------------

def add_partitions_response(codes: dict[tuple[str, int], int], version: int = 3) -> Any:
    m = response_types(24, version)
    topics: dict[str, list[Any]] = {}
    for (t, p), code in codes.items():
        topics.setdefault(t, []).append(build(m.AddPartitionsToTxnPartitionResult, partition_index=p,
                                              partition_error_code=ErrorCode(code)))
    return build(m.AddPartitionsToTxnResponse, throttle_time=0, results_by_topic_v3_and_below=tuple(
        build(m.AddPartitionsToTxnTopicResult, name=t, results_by_partition=tuple(ps)) for t, ps in topics.items()))


def end_txn_response(code: ErrorCode) -> Any:
    return build(response_types(26, 3).EndTxnResponse, throttle_time=0, error_code=code)


@pytest.mark.parametrize(("code", "outcome", "state", "error"), [
    (ErrorCode.none, Outcome.DONE, S.READY, None),
    (ErrorCode.not_coordinator, Outcome.LOOKUP, S.COMMITTING_TRANSACTION, None),
    (ErrorCode.coordinator_not_available, Outcome.LOOKUP, S.COMMITTING_TRANSACTION, None),
    (ErrorCode.coordinator_load_in_progress, Outcome.RETRY, S.COMMITTING_TRANSACTION, None),
    (ErrorCode.concurrent_transactions, Outcome.RETRY, S.COMMITTING_TRANSACTION, None),
    (ErrorCode.invalid_producer_epoch, Outcome.DONE, S.FATAL_ERROR, ProducerFencedError),
    (ErrorCode.producer_fenced, Outcome.DONE, S.FATAL_ERROR, ProducerFencedError),
    (ErrorCode.invalid_txn_state, Outcome.DONE, S.FATAL_ERROR, InvalidTxnStateError),
])
def test_end_txn_error_table(code: ErrorCode, outcome: Outcome, state: State, error: type | None) -> None:
    tm = tm_in(S.COMMITTING_TRANSACTION)
    result = TxnResult("commit")
    handler = EndTxnHandler(tm, result, commit=True)
    assert handler.handle_response(end_txn_response(code)) is outcome
    assert tm.state is state
    if error is not None:
        assert isinstance(result.error, error) and result.error.fatal
    else:
        assert result.error is None


@pytest.mark.parametrize(("codes", "outcome", "state", "error"), [
    ({("t", 0): ErrorCode.concurrent_transactions, ("t", 1): ErrorCode.operation_not_attempted},
     Outcome.RETRY, S.IN_TRANSACTION, None),
    ({("t", 0): ErrorCode.unknown_topic_or_partition}, Outcome.RETRY, S.IN_TRANSACTION, None),
    ({("t", 0): ErrorCode.not_coordinator}, Outcome.LOOKUP, S.IN_TRANSACTION, None),
    ({("t", 0): ErrorCode.topic_authorization_failed, ("t", 1): ErrorCode.operation_not_attempted},
     Outcome.DONE, S.ABORTABLE_ERROR, TopicAuthorizationFailedError),
    ({("t", 0): ErrorCode.topic_authorization_failed, ("t", 1): ErrorCode.producer_fenced},
     Outcome.DONE, S.FATAL_ERROR, ProducerFencedError),
])
def test_add_partitions_most_severe_error_decides(codes: dict[tuple[str, int], int], outcome: Outcome,
                                                  state: State, error: type | None) -> None:
    tm = tm_in(S.IN_TRANSACTION)
    result = TxnResult("add")
    handler = AddPartitionsToTxnHandler(tm, result, set(codes))
    assert handler.handle_response(add_partitions_response(codes)) is outcome
    assert tm.state is state
    assert (result.error is None) if error is None else isinstance(result.error, error)
    if error is not None and not result.error.fatal:  # type: ignore[union-attr]
        assert result.error.txn_requires_abort  # type: ignore[union-attr]
    assert not tm.is_send_to_partition_allowed(("t", 0))


def test_add_offsets_then_txn_offset_commit() -> None:
    tm = tm_in(S.IN_TRANSACTION)
    result = tm.send_offsets_to_transaction({("in", 2): OffsetAndMetadata(42)}, ConsumerGroupMetadata("g", 3, "m"))
    add = tm.next_request_handler(False)
    assert isinstance(add, AddOffsetsToTxnHandler)
    m = response_types(25, 3)
    assert add.handle_response(build(m.AddOffsetsToTxnResponse, throttle_time=0, error_code=ErrorCode.none)) \
        is Outcome.DONE
    assert not result.done and tm.transaction_started
    assert add.follow_up is not None
    tm.enqueue(add.follow_up)  # as the sender does with a done request's follow-up
    commit = tm.next_request_handler(False)
    assert isinstance(commit, TxnOffsetCommitHandler) and commit.coordinator_key() == "g"
    r = response_types(28, 3)

    def response(code: ErrorCode) -> Any:
        return build(r.TxnOffsetCommitResponse, throttle_time=0, topics=(build(
            r.TxnOffsetCommitResponseTopic, name="in", partitions=(build(
                r.TxnOffsetCommitResponsePartition, partition_index=2, error_code=code),)),))

    assert commit.handle_response(response(ErrorCode.coordinator_load_in_progress)) is Outcome.RETRY
    assert commit.handle_response(response(ErrorCode.none)) is Outcome.DONE
    assert result.done and result.error is None


def test_init_producer_id_sets_the_id_and_an_epoch_bump_restarts_sequences() -> None:
    tm = TransactionManager(transactional_id="txn")
    result = tm.initialize_transactions()
    handler = tm.next_request_handler(False)
    assert isinstance(handler, InitProducerIdHandler)
    m = response_types(22, 4)
    ok = build(m.InitProducerIdResponse, throttle_time=0, error_code=ErrorCode.none, producer_id=77, producer_epoch=0)
    assert handler.handle_response(ok) is Outcome.DONE
    assert tm.state is S.READY and tm.producer == ProducerIdAndEpoch(77, 0) and result.done
    fenced = build(m.InitProducerIdResponse, throttle_time=0, error_code=ErrorCode.invalid_transaction_timeout,
                   producer_id=-1, producer_epoch=-1)
    tm2 = TransactionManager(transactional_id="txn")
    r2 = tm2.initialize_transactions()
    h2 = tm2.next_request_handler(False)
    assert h2 is not None and h2.handle_response(fenced) is Outcome.DONE
    assert tm2.state is S.FATAL_ERROR and r2.error is not None and r2.error.fatal


# -- sequences --------------------------------------------------------------------------------

def batch(tm: TransactionManager, records: int = 2, partition: int = 0) -> ProducerBatch:
    b = ProducerBatch("t", partition, 0.0, 1 << 20)
    for i in range(records):
        b.try_append(i, None, b"v")
    tm.assign_sequence(b)
    b.close()
    return b


def test_sequences_are_consecutive_and_only_the_first_in_flight_is_retried() -> None:
    tm = tm_in(S.READY, txn_id=None)
    b1, b2, b3 = batch(tm, 2), batch(tm, 3), batch(tm, 1)
    assert [b.base_sequence for b in (b1, b2, b3)] == [0, 2, 5]
    assert not tm.should_stop_drain(b1)
    assert tm.should_stop_drain(b2)  # a retry of b2 must wait for b1
    tm.handle_completed_batch(b1, base_offset=10)
    assert not tm.should_stop_drain(b2)
    assert tm.partitions[("t", 0)].last_acked_sequence == 1


def test_one_batch_in_flight_until_the_partition_acknowledges_one_then_pipelining() -> None:
    # The broker takes any first sequence from a producer it holds no state for: a batch behind
    # an unacknowledged sequence 0 could land first (tests/unit/test_client_sender.py).
    tm = tm_in(S.READY, txn_id=None)
    assert not tm.should_stop_drain(unsequenced_batch())  # nothing in flight
    b1 = batch(tm, 2)
    assert tm.should_stop_drain(unsequenced_batch())
    tm.handle_completed_batch(b1, base_offset=0)
    batch(tm, 2)
    assert not tm.should_stop_drain(unsequenced_batch())  # acknowledged: up to max.in.flight


def test_out_of_order_sequence_behind_an_unacknowledged_batch_is_retried_without_a_bump() -> None:
    tm = tm_in(S.READY, txn_id=None)
    batch(tm, 2)
    b2 = batch(tm, 2)
    assert tm.can_retry(ErrorCode.out_of_order_sequence_number, b2, 0, retriable=False)
    assert not tm.epoch_bump_required


def test_a_real_gap_bumps_the_idempotent_epoch_and_rewrites_sequences() -> None:
    tm = tm_in(S.READY, txn_id=None)
    b1 = batch(tm, 2)
    tm.handle_completed_batch(b1, 0)
    b2 = batch(tm, 2)
    b3 = batch(tm, 1)
    assert tm.can_retry(ErrorCode.out_of_order_sequence_number, b2, 0, retriable=False)
    assert tm.epoch_bump_required
    tm.bump_idempotent_epoch_if_needed()
    assert tm.producer == ProducerIdAndEpoch(1000, 4)
    assert (b2.base_sequence, b3.base_sequence, b2.producer_epoch) == (0, 2, 4)
    assert b2.sequence_reset and tm.partitions[("t", 0)].next_sequence == 3


def test_a_transactional_out_of_order_sequence_is_fatal() -> None:
    tm = tm_in(S.IN_TRANSACTION)
    tm.txn_partitions.add(("t", 0))
    b1 = batch(tm, 2)
    assert not tm.can_retry(ErrorCode.out_of_order_sequence_number, b1, 0, retriable=False)
    tm.handle_failed_batch(b1, OutOfOrderSequenceNumberError("gap"), adjust_sequences=True)
    assert tm.state is S.FATAL_ERROR


@pytest.mark.parametrize(("acked", "expected_state", "bump"), [
    (True, S.READY, False),  # the expired batch had landed: nothing to do
    (False, S.READY, True),  # it had not: the idempotent producer bumps its epoch
])
def test_unresolved_sequences_idempotent(acked: bool, expected_state: State, bump: bool) -> None:
    tm = tm_in(S.READY, txn_id=None)
    b1 = batch(tm, 2)
    b2 = batch(tm, 2)
    tm.mark_sequence_unresolved(b1)  # expired after being sent
    assert tm.should_stop_drain(unsequenced_batch())  # no new batches while unresolved
    if acked:
        tm.handle_completed_batch(b2, 5)  # b2 (seq 2-3) acknowledged: b1 must have landed too
    else:
        tm.mark_sequence_unresolved(b2)
    tm.maybe_resolve_sequences()
    assert tm.state is expected_state and tm.epoch_bump_required is bump and not tm.unresolved


def test_unresolved_sequences_are_fatal_for_a_transactional_producer() -> None:
    tm = tm_in(S.IN_TRANSACTION)
    tm.txn_partitions.add(("t", 0))
    b1 = batch(tm, 2)
    tm.mark_sequence_unresolved(b1)
    tm.maybe_resolve_sequences()
    assert tm.state is S.FATAL_ERROR and isinstance(tm.last_error, UnresolvedSequenceError)


def unsequenced_batch() -> ProducerBatch:
    b = ProducerBatch("t", 0, 0.0, 1 << 20)
    b.try_append(0, None, b"x")
    return b


def test_abortable_batch_failure_bumps_the_epoch_after_the_abort() -> None:
    tm = tm_in(S.IN_TRANSACTION)
    tm.txn_partitions.add(("t", 0))
    tm.transaction_started = True
    b1 = batch(tm, 2)
    tm.handle_failed_batch(b1, KafkaTimeoutError("late"), adjust_sequences=True)
    assert tm.state is S.ABORTABLE_ERROR and tm.epoch_bump_required
    result = tm.begin_abort()
    end = tm.next_request_handler(False)
    assert isinstance(end, EndTxnHandler) and not end.commit
    assert end.handle_response(end_txn_response(ErrorCode.none)) is Outcome.DONE
    assert tm.state is S.INITIALIZING and not result.done  # the abort ends with the bump
    init = tm.next_request_handler(False)
    assert isinstance(init, InitProducerIdHandler) and init.epoch_bump
    m = response_types(22, 4)
    init.handle_response(build(m.InitProducerIdResponse, throttle_time=0, error_code=ErrorCode.none,
                               producer_id=1000, producer_epoch=4))
    assert tm.state is S.READY and result.done and result.error is None and not tm.partitions


def test_concurrent_transactions_is_retriable() -> None:
    assert ConcurrentTransactionsError.retriable and not ConcurrentTransactionsError.fatal


# -- two-phase commit (KIP-939) -----------------------------------------------------------------

def tm_2pc(state: State) -> TransactionManager:
    tm = TransactionManager(transactional_id="txn", enable_2pc=True)
    tm.state = state
    tm.producer = ProducerIdAndEpoch(1000, 3)
    return tm


def init_response(pid: int, epoch: int, ongoing: tuple[int, int] = (-1, -1)) -> Any:
    m = response_types(22, 6)
    return build(m.InitProducerIdResponse, throttle_time=0, error_code=ErrorCode.none, producer_id=pid,
                 producer_epoch=epoch, ongoing_txn_producer_id=ongoing[0], ongoing_txn_producer_epoch=ongoing[1])


def test_prepare_needs_2pc_and_a_transaction() -> None:
    with pytest.raises(InvalidTxnStateError, match="2PC is not enabled"):
        tm_in(S.IN_TRANSACTION).prepare_transaction()
    with pytest.raises(IllegalStateError, match="READY"):
        tm_2pc(S.READY).prepare_transaction()
    tm = tm_2pc(S.IN_TRANSACTION)
    tm.transition_to_abortable(TopicAuthorizationFailedError("x"))
    with pytest.raises(TopicAuthorizationFailedError):
        tm.prepare_transaction()
    tm = tm_2pc(S.IN_TRANSACTION)
    tm.maybe_add_partition(("t", 0))  # not yet added: records are still on their way
    with pytest.raises(IllegalStateError, match="flush"):
        tm.prepare_transaction()


def test_prepared_allows_only_commit_abort_or_complete() -> None:
    tm = tm_2pc(S.IN_TRANSACTION)
    tm.transaction_started = True
    state = tm.prepare_transaction()
    assert tm.state is S.PREPARED_TRANSACTION
    assert state.to_string() == "1000:3" and tm.prepared_transaction_state() == state
    for call in (tm.begin_transaction, tm.fail_if_not_ready_for_send, tm.check_can_prepare,
                 lambda: tm.send_offsets_to_transaction({("in", 0): OffsetAndMetadata(1)}, ConsumerGroupMetadata("g"))):
        with pytest.raises(IllegalStateError, match="prepared state"):
            call()
    assert tm.state is S.PREPARED_TRANSACTION
    result = tm.complete_prepared(state)  # the same transaction: commit
    assert tm.state is S.COMMITTING_TRANSACTION
    handler = tm.next_request_handler(has_incomplete_batches=False)
    assert isinstance(handler, EndTxnHandler) and handler.commit
    assert handler.producer_fields()["producer_epoch"] == 3
    assert handler.handle_response(end_txn_response(ErrorCode.none)) is Outcome.DONE
    assert result.done and result.error is None and tm.state is S.READY
    assert tm.prepared_transaction_state() is None
    with pytest.raises(InvalidTxnStateError, match="no transaction has been prepared"):
        tm.complete_prepared(state)


def test_complete_with_another_state_aborts() -> None:
    tm = tm_2pc(S.IN_TRANSACTION)
    tm.transaction_started = True
    state = tm.prepare_transaction()
    with pytest.raises(TypeError, match="from_string"):
        tm.complete_prepared(state.to_string())  # type: ignore[arg-type]
    assert tm.state is S.PREPARED_TRANSACTION
    tm.complete_prepared(PreparedTxnState(state.producer_id, state.epoch + 1))
    assert tm.state is S.ABORTING_TRANSACTION
    handler = tm.next_request_handler(has_incomplete_batches=False)
    assert isinstance(handler, EndTxnHandler) and not handler.commit


def test_init_keeping_a_prepared_transaction() -> None:
    with pytest.raises(InvalidTxnStateError, match=r"two\.phase"):
        TransactionManager(transactional_id="txn").initialize_transactions(keep_prepared_txn=True)
    tm = TransactionManager(transactional_id="txn", enable_2pc=True)
    result = tm.initialize_transactions(keep_prepared_txn=True)
    handler = tm.next_request_handler(False)
    assert isinstance(handler, InitProducerIdHandler)
    request = handler.request(request_types(22, 6), 6)
    assert request.enable2_pc and request.keep_prepared_txn
    assert handler.handle_response(init_response(77, 5, ongoing=(77, 4))) is Outcome.DONE
    assert result.done and tm.state is S.PREPARED_TRANSACTION and tm.producer == ProducerIdAndEpoch(77, 5)
    assert tm.prepared_transaction_state() == PreparedTxnState(77, 4)
    tm.complete_prepared(PreparedTxnState.from_string("77:4"))
    end = tm.next_request_handler(False)  # EndTxn is sent although this instance added nothing
    assert isinstance(end, EndTxnHandler) and end.commit and end.producer_fields()["producer_epoch"] == 5

    tm = TransactionManager(transactional_id="txn", enable_2pc=True)
    tm.initialize_transactions(keep_prepared_txn=True)
    handler = tm.next_request_handler(False)
    assert handler is not None and handler.handle_response(init_response(77, 6)) is Outcome.DONE
    assert tm.state is S.READY and tm.prepared_transaction_state() is None  # nothing was open


def test_2pc_init_without_keep_and_a_plain_init() -> None:
    tm = TransactionManager(transactional_id="txn", enable_2pc=True)
    tm.initialize_transactions()
    handler = tm.next_request_handler(False)
    assert handler is not None
    request = handler.request(request_types(22, 6), 6)
    assert request.enable2_pc and not request.keep_prepared_txn
    plain = TransactionManager(transactional_id="txn")
    plain.initialize_transactions()
    handler = plain.next_request_handler(False)
    assert handler is not None and not handler.request(request_types(22, 6), 6).enable2_pc


def test_prepared_txn_state_strings() -> None:
    assert PreparedTxnState(123, 4).to_string() == "123:4"
    assert PreparedTxnState.from_string("123:4") == PreparedTxnState(123, 4)
    assert PreparedTxnState().to_string() == "" and not PreparedTxnState().has_transaction
    assert PreparedTxnState.from_string("") == PreparedTxnState.from_string(None) == PreparedTxnState()
    for bad in ("123", "1:2:3", "a:b", "-5:1", "1:40000"):
        with pytest.raises(ValueError):
            PreparedTxnState.from_string(bad)


# -- transaction version 2 (KIP-890 part 2) ------------------------------------------------------

class Features:
    """What the brokers last said in ApiVersions: (epoch, finalized levels)."""

    def __init__(self, level: int) -> None:
        self.epoch, self.level = 1, level

    def set(self, level: int) -> None:
        self.epoch, self.level = self.epoch + 1, level

    def __call__(self) -> tuple[int, dict[str, int]]:
        return self.epoch, {"transaction.version": self.level}


def tm_initialized(features: Features) -> TransactionManager:
    tm = TransactionManager(transactional_id="txn", finalized_features=features)
    tm.initialize_transactions()
    init = tm.next_request_handler(False)
    assert init is not None
    init.handle_response(init_response(1000, 3))
    assert tm.state is S.READY
    return tm


def end_txn_v5_response(pid: int, epoch: int) -> Any:
    return build(response_types(26, 5).EndTxnResponse, throttle_time=0, error_code=ErrorCode.none,
                 producer_id=pid, producer_epoch=epoch)


def test_v2_partitions_and_offsets_need_no_add_request() -> None:
    tm = tm_initialized(Features(2))
    assert tm.transaction_v2
    tm.begin_transaction()
    tm.maybe_add_partition(("t", 0))
    assert tm.is_send_to_partition_allowed(("t", 0)) and tm.transaction_started  # Produce v12 adds it
    result = tm.send_offsets_to_transaction({("in", 2): OffsetAndMetadata(42)}, ConsumerGroupMetadata("g"))
    commit = tm.next_request_handler(False)
    assert isinstance(commit, TxnOffsetCommitHandler) and commit.transaction_v2  # no AddOffsetsToTxn
    assert version_of(commit.build(versions({28: (0, 5)}))) == 5
    assert not result.done
    assert tm.next_request_handler(False) is None


def versions(ranges: dict[int, tuple[int, int]]) -> Any:
    from eoslog.client.versions import ApiVersionTable
    return ApiVersionTable(ranges)


def version_of(request: object) -> int:
    return int(type(request).__module__.split(".")[-2].removeprefix("v"))


def test_v2_end_txn_takes_the_new_epoch_and_restarts_sequences() -> None:
    tm = tm_initialized(Features(2))
    tm.begin_transaction()
    tm.maybe_add_partition(("t", 0))
    b = batch(tm, 3)
    tm.handle_completed_batch(b, 10)
    assert tm.partitions[("t", 0)].next_sequence == 3
    result = tm.begin_commit()
    end = tm.next_request_handler(False)
    assert isinstance(end, EndTxnHandler) and version_of(end.build(versions({26: (0, 5)}))) == 5
    assert end.handle_response(end_txn_v5_response(1000, 4)) is Outcome.DONE
    assert result.done and result.error is None and tm.state is S.READY
    assert tm.producer == ProducerIdAndEpoch(1000, 4)
    tm.begin_transaction()
    tm.maybe_add_partition(("t", 0))
    assert batch(tm, 1).base_sequence == 0  # sequence 0 under the new epoch


def test_v2_epoch_exhausted_end_txn_gives_a_new_producer_id() -> None:
    tm = tm_initialized(Features(2))
    tm.begin_transaction()
    tm.maybe_add_partition(("t", 0))
    tm.begin_abort()
    end = tm.next_request_handler(False)
    assert end is not None and end.handle_response(end_txn_v5_response(2000, 0)) is Outcome.DONE
    assert tm.producer == ProducerIdAndEpoch(2000, 0) and tm.state is S.READY


def test_v2_abortable_batch_failure_needs_no_client_side_bump() -> None:
    tm = tm_initialized(Features(2))
    tm.begin_transaction()
    tm.maybe_add_partition(("t", 0))
    tm.handle_failed_batch(batch(tm, 2), KafkaTimeoutError("late"), adjust_sequences=True)
    assert tm.state is S.ABORTABLE_ERROR and not tm.epoch_bump_required  # the abort's EndTxn bumps
    result = tm.begin_abort()
    end = tm.next_request_handler(False)
    assert end is not None and end.handle_response(end_txn_v5_response(1000, 4)) is Outcome.DONE
    assert tm.state is S.READY and result.done and not tm.partitions


def test_v1_producer_sees_the_cluster_move_to_v2_and_bumps_once() -> None:
    features = Features(1)
    tm = tm_initialized(features)
    assert not tm.transaction_v2
    tm.begin_transaction()
    tm.maybe_add_partition(("t", 0))
    add = tm.next_request_handler(True)
    assert isinstance(add, AddPartitionsToTxnHandler)  # version 1: the client adds
    add.handle_response(add_partitions_response({("t", 0): 0}))
    features.set(2)  # kafka-features.sh upgrade --feature transaction.version=2
    result = tm.begin_commit()
    end = tm.next_request_handler(False)
    assert isinstance(end, EndTxnHandler) and not end.transaction_v2  # this transaction began under 1
    assert version_of(end.build(versions({26: (0, 5)}))) == 4
    end.handle_response(end_txn_response(ErrorCode.none))
    assert tm.state is S.INITIALIZING and not result.done
    init = tm.next_request_handler(False)
    assert isinstance(init, InitProducerIdHandler) and init.epoch_bump
    init.handle_response(init_response(1000, 4))
    assert result.done and tm.state is S.READY and tm.transaction_v2 and tm.producer.epoch == 4
    tm.begin_transaction()
    tm.maybe_add_partition(("t", 1))
    assert tm.is_send_to_partition_allowed(("t", 1))


def test_a_v2_producer_on_a_downgraded_cluster_goes_back_to_v1_without_a_bump() -> None:
    features = Features(2)
    tm = tm_initialized(features)
    tm.begin_transaction()
    tm.maybe_add_partition(("t", 0))
    features.set(1)
    tm.begin_commit()
    end = tm.next_request_handler(False)
    assert isinstance(end, EndTxnHandler) and end.transaction_v2
    end.handle_response(end_txn_v5_response(1000, 4))
    assert tm.state is S.READY and not tm.transaction_v2
    tm.begin_transaction()
    tm.maybe_add_partition(("t", 0))
    assert isinstance(tm.next_request_handler(True), AddPartitionsToTxnHandler)


def test_v2_abort_after_the_transactional_id_expired_gets_a_new_producer_id() -> None:
    """Version 2: the Produce v12 failed (the coordinator forgot the id, so nothing was written)
    and the abort's EndTxn gets INVALID_PRODUCER_ID_MAPPING: the abort is done, and the next
    transaction starts under a new producer id, as version 1's refused AddPartitionsToTxn leads to."""
    tm = tm_initialized(Features(2))
    tm.begin_transaction()
    tm.maybe_add_partition(("t", 0))
    tm.handle_failed_batch(batch(tm, 1), error_for(ErrorCode.invalid_producer_id_mapping), adjust_sequences=False)
    assert tm.state is S.ABORTABLE_ERROR
    result = tm.begin_abort()
    end = tm.next_request_handler(False)
    assert isinstance(end, EndTxnHandler)
    refused = build(response_types(26, 5).EndTxnResponse, throttle_time=0,
                    error_code=ErrorCode.invalid_producer_id_mapping, producer_id=-1, producer_epoch=-1)
    assert end.handle_response(refused) is Outcome.DONE
    init = tm.next_request_handler(False)
    assert isinstance(init, InitProducerIdHandler) and init.epoch_bump and not result.done
    init.handle_response(init_response(2000, 0))
    assert result.done and result.error is None and tm.state is S.READY
    assert tm.producer == ProducerIdAndEpoch(2000, 0)

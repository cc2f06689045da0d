"""Transaction version 2 (KIP-890 part 2) in the coordinator and the partitions, driven directly
as tests/unit/test_txn_coordinator.py drives version 1 (its Harness: real logs, the real marker
path, a manual clock): every EndTxn bumps the epoch (the markers carry the new one, the answer
hands it to the client), a retry is told from the next EndTxn by its epoch, an epoch overflow
moves the transaction to a new producer id — carried by the PREPARE record, so a coordinator that
loads it completes it the same way — an abort of nothing is allowed, aborts the coordinator starts
follow the finalized version, and a partition takes a v2 marker only above the producer's epoch.

Mutants (not committed), each failing a test here: prepare_abort_or_commit not bumping the epoch
for v2 (test_every_end_bumps_the_epoch...); the loader dropping the rotated producer id
(test_an_epoch_overflow_moves...: the reloaded coordinator completed under the old id);
validate_marker accepting an equal epoch while the transaction is open (test_a_partition_takes...).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from test_txn_coordinator import T0, T1, TIMEOUT_MS, TXN_PARTITIONS, Harness

from eoslog.coordinator.internal_topic import TRANSACTION_STATE_TOPIC
from eoslog.coordinator.transaction import TxnState
from eoslog.coordinator.transaction.log import (
    TransactionLogValue,
    decode_value,
    encode_key,
    encode_value,
    transaction_partition_for,
)
from eoslog.errors import Errors
from eoslog.records import ControlRecordType, build_batch, build_control_batch
from eoslog.storage import AppendOrigin
from eoslog.storage.producer_state import ProducerStateError
from eoslog.types import TopicPartition

TV2 = 2


def finalized_tv2(h: Harness) -> Harness:
    """The coordinator of a broker with transaction.version=2 finalized: version 1 values, its own
    aborts as v2."""
    h.coord.state.value_version = lambda: 1
    h.coord.transaction_version = lambda: TV2
    return h


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return finalized_tv2(Harness(tmp_path))


def add(h: Harness, pid: int, epoch: int, tps: tuple[TopicPartition, ...] = (T0,), txn: str = "tx") -> Errors:
    return h.coord.add_partitions(txn, pid, epoch, list(tps), TV2)


def begin_v2(h: Harness, pid: int, epoch: int, tps: tuple[TopicPartition, ...] = (T0,)) -> None:
    assert add(h, pid, epoch, tps) == Errors.NONE
    for tp in tps:
        h.produce(pid, epoch, 0, tp, n=2)


def end_v2(h: Harness, pid: int, epoch: int, commit: bool = True, txn: str = "tx") -> tuple[Errors, int, int]:
    r = h.coord.end_transaction(txn, pid, epoch, commit, TV2)
    return r.error, r.producer_id, r.producer_epoch


def records_of(h: Harness, txn: str = "tx") -> list[TransactionLogValue]:
    """Every value written for ``txn`` to its __transaction_state partition, in order."""
    from eoslog.records import decode_records, iter_batch_headers

    tp = TopicPartition(TRANSACTION_STATE_TOPIC, transaction_partition_for(txn, TXN_PARTITIONS))
    plog = h.logs.get_log(*tp)
    assert plog is not None
    out, offset = [], plog.log_start_offset
    while offset < plog.log_end_offset:  # a read ends at its segment's end
        data = plog.read(offset, 1 << 22).records
        for pos, b in iter_batch_headers(data):
            offset = b.next_offset
            for r in decode_records(data[pos:pos + b.size]):
                if r.key == encode_key(txn) and r.value is not None:
                    out.append(decode_value(r.value))
    return out


def test_every_end_bumps_the_epoch_and_the_answer_and_markers_carry_it(h: Harness) -> None:
    pid, epoch = h.init()
    begin_v2(h, pid, epoch, (T0, T1))
    assert end_v2(h, pid, epoch) == (Errors.NONE, pid, epoch + 1)
    assert h.state_of() is TxnState.PREPARE_COMMIT
    # While the markers are on their way (CompleteCommit pending) any EndTxn is told to retry.
    assert end_v2(h, pid, epoch) == (Errors.CONCURRENT_TRANSACTIONS, -1, -1)
    assert end_v2(h, pid, epoch, commit=False)[0] == Errors.CONCURRENT_TRANSACTIONS
    h.drain()
    assert h.state_of() is TxnState.COMPLETE_COMMIT
    assert [m[1:3] for m in h.markers(T0)] == [m[1:3] for m in h.markers(T1)] == [(epoch + 1, "COMMIT")]
    assert end_v2(h, pid, epoch) == (Errors.NONE, pid, epoch + 1)  # a retry: where it left the producer
    assert end_v2(h, pid, epoch, commit=False)[0] == Errors.INVALID_TXN_STATE
    assert end_v2(h, pid, epoch + 1)[0] == Errors.INVALID_TXN_STATE  # a commit of nothing
    # The next transaction runs at the new epoch; the old one is fenced at the coordinator and
    # in the partition (the marker moved it).
    assert add(h, pid, epoch) == Errors.PRODUCER_FENCED
    with pytest.raises(ProducerStateError) as refused:
        h.produce(pid, epoch, 2, T0)
    assert refused.value.error is Errors.INVALID_PRODUCER_EPOCH
    begin_v2(h, pid, epoch + 1)
    assert end_v2(h, pid, epoch + 1, commit=False) == (Errors.NONE, pid, epoch + 2)
    h.drain()
    assert [m[1:3] for m in h.markers(T0)] == [(epoch + 1, "COMMIT"), (epoch + 2, "ABORT")]
    assert h.lso(T0)[0] == h.lso(T0)[1]
    # What Kafka 4.4 writes for such transactions: version 1 values, the client's version 2, the
    # previous producer id, the epoch bumped in PrepareCommit and kept by CompleteCommit.
    written = records_of(h)
    assert [(v.state, v.producer_epoch, v.client_transaction_version) for v in written[-3:]] == [
        (TxnState.ONGOING, epoch + 1, TV2), (TxnState.PREPARE_ABORT, epoch + 2, TV2),
        (TxnState.COMPLETE_ABORT, epoch + 2, TV2)]
    assert {v.previous_producer_id for v in written} == {pid}


def test_an_abort_of_nothing_bumps_the_epoch_a_commit_of_nothing_is_refused(h: Harness) -> None:
    pid, epoch = h.init()
    assert end_v2(h, pid, epoch)[0] == Errors.INVALID_TXN_STATE
    assert end_v2(h, pid, epoch, commit=False) == (Errors.NONE, pid, epoch + 1)
    h.drain()
    assert h.state_of() is TxnState.COMPLETE_ABORT and h.markers(T0) == []
    assert end_v2(h, pid, epoch, commit=False) == (Errors.NONE, pid, epoch + 1)  # its retry
    assert end_v2(h, pid, epoch + 1, commit=False) == (Errors.NONE, pid, epoch + 2)  # the next one
    h.drain()
    assert end_v2(h, pid, epoch + 5, commit=False)[0] == Errors.PRODUCER_FENCED


def test_an_epoch_overflow_moves_the_transaction_to_a_new_producer_id_even_through_a_reload(h: Harness) -> None:
    # A transaction open at epoch 32766 (the last one handed out), as __transaction_state holds it.
    old = 77
    value = TransactionLogValue(old, 32766, TIMEOUT_MS, TxnState.ONGOING, frozenset({T0}), 1, 1,
                                client_transaction_version=TV2)
    h.replicas.append_coordinator_records(
        TopicPartition(TRANSACTION_STATE_TOPIC, transaction_partition_for("tx", TXN_PARTITIONS)),
        build_batch([(encode_key("tx"), encode_value(value, 1), ())], timestamp=1))
    h.reload()
    finalized_tv2(h)
    h.produce(old, 32766, 0, T0)
    error, new_pid, new_epoch = end_v2(h, old, 32766)
    assert error is Errors.NONE and new_pid != old and new_epoch == 0
    prepared = records_of(h)[-1]
    assert (prepared.state, prepared.producer_id, prepared.producer_epoch, prepared.next_producer_id) == (
        TxnState.PREPARE_COMMIT, old, 32767, new_pid)
    h.reload()  # the coordinator fails over before the markers: the new one rolls forward
    finalized_tv2(h)
    h.drain()
    assert h.markers(T0)[-1][1:3] == (32767, "COMMIT")
    m = h.coord.state.transactions["tx"]
    assert (m.state, m.producer_id, m.producer_epoch, m.last_producer_id) == (
        TxnState.COMPLETE_COMMIT, new_pid, 0, old)
    assert end_v2(h, old, 32766) == (Errors.NONE, new_pid, 0)  # a retry from before the overflow
    begin_v2(h, new_pid, 0)
    assert end_v2(h, new_pid, 0) == (Errors.NONE, new_pid, 1)


def test_aborts_the_coordinator_starts_follow_the_finalized_version(h: Harness) -> None:
    pid, epoch = h.init()
    begin_v2(h, pid, epoch)
    h.sched.advance(TIMEOUT_MS + 1)
    assert h.coord.abort_timed_out_transactions() == 1
    h.drain()
    assert h.markers(T0)[-1][1:3] == (epoch + 1, "ABORT")
    m = h.coord.state.transactions["tx"]
    assert (m.state, m.producer_epoch, m.client_transaction_version) == (TxnState.COMPLETE_ABORT, epoch + 1, TV2)
    assert end_v2(h, pid, epoch)[0] in (Errors.PRODUCER_FENCED, Errors.INVALID_TXN_STATE)
    assert add(h, pid, epoch) == Errors.PRODUCER_FENCED
    # A new instance fencing an open transaction: one bump by the abort, one for the new instance.
    pid, epoch = h.init()
    begin_v2(h, pid, epoch)
    assert h.coord.init_producer_id("tx", TIMEOUT_MS).error == Errors.CONCURRENT_TRANSACTIONS
    h.drain()
    assert h.markers(T0)[-1][1:3] == (epoch + 1, "ABORT")
    assert h.init() == (pid, epoch + 2)


def test_a_partition_takes_a_v2_marker_only_above_the_producers_epoch(h: Harness) -> None:
    partition = h.replicas.get_partition(T0)
    assert partition is not None
    h.produce(5, 3, 0, T0)  # producer 5, epoch 3, a transaction open

    def marker(epoch: int, version: int) -> None:
        partition.append_records_to_leader(build_control_batch(
            ControlRecordType.COMMIT, producer_id=5, producer_epoch=epoch, coordinator_epoch=0, timestamp=1,
        ), AppendOrigin.COORDINATOR, -1, version)

    with pytest.raises(ProducerStateError) as refused:
        marker(3, TV2)
    assert refused.value.error is Errors.INVALID_PRODUCER_EPOCH and "<= the last seen epoch 3 (TV2)" in str(
        refused.value)
    marker(3, 0)  # transactions v1 takes the producer's own epoch
    h.produce(5, 3, 1, T0)
    marker(4, TV2)
    assert h.lso(T0)[0] == h.lso(T0)[1]
    marker(4, TV2)  # the same marker again once the transaction ended (Kafka's idempotent retry)
    with pytest.raises(ProducerStateError):
        marker(3, TV2)


def test_the_leader_adds_the_partition_for_a_v2_produce_and_refuses_a_late_one(h: Harness) -> None:
    """The replica layer's path: Produce v12 (ADD_PARTITION) adds the partition at the
    coordinator; once the transaction ended, a Produce of it still on its way is refused."""
    from eoslog.replica.verification import TransactionSupportedOperation

    pid, epoch = h.init()

    def produce(seq: int, e: int) -> Errors:
        batch = build_batch([(None, b"v", ())], timestamp=1, producer_id=pid, producer_epoch=e, base_sequence=seq,
                            transactional=True)
        results = asyncio.run(h.replicas.append_records(
            {T0: batch}, required_acks=-1, timeout_ms=1000, transactional_id="tx",
            operation=TransactionSupportedOperation.ADD_PARTITION))
        return results[T0].error

    assert produce(0, epoch) is Errors.NONE
    assert h.coord.state.transactions["tx"].partitions == {T0}
    assert end_v2(h, pid, epoch, commit=False)[0] is Errors.NONE
    h.drain()
    assert produce(1, epoch) is Errors.INVALID_PRODUCER_EPOCH  # the late Produce of the aborted transaction
    assert h.coord.state.transactions["tx"].state is TxnState.COMPLETE_ABORT  # it added nothing
    assert produce(3, epoch + 1) is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER  # a v2 transaction starts at 0
    assert produce(0, epoch + 1) is Errors.NONE

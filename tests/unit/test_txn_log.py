"""Transactions in one partition: open transactions, markers, the last stable offset and
the aborted-transaction index, including after restarts."""

from __future__ import annotations

from pathlib import Path

import pytest

from eoslog.config import BrokerConfig, TopicConfig
from eoslog.errors import Errors
from eoslog.records import ControlRecordType, build_batch, build_control_batch
from eoslog.storage import AppendOrigin
from eoslog.storage.log import PartitionLog
from eoslog.storage.producer_state import ProducerStateError
from support.leader_log import append, append_marker

P1, P2, P3 = 5000, 5001, 5002


def data(pid: int, seq: int, count: int = 1, epoch: int = 0, transactional: bool = True) -> bytes:
    return build_batch(
        [(None, f"{pid}-{seq + i}".encode(), ()) for i in range(count)],
        timestamp=1_700_000_000_000, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
        transactional=transactional,
    )


def open_log(path: Path, clean: bool = True, **overrides: str) -> PartitionLog:
    config = TopicConfig(BrokerConfig.load().topic_defaults(), overrides)
    return PartitionLog(path / "t-0", config, lambda: 1_700_000_000_000, clean_shutdown=clean)


def aborted(lg: PartitionLog, start: int = 0) -> list[tuple[int, int, int]]:
    return [(a.producer_id, a.first_offset, a.last_offset)
            for a in lg.aborted_transactions(start, lg.log_end_offset)]


def test_open_transaction_pins_the_last_stable_offset(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    append(lg, data(P3, 0, transactional=False))  # offset 0, idempotent only
    assert lg.last_stable_offset == 1
    append(lg, data(P1, 0, 2))  # offsets 1-2, transaction opens at 1
    assert lg.last_stable_offset == 1
    append(lg, data(P1, 2))  # offset 3
    assert lg.last_stable_offset == 1 and lg.high_watermark == 4
    info = append_marker(lg, P1, 0, coordinator_epoch=0, commit=True)  # marker at 4
    assert info.first_offset == 4
    assert lg.last_stable_offset == lg.high_watermark == 5
    assert aborted(lg) == []


def test_an_ended_transaction_pins_the_lso_until_the_high_watermark_passes_its_marker(tmp_path: Path) -> None:
    """As Kafka's unreplicatedTxns: a marker above the high watermark (not yet replicated, or
    under group commit not yet fsynced) may still be lost, so its transaction is unstable."""
    lg = open_log(tmp_path)
    lg.append_as_leader(data(P1, 0, 2))  # 0-1
    lg.update_high_watermark(2)
    marker = build_control_batch(ControlRecordType.ABORT, producer_id=P1, producer_epoch=0, coordinator_epoch=0,
                                 timestamp=1_700_000_000_000)
    lg.append_as_leader(marker, AppendOrigin.COORDINATOR)  # 2
    assert lg.last_stable_offset == 0 and lg.producer_state.ongoing == {}
    lg.update_high_watermark(3)
    assert lg.last_stable_offset == 3 and lg.producer_state.unreplicated == {}  # forgotten once passed
    assert aborted(lg) == [(P1, 0, 2)]
    lg.close()
    reopened = open_log(tmp_path)  # the replay keeps an ended transaction only above the high watermark
    assert reopened.last_stable_offset == 3 and reopened.producer_state.unreplicated == {}


def test_abort_is_indexed_and_reported_for_the_fetched_range(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    append(lg, data(P1, 0, 3))  # 0-2
    append_marker(lg, P1, 0, 0, commit=False)  # 3
    append(lg, data(P1, 3))  # 4: a new transaction
    append_marker(lg, P1, 0, 0, commit=True)  # 5
    assert aborted(lg) == [(P1, 0, 3)]
    assert aborted(lg, start=4) == []  # the aborted transaction ended before offset 4
    assert lg.last_stable_offset == 6


def test_interleaved_transactions_lso_is_the_oldest_open_one(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    append(lg, data(P1, 0))  # 0
    append(lg, data(P2, 0))  # 1
    append(lg, data(P3, 0))  # 2
    assert lg.last_stable_offset == 0
    append_marker(lg, P2, 0, 0, commit=False)  # 3
    assert lg.last_stable_offset == 0
    append_marker(lg, P1, 0, 0, commit=True)  # 4
    assert lg.last_stable_offset == 2
    append_marker(lg, P3, 0, 0, commit=True)  # 5
    assert lg.last_stable_offset == 6
    assert aborted(lg) == [(P2, 1, 3)]


def test_non_transactional_write_inside_an_open_transaction_is_refused(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    append(lg, data(P1, 0))
    with pytest.raises(ProducerStateError) as e:
        append(lg, data(P1, 1, transactional=False))
    assert e.value.error == Errors.INVALID_TXN_STATE


def test_markers_check_producer_and_coordinator_epochs(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    append(lg, data(P1, 0, epoch=3))
    with pytest.raises(ProducerStateError) as e:
        append_marker(lg, P1, 2, 0, commit=True)
    assert e.value.error == Errors.INVALID_PRODUCER_EPOCH
    append_marker(lg, P1, 3, coordinator_epoch=5, commit=True)
    append(lg, data(P1, 1, epoch=3))
    with pytest.raises(ProducerStateError) as e:
        append_marker(lg, P1, 3, coordinator_epoch=4, commit=True)
    assert e.value.error == Errors.TRANSACTION_COORDINATOR_FENCED


def test_coordinator_abort_with_bumped_epoch_fences_the_zombie(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    append(lg, data(P1, 0, epoch=0))
    append_marker(lg, P1, 1, 0, commit=False)  # the coordinator aborts with epoch 0 + 1
    assert aborted(lg) == [(P1, 0, 1)]
    with pytest.raises(ProducerStateError) as e:
        append(lg, data(P1, 1, epoch=0))  # the old instance writes on
    assert e.value.error == Errors.INVALID_PRODUCER_EPOCH
    append(lg, data(P1, 0, epoch=1))  # the new instance starts at sequence 0


def test_a_batch_repeating_an_ended_transactions_sequences_is_refused_not_taken_for_a_retry(tmp_path: Path) -> None:
    """The loss in test_copy[cluster-confluent] (CI on ecb3437): a batch of copier-0's
    transaction was written and replicated, but its leader was killed before answering;
    librdkafka aborted the transaction and, the batch counted as never sent, gave the next
    transaction's first batch the same epoch and sequence range (its abort_transaction()
    advances the epoch's base msgid over every purged message). Taken for a retry of the
    aborted batch, it was answered with that batch's offsets and never written, and its
    transaction committed without it: 62 input records never reached the output. A retry
    belongs to the producer's open transaction (a client ends a transaction only once its
    batches are answered), so a cached batch of an ended one is no duplicate: the sequence
    does not follow and the batch is refused (OUT_OF_ORDER_SEQUENCE_NUMBER, which librdkafka
    raises as a fatal error: the application starts a new producer, fencing the old one)."""
    lg = open_log(tmp_path)
    append(lg, data(P1, 0, 3, epoch=4))  # 0-2: the batch whose answer was lost
    append_marker(lg, P1, 4, coordinator_epoch=0, commit=False)  # 3: its transaction aborted
    following = build_batch([(None, f"new-{i}".encode(), ()) for i in range(3)], timestamp=1_700_000_000_000,
                            producer_id=P1, producer_epoch=4, base_sequence=0, transactional=True)
    with pytest.raises(ProducerStateError) as e:
        append(lg, following)
    assert e.value.error == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert lg.log_end_offset == 4
    # Within the open transaction a retry is still answered with its first write's offsets.
    assert append(lg, data(P1, 3, 2, epoch=4)).first_offset == 4  # 4-5
    retried = append(lg, data(P1, 3, 2, epoch=4))
    assert (retried.first_offset, retried.last_offset, retried.duplicate) == (4, 5, True)
    assert lg.log_end_offset == 6
    # So is the first batch of a transaction retried before anything else was written.
    append_marker(lg, P1, 4, coordinator_epoch=0, commit=True)  # 6
    assert append(lg, data(P1, 5, 1, epoch=4)).first_offset == 7
    assert append(lg, data(P1, 5, 1, epoch=4)).duplicate
    lg.close()
    reopened = open_log(tmp_path, clean=False)  # the same after a restart (state replayed from the log)
    assert append(reopened, data(P1, 5, 1, epoch=4)).duplicate
    append_marker(reopened, P1, 4, coordinator_epoch=0, commit=True)  # 8
    with pytest.raises(ProducerStateError) as e:
        append(reopened, data(P1, 5, 1, epoch=4))
    assert e.value.error == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_transaction_spanning_segments(tmp_path: Path) -> None:
    lg = open_log(tmp_path, **{"segment.bytes": "300"})
    for seq in range(8):
        append(lg, data(P1, seq))
    append_marker(lg, P1, 0, 0, commit=False)
    assert len(lg.segments) > 2
    marker_offset = lg.log_end_offset - 1
    # A fetch from the first segment learns of the abort recorded with the marker later on.
    assert aborted(lg, start=0) == [(P1, 0, marker_offset)]
    assert aborted(lg, start=5) == [(P1, 0, marker_offset)]


def test_fetch_ending_in_a_segment_sees_aborts_whose_marker_is_later(tmp_path: Path) -> None:
    """The bug the copy test found: with one abort already found in the first segment, the
    lookup stopped there and missed a transaction begun there but aborted segments later."""
    lg = open_log(tmp_path, **{"segment.bytes": "400"})
    append(lg, data(P2, 0))  # 0: P2's transaction, aborted right away
    append_marker(lg, P2, 0, 0, commit=False)  # 1
    append(lg, data(P1, 0))  # 2: P1's transaction begins in the first segment
    for seq in range(1, 10):
        append(lg, data(P1, seq))
    append_marker(lg, P1, 0, 0, commit=False)
    assert len(lg.segments) > 2
    first_end = lg.segments[1].base_offset
    assert first_end > 2
    found = sorted((a.producer_id, a.first_offset) for a in lg.aborted_transactions(0, first_end))
    assert found == [(P1, 2), (P2, 0)]


def test_new_segments_start_with_a_txn_index(tmp_path: Path) -> None:
    lg = open_log(tmp_path, **{"segment.bytes": "300"})
    for seq in range(12):
        append(lg, data(P1, seq, transactional=False))
    assert len(lg.segments) > 2
    assert all(seg.txn_index.path.exists() for seg in lg.segments)


def build_history(lg: PartitionLog) -> None:
    append(lg, data(P1, 0, 2))
    append(lg, data(P2, 0))
    append_marker(lg, P1, 0, 0, commit=False)
    append(lg, data(P3, 0))
    append_marker(lg, P2, 0, 0, commit=True)
    append(lg, data(P1, 2))  # P1's next transaction, left open


def state(lg: PartitionLog) -> tuple[int, list[tuple[int, int, int]], dict[int, int]]:
    return lg.last_stable_offset, aborted(lg), dict(lg.producer_state.ongoing)


@pytest.mark.parametrize("restart", ["clean", "unclean", "txnindex-missing", "txnindex-torn"])
def test_transaction_state_survives_restarts(tmp_path: Path, restart: str) -> None:
    lg = open_log(tmp_path, **{"segment.bytes": "250"})
    build_history(lg)
    expected = state(lg)
    assert expected[0] == 4 and expected[2] == {P3: 4, P1: 6}
    if restart == "clean":
        lg.flush()
        lg.snapshot_producer_state()
    lg.close()
    txnindexes = sorted((tmp_path / "t-0").glob("*.txnindex"))
    assert txnindexes
    if restart == "txnindex-missing":
        for p in txnindexes:
            p.unlink()
    elif restart == "txnindex-torn":
        for p in txnindexes:
            p.write_bytes(p.read_bytes() + b"\x00\x01\x02")
    lg = open_log(tmp_path, clean=restart == "clean", **{"segment.bytes": "250"})
    assert state(lg) == expected
    # And the rebuilt state keeps working: closing P1 and P3 frees the LSO.
    append_marker(lg, P3, 0, 0, commit=True)
    append_marker(lg, P1, 0, 0, commit=False)
    assert lg.last_stable_offset == lg.log_end_offset
    assert aborted(lg)[-1] == (P1, 6, lg.log_end_offset - 1)


def test_coordinator_appends_are_epoch_checked(tmp_path: Path) -> None:
    """A transactional offset commit written by the group coordinator for a fenced
    producer must not reopen a transaction in __consumer_offsets."""
    lg = open_log(tmp_path)
    append(lg, data(P1, 0, epoch=2), AppendOrigin.COORDINATOR)
    append_marker(lg, P1, 3, 0, commit=False)  # fenced by the transaction coordinator
    end = lg.log_end_offset
    with pytest.raises(ProducerStateError) as e:
        append(lg, data(P1, 1, epoch=2), AppendOrigin.COORDINATOR)
    assert e.value.error == Errors.INVALID_PRODUCER_EPOCH
    assert lg.log_end_offset == end and lg.last_stable_offset == end

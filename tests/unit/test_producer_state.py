"""The rule table of Kafka's ProducerStateManager, ported: duplicates, gaps, epochs,
wrap-around, snapshots, expiration."""

from __future__ import annotations

from pathlib import Path

import pytest

from eoslog.errors import Errors
from eoslog.records.batch import BatchHeader
from eoslog.storage.producer_state import (
    INT32_MAX,
    BatchMetadata,
    ProducerStateEntry,
    ProducerStateError,
    ProducerStateManager,
)

PID = 1000


def header(pid: int, epoch: int, first_seq: int, count: int, offset: int, ts: int = 1000) -> BatchHeader:
    return BatchHeader(
        base_offset=offset, batch_length=100, partition_leader_epoch=0, magic=2, crc=0,
        attributes=0, last_offset_delta=count - 1, base_timestamp=ts, max_timestamp=ts,
        producer_id=pid, producer_epoch=epoch, base_sequence=first_seq, records_count=count,
    )


class Log:
    """Drives a ProducerStateManager the way PartitionLog does: validate, then commit."""

    def __init__(self, tmp: Path) -> None:
        self.psm = ProducerStateManager(tmp, "t-0", expiration_ms=86_400_000)
        self.next_offset = 0
        self.appended: list[BatchHeader] = []

    def append(self, pid: int, epoch: int, first_seq: int, count: int = 1, ts: int = 1000) -> int:
        info = self.psm.prepare()
        h = header(pid, epoch, first_seq, count, self.next_offset, ts)
        dup = info.find_duplicate(h)
        if dup is not None:
            return dup.first_offset
        info.validate(h, self.next_offset)
        info.append(h)
        self.next_offset += count
        self.psm.commit(info, self.next_offset)
        self.appended.append(h)
        return h.base_offset


@pytest.fixture
def log(tmp_path: Path) -> Log:
    return Log(tmp_path)


def error_of(fn: object, *args: int) -> str:
    with pytest.raises(ProducerStateError) as e:
        fn(*args)  # type: ignore[operator]
    return e.value.error


def test_in_order_batches_are_accepted(log: Log) -> None:
    assert log.append(PID, 0, 0, 5) == 0
    assert log.append(PID, 0, 5, 3) == 5
    assert log.psm.producers[PID].last_seq == 7


def test_duplicate_of_any_of_last_five_returns_original_offsets_and_appends_nothing(log: Log) -> None:
    offsets = [log.append(PID, 0, seq, 1) for seq in range(6)]
    assert offsets == list(range(6))
    # Batches with seq 1..5 are cached (5 retained); seq 0 fell out of the cache.
    for seq in range(1, 6):
        assert log.append(PID, 0, seq, 1) == seq
    assert log.next_offset == 6
    assert error_of(log.append, PID, 0, 0, 1) == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_duplicate_needs_same_sequence_range(log: Log) -> None:
    log.append(PID, 0, 0, 5)
    # Same first sequence but a different length is not a duplicate: it is out of order.
    assert error_of(log.append, PID, 0, 0, 3) == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_gap_is_out_of_order(log: Log) -> None:
    log.append(PID, 0, 0, 1)
    assert error_of(log.append, PID, 0, 2, 1) == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.next_offset == 1


def test_unknown_producer_may_start_at_any_sequence(log: Log) -> None:
    # Kafka's ProducerAppendInfo.checkSequence (checked against Apache Kafka by
    # tests/conformance, idempotence/unknown-producer-id): no state, any sequence.
    assert log.append(PID, 0, 7, 1) == 0
    assert error_of(log.append, PID, 0, 0, 1) == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.append(PID, 0, 8, 1) == 1


def test_new_epoch_must_start_at_zero(log: Log) -> None:
    log.append(PID, 0, 0, 3)
    assert error_of(log.append, PID, 1, 3, 1) == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.append(PID, 1, 0, 1) == 3
    assert log.psm.producers[PID].producer_epoch == 1


def test_stale_epoch_is_fenced(log: Log) -> None:
    log.append(PID, 3, 0, 1)
    assert error_of(log.append, PID, 2, 1, 1) == Errors.INVALID_PRODUCER_EPOCH


def test_duplicate_from_older_epoch_is_not_a_duplicate(log: Log) -> None:
    log.append(PID, 0, 0, 1)
    log.append(PID, 1, 0, 1)
    assert error_of(log.append, PID, 0, 0, 1) == Errors.INVALID_PRODUCER_EPOCH


def test_sequence_wraps_at_int_max(log: Log) -> None:
    # A producer whose last batch ended just below Int.MaxValue (as after 2^31 records).
    entry = ProducerStateEntry(PID, producer_epoch=0)
    entry.batches.append(BatchMetadata(INT32_MAX - 3, INT32_MAX - 3, 0, 0, 1000))
    log.psm.producers[PID] = entry
    log.next_offset = 1
    assert log.append(PID, 0, INT32_MAX - 2, 3) == 1  # seqs MAX-2 .. MAX
    assert log.psm.producers[PID].last_seq == INT32_MAX
    assert log.append(PID, 0, 0, 2) == 4  # wraps to 0
    assert log.psm.producers[PID].last_seq == 1
    assert error_of(log.append, PID, 0, 5, 1) == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    # A batch straddling the wrap has its last sequence computed modulo 2^31.
    assert header(PID, 0, INT32_MAX, 3, 10).last_sequence == 1


def test_batches_in_one_append_validate_against_each_other(log: Log) -> None:
    info = log.psm.prepare()
    for i, seq in enumerate((0, 1, 2)):
        h = header(PID, 0, seq, 1, i)
        info.validate(h, i)
        info.append(h)
    bad = header(PID, 0, 9, 1, 3)
    with pytest.raises(ProducerStateError):
        info.validate(bad, 3)
    # Nothing was committed: the manager still knows no producer.
    assert PID not in log.psm.producers


def test_snapshot_round_trip_keeps_all_five_batches(tmp_path: Path, log: Log) -> None:
    for seq in range(7):
        log.append(PID, 2, seq, 1)
    log.append(PID + 1, 0, 0, 4)
    path = log.psm.take_snapshot()
    assert path.name == f"{log.next_offset:020d}.snapshot"
    again = ProducerStateManager(tmp_path, "t-0", 86_400_000)
    assert again.load(0, log.next_offset) == log.next_offset
    assert again.producers.keys() == log.psm.producers.keys()
    assert list(again.producers[PID].batches) == list(log.psm.producers[PID].batches)
    assert again.producers[PID].producer_epoch == 2
    # Duplicates are still recognised after the reload.
    info = again.prepare()
    assert info.find_duplicate(header(PID, 2, 3, 1, 99)) is not None


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty"])
def test_damaged_snapshot_is_ignored_and_an_older_one_used(tmp_path: Path, log: Log, damage: str) -> None:
    log.append(PID, 0, 0, 1)
    older = log.psm.take_snapshot()
    log.append(PID, 0, 1, 1)
    newer = log.psm.take_snapshot()
    data = newer.read_bytes()
    if damage == "truncate":
        newer.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        newer.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))
    else:
        newer.write_bytes(b"")
    again = ProducerStateManager(tmp_path, "t-0", 86_400_000)
    assert again.load(0, log.next_offset) == int(older.stem)
    assert not newer.exists()
    # The caller replays the log after the snapshot; the state converges.
    again.replay((h, None) for h in log.appended)
    assert again.producers[PID].last_seq == 1
    assert again.map_end_offset == log.next_offset


def test_snapshot_beyond_log_end_is_deleted(tmp_path: Path, log: Log) -> None:
    log.append(PID, 0, 0, 5)
    snap = log.psm.take_snapshot()
    again = ProducerStateManager(tmp_path, "t-0", 86_400_000)
    assert again.load(0, 3) == 0  # the log was truncated to 3 in recovery
    assert not snap.exists()
    again.replay((h, None) for h in log.appended if h.next_offset <= 3)
    assert PID not in again.producers


def test_replay_rebuilds_the_same_state_as_appending(tmp_path: Path, log: Log) -> None:
    for seq in range(0, 20, 2):
        log.append(PID, 0, seq, 2)
    log.append(PID + 7, 3, 0, 1)
    fresh = ProducerStateManager(tmp_path / "other", "t-0", 86_400_000)
    fresh.replay((h, None) for h in log.appended)
    assert {p: (e.producer_epoch, list(e.batches)) for p, e in fresh.producers.items()} == {
        p: (e.producer_epoch, list(e.batches)) for p, e in log.psm.producers.items()
    }


def test_expiration_removes_idle_producers_only(log: Log) -> None:
    log.append(PID, 0, 0, 1, ts=1_000)
    log.append(PID + 1, 0, 0, 1, ts=50_000_000)
    expired = log.psm.remove_expired(now_ms=1_000 + 86_400_000)
    assert expired == [PID]
    assert PID + 1 in log.psm.producers
    # The expired producer is unknown now: any sequence starts its new state.
    assert log.append(PID, 0, 5, 1) == 2


def test_log_start_offset_past_last_batch_forgets_producer(log: Log) -> None:
    log.append(PID, 0, 0, 3)  # offsets 0-2
    log.append(PID + 1, 0, 0, 3)  # offsets 3-5
    assert log.psm.on_log_start_offset(3) == [PID]
    assert PID + 1 in log.psm.producers

"""Idempotence at the partition-log level: duplicates, errors, and state across restarts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from eoslog.config import BrokerConfig, TopicConfig
from eoslog.errors import Errors
from eoslog.records import InvalidRecordError, build_batch
from eoslog.storage.log import PartitionLog
from eoslog.storage.producer_state import ProducerStateError
from support.leader_log import append

PID = 4000


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def batch(seq: int, count: int = 1, epoch: int = 0, pid: int = PID, ts: int = 1_700_000_000_000) -> bytes:
    return build_batch(
        [(None, f"v{seq + i}".encode(), ()) for i in range(count)],
        timestamp=ts, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
    )


def open_log(path: Path, clock: Clock, clean: bool = True, **overrides: str) -> PartitionLog:
    defaults = BrokerConfig.load().topic_defaults()
    return PartitionLog(path / "t-0", TopicConfig(defaults, overrides), clock, clean_shutdown=clean)


def test_duplicate_returns_original_offsets_and_appends_nothing(tmp_path: Path) -> None:
    lg = open_log(tmp_path, Clock())
    first = append(lg, batch(0, 3))
    append(lg, batch(3, 2))
    size = lg.size_bytes
    again = append(lg, batch(0, 3))
    assert again.duplicate
    assert (again.first_offset, again.last_offset) == (first.first_offset, first.last_offset) == (0, 2)
    assert lg.size_bytes == size and lg.log_end_offset == 5


@pytest.mark.parametrize(("records", "error"), [
    (lambda: batch(5, epoch=1), Errors.OUT_OF_ORDER_SEQUENCE_NUMBER),
    (lambda: batch(1, epoch=0), Errors.INVALID_PRODUCER_EPOCH),
    (lambda: batch(3, epoch=2), Errors.OUT_OF_ORDER_SEQUENCE_NUMBER),
])
def test_rejected_batches_leave_the_log_unchanged(
    tmp_path: Path, records: Callable[[], bytes], error: Errors
) -> None:
    lg = open_log(tmp_path, Clock())
    append(lg, batch(0, epoch=1))
    end, size = lg.log_end_offset, lg.size_bytes
    with pytest.raises(ProducerStateError) as e:
        append(lg, records())
    assert e.value.error == error
    assert (lg.log_end_offset, lg.size_bytes) == (end, size)
    # Nor did the producer's state move: its next batch in sequence follows directly.
    assert append(lg, batch(1, epoch=1)).first_offset == end


def test_unclean_restart_in_the_middle_of_a_run_replays_the_log(tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, clock)
    for seq in range(0, 40, 4):
        append(lg, batch(seq, 4))
    lg.close()  # no snapshot, no clean-shutdown marker: like kill -9
    lg = open_log(tmp_path, clock, clean=False)
    assert lg.log_end_offset == 40
    # The last five batches are still recognised as duplicates...
    for seq in range(20, 40, 4):
        assert append(lg, batch(seq, 4)).duplicate
    # ...an older one is out of order, and the run continues where it stopped.
    with pytest.raises(ProducerStateError):
        append(lg, batch(16, 4))
    assert append(lg, batch(40, 4)).first_offset == 40


def test_snapshot_at_roll_plus_replay_of_the_tail(tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, clock, **{"segment.bytes": "2000"})
    for seq in range(60):
        append(lg, batch(seq))
    assert len(lg.segments) > 2
    snapshots = sorted(p.name for p in (tmp_path / "t-0").glob("*.snapshot"))
    assert snapshots, "a roll must leave a producer-state snapshot"
    assert len(snapshots) <= 3
    lg.close()
    lg = open_log(tmp_path, clock, clean=False)
    assert append(lg, batch(59)).duplicate
    assert append(lg, batch(60)).first_offset == 60


def test_clean_shutdown_snapshot_needs_no_replay(tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, clock)
    for seq in range(10):
        append(lg, batch(seq))
    lg.snapshot_producer_state()
    lg.close()
    assert (tmp_path / "t-0" / f"{10:020d}.snapshot").exists()
    lg = open_log(tmp_path, clock)
    assert lg.producer_state.producers[PID].last_seq == 9


def test_corrupt_snapshot_falls_back_to_replay(tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, clock)
    for seq in range(10):
        append(lg, batch(seq))
    lg.snapshot_producer_state()
    lg.close()
    snap = tmp_path / "t-0" / f"{10:020d}.snapshot"
    snap.write_bytes(snap.read_bytes()[:7])
    lg = open_log(tmp_path, clock)
    assert lg.producer_state.producers[PID].last_seq == 9
    assert append(lg, batch(9)).duplicate


def test_retention_deleting_a_producers_last_batch_forgets_it(tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, clock, **{"segment.bytes": "300", "retention.ms": "1000"})
    old = clock.now
    for seq in range(10):
        append(lg, batch(seq, ts=old))
    lg.roll()  # the other producer's batch lands in a segment of its own
    clock.now += 10_000
    append(lg, batch(0, pid=PID + 1, ts=clock.now))
    assert lg.delete_old_segments() > 0
    assert lg.log_start_offset == 10
    assert PID not in lg.producer_state.producers
    # Forgotten: its next batch starts new state whatever its sequence (Kafka's rule); a
    # retry of an already deleted batch is no longer recognised as a duplicate.
    info = append(lg, batch(10, ts=clock.now))
    assert not info.duplicate and lg.producer_state.producers[PID].last_seq == 10


def test_compacted_topic_refuses_keyless_records(tmp_path: Path) -> None:
    lg = open_log(tmp_path, Clock(), **{"cleanup.policy": "compact"})
    keyed = build_batch([(b"k", b"v", ())], timestamp=1)
    append(lg, keyed)
    end = lg.log_end_offset
    keyless = build_batch([(b"k", b"v", ()), (None, b"v", ())], timestamp=1)
    with pytest.raises(InvalidRecordError) as e:
        append(lg, keyless)
    assert e.value.error == Errors.INVALID_RECORD
    assert lg.log_end_offset == end

"""DeleteRecords in storage (Kafka's Partition.deleteRecordsOnLeader and
UnifiedLog.maybeIncrementLogStartOffset): the log start offset moves, whole segments below it
go, the offset survives a crash, and refusals carry Kafka's error names and messages.

Real files in a temporary directory, an injected clock; expected values come from the
batches each test wrote."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from eoslog.config import BrokerConfig
from eoslog.errors import Errors
from eoslog.records import build_batch, decode_records, iter_batch_headers
from eoslog.storage import LogManager, OffsetOutOfRange, PartitionLog, TopicError
from eoslog.storage.checkpoint import read_checkpoint
from eoslog.storage.log_manager import LOG_START_FILE
from support.leader_log import append, append_marker

T0 = 1_700_000_000_000
PID = 4242


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


def manager(root: Path, clock: Clock) -> LogManager:
    defaults = BrokerConfig.load().topic_defaults()
    defaults["segment.bytes"] = 2 * len(value_batch(0))  # two batches per segment
    return LogManager(root, defaults, clock)


def value_batch(i: int, **producer: int | bool) -> bytes:
    return build_batch([(b"k%d" % i, (b"v%d-" % i).ljust(100, b"."), ())], timestamp=T0 + i, **producer)  # type: ignore[arg-type]


def fill(plog: PartitionLog, n: int) -> None:
    for i in range(n):
        append(plog, value_batch(i))


def offsets_read(plog: PartitionLog, start: int, bound: int | None = None) -> list[int]:
    """Offsets of the data records a consumer fetching from ``start`` receives."""
    out: list[int] = []
    offset = start
    end = plog.high_watermark if bound is None else bound
    while offset < end:
        data = plog.read(offset, 1 << 20, upper_bound=bound).records
        if not data:
            break
        for pos, h in iter_batch_headers(data):
            if not h.is_control:
                out += [r.offset for r in decode_records(data[pos : pos + h.size]) if r.offset >= offset]
            offset = h.next_offset
    return out


def crash(lm: LogManager) -> None:
    """The process dies: no flush, no checkpoint, no clean-shutdown marker."""
    for lg in lm.all_logs():
        lg.close()
    lm.release_log_dir_lock()


def start(root: Path, clock: Clock) -> tuple[LogManager, PartitionLog]:
    """A log manager started on ``root`` with topic "t" (created on first start)."""
    lm = manager(root, clock)
    lm.startup()
    if "t" not in lm.topics:
        lm.create_topic("t", 1)
    plog = lm.get_log("t", 0)
    assert plog is not None
    return lm, plog


Started = tuple[LogManager, PartitionLog, Clock]


@pytest.fixture
def started(tmp_path: Path) -> Started:
    clock = Clock()
    return (*start(tmp_path, clock), clock)


def test_whole_segments_below_the_new_start_go_and_reads_below_it_are_refused(
    started: Started,
) -> None:
    lm, plog, _ = started
    fill(plog, 10)
    assert [s.base_offset for s in plog.segments] == [0, 2, 4, 6, 8]
    assert lm.delete_records("t", 0, 5) == 5
    # Segment 4-5 holds offset 5, so it stays; 0-1 and 2-3 are deleted from disk.
    assert [s.base_offset for s in plog.segments] == [4, 6, 8]
    assert sorted(p.name for p in plog.dir.glob("*.log")) == [f"{b:020d}.log" for b in (4, 6, 8)]
    assert plog.log_start_offset == 5
    with pytest.raises(OffsetOutOfRange):
        plog.read(4, 1000)
    assert offsets_read(plog, 5) == [5, 6, 7, 8, 9]
    assert read_checkpoint(plog.dir.parent / LOG_START_FILE)[("t", 0)] == 5
    lm.shutdown()


def test_minus_one_deletes_up_to_the_high_watermark_and_the_active_segment_stays(
    started: Started,
) -> None:
    lm, plog, _ = started
    fill(plog, 5)
    assert lm.delete_records("t", 0, -1) == 5
    assert [s.base_offset for s in plog.segments] == [4]  # the active segment is never deleted here
    assert offsets_read(plog, 5) == []
    append(plog, value_batch(5))
    assert offsets_read(plog, 5) == [5]
    lm.shutdown()


def test_refusals_carry_kafkas_error_names(started: Started) -> None:
    lm, plog, _ = started
    fill(plog, 4)
    lm.create_topic("compacted", 1, {"cleanup.policy": "compact"})
    lm.create_topic("__consumer_offsets", 1, {"cleanup.policy": "compact"}, internal=True)

    def refused(topic: str, partition: int, offset: int) -> tuple[Errors, str]:
        with pytest.raises(TopicError) as e:
            lm.delete_records(topic, partition, offset)
        return e.value.error, str(e.value)

    assert refused("t", 0, 5) == (
        Errors.OFFSET_OUT_OF_RANGE,
        "Cannot increment the log start offset to 5 of partition t-0 since it is larger than the high watermark 4")
    assert refused("t", 0, -2) == (Errors.OFFSET_OUT_OF_RANGE, "The offset -2 for partition t-0 is not valid")
    assert refused("compacted", 0, 0) == (
        Errors.POLICY_VIOLATION, "Records of partition compacted-0 can not be deleted due to the configured policy")
    assert refused("__consumer_offsets", 0, 0)[0] == Errors.INVALID_TOPIC_EXCEPTION
    assert refused("t", 1, 0)[0] == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert refused("missing", 0, 0)[0] == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert plog.log_start_offset == 0 and len(plog.segments) == 2
    # An offset at or below the current start changes nothing and answers the current start.
    assert lm.delete_records("t", 0, 3) == 3
    assert lm.delete_records("t", 0, 1) == 3
    lm.shutdown()


def test_the_log_start_offset_survives_a_crash(tmp_path: Path) -> None:
    clock = Clock()
    lm, plog = start(tmp_path, clock)
    fill(plog, 10)
    lm.delete_records("t", 0, 7)
    crash(lm)

    lm, plog = start(tmp_path, clock)
    assert not lm.had_clean_shutdown and plog.log_start_offset == 7
    with pytest.raises(OffsetOutOfRange):
        plog.read(6, 1000)
    assert offsets_read(plog, 7) == [7, 8, 9]
    lm.shutdown()


def test_a_segment_left_by_a_crash_before_its_deletion_goes_at_the_next_retention_pass(tmp_path: Path) -> None:
    """The checkpoint is written before segments are deleted; if the process dies in between,
    the start offset holds and retention deletes the leftover segments (even on a topic
    whose policy is compact,delete or compact: Kafka deletes below the log start always)."""
    clock = Clock()
    lm, plog = start(tmp_path, clock)
    fill(plog, 10)
    assert plog.advance_log_start_offset(6)  # as delete_records does, then "crash"
    lm.checkpoint()
    crash(lm)

    lm, plog = start(tmp_path, clock)
    assert plog.log_start_offset == 6
    assert [s.base_offset for s in plog.segments] == [0, 2, 4, 6, 8]
    lm.run_retention()
    assert [s.base_offset for s in plog.segments] == [6, 8]
    lm.shutdown()


def test_cutting_into_an_open_transaction_holds_the_lso_at_the_new_start(
    started: Started,
) -> None:
    """Kafka does not stop DeleteRecords at the last stable offset: an open transaction may
    be cut into, and its first unstable offset is then the log start offset
    (UnifiedLog.maybeIncrementFirstUnstableOffset) until a marker decides it."""
    lm, plog, _ = started
    append(plog, value_batch(0))
    txn = {"producer_id": PID, "producer_epoch": 0, "transactional": True}
    for seq, i in enumerate(range(1, 5)):
        append(plog, value_batch(i, base_sequence=seq, **txn))
    append(plog, value_batch(5))
    assert (plog.last_stable_offset, plog.high_watermark) == (1, 6)

    assert lm.delete_records("t", 0, 3) == 3
    assert plog.last_stable_offset == 3
    assert offsets_read(plog, 3, bound=plog.last_stable_offset) == []  # read_committed waits
    assert offsets_read(plog, 3) == [3, 4, 5]
    append_marker(plog, PID, 0, coordinator_epoch=0, commit=True)
    assert plog.last_stable_offset == plog.high_watermark == 7
    assert offsets_read(plog, 3, bound=plog.last_stable_offset) == [3, 4, 5]
    lm.shutdown()


def test_retention_after_delete_records_keeps_counting_from_the_new_start(
    started: Started,
) -> None:
    lm, plog, clock = started
    fill(plog, 6)
    lm.delete_records("t", 0, 3)
    assert os.path.exists(plog.dir / f"{2:020d}.log")
    clock.now = T0 + 10 * 604_800_000  # everything is past retention.ms now
    lm.run_retention()
    assert plog.log_start_offset == plog.log_end_offset == 6
    lm.shutdown()

"""Log compaction (used by __consumer_offsets): convergence, offsets, tombstones, crashes."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from eoslog.config import BrokerConfig
from eoslog.records import build_batch, decode_records, iter_batch_headers
from eoslog.records.batch import DELETE_HORIZON_MASK
from eoslog.storage import LogManager, PartitionLog
from eoslog.storage import cleaner as cleaner_module
from eoslog.storage.cleaner import LogCleaner
from support.leader_log import append as leader_append

DELETE_RETENTION_MS = 60_000


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def open_logs(path: Path, clock: Clock) -> LogManager:
    config = BrokerConfig.load(overrides={"log.dirs": str(path)})
    logs = LogManager(path, config.topic_defaults(), clock)
    logs.startup()
    return logs


def make_topic(logs: LogManager, **overrides: Any) -> PartitionLog:
    logs.create_topic("c", 1, {
        "cleanup.policy": "compact", "segment.bytes": 2048, "delete.retention.ms": DELETE_RETENTION_MS,
        **overrides,
    })
    plog = logs.get_log("c", 0)
    assert plog is not None
    return plog


def append(plog: PartitionLog, clock: Clock, records: list[tuple[bytes, bytes | None]]) -> int:
    clock.now += 1
    info = leader_append(plog, build_batch([(k, v, ()) for k, v in records], timestamp=clock.now))
    return info.first_offset


def read_all(plog: PartitionLog, start: int | None = None) -> list[tuple[int, bytes | None, bytes | None, int]]:
    """(offset, key, value, batch attributes) of every record from ``start`` (default: the log
    start), fetching as a consumer does: from the next offset after each batch."""
    out = []
    offset = plog.log_start_offset if start is None else start
    while offset < plog.log_end_offset:
        data = plog.read(offset, 100).records  # small reads: one batch at a time
        if not data:
            break
        for pos, h in iter_batch_headers(data):
            out.extend((r.offset, r.key, r.value, h.attributes)
                       for r in decode_records(data[pos : pos + h.size]) if r.offset >= offset)
            offset = h.next_offset
    return out


def write_updates(plog: PartitionLog, clock: Clock, keys: int = 30, updates: int = 15,
                  seed: int = 1) -> dict[int, tuple[bytes, bytes]]:
    """Many updates per key in random order and batch sizes; returns offset → record."""
    rng = random.Random(seed)
    pending = [(b"key-%d" % k, b"v%d-" % u + b"x" * rng.randint(0, 40))
               for u in range(updates) for k in range(keys)]
    rng.shuffle(pending)
    written = {}
    while pending:
        batch = pending[: rng.randint(1, 5)]
        pending = pending[len(batch):]
        first = append(plog, clock, batch)
        for i, rec in enumerate(batch):
            written[first + i] = rec
    return written


def latest(written: dict[int, tuple[bytes, bytes | None]]) -> dict[bytes, tuple[int, bytes | None]]:
    out: dict[bytes, tuple[int, bytes | None]] = {}
    for offset in sorted(written):
        key, value = written[offset]
        out[key] = (offset, value)
    return out


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_compaction_converges_to_the_last_value_per_key(tmp_path: Path, clock: Clock) -> None:
    logs = open_logs(tmp_path / "data", clock)
    plog = make_topic(logs)
    written = write_updates(plog, clock)
    plog.roll()  # everything below the (empty) active segment is cleanable
    segments_before, bytes_before, end_before = len(plog.segments), plog.size_bytes, plog.log_end_offset
    stats = LogCleaner(logs, clock, 1 << 20).run()
    assert stats and stats[0].records_removed == len(written) - 30
    records = read_all(plog)
    # Exactly the last value of each key, at the offset it was written at.
    assert {k: (o, v) for o, k, v, _ in records} == latest(written)
    assert len(records) == 30
    assert all(written[o] == (k, v) for o, k, v, _ in records)
    assert plog.log_end_offset == end_before  # offsets are never reassigned
    assert plog.size_bytes < bytes_before / 5 and len(plog.segments) < segments_before
    # A second pass finds nothing dirty.
    assert LogCleaner(logs, clock, 1 << 20).run() == []
    # The compacted log reads the same after a restart.
    logs.shutdown()
    logs = open_logs(tmp_path / "data", clock)
    reopened = logs.get_log("c", 0)
    assert reopened is not None and read_all(reopened) == records


def test_fetch_skips_gaps_from_any_offset(tmp_path: Path, clock: Clock) -> None:
    logs = open_logs(tmp_path / "data", clock)
    plog = make_topic(logs)
    write_updates(plog, clock, keys=5, updates=20)
    plog.roll()
    LogCleaner(logs, clock, 1 << 20).run()
    kept = [o for o, *_ in read_all(plog)]
    assert len(kept) == 5
    for offset in range(plog.log_end_offset + 1):
        # From any offset, in a gap or not, a consumer reaches exactly the records after it.
        assert [o for o, *_ in read_all(plog, offset)] == [o for o in kept if o >= offset]


def test_only_whole_segments_below_the_active_one_are_cleaned(tmp_path: Path, clock: Clock) -> None:
    logs = open_logs(tmp_path / "data", clock)
    plog = make_topic(logs)
    write_updates(plog, clock, keys=10, updates=10)
    active = plog.active_segment
    active_bytes = active.pread(0, active.size)
    assert len(plog.segments) > 2
    LogCleaner(logs, clock, 1 << 20).run()
    assert plog.active_segment is active and active.pread(0, active.size) == active_bytes


def test_tombstones_stay_until_the_delete_horizon(tmp_path: Path, clock: Clock) -> None:
    logs = open_logs(tmp_path / "data", clock)
    plog = make_topic(logs)
    append(plog, clock, [(b"gone", b"v1"), (b"kept", b"v1")])
    append(plog, clock, [(b"gone", b"v2")])
    append(plog, clock, [(b"gone", None)])
    plog.roll()
    cleaner = LogCleaner(logs, clock, 1 << 20)
    cleaner.run()
    records = read_all(plog)
    assert [(k, v) for _, k, v, _ in records] == [(b"kept", b"v1"), (b"gone", None)]
    tombstone_attributes = records[1][3]
    assert tombstone_attributes & DELETE_HORIZON_MASK
    clock.now += DELETE_RETENTION_MS - 10
    assert cleaner.run() == []  # nothing dirty, horizon not reached
    assert len(read_all(plog)) == 2
    clock.now += 10
    [stats] = cleaner.run()  # the passed horizon alone triggers a pass
    assert stats.tombstones_removed == 1
    assert [(k, v) for _, k, v, _ in read_all(plog)] == [(b"kept", b"v1")]


def test_min_compaction_lag_keeps_recent_segments_dirty(tmp_path: Path, clock: Clock) -> None:
    logs = open_logs(tmp_path / "data", clock)
    plog = make_topic(logs, **{"min.compaction.lag.ms": 10_000})
    write_updates(plog, clock, keys=5, updates=30)
    plog.roll()
    cleaner = LogCleaner(logs, clock, 1 << 20)
    assert cleaner.run() == []  # every record is younger than the lag
    clock.now += 10_000
    assert cleaner.run() != []


def _crash_during_swap(tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch,
                       stage: str) -> tuple[list[Any], list[Any]]:
    """Clean a log, failing at ``stage``; returns (records before, records after a restart)."""
    logs = open_logs(tmp_path / "data", clock)
    plog = make_topic(logs)
    write_updates(plog, clock, keys=8, updates=12)
    plog.roll()
    before = read_all(plog)

    def crash(*_: Any, **__: Any) -> None:
        raise RuntimeError(f"crash {stage}")

    if stage == "before-commit":
        monkeypatch.setattr(cleaner_module.os, "replace", crash)
    else:  # the swap file is committed; the old segments are still there
        # (deleted at once, or renamed .deleted with file.delete.delay.ms)
        monkeypatch.setattr(cleaner_module.LogSegment, "delete", crash)
        monkeypatch.setattr(cleaner_module.LogSegment, "retire", crash)
    with pytest.raises(RuntimeError):
        LogCleaner(logs, clock, 1 << 20).run()
    monkeypatch.undo()
    leftovers = {p.name.rsplit(".", 1)[-1] for p in plog.dir.iterdir()}
    assert ("cleaned" if stage == "before-commit" else "swap") in leftovers
    # Restart from the files as the crash left them (a copy: the dead broker's lock stays).
    shutil.copytree(tmp_path / "data", tmp_path / "after-crash")
    after = open_logs(tmp_path / "after-crash", clock).get_log("c", 0)
    assert after is not None
    assert not any(p.name.endswith((".cleaned", ".swap")) for p in after.dir.iterdir())
    return before, read_all(after)


def test_crash_before_the_swap_commits_keeps_the_old_segments(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    before, after = _crash_during_swap(tmp_path, clock, monkeypatch, "before-commit")
    assert after == before


def test_crash_after_the_swap_commits_completes_it(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    before, after = _crash_during_swap(tmp_path, clock, monkeypatch, "after-commit")
    last = {k: (o, v) for o, k, v, _ in before}
    assert {k: (o, v) for o, k, v, _ in after} == last
    assert len(after) < len(before)
    assert [o for o, *_ in after] == sorted(o for o, *_ in after)

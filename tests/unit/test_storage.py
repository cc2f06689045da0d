"""The segmented log: append, indexes, reads, roll, retention, recovery, checkpoints.

Every test works on real files in a temporary directory, with an injected clock.
Expected values come from the batches the test built, never from the log itself.
"""

from __future__ import annotations

import os
import random
import shutil
import struct
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eoslog.config import BrokerConfig, TopicConfig
from eoslog.errors import Errors
from eoslog.records import (
    CompressionType,
    InvalidRecordError,
    TimestampType,
    build_batch,
    decode_records,
    iter_batch_headers,
    read_batch_header,
)
from eoslog.storage import LogManager, OffsetOutOfRange, PartitionLog
from eoslog.storage.checkpoint import read_checkpoint, write_checkpoint
from eoslog.storage.log_manager import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_FILE,
    RECOVERY_POINT_FILE,
)
from support.leader_log import append

T0 = 1_700_000_000_000


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def config(**overrides: Any) -> TopicConfig:
    """Topic config from Kafka names written with underscores (segment_bytes=...)."""
    return TopicConfig(
        BrokerConfig.load().topic_defaults(),
        {k.replace("_", "."): v for k, v in overrides.items()},
    )


def open_log(root: Path, clock: Clock, cfg: TopicConfig | None = None,
             **kw: Any) -> PartitionLog:
    return PartitionLog(root / "t-0", cfg or config(), clock, **kw)


def batch(i: int, n: int = 1, ts: int | None = None, value_size: int = 20,
          codec: CompressionType = CompressionType.NONE) -> bytes:
    """Batch number ``i``: its records' values say which batch they belong to."""
    records = [(b"k%d" % i, (b"b%d-r%d-" % (i, j)).ljust(value_size, b"."), ()) for j in range(n)]
    return build_batch(records, timestamp=T0 + i if ts is None else ts, compression=codec)


def log_bytes(lg: PartitionLog) -> bytes:
    return b"".join(Path(s.log_path).read_bytes() for s in lg.segments)


def stored_batches(lg: PartitionLog) -> list[bytes]:
    out = []
    for seg in lg.segments:
        data = seg.log_path.read_bytes()
        out += [data[p : p + h.size] for p, h in iter_batch_headers(data, verify_crc=True)]
    return out


def values_read(lg: PartitionLog, start: int = 0) -> list[bytes]:
    """Every record value from ``start`` to the log end, read as a consumer would."""
    out: list[bytes] = []
    offset = start
    while offset < lg.log_end_offset:
        data = lg.read(offset, 1 << 20).records
        assert data, f"empty read at {offset} below the log end {lg.log_end_offset}"
        for pos, h in iter_batch_headers(data, verify_crc=True):
            out += [r.value or b"" for r in decode_records(data[pos : pos + h.size])
                    if r.offset >= offset]
            offset = h.next_offset
    return out


def expected_values(batch_numbers: list[int], n: int = 1, value_size: int = 20) -> list[bytes]:
    return [(b"b%d-r%d-" % (i, j)).ljust(value_size, b".") for i in batch_numbers for j in range(n)]


def segment_files(lg: PartitionLog, suffix: str) -> list[Path]:
    return sorted(lg.dir.glob(f"*{suffix}"))


# -- append ------------------------------------------------------------------------------


def test_batches_are_stored_byte_for_byte_except_base_offset_and_leader_epoch(tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, clock)
    sent = [batch(i, n=i + 1, codec=codec) for i, codec in enumerate(CompressionType)]
    infos = [append(lg, b) for b in sent]
    assert [(i.first_offset, i.last_offset) for i in infos] == [(0, 0), (1, 2), (3, 5), (6, 9),
                                                                (10, 14)]
    assert all(i.log_append_time == -1 for i in infos)
    stored = stored_batches(lg)
    assert len(stored) == len(sent)
    for info, original, kept in zip(infos, sent, stored, strict=True):
        # The leader stamps its epoch (bytes 12-15, outside the CRC) as Kafka's does.
        assert kept[8:12] == original[8:12] and kept[16:] == original[16:]
        assert struct.unpack_from(">q", kept)[0] == info.first_offset
        assert struct.unpack_from(">i", kept, 12)[0] == lg.leader_epoch == 0
        assert read_batch_header(original).partition_leader_epoch == -1
    assert lg.log_end_offset == lg.high_watermark == 15
    lg.close()


def test_log_append_time_rewrites_only_timestamp_fields(tmp_path: Path) -> None:
    clock = Clock(T0 + 5000)
    lg = open_log(tmp_path, clock, config(message_timestamp_type="LogAppendTime"))
    original = batch(0, n=3, codec=CompressionType.GZIP)
    info = append(lg, original)
    assert info.log_append_time == clock.now
    [kept] = stored_batches(lg)
    h = read_batch_header(kept)
    assert h.timestamp_type is TimestampType.LOG_APPEND_TIME and h.max_timestamp == clock.now
    changed = {i for i in range(len(original)) if kept[i] != original[i]}
    # baseOffset is 0 in both; the leader epoch (12-15), attributes (21-22), maxTimestamp
    # (35-42) and the CRC may differ.
    assert changed <= set(range(12, 16)) | set(range(17, 23)) | set(range(35, 43))
    assert changed & set(range(35, 43)) and changed & set(range(21, 23))
    lg.close()


def _bad_crc(b: bytes) -> bytes:
    out = bytearray(b)
    out[-1] ^= 0x40
    return bytes(out)


def _magic(m: int) -> Any:
    def mutate(b: bytes) -> bytes:
        out = bytearray(b)
        out[16] = m
        return bytes(out)
    return mutate


@pytest.mark.parametrize(
    ("mutate", "overrides", "error"),
    [
        (_bad_crc, {}, Errors.CORRUPT_MESSAGE),
        (lambda b: b[:-3], {}, Errors.CORRUPT_MESSAGE),
        (_magic(1), {}, Errors.INVALID_RECORD),
        (_magic(0), {}, Errors.INVALID_RECORD),
        (lambda b: b, {"max_message_bytes": 200}, Errors.MESSAGE_TOO_LARGE),
        # The batch fits max.message.bytes but not a whole segment.
        (lambda b: b, {"segment_bytes": 300, "max_message_bytes": 10_000}, Errors.RECORD_LIST_TOO_LARGE),
    ],
)
def test_rejected_append_writes_nothing(
    tmp_path: Path, mutate: Any, overrides: dict[str, Any], error: str
) -> None:
    lg = open_log(tmp_path, Clock(), config(**overrides))
    append(lg, batch(0, value_size=10))
    before = (lg.log_end_offset, log_bytes(lg))
    big = batch(1, n=10, value_size=40)
    assert len(big) > 300
    with pytest.raises(InvalidRecordError) as info:
        append(lg, mutate(big))
    assert info.value.error == error
    assert (lg.log_end_offset, log_bytes(lg)) == before
    lg.close()


# -- indexes and lookups ----------------------------------------------------------------------


def test_offset_index_is_sparse_and_every_entry_points_at_its_batch(tmp_path: Path) -> None:
    lg = open_log(tmp_path, Clock(), config(index_interval_bytes=500))
    for i in range(200):
        append(lg, batch(i, n=1 + i % 3))
    lg.flush()
    seg = lg.active_segment
    entries = list(struct.iter_unpack(">ii", seg.index.path.read_bytes()))
    batch_size = len(batch(0))
    assert 0 < len(entries) < 200
    # An entry whenever at least index.interval.bytes were written since the last one.
    assert len(entries) >= seg.size // (500 + 3 * batch_size) - 1
    data = seg.log_path.read_bytes()
    for rel, pos in entries:
        assert read_batch_header(data, pos).base_offset == rel
    # Every offset maps to the batch holding it.
    for offset in range(lg.log_end_offset):
        found = seg.find_position(offset)
        assert found is not None
        pos, h = found
        assert h.base_offset <= offset <= h.last_offset
        assert read_batch_header(data, pos) == h
    assert seg.find_position(lg.log_end_offset) is None
    lg.close()


@settings(max_examples=40, deadline=None)
@given(
    timestamps=st.lists(st.lists(st.integers(0, 1000), min_size=1, max_size=4), min_size=1,
                        max_size=40),
    targets=st.lists(st.integers(-5, 1010), min_size=1, max_size=10),
)
def test_offset_for_timestamp_finds_the_first_record_at_or_after(
    timestamps: list[list[int]], targets: list[int]
) -> None:
    """Timestamps are not monotonic; the answer is the first record *in offset order*
    whose timestamp is >= the target, over several segments and a sparse time index."""
    with tempfile.TemporaryDirectory() as tmp:
        lg = open_log(Path(tmp), Clock(), config(index_interval_bytes=150, segment_bytes=700))
        flat: list[tuple[int, int]] = []
        for tss in timestamps:
            b = build_batch([(None, b"x" * 10, ())] * len(tss), timestamp=tss[0],
                            timestamps=[T0 + t for t in tss])
            info = append(lg, b)
            flat += [(info.first_offset + j, T0 + t) for j, t in enumerate(tss)]
        assert len(lg.segments) > 1 or len(timestamps) < 10
        for target in targets:
            expected = next(((o, t) for o, t in flat if t >= T0 + target), None)
            assert lg.offset_for_timestamp(T0 + target) == expected
        best = max(t for _, t in flat)
        assert lg.max_timestamp()[0] == best
        lg.close()


def test_offset_for_timestamp_with_log_append_time(tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, clock, config(message_timestamp_type="LogAppendTime",
                                          index_interval_bytes=1))
    for i in range(10):
        clock.now = T0 + 100 * i
        # Create times far in the future must not matter.
        append(lg, batch(i, n=2, ts=T0 + 10**9))
    assert lg.offset_for_timestamp(T0 + 250) == (6, T0 + 300)
    assert lg.offset_for_timestamp(T0) == (0, T0)
    assert lg.offset_for_timestamp(T0 + 901) is None
    lg.close()


# -- reads ------------------------------------------------------------------------------------


def test_read_respects_max_bytes_with_kip74_min_one(tmp_path: Path) -> None:
    lg = open_log(tmp_path, Clock())
    sent = [batch(i, n=2, value_size=50) for i in range(10)]
    for b in sent:
        append(lg, b)
    size = len(sent[0])
    assert all(len(b) == size for b in sent)

    three = lg.read(0, 3 * size + size - 1).records
    assert [h.base_offset for _, h in iter_batch_headers(three)] == [0, 2, 4]
    # A batch larger than max_bytes comes back whole when it is the first (KIP-74) ...
    one = lg.read(5, 10).records
    assert [h.base_offset for _, h in iter_batch_headers(one)] == [4]
    assert one[8:12] == sent[2][8:12] and one[16:] == sent[2][16:]
    # ... and not at all when the caller already has data for this response.
    assert lg.read(5, 10, min_one=False).records == b""
    # The high watermark (or another upper bound) ends a read.
    bounded = lg.read(0, 1 << 20, upper_bound=6).records
    assert [h.base_offset for _, h in iter_batch_headers(bounded)] == [0, 2, 4]
    assert lg.read(lg.log_end_offset, 1000).records == b""
    with pytest.raises(OffsetOutOfRange):
        lg.read(lg.log_end_offset + 1, 1000)
    with pytest.raises(OffsetOutOfRange):
        lg.read(-1, 1000)
    lg.close()


def test_read_that_does_not_fit_never_skips_to_a_later_segment(tmp_path: Path) -> None:
    lg = open_log(tmp_path, Clock(), config(segment_bytes=250))
    append(lg, batch(0, value_size=150))
    for i in range(1, 5):
        append(lg, batch(i, value_size=10))
    assert [s.base_offset for s in lg.segments] == [0, 1, 4]
    small = len(batch(1, value_size=10))
    # Batch 0 does not fit in 2 small batches' room; batch 1 would, but must not be sent.
    assert lg.read(0, 2 * small, min_one=False).records == b""
    data = lg.read(0, 2 * small).records
    assert [h.base_offset for _, h in iter_batch_headers(data)] == [0]
    data = lg.read(1, 2 * small, min_one=False).records
    assert [h.base_offset for _, h in iter_batch_headers(data)] == [1, 2]
    lg.close()


# -- roll -------------------------------------------------------------------------------------


def test_roll_by_segment_bytes(tmp_path: Path) -> None:
    lg = open_log(tmp_path, Clock(), config(segment_bytes=1000))
    sizes = []
    for i in range(40):
        b = batch(i, n=1 + i % 4, value_size=30)
        sizes.append(len(b))
        append(lg, b)
    # Recompute where segments must start: a batch that would overflow opens a new one.
    expected_bases, used, offset = [0], 0, 0
    for i, size in enumerate(sizes):
        if used and used + size > 1000:
            expected_bases.append(offset)
            used = 0
        used += size
        offset += 1 + i % 4
    assert [s.base_offset for s in lg.segments] == expected_bases
    assert [p.name for p in segment_files(lg, ".log")] == [f"{b:020d}.log" for b in expected_bases]
    assert all(s.size <= 1000 for s in lg.segments)
    assert values_read(lg) == [v for i in range(40) for v in expected_values([i], 1 + i % 4, 30)]
    lg.close()


def test_roll_by_segment_ms_follows_batch_timestamps(tmp_path: Path) -> None:
    """Kafka measures segment.ms from the first batch's timestamp to the incoming one's."""
    lg = open_log(tmp_path, Clock(), config(segment_ms=1000))
    append(lg, batch(0, ts=T0))
    append(lg, batch(1, ts=T0 + 1000))
    assert len(lg.segments) == 1
    append(lg, batch(2, ts=T0 + 1001))
    assert [s.base_offset for s in lg.segments] == [0, 2]
    lg.close()


def test_roll_by_segment_ms_with_log_append_time_uses_the_clock(tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, clock, config(segment_ms=1000, message_timestamp_type="LogAppendTime"))
    append(lg, batch(0))
    clock.now += 1000
    append(lg, batch(1))
    assert len(lg.segments) == 1
    clock.now += 1
    append(lg, batch(2))
    assert [s.base_offset for s in lg.segments] == [0, 2]
    lg.close()


def test_roll_by_segment_ms_without_timestamps_uses_segment_age(tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, clock, config(segment_ms=1000))
    append(lg, batch(0, ts=-1))
    clock.now += 1001
    append(lg, batch(1, ts=-1))
    assert [s.base_offset for s in lg.segments] == [0, 1]
    lg.close()


# -- retention ----------------------------------------------------------------------------------


def test_retention_ms_deletes_whole_expired_segments(tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, clock, config(segment_bytes=250, retention_ms=10_000))
    for i in range(6):
        append(lg, batch(i, ts=T0 + 1000 * i, value_size=150))
    assert len(lg.segments) == 6
    clock.now = T0 + 12_500  # segments whose newest record is older than T0 + 2500 expire
    assert lg.delete_old_segments() == 3
    assert [s.base_offset for s in lg.segments] == [3, 4, 5]
    assert lg.log_start_offset == 3
    assert not (lg.dir / f"{0:020d}.log").exists() and not (lg.dir / f"{0:020d}.index").exists()
    with pytest.raises(OffsetOutOfRange):
        lg.read(2, 1000)
    assert values_read(lg, 3) == expected_values([3, 4, 5], value_size=150)
    assert lg.delete_old_segments() == 0
    lg.close()


def test_expired_active_segment_is_rolled_then_deleted(tmp_path: Path) -> None:
    """The new empty segment's file is on disk at once (as Kafka's roll), so a start that never
    got the log start offset checkpoint (a kill -9 right after the deletion) still ends the log
    at 5 and never hands out offsets 0-4 again. Mutant (not committed): the roll leaving the file
    to the first write -> the reopened log ends at 0."""
    clock = Clock()
    lg = open_log(tmp_path, clock, config(retention_ms=10_000))
    for i in range(5):
        append(lg, batch(i, ts=T0))
    clock.now = T0 + 10_001
    assert lg.delete_old_segments() == 1
    shutil.copytree(lg.dir, tmp_path / "killed" / "t-0")  # the disk as a kill -9 here leaves it
    assert [(s.base_offset, s.size) for s in lg.segments] == [(5, 0)]
    assert lg.log_start_offset == lg.log_end_offset == 5
    assert lg.delete_old_segments() == 0  # an empty active segment never goes
    assert append(lg, batch(5, ts=clock.now)).first_offset == 5
    lg.close()
    reopened = open_log(tmp_path / "killed", clock, config(retention_ms=10_000), clean_shutdown=False)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (5, 5)
    reopened.close()


def test_active_segment_that_has_not_expired_stays(tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, clock, config(retention_ms=10_000))
    append(lg, batch(0, ts=T0))
    clock.now = T0 + 10_000
    assert lg.delete_old_segments() == 0
    assert lg.log_start_offset == 0
    lg.close()


def test_retention_bytes_keeps_the_newest_segments(tmp_path: Path) -> None:
    lg = open_log(tmp_path, Clock())
    size = len(batch(0, value_size=100))
    lg.close()
    # Two batches per segment: 10 batches → 5 segments of 2 * size bytes.
    lg = open_log(tmp_path, Clock(), config(segment_bytes=2 * size, retention_bytes=5 * size))
    for i in range(10):
        append(lg, batch(i, value_size=100))
    assert [s.size for s in lg.segments] == [2 * size] * 5
    # Kafka deletes the oldest while what remains without it is >= retention.bytes:
    # 10 → 8 → 6 segments' worth of batches; 6 - 2 < 5 stops.
    assert lg.delete_old_segments() == 2
    assert [s.base_offset for s in lg.segments] == [4, 6, 8]
    assert lg.log_start_offset == 4
    lg.close()


def test_retention_respects_cleanup_policy_compact(tmp_path: Path) -> None:
    clock = Clock()
    lg = open_log(tmp_path, clock, config(retention_ms=1, cleanup_policy="compact"))
    append(lg, batch(0, ts=T0))
    clock.now += 10_000
    assert lg.delete_old_segments() == 0
    lg.close()


# -- recovery -----------------------------------------------------------------------------------


def build_log(root: Path, n: int = 33, **overrides: Any) -> tuple[PartitionLog, list[bytes]]:
    """A closed-over log of ``n`` one-record batches in several segments, closed without
    flush or checkpoint (as a crash leaves it; the test decides the shutdown kind)."""
    cfg = config(segment_bytes=800, index_interval_bytes=100, **overrides)
    lg = open_log(root, Clock(), cfg)
    sent = [batch(i, value_size=40) for i in range(n)]
    for b in sent:
        append(lg, b)
    lg.close()
    return lg, sent


def reopen(root: Path, clean: bool, recovery_point: int = 0, **overrides: Any) -> PartitionLog:
    cfg = config(segment_bytes=800, index_interval_bytes=100, **overrides)
    return open_log(root, Clock(), cfg, clean_shutdown=clean, recovery_point=recovery_point)


def batch_positions(path: Path) -> list[tuple[int, int, int]]:
    """(position, size, base offset) of each batch in a segment file."""
    data = path.read_bytes()
    return [(p, h.size, h.base_offset) for p, h in iter_batch_headers(data)]


@pytest.mark.parametrize("clean", [False, True])
def test_torn_tail_is_cut_at_the_last_whole_batch(tmp_path: Path, clean: bool) -> None:
    """A write cut short: the last batch loses its end. Found with or without the marker."""
    built, _ = build_log(tmp_path)
    active = built.segments[-1].log_path
    pos, size, base = batch_positions(active)[-1]
    with open(active, "r+b") as fh:
        fh.truncate(pos + size // 2)
    lg = reopen(tmp_path, clean)
    assert lg.log_end_offset == base
    assert active.stat().st_size == pos
    [(path, result)] = lg.recovery_results
    assert path == active and result.valid_bytes == pos
    assert result.truncated_bytes == size // 2 and result.reason
    assert values_read(lg) == expected_values(list(range(base)), value_size=40)
    assert append(lg, batch(99)).first_offset == base
    lg.close()


@pytest.mark.parametrize(
    "garbage",
    [b"\x00" * 100, bytes(random.Random(1).randrange(256) for _ in range(333)),
     # A plausible header claiming more bytes than exist.
     struct.pack(">qiib", 30, 5000, 0, 2) + b"\x00" * 60,
     # A plausible header whose batch length is too small to hold a header.
     struct.pack(">qiib", 30, 10, 0, 2) + b"\x00" * 60,
     b"\x07"],
)
def test_garbage_after_the_last_batch_is_cut(tmp_path: Path, garbage: bytes) -> None:
    built, sent = build_log(tmp_path)
    active = built.segments[-1].log_path
    good_size = active.stat().st_size
    with open(active, "ab") as fh:
        fh.write(garbage)
    lg = reopen(tmp_path, clean=False)
    assert active.stat().st_size == good_size
    assert lg.log_end_offset == len(sent)
    assert lg.recovery_results[0][1].truncated_bytes == len(garbage)
    lg.close()


def test_torn_tail_and_garbage_together(tmp_path: Path) -> None:
    built, _ = build_log(tmp_path)
    active = built.segments[-1].log_path
    pos, _size, base = batch_positions(active)[-2]
    data = active.read_bytes()[: pos + 20] + b"\xde\xad\xbe\xef" * 50
    active.write_bytes(data)
    lg = reopen(tmp_path, clean=False)
    assert lg.log_end_offset == base and active.stat().st_size == pos
    lg.close()


def test_crc_flip_in_the_active_segment_keeps_the_valid_prefix(tmp_path: Path) -> None:
    built, _ = build_log(tmp_path)
    active = built.segments[-1].log_path
    batches = batch_positions(active)
    assert len(batches) >= 3
    pos, size, base = batches[len(batches) // 2]
    data = bytearray(active.read_bytes())
    data[pos + size - 5] ^= 0x20  # inside a record value
    active.write_bytes(bytes(data))
    lg = reopen(tmp_path, clean=False)
    assert lg.log_end_offset == base
    assert active.stat().st_size == pos
    assert "CRC" in (lg.recovery_results[0][1].reason or "")
    assert values_read(lg) == expected_values(list(range(base)), value_size=40)
    lg.close()


def test_corruption_in_an_older_segment_deletes_the_segments_after_it(tmp_path: Path) -> None:
    built, _ = build_log(tmp_path)
    paths = [s.log_path for s in built.segments]
    assert len(paths) >= 4
    victim = paths[1]
    pos, _size, base = batch_positions(victim)[2]
    data = bytearray(victim.read_bytes())
    data[pos + 40] ^= 0x01
    victim.write_bytes(bytes(data))
    lg = reopen(tmp_path, clean=False)
    assert [s.log_path for s in lg.segments] == paths[:2]
    assert lg.log_end_offset == base
    for later in paths[2:]:
        assert not later.exists()
        assert not later.with_suffix(".index").exists()
        assert not later.with_suffix(".timeindex").exists()
    assert append(lg, batch(99)).first_offset == base
    lg.close()


def test_clean_shutdown_skips_verification(tmp_path: Path) -> None:
    """With the marker the CRCs are not read: a flipped bit goes unnoticed (as in Kafka)."""
    built, sent = build_log(tmp_path)
    active = built.segments[-1].log_path
    pos, size, _ = batch_positions(active)[1]
    data = bytearray(active.read_bytes())
    data[pos + size - 5] ^= 0x20
    active.write_bytes(bytes(data))
    lg = reopen(tmp_path, clean=True)
    assert lg.log_end_offset == len(sent) and not lg.recovery_results
    lg.close()
    lg = reopen(tmp_path, clean=False)
    assert lg.log_end_offset < len(sent) and lg.recovery_results
    lg.close()


def test_segments_below_the_recovery_point_are_not_verified(tmp_path: Path) -> None:
    built, sent = build_log(tmp_path)
    first = built.segments[0].log_path
    last_base = built.segments[-1].base_offset
    pos, size, _ = batch_positions(first)[2]
    data = bytearray(first.read_bytes())
    data[pos + size - 3] ^= 0x10
    first.write_bytes(bytes(data))
    lg = reopen(tmp_path, clean=False, recovery_point=last_base)
    assert lg.log_end_offset == len(sent) and not lg.recovery_results
    lg.close()


def _damage_all(lg: PartitionLog, suffix: str, how: str) -> dict[Path, bytes]:
    originals = {}
    for seg in lg.segments:
        path = seg.log_path.with_suffix(suffix)
        originals[path] = path.read_bytes()
        if how == "missing":
            path.unlink()
        elif how == "odd size":
            path.write_bytes(originals[path] + b"\x01\x02\x03")
        elif how == "garbage":
            path.write_bytes(bytes(random.Random(7).randrange(256) for _ in range(96)))
        elif how == "past the log":
            path.write_bytes(originals[path] + struct.pack(">ii" if suffix == ".index" else ">qi",
                                                           *((10**6, 10**6) if suffix == ".index"
                                                             else (T0 * 2, 10**6))))
        elif how == "wrong target" and suffix == ".index" and originals[path]:
            # Still increasing and inside the log, but not at a batch start.
            rel, pos = struct.unpack_from(">ii", originals[path], len(originals[path]) - 8)
            path.write_bytes(originals[path][:-8] + struct.pack(">ii", rel, pos + 3))
        elif how == "wrong target" and originals[path]:
            # The last timestamp no longer increases.
            _, rel = struct.unpack_from(">qi", originals[path], len(originals[path]) - 12)
            path.write_bytes(originals[path][:-12] + struct.pack(">qi", 0, rel))
    return originals


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
@pytest.mark.parametrize("how", ["missing", "odd size", "garbage", "past the log", "wrong target"])
@pytest.mark.parametrize("clean", [True, False])
def test_missing_or_damaged_indexes_are_rebuilt(
    tmp_path: Path, suffix: str, how: str, clean: bool
) -> None:
    built, sent = build_log(tmp_path)
    originals = _damage_all(built, suffix, how)
    assert any(originals.values())
    lg = reopen(tmp_path, clean=clean)
    assert lg.log_end_offset == len(sent) and not lg.recovery_results
    lg.flush()
    for path, original in originals.items():
        assert path.read_bytes() == original, path
    assert values_read(lg) == expected_values(list(range(len(sent))), value_size=40)
    assert lg.offset_for_timestamp(T0 + 17) == (17, T0 + 17)
    lg.close()


def test_leftover_temporary_and_orphan_index_files_are_removed(tmp_path: Path) -> None:
    built, _ = build_log(tmp_path)
    (built.dir / "00000000000000000003.index.tmp").write_bytes(b"x")
    (built.dir / "00000000000000099999.index").write_bytes(b"")
    (built.dir / "00000000000000099999.timeindex").write_bytes(b"")
    lg = reopen(tmp_path, clean=True)
    assert not list(lg.dir.glob("*.tmp"))
    assert not (lg.dir / "00000000000000099999.index").exists()
    lg.close()


@settings(max_examples=60, deadline=None)
@given(cut=st.integers(0, 10_000), garbage=st.binary(max_size=200), clean=st.booleans())
def test_any_cut_plus_garbage_recovers_a_prefix(cut: int, garbage: bytes, clean: bool) -> None:
    """Whatever is done to the tail, the log comes back as the LONGEST valid prefix of what
    was written — every batch still whole on disk, nothing after it — and the file is cut
    there, so a later append follows that prefix directly."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        built, _ = build_log(root, n=12)
        active = built.segments[-1].log_path
        data = active.read_bytes()
        written = batch_positions(active)
        damaged = data[: cut % (len(data) + 1)] + garbage
        active.write_bytes(damaged)
        # The batches still whole: byte for byte as written, from the start (garbage may
        # complete a cut batch with the very bytes it lost; that batch is whole again).
        whole = 0
        for pos, size, _ in written:
            if damaged[pos : pos + size] != data[pos : pos + size]:
                break
            whole += 1
        expected_leo = built.segments[-1].base_offset + whole
        expected_size = sum(size for _, size, _ in written[:whole])

        lg = reopen(root, clean=clean)
        assert lg.log_end_offset == expected_leo
        assert active.stat().st_size == expected_size, "the damaged tail was not cut off"
        assert values_read(lg) == expected_values(list(range(expected_leo)), value_size=40)
        assert append(lg, batch(50)).first_offset == expected_leo
        lg.close()
        lg = reopen(root, clean=False)
        assert values_read(lg) == (expected_values(list(range(expected_leo)), value_size=40)
                                   + expected_values([50]))
        lg.close()


def test_recovery_point_after_start_up(tmp_path: Path) -> None:
    build_log(tmp_path)
    lg = reopen(tmp_path, clean=False, recovery_point=5)
    assert lg.recovery_point == 5  # recovered data is not fsynced yet
    lg.flush()
    assert lg.recovery_point == lg.log_end_offset
    lg.close()
    lg = reopen(tmp_path, clean=True, recovery_point=5)
    assert lg.recovery_point == lg.log_end_offset
    lg.close()


# -- log manager: marker and checkpoints ----------------------------------------------------------


def test_checkpoint_file_format(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    write_checkpoint(path, {("b", 1): 7, ("a-x", 0): 12})
    assert path.read_text() == "0\n2\na-x 0 12\nb 1 7\n"
    assert read_checkpoint(path) == {("a-x", 0): 12, ("b", 1): 7}
    assert not (tmp_path / "cp.tmp").exists()
    path.write_text("0\n3\na 0 1\n")  # fewer entries than announced
    assert read_checkpoint(path) == {}
    assert read_checkpoint(tmp_path / "missing") == {}


def _manager(root: Path, clock: Clock) -> LogManager:
    defaults = BrokerConfig.load().topic_defaults()
    defaults.update({"segment.bytes": 600, "index.interval.bytes": 100})
    return LogManager(root, defaults, clock)


def test_log_manager_clean_shutdown_and_crash(tmp_path: Path) -> None:
    clock = Clock()
    lm = _manager(tmp_path, clock)
    lm.startup()
    assert not lm.had_clean_shutdown
    lm.create_topic("orders", 2)
    plog = lm.get_log("orders", 1)
    assert plog is not None
    for i in range(20):
        append(plog, batch(i, value_size=40))
    lm.shutdown()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert read_checkpoint(tmp_path / RECOVERY_POINT_FILE) == {("orders", 0): 0, ("orders", 1): 20}
    assert read_checkpoint(tmp_path / LOG_START_FILE) == {("orders", 0): 0, ("orders", 1): 0}

    lm = _manager(tmp_path, clock)
    lm.startup()
    assert lm.had_clean_shutdown and not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    plog = lm.get_log("orders", 1)
    assert plog is not None and plog.log_end_offset == 20
    for i in range(20, 25):
        append(plog, batch(i, value_size=40))
    active = plog.active_segment.log_path
    # Crash: no shutdown, no marker; the active segment's tail is torn. The dead
    # process's lock on the log directory goes with it.
    for lg in lm.all_logs():
        lg.close()
    lm.release_log_dir_lock()
    with open(active, "r+b") as fh:
        fh.truncate(os.path.getsize(active) - 10)

    lm = _manager(tmp_path, clock)
    lm.startup()
    assert not lm.had_clean_shutdown
    plog = lm.get_log("orders", 1)
    assert plog is not None and plog.log_end_offset == 24
    assert plog.recovery_results
    assert values_read(plog) == expected_values(list(range(24)), value_size=40)
    lm.shutdown()

"""Where a read's batches lie in a segment file (``LogSegment.locate``, ``PartitionLog.read_file_records``).

A Fetch sends its records as a slice of the segment file, found from the offset index and a few
windows of batch headers instead of one ``pread`` per batch. These tests hold that slice to a
model of the read rules (whole batches from the one holding the offset, below the bound, within
``max_bytes`` except the first with KIP-74's ``min_one``, never across a segment), computed from
the batches the log files hold, with index entries dense enough that most reads start their walk
at one. Mutants seen caught (not committed): the walk starting at the index entry without counting
the batches before it (a 2.2 MB log read as nothing), and ``>`` for ``>=`` in the bound check.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eoslog.config import BrokerConfig, TopicConfig
from eoslog.records import build_batch, iter_batch_headers
from eoslog.storage import PartitionLog
from eoslog.storage import segment as segment_module
from support.leader_log import append

T0 = 1_700_000_000_000


class Stored(NamedTuple):
    base_offset: int
    next_offset: int
    data: bytes


def open_log(root: Path, segment_bytes: int, index_interval: int) -> PartitionLog:
    config = TopicConfig(BrokerConfig.load().topic_defaults(),
                         {"segment.bytes": str(segment_bytes), "index.interval.bytes": str(index_interval)})
    return PartitionLog(root / "t-0", config, lambda: T0)


def stored(lg: PartitionLog) -> list[list[Stored]]:
    """Each segment's batches, read back from its file."""
    out = []
    for seg in lg.segments:
        data = seg.log_path.read_bytes()
        out.append([Stored(h.base_offset, h.next_offset, data[p : p + h.size]) for p, h in iter_batch_headers(data)])
    return out


def expected(segments: list[list[Stored]], offset: int, max_bytes: int, bound: int, min_one: bool) -> list[Stored]:
    """The read rules, applied to the batches as a list."""
    if offset >= bound:
        return []
    for batches in segments:
        if batches and batches[0].base_offset > offset and segments.index(batches) == 0:
            break
        candidates = [b for b in batches if b.next_offset > offset]
        if not candidates:
            continue
        out: list[Stored] = []
        size = 0
        for b in candidates:
            if b.base_offset >= bound or (size + len(b.data) > max_bytes and not (min_one and not out)):
                break
            out.append(b)
            size += len(b.data)
        return out
    return []


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 300)), min_size=1, max_size=60),
    segment_bytes=st.sampled_from([1_500, 4_000, 1 << 20]),
    index_interval=st.sampled_from([0, 1, 100, 700, 4096]),
    reads=st.lists(st.tuples(st.floats(0, 1), st.integers(1, 6_000), st.floats(0, 1), st.booleans()),
                   min_size=1, max_size=25),
)
def test_a_read_returns_the_batches_the_rules_name(tmp_path_factory: pytest.TempPathFactory,
                                                   sizes: list[tuple[int, int]], segment_bytes: int,
                                                   index_interval: int,
                                                   reads: list[tuple[float, int, float, bool]]) -> None:
    lg = open_log(tmp_path_factory.mktemp("log"), segment_bytes, index_interval)
    for i, (n, value_size) in enumerate(sizes):
        append(lg, build_batch([(None, b"v" * value_size, ())] * n, timestamp=T0 + i))
    segments = stored(lg)
    leo = lg.log_end_offset
    for at, max_bytes, bound_at, min_one in reads:
        offset = int(at * leo)
        bound = offset + int(bound_at * (leo - offset))
        want = expected(segments, offset, max_bytes, bound, min_one)
        found, next_offset = lg.read_file_records(offset, max_bytes, upper_bound=bound, min_one=min_one)
        got = found.read() if found is not None else b""
        assert got == b"".join(b.data for b in want), (offset, max_bytes, bound, min_one)
        if want:
            assert next_offset == want[-1].next_offset
        assert lg.read(offset, max_bytes, upper_bound=bound, min_one=min_one).records == got
    lg.close()


def test_a_fetch_of_many_small_batches_reads_a_few_windows_of_headers(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """2,000 batches of one small record: finding where a 1 MB read starts and ends takes a few
    ``pread``s (the index's entry, a window of headers at each end), not one per batch."""
    lg = open_log(tmp_path, 1 << 30, 4096)
    for i in range(2_000):
        append(lg, build_batch([(None, b"r%d" % i, ())], timestamp=T0 + i))
    calls: list[int] = []
    real = os.pread

    def counting(fd: int, n: int, pos: int) -> bytes:
        calls.append(n)
        return real(fd, n, pos)

    monkeypatch.setattr(segment_module.os, "pread", counting)
    for offset, max_bytes in ((0, 1 << 20), (777, 1 << 20), (10, 30_000), (1_500, 4_000)):
        calls.clear()
        found, next_offset = lg.read_file_records(offset, max_bytes)
        assert found is not None and next_offset > offset
        assert len(calls) <= 4, f"{len(calls)} preads to find a read of {found.size} bytes from {offset}"
    lg.close()

"""CompletedFetch on encoded record batches: positions inside batches, max records, every
codec, CRC checks, and read_committed's aborted-transaction filter exactly as Kafka's
CompletedFetch applies it (a heap of aborted transactions by first offset, a set of aborted
producer ids that an ABORT marker clears, control batches never returned); and the record
decoder it runs on (``records.decode_record_fields``) against what was encoded.

Every test runs twice: with the optional C decoder (``records/_speedups.c``) and with the
pure-Python one, which must give the same results."""

from __future__ import annotations

import contextlib
import functools
import importlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eoslog.client.consumer.completed_fetch import CompletedFetch
from eoslog.client.errors import CorruptMessageError
from eoslog.client.types import ConsumerRecord, TopicPartition
from eoslog.records import CompressionType, ControlRecordType, build_batch, build_control_batch
from eoslog.records import batch as record_batch
from eoslog.records.batch import InvalidRecordError, assign_offsets, decode_record_fields, read_batch_header
from support.deps import require

TP = TopicPartition("t", 0)
TS = 1_700_000_000_000


@functools.cache
def c_decoder() -> Any:
    """The C decoder module; built in place first when this checkout has none yet
    (scripts/setup.sh builds it; a fresh worktree or a pull brings only its source)."""
    with contextlib.suppress(ImportError):
        return importlib.import_module("eoslog.records._speedups")
    root = Path(record_batch.__file__).resolve().parents[3]
    script = root / "scripts" / "build_speedups.py"
    if not script.exists() or shutil.which("cc") is None:
        return None
    subprocess.run([sys.executable, str(script)], cwd=root, capture_output=True, timeout=600, check=False)
    importlib.invalidate_caches()
    with contextlib.suppress(ImportError):
        return importlib.import_module("eoslog.records._speedups")
    return None


@pytest.fixture(autouse=True, params=["c", "python"])
def decoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The C decoder, then the pure-Python one (records.batch.speedups None)."""
    if request.param == "python":
        monkeypatch.setattr(record_batch, "speedups", None)
    else:
        c = c_decoder()
        require("eoslog's C record decoder", c is not None,
                "a C compiler (apt-get install -y gcc), then: python scripts/build_speedups.py "
                "(scripts/setup.sh does it)")
        monkeypatch.setattr(record_batch, "speedups", c)
    yield request.param


class Log:
    """Batches laid out at consecutive offsets, as a partition log holds them."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.next_offset = 0

    def _append(self, batch: bytes) -> int:
        buf = bytearray(batch)
        h = read_batch_header(buf)
        assign_offsets(buf, [(0, h)], self.next_offset)
        first = self.next_offset
        self.next_offset += h.last_offset_delta + 1
        self.data += buf
        return first

    def records(self, *values: bytes, pid: int = -1, txn: bool = False,
                codec: CompressionType = CompressionType.NONE) -> int:
        return self._append(build_batch([(b"k", v, ()) for v in values], timestamp=TS, compression=codec,
                                        producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                                        base_sequence=0 if pid >= 0 else -1, transactional=txn))

    def marker(self, pid: int, commit: bool) -> int:
        return self._append(build_control_batch(
            ControlRecordType.COMMIT if commit else ControlRecordType.ABORT,
            producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp=TS))


def drain(fetch: CompletedFetch, max_records: int = 1000) -> list[bytes | None]:
    out: list[bytes | None] = []
    while True:
        records = fetch.take(max_records)
        if not records:
            return out
        out += [r.value for r in records]


def test_records_from_the_fetch_offset_on_and_the_next_offset() -> None:
    log = Log()
    log.records(b"a", b"b", b"c")
    log.records(b"d", b"e")
    fetch = CompletedFetch(TP, 1, bytes(log.data))  # inside the first batch
    assert drain(fetch) == [b"b", b"c", b"d", b"e"]
    assert fetch.next_fetch_offset == 5 and fetch.drained


def test_max_records_is_respected_and_the_position_follows() -> None:
    log = Log()
    log.records(*[b"%d" % i for i in range(10)])
    fetch = CompletedFetch(TP, 0, bytes(log.data))
    assert [r.offset for r in fetch.take(4)] == [0, 1, 2, 3]
    assert fetch.next_fetch_offset == 4
    assert [r.offset for r in fetch.take(4)] == [4, 5, 6, 7]
    assert [r.offset for r in fetch.take(4)] == [8, 9]
    assert fetch.next_fetch_offset == 10


@pytest.mark.parametrize("codec", list(CompressionType))
def test_every_codec(codec: CompressionType) -> None:
    log = Log()
    log.records(*[b"value-%d" % i * 20 for i in range(50)], codec=codec)
    fetch = CompletedFetch(TP, 0, bytes(log.data))
    assert drain(fetch) == [b"value-%d" % i * 20 for i in range(50)]


def test_a_partial_batch_at_the_end_is_left_for_the_next_fetch() -> None:
    log = Log()
    log.records(b"a", b"b")
    log.records(b"c")
    fetch = CompletedFetch(TP, 0, bytes(log.data[:-5]))
    assert drain(fetch) == [b"a", b"b"]
    assert fetch.next_fetch_offset == 2


def test_a_corrupt_batch_raises_when_crcs_are_checked() -> None:
    log = Log()
    log.records(b"payload")
    data = bytearray(log.data)
    data[-2] ^= 0xFF
    with pytest.raises(CorruptMessageError, match="CRC"):
        CompletedFetch(TP, 0, bytes(data)).take(10)
    assert CompletedFetch(TP, 0, bytes(data), check_crcs=False).take(10)[0].offset == 0


def test_log_append_time_batches_report_the_batch_timestamp() -> None:
    log = Log()
    log.records(b"a", b"b")
    data = bytearray(log.data)
    h = read_batch_header(data)
    assign_offsets(data, [(0, h)], 0, log_append_time=TS + 999)
    records = CompletedFetch(TP, 0, bytes(data)).take(10)
    assert [(r.timestamp, r.timestamp_type) for r in records] == [(TS + 999, 1), (TS + 999, 1)]


def test_markers_are_never_returned_but_move_the_position() -> None:
    log = Log()
    log.records(b"t1", pid=7, txn=True)
    log.marker(7, commit=True)
    for read_committed in (False, True):
        fetch = CompletedFetch(TP, 0, bytes(log.data), aborted_transactions=[], read_committed=read_committed)
        assert drain(fetch) == [b"t1"]
        assert fetch.next_fetch_offset == 2


def test_a_fetch_of_only_a_marker_still_advances() -> None:
    log = Log()
    log.records(b"t1", pid=7, txn=True)
    log.marker(7, commit=False)
    fetch = CompletedFetch(TP, 1, bytes(log.data), aborted_transactions=[(7, 0)], read_committed=True)
    assert fetch.take(10) == []
    assert fetch.next_fetch_offset == 2


def test_aborted_transactions_interleaved_with_committed_ones() -> None:
    log = Log()
    log.records(b"plain-0")                          # 0
    a1 = log.records(b"A-aborted-0", pid=1, txn=True)  # 1
    log.records(b"B-0", pid=2, txn=True)             # 2
    log.records(b"A-aborted-1", pid=1, txn=True)     # 3
    log.records(b"plain-1")                          # 4
    log.marker(2, commit=True)                       # 5
    log.marker(1, commit=False)                      # 6
    log.records(b"A-1", pid=1, txn=True)             # 7: a new transaction of producer 1
    c1 = log.records(b"C-aborted", pid=3, txn=True)    # 8
    log.records(b"A-2", pid=1, txn=True)             # 9
    log.marker(1, commit=True)                       # 10
    log.marker(3, commit=False)                      # 11
    data = bytes(log.data)
    aborted = [(3, c1), (1, a1)]  # any order: the fetch keeps them in a heap
    fetch = CompletedFetch(TP, 0, data, aborted_transactions=aborted, read_committed=True)
    assert drain(fetch, max_records=2) == [b"plain-0", b"B-0", b"plain-1", b"A-1", b"A-2"]
    assert fetch.next_fetch_offset == 12
    uncommitted = CompletedFetch(TP, 0, data, aborted_transactions=None, read_committed=False)
    assert len(drain(uncommitted)) == 8  # every data record, still no marker


def test_an_aborted_transaction_starting_before_the_fetch_offset() -> None:
    log = Log()
    first = log.records(b"X-aborted-0", pid=5, txn=True)  # 0
    log.records(b"X-aborted-1", pid=5, txn=True)          # 1
    log.records(b"plain")                                 # 2
    log.marker(5, commit=False)                           # 3
    log.records(b"X-committed", pid=5, txn=True)          # 4
    log.marker(5, commit=True)                            # 5
    fetch = CompletedFetch(TP, 1, bytes(log.data), aborted_transactions=[(5, first)], read_committed=True)
    assert drain(fetch) == [b"plain", b"X-committed"]
    assert fetch.next_fetch_offset == 6


def test_non_transactional_batches_of_an_aborted_producer_id_are_kept() -> None:
    log = Log()
    first = log.records(b"txn-aborted", pid=9, txn=True)
    log.records(b"idempotent", pid=9, txn=False)
    log.marker(9, commit=False)
    fetch = CompletedFetch(TP, 0, bytes(log.data), aborted_transactions=[(9, first)], read_committed=True)
    assert drain(fetch) == [b"idempotent"]


@settings(max_examples=200, deadline=None)
@given(
    records=st.lists(st.tuples(
        st.one_of(st.none(), st.binary(max_size=300)),
        st.one_of(st.none(), st.binary(max_size=9000)),
        st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=70))), max_size=3),
        st.integers(min_value=-(2**40), max_value=2**40),
    ), min_size=1, max_size=300),
    base_offset=st.integers(min_value=0, max_value=2**62),
    codec=st.sampled_from(list(CompressionType)),
)
def test_decoded_fields_are_what_was_encoded(records: list[Any], base_offset: int, codec: CompressionType) -> None:
    """The inline varint paths of decode_record_fields (one, two, more bytes; negative
    deltas; null keys and values; headers) against what build_batch wrote."""
    timestamps = [TS + delta for *_, delta in records]
    batch = build_batch([(k, v, tuple(hs)) for k, v, hs, _ in records], timestamp=timestamps[0],
                        timestamps=timestamps, base_offset=base_offset, compression=codec)
    expected = [(base_offset + i, timestamps[i], k, v, tuple(hs)) for i, (k, v, hs, _) in enumerate(records)]
    header, fields = decode_record_fields(batch)
    assert header.records_count == len(records)
    assert fields == expected
    # Inside a larger buffer (a Fetch response), between other batches: read in place.
    other = build_batch([(None, b"other", ())], timestamp=TS)
    assert decode_record_fields(other + batch + other, len(other)) == (header, expected)


def test_a_truncated_record_is_corrupt() -> None:
    batch = bytearray(build_batch([(b"k", b"v" * 300, ())], timestamp=TS))
    body_end = len(batch)
    for cut in (body_end - 1, body_end - 200, 62):
        damaged = bytearray(batch[:cut])
        damaged[8:12] = (cut - 12).to_bytes(4, "big")  # the batch claims what is left
        with pytest.raises(InvalidRecordError):
            decode_record_fields(bytes(damaged))
        # The same with a whole batch after it: the record must not run into that one.
        with pytest.raises(InvalidRecordError):
            decode_record_fields(bytes(damaged) + bytes(batch))


def corrupt_inside(batch: bytes, offset: int, value: int) -> bytes:
    """``batch`` with one byte of its records changed and its CRC made right again: only
    the decoder can notice."""
    data = bytearray(batch)
    data[offset] = value
    h = read_batch_header(data)
    data[17:21] = record_batch.compute_crc(data, 0, h.size).to_bytes(4, "big")
    return bytes(data)


@pytest.mark.parametrize(("where", "value"), [(61, 0x7F), (61, 0x16), (61, 0x12), (-1, 0x04), (-5, 0x7E)])
def test_records_that_do_not_add_up_are_corrupt_on_every_path(where: int, value: int) -> None:
    """A record length too long or too short, a header count or a value length that runs
    past its record, behind a valid CRC: CorruptMessageError, never records out of
    neighbouring bytes."""
    log = Log()
    log.records(b"abc", b"def")
    log.records(b"next")
    first = read_batch_header(log.data).size
    data = corrupt_inside(bytes(log.data[:first]), where if where > 0 else first + where, value) \
        + bytes(log.data[first:])
    with pytest.raises(CorruptMessageError):
        drain(CompletedFetch(TP, 0, data))


@settings(max_examples=100, deadline=None)
@given(
    values=st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=200)),
                              st.lists(st.tuples(st.text(max_size=4), st.one_of(st.none(), st.binary(max_size=9))),
                                       max_size=2)), min_size=1, max_size=40),
    skip=st.integers(min_value=0, max_value=45),
    leader_epoch=st.integers(min_value=-1, max_value=5),
    log_append_time=st.booleans(),
    codec=st.sampled_from([CompressionType.NONE, CompressionType.LZ4]),
)
def test_consumer_records_are_what_was_encoded(values: list[Any], skip: int, leader_epoch: int,
                                               log_append_time: bool, codec: CompressionType) -> None:
    """Whole ConsumerRecords (the C decoder builds them itself) from a fetch offset anywhere
    in the batch, with headers, a leader epoch or none, CreateTime or LogAppendTime."""
    batch = bytearray(build_batch([(b"k%d" % i, v, tuple(hs)) for i, (v, hs) in enumerate(values)],
                                  timestamp=TS, timestamps=[TS + i for i in range(len(values))], compression=codec))
    h = read_batch_header(batch)
    assign_offsets(batch, [(0, h)], 1000, log_append_time=TS + 7 if log_append_time else None,
                   leader_epoch=leader_epoch)
    fetch_offset = 1000 + min(skip, len(values) - 1)
    got = drain_records(CompletedFetch(TP, fetch_offset, bytes(batch)))
    assert got == [ConsumerRecord(TP.topic, TP.partition, 1000 + i, TS + 7 if log_append_time else TS + i,
                                  int(log_append_time), b"k%d" % i, v, tuple(hs),
                                  leader_epoch if leader_epoch >= 0 else None)
                   for i, (v, hs) in enumerate(values) if 1000 + i >= fetch_offset]
    assert all(type(r) is ConsumerRecord for r in got)


def drain_records(fetch: CompletedFetch) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    while records := fetch.take(7):
        out += records
    return out


def test_deserializers_see_every_key_and_value() -> None:
    log = Log()
    log.records(b"1", b"2")
    fetch = CompletedFetch(TP, 0, bytes(log.data), key_deserializer=lambda k: k and k.decode(),
                           value_deserializer=lambda v: int(v or b"0"))
    assert [(r.key, r.value) for r in fetch.take(10)] == [("k", 1), ("k", 2)]

"""``eoslog dump-log``: kafka-dump-log.sh's output for segments, indexes and damaged files.

Segments are written byte for byte from batches the test builds (or through a real
PartitionLog for the index files); every expected value is computed here from those
bytes, independently of the code under test.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import crc32c
import pytest
from typer.testing import CliRunner

from eoslog.cli.main import app
from eoslog.config import BrokerConfig, TopicConfig
from eoslog.records import (
    CompressionType,
    ControlRecordType,
    assign_offsets,
    build_batch,
    build_control_batch,
    iter_batch_headers,
)
from eoslog.storage import PartitionLog
from support.leader_log import append

T0 = 1_602_000_000_000
PID = 4000
FIELD = re.compile(r"(\w+): (\S+)")

runner = CliRunner()


def dump(*args: str | Path) -> tuple[int, list[str], str]:
    result = runner.invoke(app, ["dump-log", *map(str, args)])
    return result.exit_code, result.stdout.splitlines(), result.stderr


def fields(line: str) -> dict[str, str]:
    return dict(FIELD.findall(line))


def segment(tmp_path: Path, batches: list[bytes], base: int = 0) -> Path:
    path = tmp_path / f"{base:020d}.log"
    path.write_bytes(b"".join(batches))
    return path


def crc_of(batch: bytes) -> int:
    """CRC-32C over attributes..end, as the v2 format defines it (not via eoslog)."""
    return int(crc32c.crc32c(batch[21:]))


def data_batch(base_offset: int, n: int, *, codec: CompressionType = CompressionType.NONE,
               transactional: bool = False, base_sequence: int = -1, pid: int = -1,
               keyed: bool = True) -> bytes:
    records = [
        (b"k%d" % (base_offset + i) if keyed else None, b"value-%d" % (base_offset + i),
         (("h1", b"x"), ("h2", None)) if i % 2 == 0 else ())
        for i in range(n)
    ]
    return build_batch(
        records, timestamp=T0 + base_offset, timestamps=[T0 + base_offset + i for i in range(n)],
        base_offset=base_offset, compression=codec, producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1, base_sequence=base_sequence,
        transactional=transactional, partition_leader_epoch=0,
    )


def test_batch_and_record_lines_match_kafka_dump_log(tmp_path: Path) -> None:
    txn = data_batch(0, 3, transactional=True, base_sequence=0, pid=PID)
    commit = build_control_batch(ControlRecordType.COMMIT, producer_id=PID, producer_epoch=0,
                                 coordinator_epoch=7, timestamp=T0 + 10, base_offset=3)
    plain = data_batch(4, 2, codec=CompressionType.GZIP, keyed=False)
    path = segment(tmp_path, [txn, commit, plain])

    code, lines, _ = dump(path, "--print-data-log")
    assert code == 0
    assert lines[0] == f"Dumping {path}"
    assert lines[1] == "Log starting offset: 0"
    batch_lines = [line for line in lines if line.startswith("baseOffset:")]
    assert len(batch_lines) == 3

    # The whole first batch line, field by field and in Kafka's order.
    assert batch_lines[0] == (
        f"baseOffset: 0 lastOffset: 2 count: 3 baseSequence: 0 lastSequence: 2 "
        f"producerId: {PID} producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true "
        f"isControl: false deleteHorizonMs: OptionalLong.empty position: 0 "
        f"CreateTime: {T0 + 2} size: {len(txn)} magic: 2 compresscodec: none "
        f"crc: {crc_of(txn)} isvalid: true"
    )
    marker = fields(batch_lines[1])
    assert marker["baseOffset"] == "3" and marker["isControl"] == "true"
    assert marker["isTransactional"] == "true" and marker["position"] == str(len(txn))
    assert marker["crc"] == str(crc_of(commit))
    third = fields(batch_lines[2])
    assert third["compresscodec"] == "gzip" and third["producerId"] == "-1"
    assert third["baseSequence"] == "-1" and third["lastSequence"] == "-1"
    assert third["position"] == str(len(txn) + len(commit))
    assert third["size"] == str(len(plain)) and third["isvalid"] == "true"

    records = [line for line in lines if line.startswith("| ")]
    assert records[0] == (
        f"| offset: 0 CreateTime: {T0} keySize: 2 valueSize: 7 sequence: 0 "
        "headerKeys: [h1,h2] key: k0 payload: value-0"
    )
    assert records[1] == (
        f"| offset: 1 CreateTime: {T0 + 1} keySize: 2 valueSize: 7 sequence: 1 "
        "headerKeys: [] key: k1 payload: value-1"
    )
    assert records[3] == (
        f"| offset: 3 CreateTime: {T0 + 10} keySize: 4 valueSize: 6 sequence: -1 "
        "headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 7"
    )
    # A null key is left out of the line, as Kafka's parser returns no key.
    assert records[4] == (
        f"| offset: 4 CreateTime: {T0 + 4} keySize: -1 valueSize: 7 sequence: -1 "
        "headerKeys: [h1,h2] payload: value-4"
    )
    assert len(records) == 6
    assert not any("invalid bytes" in line for line in lines)


def test_without_print_data_log_only_batches_are_printed(tmp_path: Path) -> None:
    path = segment(tmp_path, [data_batch(0, 2), data_batch(2, 1)])
    code, lines, _ = dump(path)
    assert code == 0
    assert sum(line.startswith("baseOffset:") for line in lines) == 2
    assert not any(line.startswith("|") for line in lines)


def test_abort_marker_and_segment_base_offset(tmp_path: Path) -> None:
    abort = build_control_batch(ControlRecordType.ABORT, producer_id=PID, producer_epoch=3,
                                coordinator_epoch=0, timestamp=T0, base_offset=150)
    path = segment(tmp_path, [data_batch(149, 1, transactional=True, pid=PID, base_sequence=5),
                              abort], base=149)
    code, lines, _ = dump(path, "--print-data-log")
    assert code == 0
    assert lines[1] == "Log starting offset: 149"
    assert lines[-1].endswith("endTxnMarker: ABORT coordinatorEpoch: 0")
    assert "payload" not in lines[-1]
    assert fields(lines[2])["baseSequence"] == "5"


def test_corrupt_crc_is_reported_as_invalid(tmp_path: Path) -> None:
    good, bad, last = data_batch(0, 2), bytearray(data_batch(2, 2)), data_batch(4, 1)
    bad[-3] ^= 0xFF  # inside the last record's value: the header still parses
    path = segment(tmp_path, [good, bytes(bad), last])
    code, lines, _ = dump(path, "--print-data-log")
    assert code == 0
    valid = [fields(line)["isvalid"] for line in lines if line.startswith("baseOffset:")]
    assert valid == ["true", "false", "true"]
    bad_line = next(line for line in lines if line.startswith("baseOffset: 2 "))
    # The CRC printed is the stored one, which no longer matches the bytes.
    assert fields(bad_line)["crc"] == str(struct.unpack_from(">I", bad, 17)[0])
    assert int(fields(bad_line)["crc"]) != crc_of(bytes(bad))


@pytest.mark.parametrize("tail", ["half-batch", "garbage"])
def test_torn_tail_is_reported_not_raised(tmp_path: Path, tail: str) -> None:
    batches = [data_batch(0, 2), data_batch(2, 3)]
    extra = data_batch(5, 4)[:40] if tail == "garbage" else data_batch(5, 4)[:-9]
    path = segment(tmp_path, [*batches, extra])
    code, lines, stderr = dump(path, "--print-data-log")
    assert code == 0
    assert sum(line.startswith("baseOffset:") for line in lines) == 2
    assert lines[-1] == f"Found {len(extra)} invalid bytes at the end of {path.name}"
    assert stderr  # the reason is explained


def test_log_append_time_batch(tmp_path: Path) -> None:
    raw = bytearray(data_batch(0, 2))
    append_time = T0 + 99_999
    assign_offsets(raw, list(iter_batch_headers(bytes(raw))), 0, log_append_time=append_time)
    path = segment(tmp_path, [bytes(raw)])
    code, lines, _ = dump(path, "--print-data-log")
    assert code == 0
    assert f"LogAppendTime: {append_time}" in lines[2]
    assert all(f"LogAppendTime: {append_time}" in line for line in lines[3:5])
    assert fields(lines[2])["isvalid"] == "true"


def _walk(log: Path) -> dict[int, int]:
    """position → base offset of every batch, read straight from the file."""
    data = log.read_bytes()
    out, pos = {}, 0
    while pos < len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        out[pos] = base
        pos += 12 + length
    return out


def test_index_and_timeindex_entries_point_at_batches(tmp_path: Path) -> None:
    cfg = TopicConfig(BrokerConfig.load().topic_defaults(), {"index.interval.bytes": 100})
    now = [T0]
    plog = PartitionLog(tmp_path / "t-0", cfg, lambda: now[0])
    for i in range(30):
        now[0] = T0 + i
        records = [(None, b"v%d-%d" % (i, j) * 5, ()) for j in range(3)]
        append(plog, build_batch(records, timestamp=T0 + i))
    plog.flush()
    plog.close()
    log = tmp_path / "t-0" / f"{0:020d}.log"
    batches = _walk(log)

    code, lines, stderr = dump(log.with_suffix(".index"))
    assert code == 0 and not stderr
    entries = [fields(line) for line in lines[1:]]
    assert entries, "index.interval.bytes=100 must have produced entries"
    for e in entries:
        assert batches[int(e["position"])] == int(e["offset"])

    code, lines, stderr = dump(log.with_suffix(".timeindex"))
    assert code == 0 and not stderr
    stamps = [(int(fields(line)["timestamp"]), int(fields(line)["offset"])) for line in lines[1:]]
    assert stamps and [t for t, _ in stamps] == sorted({t for t, _ in stamps})
    assert all(o in batches.values() for _, o in stamps)


def test_index_mismatch_is_reported(tmp_path: Path) -> None:
    path = segment(tmp_path, [data_batch(0, 2), data_batch(2, 2)])
    second = len(data_batch(0, 2))
    # Entry 1 claims offset 3 is at position 1 (inside the first batch).
    path.with_suffix(".index").write_bytes(struct.pack(">ii", 2, second) + struct.pack(">ii", 3, 1))
    code, lines, stderr = dump(path.with_suffix(".index"))
    assert code == 0
    assert lines[1:] == [f"offset: 2 position: {second}", "offset: 3 position: 1"]
    assert "Mismatches in" in stderr and "Index offset: 3" in stderr


def test_user_mistakes_exit_non_zero_without_traceback(tmp_path: Path) -> None:
    code, _, stderr = dump(tmp_path / "missing.log")
    assert code == 1 and "no such file" in stderr and "Traceback" not in stderr
    other = tmp_path / "00000000000000000000.txnindex.bak"
    other.write_bytes(b"x")
    code, _, stderr = dump(other)
    assert code == 1 and "not a .log" in stderr
    named = tmp_path / "segment.log"
    named.write_bytes(data_batch(0, 1))
    code, _, stderr = dump(named)
    assert code == 1 and "baseOffset" in stderr

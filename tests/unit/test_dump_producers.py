"""``eoslog dump-log`` views of producer state: .snapshot files and --producers."""

from __future__ import annotations

import hashlib
from pathlib import Path

from typer.testing import CliRunner

from eoslog.cli.main import app
from eoslog.config import BrokerConfig, TopicConfig
from eoslog.records import build_batch
from eoslog.storage.log import PartitionLog
from support.leader_log import append

runner = CliRunner()


def idempotent(pid: int, seq: int, epoch: int = 0) -> bytes:
    return build_batch([(None, b"v", ())], timestamp=1_700_000_000_000 + seq,
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def make_partition(tmp: Path) -> Path:
    config = TopicConfig(BrokerConfig.load().topic_defaults(), {"segment.bytes": "500"})
    lg = PartitionLog(tmp / "pay-0", config, lambda: 1_700_000_000_000)
    for seq in range(12):
        append(lg, idempotent(4000, seq))
    for seq in range(3):
        append(lg, idempotent(4001, seq, epoch=2))
    lg.close()  # no final snapshot: --producers must replay the tail after the last roll
    return lg.dir


def fingerprint(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in directory.iterdir()}


def test_producers_view_replays_after_the_last_snapshot(tmp_path: Path) -> None:
    directory = make_partition(tmp_path)
    assert list(directory.glob("*.snapshot")), "segment rolls leave snapshots"
    before = fingerprint(directory)
    result = runner.invoke(app, ["dump-log", str(directory), "--producers"], terminal_width=200)
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[1:-1]]
            for line in result.output.splitlines() if line.startswith("│")}
    assert rows["4000"][1:3] == ["0", "11"]  # epoch, lastSequence
    assert rows["4000"][7] == "7-7 8-8 9-9 10-10 11-11"  # the five cached batches
    assert rows["4001"][1:3] == ["2", "2"]
    assert fingerprint(directory) == before  # read-only


def test_snapshot_file_dump_is_kafka_style(tmp_path: Path) -> None:
    directory = make_partition(tmp_path)
    snap = sorted(directory.glob("*.snapshot"))[-1]
    result = runner.invoke(app, ["dump-log", str(snap)])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("producerId:")]
    assert lines and lines[0].startswith("producerId: 4000 producerEpoch: 0 coordinatorEpoch: -1 "
                                         "currentTxnFirstOffset: None lastTimestamp: ")
    assert " firstSequence: " in lines[0] and " lastOffset: " in lines[0]


def test_corrupt_snapshot_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    snap = tmp_path / "00000000000000000005.snapshot"
    snap.write_bytes(b"\x00\x01garbage")
    result = runner.invoke(app, ["dump-log", str(snap)])
    assert result.exit_code == 1
    assert "CRC" in result.output or "snapshot" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_producers_needs_a_partition_directory(tmp_path: Path) -> None:
    result = runner.invoke(app, ["dump-log", str(tmp_path), "--producers"])
    assert result.exit_code == 1
    assert "not a partition directory" in result.output

"""The ``eoslog`` CLI against a real broker, run as ``python -m eoslog ...`` subprocesses.

What is checked: topics create/list/describe/delete through CreateTopics, Metadata,
ListOffsets, DescribeConfigs and DeleteTopics; produce → consume round trips (keys,
every codec, acks 0/1/all) with byte-identical values in per-partition order; that the
murmur2 partitioner agrees with librdkafka's ``murmur2_random``; that librdkafka reads
what the CLI wrote; control batches skipped by consume; and readable errors (no
traceback, non-zero exit) for user mistakes. Expected values come from the input the
test generated or from an independent client, never from the CLI's own output alone.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from eoslog.client.settings import parse_bootstrap
from eoslog.records import ControlRecordType, build_batch, build_control_batch
from support.harness import BrokerProcess, free_port

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CLI_TIMEOUT_S = 120


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "eoslog", *args], input=stdin, capture_output=True,
        timeout=CLI_TIMEOUT_S, check=False,
    )


def cli(b: BrokerProcess, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return run(*args, "--bootstrap-server", b.bootstrap, stdin=stdin)


def ok(result: subprocess.CompletedProcess[bytes]) -> str:
    assert result.returncode == 0, result.stderr.decode()
    assert b"Traceback" not in result.stderr
    return result.stdout.decode()


def failed(result: subprocess.CompletedProcess[bytes]) -> str:
    """A user mistake: non-zero exit, one readable message, no traceback."""
    err = result.stderr.decode()
    assert result.returncode != 0, result.stdout.decode()
    assert "Traceback" not in err, err
    return err


def consume_lines(b: BrokerProcess, topic: str, n: int, *extra: str) -> list[list[bytes]]:
    """``consume`` with Partition/Offset/Key columns → [[partition, offset, key, value]]."""
    out = cli(b, "consume", topic, "--print-partition", "--print-offset", "--print-key",
              "--max-messages", str(n), "--timeout-ms", "20000", *extra)
    assert out.returncode == 0, out.stderr.decode()
    rows = [line.split(b"\t", 3) for line in out.stdout.split(b"\n") if line]
    for r in rows:
        assert r[0].startswith(b"Partition:") and r[1].startswith(b"Offset:")
        r[0], r[1] = r[0][len(b"Partition:"):], r[1][len(b"Offset:"):]
    return rows


def describe_rows(text: str) -> dict[int, list[str]]:
    """Partition rows of ``topics describe``: partition → [leader, replicas, isr, start, end]."""
    rows = {}
    for line in text.splitlines():
        cells = line.split()
        if len(cells) == 8 and cells[0].isdigit():  # partition, leader, epoch, replicas, isr, offline, start, end
            rows[int(cells[0])] = [cells[1], *cells[3:5], *cells[6:]]
    return rows


def test_topic_lifecycle(shared_broker: BrokerProcess) -> None:
    b = shared_broker
    assert "Created topic cli-life." in ok(
        cli(b, "topics", "create", "cli-life", "--partitions", "3", "--config", "retention.ms=3600000",
            "--config", "cleanup.policy=delete")
    )
    assert "cli-life" in ok(cli(b, "topics", "list")).split()

    text = ok(cli(b, "topics", "describe", "cli-life"))
    header = text.splitlines()[0]
    assert "Topic: cli-life" in header and "PartitionCount: 3" in header
    assert "ReplicationFactor: 1" in header
    configs = header.split("Configs:")[1].strip().split(",")
    assert sorted(configs) == ["cleanup.policy=delete", "retention.ms=3600000"]
    rows = describe_rows(text)
    assert sorted(rows) == [0, 1, 2]
    assert all(r == ["0", "0", "0", "0", "0"] for r in rows.values())

    err = failed(cli(b, "topics", "create", "cli-life", "--partitions", "3"))
    assert "already exists" in err
    ok(cli(b, "topics", "create", "cli-life", "--if-not-exists"))
    assert "INVALID_CONFIG" in failed(cli(b, "topics", "create", "cli-bad", "--config", "no.such=1"))

    assert "Deleted topic cli-life." in ok(cli(b, "topics", "delete", "cli-life"))
    assert "cli-life" not in ok(cli(b, "topics", "list")).split()
    assert "does not exist" in failed(cli(b, "topics", "describe", "cli-life"))
    assert "does not exist" in failed(cli(b, "topics", "delete", "cli-life"))
    ok(cli(b, "topics", "delete", "cli-life", "--if-exists"))


def test_keyed_lines_round_trip_and_match_librdkafka_murmur2(shared_broker: BrokerProcess) -> None:
    b = shared_broker
    rng = random.Random(2)
    ok(cli(b, "topics", "create", "cli-keyed", "--partitions", "3"))
    ok(cli(b, "topics", "create", "cli-keyed-rdkafka", "--partitions", "3"))
    keys = [f"user-{i}".encode() for i in range(60)] + [b"21", b"foobar", b"", "ключ".encode()]
    sent = [(rng.choice(keys), b"event-%d-%s" % (i, rng.randbytes(6).hex().encode()))
            for i in range(1000)]
    stdin = b"".join(k + b":" + v + b"\n" for k, v in sent)
    result = cli(b, "produce", "cli-keyed", "--key-separator", ":", stdin=stdin)
    ok(result)
    assert "Produced 1000 records to topic cli-keyed" in result.stderr.decode()

    rows = consume_lines(b, "cli-keyed", 1000, "--from-beginning")
    assert len(rows) == 1000
    cli_partition: dict[bytes, int] = {}
    by_partition: dict[int, list[tuple[bytes, bytes]]] = defaultdict(list)
    for p, offset, key, value in rows:
        assert int(offset) == len(by_partition[int(p)])  # offsets 0, 1, 2, ... per partition
        by_partition[int(p)].append((key, value))
        assert cli_partition.setdefault(key, int(p)) == int(p)  # one key, one partition
    for p, got in by_partition.items():
        assert got == [kv for kv in sent if cli_partition[kv[0]] == p]  # identical, in order
    assert len(by_partition) == 3

    # librdkafka's murmur2_random is Kafka's Java partitioner: same key, same partition.
    producer = Producer({"bootstrap.servers": b.bootstrap, "partitioner": "murmur2_random",
                         "acks": "all"})
    rdkafka_partition: dict[bytes, int] = {}

    def delivered(err: object, msg: object) -> None:
        assert err is None, err
        rdkafka_partition[msg.key()] = msg.partition()  # type: ignore[attr-defined]

    for key in keys:
        producer.produce("cli-keyed-rdkafka", key=key, value=b"x", on_delivery=delivered)
    assert producer.flush(30) == 0
    used = {k: p for k, p in rdkafka_partition.items() if k in cli_partition}
    assert used == {k: cli_partition[k] for k in used}
    assert len(used) == len({k for k, _ in sent})

    ends = {p: int(r[4]) for p, r in describe_rows(ok(cli(b, "topics", "describe", "cli-keyed"))).items()}
    assert ends == {p: len(v) for p, v in by_partition.items()}


def test_every_codec_round_trips_and_librdkafka_reads_it(shared_broker: BrokerProcess) -> None:
    b = shared_broker
    ok(cli(b, "topics", "create", "cli-codecs", "--partitions", "2"))
    rng = random.Random(3)
    sent: list[bytes] = []
    for codec in CODECS:
        values = [b"%s-%d-%s" % (codec.encode(), i, rng.randbytes(rng.randrange(0, 300)).hex().encode())
                  for i in range(40)]
        sent += values
        ok(cli(b, "produce", "cli-codecs", "--partition", "1", "--compression", codec,
               "--acks", "1", stdin=b"".join(v + b"\n" for v in values)))

    rows = consume_lines(b, "cli-codecs", len(sent), "--partition", "1", "--offset", "0")
    assert [r[3] for r in rows] == sent
    assert {r[0] for r in rows} == {b"1"}
    assert [r[2] for r in rows] == [b"null"] * len(sent)

    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "cli-codecs",
                  "enable.auto.commit": False})
    c.assign([TopicPartition("cli-codecs", 1, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60  # hang guard only
    while len(got) < len(sent) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    assert got == sent

    # The broker stored each batch as the CLI compressed it.
    segment = b.data_dir / "cli-codecs-1" / f"{0:020d}.log"
    dumped = ok(run("dump-log", str(segment)))
    codecs = re.findall(r"compresscodec: (\w+)", dumped)
    assert [c for i, c in enumerate(codecs) if i == 0 or c != codecs[i - 1]] == list(CODECS)
    assert "isvalid: false" not in dumped


def test_keyless_round_robin_with_acks_zero(shared_broker: BrokerProcess) -> None:
    b = shared_broker
    ok(cli(b, "topics", "create", "cli-rr", "--partitions", "3"))
    values = [b"line %d with spaces\tand a tab" % i for i in range(30)]
    ok(cli(b, "produce", "cli-rr", "--acks", "0", stdin=b"".join(v + b"\n" for v in values)))
    rows = consume_lines(b, "cli-rr", 30, "--from-beginning")
    per_partition: dict[int, list[bytes]] = defaultdict(list)
    for p, _, key, value in rows:
        assert key == b"null"
        per_partition[int(p)].append(value)
    # Round-robin from partition 0: record i goes to partition i % 3.
    assert per_partition == {p: values[p::3] for p in range(3)}


def test_consume_skips_control_batches(broker: BrokerProcess) -> None:
    b = broker
    ok(cli(b, "topics", "create", "cli-ctl", "--partitions", "1"))
    ok(cli(b, "produce", "cli-ctl", stdin=b"a\nb\nc\n"))
    b.stop()
    # As a transaction coordinator would leave it: a COMMIT marker at offset 3, then data.
    segment = b.data_dir / "cli-ctl-0" / f"{0:020d}.log"
    now = int(time.time() * 1000)
    marker = build_control_batch(ControlRecordType.COMMIT, producer_id=7, producer_epoch=0,
                                 coordinator_epoch=2, timestamp=now, base_offset=3)
    after = build_batch([(None, b"after-marker", ())], timestamp=now, base_offset=4)
    with segment.open("ab") as f:
        f.write(marker + after)
    b.start()

    for level in ("read_uncommitted", "read_committed"):
        rows = consume_lines(b, "cli-ctl", 4, "--from-beginning", "--isolation-level", level)
        assert [(r[1], r[3]) for r in rows] == [
            (b"0", b"a"), (b"1", b"b"), (b"2", b"c"), (b"4", b"after-marker")
        ]
    dumped = ok(run("dump-log", str(segment), "--print-data-log"))
    assert "endTxnMarker: COMMIT coordinatorEpoch: 2" in dumped
    assert "payload: after-marker" in dumped


def test_user_mistakes_get_a_message_not_a_traceback(shared_broker: BrokerProcess) -> None:
    b = shared_broker
    dead = f"127.0.0.1:{free_port()}"
    assert "cannot connect" in failed(run("topics", "list", "--bootstrap-server", dead))
    assert "cannot connect" in failed(run("consume", "t", "--bootstrap-server", dead))
    assert "HOST:PORT" in failed(run("topics", "list", "--bootstrap-server", "no-port"))
    assert "does not exist" in failed(cli(b, "consume", "cli-never-created", "--timeout-ms", "100"))
    ok(cli(b, "topics", "create", "cli-one", "--partitions", "1"))
    assert "has 1 partition" in failed(cli(b, "produce", "cli-one", "--partition", "5", stdin=b"x\n"))
    assert "--partition" in failed(cli(b, "consume", "cli-one", "--offset", "3"))
    assert "--compression" in failed(cli(b, "produce", "cli-one", "--compression", "brotli", stdin=b""))
    err = failed(cli(b, "produce", "cli-one", "--key-separator", "=", stdin=b"k=v\nno separator\n"))
    assert "No key separator found on line number 2" in err
    # The line before the bad one was still sent, as kafka-console-producer does.
    rows = consume_lines(b, "cli-one", 1, "--from-beginning")
    assert [(r[2], r[3]) for r in rows] == [(b"k", b"v")]


def test_parse_bootstrap() -> None:
    assert parse_bootstrap("a:1, b:2") == [("a", 1), ("b", 2)]
    assert parse_bootstrap("[::1]:9092") == [("::1", 9092)]
    for bad in ("", "host", "host:", "host:x", ":9092", "h:70000"):
        with pytest.raises(ValueError):
            parse_bootstrap(bad)


def test_dump_log_of_a_live_segment_is_read_only(shared_broker: BrokerProcess, tmp_path: Path) -> None:
    b = shared_broker
    ok(cli(b, "topics", "create", "cli-dump", "--partitions", "1"))
    ok(cli(b, "produce", "cli-dump", "--key-separator", ":", stdin=b"k1:v1\nk2:v2\n"))
    directory = b.data_dir / "cli-dump-0"
    before = {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file()}
    segment = directory / f"{0:020d}.log"
    lines = ok(run("dump-log", str(segment), "--print-data-log")).splitlines()
    assert lines[:2] == [f"Dumping {segment}", "Log starting offset: 0"]
    assert [line.split("key: ")[1] for line in lines if line.startswith("|")] == [
        "k1 payload: v1", "k2 payload: v2"
    ]
    assert {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file()} == before


def test_consume_starts_at_the_end_without_from_beginning(shared_broker: BrokerProcess) -> None:
    b = shared_broker
    ok(cli(b, "topics", "create", "cli-latest", "--partitions", "1"))
    ok(cli(b, "produce", "cli-latest", stdin=b"old-0\nold-1\n"))
    consumer = subprocess.Popen(
        [sys.executable, "-m", "eoslog", "consume", "cli-latest", "--max-messages", "1",
         "--timeout-ms", "60000", "--bootstrap-server", b.bootstrap],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        # The consumer resolves "latest" at some point after it starts; keep producing
        # until it has printed one record, which must be a new one.
        i = 0
        while consumer.poll() is None and i < 200:
            ok(cli(b, "produce", "cli-latest", stdin=b"new-%d\n" % i))
            i += 1
        out, err = consumer.communicate(timeout=CLI_TIMEOUT_S)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    assert consumer.returncode == 0, err.decode()
    assert re.fullmatch(rb"new-\d+\n", out), out
    assert b"Processed a total of 1 messages" in err


def test_produce_and_consume_take_the_topic_as_kafkas_tools_do(shared_broker: BrokerProcess) -> None:
    """``--topic`` (kafka-console-producer/consumer's option) or the argument; both naming
    different topics, or neither, is a readable mistake."""
    b = shared_broker
    ok(cli(b, "topics", "create", "cli-opt", "--partitions", "1"))
    ok(cli(b, "produce", "--topic", "cli-opt", stdin=b"by-option\n"))
    ok(cli(b, "produce", "cli-opt", "--topic", "cli-opt", stdin=b"both-alike\n"))
    out = ok(cli(b, "consume", "--topic", "cli-opt", "--from-beginning", "--max-messages", "2",
                 "--timeout-ms", "20000"))
    assert out.split() == ["by-option", "both-alike"]
    assert "two topics given" in failed(cli(b, "consume", "cli-opt", "--topic", "other", "--timeout-ms", "100"))
    assert "give the topic" in failed(cli(b, "produce", stdin=b"x\n"))

"""Crash safety: ``kill -9`` during acks=all produce, and torn segment tails at start-up.

Without idempotence a record whose acknowledgement was lost in a crash is sent again
after the restart and may be stored twice; that is the client's at-least-once contract.
What the broker owes is checked exactly: every acknowledged record sits at the offset
its acknowledgement named, no two acknowledgements name one offset, a record stored
twice was unacknowledged when a kill hit, and every stored batch passes its CRC.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.records import decode_records, iter_batch_headers
from support.harness import BrokerProcess

pytestmark = pytest.mark.slow

TOPIC = "crash"
KILLS = 3
RATE = 5000


def create_topic(bootstrap: str, name: str, partitions: int = 1,
                 config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])
    futures[name].result(30)


def stored_records(partition_dir: Path) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in the partition's segment files, every batch
    CRC-checked (iter_batch_headers raises at the first bad or torn batch)."""
    out: list[tuple[int, bytes]] = []
    for path in sorted(partition_dir.glob("*.log")):
        data = path.read_bytes()
        for pos, h in iter_batch_headers(data, verify_crc=True):
            out += [(r.offset, r.value or b"") for r in decode_records(data[pos : pos + h.size])]
    return out


def dump_log_check(partition_dir: Path, stored: list[tuple[int, bytes]]) -> None:
    """``eoslog dump-log`` over the partition's segments and indexes must succeed, find every
    batch whole and valid, cover exactly the stored offsets and report no index mismatch."""
    files = [p for suffix in (".log", ".index", ".timeindex") for p in sorted(partition_dir.glob(f"*{suffix}"))]
    assert any(p.suffix == ".log" for p in files), f"no segment in {partition_dir}"
    done = subprocess.run([sys.executable, "-m", "eoslog", "dump-log", *map(str, files)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"eoslog dump-log failed (exit {done.returncode}):\n{done.stderr}"
    assert done.stderr == "", f"eoslog dump-log reported problems:\n{done.stderr}"
    assert "invalid bytes" not in done.stdout
    batches = re.findall(r"baseOffset: (\d+) lastOffset: (\d+) .* isvalid: (\w+)", done.stdout)
    assert [valid for *_, valid in batches] == ["true"] * len(batches)
    dumped = [o for base, last, _ in batches for o in range(int(base), int(last) + 1)]
    assert dumped == [o for o, _ in stored]


def consume_all(bootstrap: str, topic: str, partition: int = 0) -> list[tuple[int, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.time_ns()}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), 30)
        assert low == 0
        consumer.assign([TopicPartition(topic, partition, 0)])
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 120
        while (not got or got[-1][0] < high - 1) and high > 0:
            assert time.monotonic() < deadline, f"consumed {len(got)} of {high}"
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                assert err.code() == KafkaError._PARTITION_EOF, err
                continue
            got.append((msg.offset(), msg.value() or b""))
        return got
    finally:
        consumer.close()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data").start()
    yield b
    if b.alive():
        b.stop()


class Ledger:
    """What the producer was told, and what was unacknowledged at each kill."""

    def __init__(self) -> None:
        self.produced = 0
        self.acked: dict[int, int] = {}  # record number → offset named by its ack
        self.failed: list[tuple[int, str]] = []
        self.at_kill: list[tuple[int, frozenset[int]]] = []  # (produced, acked numbers)

    def on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        n = int(msg.value())
        if err is None:
            assert n not in self.acked, f"record {n} acknowledged twice"
            self.acked[n] = msg.offset()
        else:
            self.failed.append((n, str(err)))

    def mark_kill(self) -> None:
        self.at_kill.append((self.produced, frozenset(self.acked)))

    def may_be_duplicated(self, n: int) -> bool:
        """Sent before a kill and not acknowledged when it hit."""
        return any(n < produced and n not in acked for produced, acked in self.at_kill)


def test_kill_9_during_acks_all_produce(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, TOPIC)
    ledger = Ledger()
    producer = Producer({
        "bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": False,
        "max.in.flight.requests.per.connection": 1, "linger.ms": 2, "batch.num.messages": 200,
        "retries": 1_000_000, "retry.backoff.ms": 50, "message.timeout.ms": 180_000,
        "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500,
    })
    rng = random.Random(20261122)
    next_kill = time.monotonic() + rng.uniform(0.5, 1.5)
    kills = 0
    # Paced at about RATE records/s so that sends are in flight all along.
    started = time.monotonic()
    while kills < KILLS or time.monotonic() < next_kill:
        due = int((time.monotonic() - started) * RATE)
        while ledger.produced < due:
            try:
                producer.produce(TOPIC, value=str(ledger.produced).encode(),
                                 on_delivery=ledger.on_delivery)
            except BufferError:  # a slow restart (a loaded machine) let `due` run past the local queue
                break
            ledger.produced += 1
        producer.poll(0.005)
        if kills < KILLS and time.monotonic() >= next_kill:
            ledger.mark_kill()
            broker.kill()
            kills += 1
            time.sleep(rng.uniform(0.0, 0.5))
            broker.start()
            next_kill = time.monotonic() + rng.uniform(0.5, 1.5)
    assert producer.flush(180) == 0
    assert ledger.failed == []
    assert len(ledger.acked) == ledger.produced

    consumed = consume_all(broker.bootstrap, TOPIC)
    assert broker.stop() == 0
    partition_dir = broker.data_dir / f"{TOPIC}-0"
    stored = stored_records(partition_dir)
    dump_log_check(partition_dir, stored)
    assert consumed == stored
    assert [o for o, _ in stored] == list(range(len(stored)))

    by_offset = dict(stored)
    # Every acknowledged record is where its acknowledgement said, one per offset, in order.
    assert all(by_offset.get(off) == str(n).encode() for n, off in ledger.acked.items())
    assert len(set(ledger.acked.values())) == len(ledger.acked)
    offsets_in_send_order = [ledger.acked[n] for n in range(ledger.produced)]
    assert offsets_in_send_order == sorted(offsets_in_send_order)
    # Anything else in the log is an extra copy of a record that was in flight at a kill.
    counts = Counter(int(v) for _, v in stored)
    assert set(counts) == set(range(ledger.produced))
    duplicated = {n for n, c in counts.items() if c > 1}
    assert all(ledger.may_be_duplicated(n) for n in duplicated), sorted(duplicated)[:20]
    assert broker.log_text().count("no clean-shutdown marker") == KILLS
    print(f"{ledger.produced} records, {KILLS} kills, {len(stored)} stored, "
          f"{len(duplicated)} duplicated by retries after a kill")


def produce_numbered(bootstrap: str, topic: str, start: int, count: int, **extra: Any) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "batch.num.messages": 50, **extra})
    errors: list[str] = []
    for n in range(start, start + count):
        producer.produce(topic, value=b"%d" % n,
                         on_delivery=lambda err, _msg: errors.append(str(err)) if err else None)
        if n % 25 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0 and errors == []


@pytest.mark.parametrize("shutdown", ["kill", "clean"])
def test_torn_tail_with_garbage_is_repaired_at_start_up(
    broker: BrokerProcess, shutdown: str
) -> None:
    create_topic(broker.bootstrap, TOPIC)
    produce_numbered(broker.bootstrap, TOPIC, 0, 2000)
    if shutdown == "kill":
        broker.kill()
    else:
        assert broker.stop() == 0
    partition_dir = broker.data_dir / f"{TOPIC}-0"
    [segment] = sorted(partition_dir.glob("*.log"))
    data = segment.read_bytes()
    batches = list(iter_batch_headers(data, verify_crc=True))
    assert len(batches) >= 10
    cut_pos, cut_batch = batches[len(batches) * 2 // 3]
    kept = cut_batch.base_offset  # records before the cut batch survive
    garbage = bytes(random.Random(5).randrange(256) for _ in range(777))
    segment.write_bytes(data[: cut_pos + cut_batch.size // 2] + garbage)
    cut = cut_batch.size // 2 + len(garbage)

    broker.start()
    log = broker.log_text().split(f"--- start {broker.starts - 1} ---")[-1]
    assert f"{segment}" in log and f"{cut} bytes removed" in log, log[-3000:]
    assert segment.stat().st_size == cut_pos

    consumed = consume_all(broker.bootstrap, TOPIC)
    assert consumed == [(n, b"%d" % n) for n in range(kept)]
    # The partition carries on from the end of the valid prefix.
    produce_numbered(broker.bootstrap, TOPIC, kept, 100)
    assert consume_all(broker.bootstrap, TOPIC) == [(n, b"%d" % n) for n in range(kept + 100)]
    assert broker.stop() == 0
    assert [o for o, _ in stored_records(partition_dir)] == list(range(kept + 100))

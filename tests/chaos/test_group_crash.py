"""Groups and compaction under crashes and load, against the real broker process.

- A commit-heavy workload keeps ``__consumer_offsets`` bounded (the cleaner compacts it
  while commits pour in), and every acknowledged commit survives a ``kill -9``.
- A consumer keeps its group through a broker ``kill -9`` and restart and skips nothing.
- A compacted user topic written by a real producer converges to the last value per key,
  also after a ``kill -9`` and restart.

Loops that wait are hang guards; assertions are about contents and sizes, not time.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.coordinator.group.records import offsets_partition_for
from support.harness import BrokerProcess, wait_until

pytestmark = pytest.mark.slow

OFFSETS_SEGMENT_BYTES = 16384
OFFSETS_PARTITIONS = 5
WAIT_S = 120.0
OVERRIDES = {
    "offsets.topic.segment.bytes": str(OFFSETS_SEGMENT_BYTES),
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    "log.cleaner.backoff.ms": "200",
    "group.initial.rebalance.delay.ms": "200",
}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data", overrides=OVERRIDES).start()
    yield b
    if b.alive():
        b.stop()


def create_topic(bootstrap: str, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(30)


def segment_sizes(directory: Path) -> list[tuple[str, int]]:
    """(name, size) of each segment; the cleaner may delete one between listing and stat."""
    out = []
    for p in sorted(directory.glob("*.log")):
        try:
            out.append((p.name, p.stat().st_size))
        except FileNotFoundError:
            continue
    return out


def log_bytes(directory: Path) -> int:
    return sum(size for _, size in segment_sizes(directory))


def test_commit_heavy_workload_keeps_consumer_offsets_bounded(broker: BrokerProcess) -> None:
    topic, group, commits = "heavy", "committer", 6000
    create_topic(broker.bootstrap, topic, 6)
    partition_dir = broker.data_dir / f"__consumer_offsets-{offsets_partition_for(group, OFFSETS_PARTITIONS)}"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    samples = []
    try:
        for i in range(commits):
            consumer.commit(offsets=[TopicPartition(topic, p, i * 10 + p) for p in range(6)],
                            asynchronous=False)
            if i % 100 == 0:
                samples.append(log_bytes(partition_dir))
    finally:
        consumer.close()
    last = {p: (commits - 1) * 10 + p for p in range(6)}
    appended = commits * 6 * 60  # at least 60 bytes per committed offset on disk
    assert appended > 100 * OFFSETS_SEGMENT_BYTES
    # Bounded while the workload ran: a few segments, not the 100+ it wrote.
    assert max(samples) < 25 * OFFSETS_SEGMENT_BYTES, samples
    wait_until(lambda: log_bytes(partition_dir) < 3 * OFFSETS_SEGMENT_BYTES, "the cleaner to catch up", WAIT_S,
               describe=lambda: segment_sizes(partition_dir), interval_s=0.2)

    broker.restart(kill=True)
    check = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    committed = check.committed([TopicPartition(topic, p) for p in range(6)], timeout=30)
    check.close()
    assert {tp.partition: tp.offset for tp in committed} == last


def test_consumer_keeps_its_group_through_a_broker_kill(broker: BrokerProcess) -> None:
    topic = group = "survivor"
    create_topic(broker.bootstrap, topic, 6)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})

    def produce(start: int, n: int) -> None:
        for i in range(start, start + n):
            for p in range(6):
                producer.produce(topic, key=b"%d" % i, value=b"%d" % i, partition=p)
        assert producer.flush(60) == 0

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "session.timeout.ms": 10000, "heartbeat.interval.ms": 500,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    consumed: set[tuple[int, int]] = set()

    def poll_until(expected: set[tuple[int, int]]) -> None:
        deadline = time.monotonic() + WAIT_S
        while not expected <= consumed:
            if time.monotonic() > deadline:
                raise AssertionError(f"missing {sorted(expected - consumed)[:10]}")
            msgs = [m for m in consumer.consume(500, 0.3) if m.error() is None]
            if msgs:
                consumed.update((m.partition(), m.offset()) for m in msgs)
                # The broker may be down: a later poll commits again.
                with contextlib.suppress(KafkaException):
                    consumer.commit(asynchronous=False)

    try:
        produce(0, 20)
        poll_until({(p, o) for p in range(6) for o in range(20)})
        broker.restart(kill=True)
        produce(20, 20)
        poll_until({(p, o) for p in range(6) for o in range(40)})
        # The commits above tolerate the broker being down; the consumer's positions are
        # committed once more after the restart, and that must go through (a retriable failure
        # on the last one above would otherwise leave fewer than 40).
        consumer.commit(offsets=consumer.position([TopicPartition(topic, p) for p in range(6)]),
                        asynchronous=False)
        committed = {tp.partition: tp.offset for tp in consumer.committed(
            [TopicPartition(topic, p) for p in range(6)], timeout=30)}
        assert committed == dict.fromkeys(range(6), 40)
    finally:
        consumer.close()


def test_compacted_topic_converges_to_the_last_value_per_key(broker: BrokerProcess) -> None:
    topic, keys, updates = "compacted", 50, 40
    create_topic(broker.bootstrap, topic, 1, {
        "cleanup.policy": "compact", "segment.bytes": "8192", "segment.ms": "1000",
        "min.cleanable.dirty.ratio": "0.01",
    })
    # Small batches: a batch larger than segment.bytes is refused (RECORD_LIST_TOO_LARGE).
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5,
                         "batch.size": 2048})
    errors: list[Any] = []

    def send(key: bytes, value: bytes | None, timestamp: int = 0) -> None:
        producer.produce(topic, key=key, value=value, partition=0, timestamp=timestamp,
                         on_delivery=lambda err, _: err is not None and errors.append(err))

    final = {}
    for u in range(updates):
        for k in range(keys):
            value = b"key-%d-update-%d" % (k, u)
            send(b"key-%d" % k, value)
            final[b"key-%d" % k] = value
    send(b"gone", b"soon deleted")
    send(b"gone", None)
    final[b"gone"] = None
    assert producer.flush(60) == 0 and not errors, errors
    # A record stamped more than segment.ms after the active segment's first one rolls it
    # (as Kafka, the roll compares record timestamps), so everything before it becomes
    # cleanable (the active segment never is).
    send(b"roll", b"last", timestamp=int(time.time() * 1000) + 60_000)
    final[b"roll"] = b"last"
    assert producer.flush(60) == 0 and not errors, errors
    written = keys * updates + 2
    assert f"{written:020d}.log" in [name for name, _ in segment_sizes(broker.data_dir / f"{topic}-0")]

    def read_back() -> list[tuple[int, bytes, bytes | None]]:
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "reader",
                      "enable.auto.commit": False, "enable.partition.eof": True})
        c.assign([TopicPartition(topic, 0, 0)])
        out = []
        try:
            while True:
                m = c.poll(5)
                if m is None:
                    raise AssertionError("no end-of-partition event")
                if m.error() is not None:
                    break  # end of partition
                out.append((m.offset(), m.key(), m.value()))
        finally:
            c.close()
        return out

    wait_until(lambda: len(read_back()) == len(final), "compaction to leave one record per key", WAIT_S,
               describe=lambda: len(read_back()), interval_s=0.2)
    records = read_back()
    assert {k: v for _, k, v in records} == final  # the tombstone stays until its horizon
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(offsets) and offsets[-1] == written  # original offsets, with gaps
    broker.restart(kill=True)
    assert read_back() == records

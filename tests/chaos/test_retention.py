"""Segment roll and retention through a running broker, seen by real clients.

Topics are created with small segment.bytes / retention.bytes / retention.ms configs
and the broker checks retention every 200 ms. The tests wait for an end state (never
for a time), then check the files on disk, ListOffsets earliest, and what consumers
get when they ask for offsets that were deleted.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.records import iter_batch_headers
from support.harness import BrokerProcess, wait_until
from support.rawkafka import EARLIEST, LATEST, RawClient, fetch, list_offset

pytestmark = pytest.mark.slow

OFFSET_OUT_OF_RANGE = 1
WAIT_LIMIT_S = 60.0  # a guard against hanging, not a timing assertion


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("retention") / "data",
                      overrides={"log.retention.check.interval.ms": "200"}).start()
    yield b
    if b.alive():
        assert b.stop() == 0


def create_topic(broker: BrokerProcess, name: str, config: dict[str, str]) -> Path:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=config)])[name].result(30)
    return broker.data_dir / f"{name}-0"


def produce(broker: BrokerProcess, topic: str, values: list[bytes],
            timestamp_ms: int | None = None) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0,
                         "batch.num.messages": 1})
    errors: list[str] = []
    for v in values:
        producer.produce(topic, value=v, timestamp=timestamp_ms or 0,
                         on_delivery=lambda err, _m: errors.append(str(err)) if err else None)
        producer.poll(0)
    assert producer.flush(60) == 0 and errors == []


def segments(partition_dir: Path) -> list[tuple[int, int]]:
    """(base offset, size) of each segment file, oldest first. The broker's retention may
    delete a segment between listing and stat: such a segment is simply gone."""
    out = []
    for p in sorted(partition_dir.glob("*.log")):
        try:
            out.append((int(p.stem), p.stat().st_size))
        except FileNotFoundError:
            continue
    return out


def offsets(broker: BrokerProcess, topic: str) -> tuple[int, int]:
    """(earliest, latest) from ListOffsets."""
    with RawClient(broker.bootstrap) as c:
        e_err, earliest = list_offset(c, topic, 0, EARLIEST)
        l_err, latest = list_offset(c, topic, 0, LATEST)
    assert e_err == l_err == 0
    return earliest, latest


def consume_from(broker: BrokerProcess, topic: str, offset: int, reset: str,
                 until: int) -> tuple[list[tuple[int, bytes]], list[int]]:
    """Messages and error codes a consumer assigned at ``offset`` sees up to offset ``until``."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g{time.time_ns()}",
                         "enable.auto.commit": False, "auto.offset.reset": reset})
    got: list[tuple[int, bytes]] = []
    errors: list[int] = []
    try:
        consumer.assign([TopicPartition(topic, 0, offset)])
        deadline = time.monotonic() + WAIT_LIMIT_S
        while (not got or got[-1][0] < until - 1) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                errors.append(msg.error().code())
                if reset == "error":
                    break
                continue
            got.append((msg.offset(), msg.value() or b""))
    finally:
        consumer.close()
    return got, errors


def test_retention_bytes_rolls_and_deletes_old_segments(broker: BrokerProcess) -> None:
    retention_bytes = 6000
    pdir = create_topic(broker, "by-bytes", {"segment.bytes": "2000",
                                             "retention.bytes": str(retention_bytes)})
    assert offsets(broker, "by-bytes") == (0, 0)
    values = [b"record-%04d-" % i + b"x" * 60 for i in range(300)]
    produce(broker, "by-bytes", values)

    def settled() -> bool:
        segs = segments(pdir)
        total = sum(size for _, size in segs)
        return total - segs[0][1] < retention_bytes
    wait_until(settled, "retention.bytes to delete old segments", WAIT_LIMIT_S)

    segs = segments(pdir)
    assert all(size <= 2000 for _, size in segs)
    # Whole segments went, oldest first; what is left still holds retention.bytes.
    assert sum(size for _, size in segs) >= retention_bytes
    earliest, latest = offsets(broker, "by-bytes")
    assert latest == len(values)
    assert earliest == segs[0][0] > 0

    # A consumer asking for a deleted offset is reset to the earliest one.
    got, _ = consume_from(broker, "by-bytes", 0, "earliest", latest)
    assert got == [(o, values[o]) for o in range(earliest, latest)]
    # ... or told, when it asked not to be reset.
    _, errors = consume_from(broker, "by-bytes", 0, "error", latest)
    assert errors and errors[0] == KafkaError._AUTO_OFFSET_RESET
    with RawClient(broker.bootstrap) as c:
        # Kafka's OFFSET_OUT_OF_RANGE answer carries no offsets (ReplicaManager's LogReadResult
        # for an error: -1 each; tests/conformance delete-records compares it with Kafka 4.4's):
        # a client learns the new log start from ListOffsets, as librdkafka's reset above did.
        part = fetch(c, "by-bytes", 0, earliest - 1)
        assert part.error_code == OFFSET_OUT_OF_RANGE
        assert (part.log_start_offset, part.high_watermark) == (-1, -1)
        assert list_offset(c, "by-bytes", 0, EARLIEST) == (0, earliest)
        assert fetch(c, "by-bytes", 0, earliest).error_code == 0


def test_retention_ms_deletes_expired_segments_including_the_active_one(
    broker: BrokerProcess,
) -> None:
    pdir = create_topic(broker, "by-time", {"segment.bytes": "3000", "retention.ms": "600000"})
    hour_ago = int(time.time() * 1000) - 3_600_000
    old = [b"old-%03d" % i for i in range(100)]
    produce(broker, "by-time", old, timestamp_ms=hour_ago)
    # Every segment is older than retention.ms; the active one is rolled, then deleted.
    wait_until(lambda: offsets(broker, "by-time")[0] == len(old), "expired segments to go", WAIT_LIMIT_S)
    assert offsets(broker, "by-time") == (len(old), len(old))
    assert segments(pdir) == [(len(old), 0)]

    fresh = [b"fresh-%03d" % i for i in range(20)]
    produce(broker, "by-time", fresh)
    got, _ = consume_from(broker, "by-time", 0, "earliest", len(old) + len(fresh))
    assert got == [(len(old) + i, v) for i, v in enumerate(fresh)]
    assert offsets(broker, "by-time") == (len(old), len(old) + len(fresh))


def test_segment_ms_rolls_on_record_timestamps(broker: BrokerProcess) -> None:
    pdir = create_topic(broker, "by-age", {"segment.ms": "60000"})
    t0 = int(time.time() * 1000) - 600_000
    produce(broker, "by-age", [b"a", b"b"], timestamp_ms=t0)
    produce(broker, "by-age", [b"c"], timestamp_ms=t0 + 60_000)
    assert [base for base, _ in segments(pdir)] == [0]
    produce(broker, "by-age", [b"d"], timestamp_ms=t0 + 60_001)
    assert [base for base, _ in segments(pdir)] == [0, 3]
    for path in sorted(pdir.glob("*.log")):
        list(iter_batch_headers(path.read_bytes(), verify_crc=True))

"""Idempotent producers through dropped responses, cut connections and a broker kill -9.

Each client sends numbered records to a 3-partition topic (record i to partition i % 3)
through the fault proxy; halfway the broker is killed with SIGKILL and restarted. The
test then reads every partition from offset 0 and requires exactly the expected
sequence: a duplicate, a loss or a reordering anywhere fails it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from faults import FaultPolicy, FaultRig

N_RECORDS = 200_000
PARTITIONS = 3
KILL_AT = N_RECORDS // 2

pytestmark = pytest.mark.slow


class Rig(FaultRig):
    def __init__(self, tmp: Path) -> None:
        super().__init__(tmp, PARTITIONS)

    def faults_on(self) -> None:
        self.proxy.set_policy(FaultPolicy(drop_probability=0.05, close_mid_request_probability=0.01,
                                          delay_probability=0.01, delay_seconds=0.2, seed=7))


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path)
    yield r
    r.close()


def value(client: str, i: int) -> bytes:
    return f"{client}-{i:07d}".encode() + b"." * (i % 50)


def read_partitions(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False,
                  "fetch.max.bytes": 8 << 20})
    out: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(PARTITIONS)}
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen = {p: 0 for p in range(PARTITIONS)}
    deadline = time.monotonic() + 300
    while any(seen[p] < ends[p] for p in out) and time.monotonic() < deadline:
        for m in c.consume(10000, 1.0):
            if m.error() is None:
                out[m.partition()].append(m.value())
                seen[m.partition()] = m.offset() + 1
    c.close()
    return out


def check_exactly_once(rig: Rig, topic: str, client: str) -> None:
    got = read_partitions(rig.broker.bootstrap, topic)
    for p in range(PARTITIONS):
        expected = [value(client, i) for i in range(p, N_RECORDS, PARTITIONS)]
        records = got[p]
        assert len(records) == len(set(records)), f"partition {p}: duplicates"
        missing = set(expected) - set(records)
        assert not missing, f"partition {p}: {len(missing)} records lost, e.g. {sorted(missing)[:3]}"
        assert records == expected, f"partition {p}: order differs from send order"


def run_with_faults(rig: Rig, produce: Callable[[Callable[[int], None]], None]) -> None:
    """Run ``produce`` with faults on; it calls ``progress(i)`` as it sends record i."""

    def progress(i: int) -> None:
        if i == KILL_AT and not rig.killed.is_set():
            threading.Thread(target=rig.kill_and_restart, daemon=True).start()

    rig.faults_on()
    produce(progress)
    assert rig.killed.is_set()
    rig.proxy.heal()
    assert rig.proxy.injected["drop"] > 0, "no response was dropped: the test proved nothing"
    print(f"faults injected: {dict(rig.proxy.injected)}; broker starts: {rig.broker.starts}")


def test_librdkafka_idempotent_producer(rig: Rig) -> None:
    topic = "idem-librdkafka"
    errors: list[str] = []

    def produce(progress: Callable[[int], None]) -> None:
        p = Producer({
            "bootstrap.servers": rig.bootstrap, "enable.idempotence": True, "acks": "all",
            "max.in.flight.requests.per.connection": 5, "linger.ms": 5, "batch.size": 32768,
            "message.timeout.ms": 300000, "socket.timeout.ms": 10000,
            "retry.backoff.ms": 100, "reconnect.backoff.max.ms": 1000,
        })

        def on_delivery(err: object, msg: object) -> None:
            if err is not None:
                errors.append(str(err))

        for i in range(N_RECORDS):
            while True:
                try:
                    p.produce(topic, value(topic, i), partition=i % PARTITIONS, on_delivery=on_delivery)
                    break
                except BufferError:
                    p.poll(0.05)
            progress(i)
            if i % 1000 == 0:
                p.poll(0)
        assert p.flush(300) == 0

    run_with_faults(rig, produce)
    assert not errors, errors[:5]
    check_exactly_once(rig, topic, topic)


def test_kafka_python_idempotent_producer(rig: Rig) -> None:
    from kafka import KafkaProducer

    topic = "idem-kafka-python"

    def produce(progress: Callable[[int], None]) -> None:
        p = KafkaProducer(
            bootstrap_servers=rig.bootstrap, enable_idempotence=True, acks="all",
            max_in_flight_requests_per_connection=5, linger_ms=5, batch_size=32768,
            delivery_timeout_ms=300000, request_timeout_ms=10000, retry_backoff_ms=100,
        )
        futures = []
        for i in range(N_RECORDS):
            futures.append(p.send(topic, value(topic, i), partition=i % PARTITIONS))
            progress(i)
        p.flush(300)
        for f in futures:
            f.get(timeout=60)  # raises if any record failed
        p.close(30)

    run_with_faults(rig, produce)
    check_exactly_once(rig, topic, topic)


def test_aiokafka_idempotent_producer(rig: Rig) -> None:
    from aiokafka import AIOKafkaProducer

    topic = "idem-aiokafka"

    def produce(progress: Callable[[int], None]) -> None:
        async def main() -> None:
            p = AIOKafkaProducer(
                bootstrap_servers=rig.bootstrap, enable_idempotence=True, acks="all",
                linger_ms=5, max_batch_size=32768, request_timeout_ms=10000, retry_backoff_ms=100,
            )
            await p.start()
            try:
                futures = []
                for i in range(N_RECORDS):
                    futures.append(await p.send(topic, value(topic, i), partition=i % PARTITIONS))
                    progress(i)
                    if i % 5000 == 0:
                        await asyncio.sleep(0)
                await asyncio.gather(*futures)
            finally:
                await p.stop()

        asyncio.run(main())

    run_with_faults(rig, produce)
    check_exactly_once(rig, topic, topic)

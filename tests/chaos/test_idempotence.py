"""Idempotent producers through dropped responses, cut connections and a broker kill -9.

Each client sends numbered records to a 3-partition topic (record i to partition i % 3)
through the fault proxy; halfway the broker is killed with SIGKILL and restarted. The
test then reads every partition from offset 0 and requires exactly the expected
sequence: a duplicate, a loss or a reordering anywhere fails it.

The clients: confluent-kafka (librdkafka), kafka-python, aiokafka and eoslog.client. The
eoslog run is read back twice, by eoslog's own Consumer and by librdkafka, and both must
see exactly the expected sequence (the offsets too, with eoslog's reader).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from eoslog.client.consumer import Consumer as EoslogConsumer
from eoslog.client.consumer import TopicPartition as EoslogTopicPartition
from eoslog.client.producer import Producer as EoslogProducer
from support.faults import FaultPolicy, FaultRig

N_RECORDS = 200_000
PARTITIONS = 3
KILL_AT = N_RECORDS // 2
# librdkafka's and eoslog's producers take Kafka's names (kafka-python and aiokafka get the same values)
PRODUCER_SETTINGS = {
    "enable.idempotence": True, "acks": "all", "max.in.flight.requests.per.connection": 5, "linger.ms": 5,
    "batch.size": 32768, "retry.backoff.ms": 100, "reconnect.backoff.max.ms": 1000,
}

pytestmark = pytest.mark.slow

T = TypeVar("T")


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


def read_partitions_eoslog(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    """The same with eoslog.client's Consumer (no group, assign from offset 0), up to the
    high watermarks. Each record must come at the offset after the previous one: the log
    holds only data batches, so a gap or a repeat is the reader's fault and fails here."""
    tps = [EoslogTopicPartition(topic, p) for p in range(PARTITIONS)]
    out: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    with EoslogConsumer({"bootstrap.servers": bootstrap, "fetch.max.bytes": 8 << 20,
                         "max.poll.records": 10000}) as c:
        ends = {tp.partition: end for tp, end in c.end_offsets(tps, timeout=30).items()}
        c.assign(tps)
        for tp in tps:
            c.seek(tp, 0)
        next_offset = {p: 0 for p in range(PARTITIONS)}
        deadline = time.monotonic() + 300  # a hang guard
        while any(next_offset[p] < ends[p] for p in out) and time.monotonic() < deadline:
            for r in c.poll(1.0):
                assert r.offset == next_offset[r.partition], \
                    f"eoslog consumer: partition {r.partition} offset {r.offset} after {next_offset[r.partition] - 1}"
                out[r.partition].append(r.value)
                next_offset[r.partition] = r.offset + 1
    return out


Reader = Callable[[str, str], dict[int, list[bytes]]]


def check_exactly_once(rig: Rig, topic: str, client: str, reader: Reader = read_partitions) -> None:
    got = reader(rig.broker.bootstrap, topic)
    for p in range(PARTITIONS):
        expected = [value(client, i) for i in range(p, N_RECORDS, PARTITIONS)]
        records = got[p]
        assert len(records) == len(set(records)), f"partition {p}: duplicates"
        missing = set(expected) - set(records)
        assert not missing, f"partition {p}: {len(missing)} records lost, e.g. {sorted(missing)[:3]}"
        assert records == expected, f"partition {p}: order differs from send order"


def send_numbered(topic: str, send: Callable[..., T], progress: Callable[[int], None]) -> list[T]:
    """Record i to partition i % PARTITIONS through a blocking client's ``send``; its futures."""
    futures = []
    for i in range(N_RECORDS):
        futures.append(send(topic, value(topic, i), partition=i % PARTITIONS))
        progress(i)
    return futures


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
        p = Producer({**PRODUCER_SETTINGS, "bootstrap.servers": rig.bootstrap,
                      "message.timeout.ms": 300000, "socket.timeout.ms": 10000})

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
        futures = send_numbered(topic, p.send, progress)
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


def test_eoslog_idempotent_producer(rig: Rig) -> None:
    topic = "idem-eoslog"

    def produce(progress: Callable[[int], None]) -> None:
        p = EoslogProducer({**PRODUCER_SETTINGS, "bootstrap.servers": rig.bootstrap,
                            "delivery.timeout.ms": 300000, "request.timeout.ms": 10000})
        try:
            futures = send_numbered(topic, p.send, progress)
            p.flush(300)
            for f in futures:
                f.result(0)  # raises if any record failed
            assert p.metrics()["record-retry-total"] > 0, "nothing was retried: the faults missed the producer"
        finally:
            p.close(30)

    run_with_faults(rig, produce)
    check_exactly_once(rig, topic, topic, reader=read_partitions_eoslog)
    check_exactly_once(rig, topic, topic)  # librdkafka reads the same

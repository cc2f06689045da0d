"""End-to-end latency at a fixed moderate rate: an idempotent producer (acks=all) sends
records at ``rate`` per second, a read_committed consumer in the same process reads them,
and each record's latency is the time from its produce() call to the consumer handing it
over (both clocks are this process's ``perf_counter``, carried in the record's value).

Used by ``ab.py --against kafka``; the client is librdkafka (confluent-kafka) for both
brokers, with the settings below for both.
"""

from __future__ import annotations

import struct
import threading
import time
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from load import PARTITIONS

STAMP = struct.Struct(">d")
PRODUCER: dict[str, Any] = {"acks": "all", "enable.idempotence": True, "linger.ms": 0, "socket.nagle.disable": True}
CONSUMER: dict[str, Any] = {"isolation.level": "read_committed", "fetch.wait.max.ms": 100, "fetch.min.bytes": 1,
                            "enable.auto.commit": False, "socket.nagle.disable": True}


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def end_to_end(bootstrap: str, topic: str, rate: int, seconds: float, record_size: int = 1024) -> dict[str, Any]:
    """Latency percentiles (ms) of ``rate * seconds`` records sent at ``rate`` per second."""
    total = int(rate * seconds)
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER})
    producer.list_topics(topic, timeout=30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{topic}", **CONSUMER})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    latencies: list[float] = []
    done = threading.Event()

    def consume() -> None:
        deadline = time.perf_counter() + seconds + 120
        while len(latencies) < total and time.perf_counter() < deadline:
            for m in consumer.consume(num_messages=1000, timeout=0.1):
                if m.error() is None and m.value():
                    latencies.append(time.perf_counter() - STAMP.unpack_from(m.value())[0])
        done.set()

    # Warm-up: connections, producer id and the consumer's first fetch, outside the measurement.
    producer.produce(topic, STAMP.pack(time.perf_counter()) + bytes(record_size - STAMP.size), partition=0)
    producer.flush(30)
    while not consumer.consume(num_messages=1, timeout=1.0):
        pass
    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    pad = bytes(record_size - STAMP.size)
    start = time.perf_counter()
    for i in range(total):
        due = start + i / rate
        while (now := time.perf_counter()) < due:
            producer.poll(min(due - now, 0.001))
        producer.produce(topic, STAMP.pack(time.perf_counter()) + pad, partition=i % PARTITIONS)
    producer.flush(60)
    done.wait(seconds + 120)
    consumer.close()
    got = sorted(latencies)
    return {"rate": rate, "seconds": seconds, "records": total, "received": len(got), "record_bytes": record_size,
            "p50_ms": round(percentile(got, 0.5) * 1000, 2), "p99_ms": round(percentile(got, 0.99) * 1000, 2),
            "p999_ms": round(percentile(got, 0.999) * 1000, 2), "max_ms": round(got[-1] * 1000, 2) if got else None}

"""Kafka client load against the broker: confluent-kafka (librdkafka) produce and fetch.

A produce case is a name plus the librdkafka settings that make it different.
``open_producer`` (settings, topic check, untimed warm-up) and ``ChunkSender`` (the
enqueue loop) are shared with ``transactions.py``, which wraps the sends in
transactions; so the two benchmarks differ only in what they measure.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec  # type: ignore[attr-defined]

from common import Measurement

RECORD_SIZE = 1024
PARTITIONS = 3
ENQUEUE_CHUNK = 1000  # records per produce_batch() call, all to one partition

# Settings shared by every produce case: large batches, a short linger, no codec (so
# the broker and the plain writer move the same bytes).
QUEUE_MAX_MESSAGES = 100_000  # librdkafka's default, stated: the send loop waits on it
PRODUCER_BASE: dict[str, Any] = {
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "compression.type": "none",
    "queue.buffering.max.kbytes": 1 << 20,
    "queue.buffering.max.messages": QUEUE_MAX_MESSAGES,
    "delivery.report.only.error": True,
    "socket.nagle.disable": True,
}

CONSUMER_BASE: dict[str, Any] = {
    "enable.auto.commit": False,
    "enable.partition.eof": False,
    "fetch.wait.max.ms": 100,
    "max.partition.fetch.bytes": 1 << 20,  # Kafka's default, stated so it is visible
}


# Errors that mean the data is not there; anything else (a dropped connection, a
# coordinator look-up) librdkafka retries by itself.
_FETCH_FATAL = {KafkaError.OFFSET_OUT_OF_RANGE, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC}


@dataclass(frozen=True)
class ProduceCase:
    name: str  # short id, used in topic names and JSON keys
    label: str  # what the table shows
    config: dict[str, Any]
    notes: str = ""


PRODUCE_CASES: list[ProduceCase] = [
    ProduceCase("acks1", "produce acks=1", {"acks": 1, "enable.idempotence": False},
                notes="enable.idempotence=false: the plain baseline"),
    ProduceCase("acksall", "produce acks=all", {"acks": "all", "enable.idempotence": False},
                notes="enable.idempotence=false: the plain baseline"),
    ProduceCase("idempotent", "produce idempotent", {"acks": "all", "enable.idempotence": True},
                notes="enable.idempotence=true (acks=all, max.in.flight<=5); compare with acks=all"),
]


@dataclass
class Errors:
    delivery: list[str] = field(default_factory=list)
    client: list[str] = field(default_factory=list)

    def on_delivery(self, err: KafkaError | None, _msg: Any) -> None:
        if err is not None and len(self.delivery) < 20:
            self.delivery.append(str(err))

    def on_error(self, err: KafkaError) -> None:
        if len(self.client) < 20:
            self.client.append(str(err))


def create_topic(bootstrap: str, topic: str, timeout_s: float = 60.0, config: dict[str, Any] | None = None) -> None:
    """Create ``topic`` with PARTITIONS partitions and wait until each has a leader: Apache
    Kafka answers CreateTopics (and an auto-creating Metadata) before its partitions are led.
    ``config``: the client's settings, of which the connection's (security.*, ssl.*, sasl.*) are used."""
    security = {k: v for k, v in (config or {}).items() if k.startswith(("security.", "ssl.", "sasl."))}
    admin = AdminClient({"bootstrap.servers": bootstrap, **security})
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout_s)
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    deadline = time.monotonic() + timeout_s
    while True:
        t = admin.list_topics(topic, timeout=timeout_s).topics[topic]
        if t.error is None and len(t.partitions) == PARTITIONS and all(p.leader >= 0 for p in t.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic}: no leader for every partition after {timeout_s}s: {t.error}")
        time.sleep(0.1)


def open_producer(bootstrap: str, topic: str, config: dict[str, Any], errors: Errors) -> tuple[Producer, float]:
    """A producer with PRODUCER_BASE + ``config``, ready to be timed; returns it and the
    seconds its warm-up took.

    Before any clock starts: create the topic (``create_topic``: Apache Kafka answers an
    auto-creating Metadata before the partitions exist) and learn its leaders, and
    deliver one record elsewhere so that connections and (for an idempotent or
    transactional producer) the producer id are in place; otherwise start-up costs land
    in the first case. A transactional producer (``transactional.id`` set) is initialised
    and sends its warm-up record in a committed transaction."""
    producer = Producer({
        "bootstrap.servers": bootstrap, **PRODUCER_BASE, **config,
        "on_delivery": errors.on_delivery, "error_cb": errors.on_error,
    })
    create_topic(bootstrap, topic, config=config)
    md = producer.list_topics(topic, timeout=30)
    parts = len(md.topics[topic].partitions)
    if parts != PARTITIONS:
        raise RuntimeError(f"{topic} has {parts} partitions, expected {PARTITIONS}")
    warm_start = time.perf_counter()
    transactional = "transactional.id" in config
    if transactional:
        producer.init_transactions(30)
        producer.begin_transaction()
    producer.produce(f"{topic}-warmup", b"warm-up", partition=0)
    if producer.flush(30) or errors.delivery:
        raise RuntimeError(f"{topic}: warm-up record not delivered: {errors.delivery[:5]}")
    if transactional:
        producer.commit_transaction(30)
    return producer, time.perf_counter() - warm_start


class ChunkSender:
    """Enqueues records of RECORD_SIZE bytes (one random value, shared) with
    produce_batch, up to ENQUEUE_CHUNK at a time, to each partition in turn.

    produce_batch enqueues a list in one call: the Python loop costs less than the
    broker's work, so the figures measure the broker, not this loop."""

    def __init__(self, producer: Producer, topic: str, value: bytes | None = None,
                 record_size: int = RECORD_SIZE) -> None:
        self.producer = producer
        self.topic = topic
        self.value = os.urandom(record_size) if value is None else value
        self._chunk = [{"value": self.value} for _ in range(ENQUEUE_CHUNK)]
        self.next_partition = 0

    def send(self, n: int = ENQUEUE_CHUNK) -> int:
        """Enqueue ``n`` (≤ ENQUEUE_CHUNK) records to the next partition, waiting while
        the queue is full; returns the partition."""
        partition = self.next_partition
        pending = self._chunk[:n]
        producer = self.producer
        while pending:
            if producer.produce_batch(self.topic, pending, partition=partition) == len(pending):
                break
            # Queue full: librdkafka marked what it did not take. Wait until they fit
            # rather than offer them again every few ms: a refused batch of 1000 costs
            # ~0.6 ms of CPU, taken from the broker on a two-core machine.
            pending = [m for m in pending if m.pop("_error", None) is not None]
            while len(producer) + len(pending) > QUEUE_MAX_MESSAGES:
                producer.poll(0.001)
        producer.poll(0)
        self.next_partition = (partition + 1) % PARTITIONS
        return partition


def produce(bootstrap: str, topic: str, case: ProduceCase, records: int,
            timeout_s: float = 600.0, record_size: int = RECORD_SIZE) -> Measurement:
    """Send ``records`` values of ``record_size`` bytes, ENQUEUE_CHUNK at a time to each
    partition in turn; timed from the first produce call to flush() returning."""
    errors = Errors()
    producer, warmup_s = open_producer(bootstrap, topic, case.config, errors)
    sender = ChunkSender(producer, topic, record_size=record_size)
    cpu0 = client_cpu_seconds()
    start = time.perf_counter()
    done = 0
    while done < records:
        n = min(ENQUEUE_CHUNK, records - done)
        sender.send(n)
        done += n
    left = producer.flush(timeout_s)
    seconds = time.perf_counter() - start
    client_cpu = client_cpu_seconds() - cpu0
    if left or errors.delivery:
        raise RuntimeError(f"{case.name}: {left} records undelivered; errors: {errors.delivery[:5]}")
    return Measurement(case.label, records * record_size, seconds, records,
                       extra={"topic": topic, "config": _printable(case.config), "notes": case.notes,
                              "client_cpu_s": round(client_cpu, 2), "warmup_s": round(warmup_s, 3),
                              "client_errors": errors.client})


def high_watermarks(bootstrap: str, topic: str) -> list[int]:
    """Latest offsets via ListOffsets (an admin client needs no group coordinator)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    futures = admin.list_offsets({tp: latest for tp in tps}, request_timeout=30)
    by_partition = {tp.partition: f.result().offset for tp, f in futures.items()}
    return [by_partition[p] for p in range(PARTITIONS)]


def exact_count(bootstrap: str, topic: str, records: int, timeout_s: float = 30.0) -> list[int]:
    """The high watermarks of ``topic``'s partitions once they sum to ``records``; a
    RuntimeError naming them when they do not within ``timeout_s`` (fewer: a loss; more: a
    duplicate). Waits because acks=1 is answered before the group-commit round that moves the
    high watermark."""
    deadline = time.monotonic() + timeout_s
    while sum(hws := high_watermarks(bootstrap, topic)) != records and time.monotonic() < deadline:
        time.sleep(0.05)
    if sum(hws) != records:
        raise RuntimeError(f"{topic}: high watermarks {hws} sum to {sum(hws)}, expected {records}")
    return hws


def fetch(bootstrap: str, topic: str, records: int, timeout_s: float = 600.0,
          record_size: int = RECORD_SIZE, extra: dict[str, Any] | None = None) -> Measurement:
    """Read ``records`` records back from offset 0 of every partition (assign, no group
    membership); timed from assign() to the last record. ``extra``: more consumer settings
    (security.protocol, ...)."""
    client_errors: list[str] = []

    def on_error(err: KafkaError) -> None:
        if len(client_errors) < 20:
            client_errors.append(str(err))

    # confluent-kafka insists on a group.id even though assign() never joins the group.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}", **CONSUMER_BASE,
                         **(extra or {}), "error_cb": on_error})
    got = 0
    nbytes = 0
    try:
        cpu0 = client_cpu_seconds()
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = start + timeout_s
        while got < records:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"fetch of {topic}: {got} of {records} records after {timeout_s}s")
            # consume() waits for all num_messages or the timeout: never ask for more than are left.
            for m in consumer.consume(num_messages=min(10_000, records - got), timeout=1.0):
                err = m.error()
                if err is not None:
                    if err.fatal() or err.code() in _FETCH_FATAL:
                        raise KafkaException(err)
                    if len(client_errors) < 20:
                        client_errors.append(str(err))
                    continue
                got += 1
                nbytes += len(m.value() or b"")
        seconds = time.perf_counter() - start
        client_cpu = client_cpu_seconds() - cpu0
    finally:
        consumer.close()
    if nbytes != records * record_size:
        raise RuntimeError(f"fetch of {topic}: {nbytes} value bytes, expected {records * record_size}")
    return Measurement("fetch", nbytes, seconds, got,
                       extra={"topic": topic, "config": _printable(CONSUMER_BASE),
                              "client_cpu_s": round(client_cpu, 2), "client_errors": client_errors})


def client_cpu_seconds() -> float:
    """CPU time of this process, all threads (librdkafka's included)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _printable(cfg: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in cfg.items() if not callable(v)}

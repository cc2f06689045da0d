"""Produce and consume with real Kafka clients, one code path per client library.

Shared by the interop tests and later ones (idempotence, transactions): every client
is driven through the same small API so that a test is written once and parametrized
over ``CLIENTS``:

- ``produce(client, bootstrap, topic, records, codec=...)`` → one ``Delivered`` per
  record, in send order (partition and offset from the producer's acknowledgement);
- ``consume(client, bootstrap, topic, expected)`` → the records of each partition in
  offset order, read from the beginning until ``expected[p]`` records arrived;
- ``read_to_end(bootstrap, topic, partitions, isolation=...)`` → what librdkafka sees up to
  each partition's end offset (for "this record is not visible" checks);
- ``list_offsets(client, ...)`` / ``offsets_for_times(client, ...)`` → ListOffsets
  earliest/latest and by-timestamp through each client's public API.

Records are plain values (``Record``, ``Consumed``) with headers normalised to a tuple
of ``(str, bytes | None)`` pairs, so comparisons are exact and client-independent.
The helpers raise on any delivery error; a consume that stops short of its target
returns what it got (the caller's assertion then says what is missing).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CONFLUENT = "confluent"
KAFKA_PYTHON = "kafka-python"
AIOKAFKA = "aiokafka"
CLIENTS = (CONFLUENT, KAFKA_PYTHON, AIOKAFKA)
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")

Headers = tuple[tuple[str, bytes | None], ...]

# A consumer that sees nothing new for this long has stalled (a hang guard, not a timing
# assertion: the caller asserts on what was consumed).
DEFAULT_IDLE_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class Record:
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    timestamp_ms: int | None = None  # None: the client stamps the send time
    partition: int | None = None  # None: the client's partitioner decides


@dataclass(frozen=True, slots=True)
class Delivered:
    partition: int
    offset: int  # -1 with acks=0: the broker does not answer


@dataclass(frozen=True, slots=True)
class Consumed:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int


class DeliveryError(AssertionError):
    """A producer reported that a record was not written."""


def _norm_headers(headers: Iterable[tuple[str, Any]] | None) -> Headers:
    return tuple((str(k), None if v is None else bytes(v)) for k, v in headers or ())


# -- deterministic test data -------------------------------------------------------------


# What each client refuses to send although the record format allows it.
RECORD_LIMITS: dict[str, dict[str, bool]] = {
    CONFLUENT: {},
    # send() wants (str, bytes) headers and a key or a value
    KAFKA_PYTHON: {"null_header_values": False, "null_key_and_value": False},
    AIOKAFKA: {"null_key_and_value": False},  # send() asserts key or value is set
}


def make_records(
    n: int, *, seed: int = 0, t0_ms: int | None = None, num_keys: int = 1000,
    null_header_values: bool = True, null_key_and_value: bool = True,
) -> list[Record]:
    """``n`` records that exercise the record format's corners, the same for a given seed.

    Keys: ``None`` (every 10th), ``b""`` (every 97th), otherwise one of ``num_keys``
    binary keys (so several records share a partition through their key). Values: null
    (tombstone), empty, short text, random binary bytes, and a few larger compressible
    and incompressible ones. Headers: none, one, several, a repeated key, a null value.
    ``RECORD_LIMITS[client]`` turns off what a client cannot send.
    Timestamps: explicit when ``t0_ms`` is given, rising with the index but not
    monotonically (jitter of ±50 ms), so by-timestamp lookups see out-of-order times.
    """
    rng = random.Random(seed)
    keys = [rng.randbytes(rng.randint(1, 24)) + i.to_bytes(4, "big") for i in range(num_keys)]
    out = []
    for i in range(n):
        if i % 10 == 3:
            key = None
        elif i % 97 == 5:
            key = b""
        else:
            key = keys[rng.randrange(num_keys)]
        kind = i % 23
        if kind == 0:
            value: bytes | None = None
        elif kind == 1:
            value = b""
        elif kind == 2 and i % 1000 == 2:
            value = rng.randbytes(rng.randint(10_000, 60_000))  # incompressible, large
        elif kind == 4 and i % 1000 == 4:
            value = (b"eoslog %d " % i) * rng.randint(1000, 5000)  # compressible, large
        elif kind % 2:
            value = rng.randbytes(rng.randint(1, 200))
        else:
            value = b"value-%d-" % i + b"x" * rng.randint(0, 100)
        if key is None and value is None and not null_key_and_value:
            value = b""
        hkind = i % 7
        headers: Headers
        if hkind == 0:
            headers = ()
        elif hkind == 1:
            headers = (("i", str(i).encode()),)
        elif hkind == 2:
            headers = (("i", str(i).encode()), ("bin", rng.randbytes(8)), ("empty", b""))
        elif hkind == 3:
            headers = (("dup", b"1"), ("dup", b"2"), ("null", None if null_header_values else b""))
        elif hkind == 4:
            headers = (("ünï", "çødé".encode()),)
        else:
            headers = (("n", rng.randbytes(rng.randint(0, 40))),)
        ts = None if t0_ms is None else t0_ms + i + rng.randint(-50, 50)
        out.append(Record(key, value, headers, ts))
    return out


# -- producers -------------------------------------------------------------------------


def producer_config(client: str, bootstrap: str, codec: str, extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """Settings that keep each partition in send order with acks=all and no idempotence.

    InitProducerId is not implemented yet, so idempotence is off explicitly (kafka-python
    3.x and aiokafka may default it on); one request in flight per connection keeps a
    retried batch from overtaking the next one.
    """
    if client == CONFLUENT:
        cfg: dict[str, Any] = {
            "bootstrap.servers": bootstrap, "acks": "all", "compression.type": codec,
            "enable.idempotence": False, "max.in.flight.requests.per.connection": 1,
            "linger.ms": 5, "queue.buffering.max.messages": 1_000_000,
        }
    elif client == KAFKA_PYTHON:
        cfg = {
            "bootstrap_servers": bootstrap, "acks": "all",
            "compression_type": None if codec == "none" else codec,
            "enable_idempotence": False, "max_in_flight_requests_per_connection": 1,
            "linger_ms": 5, "batch_size": 64 * 1024, "request_timeout_ms": 60_000,
        }
    elif client == AIOKAFKA:
        # aiokafka keeps at most one batch per partition in flight, so order holds.
        cfg = {
            "bootstrap_servers": bootstrap, "acks": "all",
            "compression_type": None if codec == "none" else codec,
            "enable_idempotence": False, "linger_ms": 5, "max_batch_size": 64 * 1024,
            "request_timeout_ms": 60_000,
        }
    else:
        raise ValueError(f"unknown client {client!r}")
    cfg.update(extra or {})
    return cfg


def produce(
    client: str, bootstrap: str, topic: str, records: Sequence[Record], *,
    codec: str = "none", config: Mapping[str, Any] | None = None, timeout_s: float = 300.0,
) -> list[Delivered]:
    """Send ``records`` in order with acks=all and wait for every acknowledgement."""
    cfg = producer_config(client, bootstrap, codec, config)
    if client == CONFLUENT:
        return _produce_confluent(cfg, topic, records, timeout_s)
    if client == KAFKA_PYTHON:
        return _produce_kafka_python(cfg, topic, records, timeout_s)
    return asyncio.run(_produce_aiokafka(cfg, topic, records, timeout_s))


def _produce_confluent(cfg: dict[str, Any], topic: str, records: Sequence[Record],
                       timeout_s: float) -> list[Delivered]:
    from confluent_kafka import Producer

    delivered: list[Delivered | None] = [None] * len(records)
    errors: list[str] = []

    def on_delivery(i: int) -> Callable[[Any, Any], None]:
        def cb(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(f"record {i}: {err}")
            else:
                delivered[i] = Delivered(msg.partition(), msg.offset())
        return cb

    producer = Producer(cfg)
    for i, r in enumerate(records):
        kwargs: dict[str, Any] = {"key": r.key, "value": r.value, "on_delivery": on_delivery(i)}
        if r.headers:
            kwargs["headers"] = list(r.headers)
        if r.timestamp_ms is not None:
            kwargs["timestamp"] = r.timestamp_ms
        if r.partition is not None:
            kwargs["partition"] = r.partition
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:  # local queue full: serve delivery reports, then retry
                producer.poll(0.1)
        if i % 1000 == 0:
            producer.poll(0)
    left = producer.flush(timeout_s)
    if errors or left:
        raise DeliveryError(f"{left} records unacknowledged; errors: {errors[:5]}")
    return _complete(delivered)


def _complete(delivered: Sequence[Delivered | None]) -> list[Delivered]:
    missing = [i for i, d in enumerate(delivered) if d is None]
    if missing:
        raise DeliveryError(f"{len(missing)} records without acknowledgement, first {missing[:5]}")
    return [d for d in delivered if d is not None]


def _produce_kafka_python(cfg: dict[str, Any], topic: str, records: Sequence[Record],
                          timeout_s: float) -> list[Delivered]:
    from kafka import KafkaProducer

    producer = KafkaProducer(**cfg)
    try:
        futures = [
            producer.send(topic, key=r.key, value=r.value, headers=list(r.headers),
                          timestamp_ms=r.timestamp_ms, partition=r.partition)
            for r in records
        ]
        producer.flush(timeout_s)
        out = []
        for i, f in enumerate(futures):
            try:
                md = f.get(timeout=timeout_s)
            except Exception as e:
                raise DeliveryError(f"record {i}: {type(e).__name__}: {e}") from e
            out.append(Delivered(md.partition, md.offset))
        return out
    finally:
        producer.close(timeout=30)


async def _produce_aiokafka(cfg: dict[str, Any], topic: str, records: Sequence[Record],
                            timeout_s: float) -> list[Delivered]:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(**cfg)
    await producer.start()
    try:
        futures = [
            await producer.send(topic, key=r.key, value=r.value, headers=list(r.headers),
                                timestamp_ms=r.timestamp_ms, partition=r.partition)
            for r in records
        ]
        await asyncio.wait_for(producer.flush(), timeout_s)
        out = []
        for i, f in enumerate(futures):
            try:
                md = await f
            except Exception as e:
                raise DeliveryError(f"record {i}: {type(e).__name__}: {e}") from e
            # acks=0: aiokafka resolves with no metadata at all.
            out.append(Delivered(-1, -1) if md is None else Delivered(md.partition, md.offset))
        return out
    finally:
        await producer.stop()


# -- consumers -------------------------------------------------------------------------


def consume(
    client: str, bootstrap: str, topic: str, expected: Mapping[int, int], *,
    config: Mapping[str, Any] | None = None, idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
) -> dict[int, list[Consumed]]:
    """Read each partition in ``expected`` from its beginning until ``expected[p]``
    records arrived (or nothing new came for ``idle_timeout_s``); no consumer group."""
    if client == CONFLUENT:
        return _consume_confluent(bootstrap, topic, expected, config, idle_timeout_s)
    if client == KAFKA_PYTHON:
        return _consume_kafka_python(bootstrap, topic, expected, config, idle_timeout_s)
    if client == AIOKAFKA:
        return asyncio.run(_consume_aiokafka(bootstrap, topic, expected, config, idle_timeout_s))
    raise ValueError(f"unknown client {client!r}")


class _Progress:
    """Collects records per partition and knows when to stop."""

    def __init__(self, expected: Mapping[int, int], idle_timeout_s: float) -> None:
        self.expected = dict(expected)
        self.got: dict[int, list[Consumed]] = {p: [] for p in expected}
        self.idle_timeout_s = idle_timeout_s
        self._last_progress = time.monotonic()

    def add(self, rec: Consumed) -> None:
        self.got.setdefault(rec.partition, []).append(rec)
        self._last_progress = time.monotonic()

    def done(self) -> bool:
        if all(len(self.got[p]) >= n for p, n in self.expected.items()):
            return True
        return time.monotonic() - self._last_progress > self.idle_timeout_s


def _consume_confluent(bootstrap: str, topic: str, expected: Mapping[int, int],
                       config: Mapping[str, Any] | None, idle_timeout_s: float,
                       ) -> dict[int, list[Consumed]]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    cfg: dict[str, Any] = {
        "bootstrap.servers": bootstrap, "group.id": f"interop-{topic}",
        "enable.auto.commit": False, "enable.auto.offset.store": False,
        "enable.partition.eof": False,
    }
    cfg.update(config or {})
    consumer = Consumer(cfg)
    progress = _Progress(expected, idle_timeout_s)
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in expected])
        while not progress.done():
            for m in consumer.consume(num_messages=10_000, timeout=0.5):
                if m.error() is not None:
                    raise AssertionError(f"consumer error: {m.error()}")
                progress.add(Consumed(m.partition(), m.offset(), m.key(), m.value(),
                                      _norm_headers(m.headers()), m.timestamp()[1]))
    finally:
        consumer.close()
    return progress.got


def _consume_kafka_python(bootstrap: str, topic: str, expected: Mapping[int, int],
                          config: Mapping[str, Any] | None, idle_timeout_s: float,
                          ) -> dict[int, list[Consumed]]:
    from kafka import KafkaConsumer, TopicPartition

    cfg: dict[str, Any] = {
        "bootstrap_servers": bootstrap, "group_id": None, "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
    }
    cfg.update(config or {})
    consumer = KafkaConsumer(**cfg)
    progress = _Progress(expected, idle_timeout_s)
    try:
        tps = [TopicPartition(topic, p) for p in expected]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        while not progress.done():
            for batch in consumer.poll(timeout_ms=500, max_records=10_000).values():
                for m in batch:
                    progress.add(Consumed(m.partition, m.offset, m.key, m.value,
                                          _norm_headers(m.headers), m.timestamp))
    finally:
        consumer.close()
    return progress.got


async def _consume_aiokafka(bootstrap: str, topic: str, expected: Mapping[int, int],
                            config: Mapping[str, Any] | None, idle_timeout_s: float,
                            ) -> dict[int, list[Consumed]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    cfg: dict[str, Any] = {
        "bootstrap_servers": bootstrap, "group_id": None, "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
    }
    cfg.update(config or {})
    consumer = AIOKafkaConsumer(**cfg)
    await consumer.start()
    progress = _Progress(expected, idle_timeout_s)
    try:
        tps = [TopicPartition(topic, p) for p in expected]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        while not progress.done():
            batches = await consumer.getmany(timeout_ms=500, max_records=10_000)
            for batch in batches.values():
                for m in batch:
                    progress.add(Consumed(m.partition, m.offset, m.key, m.value,
                                          _norm_headers(m.headers), m.timestamp))
    finally:
        await consumer.stop()
    return progress.got


def read_to_end(bootstrap: str, topic: str, partitions: Sequence[int] = (0,), *,
                isolation: str = "read_committed", settled: bool = True,
                timeout_s: float = DEFAULT_IDLE_TIMEOUT_S) -> list[Consumed]:
    """Everything a librdkafka reader with ``isolation`` sees in ``partitions``, read from
    offset 0 until its fetch position reached each partition's end (partition EOF at the
    last stable offset for read_committed, the high watermark otherwise), in arrival order.

    A record missing from the result was fetched past, not merely not seen for a while: a
    "nothing visible" check built on this proves the reader was positioned and fetching.
    With ``settled`` it first waits until no transaction is open on the partitions (last
    stable offset = high watermark: every marker written, as shortly after EndTxn returns);
    pass False to read up to the last stable offset of a still open transaction.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    from support.harness import wait_until

    def reader(level: str) -> Any:
        return Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-to-end-{topic}",
                         "isolation.level": level, "enable.partition.eof": True,
                         "enable.auto.commit": False})

    def end_offsets(c: Any) -> dict[int, int]:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout_s, cached=False)[1]
                for p in partitions}

    c = reader(isolation)
    try:
        if settled:
            other = reader("read_uncommitted" if isolation == "read_committed" else "read_committed")
            try:
                wait_until(lambda: end_offsets(c) == end_offsets(other),
                           f"no open transaction on {topic} {list(partitions)}", timeout_s)
            finally:
                other.close()
        ends = end_offsets(c)
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        got: list[Consumed] = []
        reached: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while reached != set(partitions):
            assert time.monotonic() < deadline, \
                f"reader of {topic} stopped short of the end offsets {ends}: at EOF on {sorted(reached)}"
            for m in c.consume(10_000, 0.2):
                err = m.error()
                if err is None:
                    got.append(Consumed(m.partition(), m.offset(), m.key(), m.value(),
                                        _norm_headers(m.headers()), m.timestamp()[1]))
                elif err.code() != KafkaError._PARTITION_EOF:
                    raise AssertionError(f"consumer error: {err}")
                elif m.offset() >= ends[m.partition()]:
                    reached.add(m.partition())
        return got
    finally:
        c.close()


def read_values(bootstrap: str, topic: str, partition: int = 0, *, isolation: str = "read_committed",
                settled: bool = True) -> list[str]:
    """The values ``read_to_end`` finds in one partition, decoded."""
    return [(r.value or b"").decode() for r in read_to_end(bootstrap, topic, [partition], isolation=isolation,
                                                           settled=settled)]


# -- ListOffsets ---------------------------------------------------------------------------


def list_offsets(client: str, bootstrap: str, topic: str, partitions: Sequence[int],
                 ) -> dict[int, tuple[int, int]]:
    """(earliest, latest) offset of each partition, asked of the broker (ListOffsets)."""
    if client == CONFLUENT:
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"offsets-{topic}",
                      "enable.auto.commit": False})
        try:
            return {
                p: tuple(c.get_watermark_offsets(TopicPartition(topic, p), timeout=30,
                                                 cached=False))
                for p in partitions
            }
        finally:
            c.close()
    if client == KAFKA_PYTHON:
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KTP

        kc = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
        try:
            tps = [KTP(topic, p) for p in partitions]
            low, high = kc.beginning_offsets(tps), kc.end_offsets(tps)
            return {tp.partition: (low[tp], high[tp]) for tp in tps}
        finally:
            kc.close()
    if client == AIOKAFKA:
        return asyncio.run(_aiokafka_offsets(bootstrap, topic, partitions))
    raise ValueError(f"unknown client {client!r}")


async def _aiokafka_offsets(bootstrap: str, topic: str, partitions: Sequence[int],
                            ) -> dict[int, tuple[int, int]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        low, high = await c.beginning_offsets(tps), await c.end_offsets(tps)
        return {tp.partition: (low[tp], high[tp]) for tp in tps}
    finally:
        await c.stop()


def offsets_for_times(client: str, bootstrap: str, topic: str, partitions: Sequence[int],
                      timestamp_ms: int) -> dict[int, int | None]:
    """The first offset of each partition whose timestamp is >= ``timestamp_ms``
    (None when there is none), asked of the broker (ListOffsets by timestamp)."""
    if client == CONFLUENT:
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"offsets-{topic}",
                      "enable.auto.commit": False})
        try:
            res = c.offsets_for_times(
                [TopicPartition(topic, p, timestamp_ms) for p in partitions], timeout=30)
        finally:
            c.close()
        for tp in res:
            if tp.error is not None:
                raise AssertionError(f"offsets_for_times {tp}: {tp.error}")
        return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in res}
    if client == KAFKA_PYTHON:
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KTP

        kc = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
        try:
            found = kc.offsets_for_times({KTP(topic, p): timestamp_ms for p in partitions})
        finally:
            kc.close()
        return {tp.partition: (None if ot is None else ot.offset) for tp, ot in found.items()}
    if client == AIOKAFKA:
        return asyncio.run(_aiokafka_offsets_for_times(bootstrap, topic, partitions, timestamp_ms))
    raise ValueError(f"unknown client {client!r}")


async def _aiokafka_offsets_for_times(bootstrap: str, topic: str, partitions: Sequence[int],
                                      timestamp_ms: int) -> dict[int, int | None]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    await c.start()
    try:
        found = await c.offsets_for_times({TopicPartition(topic, p): timestamp_ms
                                           for p in partitions})
    finally:
        await c.stop()
    return {tp.partition: (None if ot is None else ot.offset) for tp, ot in found.items()}


# -- topics ------------------------------------------------------------------------------


def ensure_topic(bootstrap: str, topic: str, partitions: int, timeout_s: float = 30.0) -> int:
    """Create ``topic`` with CreateTopics when the broker offers it, else through
    Metadata auto-creation (the broker's ``num.partitions`` then decides); returns the
    partition count the broker reports."""
    from confluent_kafka import KafkaError, KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1)], request_timeout=timeout_s)
    try:
        futures[topic].result(timeout_s)
    except KafkaException as e:
        code = e.args[0].code()
        if code not in (KafkaError._UNSUPPORTED_FEATURE, KafkaError.UNSUPPORTED_VERSION):
            raise
        # No CreateTopics yet: a producer's metadata request auto-creates the topic.
        p = Producer({"bootstrap.servers": bootstrap})
        p.list_topics(topic, timeout=timeout_s)
    # Apache Kafka answers CreateTopics before its own metadata has the topic (KRaft
    # propagates it a moment later): wait until the metadata shows every partition led.
    deadline = time.monotonic() + timeout_s
    while True:
        t = admin.list_topics(topic, timeout=timeout_s).topics[topic]
        settled = t.error is None and all(p.leader >= 0 for p in t.partitions.values())
        if settled or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if t.error is not None:
        raise AssertionError(f"topic {topic}: {t.error}")
    return len(t.partitions)


# -- broker-side views ---------------------------------------------------------------------


class RawConnection:
    """One plain socket speaking kio messages, for protocol corners no client reaches."""

    def __init__(self, bootstrap: str, timeout_s: float = 30.0) -> None:
        import socket

        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self._correlation = 0

    def send(self, request: Any) -> int:
        from eoslog.protocol.codec import encode_request

        self._correlation += 1
        self.sock.sendall(encode_request(self._correlation, request))
        return self._correlation

    def receive(self, request: Any) -> tuple[int, Any]:
        """The next response frame, parsed as the answer to ``request``'s API and version."""
        import struct

        from eoslog.protocol.codec import decode_response

        size = struct.unpack(">i", self._read(4))[0]
        return decode_response(self._read(size), request.__api_key__, request.__version__)  # type: ignore[no-any-return]

    def call(self, request: Any) -> Any:
        correlation = self.send(request)
        got, body = self.receive(request)
        assert got == correlation, f"response {got} to request {correlation}"
        return body

    def closed_by_peer(self) -> bool:
        """True when the broker closed the connection (reads EOF, nothing pending)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk
        return buf

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def request_module(api_key: int, version: int) -> Any:
    """kio's request classes for one API version (e.g. ``.ProduceRequest``)."""
    from kio.index import load_payload_module
    from kio.static.constants import EntityType

    return load_payload_module(api_key, version, EntityType.request)


def broker_api_versions(bootstrap: str) -> dict[int, tuple[int, int]]:
    """What the broker advertises in ApiVersions: api key → (min, max) version."""
    with RawConnection(bootstrap) as conn:
        body = conn.call(request_module(18, 0).ApiVersionsRequest())
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys}


def stored_batches(data_dir: Any, topic: str, partition: int) -> list[Any]:
    """Headers of every batch in a partition's segment files, CRC-checked, in log order."""
    from pathlib import Path

    from eoslog.records.batch import iter_batch_headers

    headers = []
    for seg in sorted((Path(data_dir) / f"{topic}-{partition}").glob("*.log")):
        headers += [h for _, h in iter_batch_headers(seg.read_bytes(), verify_crc=True)]
    return headers

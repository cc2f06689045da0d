"""What the sink's tests share: input written by librdkafka, a pass-through query
(eoslog source → eoslog sink), a driver of it in a process of its own (``sink_driver.py``)
and its kill -9, and reading the output as a read_committed consumer.

``committed_output`` reads with librdkafka (confluent-kafka, isolation.level
read_committed) — a client that is not eoslog's — up to each partition's last stable
offset, and also reports whether a transaction is still open (LSO below the high
watermark): an exactly-once sink must leave none behind once its query has finished.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.client.admin import Admin
from eoslog.client.types import TopicPartition as EoslogTopicPartition
from eoslog.spark.log_reader import LogReader

WAIT_S = 120.0  # a generous bound on waiting for a condition; never an assertion on time
DRIVER = Path(__file__).parent / "sink_driver.py"


def create_topics(bootstrap: str, *names_and_partitions: tuple[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, p, 1) for n, p in names_and_partitions]).values():
        future.result(30)


def produce_input(bootstrap: str, topic: str, count: int, partitions: int, *, start: int = 0) -> list[bytes]:
    """``count`` records with distinct values ``v<i>`` spread over the partitions; their values."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = [f"v{i:06d}".encode() for i in range(start, start + count)]
    for i, v in enumerate(values):
        p.produce(topic, value=v, key=f"k{i % 7}".encode(), partition=i % partitions)
    assert p.flush(30) == 0
    return values


def pass_through(spark: Any, bootstrap: str, source: str, sink: str, checkpoint: Path, *,
                 max_per_trigger: int = 40, sink_options: dict[str, str] | None = None,
                 available_now: bool = True, client_options: dict[str, str] | None = None) -> Any:
    """Start ``source → sink`` (key and value), ``max_per_trigger`` offsets per micro-batch;
    ``client_options`` (``kafka.*``, e.g. security settings) go to both ends."""
    client = {"kafka.bootstrap.servers": bootstrap, **(client_options or {})}
    df = (spark.readStream.format("eoslog").options(**client)
          .option("subscribe", source).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", str(max_per_trigger)).load())
    writer = (df.select("key", "value").writeStream.format("eoslog").options(**client)
              .option("topic", sink).option("checkpointLocation", str(checkpoint)))
    for k, v in (sink_options or {}).items():
        writer = writer.option(k, v)
    trigger = {"availableNow": True} if available_now else {"processingTime": "200 milliseconds"}
    return writer.trigger(**trigger).start()


def last_batch(query: Any) -> int:
    """The id of the query's last completed micro-batch; -1 before the first."""
    progress = query.lastProgress
    return -1 if progress is None else int(progress["batchId"])


def start_driver(bootstrap: str, src: str, dst: str, tmp_path: Path, *args: str,
                 log_name: str = "driver.log") -> subprocess.Popen[bytes]:
    """``sink_driver.py`` as a session of its own (checkpoint ``tmp_path/ck``, Spark work dir
    ``tmp_path/spark``), its output appended to ``tmp_path/log_name``."""
    log = open(tmp_path / log_name, "ab")  # noqa: SIM115 - handed to the child
    try:
        return subprocess.Popen(
            [sys.executable, str(DRIVER), bootstrap, src, dst, str(tmp_path / "ck"), str(tmp_path / "spark"), *args],
            stdout=log, stderr=log, start_new_session=True,
        )
    finally:
        log.close()


def kill_session(driver: subprocess.Popen[bytes]) -> None:
    """kill -9 the driver and everything it started (its JVM, the JVM's Python workers):
    every process of the session the driver leads."""
    sid = driver.pid
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGKILL)
    driver.wait(30)


def open_transactions(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """Partitions whose last stable offset is below the high watermark: {p: (LSO, HW)}."""
    with LogReader(bootstrap, read_committed=True) as committed, LogReader(bootstrap, read_committed=False) as raw:
        n = committed.topics([topic])[topic]
        tps = [EoslogTopicPartition(topic, p) for p in range(n)]
        stable, high = committed.end_offsets(tps), raw.end_offsets(tps)
    return {tp.partition: (stable[tp], high[tp]) for tp in tps if stable[tp] < high[tp]}


def ongoing_transactions(bootstrap: str, topic: str) -> dict[str, tuple[int, int, frozenset[int]]]:
    """The transactions open on ``topic`` as their coordinator reports them (ListTransactions
    in state Ongoing, then DescribeTransactions): id → (producer id, epoch, partitions)."""
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        ids = [t.transactional_id for t in admin.list_transactions(states=["Ongoing"])]
        described = admin.describe_transactions(ids) if ids else {}
    out = {}
    for tid, d in described.items():
        partitions = frozenset(tp.partition for tp in d.topic_partitions if tp.topic == topic)
        if d.state == "Ongoing" and partitions:
            out[tid] = (d.producer_id, d.producer_epoch, partitions)
    return out


def raw_output(bootstrap: str, topic: str) -> list[bytes]:
    """Every value in ``topic``'s log, aborted and open transactions included (read_uncommitted)."""
    out: list[bytes] = []
    with LogReader(bootstrap, read_committed=False) as reader:
        n = reader.topics([topic])[topic]
        tps = [EoslogTopicPartition(topic, p) for p in range(n)]
        begin, end = reader.beginning_offsets(tps), reader.end_offsets(tps)
        for tp in tps:
            for chunk in reader.read(tp, begin[tp], end[tp], poll_timeout_ms=int(WAIT_S * 1000)):
                out.extend(r.value for r in chunk if r.value is not None)
    return out


def committed_output(bootstrap: str, topic: str) -> list[bytes]:
    """Every value a read_committed consumer (librdkafka) sees in ``topic``, up to each
    partition's last stable offset, in partition order."""
    with LogReader(bootstrap, read_committed=True) as reader:
        n = reader.topics([topic])[topic]
        tps = [EoslogTopicPartition(topic, p) for p in range(n)]
        stable = reader.end_offsets(tps)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(n)])
        values: dict[int, list[bytes]] = {p: [] for p in range(n)}
        pending = {p for p in range(n) if stable[EoslogTopicPartition(topic, p)] > 0}
        deadline = time.monotonic() + WAIT_S
        while pending:
            assert time.monotonic() < deadline, f"read_committed consumer did not reach the LSO of {pending}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            p = msg.partition()
            end = stable[EoslogTopicPartition(topic, p)]
            error = msg.error()
            if error is None:
                if msg.offset() < end:
                    values[p].append(msg.value())
                if msg.offset() + 1 >= end:
                    pending.discard(p)
            elif error.code() == KafkaError._PARTITION_EOF:
                pending.discard(p)
            else:
                raise AssertionError(f"consumer error: {error}")
        return [v for p in range(n) for v in values[p]]
    finally:
        consumer.close()


def assert_exactly_once(output: Iterable[bytes], expected: Iterable[bytes]) -> None:
    counts = Counter(output)
    duplicates = {v: c for v, c in counts.items() if c > 1}
    assert not duplicates, f"{len(duplicates)} values written more than once, e.g. {list(duplicates.items())[:5]}"
    expected_set = set(expected)
    unexpected = set(counts) - expected_set
    assert not unexpected, f"{len(unexpected)} values nobody wrote, e.g. {sorted(unexpected)[:5]}"
    missing = expected_set - set(counts)
    assert not missing, f"{len(missing)} values missing, e.g. {sorted(missing)[:5]}"

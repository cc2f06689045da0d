"""Spark's own Kafka connector (spark-sql-kafka-0-10, format "kafka") pointed at eoslog.

A Spark job written for Apache Kafka must run on eoslog with nothing changed but the
bootstrap servers (issue 12, section 3). One topic holds committed and aborted transactions
written by librdkafka, each transaction with its own timestamp; then:

- batch reads under ``kafka.isolation.level=read_committed`` give exactly the committed
  records, the same rows (partition, offset, key, value, timestamp) format("eoslog") gives;
  read_uncommitted gives the aborted ones too;
- startingOffsets/endingOffsets as JSON, and offsets by timestamp (startingTimestamp,
  startingOffsetsByTimestamp, endingOffsetsByTimestamp), give what Kafka's semantics say;
- a read_committed stream is stopped half-way, more transactions are written, and the
  stream restarted from its checkpoint: the file sink holds every committed record once,
  and the checkpoint's last offsets are the partitions' last stable offsets;
- Spark's Kafka sink writes to eoslog (batch, and a stream from the transactional topic):
  a read_committed consumer reads back exactly what was written, the same records
  format("eoslog")'s sink writes from the same input.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from support.harness import BrokerProcess, wait_until
from support.kafka_harness import require_spark_kafka

PARTITIONS = 3
PER_TXN = 9
Row = tuple[int, int, bytes, bytes, int]  # partition, offset, key, value, timestamp (ms)
WAIT_S = 120.0


@dataclass
class Written:
    topic: str
    committed: list[Row]
    aborted: list[Row]
    base_ms: int  # the first transaction's timestamp; transaction i has base_ms + 1000 * i


def write(bootstrap: str, topic: str, first: int, count: int, base_ms: int, committed: list[Row],
          aborted: list[Row]) -> None:
    """Transactions ``first``..``first+count-1``; every third one aborted after its records are
    in the log. Transaction i's records carry timestamp ``base_ms + 1000 * i``."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-writer", "linger.ms": 2})
    p.init_transactions(30)
    for i in range(first, first + count):
        landed: list[Row] = []

        def delivered(err: KafkaError | None, msg: Message, landed: list[Row] = landed) -> None:
            assert err is None, err
            landed.append((msg.partition(), msg.offset(), msg.key(), msg.value(), msg.timestamp()[1]))

        p.begin_transaction()
        for j in range(PER_TXN):
            value = f"{topic}:{i}:{j}".encode()
            p.produce(topic, value, key=b"k%d" % j, partition=j % PARTITIONS, timestamp=base_ms + 1000 * i,
                      on_delivery=delivered)
        p.flush(30)
        if i % 3 == 2:
            p.abort_transaction(30)
            aborted += landed
        else:
            p.commit_transaction(30)
            committed += landed


def create(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the futures are done
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)
    return topic


@pytest.fixture(scope="module")
def written(spark_broker: BrokerProcess) -> Written:
    require_spark_kafka()
    topic = create(spark_broker.bootstrap, "spark-kafka-connector-txn")
    w = Written(topic, [], [], int(time.time() * 1000) - 600_000)
    write(spark_broker.bootstrap, topic, 0, 12, w.base_ms, w.committed, w.aborted)
    return w


def kafka_read(spark: Any, broker: BrokerProcess, topic: str, fmt: str = "kafka", **options: str) -> Any:
    reader = spark.read.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def rows(df: Any) -> list[Row]:
    return sorted((r.partition, r.offset, bytes(r.key), bytes(r.value), r.ts)
                  for r in df.selectExpr("partition", "offset", "key", "value", "unix_millis(timestamp) ts").collect())


def test_batch_reads_see_what_the_isolation_level_allows(spark: Any, spark_broker: BrokerProcess,
                                                         written: Written) -> None:
    committed = rows(kafka_read(spark, spark_broker, written.topic, **{"kafka.isolation.level": "read_committed"}))
    assert committed == sorted(written.committed)
    assert rows(kafka_read(spark, spark_broker, written.topic)) == sorted(written.committed + written.aborted)
    # Side by side: format("eoslog") (read_committed by default) gives the same rows.
    assert rows(kafka_read(spark, spark_broker, written.topic, fmt="eoslog")) == committed


def test_offset_ranges_and_timestamps(spark: Any, spark_broker: BrokerProcess, written: Written) -> None:
    t = written.topic
    committed = {"kafka.isolation.level": "read_committed"}
    start, end = {"0": 4, "1": -2, "2": 7}, {"0": 20, "1": 11, "2": -1}
    got = rows(kafka_read(spark, spark_broker, t, startingOffsets=json.dumps({t: start}),
                          endingOffsets=json.dumps({t: end}), **committed))
    lo = {int(p): o if o >= 0 else 0 for p, o in start.items()}
    hi = {int(p): o if o >= 0 else 1 << 62 for p, o in end.items()}
    assert got == sorted(r for r in written.committed if lo[r[0]] <= r[1] < hi[r[0]])
    assert rows(kafka_read(spark, spark_broker, t, fmt="eoslog", startingOffsets=json.dumps({t: start}),
                           endingOffsets=json.dumps({t: end}))) == got

    # By timestamp: from the first record at or after transaction 4's timestamp (ListOffsets by
    # timestamp), to the first at or after transaction 10's; the aborted in between skipped.
    t4, t10 = written.base_ms + 4000, written.base_ms + 10_000
    wanted = sorted(r for r in written.committed if t4 <= r[4] < t10)
    by_ts = {t: {str(p): t4 for p in range(PARTITIONS)}}
    until_ts = {t: {str(p): t10 for p in range(PARTITIONS)}}
    assert rows(kafka_read(spark, spark_broker, t, startingOffsetsByTimestamp=json.dumps(by_ts),
                           endingOffsetsByTimestamp=json.dumps(until_ts), **committed)) == wanted
    assert rows(kafka_read(spark, spark_broker, t, startingTimestamp=str(t4),
                           endingOffsetsByTimestamp=json.dumps(until_ts), **committed)) == wanted
    assert wanted and len(wanted) < len(written.committed)


def stream_to_files(spark: Any, broker: BrokerProcess, topic: str, out: Path, checkpoint: Path, **trigger: Any) -> Any:
    df = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", topic).option("startingOffsets", "earliest")
          .option("kafka.isolation.level", "read_committed").option("maxOffsetsPerTrigger", "10").load())
    return (df.selectExpr("partition", "offset", "key", "value", "timestamp").writeStream.format("parquet")
            .option("path", str(out)).option("checkpointLocation", str(checkpoint)).trigger(**trigger).start())


def test_read_committed_stream_restarts_from_its_checkpoint(spark: Any, spark_broker: BrokerProcess,
                                                            tmp_path: Path) -> None:
    require_spark_kafka()
    topic = create(spark_broker.bootstrap, "spark-kafka-connector-stream")
    base = int(time.time() * 1000) - 600_000
    committed: list[Row] = []
    aborted: list[Row] = []
    write(spark_broker.bootstrap, topic, 0, 9, base, committed, aborted)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    query = stream_to_files(spark, spark_broker, topic, out, checkpoint, processingTime="0 seconds")
    try:
        wait_until(lambda: (query.lastProgress or {}).get("batchId", -1) >= 2, "three micro-batches", WAIT_S)
    finally:
        query.stop()
    first_run = rows(spark.read.parquet(str(out)))
    assert first_run and len(first_run) < len(committed), "the first run must stop half-way"

    write(spark_broker.bootstrap, topic, 9, 9, base, committed, aborted)
    query = stream_to_files(spark, spark_broker, topic, out, checkpoint, availableNow=True)
    query.awaitTermination(WAIT_S)
    assert query.exception() is None
    got = rows(spark.read.parquet(str(out)))
    duplicated = [r for r, n in Counter(got).items() if n > 1]
    assert not duplicated, f"read twice after the restart: {duplicated[:5]}"
    assert got == sorted(committed), (f"missing {sorted(set(committed) - set(got))[:5]}, "
                                      f"aborted read {sorted(set(got) & set(aborted))[:5]}")
    # The checkpoint's last offsets are the partitions' last stable offsets (past the markers).
    last = sorted((checkpoint / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))[-1]
    offsets = json.loads(last.read_text().splitlines()[-1])[topic]
    assert {int(p): o for p, o in offsets.items()} == end_offsets(spark_broker.bootstrap, topic)


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-kafka-ends", "isolation.level": "read_committed"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), 30)[1] for p in range(PARTITIONS)}
    finally:
        c.close()


def read_back(bootstrap: str, topic: str, partitions: int) -> list[tuple[bytes | None, bytes | None, list[Any]]]:
    """Every record of ``topic`` as a read_committed consumer sees it: (key, value, headers)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-check", "isolation.level": "read_committed",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[tuple[bytes | None, bytes | None, list[Any]]] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + WAIT_S
    try:
        while len(at_end) < partitions and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                at_end.add(m.partition())
                continue
            got.append((m.key(), m.value(), sorted(m.headers() or [])))
    finally:
        c.close()
    assert len(at_end) == partitions, f"{topic}: only partitions {sorted(at_end)} read to the end"
    return sorted(got, key=repr)


def test_spark_kafka_sink_writes_to_eoslog(spark: Any, spark_broker: BrokerProcess, written: Written,
                                           tmp_path: Path) -> None:
    b = spark_broker.bootstrap
    # Batch: keys, values, an explicit partition and headers, as Spark's Kafka sink takes them.
    data = [(f"k{i}", f"v{i}", i % 2, [("h", f"{i}".encode())]) for i in range(50)]
    df = spark.createDataFrame(data, "key string, value string, partition int, "
                                     "headers array<struct<key: string, value: binary>>")
    outputs = {}
    for fmt in ("kafka", "eoslog"):
        outputs[fmt] = create(b, f"spark-kafka-sink-batch-{fmt}", 2)
        (df.write.format(fmt).option("kafka.bootstrap.servers", b).option("topic", outputs[fmt])
         .mode("append").save())
    expected = sorted(((k.encode(), v.encode(), h) for k, v, _, h in data), key=repr)
    for fmt, topic in outputs.items():
        assert read_back(b, topic, 2) == expected, fmt

    # Streaming: the transactional topic, read read_committed, copied by each sink.
    src = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", b).option("subscribe", written.topic)
           .option("startingOffsets", "earliest").option("kafka.isolation.level", "read_committed").load())
    for fmt in ("kafka", "eoslog"):
        topic = create(b, f"spark-kafka-sink-stream-{fmt}")
        q = (src.selectExpr("key", "value", "partition").writeStream.format(fmt)
             .option("kafka.bootstrap.servers", b).option("topic", topic)
             .option("checkpointLocation", str(tmp_path / f"cp-{fmt}")).trigger(availableNow=True).start())
        q.awaitTermination(WAIT_S)
        assert q.exception() is None
        outputs[fmt] = topic
    copied = {fmt: read_back(b, topic, PARTITIONS) for fmt, topic in outputs.items()}
    assert copied["kafka"] == sorted(((k, v, []) for _, _, k, v, _ in written.committed), key=repr)
    assert copied["eoslog"] == copied["kafka"]


@pytest.fixture(autouse=True)
def _no_query_left(spark: Any) -> Iterator[None]:
    yield
    for q in spark.streams.active:
        q.stop()

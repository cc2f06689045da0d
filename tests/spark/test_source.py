"""spark.read / spark.readStream format("eoslog") against the real broker, with transactions
written by librdkafka (confluent-kafka): what Spark reads is exactly what a read_committed
consumer may see, streaming queries move in bounded steps and resume from their checkpoint
with no record skipped or read twice, ranges split over tasks without losing or repeating
a record, and an open transaction holds every batch back at the last stable offset."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message, Producer

from support.harness import BrokerProcess, wait_until

Row3 = tuple[int, int, bytes]  # partition, offset, value

WAIT_S = 120.0  # a generous bound on waiting for a condition; never an assertion on time


class TxnWriter:
    """A librdkafka transactional producer that remembers where every record landed."""

    def __init__(self, bootstrap: str, transactional_id: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                                  "linger.ms": 2})
        self.producer.init_transactions(30)
        self.committed: list[Row3] = []
        self.aborted: list[Row3] = []

    def send(self, topic: str, records: Iterable[tuple[int, bytes]]) -> list[Row3]:
        """Send in the open transaction and wait until the records are in the log."""
        landed: list[Row3] = []

        def delivered(err: KafkaError | None, msg: Message) -> None:
            assert err is None, err
            landed.append((msg.partition(), msg.offset(), msg.value()))

        for partition, value in records:
            self.producer.produce(topic, value=value, key=value[:4], partition=partition, on_delivery=delivered)
        # Flushed before the outcome, so an aborted transaction's records really are in the log.
        self.producer.flush(30)
        return landed

    def transaction(self, topic: str, records: Iterable[tuple[int, bytes]], *, commit: bool = True) -> list[Row3]:
        self.producer.begin_transaction()
        landed = self.send(topic, records)
        if commit:
            self.producer.commit_transaction(30)
            self.committed += landed
        else:
            self.producer.abort_transaction(30)
            self.aborted += landed
        return landed


def write_transactions(bootstrap: str, topic: str, count: int, per_txn: int, partitions: int,
                       aborted_every: int = 3, txn_id: str = "") -> TxnWriter:
    """``count`` transactions of ``per_txn`` records round-robin over the partitions; every
    ``aborted_every``-th one aborted."""
    writer = TxnWriter(bootstrap, txn_id or f"{topic}-writer")
    for i in range(count):
        writer.transaction(topic, [(j % partitions, f"{topic}:{i}:{j}".encode()) for j in range(per_txn)],
                           commit=i % aborted_every != aborted_every - 1)
    return writer


def load(spark: Any, broker: BrokerProcess, topic: str, **options: str) -> Any:
    reader = spark.read.format("eoslog").option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def stream(spark: Any, broker: BrokerProcess, topic: str, **options: str) -> Any:
    reader = spark.readStream.format("eoslog").option("bootstrap.servers", broker.bootstrap) \
        .option("subscribe", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def rows_of(df: Any) -> list[Row3]:
    return sorted((r.partition, r.offset, bytes(r.value)) for r in df.select("partition", "offset", "value").collect())


def collect_batches(batches: dict[int, list[Row3]]) -> Callable[[Any, int], None]:
    """A foreachBatch function keeping each micro-batch's rows by batch id (a replayed batch
    overwrites its first attempt, as an idempotent sink would)."""

    def sink(df: Any, batch_id: int) -> None:
        batches[batch_id] = rows_of(df)

    return sink


def offsets_moved(progress: Any) -> int:
    """Offsets a micro-batch advanced over (the first batch's start is null: 0, a new topic)."""
    source = progress["sources"][0]
    start = json.loads(source["startOffset"] or "null") or {}
    end = json.loads(source["endOffset"])
    return sum(o - start.get(t, {}).get(p, 0) for t, ps in end.items() for p, o in ps.items())


# -- batch reads ---------------------------------------------------------------------------


def test_batch_read_returns_exactly_the_committed_records(spark: Any, spark_broker: BrokerProcess,
                                                          create_topic: Any, topic_name: str) -> None:
    topic = create_topic(topic_name, 3)
    writer = write_transactions(spark_broker.bootstrap, topic, count=9, per_txn=7, partitions=3)
    plain = Producer({"bootstrap.servers": spark_broker.bootstrap})
    plain_landed: list[Row3] = []
    for j in range(6):
        plain.produce(topic, value=f"plain-{j}".encode(), partition=j % 3,
                      on_delivery=lambda e, m: plain_landed.append((m.partition(), m.offset(), m.value())))
    plain.flush(30)
    writer.transaction(topic, [(j % 3, f"last-{j}".encode()) for j in range(4)])

    assert writer.aborted, "the test needs aborted records in the log"
    assert rows_of(load(spark, spark_broker, topic)) == sorted(writer.committed + plain_landed)
    # The aborted records are there for a read_uncommitted reader: the filter is what hid them.
    everything = sorted(writer.committed + writer.aborted + plain_landed)
    assert rows_of(load(spark, spark_broker, topic, **{"isolation.level": "read_uncommitted"})) == everything


def test_batch_read_schema_and_headers(spark: Any, spark_broker: BrokerProcess, create_topic: Any,
                                       topic_name: str) -> None:
    topic = create_topic(topic_name, 1)
    p = Producer({"bootstrap.servers": spark_broker.bootstrap})
    p.produce(topic, key=b"k", value=b"v", headers=[("h1", b"x"), ("h2", None)], timestamp=1_700_000_000_123)
    p.produce(topic, key=None, value=None)
    p.flush(30)

    df = load(spark, spark_broker, topic, includeHeaders="true")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    first, second = df.orderBy("offset").collect()
    assert (bytes(first.key), bytes(first.value), first.topic, first.partition, first.offset) == \
        (b"k", b"v", topic, 0, 0)
    assert [(h.key, None if h.value is None else bytes(h.value)) for h in first.headers] == [("h1", b"x"), ("h2", None)]
    assert first.timestampType == 0
    assert df.selectExpr("unix_millis(timestamp)").orderBy("offset").first()[0] == 1_700_000_000_123
    assert (second.key, second.value, second.headers) == (None, None, [])
    assert "headers" not in load(spark, spark_broker, topic).columns


def test_min_partitions_splits_ranges_without_losing_or_repeating_records(
        spark: Any, spark_broker: BrokerProcess, create_topic: Any, topic_name: str) -> None:
    topic = create_topic(topic_name, 1)
    # 30 transactions of 5 records + a marker each: split points at 45, 90, 135 fall inside
    # transactions, committed and aborted ones.
    writer = write_transactions(spark_broker.bootstrap, topic, count=30, per_txn=5, partitions=1, aborted_every=2)

    df = load(spark, spark_broker, topic, minPartitions="4")
    assert df.rdd.getNumPartitions() == 4
    assert rows_of(df) == sorted(writer.committed)
    df = load(spark, spark_broker, topic, minPartitions="4", **{"isolation.level": "read_uncommitted"})
    assert rows_of(df) == sorted(writer.committed + writer.aborted)
    assert load(spark, spark_broker, topic).rdd.getNumPartitions() == 1


def test_starting_and_ending_offsets_json(spark: Any, spark_broker: BrokerProcess, create_topic: Any,
                                          topic_name: str) -> None:
    topic = create_topic(topic_name, 2)
    p = Producer({"bootstrap.servers": spark_broker.bootstrap})
    for i in range(20):
        p.produce(topic, value=f"{i % 2}-{i // 2}".encode(), partition=i % 2)
    p.flush(30)

    df = load(spark, spark_broker, topic, startingOffsets=json.dumps({topic: {"0": 4, "1": -2}}),
              endingOffsets=json.dumps({topic: {"0": 8, "1": -1}}))
    assert [(r[0], r[1]) for r in rows_of(df)] == [(0, o) for o in range(4, 8)] + [(1, o) for o in range(10)]

    with pytest.raises(Exception, match="must specify all TopicPartitions"):
        load(spark, spark_broker, topic, startingOffsets=json.dumps({topic: {"0": 1}})).collect()
    # Past the end: data loss, an error unless failOnDataLoss=false (then from the earliest offset).
    past_end = json.dumps({topic: {"0": 100, "1": 0}})
    with pytest.raises(Exception, match="failOnDataLoss"):
        load(spark, spark_broker, topic, startingOffsets=past_end).collect()
    df = load(spark, spark_broker, topic, startingOffsets=past_end, failOnDataLoss="false")
    assert len(rows_of(df)) == 20

    batches: dict[int, list[Row3]] = {}
    q = (stream(spark, spark_broker, topic, startingOffsets=json.dumps({topic: {"0": 7, "1": -1}}))
         .writeStream.foreachBatch(collect_batches(batches)).trigger(availableNow=True).start())
    q.awaitTermination()
    got = sorted(r for rows in batches.values() for r in rows)
    assert [(r[0], r[1]) for r in got] == [(0, 7), (0, 8), (0, 9)]


def test_subscribe_pattern_and_assign(spark: Any, spark_broker: BrokerProcess, create_topic: Any,
                                      topic_name: str) -> None:
    a, b = create_topic(f"{topic_name}-a", 2), create_topic(f"{topic_name}-b", 1)
    other = create_topic(f"x{topic_name}-c", 1)  # the pattern must match whole names
    p = Producer({"bootstrap.servers": spark_broker.bootstrap})
    for t, n in ((a, 2), (b, 1), (other, 1)):
        for i in range(4):
            p.produce(t, value=f"{t}:{i}".encode(), partition=i % n)
    p.flush(30)

    def read(**options: str) -> list[tuple[str, int, int]]:
        reader = spark.read.format("eoslog").option("bootstrap.servers", spark_broker.bootstrap)
        for key, value in options.items():
            reader = reader.option(key, value)
        return sorted((r.topic, r.partition, r.offset) for r in reader.load().collect())

    by_pattern = read(subscribePattern=re.escape(topic_name) + "-[ab]")
    assert by_pattern == sorted([(a, i % 2, i // 2) for i in range(4)] + [(b, 0, i) for i in range(4)])
    assert read(assign=json.dumps({a: [1], b: [0]})) == [(a, 1, 0), (a, 1, 1)] + [(b, 0, i) for i in range(4)]


def test_option_errors_are_clear(spark: Any, spark_broker: BrokerProcess) -> None:
    with pytest.raises(Exception, match=r"kafka\.bootstrap\.servers"):
        spark.read.format("eoslog").option("subscribe", "x").load().collect()
    with pytest.raises(Exception, match="exactly one of the options 'assign', 'subscribe' or 'subscribePattern'"):
        spark.read.format("eoslog").option("bootstrap.servers", spark_broker.bootstrap).load().collect()
    with pytest.raises(Exception, match="can't be latest for batch"):
        (spark.read.format("eoslog").option("bootstrap.servers", spark_broker.bootstrap).option("subscribe", "x")
         .option("startingOffsets", "latest").load().collect())


# -- streaming -----------------------------------------------------------------------------


def test_stream_moves_at_most_max_offsets_per_trigger(spark: Any, spark_broker: BrokerProcess, create_topic: Any,
                                                      topic_name: str) -> None:
    topic = create_topic(topic_name, 2)
    writer = write_transactions(spark_broker.bootstrap, topic, count=10, per_txn=6, partitions=2)

    batches: dict[int, list[Row3]] = {}
    q = (stream(spark, spark_broker, topic, startingOffsets="earliest", maxOffsetsPerTrigger="10")
         .writeStream.foreachBatch(collect_batches(batches)).trigger(availableNow=True).start())
    q.awaitTermination()

    # 2 x 10 x (3 records + 1 marker) = 80 offsets, at most 10 per trigger.
    moved = [offsets_moved(p) for p in q.recentProgress]
    assert len(moved) >= 8 and all(0 < m <= 10 for m in moved), moved
    assert sum(moved) == 80
    got = [r for _, rows in sorted(batches.items()) for r in rows]
    assert sorted(got) == sorted(writer.committed) and len(set(got)) == len(got)


def test_restarted_query_reads_every_record_once(spark: Any, spark_broker: BrokerProcess, create_topic: Any,
                                                 topic_name: str, checkpoint: Any) -> None:
    """Issue 7, test 5: stop a streaming query in the middle, write more, restart it from its
    checkpoint: every committed record is read once — none skipped, none twice."""
    topic = create_topic(topic_name, 2)
    writer = write_transactions(spark_broker.bootstrap, topic, count=20, per_txn=6, partitions=2)

    def start(batches: dict[int, list[Row3]], **trigger: Any) -> Any:
        return (stream(spark, spark_broker, topic, startingOffsets="earliest", maxOffsetsPerTrigger="12")
                .writeStream.foreachBatch(collect_batches(batches))
                .option("checkpointLocation", str(checkpoint)).trigger(**trigger).start())

    first: dict[int, list[Row3]] = {}
    q = start(first, processingTime="0 seconds")
    wait_until(lambda: len(first) >= 2, "two micro-batches", WAIT_S)
    q.stop()
    for i in range(5):  # more data while the query is down
        writer.transaction(topic, [(j % 2, f"later:{i}:{j}".encode()) for j in range(6)], commit=i != 2)

    second: dict[int, list[Row3]] = {}
    q = start(second, availableNow=True)
    q.awaitTermination()

    assert second and min(second) >= 1, "the restarted query resumed from its checkpoint, not from the start"
    for batch_id in first.keys() & second.keys():
        # A batch cut short by stop() is replayed with the offsets its checkpoint planned.
        assert first[batch_id] == second[batch_id]
    batches = {**first, **second}
    got = [r for _, rows in sorted(batches.items()) for r in rows]
    assert len(set(got)) == len(got), "a record was read twice"
    assert sorted(got) == sorted(writer.committed), "a committed record was skipped (or an aborted one read)"


def test_open_transaction_pins_batches_at_the_last_stable_offset(
        spark: Any, spark_broker: BrokerProcess, create_topic: Any, topic_name: str) -> None:
    topic = create_topic(topic_name, 1)
    done = write_transactions(spark_broker.bootstrap, topic, count=2, per_txn=4, partitions=1, aborted_every=99,
                              txn_id=f"{topic}-done")
    open_txn = TxnWriter(spark_broker.bootstrap, f"{topic}-open")
    open_txn.producer.begin_transaction()
    pending = open_txn.send(topic, [(0, f"open-{j}".encode()) for j in range(3)])
    lso = pending[0][1]
    after = write_transactions(spark_broker.bootstrap, topic, count=1, per_txn=4, partitions=1, aborted_every=99,
                               txn_id=f"{topic}-after")
    try:
        assert lso == 10 and after.committed[0][1] > lso  # 2 x (4 + marker), then the open one

        assert rows_of(load(spark, spark_broker, topic)) == sorted(done.committed)
        batches: dict[int, list[Row3]] = {}
        q = (stream(spark, spark_broker, topic, startingOffsets="earliest").writeStream
             .foreachBatch(collect_batches(batches)).trigger(availableNow=True).start())
        q.awaitTermination()
        assert json.loads(q.lastProgress["sources"][0]["endOffset"]) == {topic: {"0": lso}}
        assert sorted(r for rows in batches.values() for r in rows) == sorted(done.committed)
        # read_uncommitted reads past it, up to the high watermark.
        uncommitted = rows_of(load(spark, spark_broker, topic, **{"isolation.level": "read_uncommitted"}))
        assert uncommitted == sorted(done.committed + pending + after.committed)
    finally:
        open_txn.producer.commit_transaction(30)
    assert rows_of(load(spark, spark_broker, topic)) == sorted(done.committed + pending + after.committed)

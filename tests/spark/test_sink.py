"""df.writeStream / df.write format("eoslog") against the real broker: every input row
reaches a read_committed consumer exactly once — also when the driver's commit fails just
before or just after it records its decision and the query is restarted from its
checkpoint — and nothing of an undecided batch is ever visible."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sink_support import (
    assert_exactly_once,
    committed_output,
    create_topics,
    open_transactions,
    pass_through,
    produce_input,
    raw_output,
)

from eoslog.spark.decisions import read_latest_decision
from eoslog.spark.sink_options import parse_sink_options
from support.harness import BrokerProcess


def _committed_rows(query: Any) -> int:
    """Input rows of the batches Spark finished (committed) in this run."""
    return sum(p["numInputRows"] for p in query.recentProgress)


def test_stream_pass_through_writes_every_row_once(spark: Any, spark_broker: BrokerProcess, topic_name: str,
                                                   tmp_path: Path) -> None:
    b = spark_broker.bootstrap
    src, dst = f"{topic_name}-in", f"{topic_name}-out"
    create_topics(b, (src, 2), (dst, 3))
    expected = produce_input(b, src, 150, 2)
    query = pass_through(spark, b, src, dst, tmp_path / "ck")
    query.awaitTermination(300)
    assert query.exception() is None
    assert_exactly_once(committed_output(b, dst), expected)
    assert open_transactions(b, dst) == {}
    decision = read_latest_decision(parse_sink_options({"kafka.bootstrap.servers": b}), str(query.id))
    assert decision is not None and decision.batch_id == query.lastProgress["batchId"]


@pytest.mark.parametrize("fault", ["commit-before-decision", "commit-after-decision"])
def test_commit_failure_then_restart_from_checkpoint(spark: Any, spark_broker: BrokerProcess, topic_name: str,
                                                     tmp_path: Path, fault: str) -> None:
    b = spark_broker.bootstrap
    src, dst = f"{topic_name}-in", f"{topic_name}-out"
    create_topics(b, (src, 2), (dst, 2))
    expected = produce_input(b, src, 200, 2)
    checkpoint = tmp_path / "ck"

    failing = pass_through(spark, b, src, dst, checkpoint, sink_options={"eoslog.sink.test.failAt": f"{fault}@2"})
    with pytest.raises(Exception, match="test fault"):
        failing.awaitTermination(300)
    done_before = _committed_rows(failing)  # batches 0 and 1
    visible = committed_output(b, dst)
    assert_exactly_once(visible, set(visible))
    if fault == "commit-before-decision":
        # Batch 2 was never decided: none of its rows is visible, and its transactions are gone.
        assert len(visible) == done_before
        assert open_transactions(b, dst) == {}
    else:
        # Batch 2 was decided: Spark's abort() finished it instead of undoing it.
        assert len(visible) > done_before

    restarted = pass_through(spark, b, src, dst, checkpoint)
    restarted.awaitTermination(300)
    assert restarted.exception() is None
    assert_exactly_once(committed_output(b, dst), expected)
    assert open_transactions(b, dst) == {}
    if fault == "commit-after-decision":
        # The replayed batch 2 found its decision and wrote nothing, not even aborted copies.
        assert len(raw_output(b, dst)) == len(expected)


def test_task_crashes_after_writing_rows_are_retried_without_duplicates(
        spark: Any, spark_broker: BrokerProcess, topic_name: str, tmp_path: Path) -> None:
    """local[2,3]: the first attempt of every write task sends and flushes some rows, then its
    Python worker exits; Spark retries the task under a new attempt number (so a new
    transactional id), and the driver aborts the crashed attempts' open transactions."""
    b = spark_broker.bootstrap
    src, dst = f"{topic_name}-in", f"{topic_name}-out"
    create_topics(b, (src, 2), (dst, 2))
    expected = produce_input(b, src, 80, 2)
    query = pass_through(spark, b, src, dst, tmp_path / "ck", sink_options={"eoslog.sink.test.failAt": "task-crash:5"})
    query.awaitTermination(300)
    assert query.exception() is None
    assert_exactly_once(committed_output(b, dst), expected)
    assert open_transactions(b, dst) == {}
    # The crashed attempts really wrote: their rows are in the log, aborted.
    assert len(raw_output(b, dst)) > len(expected)


def test_at_least_once_mode_duplicates_what_a_crashed_attempt_wrote(
        spark: Any, spark_broker: BrokerProcess, topic_name: str, tmp_path: Path) -> None:
    """The same crash as above without transactions: every row arrives, the rows the crashed
    attempts had flushed arrive twice — what exactly-once mode prevents."""
    b = spark_broker.bootstrap
    src, dst = f"{topic_name}-in", f"{topic_name}-out"
    create_topics(b, (src, 2), (dst, 2))
    expected = produce_input(b, src, 80, 2)
    query = pass_through(spark, b, src, dst, tmp_path / "ck", sink_options={
        "eoslog.sink.mode": "at-least-once", "eoslog.sink.test.failAt": "task-crash:5"})
    query.awaitTermination(300)
    assert query.exception() is None
    output = committed_output(b, dst)
    assert set(output) == set(expected)
    assert len(output) > len(expected)
    assert sorted(output) == sorted(raw_output(b, dst))  # no transactions: nothing aborted


def test_batch_write_commits_every_task_or_none(spark: Any, spark_broker: BrokerProcess, topic_name: str) -> None:
    b = spark_broker.bootstrap
    create_topics(b, (topic_name, 3))
    rows = [(f"k{i}", f"v{i:04d}") for i in range(90)]
    df = spark.createDataFrame(rows, "key string, value string").repartition(3)

    def write(**options: str) -> None:
        w = df.write.format("eoslog").option("kafka.bootstrap.servers", b).option("topic", topic_name)
        for k, v in options.items():
            w = w.option(k, v)
        w.mode("append").save()

    with pytest.raises(Exception, match="test fault"):
        write(**{"eoslog.sink.test.failAt": "commit-before-decision@0"})
    assert committed_output(b, topic_name) == []
    assert open_transactions(b, topic_name) == {}
    assert len(raw_output(b, topic_name)) == 90  # written, prepared, then aborted by abort()

    write(**{"eoslog.sink.test.failAt": "task-crash:3"})  # every first attempt crashes; retries succeed
    assert_exactly_once(committed_output(b, topic_name), [v.encode() for _, v in rows])
    assert open_transactions(b, topic_name) == {}
    with pytest.raises(Exception, match="Overwrite is not allowed"):
        df.write.format("eoslog").option("kafka.bootstrap.servers", b).option("topic", topic_name) \
            .mode("overwrite").save()


def test_topic_partition_and_headers_columns(spark: Any, spark_broker: BrokerProcess, topic_name: str) -> None:
    """As Spark's Kafka sink: a topic column (unless the topic option overrides it), a
    partition column, headers as array<struct<key string, value binary>>, null keys."""
    from confluent_kafka import Consumer, TopicPartition

    b = spark_broker.bootstrap
    first, second = f"{topic_name}-a", f"{topic_name}-b"
    create_topics(b, (first, 3), (second, 3))
    rows = [(first if i % 2 else second, None if i % 3 == 0 else f"k{i}", f"v{i}", i % 3,
             [("h", f"x{i}".encode()), ("n", None)]) for i in range(30)]
    df = spark.createDataFrame(
        rows, "topic string, key string, value string, partition int, "
              "headers array<struct<key: string, value: binary>>")
    df.write.format("eoslog").option("kafka.bootstrap.servers", b).mode("append").save()

    consumer = Consumer({"bootstrap.servers": b, "group.id": topic_name, "isolation.level": "read_committed",
                         "enable.partition.eof": True})
    got = {}
    try:
        consumer.assign([TopicPartition(t, p, 0) for t in (first, second) for p in range(3)])
        eof = 0
        while eof < 6:
            msg = consumer.poll(10)
            assert msg is not None, "no message within 10 s"
            if msg.error() is not None:
                eof += 1
                continue
            got[msg.value().decode()] = (msg.topic(), msg.key(), msg.partition(), msg.headers())
    finally:
        consumer.close()
    assert got == {
        f"v{i}": (first if i % 2 else second, None if i % 3 == 0 else f"k{i}".encode(), i % 3,
                  [("h", f"x{i}".encode()), ("n", None)])
        for i in range(30)
    }
    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        df.drop("value").write.format("eoslog").option("kafka.bootstrap.servers", b).mode("append").save()

"""The sink's options and columns, checked before anything runs (no broker, no Spark)."""

from __future__ import annotations

import pytest
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, LongType, StringType, StructField, StructType

from eoslog.spark.sink_options import (
    AT_LEAST_ONCE,
    EXACTLY_ONCE,
    Columns,
    FaultPoints,
    SinkOptionError,
    check_columns,
    parse_sink_options,
)

BOOTSTRAP = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_defaults_and_names() -> None:
    o = parse_sink_options({**BOOTSTRAP, "topic": " out ", "kafka.linger.ms": "20", "kafka.client.id": "me"})
    assert (o.bootstrap_servers, o.topic, o.mode) == ("127.0.0.1:9092", "out", EXACTLY_ONCE)
    assert o.producer == {"linger.ms": "20", "client.id": "me"} and o.client_id == "me"
    assert o.decisions_topic == "__eoslog_spark_commits" and o.transactional_id_prefix == "eoslog-spark-"
    assert o.producer_settings(**{"transactional.id": "t"}) == {
        "linger.ms": "20", "client.id": "me", "bootstrap.servers": "127.0.0.1:9092", "transactional.id": "t"}
    assert parse_sink_options({"bootstrap.servers": "h:1", "eoslog.sink.mode": "At-Least-Once"}).mode == AT_LEAST_ONCE
    # Spark hands options with any case
    assert parse_sink_options({"Kafka.Bootstrap.Servers": "h:1", "TOPIC": "t"}).topic == "t"


@pytest.mark.parametrize(("options", "message"), [
    ({}, "bootstrap.servers"),
    ({**BOOTSTRAP, "eoslog.sink.mode": "twice"}, "eoslog.sink.mode"),
    ({**BOOTSTRAP, "topic": " "}, "must not be empty"),
    ({**BOOTSTRAP, "kafka.transactional.id": "x"}, "transactional.id"),
    ({**BOOTSTRAP, "kafka.enable.idempotence": "false"}, "enable.idempotence"),
    ({**BOOTSTRAP, "kafka.value.serializer": "x"}, "value.serializer"),
    ({**BOOTSTRAP, "kafka.transaction.timeout.ms": "1000"}, "never time out"),
    ({**BOOTSTRAP, "kafka.acks": "1"}, "acks=all"),
    ({**BOOTSTRAP, "eoslog.sink.test.failAt": "explode@1"}, "unknown fault point"),
    ({**BOOTSTRAP, "eoslog.sink.test.failAt": "commit-after-decision@x"}, "malformed"),
    ({**BOOTSTRAP, "eoslog.sink.test.failAt": "pause-after-decision@1"}, "malformed"),
])
def test_refused_options(options: dict[str, str], message: str) -> None:
    with pytest.raises(SinkOptionError, match=message):
        parse_sink_options(options)


def test_acks_1_is_fine_at_least_once() -> None:
    assert parse_sink_options({**BOOTSTRAP, "kafka.acks": "1", "eoslog.sink.mode": "at-least-once"}).producer == {
        "acks": "1"}


def test_fault_points() -> None:
    f = FaultPoints.parse("commit-before-decision@1, commit-after-decision@2,commit-after-decision@5,"
                          "pause-after-decision@3:/tmp/x:y,task-crash:10,task-pause@2/3:/tmp/p")
    assert f == FaultPoints(frozenset({1}), frozenset({2, 5}), ((3, "/tmp/x:y"),), 10, task_pause=((2, 3, "/tmp/p"),))
    assert FaultPoints.parse(None) == FaultPoints.parse(" ") == FaultPoints()
    # only partition 3's first attempt in batch 2 pauses
    assert [f.task_pause_path(2, 3, 0), f.task_pause_path(2, 3, 1), f.task_pause_path(2, 2, 0)] == ["/tmp/p", None,
                                                                                                    None]
    for bad in ("task-pause@2:/tmp/p", "task-pause@2/3", "task-pause@x/3:/p", "task-pauses@1/1:/p"):
        with pytest.raises(SinkOptionError, match="fault point"):
            FaultPoints.parse(bad)


def _schema(*fields: tuple[str, object]) -> StructType:
    return StructType([StructField(n, t, True) for n, t in fields])  # type: ignore[arg-type]


HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def test_columns() -> None:
    with_topic = parse_sink_options({**BOOTSTRAP, "topic": "t"})
    without = parse_sink_options(BOOTSTRAP)
    schema = _schema(("key", BinaryType()), ("value", StringType()), ("topic", StringType()),
                     ("partition", IntegerType()), ("headers", HEADERS), ("other", LongType()))
    assert check_columns(schema, without) == Columns(value=1, key=0, topic=2, partition=3, headers=4)
    # The topic option overrides a topic column.
    assert check_columns(schema, with_topic) == Columns(value=1, key=0, topic=None, partition=3, headers=4)
    assert check_columns(_schema(("VALUE", BinaryType())), with_topic) == Columns(value=0)


@pytest.mark.parametrize(("fields", "message"), [
    ((("key", StringType()),), "Required attribute 'value' not found"),
    ((("value", LongType()),), "value attribute type must be a String or BinaryType"),
    ((("value", StringType()), ("key", IntegerType())), "key attribute type"),
    ((("value", StringType()), ("partition", LongType())), "partition attribute type must be an IntegerType"),
    ((("value", StringType()), ("headers", ArrayType(StringType()))), "headers attribute type"),
])
def test_refused_columns(fields: tuple[tuple[str, object], ...], message: str) -> None:
    with pytest.raises(SinkOptionError, match=message):
        check_columns(_schema(*fields), parse_sink_options({**BOOTSTRAP, "topic": "t"}))


def test_a_topic_is_needed_somewhere() -> None:
    with pytest.raises(SinkOptionError, match="topic option required"):
        check_columns(_schema(("value", StringType())), parse_sink_options(BOOTSTRAP))
    with pytest.raises(SinkOptionError, match="topic attribute type must be a StringType"):
        check_columns(_schema(("value", StringType()), ("topic", BinaryType())), parse_sink_options(BOOTSTRAP))
    # ... unless the topic option overrides the column
    assert check_columns(_schema(("value", StringType()), ("topic", BinaryType())),
                         parse_sink_options({**BOOTSTRAP, "topic": "t"})) == Columns(value=0)

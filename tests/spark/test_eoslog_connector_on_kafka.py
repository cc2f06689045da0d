"""format("eoslog") on an existing Apache Kafka cluster (issue 12, section 4): three KRaft
nodes (tests/support/kafka_harness.py), topics at replication factor 3 / min.insync.replicas 2,
``__transaction_state`` likewise.

- The source reads Kafka read_committed: a batch read gives exactly the committed records of
  a topic with aborted transactions.
- A streaming query reads a topic that a transactional producer keeps writing (a third of its
  transactions aborted) while the leader of one of its partitions is ``kill -9``ed and
  restarted, and the query is stopped and restarted from its checkpoint: the file sink holds
  every committed record exactly once, no aborted one.
- The exactly-once sink needs KIP-939 two-phase commit, which Apache Kafka 4.4 does not offer
  (InitProducerId v6 only behind ``unstable.api.versions.enable``, and no keepPreparedTxn):
  the write fails with the sink's one clear error. ``eoslog.sink.mode=at-least-once`` works.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from support.harness import wait_until
from support.kafka_harness import KafkaCluster

pytestmark = pytest.mark.kafka_cluster  # a 3-node Apache Kafka cluster: -m "not kafka_cluster" skips
WAIT_S = 180.0
TRANSACTIONS = 45  # of 12 records each, a third aborted
Row = tuple[int, int, bytes]  # partition, offset, value


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    c = KafkaCluster(tmp_path_factory.mktemp("kafka-cluster"),
                     overrides={"transaction.two.phase.commit.enable": "true",
                                "transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3"}
                     ).start()
    yield c
    c.kill()  # nothing is checked after: no controlled shutdowns (the last waits for a lost quorum)


def create(bootstrap: str, topic: str, partitions: int = 3) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 3, config={"min.insync.replicas": "2"})]).values():
        f.result(60)
    return topic


class TxnWriter:
    """A librdkafka transactional producer writing numbered records, every third transaction
    aborted; keeps where each record landed by outcome. Transactions that fail through a broker
    kill are aborted (and counted as such), as Kafka's clients are meant to be used."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-writer",
                           "linger.ms": 5, "transaction.timeout.ms": 60000})
        self.p.init_transactions(60)
        self.committed: list[Row] = []
        self.aborted: list[Row] = []
        self.txns = 0
        self.error: BaseException | None = None

    def transaction(self, n: int) -> None:
        landed: list[Row] = []

        def delivered(err: KafkaError | None, msg: Message) -> None:
            if err is None:
                landed.append((msg.partition(), msg.offset(), msg.value()))

        self.p.begin_transaction()
        for j in range(12):
            self.p.produce(self.topic, f"{n}:{j}".encode(), partition=j % 3, on_delivery=delivered)
        try:
            self.p.flush(60)
            if n % 3 == 2:
                raise _Abort()
            self.p.commit_transaction(60)
            self.committed += landed
        except (KafkaException, _Abort) as e:
            if isinstance(e, KafkaException) and not e.args[0].txn_requires_abort():
                raise
            self.p.abort_transaction(60)
            self.aborted += landed
        self.txns += 1

    def run(self, count: int) -> None:
        """``count`` transactions, a pause after each: the writing spans the broker kill."""
        try:
            for n in range(count):
                self.transaction(n)
                time.sleep(0.3)
        except BaseException as e:  # reported by the test
            self.error = e


class _Abort(Exception):
    pass


def eoslog_stream(spark: Any, bootstrap: str, topic: str, out: Path, checkpoint: Path) -> Any:
    df = (spark.readStream.format("eoslog").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
          .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "100").load())
    return (df.select("partition", "offset", "value").writeStream.format("parquet").option("path", str(out))
            .option("checkpointLocation", str(checkpoint)).trigger(processingTime="0 seconds").start())


def parquet_rows(spark: Any, out: Path) -> list[Row]:
    if not (out / "_spark_metadata").exists():
        return []
    return sorted((r.partition, r.offset, bytes(r.value)) for r in spark.read.parquet(str(out)).collect())


def test_batch_read_of_kafka_is_read_committed(spark: Any, cluster: KafkaCluster) -> None:
    topic = create(cluster.bootstrap, "eoslog-on-kafka-batch")
    w = TxnWriter(cluster.bootstrap, topic)
    for n in range(9):
        w.transaction(n)
    assert w.aborted
    df = spark.read.format("eoslog").option("kafka.bootstrap.servers", cluster.bootstrap) \
        .option("subscribe", topic).load()
    assert sorted((r.partition, r.offset, bytes(r.value)) for r in df.collect()) == sorted(w.committed)


def test_stream_through_a_leader_kill_and_a_restart_is_exactly_once(spark: Any, cluster: KafkaCluster,
                                                                    tmp_path: Path) -> None:
    topic = create(cluster.bootstrap, "eoslog-on-kafka-stream")
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    w = TxnWriter(cluster.bootstrap, topic)
    writer = threading.Thread(target=w.run, args=(TRANSACTIONS,))
    writer.start()
    query = eoslog_stream(spark, cluster.bootstrap, topic, out, checkpoint)
    try:
        wait_until(lambda: (query.lastProgress or {}).get("batchId", -1) >= 2, "three micro-batches", WAIT_S)
        victim = cluster.leader_of(topic, 0)
        victim.kill()
        wait_until(lambda: cluster.leader_of(topic, 0) is not victim, f"a new leader of {topic}-0", WAIT_S)
        batch = query.lastProgress["batchId"]
        wait_until(lambda: query.lastProgress["batchId"] >= batch + 2, "two batches after the kill", WAIT_S)
        victim.start()
        query.stop()  # and a restart from the checkpoint
        query = eoslog_stream(spark, cluster.bootstrap, topic, out, checkpoint)
    finally:
        writer.join(WAIT_S)
    assert w.error is None, f"the writer failed: {w.error!r}"
    try:
        wait_until(lambda: len(parquet_rows(spark, out)) >= len(w.committed), "the stream to catch up", WAIT_S)
        time.sleep(2)  # a batch past the end would show a duplicate
    finally:
        query.stop()
    got = parquet_rows(spark, out)
    duplicated = [r for r, n in Counter(got).items() if n > 1]
    assert not duplicated, f"read twice: {duplicated[:5]}"
    assert not set(got) & set(w.aborted), f"aborted records read: {sorted(set(got) & set(w.aborted))[:5]}"
    assert got == sorted(w.committed), f"missing: {sorted(set(w.committed) - set(got))[:5]}"
    assert w.aborted and victim.starts == 2


def test_exactly_once_sink_says_kafka_lacks_two_phase_commit(spark: Any, cluster: KafkaCluster) -> None:
    topic = create(cluster.bootstrap, "eoslog-on-kafka-sink")
    df = spark.createDataFrame([(f"v{i}",) for i in range(20)], "value string")
    with pytest.raises(Exception, match="needs KIP-939 two-phase commit") as failed:
        df.write.format("eoslog").option("kafka.bootstrap.servers", cluster.bootstrap).option("topic", topic) \
            .mode("append").save()
    assert "Apache Kafka up to 4.4 does not" in str(failed.value)
    # At least once needs no transactions: every row arrives.
    df.write.format("eoslog").option("kafka.bootstrap.servers", cluster.bootstrap).option("topic", topic) \
        .option("eoslog.sink.mode", "at-least-once").mode("append").save()
    back = spark.read.format("eoslog").option("kafka.bootstrap.servers", cluster.bootstrap) \
        .option("subscribe", topic).load()
    assert sorted(bytes(r.value).decode() for r in back.collect()) == sorted(f"v{i}" for i in range(20))

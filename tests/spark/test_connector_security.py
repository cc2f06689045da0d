"""Issue 15: the Spark connector over SASL_SSL with SCRAM-SHA-512, on a secured broker
(tests/support/security_harness.py: ACLs on, no anonymous access), and no credential in what Spark
or the broker shows or logs.

format("eoslog") reads (batch) and the exactly-once sink writes (streaming, eoslog source →
eoslog sink) with Kafka's settings under ``kafka.*``, as Spark's Kafka connector takes them:
``kafka.security.protocol``, ``kafka.ssl.truststore.location``, ``kafka.sasl.mechanism`` and
``kafka.sasl.jaas.config`` (the password inside it). The password string must then appear in
none of: the batch query's extended plan, the streaming query's plan, lastProgress and
status, the driver's log (the JVM's log4j at INFO and eoslog's Python loggers at DEBUG,
captured during the test), the stderr of the JVM and its Python workers, and the broker's log.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from sink_support import WAIT_S, assert_exactly_once, pass_through

from support.security_harness import USERS, SecuredBroker

USER = "admin"  # the super user: this test is about transport and hygiene, ACLs have their own
PASSWORD = USERS[USER]
JAAS = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{USER}" password="{PASSWORD}";'


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    sb = SecuredBroker(tmp_path_factory.mktemp("spark-secured"),
                       overrides={"transaction.two.phase.commit.enable": "true"})
    b = sb.broker.start()
    yield sb
    if b.alive():
        b.stop()


def spark_options(sb: SecuredBroker) -> dict[str, str]:
    return {"kafka.bootstrap.servers": sb.address("SASL_SSL"), "kafka.security.protocol": "SASL_SSL",
            "kafka.ssl.truststore.location": str(sb.certs / "ca.pem"), "kafka.ssl.truststore.type": "PEM",
            "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.jaas.config": JAAS}


def committed_values(conf: dict[str, Any], topic: str, partitions: int) -> list[bytes]:
    """Every value a read_committed librdkafka consumer sees in ``topic``, to the end."""
    c = Consumer({**conf, "group.id": f"check-{time.monotonic_ns()}", "isolation.level": "read_committed",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[bytes] = []
    pending, deadline = set(range(partitions)), time.monotonic() + WAIT_S
    try:
        while pending:
            assert time.monotonic() < deadline, f"no end of partitions {pending}"
            m = c.poll(0.5)
            if m is None:
                continue
            error, value = m.error(), m.value()
            if error is None and value is not None:
                got.append(value)
            elif error is not None and error.code() == KafkaError._PARTITION_EOF:
                pending.discard(m.partition())
            else:
                raise AssertionError(f"consumer error: {error}")
    finally:
        c.close()
    return got


class JvmLogCapture:
    """A log4j2 file appender on the driver JVM's root logger, at INFO while it is on."""

    def __init__(self, spark: Any, path: Path) -> None:
        jvm = spark.sparkContext._jvm
        self.log4j = jvm.org.apache.logging.log4j
        self.ctx = self.log4j.LogManager.getContext(False)
        layout = self.log4j.core.layout.PatternLayout.createDefaultLayout()
        self.appender = (self.log4j.core.appender.FileAppender.newBuilder().withFileName(str(path))
                         .setName("eoslog-test-capture").setLayout(layout).build())
        self.appender.start()
        self.root = self.ctx.getConfiguration().getRootLogger()
        self.level = self.root.getLevel()
        self.root.addAppender(self.appender, self.log4j.Level.INFO, None)
        self.root.setLevel(self.log4j.Level.INFO)
        self.ctx.updateLoggers()

    def stop(self) -> None:
        self.root.removeAppender("eoslog-test-capture")
        self.root.setLevel(self.level)
        self.ctx.updateLoggers()
        self.appender.stop()


def test_read_and_exactly_once_sink_over_sasl_ssl_without_leaking_the_password(
        spark: Any, secured: SecuredBroker, tmp_path: Path, caplog: pytest.LogCaptureFixture,
        request: pytest.FixtureRequest) -> None:
    source, sink, partitions = "spark-sec-in", "spark-sec-out", 3
    rdkafka = secured.rdkafka("SASL_SSL", user=USER)
    admin = AdminClient(rdkafka)  # kept alive: librdkafka fails the futures of a destroyed one
    for f in admin.create_topics([NewTopic(t, partitions, 1) for t in (source, sink)]).values():
        f.result(30)
    p = Producer(rdkafka)
    values = [f"v{i:04d}".encode() for i in range(300)]
    for i, v in enumerate(values):
        p.produce(source, v, partition=i % partitions)
    assert p.flush(30) == 0
    del p, admin

    shown: list[str] = []  # everything Spark showed about the queries
    jvm_log = tmp_path / "driver-jvm.log"
    capture = JvmLogCapture(spark, jvm_log)
    caplog.set_level(logging.DEBUG, logger="eoslog")
    try:
        df = spark.read.format("eoslog").options(**spark_options(secured)).option("subscribe", source).load()
        assert sorted(r.value for r in df.select("value").collect()) == values
        shown.append(df._jdf.queryExecution().toString())  # what df.explain(extended=True) prints

        query = pass_through(spark, "", source, sink, tmp_path / "ck", max_per_trigger=100,
                             client_options=spark_options(secured))
        query.awaitTermination(WAIT_S)
        assert query.exception() is None, query.exception()
        shown += [query._jsq.explainInternal(True), *(json.dumps(x, default=str) for x in (
            query.lastProgress, query.status, query.recentProgress))]
    finally:
        capture.stop()

    assert_exactly_once(committed_values(rdkafka, sink, partitions), values)
    assert len(committed_values(rdkafka, sink, partitions)) == len(values)
    assert "Parsed Logical Plan" in shown[0] and "Physical Plan" in shown[1], shown[:2]
    driver_log = jvm_log.read_text(errors="replace")
    assert "Streaming query made progress" in driver_log, "nothing captured from the driver's log"
    # The JVM and its Python workers (reader, sink tasks, sink commit) write to the stderr they
    # inherited: pytest's fd capture, read here (without it, e.g. under -s, this part is blind).
    capture_manager = request.config.pluginmanager.getplugin("capturemanager")
    assert capture_manager.is_globally_capturing(), "run with fd capture (not -s): the workers' stderr is checked"
    _out, stderr = capture_manager.read_global_capture()
    sys.stderr.write(stderr)
    places = {"batch plan": shown[0], "streaming plan": shown[1], "lastProgress": shown[2], "status": shown[3],
              "recentProgress": shown[4], "driver log (JVM)": driver_log, "driver log (eoslog)": caplog.text,
              "driver and workers' stderr": stderr,
              "broker log": secured.broker.log_text()}
    leaks = [where for where, text in places.items() if PASSWORD in text]
    assert not leaks, f"the password appears in: {leaks}"

"""Fixtures for the Spark connector's tests: ONE SparkSession and ONE broker for the run (under
pytest-xdist, for each worker that runs Spark modules: tests/support/distribution.py).

Starting Spark costs seconds and a JVM, so every test under tests/spark shares the
session-scoped ``spark`` (master ``local[2,3]``: two task threads, and a failed task is
retried up to 3 attempts, which the sink's task-retry test relies on) and the
session-scoped ``spark_broker`` (``shared_broker`` is the same broker here). Tests use
distinct topic names (``topic_name``) and their own checkpoint directories (``tmp_path``).

The session carries Spark's own Kafka connector (``spark.jars`` from .reference/lib/spark-kafka,
when setup.sh resolved it): format("kafka") sits beside format("eoslog"), and the tests that
use it fail when the jars are missing.

Without Java 17 every test that asks for ``spark`` fails saying what to install (skips only
when the developer allows them: tests/support/deps.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from support.deps import require_java
from support.harness import BrokerProcess
from support.kafka_harness import spark_kafka_jars


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The run's local SparkSession, with format "eoslog" registered."""
    require_java()
    from eoslog.spark.session import spark_session

    jars = spark_kafka_jars()
    session = spark_session("eoslog-tests", master="local[2,3]", work_dir=tmp_path_factory.mktemp("spark"),
                            shuffle_partitions=2, conf={"spark.jars": ",".join(map(str, jars))} if jars else {})
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()


@pytest.fixture(scope="session")
def spark_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for all Spark tests (two-phase commit on, for the exactly-once sink)."""
    b = BrokerProcess(tmp_path_factory.mktemp("spark-broker") / "data",
                      overrides={"transaction.two.phase.commit.enable": "true"}).start()
    yield b
    if b.alive():
        b.stop()


@pytest.fixture(scope="session")
def shared_broker(spark_broker: BrokerProcess) -> BrokerProcess:
    """Under tests/spark the module-scoped ``shared_broker`` is the run's one broker too."""
    return spark_broker


_topic_counter = itertools.count()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name no other test of the run uses."""
    return f"{request.node.name.replace('[', '-').replace(']', '')[:60]}-{next(_topic_counter)}"


@pytest.fixture
def create_topic(spark_broker: BrokerProcess) -> Callable[[str, int], str]:
    def create(name: str, partitions: int) -> str:
        admin = AdminClient({"bootstrap.servers": spark_broker.bootstrap})
        for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
            future.result(30)
        return name

    return create


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    return tmp_path / "checkpoint"

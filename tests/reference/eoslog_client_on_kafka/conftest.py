"""eoslog.client's interop tests run against Apache Kafka (issue 12, section 4).

Each module here imports test functions of one tests/interop module unchanged (producer,
consumer, admin, consumer groups, transactions across eoslog.client and librdkafka) and
gives them, as their ``shared_broker`` / ``group_broker``, one Apache Kafka broker (KRaft,
tests/support/kafka_harness.py) for the whole package: a Kafka start and stop costs seconds of JVM on
two cores, and the imported tests already use topic, group and transactional ids of their own
(they share a module's broker in tests/interop).
What a test checks of eoslog's broker itself (its restart, its files, its kill) stays in
tests/interop only; the crash tests on Kafka are tests/chaos/test_copy.py's ``kafka-*``
scenarios and tests/spark/test_eoslog_connector_on_kafka.py.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "interop"))

from support.kafka_harness import KafkaBroker


@pytest.fixture(scope="package")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """Apache Kafka set as tests/interop sets eoslog: node id 0, small internal topics, the
    group rebalance delay the group tests expect, and no time retention: the tests write
    records stamped in 1970 and 2023, and Kafka's retention check (every 5 minutes) would
    delete them, active segment included, in the middle of a test."""
    b = KafkaBroker(tmp_path_factory.mktemp("kafka") / "data",
                    {"offsets.topic.num.partitions": "5", "transaction.state.log.num.partitions": "5",
                     "group.initial.rebalance.delay.ms": "300", "log.retention.ms": "-1"}, node_id=0).start()
    yield b
    b.kill()  # nothing is checked after: no controlled shutdown to wait for


@pytest.fixture(scope="module")
def group_broker(shared_broker: KafkaBroker) -> KafkaBroker:
    return shared_broker

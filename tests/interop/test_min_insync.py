"""min.insync.replicas on one broker, against the real broker process (seed requirement):
acks=all to a topic whose min.insync.replicas exceeds its ISR gets NOT_ENOUGH_REPLICAS and
nothing is written, as Kafka answers; acks=1 is not affected; a real client (librdkafka)
sees the refusal and never gets the records acknowledged. The internal topics' replication
settings above the one broker are capped, and the broker says so at start-up naming them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer

from support.harness import BrokerProcess
from support.rawkafka import LATEST, RawClient, create_topic, list_offset, produce_request, simple_batch

NONE, NOT_ENOUGH_REPLICAS = 0, 19


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(Path(tmp_path_factory.mktemp("min-isr")) / "data").start()
    yield b
    b.stop()


def produce_code(client: RawClient, topic: str, acks: int) -> int:
    resp = client.call(produce_request(topic, 0, simple_batch([b"v"]), acks=acks))
    return int(resp.responses[0].partition_responses[0].error_code)


def test_acks_all_above_the_isr_is_refused_and_nothing_is_written(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as c:
        assert create_topic(c, "two-isr", 1, {"min.insync.replicas": "2"}) == NONE
        assert create_topic(c, "one-isr", 1) == NONE
        assert produce_code(c, "two-isr", acks=-1) == NOT_ENOUGH_REPLICAS
        assert list_offset(c, "two-isr", 0, LATEST) == (NONE, 0)
        assert produce_code(c, "two-isr", acks=1) == NONE
        assert produce_code(c, "one-isr", acks=-1) == NONE
        assert list_offset(c, "two-isr", 0, LATEST) == (NONE, 1)


def test_librdkafka_producer_sees_not_enough_replicas(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as c:
        assert create_topic(c, "rd-two-isr", 1, {"min.insync.replicas": "2"}) == NONE
    errors: list[KafkaError] = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "message.timeout.ms": 3000,
                  "retry.backoff.ms": 100})
    p.produce("rd-two-isr", b"v", on_delivery=lambda err, _msg: errors.append(err))
    p.flush(15)
    assert len(errors) == 1 and errors[0] is not None
    # librdkafka retries the retriable error until message.timeout.ms; the last one is kept.
    assert errors[0].code() in (KafkaError.NOT_ENOUGH_REPLICAS, KafkaError._MSG_TIMED_OUT), errors[0]
    with RawClient(broker.bootstrap) as c:
        assert list_offset(c, "rd-two-isr", 0, LATEST) == (NONE, 0)


def test_a_default_single_node_does_not_warn_about_its_internal_topics(broker: BrokerProcess) -> None:
    """Without zookeeper.connect the internal topics' replication settings default to 1, as
    Kafka's single-node server.properties sets them: nothing for a newcomer to act on (set
    explicitly above one broker, they are still named: tests/unit/test_replica.py)."""
    text = broker.log_path.read_text()
    assert "exceed the 1 broker(s)" not in text, text  # a default start warns of nothing: test_config_rule

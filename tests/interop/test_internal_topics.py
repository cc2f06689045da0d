"""Clients cannot produce to the internal topics: a Produce to ``__consumer_offsets`` or
``__transaction_state`` is answered INVALID_TOPIC_EXCEPTION and nothing is appended, as Kafka's
ReplicaManager.appendToLocalLog refuses it (only the coordinators write there; Kafka lets the
client id ``__admin_client`` through, and so does eoslog). Raw frames, librdkafka and the eoslog
client each see the refusal; tests/conformance produce-fetch/internal-topic-produce compares the
answer with Apache Kafka's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer

from eoslog.client.errors import InvalidTopicError
from eoslog.client.producer import Producer as EoslogProducer
from eoslog.protocol.messages import build, request_types
from eoslog.records import build_batch
from support.harness import BrokerProcess, wait_until
from support.rawkafka import LATEST, RawClient, list_offset, produce_request

NONE, INVALID_TOPIC_EXCEPTION = 0, 17
INTERNAL = ("__consumer_offsets", "__transaction_state")
WAIT_S = 60.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(Path(tmp_path_factory.mktemp("internal")) / "data").start()
    with RawClient(b.bootstrap) as c:  # the first FindCoordinator of each kind creates its topic
        m = request_types(10, 3)
        for key_type in (0, 1):
            req = build(m.FindCoordinatorRequest, key="internal-topics", key_type=key_type)
            wait_until(lambda req=req: int(c.call(req).error_code) == NONE, f"a coordinator of key type {key_type}")
    yield b
    b.stop()


def keyed_batch() -> bytes:
    # Keyed, so that a compacted topic's own check (keyless records) cannot be what refuses it.
    return build_batch([(b"key", b"value", ())], timestamp=1_700_000_000_000)


def produce_code(c: RawClient, topic: str) -> int:
    resp = c.call(produce_request(topic, 0, keyed_batch(), acks=-1))
    return int(resp.responses[0].partition_responses[0].error_code)


@pytest.mark.parametrize("topic", INTERNAL)
def test_a_clients_produce_to_an_internal_topic_is_refused_and_nothing_is_written(
    broker: BrokerProcess, topic: str,
) -> None:
    with RawClient(broker.bootstrap) as c:
        before = list_offset(c, topic, 0, LATEST)
        assert produce_code(c, topic) == INVALID_TOPIC_EXCEPTION
        assert list_offset(c, topic, 0, LATEST) == before


def test_the_admin_client_id_may_write_an_internal_topic(broker: BrokerProcess) -> None:
    topic = "__consumer_offsets"
    with RawClient(broker.bootstrap, client_id="__admin_client") as c:
        _, end = list_offset(c, topic, 0, LATEST)
        assert produce_code(c, topic) == NONE
        assert list_offset(c, topic, 0, LATEST) == (NONE, end + 1)


def test_librdkafka_producer_gets_the_refusal(broker: BrokerProcess) -> None:
    errors: list[KafkaError | None] = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 30000})
    p.produce("__transaction_state", b"value", key=b"key", partition=0,
              on_delivery=lambda err, _msg: errors.append(err))
    assert p.flush(WAIT_S) == 0
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.TOPIC_EXCEPTION, errors[0]


def test_eoslog_producer_gets_the_refusal(broker: BrokerProcess) -> None:
    with EoslogProducer({"bootstrap.servers": broker.bootstrap}) as p:
        future = p.send("__consumer_offsets", b"value", key=b"key", partition=0)
        with pytest.raises(InvalidTopicError):
            future.result(WAIT_S)

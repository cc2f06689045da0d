"""Producer configuration: Kafka's defaults and the consistency rules of ProducerConfig /
KafkaProducer (explicit conflicts are errors, implicit idempotence gives way)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from eoslog.client.errors import ConfigException
from eoslog.client.producer.config import producer_config
from eoslog.records.compression import CompressionType

BOOT = {"bootstrap.servers": "127.0.0.1:9092"}


def make(**settings: Any) -> Any:
    return producer_config({**BOOT, **{k.replace("_", "."): v for k, v in settings.items()}})


def test_kafka_defaults() -> None:
    c = make()
    assert (c.acks, c.enable_idempotence, c.linger_ms, c.batch_size, c.buffer_memory) == (-1, True, 5, 16384, 33554432)
    assert (c.max_block_ms, c.max_request_size, c.retries, c.retry_backoff_ms) == (60000, 1048576, 2147483647, 100)
    assert (c.delivery_timeout_ms, c.request_timeout_ms, c.max_in_flight_requests_per_connection) == (120000, 30000, 5)
    assert (c.transactional_id, c.transaction_timeout_ms, c.compression_type) == (None, 60000, CompressionType.NONE)


def test_dotted_and_underscored_names_are_the_same_setting() -> None:
    a = producer_config(BOOT, linger_ms=7, compression_type="zstd")
    b = producer_config({**BOOT, "linger.ms": "7", "compression.type": "zstd"})
    assert a.linger_ms == b.linger_ms == 7
    assert a.compression_type == b.compression_type == CompressionType.ZSTD


@pytest.mark.parametrize(("settings", "message"), [
    ({"enable.idempotence": True, "acks": "1"}, "Must set acks to all"),
    ({"enable.idempotence": "true", "acks": 0}, "Must set acks to all"),
    ({"enable.idempotence": True, "retries": 0}, "Must set retries to non-zero"),
    ({"enable.idempotence": True, "max.in.flight.requests.per.connection": 6}, "at most 5"),
    ({"transactional.id": "t", "acks": 1}, "Cannot set a transactional.id without also enabling idempotence"),
    ({"transactional.id": "t", "enable.idempotence": False}, "Cannot set a transactional.id"),
    ({"transactional.id": ""}, "non-empty"),
    ({"delivery.timeout.ms": 1000, "linger.ms": 5, "request.timeout.ms": 30000}, "delivery.timeout.ms should be"),
    ({"acks": "2"}, "acks"),
    ({"compression.type": "brotli"}, "compression.type"),
    ({"linger.ms": -1}, "linger.ms"),
    ({"max.in.flight.requests.per.connection": 0}, "at least 1"),
    ({"batch.size": "many"}, "batch.size"),
    ({"lingr.ms": 5}, "unknown producer configuration 'lingr.ms'"),
])
def test_conflicting_or_invalid_settings_are_refused_at_construction(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigException, match=message):
        producer_config({**BOOT, **settings})


def test_bootstrap_servers_is_required() -> None:
    with pytest.raises(ConfigException, match=r"bootstrap\.servers"):
        producer_config({"linger.ms": 1})


@pytest.mark.parametrize(("settings", "level", "said"), [
    ({"acks": "1"}, logging.INFO, "Idempotence will be disabled because acks is set to 1, not set to 'all'."),
    ({"acks": 0}, logging.INFO, "Idempotence will be disabled because acks is set to 0, not set to 'all'."),
    ({"retries": 0}, logging.INFO, "Idempotence will be disabled because retries is set to 0."),
    ({"max.in.flight.requests.per.connection": 10}, logging.WARNING,
     "Idempotence will be disabled because max.in.flight.requests.per.connection is set to 10, "
     "which is greater than 5."),
])
def test_implicit_idempotence_gives_way_to_a_conflicting_setting_and_says_so(
        settings: dict[str, Any], level: int, said: str, caplog: pytest.LogCaptureFixture) -> None:
    # Kafka disables the default idempotence instead of failing when the user did not ask
    # for it, and logs why (INFO, WARN for max.in.flight) rather than staying silent.
    with caplog.at_level(logging.INFO, logger="eoslog.client.producer.config"):
        assert producer_config({**BOOT, **settings}).enable_idempotence is False
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [(level, said)]


def test_nothing_is_logged_when_idempotence_stays_or_was_turned_off_by_the_user(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="eoslog.client.producer.config"):
        producer_config(BOOT)
        producer_config({**BOOT, "enable.idempotence": False, "acks": 1})
    assert caplog.records == []


def test_transactional_id_with_default_idempotence() -> None:
    c = make(transactional_id="copier-1")
    assert c.enable_idempotence and c.transactional and c.acks == -1


def test_default_delivery_timeout_grows_to_linger_plus_request_timeout() -> None:
    c = producer_config({**BOOT, "linger.ms": 100000, "request.timeout.ms": 30000})
    assert c.delivery_timeout_ms == 130000


def test_explicit_delivery_timeout_equal_to_the_sum_is_accepted() -> None:
    c = producer_config({**BOOT, "linger.ms": 10, "request.timeout.ms": 1000, "delivery.timeout.ms": 1010})
    assert c.delivery_timeout_ms == 1010


def test_acks_all_spellings() -> None:
    assert make(acks="all").acks == make(acks=-1).acks == make(acks="-1").acks == -1


def test_two_phase_commit_needs_a_transactional_id_and_no_transaction_timeout() -> None:
    c = producer_config({**BOOT, "transactional.id": "t", "transaction.two.phase.commit.enable": "true"})
    assert c.transaction_two_phase_commit_enable and not make().transaction_two_phase_commit_enable
    with pytest.raises(ConfigException, match=r"transaction\.two\.phase\.commit\.enable.*transactional\.id"):
        producer_config({**BOOT, "transaction.two.phase.commit.enable": True})
    with pytest.raises(ConfigException, match=r"transaction\.timeout\.ms.*two\.phase"):
        producer_config({**BOOT, "transactional.id": "t", "transaction.two.phase.commit.enable": True,
                         "transaction.timeout.ms": 60000})

"""Consumer configuration: Kafka's names and defaults, the rules KafkaConsumer enforces at
construction, and clear errors for wrong values."""

from __future__ import annotations

import re
from typing import Any

import pytest

from eoslog.client.consumer.config import consumer_config
from eoslog.client.errors import ConfigException

BOOT = {"bootstrap.servers": "127.0.0.1:9092"}


def make(**settings: Any) -> Any:
    return consumer_config({**BOOT, **{k.replace("_", "."): v for k, v in settings.items()}})


def test_kafka_defaults() -> None:
    c = make(group_id="g")
    assert (c.isolation_level, c.auto_offset_reset, c.enable_auto_commit, c.auto_commit_interval_ms) == (
        "read_uncommitted", "latest", True, 5000)
    assert (c.fetch_min_bytes, c.fetch_max_wait_ms, c.fetch_max_bytes, c.max_partition_fetch_bytes) == (
        1, 500, 52428800, 1048576)
    assert (c.max_poll_records, c.session_timeout_ms, c.heartbeat_interval_ms, c.max_poll_interval_ms) == (
        500, 45000, 3000, 300000)
    assert c.partition_assignment_strategy == ("range", "cooperative-sticky")
    assert (c.check_crcs, c.group_instance_id, c.request_timeout_ms, c.default_api_timeout_ms) == (
        True, None, 30000, 60000)
    assert c.client_id.startswith("eoslog-consumer-g-")


def test_dotted_and_underscored_names_are_the_same_setting() -> None:
    a = consumer_config(BOOT, max_poll_records=7, isolation_level="READ_COMMITTED")
    b = consumer_config({**BOOT, "max.poll.records": "7", "isolation.level": "read_committed"})
    assert a.max_poll_records == b.max_poll_records == 7
    assert a.read_committed and b.read_committed and a.isolation_level_code == 1


def test_without_a_group_auto_commit_is_off() -> None:
    assert make().enable_auto_commit is False
    with pytest.raises(ConfigException, match=r"enable\.auto\.commit cannot be set to true"):
        make(enable_auto_commit=True)
    with pytest.raises(ConfigException, match=r"group\.instance\.id"):
        make(group_instance_id="i-1")


def test_assignor_names_and_java_class_names() -> None:
    c = make(group_id="g", partition_assignment_strategy=
             "org.apache.kafka.clients.consumer.RoundRobinAssignor, cooperative-sticky")
    assert c.partition_assignment_strategy == ("roundrobin", "cooperative-sticky")
    assert make(partition_assignment_strategy=["range"]).partition_assignment_strategy == ("range",)


@pytest.mark.parametrize(("settings", "message"), [
    ({"isolation.level": "read_dirty"}, "isolation.level: String must be one of: read_uncommitted, read_committed"),
    ({"auto.offset.reset": "smallest"}, "auto.offset.reset: String must be one of: latest, earliest, none"),
    ({"partition.assignment.strategy": "sticky"}, "unknown assignor"),
    ({"partition.assignment.strategy": ""}, "at least one assignor"),
    ({"max.poll.records": 0}, "max.poll.records: Value must be at least 1"),
    ({"fetch.max.wait.ms": -1}, "fetch.max.wait.ms: Value must be at least 0"),
    ({"session.timeout.ms": "soon"}, "session.timeout.ms: not an integer"),
    ({"check.crcs": "maybe"}, "check.crcs: Expected value to be either true or false"),
    ({"heartbeat.interval.ms": 10000, "session.timeout.ms": 6000}, "must be lower than session.timeout.ms"),
    ({"group.protocol": "modern"}, "group.protocol: String must be one of: classic, consumer"),
    # Java's ConsumerConfig: the consumer protocol leaves these to the broker; the assignor is the broker's.
    ({"group.protocol": "consumer", "session.timeout.ms": 10000}, "session.timeout.ms cannot be set when "
                                                                    "group.protocol=consumer"),
    ({"group.protocol": "consumer", "heartbeat.interval.ms": 1000}, "heartbeat.interval.ms cannot be set"),
    ({"group.protocol": "consumer", "partition.assignment.strategy": "range"},
     "partition.assignment.strategy cannot be set"),
    ({"group.remote.assignor": "uniform"}, "group.remote.assignor cannot be set when group.protocol=classic"),
    ({"group.instance.id": "", "group.id": "g"}, "non-empty"),
    ({"value.deserializer": "utf-8"}, "value.deserializer must be callable"),
    ({"fetch.max.wait": 100}, "unknown consumer configuration 'fetch.max.wait'"),
])
def test_invalid_settings_are_refused_with_a_clear_error(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigException, match=re.escape(message)):
        consumer_config({**BOOT, **settings})


def test_the_consumer_protocol_with_a_remote_assignor() -> None:
    c = make(group_id="g", group_protocol="CONSUMER", group_remote_assignor="range")
    assert (c.group_protocol, c.group_remote_assignor) == ("consumer", "range")


def test_bootstrap_servers_are_required() -> None:
    with pytest.raises(ConfigException, match=r"bootstrap\.servers"):
        consumer_config({"group.id": "g"})

"""Consumer configuration: Kafka's names and defaults, validated when the consumer is built.

What it owns: parsing the settings (a dict with Kafka's dotted names, or keyword arguments
with underscores: ``max_poll_records=10`` is ``max.poll.records``), their defaults (Kafka
3.x/4.x's ConsumerConfig), and the rules Kafka enforces at construction:

- without ``group.id``, ``enable.auto.commit`` defaults to false and setting it true is an
  error (``KafkaConsumer``: "enable.auto.commit cannot be set to true when default group id
  (null) is used"); ``group.instance.id`` needs a ``group.id`` too;
- ``heartbeat.interval.ms`` < ``session.timeout.ms``;
- ``isolation.level`` is read_uncommitted (default) or read_committed,
  ``auto.offset.reset`` is latest (default), earliest or none;
- ``partition.assignment.strategy`` names known assignors: ``range``, ``roundrobin``,
  ``cooperative-sticky`` (or Java's class names of them); Java's default is
  ``[RangeAssignor, CooperativeStickyAssignor]``.

What it must never do: hold runtime state. Unknown names are refused, as the producer's
configuration does, so that a typo does not silently leave a default in place.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from eoslog.client.errors import ConfigException
from eoslog.client.security import ClientSecurity
from eoslog.client.settings import collect, invalid, kafka_name, parse_bool, parse_int, split_security

_client_ids = itertools.count(1)

Deserializer = Callable[[bytes | None], Any]

GROUP_PROTOCOLS = ("classic", "consumer")
# Settings of the classic protocol that the consumer protocol leaves to the broker (Java's
# ConsumerConfig refuses them with group.protocol=consumer).
_CLASSIC_ONLY = ("session_timeout_ms", "heartbeat_interval_ms", "partition_assignment_strategy")
READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"
ISOLATION_LEVELS = {READ_UNCOMMITTED: 0, READ_COMMITTED: 1}
OFFSET_RESET_POLICIES = ("latest", "earliest", "none")

# Java's assignor class names → eoslog's (and librdkafka's) names.
ASSIGNOR_ALIASES = {
    "range": "range",
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "roundrobin": "roundrobin",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "cooperative-sticky": "cooperative-sticky",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}


@dataclass(frozen=True)
class ConsumerConfig:
    bootstrap_servers: str
    group_id: str | None = None
    client_id: str = ""
    group_instance_id: str | None = None
    group_protocol: str = "classic"
    group_remote_assignor: str | None = None
    isolation_level: str = READ_UNCOMMITTED
    auto_offset_reset: str = "latest"
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5000
    fetch_min_bytes: int = 1
    fetch_max_wait_ms: int = 500
    fetch_max_bytes: int = 52428800
    max_partition_fetch_bytes: int = 1048576
    max_poll_records: int = 500
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 3000
    max_poll_interval_ms: int = 300000
    partition_assignment_strategy: tuple[str, ...] = ("range", "cooperative-sticky")
    check_crcs: bool = True
    request_timeout_ms: int = 30000
    default_api_timeout_ms: int = 60000
    retry_backoff_ms: int = 100
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1000
    metadata_max_age_ms: int = 300000
    socket_connection_setup_timeout_ms: int = 10000
    allow_auto_create_topics: bool = True
    exclude_internal_topics: bool = True
    client_rack: str = ""
    key_deserializer: Deserializer | None = field(default=None, compare=False)
    value_deserializer: Deserializer | None = field(default=None, compare=False)
    security: ClientSecurity = field(default_factory=ClientSecurity, compare=False)

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == READ_COMMITTED

    @property
    def isolation_level_code(self) -> int:
        return ISOLATION_LEVELS[self.isolation_level]


_FIELDS = {f.name: f for f in fields(ConsumerConfig) if f.name != "security"}
_INT_NAMES = {n for n, f in _FIELDS.items() if f.type == "int"}
_BOOL_NAMES = {n for n, f in _FIELDS.items() if f.type == "bool"}
# Smallest value each integer setting takes (Kafka's ConfigDef ranges).
_AT_LEAST = {
    "auto_commit_interval_ms": 0, "fetch_min_bytes": 0, "fetch_max_wait_ms": 0, "fetch_max_bytes": 0,
    "max_partition_fetch_bytes": 0, "max_poll_records": 1, "session_timeout_ms": 1, "heartbeat_interval_ms": 1,
    "max_poll_interval_ms": 1, "request_timeout_ms": 0, "default_api_timeout_ms": 0, "retry_backoff_ms": 0,
    "reconnect_backoff_ms": 0, "reconnect_backoff_max_ms": 0, "metadata_max_age_ms": 0,
    "socket_connection_setup_timeout_ms": 1,
}


def _parse_choice(name: str, value: Any, choices: tuple[str, ...] | Mapping[str, int]) -> str:
    text = str(value).strip().lower()
    if text not in choices:
        raise invalid(name, value, f"String must be one of: {', '.join(choices)}")
    return text


def _parse_assignors(value: Any) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else list(value)
    names = []
    for item in items:
        text = str(item).strip()
        if not text:
            continue
        name = ASSIGNOR_ALIASES.get(text) or ASSIGNOR_ALIASES.get(text.lower())
        if name is None:
            raise invalid("partition_assignment_strategy", item,
                           f"unknown assignor; eoslog has {', '.join(sorted(set(ASSIGNOR_ALIASES.values())))}")
        if name not in names:
            names.append(name)
    if not names:
        raise invalid("partition_assignment_strategy", value, "at least one assignor is needed")
    return tuple(names)


def consumer_config(settings: Mapping[str, Any] | None = None, **kwargs: Any) -> ConsumerConfig:
    """Validate settings (Kafka's dotted names in ``settings``, or underscores in ``kwargs``)."""
    raw = collect(settings, kwargs, _FIELDS, "consumer")
    security = split_security(raw)
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if value is None and _FIELDS[key].default is None:
            values[key] = None
        elif key == "isolation_level":
            values[key] = _parse_choice(key, value, ISOLATION_LEVELS)
        elif key == "auto_offset_reset":
            values[key] = _parse_choice(key, value, OFFSET_RESET_POLICIES)
        elif key == "group_protocol":
            values[key] = _parse_choice(key, value, GROUP_PROTOCOLS)
        elif key == "partition_assignment_strategy":
            values[key] = _parse_assignors(value)
        elif key in _BOOL_NAMES:
            values[key] = parse_bool(key, value)
        elif key in _INT_NAMES:
            values[key] = parse_int(key, value, _AT_LEAST.get(key))
        else:
            values[key] = value
    for key in ("group_id", "group_instance_id"):
        if values.get(key) is not None and not isinstance(values[key], str):
            raise invalid(key, values[key], "must be a string")
    if values.get("group_instance_id") == "":
        raise invalid("group_instance_id", "", "String must be non-empty")
    group_id = values.get("group_id")
    if group_id is None:
        if values.get("enable_auto_commit") is True:
            raise ConfigException("enable.auto.commit cannot be set to true when default group id (null) is used.")
        values["enable_auto_commit"] = False
        if values.get("group_instance_id") is not None:
            raise ConfigException("group.instance.id cannot be set without a group.id")
    if values.get("group_protocol") == "consumer":
        for key in _CLASSIC_ONLY:
            if key in raw:
                raise ConfigException(f"{kafka_name(key)} cannot be set when group.protocol=consumer")
    elif values.get("group_remote_assignor") is not None:
        raise ConfigException("group.remote.assignor cannot be set when group.protocol=classic")
    session = values.get("session_timeout_ms", _FIELDS["session_timeout_ms"].default)
    heartbeat = values.get("heartbeat_interval_ms", _FIELDS["heartbeat_interval_ms"].default)
    if heartbeat >= session:
        raise ConfigException(f"heartbeat.interval.ms ({heartbeat}) must be lower than session.timeout.ms "
                              f"({session})")
    for key in ("key_deserializer", "value_deserializer"):
        if values.get(key) is not None and not callable(values[key]):
            raise ConfigException(f"{kafka_name(key)} must be callable")
    if not values.get("client_id"):
        values["client_id"] = f"eoslog-consumer-{group_id + '-' if group_id else ''}{next(_client_ids)}"
    return ConsumerConfig(**values, security=security)

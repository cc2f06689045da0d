"""Producer configuration: Kafka's names and defaults, validated as Kafka's ProducerConfig does.

What it owns: parsing the settings (a dict with Kafka's dotted names, or keyword arguments
with underscores: ``linger_ms=5`` is ``linger.ms``), their defaults, and the consistency
rules Kafka enforces when a producer is constructed:

- ``enable.idempotence`` (default true, as in Kafka ≥ 3.0) needs ``acks=all``,
  ``retries > 0`` and ``max.in.flight.requests.per.connection`` ≤ 5. When the user set
  idempotence explicitly, a conflicting setting is a ConfigException; when idempotence is
  only the default, the conflicting setting wins and idempotence is switched off
  (``ProducerConfig.postProcessAndValidateIdempotenceConfigs``).
- a ``transactional.id`` needs idempotence (and is never the empty string).
- ``transaction.two.phase.commit.enable`` (KIP-939) needs a ``transactional.id``, and
  ``transaction.timeout.ms`` must then not be set: such transactions never time out.
- ``delivery.timeout.ms`` ≥ ``linger.ms`` + ``request.timeout.ms``: an explicit smaller value
  is a ConfigException, the default is raised to that sum (``KafkaProducer.configureDeliveryTimeout``).

What it must never do: hold runtime state. Unknown setting names are refused (Kafka only
logs them), so that a typo does not silently leave a default in place.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from eoslog.client.errors import ConfigException
from eoslog.client.security import ClientSecurity
from eoslog.client.settings import collect, parse_bool, parse_int, split_security
from eoslog.records.compression import CompressionType

MAX_IN_FLIGHT_FOR_IDEMPOTENCE = 5
log = logging.getLogger(__name__)
_client_ids = itertools.count(1)

Serializer = Callable[[Any], bytes | None]


@dataclass(frozen=True)
class ProducerConfig:
    bootstrap_servers: str
    client_id: str = ""
    acks: int = -1
    enable_idempotence: bool = True
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60000
    transaction_two_phase_commit_enable: bool = False
    linger_ms: int = 5
    batch_size: int = 16384
    buffer_memory: int = 33554432
    max_block_ms: int = 60000
    max_request_size: int = 1048576
    retries: int = 2147483647
    retry_backoff_ms: int = 100
    delivery_timeout_ms: int = 120000
    request_timeout_ms: int = 30000
    max_in_flight_requests_per_connection: int = 5
    compression_type: CompressionType = CompressionType.NONE
    metadata_max_age_ms: int = 300000
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1000
    socket_connection_setup_timeout_ms: int = 10000
    partitioner_ignore_keys: bool = False
    key_serializer: Serializer | None = field(default=None, compare=False)
    value_serializer: Serializer | None = field(default=None, compare=False)
    security: ClientSecurity = field(default_factory=ClientSecurity, compare=False)
    # The names the user set (Kafka's "originals"): decides between error and override.
    explicit: frozenset[str] = field(default=frozenset(), compare=False)

    @property
    def transactional(self) -> bool:
        return self.transactional_id is not None


_FIELDS = {f.name: f for f in fields(ProducerConfig) if f.name not in ("explicit", "security")}
_INT_NAMES = {n for n, f in _FIELDS.items() if f.type == "int"}
_BOOL_NAMES = {n for n, f in _FIELDS.items() if f.type == "bool"}
_NON_NEGATIVE = {
    "linger_ms", "batch_size", "buffer_memory", "max_block_ms", "max_request_size", "retries",
    "retry_backoff_ms", "delivery_timeout_ms", "request_timeout_ms", "metadata_max_age_ms",
    "reconnect_backoff_ms", "reconnect_backoff_max_ms",
}
_POSITIVE = {"max_in_flight_requests_per_connection", "transaction_timeout_ms",
             "socket_connection_setup_timeout_ms"}


def _parse_acks(value: Any) -> int:
    text = str(value).strip().lower()
    if text == "all":
        return -1
    if text in ("-1", "0", "1"):
        return int(text)
    raise ConfigException(f"Invalid value {value!r} for configuration acks: String must be one of: all, -1, 0, 1")


def _parse_int(name: str, value: Any) -> int:
    return parse_int(name, value, 0 if name in _NON_NEGATIVE else 1 if name in _POSITIVE else None)


def _parse_compression(value: Any) -> CompressionType:
    if isinstance(value, CompressionType):
        return value
    try:
        return CompressionType.from_name(str(value or "none"))
    except ValueError as e:
        raise ConfigException(f"Invalid value {value!r} for configuration compression.type: {e}") from None


def producer_config(settings: Mapping[str, Any] | None = None, **kwargs: Any) -> ProducerConfig:
    """Validate settings (Kafka's dotted names in ``settings``, or underscores in ``kwargs``)."""
    raw = collect(settings, kwargs, _FIELDS, "producer")
    security = split_security(raw)
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "acks":
            values[key] = _parse_acks(value)
        elif key == "compression_type":
            values[key] = _parse_compression(value)
        elif key in _BOOL_NAMES:
            values[key] = parse_bool(key, value)
        elif key in _INT_NAMES:
            values[key] = _parse_int(key, value)
        else:
            values[key] = value
    if "transactional_id" in values and values["transactional_id"] is not None:
        txn_id = values["transactional_id"]
        if not isinstance(txn_id, str) or not txn_id:
            raise ConfigException("Invalid value for configuration transactional.id: String must be non-empty")
    explicit = frozenset(k for k in raw if raw[k] is not None)
    values.setdefault("client_id", f"eoslog-producer-{next(_client_ids)}")
    config = ProducerConfig(**values, explicit=explicit, security=security)
    return _validate(config)


def _validate(c: ProducerConfig) -> ProducerConfig:
    explicit = c.explicit
    idempotence = c.enable_idempotence
    user_idempotence = "enable_idempotence" in explicit
    disable = False
    # Kafka's ProducerConfig: a conflict with an explicit enable.idempotence=true is an error;
    # with the default, idempotence gives way and the producer says so in its log.
    if idempotence:
        if c.retries == 0:
            if user_idempotence:
                raise ConfigException("Must set retries to non-zero when using the idempotent producer.")
            log.info("Idempotence will be disabled because retries is set to 0.")
            disable = True
        if c.acks != -1:
            if user_idempotence:
                raise ConfigException("Must set acks to all in order to use the idempotent producer. "
                                      "Otherwise we cannot guarantee idempotence.")
            log.info("Idempotence will be disabled because acks is set to %s, not set to 'all'.", c.acks)
            disable = True
        if c.max_in_flight_requests_per_connection > MAX_IN_FLIGHT_FOR_IDEMPOTENCE:
            if user_idempotence:
                raise ConfigException("Must set max.in.flight.requests.per.connection to at most 5 to use the "
                                      "idempotent producer.")
            log.warning("Idempotence will be disabled because max.in.flight.requests.per.connection is set to %d, "
                        "which is greater than 5.", c.max_in_flight_requests_per_connection)
            disable = True
    if disable:
        idempotence = False
    if c.transactional_id is not None and not idempotence:
        raise ConfigException("Cannot set a transactional.id without also enabling idempotence.")
    if c.transaction_two_phase_commit_enable:
        if c.transactional_id is None:
            raise ConfigException("Cannot set transaction.two.phase.commit.enable to true without a "
                                  "transactional.id.")
        if "transaction_timeout_ms" in explicit:
            raise ConfigException("Cannot set transaction.timeout.ms when transaction.two.phase.commit.enable "
                                  "is set to true. Transactions will not expire with two-phase commit enabled.")
    delivery = c.delivery_timeout_ms
    floor = min(c.linger_ms + c.request_timeout_ms, 2**31 - 1)
    if delivery < floor:
        if "delivery_timeout_ms" in explicit:
            raise ConfigException("delivery.timeout.ms should be equal to or larger than linger.ms + "
                                  "request.timeout.ms")
        delivery = floor
    if c.key_serializer is not None and not callable(c.key_serializer):
        raise ConfigException("key.serializer must be callable")
    if c.value_serializer is not None and not callable(c.value_serializer):
        raise ConfigException("value.serializer must be callable")
    return ProducerConfig(**{
        **{f: getattr(c, f) for f in _FIELDS},
        "enable_idempotence": idempotence,
        "delivery_timeout_ms": delivery,
        "explicit": explicit,
        "security": c.security,
    })

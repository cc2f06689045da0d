"""The share consumer's configuration: Kafka's names and defaults (Java's ShareConsumerConfig,
librdkafka's share consumer), validated when the consumer is built.

``group.id`` is required (a share consumer is always a member of a share group);
``share.acknowledgement.mode`` is ``implicit`` (default: the records of a poll are accepted by the
next poll or commit) or ``explicit`` (each record is acknowledged by the application, with
ACCEPT, RELEASE or REJECT, before the next poll) or, eoslog's extension, ``transactional``
(records are ACCEPTed only inside a producer's transaction; docs/consumer.md). Unknown names are
refused, as the other clients' configurations do.
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
IMPLICIT, EXPLICIT, TRANSACTIONAL = "implicit", "explicit", "transactional"


@dataclass(frozen=True)
class ShareConsumerConfig:
    bootstrap_servers: str
    group_id: str = ""
    client_id: str = ""
    share_acknowledgement_mode: str = IMPLICIT
    max_poll_records: int = 500
    fetch_min_bytes: int = 1
    fetch_max_wait_ms: int = 500
    fetch_max_bytes: int = 52428800
    request_timeout_ms: int = 30000
    default_api_timeout_ms: int = 60000
    retry_backoff_ms: int = 100
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1000
    metadata_max_age_ms: int = 300000
    socket_connection_setup_timeout_ms: int = 10000
    check_crcs: bool = True
    client_rack: str = ""
    key_deserializer: Deserializer | None = field(default=None, compare=False)
    value_deserializer: Deserializer | None = field(default=None, compare=False)
    security: ClientSecurity = field(default_factory=ClientSecurity, compare=False)

    @property
    def explicit(self) -> bool:
        """The application acknowledges each record (explicit, and eoslog's transactional)."""
        return self.share_acknowledgement_mode in (EXPLICIT, TRANSACTIONAL)

    @property
    def transactional(self) -> bool:
        return self.share_acknowledgement_mode == TRANSACTIONAL


_FIELDS = {f.name: f for f in fields(ShareConsumerConfig) if f.name != "security"}
_INT_NAMES = {n for n, f in _FIELDS.items() if f.type == "int"}
_BOOL_NAMES = {n for n, f in _FIELDS.items() if f.type == "bool"}
_AT_LEAST = {"max_poll_records": 1, "fetch_min_bytes": 0, "fetch_max_wait_ms": 0, "fetch_max_bytes": 0,
             "request_timeout_ms": 0, "default_api_timeout_ms": 0, "retry_backoff_ms": 0,
             "reconnect_backoff_ms": 0, "reconnect_backoff_max_ms": 0, "metadata_max_age_ms": 0,
             "socket_connection_setup_timeout_ms": 1}


def share_consumer_config(settings: Mapping[str, Any] | None = None, **kwargs: Any) -> ShareConsumerConfig:
    """Validate settings (Kafka's dotted names in ``settings``, or underscores in ``kwargs``)."""
    raw = collect(settings, kwargs, _FIELDS, "share consumer")
    security = split_security(raw)
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "share_acknowledgement_mode":
            text = str(value).strip().lower()
            if text not in (IMPLICIT, EXPLICIT, TRANSACTIONAL):
                raise invalid(key, value, "String must be one of: implicit, explicit, transactional (eoslog's)")
            values[key] = text
        elif key in _BOOL_NAMES:
            values[key] = parse_bool(key, value)
        elif key in _INT_NAMES:
            values[key] = parse_int(key, value, _AT_LEAST.get(key))
        else:
            values[key] = value
    group_id = values.get("group_id")
    if not isinstance(group_id, str) or not group_id:
        raise ConfigException("group.id must be set for a share consumer (it is a member of that share group)")
    for key in ("key_deserializer", "value_deserializer"):
        if values.get(key) is not None and not callable(values[key]):
            raise ConfigException(f"{kafka_name(key)} must be callable")
    if not values.get("client_id"):
        values["client_id"] = f"eoslog-share-consumer-{group_id}-{next(_client_ids)}"
    return ShareConsumerConfig(**values, security=security)

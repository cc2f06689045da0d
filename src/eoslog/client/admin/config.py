"""Admin client configuration: Kafka's AdminClientConfig names and defaults.

Settings come as a dict with Kafka's dotted names or as keyword arguments with
underscores (``default_api_timeout_ms=5000``). Unknown names are refused, as the
producer refuses them, so a typo never silently leaves a default in place.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from eoslog.client.errors import ConfigException
from eoslog.client.security import SECURITY_SETTINGS, ClientSecurity
from eoslog.client.settings import split_security

_client_ids = itertools.count(1)


@dataclass(frozen=True)
class AdminConfig:
    bootstrap_servers: str
    client_id: str = ""
    # One request's deadline; a call retries within default.api.timeout.ms (or its own timeout_ms).
    request_timeout_ms: int = 30000
    default_api_timeout_ms: int = 60000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1000
    metadata_max_age_ms: int = 300000
    socket_connection_setup_timeout_ms: int = 10000
    security: ClientSecurity = field(default_factory=ClientSecurity, compare=False)


_INT_FIELDS = frozenset(f.name for f in fields(AdminConfig) if f.type == "int")
_FIELDS = frozenset(f.name for f in fields(AdminConfig) if f.name != "security") | SECURITY_SETTINGS


def admin_config(settings: Mapping[str, Any] | None = None, **kwargs: Any) -> AdminConfig:
    values: dict[str, Any] = {}
    for name, value in [*(settings or {}).items(), *kwargs.items()]:
        key = name.replace(".", "_")
        if key not in _FIELDS:
            raise ConfigException(f"unknown admin client configuration {name!r}")
        if key in _INT_FIELDS:
            if isinstance(value, bool) or not str(value).strip().lstrip("-").isdigit():
                raise ConfigException(f"Invalid value {value!r} for configuration {name}: not an integer")
            value = int(value)
            if value < 0:
                raise ConfigException(f"Invalid value {value} for configuration {name}: Value must be at least 0")
        elif key == "bootstrap_servers" and isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        values[key] = value
    if not values.get("bootstrap_servers"):
        raise ConfigException("Missing required configuration bootstrap.servers which has no default value.")
    values.setdefault("client_id", f"eoslog-admin-{next(_client_ids)}")
    security = split_security(values)  # before the rest are used: it takes its settings out
    return AdminConfig(**values, security=security)

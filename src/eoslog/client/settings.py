"""Reading client settings, shared by the producer's and the consumer's configuration.

What it owns: taking settings as a dict with Kafka's dotted names or as keyword arguments
with underscores (``linger_ms=5`` is ``linger.ms``), refusing unknown names (Kafka only
logs them; a typo would silently leave a default in place), requiring
``bootstrap.servers``, and parsing booleans and integers with Kafka's ConfigDef error
messages. What it must never do: know any client's settings or their rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from eoslog.client.errors import ConfigException
from eoslog.client.security import SECURITY_SETTINGS, ClientSecurity, client_security


def kafka_name(name: str) -> str:
    return name.replace("_", ".")


def invalid(name: str, value: Any, why: str) -> ConfigException:
    return ConfigException(f"Invalid value {value!r} for configuration {kafka_name(name)}: {why}")


def collect(settings: Mapping[str, Any] | None, kwargs: Mapping[str, Any], known: Iterable[str],
            client: str) -> dict[str, Any]:
    """The settings by underscored name; ``bootstrap.servers`` required (a list is joined)."""
    names = frozenset(known) | SECURITY_SETTINGS
    raw: dict[str, Any] = {}
    for name, value in [*(settings or {}).items(), *kwargs.items()]:
        key = name.replace(".", "_")
        if key not in names:
            raise ConfigException(f"unknown {client} configuration {name!r}")
        raw[key] = value
    servers = raw.get("bootstrap_servers")
    if not servers:
        raise ConfigException("Missing required configuration bootstrap.servers which has no default value.")
    if isinstance(servers, (list, tuple)):
        raw["bootstrap_servers"] = ",".join(str(s) for s in servers)
    return raw


def split_security(raw: dict[str, Any]) -> ClientSecurity:
    """Take the security settings (security.protocol, ssl.*, sasl.*) out of ``raw``."""
    return client_security({k: raw.pop(k) for k in list(raw) if k in SECURITY_SETTINGS})


def parse_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise invalid(name, value, "Expected value to be either true or false")
    return text == "true"


def parse_int(name: str, value: Any, at_least: int | None = None) -> int:
    if isinstance(value, bool):
        raise invalid(name, value, "not an integer")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise invalid(name, value, "not an integer") from None
    if at_least is not None and number < at_least:
        raise invalid(name, number, f"Value must be at least {at_least}")
    return number


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    """``"host:port[,host:port]"`` (IPv6 as ``[::1]:9092``) → [(host, port), ...]."""
    out: list[tuple[str, int]] = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"bootstrap server {item!r} is not HOST:PORT")
        out.append((host, int(port)))
    if not out:
        raise ValueError(f"no bootstrap server in {servers!r}")
    return out

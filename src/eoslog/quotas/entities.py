"""Client quota entities and their configs (KIP-546), as Kafka's ZooKeeper era stored and
described them (AdminZkClient / ZkAdminManager).

An entity is a user, a client id, or a (user, client id) pair; each name may be the default
(None). Its quotas are ``producer_byte_rate`` and ``consumer_byte_rate`` (bytes/s, whole
numbers), ``request_percentage`` (percent of one request-handling thread) and
``controller_mutation_rate`` (partitions created or deleted per second). Each entity is kept
under its Kafka path — ``users/<user>``, ``users/<user>/clients/<client-id>``,
``clients/<client-id>``, names URL-encoded, ``<default>`` for the default — in ZooKeeper's
``/config`` in a cluster and in the data directory's dynamic configs on one node.

IP entities (``connection_creation_rate``) are refused: eoslog does not limit connections.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import quote, unquote

from eoslog.errors import Errors, KafkaError

USER, CLIENT_ID, IP = "user", "client-id", "ip"
DEFAULT = "<default>"  # ZooKeeperInternals.DEFAULT_STRING

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
# DynamicConfig.User/Client's quota keys: True for LONG (a whole number), False for DOUBLE.
QUOTA_KEYS: dict[str, bool] = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True,
                               REQUEST_PERCENTAGE: False, CONTROLLER_MUTATION_RATE: False}

MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: a name as a znode name (URL-encoded, as Java's URLEncoder
    with %2A for * and %20 for a space)."""
    return quote(name, safe="").replace("~", "%7E")


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """A user and/or client id; ``has_user`` False means no user part (not the default user)."""

    user: str | None = None
    client_id: str | None = None
    has_user: bool = False
    has_client_id: bool = False

    @property
    def path(self) -> str:
        """Kafka's entity path: users/U, users/U/clients/C or clients/C."""
        def name(n: str | None) -> str:
            return DEFAULT if n is None else sanitize(n)

        if self.has_user and self.has_client_id:
            return f"users/{name(self.user)}/clients/{name(self.client_id)}"
        if self.has_user:
            return f"users/{name(self.user)}"
        return f"clients/{name(self.client_id)}"

    def parts(self) -> list[tuple[str, str | None]]:
        """(entity type, name or None for the default), as the wire carries them."""
        out: list[tuple[str, str | None]] = []
        if self.has_user:
            out.append((USER, self.user))
        if self.has_client_id:
            out.append((CLIENT_ID, self.client_id))
        return out

    @classmethod
    def from_path(cls, path: str) -> QuotaEntity:
        def name(n: str) -> str | None:
            return None if n == DEFAULT else unquote(n)

        p = path.split("/")
        if len(p) == 4 and p[0] == "users" and p[2] == "clients":
            return cls(name(p[1]), name(p[3]), True, True)
        if len(p) == 2 and p[0] == "users":
            return cls(name(p[1]), None, True, False)
        if len(p) == 2 and p[0] == "clients":
            return cls(None, name(p[1]), False, True)
        raise ValueError(f"not a quota entity path: {path!r}")

    @classmethod
    def of(cls, parts: Iterable[tuple[str, str | None]]) -> QuotaEntity:
        """From the wire's (entity type, name) pairs, with Kafka's checks (KafkaError
        INVALID_REQUEST, or UNSUPPORTED_VERSION for an unknown type)."""
        user: str | None = None
        client: str | None = None
        has_user = has_client = False
        seen: set[str] = set()
        for kind, name in parts:
            if kind in seen:
                raise KafkaError(Errors.INVALID_REQUEST, f"Duplicate {kind} entity type")
            seen.add(kind)
            if name is not None and not name:
                raise KafkaError(Errors.INVALID_REQUEST, f"Empty {kind} not supported")
            if kind == USER:
                user, has_user = name, True
            elif kind == CLIENT_ID:
                client, has_client = name, True
            elif kind == IP:
                raise KafkaError(Errors.INVALID_REQUEST, "IP quotas (connection_creation_rate) are not supported")
            else:
                raise KafkaError(Errors.UNSUPPORTED_VERSION, f"Custom entity type '{kind}' not supported")
        if not seen:
            raise KafkaError(Errors.INVALID_REQUEST, "Invalid empty client quota entity")
        return cls(user, client, has_user, has_client)


def altered(current: Mapping[str, float], ops: Iterable[tuple[str, float | None]]) -> dict[str, float]:
    """ZkAdminManager.alterEntityQuotas: each op sets a key (or, value None, removes it); an
    unknown key or a fraction for a LONG key is INVALID_REQUEST."""
    out = dict(current)
    for key, value in ops:
        if value is None:
            out.pop(key, None)
            continue
        whole = QUOTA_KEYS.get(key)
        if whole is None:
            raise KafkaError(Errors.INVALID_REQUEST, f"Invalid configuration key {key}")
        if whole:
            if not math.isfinite(value) or abs(math.floor(value + 1e-6) - value) > 1e-6:
                raise KafkaError(Errors.INVALID_REQUEST, f"Configuration {key} must be a LONG value")
            value = float(math.floor(value + 1e-6))
        out[key] = float(value)
    return out


def encode_values(values: Mapping[str, float]) -> dict[str, str]:
    """As Kafka writes them: whole numbers for LONG keys, Java's double text for the others."""
    return {k: str(int(v)) if QUOTA_KEYS.get(k) else repr(float(v)) for k, v in sorted(values.items())}


def decode_values(config: Mapping[str, str]) -> dict[str, float]:
    """The quota keys of an entity's configs (a user's SCRAM credentials are left out)."""
    out = {}
    for k, v in config.items():
        if k in QUOTA_KEYS:
            try:
                out[k] = float(v)
            except ValueError:
                continue
    return out


@dataclass(frozen=True, slots=True)
class Component:
    """One DescribeClientQuotas filter component: an entity type and how its name must match."""

    entity_type: str
    match_type: int
    match: str | None = None


def describe(quotas: Mapping[QuotaEntity, Mapping[str, float]], components: Iterable[Component],
             strict: bool) -> dict[QuotaEntity, dict[str, float]]:
    """ZkAdminManager.describeClientQuotas: the entities (with quotas) the filter matches; a
    non-strict filter also matches entities with more parts than it names."""
    by_type: dict[str, Component] = {}
    for c in components:
        if c.entity_type == "":
            raise KafkaError(Errors.INVALID_REQUEST, "Unexpected empty filter component entity type")
        if c.entity_type not in (USER, CLIENT_ID, IP):
            raise KafkaError(Errors.UNSUPPORTED_VERSION, f"Custom entity type '{c.entity_type}' not supported")
        if c.entity_type in by_type:
            raise KafkaError(Errors.INVALID_REQUEST, f"Duplicate {c.entity_type} filter component entity type")
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            raise KafkaError(Errors.INVALID_REQUEST, f"Unexpected match type {c.match_type}")
        by_type[c.entity_type] = c
    if IP in by_type:
        if len(by_type) > 1:
            raise KafkaError(Errors.INVALID_REQUEST, "Invalid entity filter component combination, IP filter "
                             "component should not be used with user or clientId filter component.")
        return {}  # no IP quota is ever stored

    def matches(kind: str, present: bool, name: str | None) -> bool:
        c = by_type.get(kind)
        if c is None:
            return not present or not strict
        if not present:
            return False
        if c.match_type == MATCH_EXACT:
            return name == c.match
        if c.match_type == MATCH_DEFAULT:
            return name is None
        return True

    return {e: dict(v) for e, v in quotas.items()
            if v and matches(USER, e.has_user, e.user) and matches(CLIENT_ID, e.has_client_id, e.client_id)}


def resolve(quotas: Mapping[QuotaEntity, Mapping[str, float]], key: str, user: str, client_id: str
            ) -> tuple[tuple[str, str], float | None]:
    """Kafka's DefaultQuotaCallback for one quota type: the ``key`` quota that applies to a
    request of ``user`` (the principal's name) with ``client_id``, in Kafka's order of
    precedence, and its metric tags — (user or "", client id or ""), the user and client id
    themselves even when a default matched — which name the rate that all requests with the same
    tags share (so a default quota applies to each user, or client id, on its own). ((user,
    client id), None) when no quota applies."""
    order = [QuotaEntity(user, client_id, True, True), QuotaEntity(user, None, True, True),
             QuotaEntity(user, None, True, False), QuotaEntity(None, client_id, True, True),
             QuotaEntity(None, None, True, True), QuotaEntity(None, None, True, False),
             QuotaEntity(None, client_id, False, True), QuotaEntity(None, None, False, True)]
    for e in order:
        bound = quotas.get(e, {}).get(key)
        if bound is not None:
            return (user if e.has_user else "", client_id if e.has_client_id else ""), bound
    return (user, client_id), None

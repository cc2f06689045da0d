"""SCRAM credentials and ACLs as Kafka's ZooKeeper era wrote them into znodes (its
ScramCredentialUtils text, AclEntry's JSON, the resource types' names), so a cluster's
ZooKeeper reads as Kafka's did (docs/security.md, "Cluster mode"). Pure encoding: where the
znodes are and how brokers learn of changes is ``cluster/security_store.py``.

- a user's config: ``{"version":1,"config":{"SCRAM-SHA-512":"salt=..,stored_key=..,
  server_key=..,iterations=N"}}`` (salted keys only);
- a resource's ACLs: ``{"version":1,"acls":[{"principal","permissionType","operation","host"}]}``
  under ``<ResourceType>/<name>``, announced as ``Type:PATTERN:name``.
"""

from __future__ import annotations

import json
from typing import TypeVar

from eoslog.protocol.scram import Mechanism
from eoslog.security.acls import AclBinding, AclOperation, PatternType, PermissionType, ResourceType
from eoslog.security.scram import ScramCredential

# Kafka's names in the znodes: "Topic", "TransactionalId", "Allow", "IdempotentWrite"...
_CAMEL = {t: "".join(w.capitalize() for w in t.name.split("_")) for t in (*ResourceType, *AclOperation,
                                                                            *PermissionType)}

E = TypeVar("E", ResourceType, AclOperation, PermissionType)


def _from_camel(cls: type[E], name: str) -> E:
    return next(v for v in cls if _CAMEL[v] == name)


def credential_text(c: ScramCredential) -> str:
    d = c.to_json()
    return f"salt={d['salt']},stored_key={d['stored_key']},server_key={d['server_key']},iterations={d['iterations']}"


def credential_from_text(text: str) -> ScramCredential:
    return ScramCredential.from_json(dict(part.split("=", 1) for part in text.split(",")))  # type: ignore[arg-type]


def user_credentials(data: bytes) -> dict[Mechanism, ScramCredential]:
    """The SCRAM credentials of a ``/config/users/<user>`` znode (other configs ignored)."""
    config = json.loads(data or b"{}").get("config", {})
    return {Mechanism(m): credential_from_text(v) for m, v in config.items() if m in {x.value for x in Mechanism}}


def user_config(credentials: dict[Mechanism, ScramCredential], current: bytes = b"") -> bytes:
    """A ``/config/users/<user>`` znode holding exactly ``credentials`` as SCRAM credentials and
    the other configs of ``current`` (its data: the user's quotas share the znode, as in Kafka)."""
    kept = {k: v for k, v in dict(json.loads(current or b"{}").get("config") or {}).items()
            if k not in {x.value for x in Mechanism}}
    return json.dumps({"version": 1, "config": {**kept, **{str(m): credential_text(c)
                                                           for m, c in credentials.items()}}}).encode()


def resource_type_name(resource_type: ResourceType) -> str:
    """The ACL znodes' name for a resource type ("Topic", "TransactionalId", ...)."""
    return _CAMEL[resource_type]


def resource_acls(data: bytes, pattern: PatternType, resource_type: str, name: str) -> list[AclBinding]:
    """The ACLs of one resource's znode (``resource_type`` as the znode names it)."""
    return [AclBinding(_from_camel(ResourceType, resource_type), name, pattern, a["principal"], a["host"],
                       _from_camel(AclOperation, a["operation"]), _from_camel(PermissionType, a["permissionType"]))
            for a in json.loads(data or b"{}").get("acls", [])]


def resource_acls_data(acls: list[AclBinding]) -> bytes:
    """One resource's znode holding ``acls`` (all of that resource)."""
    return json.dumps({"version": 1, "acls": [{"principal": a.principal, "permissionType": _CAMEL[a.permission],
                                               "operation": _CAMEL[a.operation], "host": a.host}
                                              for a in acls]}).encode()


def acl_change(resource_type: ResourceType, pattern: PatternType, name: str) -> bytes:
    """The change notification naming the resource whose ACLs changed."""
    return f"{_CAMEL[resource_type]}:{pattern.name}:{name}".encode()

"""Kafka's ACL model (resource types, pattern types, operations, permissions) and the
decision its StandardAuthorizer makes, over ACLs kept across restarts in ``acls.json``.

A request is allowed when the principal is a super user, or no matching ACL denies it and
one allows it, or (``allow.everyone.if.no.acl.found``) no ACL at all names the resource.
An ACL matches a resource when its pattern does (LITERAL: the same name or ``*``;
PREFIXED: a prefix of the name), its principal does (the same or ``User:*``) and its host
does (the same or ``*``). DENY wins over ALLOW; ALL stands for every operation; Kafka's
implications hold: READ, WRITE, DELETE or ALTER allow DESCRIBE, ALTER_CONFIGS allows
DESCRIBE_CONFIGS. Changes are written before they are acknowledged and apply at once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from enum import IntEnum
from pathlib import Path

from eoslog.storage.fileio import atomic_write

ACLS_FILE = "acls.json"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    """Kafka's AclOperation codes, also the bit positions of *_authorized_operations."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class PermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_O = AclOperation
# Operations an ALLOW of another operation implies (Kafka's AclEntry / StandardAuthorizerData).
IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    _O.DESCRIBE: frozenset({_O.READ, _O.WRITE, _O.DELETE, _O.ALTER}),
    _O.DESCRIBE_CONFIGS: frozenset({_O.ALTER_CONFIGS}),
}
# Operations that apply to each resource type (Kafka's AclEntry.supportedOperations).
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER,
                                   _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS,
                                     _O.IDEMPOTENT_WRITE, _O.ALTER, _O.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({_O.DESCRIBE, _O.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_O.DESCRIBE}),
    ResourceType.USER: frozenset({_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS}),
}


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: PermissionType

    def invalid_reason(self) -> str | None:
        """Why CreateAcls must refuse this binding (Kafka's INVALID_REQUEST checks), or None."""
        if self.resource_type not in SUPPORTED_OPERATIONS:
            return f"resource type {self.resource_type.name} cannot carry ACLs"
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return f"pattern type {self.pattern_type.name} is not LITERAL or PREFIXED"
        if self.operation not in SUPPORTED_OPERATIONS[self.resource_type] | {_O.ALL}:
            return f"operation {self.operation.name} does not apply to {self.resource_type.name}"
        if self.permission not in (PermissionType.ALLOW, PermissionType.DENY):
            return f"permission {self.permission.name} is not ALLOW or DENY"
        if not self.resource_name or (self.pattern_type is PatternType.PREFIXED and self.resource_name == WILDCARD):
            return "empty resource name, or a PREFIXED '*'"
        if self.resource_type is ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            return f"the cluster resource is named {CLUSTER_NAME}"
        if ":" not in self.principal or not self.host:
            return f"principal {self.principal!r} is not TYPE:NAME, or the host is empty"
        return None

    def pattern_matches(self, resource_type: ResourceType, name: str) -> bool:
        if self.resource_type != resource_type:
            return False
        if self.pattern_type is PatternType.LITERAL:
            return self.resource_name in (name, WILDCARD)
        return self.pattern_type is PatternType.PREFIXED and name.startswith(self.resource_name)


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls / DeleteAcls filters: None or ANY match everything; pattern MATCH matches
    every pattern that applies to the named resource."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: PermissionType = PermissionType.ANY

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, acl.resource_type):
            return False
        if self.pattern_type is PatternType.MATCH:
            if self.resource_name is not None and not acl.pattern_matches(acl.resource_type, self.resource_name):
                return False
        else:
            if self.pattern_type not in (PatternType.ANY, acl.pattern_type):
                return False
            if self.resource_name is not None and self.resource_name != acl.resource_name:
                return False
        return ((self.principal is None or self.principal == acl.principal)
                and (self.host is None or self.host == acl.host)
                and self.operation in (AclOperation.ANY, acl.operation)
                and self.permission in (PermissionType.ANY, acl.permission))


def decide(acls: Iterable[AclBinding], principal: str, host: str, operation: AclOperation,
           resource_type: ResourceType, name: str, allow_if_no_acl: bool) -> bool:
    """StandardAuthorizer's decision for a principal that is not a super user."""
    allowing = IMPLIED_BY.get(operation, frozenset()) | {operation, _O.ALL}
    any_acl = allowed = False
    for acl in acls:
        if not acl.pattern_matches(resource_type, name):
            continue
        any_acl = True
        if acl.principal not in (principal, WILDCARD_PRINCIPAL) or acl.host not in (host, WILDCARD):
            continue
        if acl.permission is PermissionType.DENY and acl.operation in (operation, _O.ALL):
            return False
        if acl.permission is PermissionType.ALLOW and acl.operation in allowing:
            allowed = True
    return allowed or (allow_if_no_acl and not any_acl)


class AclStore:
    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / ACLS_FILE
        self.acls: tuple[AclBinding, ...] = ()
        if self.path.exists():
            doc = json.loads(self.path.read_text())  # unreadable: refuse to start, never run open
            self.acls = tuple(AclBinding(ResourceType[a["resource_type"]], a["resource_name"],
                                         PatternType[a["pattern_type"]], a["principal"], a["host"],
                                         AclOperation[a["operation"]], PermissionType[a["permission"]])
                              for a in doc["acls"])

    def replace(self, acls: Iterable[AclBinding]) -> None:
        """Store the new set (written before returning; in effect from the next check)."""
        new = tuple(dict.fromkeys(acls))
        doc = {"version": 1, "acls": [{k: (v.name if isinstance(v, IntEnum) else v) for k, v in asdict(a).items()}
                                      for a in new]}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps(doc, indent=1).encode())
        self.acls = new

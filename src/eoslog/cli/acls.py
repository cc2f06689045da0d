"""``eoslog acls add|list|remove``: ACLs as ``kafka-acls.sh`` manages them.

    eoslog acls add --allow-principal User:alice --operation Write --operation Read --topic orders
    eoslog acls add --allow-principal User:alice --operation Read --group app- --resource-pattern-type prefixed
    eoslog acls add --deny-principal User:mallory --operation All --topic '*'
    eoslog acls list [--principal User:alice] [--topic orders]
    eoslog acls remove --allow-principal User:alice --operation Write --topic orders

Resources: ``--topic``, ``--group``, ``--transactional-id`` (repeatable) and ``--cluster``;
``--resource-pattern-type`` literal (default), prefixed (add/remove), or any/match (list,
remove). Operations and permissions are Kafka's names, case-insensitive. Output is a table.
"""

from __future__ import annotations

from typing import Annotated

import typer

from eoslog.cli.common import BootstrapServer, CommandConfig, CommandError, app, open_admin, table_console, user_errors
from eoslog.security.acls import CLUSTER_NAME, AclOperation, PatternType, PermissionType, ResourceType

acls_app = typer.Typer(help="ACLs (as kafka-acls.sh).", no_args_is_help=True)
app.add_typer(acls_app, name="acls")

Principals = Annotated[list[str] | None, typer.Option(help="principal, e.g. User:alice (repeatable)")]
Names = Annotated[list[str] | None, typer.Option(help="resource name (repeatable)")]


def _enum(cls: type[AclOperation] | type[PatternType] | type[PermissionType], name: str, option: str) -> int:
    key = name.strip().upper().replace("-", "_").replace("IDEMPOTENTWRITE", "IDEMPOTENT_WRITE")
    key = {"DESCRIBECONFIGS": "DESCRIBE_CONFIGS", "ALTERCONFIGS": "ALTER_CONFIGS",
           "CLUSTERACTION": "CLUSTER_ACTION"}.get(key, key)
    try:
        return int(cls[key])
    except KeyError:
        raise CommandError(f"{option} {name!r}: one of {', '.join(m.name for m in cls)}", exit_code=2) from None


def _resources(topic: list[str] | None, group: list[str] | None, transactional_id: list[str] | None,
               cluster: bool) -> list[tuple[int, str]]:
    out = [(int(ResourceType.TOPIC), t) for t in topic or ()]
    out += [(int(ResourceType.GROUP), g) for g in group or ()]
    out += [(int(ResourceType.TRANSACTIONAL_ID), t) for t in transactional_id or ()]
    if cluster:
        out.append((int(ResourceType.CLUSTER), CLUSTER_NAME))
    return out


def _bindings(allow: list[str] | None, deny: list[str] | None, operations: list[str] | None,
              resources: list[tuple[int, str]], pattern: int, hosts: list[str] | None
              ) -> list[tuple[int, str, int, str, str, int, int]]:
    if not resources:
        raise CommandError("name a resource: --topic, --group, --transactional-id or --cluster", exit_code=2)
    principals = [(p, int(PermissionType.ALLOW)) for p in allow or ()] + [(p, int(PermissionType.DENY))
                                                                          for p in deny or ()]
    if not principals or not operations:
        raise CommandError("give --allow-principal or --deny-principal, and --operation", exit_code=2)
    ops = [_enum(AclOperation, o, "--operation") for o in operations]
    return [(rt, name, pattern, p, h, op, perm) for rt, name in resources for p, perm in principals
            for h in hosts or ["*"] for op in ops]


def _print(acls: list[tuple[int, str, int, str, str, int, int]]) -> None:
    from rich.table import Table

    table = Table("RESOURCE TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")
    for rt, name, pt, principal, host, op, perm in sorted(acls):
        table.add_row(ResourceType(rt).name, name, PatternType(pt).name, principal, host, AclOperation(op).name,
                      PermissionType(perm).name)
    table_console().print(table)


@acls_app.command("add")
def add(
    allow_principal: Principals = None, deny_principal: Principals = None,
    operation: Annotated[list[str] | None, typer.Option(help="Read, Write, Create, Delete, Alter, Describe, "
                                                        "ClusterAction, DescribeConfigs, AlterConfigs, "
                                                        "IdempotentWrite, All (repeatable)")] = None,
    topic: Names = None, group: Names = None, transactional_id: Names = None,
    cluster: Annotated[bool, typer.Option("--cluster", help="the cluster resource")] = False,
    resource_pattern_type: Annotated[str, typer.Option(help="literal or prefixed")] = "literal",
    host: Annotated[list[str] | None, typer.Option("--host", help="client host (default *)")] = None,
    bootstrap_server: BootstrapServer = "127.0.0.1:9092", command_config: CommandConfig = None,
) -> None:
    """Add ACLs (CreateAcls): each principal, operation, resource and host named."""
    with user_errors("acls add"):
        bindings = _bindings(allow_principal, deny_principal, operation,
                             _resources(topic, group, transactional_id, cluster),
                             _enum(PatternType, resource_pattern_type, "--resource-pattern-type"), host)
        with open_admin(bootstrap_server, command_config=command_config) as admin:
            admin.create_acls(bindings)
        _print(bindings)


def _filters(principal: list[str] | None, operation: list[str] | None, resources: list[tuple[int, str]],
             pattern: str) -> list[tuple[int, str | None, int, str | None, str | None, int, int]]:
    pt = _enum(PatternType, pattern, "--resource-pattern-type")
    ops = [_enum(AclOperation, o, "--operation") for o in operation or ["any"]]
    targets: list[tuple[int, str | None]] = list(resources) or [(int(ResourceType.ANY), None)]
    principals: list[str | None] = list(principal) if principal else [None]
    return [(rt, name, pt, p, None, op, int(PermissionType.ANY)) for rt, name in targets
            for p in principals for op in ops]


@acls_app.command("list")
def list_acls(
    principal: Principals = None, topic: Names = None, group: Names = None, transactional_id: Names = None,
    cluster: Annotated[bool, typer.Option("--cluster")] = False,
    resource_pattern_type: Annotated[str, typer.Option(help="any (default), match, literal, prefixed")] = "any",
    bootstrap_server: BootstrapServer = "127.0.0.1:9092", command_config: CommandConfig = None,
) -> None:
    """List ACLs (DescribeAcls), all or those of the named principals/resources."""
    with user_errors("acls list"), open_admin(bootstrap_server, command_config=command_config) as admin:
        found: list[tuple[int, str, int, str, str, int, int]] = []
        for flt in _filters(principal, None, _resources(topic, group, transactional_id, cluster),
                            resource_pattern_type):
            found += admin.describe_acls(flt)
    _print(sorted(set(found)))


@acls_app.command("remove")
def remove(
    allow_principal: Principals = None, deny_principal: Principals = None,
    operation: Annotated[list[str] | None, typer.Option(help="operations (default: any)")] = None,
    topic: Names = None, group: Names = None, transactional_id: Names = None,
    cluster: Annotated[bool, typer.Option("--cluster")] = False,
    resource_pattern_type: Annotated[str, typer.Option(help="literal (default), prefixed, any, match")] = "literal",
    bootstrap_server: BootstrapServer = "127.0.0.1:9092", command_config: CommandConfig = None,
) -> None:
    """Remove the ACLs the options match (DeleteAcls); prints what was removed."""
    with user_errors("acls remove"):
        resources = _resources(topic, group, transactional_id, cluster)
        if not resources:
            raise CommandError("name a resource: --topic, --group, --transactional-id or --cluster", exit_code=2)
        filters = _filters([*(allow_principal or ()), *(deny_principal or ())] or None, operation, resources,
                           resource_pattern_type)
        with open_admin(bootstrap_server, command_config=command_config) as admin:
            removed = admin.delete_acls(filters)
    _print(removed)

"""``eoslog configs``, like kafka-configs.sh, and ``eoslog topics alter-config``.

    eoslog configs --entity-type topics --entity-name orders --describe [--all]
    eoslog configs --entity-type topics --entity-name orders --alter \\
        --add-config retention.ms=86400000,cleanup.policy=[compact,delete] --delete-config segment.ms
    eoslog configs --entity-type brokers --entity-default --alter --add-config log.retention.ms=3600000
    eoslog configs --entity-type groups --entity-name payments --describe

``--alter`` sends one IncrementalAlterConfigs request: SET for each ``--add-config``,
DELETE for each ``--delete-config`` (and, beyond kafka-configs.sh, APPEND / SUBTRACT for
``--append-config`` / ``--subtract-config`` on LIST configs such as cleanup.policy).
``--describe`` prints a table of the configs that were set for the entity (all of them with
``--all``): value, where it comes from and what it would be without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from eoslog.cli.common import (
    DEFAULT_BOOTSTRAP_SERVER,
    BootstrapServer,
    CommandConfig,
    CommandError,
    app,
    open_admin,
    table_console,
    user_errors,
)
from eoslog.cli.topics import topics_app
from eoslog.client.admin import AlterConfigOp, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigResourceType
from eoslog.client.errors import KafkaProtocolError
from eoslog.protocol.configs import ConfigSource

ENTITY_TYPES = {"topics": ConfigResourceType.TOPIC, "brokers": ConfigResourceType.BROKER,
                "groups": ConfigResourceType.GROUP}
# What kafka-configs.sh calls each source in its synonyms list.
_DEFAULT_SOURCES = (ConfigSource.DEFAULT_CONFIG, ConfigSource.STATIC_BROKER_CONFIG,
                    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)


def parse_config_list(text: str | None, option: str) -> dict[str, str]:
    """kafka-configs.sh's ``k1=v1,k2=[v2a,v2b]``: commas inside brackets belong to the value."""
    out: dict[str, str] = {}
    if not text:
        return out
    items, depth, current = [], 0, ""
    for ch in text:
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += ch
    items.append(current)
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CommandError(f"{option} expects k1=v1,k2=[v1,v2,v2],... got {item!r}", exit_code=2)
        value = value.strip()
        out[key.strip()] = value[1:-1] if value.startswith("[") and value.endswith("]") else value
    return out


def _ops(add: str | None, delete: list[str] | None, append: str | None, subtract: str | None) -> list[AlterConfigOp]:
    ops = [AlterConfigOp(k, v) for k, v in parse_config_list(add, "--add-config").items()]
    ops += [AlterConfigOp(k.strip(), None, AlterConfigOpType.DELETE)
            for item in delete or [] for k in item.split(",") if k.strip()]
    ops += [AlterConfigOp(k, v, AlterConfigOpType.APPEND)
            for k, v in parse_config_list(append, "--append-config").items()]
    ops += [AlterConfigOp(k, v, AlterConfigOpType.SUBTRACT)
            for k, v in parse_config_list(subtract, "--subtract-config").items()]
    if not ops:
        raise CommandError("--alter needs --add-config, --delete-config, --append-config or --subtract-config",
                           exit_code=2)
    return ops


def _resource(entity_type: str, entity_name: str | None, entity_default: bool) -> ConfigResource:
    kind = ENTITY_TYPES.get(entity_type)
    if kind is None:
        raise CommandError(f"--entity-type must be one of {', '.join(ENTITY_TYPES)}, got {entity_type!r}",
                           exit_code=2)
    if entity_default:
        if kind is not ConfigResourceType.BROKER or entity_name:
            raise CommandError("--entity-default applies to --entity-type brokers, without --entity-name", exit_code=2)
        return ConfigResource(kind, "")
    if not entity_name:
        raise CommandError("--entity-name (or --entity-default for brokers) is required", exit_code=2)
    return ConfigResource(kind, entity_name)


def _label(resource: ConfigResource) -> str:
    kind = {ConfigResourceType.TOPIC: "topic", ConfigResourceType.BROKER: "broker",
            ConfigResourceType.GROUP: "group"}[resource.type]
    return "the default broker" if resource.type is ConfigResourceType.BROKER and not resource.name \
        else f"{kind} {resource.name}"


def alter(resource: ConfigResource, ops: list[AlterConfigOp], bootstrap_server: str, validate_only: bool,
          command_config: Path | None = None) -> None:
    with open_admin(bootstrap_server, command_config=command_config) as admin:
        try:
            admin.incremental_alter_configs({resource: ops}, validate_only=validate_only)
        except KafkaProtocolError as e:
            raise CommandError(f"cannot alter the configs of {_label(resource)}: {e}") from None
    typer.echo(("Validated" if validate_only else "Completed updating") + f" config for {_label(resource)}.")


def describe(resource: ConfigResource, bootstrap_server: str, show_all: bool,
             command_config: Path | None = None) -> None:
    with open_admin(bootstrap_server, command_config=command_config) as admin:
        try:
            entries = admin.describe_configs([resource], include_synonyms=True)[resource]
        except KafkaProtocolError as error:
            raise CommandError(f"cannot describe the configs of {_label(resource)}: {error}") from None
    # As kafka-configs.sh: without --all, what was set for this entity itself.
    own = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG if resource.type is ConfigResourceType.BROKER \
        and not resource.name else None
    shown = [e for e in entries.values()
             if show_all or (e.source is own if own else e.source not in _DEFAULT_SOURCES)]
    console = table_console()
    console.print(f"{'All' if show_all else 'Dynamic'} configs for {_label(resource)}:", highlight=False)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for column in ("Name", "Value", "Source", "ReadOnly", "Otherwise"):
        table.add_column(column)
    for e in sorted(shown, key=lambda e: e.name):
        table.add_row(e.name, "<sensitive>" if e.is_sensitive else str(e.value), e.source.name,
                      "yes" if e.is_read_only else "no", _otherwise(e))
    console.print(table)


def _otherwise(entry: ConfigEntry) -> str:
    """The value the entity would have without its own setting: the next synonym."""
    rest = [s for s in entry.synonyms if s.source is not entry.source]
    return f"{rest[0].value} ({rest[0].source.name})" if rest else "-"


@app.command("configs")
def configs(
    entity_type: Annotated[str, typer.Option("--entity-type", help="topics, brokers or groups")],
    entity_name: Annotated[str | None, typer.Option("--entity-name", help="topic, broker id or group")] = None,
    entity_default: Annotated[bool, typer.Option("--entity-default",
                                                 help="the cluster-wide broker default")] = False,
    describe_: Annotated[bool, typer.Option("--describe", help="show the entity's configs")] = False,
    show_all: Annotated[bool, typer.Option("--all", help="with --describe: every config, not only those set")] = False,
    alter_: Annotated[bool, typer.Option("--alter", help="change the entity's configs")] = False,
    add_config: Annotated[str | None, typer.Option("--add-config", metavar="K=V,K=[V1,V2]",
                                                   help="configs to set")] = None,
    delete_config: Annotated[list[str] | None, typer.Option("--delete-config", metavar="K[,K]",
                                                            help="configs to remove (back to the default)")] = None,
    append_config: Annotated[str | None, typer.Option("--append-config", metavar="K=V",
                                                      help="values to add to a list config")] = None,
    subtract_config: Annotated[str | None, typer.Option("--subtract-config", metavar="K=V",
                                                        help="values to remove from a list config")] = None,
    validate_only: Annotated[bool, typer.Option("--validate-only", help="with --alter: check, change nothing")] = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """Describe or alter the configs of a topic, a broker or a group (kafka-configs.sh)."""
    with user_errors("configs"):
        if describe_ == alter_:
            raise CommandError("exactly one of --describe and --alter is required", exit_code=2)
        resource = _resource(entity_type, entity_name, entity_default)
        if alter_:
            alter(resource, _ops(add_config, delete_config, append_config, subtract_config), bootstrap_server,
                  validate_only, command_config)
        else:
            describe(resource, bootstrap_server, show_all, command_config)


@topics_app.command("alter-config")
def alter_config(
    name: Annotated[str, typer.Argument(help="Topic name")],
    add_config: Annotated[str | None, typer.Option("--add-config", metavar="K=V,K=[V1,V2]",
                                                   help="configs to set")] = None,
    delete_config: Annotated[list[str] | None, typer.Option("--delete-config", metavar="K[,K]",
                                                            help="configs to remove (back to the default)")] = None,
    validate_only: Annotated[bool, typer.Option("--validate-only", help="check, change nothing")] = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """Set or remove a topic's config overrides (IncrementalAlterConfigs); in effect at once."""
    with user_errors("topics alter-config"):
        alter(ConfigResource(ConfigResourceType.TOPIC, name), _ops(add_config, delete_config, None, None),
              bootstrap_server, validate_only, command_config)

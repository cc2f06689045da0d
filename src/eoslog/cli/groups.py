"""``eoslog groups list|describe|delete|reset-offsets``, like kafka-consumer-groups.sh.

``describe`` shows one row per partition with the group's committed offset, the
partition's end offset and the lag between them, plus which member holds it. The end
offset is ListOffsets' latest under read_committed: the high watermark today, the last
stable offset once transactions exist, so lag never counts records a read_committed
consumer cannot see yet. ``reset-offsets`` only plans unless ``--execute`` is given, and
only touches a group without active members, as Kafka's tool. Every request goes
through the admin client (``eoslog.client.Admin``).
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
from eoslog.client.admin import Admin, IsolationLevel, OffsetSpec
from eoslog.client.errors import KafkaProtocolError, UnknownTopicOrPartitionError
from eoslog.client.types import TopicPartition
from eoslog.protocol.errors import ErrorCode

groups_app = typer.Typer(help="List, describe, delete consumer groups and reset their offsets.",
                         no_args_is_help=True)
app.add_typer(groups_app, name="groups")


# -- look-ups on the admin client ----------------------------------------------------------------


def end_offsets(admin: Admin, tps: list[TopicPartition], spec: OffsetSpec,
                isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED) -> dict[TopicPartition, int]:
    """Offsets by ``spec`` of each partition; a deleted topic has none (no lag to show)."""
    out: dict[TopicPartition, int] = {}
    for topic in sorted({tp.topic for tp in tps}):
        try:
            found = admin.list_offsets({tp: spec for tp in tps if tp.topic == topic}, isolation_level=isolation_level)
        except UnknownTopicOrPartitionError:
            continue
        out.update({tp: info.offset for tp, info in found.items()})
    return out


# -- commands -----------------------------------------------------------------------------------


@groups_app.command("list")
def list_command(
    state: Annotated[
        list[str] | None,
        typer.Option("--state", help="Only groups in this state (Stable, Empty, ...); repeatable"),
    ] = None,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """List consumer groups with their state and protocol type (ListGroups)."""
    with user_errors("groups list"), open_admin(bootstrap_server, command_config=command_config) as admin:
        groups = admin.list_groups(state or None)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for column in ("GROUP", "TYPE", "STATE", "PROTOCOL-TYPE"):
        table.add_column(column)
    for g in groups:
        table.add_row(g.group_id, g.type or "classic", g.state or "-", g.protocol_type or "-")
    table_console().print(table)


@groups_app.command("describe")
def describe_command(
    group: Annotated[str, typer.Argument(help="Group id")],
    members: Annotated[bool, typer.Option("--members", help="One row per member instead of per partition")] = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """Committed offsets, end offsets and lag per partition, and who consumes each."""
    console = table_console()
    with user_errors("groups describe"), open_admin(bootstrap_server, command_config=command_config) as admin:
        info = admin.describe_groups([group])[group]
        committed = {tp: o.offset for tp, o in admin.list_consumer_group_offsets(group).items()}
        owners = {tp: m for m in info.members for tp in m.assignment}
        tps = sorted(set(committed) | set(owners))
        ends = end_offsets(admin, tps, OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)
        if info.state == "Dead" and not committed:
            raise CommandError(f"Consumer group '{group}' does not exist.")
    epoch = f"\tEpoch: {info.group_epoch}" if info.group_epoch is not None else ""
    console.print(
        f"Group: {group}\tType: {info.type}\tState: {info.state}\tProtocol: {info.protocol_type or '-'}"
        f"/{info.partition_assignor or '-'}{epoch}\tMembers: {len(info.members)}",
        highlight=False, markup=False,
    )
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    if members:
        for column in ("CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "EPOCH", "#PARTITIONS",
                       "ASSIGNMENT", "TARGET-ASSIGNMENT"):
            table.add_column(column)
        for m in info.members:
            table.add_row(
                m.member_id, m.group_instance_id or "-", m.host, m.client_id,
                "-" if m.member_epoch is None else str(m.member_epoch), str(len(m.assignment)),
                ", ".join(f"{t}-{p}" for t, p in sorted(m.assignment)) or "-",
                ", ".join(f"{t}-{p}" for t, p in sorted(m.target_assignment)) or "-",
            )
    else:
        for column in ("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                       "HOST", "CLIENT-ID"):
            table.add_column(column, justify="right" if column in ("PARTITION", "CURRENT-OFFSET",
                                                                   "LOG-END-OFFSET", "LAG") else "left")
        for tp in tps:
            current, end = committed.get(tp), ends.get(tp)
            lag = end - current if current is not None and end is not None else None
            owner = owners.get(tp)
            table.add_row(
                tp[0], str(tp[1]), "-" if current is None else str(current), "-" if end is None else str(end),
                "-" if lag is None else str(lag), owner.member_id if owner else "-",
                owner.host if owner else "-", owner.client_id if owner else "-",
            )
    console.print(table)


def delete_groups(groups: list[str], kind: str, command: str, bootstrap_server: str,
                  command_config: Path | None) -> None:
    """DeleteGroups for each of ``groups`` (consumer or share groups: ``kind`` names them), one
    line per group; exit 1 if one could not be deleted."""
    failed = False
    reasons = {
        int(ErrorCode.group_id_not_found): "it does not exist",
        int(ErrorCode.non_empty_group): "it has active members",
    }
    with user_errors(command), open_admin(bootstrap_server, command_config=command_config) as admin:
        for g in dict.fromkeys(groups):
            try:
                admin.delete_groups([g])
            except KafkaProtocolError as e:
                failed = True
                reason = reasons.get(int(e.error_code), str(e))
                typer.echo(f"eoslog {command}: error: cannot delete group '{g}': {reason}", err=True)
                continue
            typer.echo(f"Deleted {kind} '{g}'.")
    if failed:
        raise typer.Exit(1)


@groups_app.command("delete")
def delete_command(
    group: Annotated[list[str], typer.Argument(help="Group id(s)")],
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """Delete groups without active members, with their offsets (DeleteGroups)."""
    delete_groups(group, "consumer group", "groups delete", bootstrap_server, command_config)


def parse_topic(spec: str) -> tuple[str, list[int] | None]:
    """``topic`` or ``topic:0,2`` (kafka-consumer-groups' syntax)."""
    topic, sep, parts = spec.partition(":")
    if not sep:
        return topic, None
    try:
        return topic, [int(p) for p in parts.split(",") if p.strip()]
    except ValueError:
        raise CommandError(f"--topic {spec!r}: partitions must be numbers", 2) from None


@groups_app.command("reset-offsets")
def reset_offsets_command(
    group: Annotated[str, typer.Argument(help="Group id")],
    topic: Annotated[list[str] | None, typer.Option("--topic", help="TOPIC or TOPIC:P1,P2 (repeatable)")] = None,
    all_topics: Annotated[bool, typer.Option("--all-topics", help="Every topic the group has offsets for")] = False,
    to_earliest: Annotated[bool, typer.Option("--to-earliest", help="Reset to the log start offset")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="Reset to the end offset")] = False,
    to_offset: Annotated[int | None, typer.Option("--to-offset", help="Reset to this offset")] = None,
    shift_by: Annotated[int | None, typer.Option("--shift-by", help="Move the committed offset by N")] = None,
    execute: Annotated[
        bool, typer.Option("--execute", help="Commit the new offsets (default: only show them)")
    ] = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """Set a group's committed offsets; new offsets are kept within [log start, end]."""
    with user_errors("groups reset-offsets"), open_admin(bootstrap_server, command_config=command_config) as admin:
        chosen = [to_earliest, to_latest, to_offset is not None, shift_by is not None]
        if sum(chosen) != 1:
            raise CommandError("give exactly one of --to-earliest, --to-latest, --to-offset, --shift-by", 2)
        if bool(topic) == all_topics:
            raise CommandError("give --topic or --all-topics", 2)
        info = admin.describe_groups([group])[group]
        if info.state not in ("Empty", "Dead"):
            raise CommandError(
                f"Assignments can only be reset if the group '{group}' is inactive, "
                f"but the current state is {info.state}."
            )
        committed = {tp: o.offset for tp, o in admin.list_consumer_group_offsets(group).items()}
        tps: list[TopicPartition] = []
        if all_topics:
            tps = sorted(committed)
        else:
            for spec in topic or []:
                name, parts = parse_topic(spec)
                if parts is None:
                    try:
                        found = admin.describe_topics([name])[name]
                    except UnknownTopicOrPartitionError:
                        raise CommandError(f"Topic '{name}' does not exist") from None
                    parts = [p.partition for p in found.partitions]
                tps.extend(TopicPartition(name, p) for p in parts)
        earliest = end_offsets(admin, tps, OffsetSpec.earliest())
        latest = end_offsets(admin, tps, OffsetSpec.latest())
        plan: dict[TopicPartition, int] = {}
        for tp in tps:
            if tp not in earliest or tp not in latest:
                raise CommandError(f"partition {tp[0]}-{tp[1]} does not exist")
            if to_earliest:
                target = earliest[tp]
            elif to_latest:
                target = latest[tp]
            elif to_offset is not None:
                target = to_offset
            else:
                assert shift_by is not None
                target = committed.get(tp, latest[tp]) + shift_by
            plan[tp] = min(max(target, earliest[tp]), latest[tp])
        if execute:
            admin.alter_consumer_group_offsets(group, plan)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for column in ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"):
        table.add_column(column, justify="right" if column in ("PARTITION", "NEW-OFFSET") else "left")
    for (t, p), offset in sorted(plan.items()):
        table.add_row(group, t, str(p), str(offset))
    console = table_console()
    console.print(table)
    if not execute:
        console.print("(dry run: add --execute to commit these offsets)", highlight=False)

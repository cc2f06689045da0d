"""``eoslog share-groups list|describe|reset-offsets|delete|delete-offsets``, like Kafka's
kafka-share-groups.sh (ShareGroupCommand).

``describe`` shows one row per share-partition: its start offset (every record below it is done
with) and its lag (records after it not yet delivered for good); ``--members`` one row per member
with its assignment. ``reset-offsets`` only plans unless ``--execute`` is given and only touches a
group without members, as Kafka's tool. Every request goes through the admin client
(``eoslog.client.Admin``).
"""

from __future__ import annotations

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
from eoslog.cli.groups import delete_groups, end_offsets, parse_topic
from eoslog.client.admin import OffsetSpec
from eoslog.client.errors import KafkaProtocolError, UnknownTopicOrPartitionError
from eoslog.client.types import TopicPartition
from eoslog.protocol.errors import ErrorCode

share_app = typer.Typer(help="List, describe, delete share groups and reset their share-partitions' start offsets.",
                        no_args_is_help=True)
app.add_typer(share_app, name="share-groups")


def _table(*columns: str, right: tuple[str, ...] = ()) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for column in columns:
        table.add_column(column, justify="right" if column in right else "left")
    return table


@share_app.command("list")
def list_command(
    state: Annotated[list[str] | None,
                     typer.Option("--state", help="Only groups in this state (Stable, Empty)")] = None,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """List share groups with their state (ListGroups of the share type)."""
    with user_errors("share-groups list"), open_admin(bootstrap_server, command_config=command_config) as admin:
        groups = admin.list_share_groups(state or None)
    table = _table("GROUP", "STATE")
    for g in groups:
        table.add_row(g.group_id, g.state or "-")
    table_console().print(table)


@share_app.command("describe")
def describe_command(
    group: Annotated[str, typer.Argument(help="Share group id")],
    members: Annotated[bool, typer.Option("--members", help="One row per member instead of per partition")] = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """Start offsets and lag per share-partition, or the members and what each is assigned."""
    console = table_console()
    with user_errors("share-groups describe"), open_admin(bootstrap_server, command_config=command_config) as admin:
        try:
            info = admin.describe_share_groups([group])[group]
        except KafkaProtocolError as e:
            if int(e.error_code) == ErrorCode.group_id_not_found:
                raise CommandError(f"Share group '{group}' does not exist.") from None
            raise
        offsets = admin.list_share_group_offsets(group) if not members else {}
    console.print(f"Group: {group}\tState: {info.state}\tEpoch: {info.group_epoch}\tAssignor: "
                  f"{info.partition_assignor}\tMembers: {len(info.members)}", highlight=False, markup=False)
    if members:
        table = _table("CONSUMER-ID", "HOST", "CLIENT-ID", "MEMBER-EPOCH", "#PARTITIONS", "ASSIGNMENT",
                       right=("MEMBER-EPOCH", "#PARTITIONS"))
        for m in info.members:
            table.add_row(m.member_id, m.host, m.client_id, str(m.member_epoch), str(len(m.assignment)),
                          ", ".join(f"{t}-{p}" for t, p in sorted(m.assignment)) or "-")
    else:
        table = _table("TOPIC", "PARTITION", "START-OFFSET", "LAG", right=("PARTITION", "START-OFFSET", "LAG"))
        for (topic, partition), o in sorted(offsets.items()):
            table.add_row(topic, str(partition), str(o.start_offset) if o.start_offset >= 0 else "-",
                          "-" if o.lag is None else str(o.lag))
    console.print(table)


@share_app.command("delete")
def delete_command(
    group: Annotated[list[str], typer.Argument(help="Share group id(s)")],
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """Delete share groups without members, with their share-partition states (DeleteGroups)."""
    delete_groups(group, "share group", "share-groups delete", bootstrap_server, command_config)


@share_app.command("delete-offsets")
def delete_offsets_command(
    group: Annotated[str, typer.Argument(help="Share group id")],
    topic: Annotated[list[str], typer.Option("--topic", help="Topic whose share-partition states go (repeatable)")],
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """Forget the group's share-partition states of whole topics (DeleteShareGroupOffsets): its next
    members start where share.auto.offset.reset says. Only a group without members."""
    with user_errors("share-groups delete-offsets"), open_admin(bootstrap_server,
                                                                 command_config=command_config) as admin:
        admin.delete_share_group_offsets(group, topic)
    for t in dict.fromkeys(topic):
        typer.echo(f"Deleted the share-partition states of topic '{t}' in share group '{group}'.")


@share_app.command("reset-offsets")
def reset_offsets_command(
    group: Annotated[str, typer.Argument(help="Share group id")],
    topic: Annotated[list[str] | None, typer.Option("--topic", help="TOPIC or TOPIC:P1,P2 (repeatable)")] = None,
    all_topics: Annotated[bool, typer.Option("--all-topics", help="Every topic the group has states for")] = False,
    to_earliest: Annotated[bool, typer.Option("--to-earliest", help="Start at the log start offset")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="Start at the end offset")] = False,
    to_offset: Annotated[int | None, typer.Option("--to-offset", help="Start at this offset")] = None,
    execute: Annotated[bool, typer.Option("--execute", help="Write the new start offsets (default: show)")] = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """Set where a share group's share-partitions start (AlterShareGroupOffsets): records from
    there on are delivered again, those below are done with. Kept between the log start and end offsets."""
    with user_errors("share-groups reset-offsets"), open_admin(bootstrap_server,
                                                                command_config=command_config) as admin:
        if sum([to_earliest, to_latest, to_offset is not None]) != 1:
            raise CommandError("give exactly one of --to-earliest, --to-latest, --to-offset", 2)
        if bool(topic) == all_topics:
            raise CommandError("give --topic or --all-topics", 2)
        try:
            info = admin.describe_share_groups([group])[group]
            state = info.state
        except KafkaProtocolError as e:
            if int(e.error_code) != ErrorCode.group_id_not_found:
                raise
            state = "Dead"
        if state not in ("Empty", "Dead"):
            raise CommandError(f"Share group '{group}' is not empty: its state is {state}. Offsets can only be "
                               "reset if the group has no members.")
        tps: list[TopicPartition] = []
        if all_topics:
            tps = sorted(admin.list_share_group_offsets(group))
        for spec in topic or []:
            name, parts = parse_topic(spec)
            if parts is None:
                try:
                    parts = [p.partition for p in admin.describe_topics([name])[name].partitions]
                except UnknownTopicOrPartitionError:
                    raise CommandError(f"Topic '{name}' does not exist") from None
            tps.extend(TopicPartition(name, p) for p in parts)
        earliest = end_offsets(admin, tps, OffsetSpec.earliest())
        latest = end_offsets(admin, tps, OffsetSpec.latest())
        plan: dict[TopicPartition, int] = {}
        for tp in tps:
            if tp not in earliest or tp not in latest:
                raise CommandError(f"partition {tp[0]}-{tp[1]} does not exist")
            target = earliest[tp] if to_earliest else latest[tp] if to_latest else int(to_offset or 0)
            plan[tp] = min(max(target, earliest[tp]), latest[tp])
        if execute:
            admin.alter_share_group_offsets(group, plan)
    table = _table("GROUP", "TOPIC", "PARTITION", "NEW-START-OFFSET", right=("PARTITION", "NEW-START-OFFSET"))
    for (t, p), offset in sorted(plan.items()):
        table.add_row(group, t, str(p), str(offset))
    console = table_console()
    console.print(table)
    if not execute:
        console.print("(dry run: add --execute to write these start offsets)", highlight=False)

"""``eoslog groups list|describe|delete|reset-offsets``, like kafka-consumer-groups.sh.

``describe`` shows one row per partition with the group's committed offset, the
partition's end offset and the lag between them, plus which member holds it. The end
offset is ListOffsets' latest under read_committed: the high watermark today, the last
stable offset once transactions exist, so lag never counts records a read_committed
consumer cannot see yet. ``reset-offsets`` only plans unless ``--execute`` is given, and
only touches a group without active members, as Kafka's tool.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from eoslog.cli.main import (
    DEFAULT_BOOTSTRAP_SERVER,
    BootstrapServer,
    CommandError,
    app,
    connect,
    user_errors,
)
from eoslog.cli.topics import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, fetch_metadata, list_offsets
from eoslog.client.connection import BrokerConnection, KafkaProtocolError, build, request_types
from eoslog.coordinator.group.records import RecordFormatError, assignment_partitions
from eoslog.protocol.errors import ErrorCode

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10
DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS = 15, 16, 42
READ_COMMITTED = 1
GROUP_KEY_TYPE = 0
RETRY_DEADLINE_S = 30.0
# Errors that mean "ask again shortly" while a coordinator starts or loads.
_RETRY = {ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available}

groups_app = typer.Typer(help="List, describe, delete consumer groups and reset their offsets.",
                         no_args_is_help=True)
app.add_typer(groups_app, name="groups")


@dataclass(frozen=True, slots=True)
class MemberInfo:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class GroupInfo:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberInfo, ...]


# -- requests --------------------------------------------------------------------------------


def _retrying(call: Callable[[], Any], error_of: Callable[[Any], int]) -> Any:
    """Send until the answer is not a retriable coordinator error (or time runs out)."""
    deadline = time.monotonic() + RETRY_DEADLINE_S
    while True:
        response = call()
        code = error_of(response)
        if code not in _RETRY or time.monotonic() > deadline:
            return response
        time.sleep(0.2)


def find_coordinator(conn: BrokerConnection, group_id: str) -> None:
    """Make sure the broker coordinates ``group_id`` (one node: it always does once ready)."""
    version = conn.pick_version(FIND_COORDINATOR, 4)
    m = request_types(FIND_COORDINATOR, version)
    if version >= 4:
        request = build(m.FindCoordinatorRequest, key_type=GROUP_KEY_TYPE, coordinator_keys=(group_id,))
        response = _retrying(lambda: conn.send(request), lambda r: int(r.coordinators[0].error_code))
        result = response.coordinators[0]
    else:
        request = build(m.FindCoordinatorRequest, key=group_id, key_type=GROUP_KEY_TYPE)
        result = _retrying(lambda: conn.send(request), lambda r: int(r.error_code))
    if int(result.error_code) != ErrorCode.none:
        raise CommandError(f"no coordinator for group '{group_id}': "
                           f"{KafkaProtocolError(int(result.error_code), result.error_message)}")


def list_groups(conn: BrokerConnection, states: list[str]) -> list[tuple[str, str, str]]:
    version = conn.pick_version(LIST_GROUPS, 5)
    if states and version < 4:
        raise CommandError("--state needs ListGroups v4 or later", 2)
    m = request_types(LIST_GROUPS, version)
    request = build(m.ListGroupsRequest, states_filter=tuple(states), types_filter=())
    response = _retrying(lambda: conn.send(request), lambda r: int(r.error_code))
    if int(response.error_code) != ErrorCode.none:
        raise CommandError(str(KafkaProtocolError(int(response.error_code))))
    return sorted(
        (str(g.group_id), str(getattr(g, "group_state", "")), str(g.protocol_type))
        for g in response.groups
    )


def describe_group(conn: BrokerConnection, group_id: str) -> GroupInfo:
    find_coordinator(conn, group_id)
    version = conn.pick_version(DESCRIBE_GROUPS, 5)
    m = request_types(DESCRIBE_GROUPS, version)
    request = build(m.DescribeGroupsRequest, groups=(group_id,), include_authorized_operations=False)
    response = _retrying(lambda: conn.send(request), lambda r: int(r.groups[0].error_code))
    g = response.groups[0]
    if int(g.error_code) != ErrorCode.none:
        raise CommandError(f"cannot describe group '{group_id}': {KafkaProtocolError(int(g.error_code))}")
    members = []
    for member in g.members:
        try:
            partitions = tuple(assignment_partitions(bytes(member.member_assignment)))
        except RecordFormatError:
            partitions = ()  # not the consumer protocol
        members.append(MemberInfo(
            str(member.member_id), getattr(member, "group_instance_id", None), str(member.client_id),
            str(member.client_host), partitions,
        ))
    return GroupInfo(group_id, str(g.group_state), str(g.protocol_type), str(g.protocol_data),
                     tuple(members))


def fetch_committed(conn: BrokerConnection, group_id: str) -> dict[tuple[str, int], int]:
    """Every committed offset of the group."""
    version = conn.pick_version(OFFSET_FETCH, 7, wanted_min=2)
    m = request_types(OFFSET_FETCH, version)
    request = build(m.OffsetFetchRequest, group_id=group_id, topics=None, require_stable=False)
    response = _retrying(lambda: conn.send(request), lambda r: int(r.error_code))
    if int(response.error_code) != ErrorCode.none:
        raise CommandError(f"cannot fetch offsets of group '{group_id}': "
                           f"{KafkaProtocolError(int(response.error_code))}")
    out = {}
    for t in response.topics:
        for p in t.partitions:
            if int(p.error_code) == ErrorCode.none and int(p.committed_offset) >= 0:
                out[(str(t.name), int(p.partition_index))] = int(p.committed_offset)
    return out


def commit_offsets(conn: BrokerConnection, group_id: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit as an admin (no member, generation -1): only an empty group accepts it."""
    version = conn.pick_version(OFFSET_COMMIT, 8, wanted_min=2)
    m = request_types(OFFSET_COMMIT, version)
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append((partition, offset))
    request = build(
        m.OffsetCommitRequest, group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
        group_instance_id=None,
        topics=tuple(
            build(m.OffsetCommitRequestTopic, name=topic, partitions=tuple(
                build(m.OffsetCommitRequestPartition, partition_index=p, committed_offset=o,
                      committed_leader_epoch=-1, committed_metadata="")
                for p, o in parts
            ))
            for topic, parts in by_topic.items()
        ),
    )
    response = _retrying(
        lambda: conn.send(request), lambda r: int(r.topics[0].partitions[0].error_code) if r.topics else 0
    )
    for t in response.topics:
        for p in t.partitions:
            if int(p.error_code) != ErrorCode.none:
                raise CommandError(f"commit of {t.name}-{int(p.partition_index)} failed: "
                                   f"{KafkaProtocolError(int(p.error_code))}")


def end_offsets(conn: BrokerConnection, tps: list[tuple[str, int]], timestamp: int,
                isolation_level: int = 0) -> dict[tuple[str, int], int]:
    out: dict[tuple[str, int], int] = {}
    for topic in sorted({t for t, _ in tps}):
        parts = sorted(p for t, p in tps if t == topic)
        try:
            found = list_offsets(conn, topic, parts, timestamp, isolation_level=isolation_level)
        except CommandError:
            continue  # a deleted topic: no end offset, no lag
        out.update({(topic, p): o for p, o in found.items()})
    return out


# -- commands -----------------------------------------------------------------------------------


def _console() -> Console:
    """Tables are never cut to 80 columns when the output goes to a pipe or a file."""
    return Console(soft_wrap=True, width=None if sys.stdout.isatty() else 1000)


@groups_app.command("list")
def list_command(
    state: Annotated[
        list[str] | None,
        typer.Option("--state", help="Only groups in this state (Stable, Empty, ...); repeatable"),
    ] = None,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
) -> None:
    """List consumer groups with their state and protocol type (ListGroups)."""
    with user_errors("groups list"), connect(bootstrap_server) as conn:
        groups = list_groups(conn, state or [])
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for column in ("GROUP", "STATE", "PROTOCOL-TYPE"):
        table.add_column(column)
    for group_id, group_state, protocol_type in groups:
        table.add_row(group_id, group_state or "-", protocol_type or "-")
    _console().print(table)


@groups_app.command("describe")
def describe_command(
    group: Annotated[str, typer.Argument(help="Group id")],
    members: Annotated[bool, typer.Option("--members", help="One row per member instead of per partition")] = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
) -> None:
    """Committed offsets, end offsets and lag per partition, and who consumes each."""
    console = _console()
    with user_errors("groups describe"), connect(bootstrap_server) as conn:
        info = describe_group(conn, group)
        committed = fetch_committed(conn, group)
        owners = {tp: m for m in info.members for tp in m.partitions}
        tps = sorted(set(committed) | set(owners))
        ends = end_offsets(conn, tps, LATEST_TIMESTAMP, READ_COMMITTED)
        if info.state == "Dead" and not committed:
            raise CommandError(f"Consumer group '{group}' does not exist.")
    console.print(
        f"Group: {group}\tState: {info.state}\tProtocol: {info.protocol_type or '-'}"
        f"/{info.protocol or '-'}\tMembers: {len(info.members)}",
        highlight=False, markup=False,
    )
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    if members:
        for column in ("CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"):
            table.add_column(column)
        for m in info.members:
            table.add_row(
                m.member_id, m.group_instance_id or "-", m.host, m.client_id, str(len(m.partitions)),
                ", ".join(f"{t}-{p}" for t, p in sorted(m.partitions)) or "-",
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


@groups_app.command("delete")
def delete_command(
    group: Annotated[list[str], typer.Argument(help="Group id(s)")],
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
) -> None:
    """Delete groups without active members, with their offsets (DeleteGroups)."""
    failed = False
    with user_errors("groups delete"), connect(bootstrap_server) as conn:
        for g in group:
            find_coordinator(conn, g)
        version = conn.pick_version(DELETE_GROUPS, 2)
        m = request_types(DELETE_GROUPS, version)
        request = build(m.DeleteGroupsRequest, groups_names=tuple(group))
        response = _retrying(lambda: conn.send(request),
                             lambda r: max((int(x.error_code) for x in r.results), default=0)
                             if any(int(x.error_code) in _RETRY for x in r.results) else 0)
        for result in response.results:
            code = int(result.error_code)
            if code == ErrorCode.none:
                typer.echo(f"Deleted consumer group '{result.group_id}'.")
                continue
            failed = True
            reasons = {
                int(ErrorCode.group_id_not_found): "it does not exist",
                int(ErrorCode.non_empty_group): "it has active members",
            }
            reason = reasons.get(code, str(KafkaProtocolError(code)))
            typer.echo(f"eoslog groups delete: error: cannot delete group '{result.group_id}': {reason}",
                       err=True)
    if failed:
        raise typer.Exit(1)


def _parse_topic(spec: str) -> tuple[str, list[int] | None]:
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
) -> None:
    """Set a group's committed offsets; new offsets are kept within [log start, end]."""
    with user_errors("groups reset-offsets"), connect(bootstrap_server) as conn:
        chosen = [to_earliest, to_latest, to_offset is not None, shift_by is not None]
        if sum(chosen) != 1:
            raise CommandError("give exactly one of --to-earliest, --to-latest, --to-offset, --shift-by", 2)
        if bool(topic) == all_topics:
            raise CommandError("give --topic or --all-topics", 2)
        info = describe_group(conn, group)
        if info.state not in ("Empty", "Dead"):
            raise CommandError(
                f"Assignments can only be reset if the group '{group}' is inactive, "
                f"but the current state is {info.state}."
            )
        committed = fetch_committed(conn, group)
        if all_topics:
            tps = sorted(committed)
        else:
            tps = []
            for spec in topic or []:
                name, parts = _parse_topic(spec)
                if parts is None:
                    found = fetch_metadata(conn, [name])
                    if not found:
                        raise CommandError(f"Topic '{name}' does not exist")
                    parts = [p.partition for p in found[0].partitions]
                tps.extend((name, p) for p in parts)
        earliest = end_offsets(conn, tps, EARLIEST_TIMESTAMP)
        latest = end_offsets(conn, tps, LATEST_TIMESTAMP)
        plan: dict[tuple[str, int], int] = {}
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
            commit_offsets(conn, group, plan)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for column in ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"):
        table.add_column(column, justify="right" if column in ("PARTITION", "NEW-OFFSET") else "left")
    for (t, p), offset in sorted(plan.items()):
        table.add_row(group, t, str(p), str(offset))
    console = _console()
    console.print(table)
    if not execute:
        console.print("(dry run: add --execute to commit these offsets)", highlight=False)

"""``eoslog topics create|list|describe|delete``, like kafka-topics.sh, and
``eoslog topics delete-records``, like kafka-delete-records.sh, on the admin client
(``eoslog.client.Admin``).
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from eoslog.cli.common import (
    DEFAULT_BOOTSTRAP_SERVER,
    BootstrapServer,
    CommandConfig,
    CommandError,
    app,
    open_admin,
    parse_properties,
    table_console,
    user_errors,
)
from eoslog.client.admin import (
    Admin,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    NewTopic,
    OffsetSpec,
    RecordsToDelete,
    TopicDescription,
)
from eoslog.client.errors import (
    KafkaProtocolError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from eoslog.client.types import TopicPartition
from eoslog.protocol.errors import ErrorCode

topics_app = typer.Typer(help="Create, list, describe and delete topics.", no_args_is_help=True)
app.add_typer(topics_app, name="topics")


def _topic_error(name: str, code: int, message: str | None = None) -> CommandError:
    if code == ErrorCode.unknown_topic_or_partition:
        return CommandError(f"Topic '{name}' does not exist")
    if code == ErrorCode.invalid_topic_exception:
        return CommandError(f"Topic name '{name}' is invalid" + (f": {message}" if message else ""))
    return CommandError(f"topic '{name}': {KafkaProtocolError(code, message)}")





@topics_app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="Topic name")],
    partitions: Annotated[
        int | None, typer.Option("--partitions", min=1, help="Partitions (default: broker's num.partitions)")
    ] = None,
    replication_factor: Annotated[
        int | None, typer.Option("--replication-factor", min=1, help="Replicas per partition")
    ] = None,
    config: Annotated[
        list[str] | None, typer.Option("--config", help="Topic config override key=value (repeatable)")
    ] = None,
    if_not_exists: Annotated[
        bool, typer.Option("--if-not-exists", help="Succeed quietly if the topic exists")
    ] = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """Create a topic (CreateTopics)."""
    with user_errors("topics create"):
        configs = parse_properties(config, "--config")
        with open_admin(bootstrap_server, command_config=command_config) as admin:
            new = NewTopic(name, -1 if partitions is None else partitions,
                           -1 if replication_factor is None else replication_factor, configs)
            try:
                admin.create_topics([new])
            except TopicAlreadyExistsError:
                if if_not_exists:
                    return
                raise CommandError(f"Topic '{name}' already exists") from None
            except KafkaProtocolError as e:
                raise CommandError(f"cannot create topic '{name}': {e}") from None
    typer.echo(f"Created topic {name}.")


@topics_app.command("list")
def list_topics(
    exclude_internal: Annotated[
        bool, typer.Option("--exclude-internal", help="Leave out internal topics (__consumer_offsets, ...)")
    ] = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """List topic names, one per line."""
    with user_errors("topics list"), open_admin(bootstrap_server, command_config=command_config) as admin:
        names = admin.list_topics(internal=not exclude_internal)
    for topic in sorted(names):
        typer.echo(topic)


@topics_app.command("describe")
def describe(
    name: Annotated[str | None, typer.Argument(help="Topic name (default: all topics)")] = None,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """Partitions, leader and its epoch, replicas, ISR, offline replicas, log start/end offsets
    and config overrides."""
    console = Console(soft_wrap=True)
    with user_errors("topics describe"), open_admin(bootstrap_server, command_config=command_config) as admin:
        names = [name] if name is not None else sorted(admin.list_topics(internal=True))
        try:
            topics = list(admin.describe_topics(names).values())
        except UnknownTopicOrPartitionError:
            raise CommandError(f"Topic '{name}' does not exist") from None
        overrides = _config_overrides(admin, names)
        tps = [TopicPartition(t.name, p.partition) for t in topics for p in t.partitions]
        start = admin.list_offsets(dict.fromkeys(tps, OffsetSpec.earliest()))
        end = admin.list_offsets(dict.fromkeys(tps, OffsetSpec.latest()))
        for t in topics:
            _print_topic(console, t, {tp.partition: o.offset for tp, o in start.items() if tp.topic == t.name},
                         {tp.partition: o.offset for tp, o in end.items() if tp.topic == t.name},
                         None if overrides is None else overrides.get(t.name, {}))


def _config_overrides(admin: Admin, topics: list[str]) -> dict[str, dict[str, str]] | None:
    """Per-topic config overrides (DescribeConfigs); None if the broker lacks the API."""
    if not topics:
        return {}
    try:
        found = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t) for t in topics])
    except UnsupportedVersionError:
        return None
    return {
        resource.name: {n: "<sensitive>" if e.is_sensitive else str(e.value) for n, e in entries.items()
                        if e.source is ConfigSource.DYNAMIC_TOPIC_CONFIG}
        for resource, entries in found.items()
    }


def _print_topic(
    console: Console,
    t: TopicDescription,
    start: dict[int, int],
    end: dict[int, int],
    overrides: dict[str, str] | None,
) -> None:
    configs = (
        "(DescribeConfigs not supported by the broker)" if overrides is None
        else ",".join(f"{k}={v}" for k, v in sorted(overrides.items()))
    )
    console.print(
        f"Topic: {t.name}\tTopicId: {t.topic_id or '-'}\tPartitionCount: {len(t.partitions)}\t"
        f"ReplicationFactor: {t.replication_factor}\tConfigs: {configs}",
        highlight=False, markup=False,
    )
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for column in ("Partition", "Leader", "LeaderEpoch", "Replicas", "Isr", "Offline", "LogStartOffset",
                   "LogEndOffset"):
        table.add_column(column, justify="left" if column in ("Replicas", "Isr", "Offline") else "right")
    for p in t.partitions:
        table.add_row(
            str(p.partition), str(p.leader), str(p.leader_epoch) if p.leader_epoch >= 0 else "-",
            ",".join(map(str, p.replicas)) or "-", ",".join(map(str, p.isr)) or "-",
            ",".join(map(str, p.offline)) or "-", str(start.get(p.partition, "-")), str(end.get(p.partition, "-")),
        )
    console.print(table)


@topics_app.command("delete-records")
def delete_records(
    name: Annotated[str, typer.Argument(help="Topic name")],
    offset: Annotated[list[str], typer.Option(
        "--offset", metavar="[PARTITION:]OFFSET",
        help="Delete the records before OFFSET (-1: all of them) in PARTITION, or in every partition "
             "when no partition is given (repeatable)")],
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """Delete the records before an offset (DeleteRecords), like kafka-delete-records.sh: each
    partition's log start offset moves there and the segments below it are deleted."""
    console = table_console()
    with user_errors("topics delete-records"), open_admin(bootstrap_server, command_config=command_config) as admin:
        try:
            partitions = [p.partition for p in admin.describe_topics([name])[name].partitions]
        except UnknownTopicOrPartitionError:
            raise CommandError(f"Topic '{name}' does not exist") from None
        wanted = _records_to_delete(name, offset, partitions)
        try:
            done = admin.delete_records(wanted)
        except KafkaProtocolError as e:
            raise CommandError(f"cannot delete records of '{name}': {e}") from None
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for column in ("Topic", "Partition", "LowWatermark"):
        table.add_column(column, justify="left" if column == "Topic" else "right")
    for tp in sorted(done, key=lambda tp: tp.partition):
        table.add_row(tp.topic, str(tp.partition), str(done[tp].low_watermark))
    console.print(table)


def _records_to_delete(topic: str, specs: list[str], partitions: list[int]) -> dict[TopicPartition, RecordsToDelete]:
    out: dict[TopicPartition, RecordsToDelete] = {}
    for spec in specs:
        part, sep, value = spec.rpartition(":")
        try:
            targets = [int(part)] if sep else partitions
            before = int(value)
        except ValueError:
            raise CommandError(f"--offset expects [PARTITION:]OFFSET, got {spec!r}") from None
        for p in targets:
            if p not in partitions:
                raise CommandError(f"Topic '{topic}' has no partition {p}")
            out[TopicPartition(topic, p)] = RecordsToDelete(before)
    return out


@topics_app.command("delete")
def delete(
    name: Annotated[str, typer.Argument(help="Topic name")],
    if_exists: Annotated[bool, typer.Option("--if-exists", help="Succeed quietly if the topic is missing")] = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """Delete a topic (DeleteTopics)."""
    with user_errors("topics delete"), open_admin(bootstrap_server, command_config=command_config) as admin:
        try:
            admin.delete_topics([name])
        except KafkaProtocolError as e:
            if e.error_code == ErrorCode.unknown_topic_or_partition and if_exists:
                return
            raise _topic_error(name, int(e.error_code), e.message) from None
    typer.echo(f"Deleted topic {name}.")

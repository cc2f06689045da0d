"""``eoslog topics create|list|describe|delete``, like kafka-topics.sh.

Also holds the small metadata and offset look-ups that ``produce`` and ``consume``
share (``topic_metadata``, ``list_offsets``).
"""

from __future__ import annotations

import datetime
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
    parse_properties,
    user_errors,
)
from eoslog.client.connection import (
    ApiKey,
    BrokerConnection,
    KafkaProtocolError,
    build,
    raise_for_error,
    request_types,
)
from eoslog.protocol.errors import ErrorCode

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
TOPIC_RESOURCE = 2  # DescribeConfigs resource type
DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs config_source of a per-topic override
REQUEST_TIMEOUT = datetime.timedelta(seconds=30)

topics_app = typer.Typer(help="Create, list, describe and delete topics.", no_args_is_help=True)
app.add_typer(topics_app, name="topics")


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error_code: int


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    name: str
    topic_id: str | None
    internal: bool
    partitions: tuple[PartitionInfo, ...]

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


# -- look-ups shared with produce/consume ----------------------------------------------


def _topic_error(name: str, code: int, message: str | None = None) -> CommandError:
    if code == ErrorCode.unknown_topic_or_partition:
        return CommandError(f"Topic '{name}' does not exist")
    if code == ErrorCode.invalid_topic_exception:
        return CommandError(f"Topic name '{name}' is invalid" + (f": {message}" if message else ""))
    return CommandError(f"topic '{name}': {KafkaProtocolError(code, message)}")


def fetch_metadata(
    conn: BrokerConnection, names: list[str] | None, *, allow_auto_create: bool = False
) -> list[TopicMetadata]:
    """Metadata of ``names`` (None: every topic). Topics with an error raise CommandError."""
    version = conn.pick_version(ApiKey.METADATA, 12, wanted_min=1)
    m = request_types(ApiKey.METADATA, version)
    wanted = None if names is None else tuple(
        build(m.MetadataRequestTopic, name=n, topic_id=None) for n in names
    )
    response = conn.send(
        build(
            m.MetadataRequest, topics=wanted, allow_auto_topic_creation=allow_auto_create,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
    )
    out = []
    for t in response.topics:
        if t.error_code != ErrorCode.none:
            raise _topic_error(str(t.name), int(t.error_code))
        topic_id = getattr(t, "topic_id", None)
        partitions = tuple(
            sorted(
                (
                    PartitionInfo(
                        int(p.partition_index), int(p.leader_id),
                        tuple(int(r) for r in p.replica_nodes),
                        tuple(int(r) for r in p.isr_nodes), int(p.error_code),
                    )
                    for p in t.partitions
                ),
                key=lambda p: p.partition,
            )
        )
        out.append(
            TopicMetadata(
                str(t.name), str(topic_id) if topic_id is not None else None,
                bool(getattr(t, "is_internal", False)), partitions,
            )
        )
    return out


def topic_metadata(
    conn: BrokerConnection, name: str, *, allow_auto_create: bool = False
) -> TopicMetadata:
    """One topic's metadata; CommandError if it does not exist (and is not auto-created)."""
    found = fetch_metadata(conn, [name], allow_auto_create=allow_auto_create)
    if not found or not found[0].partitions:
        raise CommandError(f"Topic '{name}' does not exist")
    return found[0]


def list_offsets(
    conn: BrokerConnection,
    topic: str,
    partitions: list[int],
    timestamp: int,
    *,
    isolation_level: int = 0,
) -> dict[int, int]:
    """ListOffsets for ``timestamp`` (-2 earliest, -1 latest) → {partition: offset}."""
    version = conn.pick_version(ApiKey.LIST_OFFSETS, 7)
    m = request_types(ApiKey.LIST_OFFSETS, version)
    request = build(
        m.ListOffsetsRequest, replica_id=-1, isolation_level=isolation_level,
        topics=(
            build(
                m.ListOffsetsTopic, name=topic,
                partitions=tuple(
                    build(m.ListOffsetsPartition, partition_index=p, timestamp=timestamp,
                          current_leader_epoch=-1)
                    for p in partitions
                ),
            ),
        ),
    )
    out: dict[int, int] = {}
    for t in conn.send(request).topics:
        for p in t.partitions:
            if p.error_code != ErrorCode.none:
                raise _topic_error(f"{topic}-{int(p.partition_index)}", int(p.error_code))
            out[int(p.partition_index)] = int(p.offset)
    return out


def describe_config_overrides(conn: BrokerConnection, topics: list[str]) -> dict[str, dict[str, str]] | None:
    """Per-topic config overrides via DescribeConfigs; None if the broker lacks the API."""
    if not topics or not conn.supports(ApiKey.DESCRIBE_CONFIGS):
        return None
    version = conn.pick_version(ApiKey.DESCRIBE_CONFIGS, 4)
    m = request_types(ApiKey.DESCRIBE_CONFIGS, version)
    request = build(
        m.DescribeConfigsRequest,
        resources=tuple(
            build(m.DescribeConfigsResource, resource_type=TOPIC_RESOURCE, resource_name=t,
                  configuration_keys=None)
            for t in topics
        ),
        include_synonyms=False, include_documentation=False,
    )
    out: dict[str, dict[str, str]] = {}
    for result in conn.send(request).results:
        raise_for_error(result.error_code, result.error_message)
        out[str(result.resource_name)] = {
            str(c.name): "<sensitive>" if c.is_sensitive else str(c.value)
            for c in result.configs
            if int(c.config_source) == DYNAMIC_TOPIC_CONFIG
        }
    return out


# -- commands ------------------------------------------------------------------------


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
) -> None:
    """Create a topic (CreateTopics)."""
    with user_errors("topics create"):
        configs = parse_properties(config, "--config")
        with connect(bootstrap_server) as conn:
            version = conn.pick_version(ApiKey.CREATE_TOPICS, 7)
            if partitions is None and version < 4:
                raise CommandError("--partitions is required by this broker (CreateTopics < v4)", 2)
            m = request_types(ApiKey.CREATE_TOPICS, version)
            topic = build(
                m.CreatableTopic, name=name,
                num_partitions=partitions if partitions is not None else -1,
                replication_factor=replication_factor if replication_factor is not None else -1,
                assignments=(),
                configs=tuple(
                    build(m.CreatableTopicConfig, name=k, value=v) for k, v in configs.items()
                ),
            )
            response = conn.send(
                build(m.CreateTopicsRequest, topics=(topic,), timeout=REQUEST_TIMEOUT,
                      validate_only=False)
            )
            result = response.topics[0]
            code = int(result.error_code)
            if code == ErrorCode.topic_already_exists and if_not_exists:
                return
            if code == ErrorCode.topic_already_exists:
                raise CommandError(f"Topic '{name}' already exists")
            if code != ErrorCode.none:
                raise CommandError(
                    f"cannot create topic '{name}': "
                    f"{KafkaProtocolError(code, getattr(result, 'error_message', None))}"
                )
    typer.echo(f"Created topic {name}.")


@topics_app.command("list")
def list_topics(
    exclude_internal: Annotated[
        bool, typer.Option("--exclude-internal", help="Leave out internal topics (__consumer_offsets, ...)")
    ] = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
) -> None:
    """List topic names, one per line."""
    with user_errors("topics list"), connect(bootstrap_server) as conn:
        topics = fetch_metadata(conn, None)
    for t in sorted(topics, key=lambda t: t.name):
        if not (exclude_internal and t.internal):
            typer.echo(t.name)


@topics_app.command("describe")
def describe(
    name: Annotated[str | None, typer.Argument(help="Topic name (default: all topics)")] = None,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
) -> None:
    """Partitions, leader, replicas, ISR, log start/end offsets and config overrides."""
    console = Console(soft_wrap=True)
    with user_errors("topics describe"), connect(bootstrap_server) as conn:
        topics = sorted(fetch_metadata(conn, None if name is None else [name]), key=lambda t: t.name)
        if name is not None and not topics:
            raise CommandError(f"Topic '{name}' does not exist")
        overrides = describe_config_overrides(conn, [t.name for t in topics])
        for t in topics:
            ids = [p.partition for p in t.partitions]
            start = list_offsets(conn, t.name, ids, EARLIEST_TIMESTAMP) if ids else {}
            end = list_offsets(conn, t.name, ids, LATEST_TIMESTAMP) if ids else {}
            _print_topic(console, t, start, end, None if overrides is None else overrides.get(t.name, {}))


def _print_topic(
    console: Console,
    t: TopicMetadata,
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
    for column in ("Partition", "Leader", "Replicas", "Isr", "LogStartOffset", "LogEndOffset"):
        table.add_column(column, justify="right" if column != "Replicas" else "left")
    for p in t.partitions:
        table.add_row(
            str(p.partition), str(p.leader), ",".join(map(str, p.replicas)) or "-",
            ",".join(map(str, p.isr)) or "-", str(start.get(p.partition, "-")),
            str(end.get(p.partition, "-")),
        )
    console.print(table)


@topics_app.command("delete")
def delete(
    name: Annotated[str, typer.Argument(help="Topic name")],
    if_exists: Annotated[bool, typer.Option("--if-exists", help="Succeed quietly if the topic is missing")] = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
) -> None:
    """Delete a topic (DeleteTopics)."""
    with user_errors("topics delete"), connect(bootstrap_server) as conn:
        version = conn.pick_version(ApiKey.DELETE_TOPICS, 6)
        m = request_types(ApiKey.DELETE_TOPICS, version)
        request: Any
        if version >= 6:
            request = build(
                m.DeleteTopicsRequest, timeout=REQUEST_TIMEOUT,
                topics=(build(m.DeleteTopicState, name=name, topic_id=None),),
            )
        else:
            request = build(m.DeleteTopicsRequest, topic_names=(name,), timeout=REQUEST_TIMEOUT)
        result = conn.send(request).responses[0]
        code = int(result.error_code)
        if code == ErrorCode.unknown_topic_or_partition and if_exists:
            return
        if code != ErrorCode.none:
            raise _topic_error(name, code, getattr(result, "error_message", None))
    typer.echo(f"Deleted topic {name}.")

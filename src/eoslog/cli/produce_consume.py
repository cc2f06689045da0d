"""``eoslog produce`` and ``eoslog consume``: line-oriented, like Kafka's console tools,
on eoslog's public client (``eoslog.client.Producer`` / ``Consumer``).

``produce`` reads stdin one record per line (``KEY<sep>VALUE`` with --key-separator,
as kafka-console-producer's parse.key/key.separator) and sends them with a producer whose
batches leave when full (``--batch-size``) or when the input goes idle. ``consume`` assigns
the topic's partitions (no group: no offsets are kept) and writes one line per record (the
value, optionally preceded by partition, offset, key); the consumer skips control batches
and, with read_committed, aborted and open transactions.
"""

from __future__ import annotations

import os
import select
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import IO, Annotated

import typer
from rich.console import Console
from rich.table import Table

from eoslog.cli.common import (
    DEFAULT_BOOTSTRAP_SERVER,
    BootstrapServer,
    CommandConfig,
    CommandError,
    app,
    check_reachable,
    command_settings,
    open_admin,
    user_errors,
)
from eoslog.client import Consumer, Producer, RecordMetadata, TopicPartition
from eoslog.client.errors import KafkaError, KafkaTimeoutError, UnknownTopicOrPartitionError
from eoslog.client.partitioner import RoundRobin, partition_for_key
from eoslog.client.producer.futures import RecordFuture

DEFAULT_BATCH_BYTES = 16384  # Kafka's batch.size
MAX_REQUEST_BYTES = 1024 * 1024  # Kafka's max.request.size
FETCH_MAX_BYTES = 50 * 1024 * 1024  # Kafka's fetch.max.bytes
PARTITION_MAX_BYTES = 1024 * 1024  # Kafka's max.partition.fetch.bytes
FETCH_MAX_WAIT_MS = 500  # Kafka's fetch.max.wait.ms
METADATA_WAIT_MS = 10_000  # how long produce waits for its topic (auto-created or not)
CLIENT_ID = "eoslog-cli"


class Acks(StrEnum):
    all = "all"
    minus_one = "-1"
    one = "1"
    zero = "0"


class Compression(StrEnum):
    none = "none"
    gzip = "gzip"
    snappy = "snappy"
    lz4 = "lz4"
    zstd = "zstd"


class IsolationLevel(StrEnum):
    read_uncommitted = "read_uncommitted"
    read_committed = "read_committed"


# -- produce -------------------------------------------------------------------------


@dataclass(slots=True)
class PartitionStats:
    records: int = 0
    first_offset: int | None = None
    last_offset: int | None = None


class _Sent:
    """The records handed to the producer and, once delivered, what the broker said."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.pending: list[RecordFuture] = []
        self.stats: dict[int, PartitionStats] = {}
        self.sent = 0

    def settle(self, producer: Producer) -> None:
        """Flush, then count every delivered record; the first failure stops the command."""
        producer.flush()
        pending, self.pending = self.pending, []
        for future in pending:
            try:
                meta: RecordMetadata = future.result(0)
            except KafkaError as e:
                partition = getattr(future, "partition", None)
                where = f"{self.topic}-{partition}" if partition is not None else self.topic
                raise CommandError(f"producing to {where} failed: {e} ({self.sent} records acknowledged before)") \
                    from None
            s = self.stats.setdefault(meta.partition, PartitionStats())
            s.records += 1
            if meta.offset >= 0:  # acks=0: nothing comes back, offsets stay unknown
                s.first_offset = meta.offset if s.first_offset is None else min(s.first_offset, meta.offset)
                s.last_offset = meta.offset if s.last_offset is None else max(s.last_offset, meta.offset)
            self.sent += 1


def _read_lines(stream: IO[bytes]) -> Iterator[tuple[bytes, bool]]:
    """Lines of ``stream`` without their line ending, each with ``idle``: True when no
    further input is waiting, so what was read can be sent now (an interactive
    terminal or a slow pipe then sees its records go out line by line)."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        fd = -1
    if fd < 0:  # not a real file (e.g. tests): plain reads, no idleness
        for raw in iter(stream.readline, b""):
            yield raw.rstrip(b"\n").rstrip(b"\r"), False
        return
    buf = b""
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        buf += chunk
        *lines, buf = buf.split(b"\n")
        idle_known = False
        for i, line in enumerate(lines):
            last = i == len(lines) - 1
            idle = False
            if last and not buf and not idle_known:
                idle = not select.select([fd], [], [], 0)[0]
                idle_known = True
            yield line.rstrip(b"\r"), idle
    if buf:
        yield buf.rstrip(b"\r"), True


# Kafka's console tools take --topic; eoslog's took the topic as an argument: both work.
TopicOption = Annotated[str | None, typer.Option("--topic", help="The topic (or give it as the argument)")]


def one_topic(argument: str | None, option: str | None) -> str:
    if argument is not None and option is not None and argument != option:
        raise typer.BadParameter(f"two topics given: {argument!r} and --topic {option!r}", param_hint="--topic")
    topic = argument if argument is not None else option
    if not topic:
        raise typer.BadParameter("give the topic, as an argument or with --topic", param_hint="TOPIC")
    return topic


@app.command("produce")
def produce(
    topic_arg: Annotated[str | None, typer.Argument(help="Topic to write to")] = None,
    topic_opt: TopicOption = None,
    partition: Annotated[
        int | None, typer.Option("--partition", min=0, help="Send every record to this partition")
    ] = None,
    key_separator: Annotated[
        str | None,
        typer.Option("--key-separator", help="Each line is KEY<SEP>VALUE (kafka-console-producer's parse.key)"),
    ] = None,
    acks: Annotated[Acks, typer.Option("--acks", help="all/-1, 1 or 0")] = Acks.all,
    compression: Annotated[
        Compression, typer.Option("--compression", help="Batch compression codec")
    ] = Compression.none,
    batch_size: Annotated[
        int, typer.Option("--batch-size", min=1, help="Bytes of records per batch (batch.size)")
    ] = DEFAULT_BATCH_BYTES,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """Produce one record per stdin line; keys via --key-separator.

    Keyed records go to murmur2(key) % partitions like Kafka's default partitioner,
    keyless ones round-robin (or all to --partition). A summary is printed at the end.
    """
    topic = one_topic(topic_arg, topic_opt)
    separator = key_separator.encode() if key_separator is not None else None
    if separator == b"":
        raise typer.BadParameter("must not be empty", param_hint="--key-separator")
    with user_errors("produce"):
        check_reachable(bootstrap_server)
        producer = Producer({
            "bootstrap.servers": bootstrap_server, "client.id": CLIENT_ID,
            "acks": "all" if acks is Acks.minus_one else acks.value,
            "compression.type": compression.value, "batch.size": batch_size, "linger.ms": 1000,
            # Plain batches, as Kafka's console producer sends them: no producer id.
            "enable.idempotence": False, "max.request.size": MAX_REQUEST_BYTES,
            "max.block.ms": METADATA_WAIT_MS, **command_settings(command_config),
        })
        sent = _Sent(topic)
        try:
            _produce_lines(producer, topic, partition, separator, sent)
        finally:
            producer.close(0)
            _print_summary(topic, sent, acks, compression)


def _produce_lines(producer: Producer, topic: str, partition: int | None, separator: bytes | None,
                   sent: _Sent) -> None:
    try:
        n_partitions = len(producer.partitions_for(topic))  # auto-creates the topic if the broker does
    except KafkaTimeoutError:
        raise CommandError(f"Topic '{topic}' does not exist") from None
    if partition is not None and partition >= n_partitions:
        raise CommandError(f"--partition {partition}: topic '{topic}' has {n_partitions} partition(s)", 2)
    round_robin = RoundRobin()
    try:
        for number, (line, idle) in enumerate(_read_lines(sys.stdin.buffer), start=1):
            key: bytes | None = None
            value = line
            if separator is not None:
                key, sep, value = line.partition(separator)
                if not sep:
                    raise CommandError(
                        f"No key separator found on line number {number}: '{line.decode('utf-8', 'replace')}'"
                    )
            if partition is not None:
                target = partition
            elif key is not None:
                target = partition_for_key(key, n_partitions)
            else:
                target = round_robin.partition(n_partitions)
            sent.pending.append(producer.send(topic, value, key, partition=target))
            if idle:
                sent.settle(producer)
    except (CommandError, KeyboardInterrupt):
        # Lines read before bad input or Ctrl-C are still sent, as Kafka's console producer
        # does when it closes.
        sent.settle(producer)
        raise
    sent.settle(producer)


def _print_summary(topic: str, sent: _Sent, acks: Acks, compression: Compression) -> None:
    console = Console(stderr=True, soft_wrap=True)
    console.print(
        f"Produced {sent.sent} records to topic {topic} (acks={acks.value}, compression={compression.value})",
        highlight=False, markup=False,
    )
    if not sent.stats:
        return
    table = Table(show_edge=False, pad_edge=False, box=None)
    for column in ("Partition", "Records", "FirstOffset", "LastOffset"):
        table.add_column(column, justify="right")
    for p, s in sorted(sent.stats.items()):
        table.add_row(
            str(p), str(s.records),
            "-" if s.first_offset is None else str(s.first_offset),
            "-" if s.last_offset is None else str(s.last_offset),
        )
    console.print(table)


# -- consume -------------------------------------------------------------------------


class _Output:
    def __init__(self, print_partition: bool, print_offset: bool, print_key: bool,
                 separator: bytes) -> None:
        self.print_partition = print_partition
        self.print_offset = print_offset
        self.print_key = print_key
        self.separator = separator
        self.out = sys.stdout.buffer
        self.count = 0

    def line(self, partition: int, offset: int, key: bytes | None, value: bytes | None) -> None:
        parts: list[bytes] = []
        if self.print_partition:
            parts.append(b"Partition:%d" % partition)
        if self.print_offset:
            parts.append(b"Offset:%d" % offset)
        if self.print_key:
            parts.append(b"null" if key is None else key)
        parts.append(b"null" if value is None else value)
        self.out.write(self.separator.join(parts) + b"\n")
        self.count += 1


EARLIEST, LATEST = -2, -1  # --offset earliest / latest (ListOffsets' special timestamps)


def _parse_start(offset: str | None) -> int | None:
    if offset is None:
        return None
    if offset == "earliest":
        return EARLIEST
    if offset == "latest":
        return LATEST
    try:
        value = int(offset)
    except ValueError:
        value = -1
    if value < 0:
        raise typer.BadParameter(
            f"{offset!r} is not a non-negative offset, 'earliest' or 'latest'", param_hint="--offset"
        )
    return value


@app.command("consume")
def consume(
    topic_arg: Annotated[str | None, typer.Argument(help="Topic to read")] = None,
    topic_opt: TopicOption = None,
    from_beginning: Annotated[
        bool, typer.Option("--from-beginning", help="Start at the earliest offset instead of the end")
    ] = False,
    partition: Annotated[int | None, typer.Option("--partition", min=0, help="Read only this partition")] = None,
    offset: Annotated[
        str | None,
        typer.Option("--offset", help="Start offset (a number, 'earliest' or 'latest'); needs --partition"),
    ] = None,
    max_messages: Annotated[
        int | None, typer.Option("--max-messages", min=1, help="Stop after this many records")
    ] = None,
    timeout_ms: Annotated[
        int | None, typer.Option("--timeout-ms", min=0, help="Stop after this long without records")
    ] = None,
    print_key: Annotated[bool, typer.Option("--print-key", help="Print KEY<SEP>VALUE")] = False,
    print_offset: Annotated[bool, typer.Option("--print-offset", help="Prefix each line with Offset:N")] = False,
    print_partition: Annotated[
        bool, typer.Option("--print-partition", help="Prefix each line with Partition:N")
    ] = False,
    key_separator: Annotated[str, typer.Option("--key-separator", help="Separator between printed fields")] = "\t",
    isolation_level: Annotated[
        IsolationLevel, typer.Option("--isolation-level", help="read_committed hides aborted and open transactions")
    ] = IsolationLevel.read_uncommitted,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """Print records to stdout, one line each (the value, like kafka-console-consumer)."""
    topic = one_topic(topic_arg, topic_opt)
    start = _parse_start(offset)
    if start is not None and partition is None:
        raise typer.BadParameter("--offset needs --partition", param_hint="--offset")
    if start is not None and from_beginning:
        raise typer.BadParameter("--offset and --from-beginning exclude each other", param_hint="--offset")
    output = _Output(print_partition, print_offset, print_key, key_separator.encode())
    started = False
    try:
        with user_errors("consume"):
            ids = _partitions_of(bootstrap_server, topic, partition, command_config)
            consumer = Consumer({
                "bootstrap.servers": bootstrap_server, "client.id": CLIENT_ID, "group.id": None,
                "enable.auto.commit": False, "isolation.level": isolation_level.value,
                # Where a position out of range goes (Kafka's console consumer: the start it was given).
                "auto.offset.reset": "earliest" if from_beginning or start == EARLIEST else "latest",
                "fetch.max.wait.ms": FETCH_MAX_WAIT_MS, "fetch.max.bytes": FETCH_MAX_BYTES,
                "max.partition.fetch.bytes": PARTITION_MAX_BYTES, **command_settings(command_config),
            })
            try:
                tps = [TopicPartition(topic, p) for p in ids]
                consumer.assign(tps)
                if start is not None and start >= 0:
                    for tp in tps:
                        consumer.seek(tp, start)
                elif from_beginning or start == EARLIEST:
                    consumer.seek_to_beginning(tps)
                else:
                    consumer.seek_to_end(tps)
                for tp in tps:
                    consumer.position(tp)  # resolved now: records produced after this are read
                started = True
                _consume_loop(consumer, output, max_messages, timeout_ms)
            finally:
                consumer.close()
    except BrokenPipeError:  # `eoslog consume ... | head`: the reader is gone, stop quietly
        _silence_stdout()
    finally:
        if started:  # like kafka-console-consumer, once reading has begun
            typer.echo(f"Processed a total of {output.count} messages", err=True)


def _partitions_of(bootstrap_server: str, topic: str, partition: int | None,
                   command_config: Path | None) -> list[int]:
    """The partitions to read; CommandError for an unknown topic or partition."""
    with open_admin(bootstrap_server, command_config=command_config) as admin:
        try:
            described = admin.describe_topics([topic])[topic]
        except UnknownTopicOrPartitionError:
            raise CommandError(f"Topic '{topic}' does not exist") from None
    ids = sorted(p.partition for p in described.partitions)
    if partition is None:
        return ids
    if partition not in ids:
        raise CommandError(f"--partition {partition}: topic '{topic}' has {len(ids)} partition(s)", 2)
    return [partition]


def _consume_loop(consumer: Consumer, output: _Output, max_messages: int | None, timeout_ms: int | None) -> None:
    """Print what the consumer returns until ``max_messages`` or ``timeout_ms`` without records."""
    idle_deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
    while True:
        wait_s = FETCH_MAX_WAIT_MS / 1000
        if idle_deadline is not None:
            wait_s = max(0.0, min(wait_s, idle_deadline - time.monotonic()))
        records = consumer.poll(wait_s)
        for r in records:
            if max_messages is not None and output.count >= max_messages:
                break
            output.line(r.partition, r.offset, r.key, r.value)
        sys.stdout.buffer.flush()
        if max_messages is not None and output.count >= max_messages:
            return
        if records and timeout_ms is not None:
            idle_deadline = time.monotonic() + timeout_ms / 1000
        if idle_deadline is not None and time.monotonic() >= idle_deadline:
            return


def _silence_stdout() -> None:
    """After EPIPE, point stdout at /dev/null so the interpreter's final flush is quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)

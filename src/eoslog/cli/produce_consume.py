"""``eoslog produce`` and ``eoslog consume``: line-oriented, like Kafka's console tools.

``produce`` reads stdin one record per line (``KEY<sep>VALUE`` with --key-separator,
as kafka-console-producer's parse.key/key.separator), groups the records per partition
into record batches and sends them with Produce. ``consume`` long-polls with Fetch and
writes one line per record (the value, optionally preceded by partition, offset, key).
Both speak through one ``BrokerConnection``; neither keeps offsets in a group.
"""

from __future__ import annotations

import datetime
import os
import select
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import IO, Annotated

import typer
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
from eoslog.cli.topics import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    TopicMetadata,
    list_offsets,
    topic_metadata,
)
from eoslog.client.connection import (
    ApiKey,
    BrokerConnection,
    KafkaProtocolError,
    build,
    request_types,
)
from eoslog.client.partitioner import RoundRobin, partition_for_key
from eoslog.protocol.errors import ErrorCode
from eoslog.records import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    CompressionType,
    ControlRecordType,
    InvalidRecordError,
    build_batch,
    decode_records,
    parse_control_record,
    read_batch_header,
)
from eoslog.records.batch import LOG_OVERHEAD, MAGIC_V2, compute_crc

REQUEST_TIMEOUT_S = 30.0
DEFAULT_BATCH_BYTES = 16384  # Kafka's batch.size
MAX_REQUEST_BYTES = 1024 * 1024  # Kafka's max.request.size
FETCH_MAX_BYTES = 50 * 1024 * 1024  # Kafka's fetch.max.bytes
PARTITION_MAX_BYTES = 1024 * 1024  # Kafka's max.partition.fetch.bytes
FETCH_MAX_WAIT_MS = 500  # Kafka's fetch.max.wait.ms


class Acks(StrEnum):
    all = "all"
    minus_one = "-1"
    one = "1"
    zero = "0"

    @property
    def wire(self) -> int:
        return {"all": -1, "-1": -1, "1": 1, "0": 0}[self.value]


class Compression(StrEnum):
    none = "none"
    gzip = "gzip"
    snappy = "snappy"
    lz4 = "lz4"
    zstd = "zstd"


class IsolationLevel(StrEnum):
    read_uncommitted = "read_uncommitted"
    read_committed = "read_committed"

    @property
    def wire(self) -> int:
        return 1 if self is IsolationLevel.read_committed else 0


# -- produce -------------------------------------------------------------------------

Pending = list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]]


@dataclass(slots=True)
class PartitionStats:
    records: int = 0
    first_offset: int | None = None
    last_offset: int | None = None


@dataclass
class _Accumulator:
    """Per-partition batches waiting to be sent; a batch leaves when it reaches
    ``batch_bytes``, when the input goes idle, or at the end."""

    conn: BrokerConnection
    topic: str
    acks: int
    compression: CompressionType
    batch_bytes: int
    pending: dict[int, Pending] = field(default_factory=dict)
    pending_bytes: dict[int, int] = field(default_factory=dict)
    timestamps: dict[int, list[int]] = field(default_factory=dict)
    stats: dict[int, PartitionStats] = field(default_factory=dict)
    sent: int = 0

    def add(self, partition: int, key: bytes | None, value: bytes) -> None:
        self.pending.setdefault(partition, []).append((key, value, ()))
        self.timestamps.setdefault(partition, []).append(time.time_ns() // 1_000_000)
        size = self.pending_bytes.get(partition, 0) + len(value) + len(key or b"") + 16
        self.pending_bytes[partition] = size
        if size >= self.batch_bytes:
            self.flush()

    def flush(self) -> None:
        """Send every pending batch, in requests of at most MAX_REQUEST_BYTES."""
        batches: list[tuple[int, bytes, int]] = []
        for partition, records in self.pending.items():
            batch = build_batch(
                records, timestamp=self.timestamps[partition][0],
                timestamps=self.timestamps[partition], compression=self.compression,
            )
            batches.append((partition, batch, len(records)))
        self.pending.clear()
        self.pending_bytes.clear()
        self.timestamps.clear()
        request: list[tuple[int, bytes, int]] = []
        size = 0
        for item in batches:
            if request and size + len(item[1]) > MAX_REQUEST_BYTES:
                self._send(request)
                request, size = [], 0
            request.append(item)
            size += len(item[1])
        if request:
            self._send(request)

    def _send(self, batches: list[tuple[int, bytes, int]]) -> None:
        version = self.conn.pick_version(ApiKey.PRODUCE, 9, wanted_min=3)
        m = request_types(ApiKey.PRODUCE, version)
        request = build(
            m.ProduceRequest, transactional_id=None, acks=self.acks,
            timeout=datetime.timedelta(seconds=REQUEST_TIMEOUT_S),
            topic_data=(
                build(
                    m.TopicProduceData, name=self.topic,
                    partition_data=tuple(
                        build(m.PartitionProduceData, index=p, records=b) for p, b, _ in batches
                    ),
                ),
            ),
        )
        response = self.conn.send(request, timeout_s=REQUEST_TIMEOUT_S + 5)
        counts = {p: n for p, _, n in batches}
        if response is None:  # acks=0: nothing comes back, offsets stay unknown
            for p, n in counts.items():
                self.stats.setdefault(p, PartitionStats()).records += n
            self.sent += sum(counts.values())
            return
        for t in response.responses:
            for pr in t.partition_responses:
                p = int(pr.index)
                if pr.error_code != ErrorCode.none:
                    raise CommandError(
                        f"producing to {self.topic}-{p} failed: "
                        f"{KafkaProtocolError(int(pr.error_code), getattr(pr, 'error_message', None))}"
                        f" ({self.sent} records acknowledged before)"
                    )
                s = self.stats.setdefault(p, PartitionStats())
                n = counts[p]
                base = int(pr.base_offset)
                s.records += n
                s.first_offset = base if s.first_offset is None else min(s.first_offset, base)
                s.last_offset = base + n - 1
                self.sent += n


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


@app.command("produce")
def produce(
    topic: Annotated[str, typer.Argument(help="Topic to write to")],
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
) -> None:
    """Produce one record per stdin line; keys via --key-separator.

    Keyed records go to murmur2(key) % partitions like Kafka's default partitioner,
    keyless ones round-robin (or all to --partition). A summary is printed at the end.
    """
    separator = key_separator.encode() if key_separator is not None else None
    if separator == b"":
        raise typer.BadParameter("must not be empty", param_hint="--key-separator")
    with user_errors("produce"), connect(bootstrap_server) as conn:
        meta = topic_metadata(conn, topic, allow_auto_create=True)
        n_partitions = len(meta.partitions)
        if partition is not None and partition >= n_partitions:
            raise CommandError(
                f"--partition {partition}: topic '{topic}' has {n_partitions} partition(s)", 2
            )
        acc = _Accumulator(conn, topic, acks.wire, CompressionType.from_name(compression.value),
                           batch_size)
        round_robin = RoundRobin()
        try:
            for number, (line, idle) in enumerate(_read_lines(sys.stdin.buffer), start=1):
                key: bytes | None = None
                value = line
                if separator is not None:
                    key, sep, value = line.partition(separator)
                    if not sep:
                        raise CommandError(
                            f"No key separator found on line number {number}: "
                            f"'{line.decode('utf-8', 'replace')}'"
                        )
                if partition is not None:
                    target = partition
                elif key is not None:
                    target = partition_for_key(key, n_partitions)
                else:
                    target = round_robin.partition(n_partitions)
                acc.add(target, key, value)
                if idle:
                    acc.flush()
        except (CommandError, KeyboardInterrupt):
            # Lines read before bad input or Ctrl-C are still sent, as Kafka's console
            # producer does when it closes.
            acc.flush()
            _print_summary(meta, acc, acks, compression)
            raise
        acc.flush()
        _print_summary(meta, acc, acks, compression)


def _print_summary(meta: TopicMetadata, acc: _Accumulator, acks: Acks, compression: Compression) -> None:
    console = Console(stderr=True, soft_wrap=True)
    console.print(
        f"Produced {acc.sent} records to topic {meta.name} "
        f"(acks={acks.value}, compression={compression.value})",
        highlight=False, markup=False,
    )
    if not acc.stats:
        return
    table = Table(show_edge=False, pad_edge=False, box=None)
    for column in ("Partition", "Records", "FirstOffset", "LastOffset"):
        table.add_column(column, justify="right")
    for p, s in sorted(acc.stats.items()):
        table.add_row(
            str(p), str(s.records),
            "-" if s.first_offset is None else str(s.first_offset),
            "-" if s.last_offset is None else str(s.last_offset),
        )
    console.print(table)


# -- consume -------------------------------------------------------------------------


@dataclass(slots=True)
class _PartitionState:
    position: int
    # read_committed: (producer id, first offset) of aborted transactions not yet reached,
    # and the producers whose open transaction is known to be aborted.
    aborted_ahead: list[tuple[int, int]] = field(default_factory=list)
    aborted_producers: set[int] = field(default_factory=set)


def _complete_batches(records: bytes) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of every whole batch; a partial batch at the end is left out
    (the broker may cut the last batch at the byte limit)."""
    pos = 0
    while len(records) - pos >= BATCH_HEADER_SIZE:
        h = read_batch_header(records, pos)
        if h.magic != MAGIC_V2 or h.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
            raise CommandError(f"corrupt record batch at offset {h.base_offset} (magic {h.magic})")
        if pos + h.size > len(records):
            return
        if compute_crc(records, pos, h.size) != h.crc:
            raise CommandError(f"record batch at offset {h.base_offset} fails its CRC check")
        yield pos, h
        pos += h.size


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


def _parse_start(offset: str | None) -> int | None:
    if offset is None:
        return None
    if offset == "earliest":
        return EARLIEST_TIMESTAMP
    if offset == "latest":
        return LATEST_TIMESTAMP
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
    topic: Annotated[str, typer.Argument(help="Topic to read")],
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
) -> None:
    """Print records to stdout, one line each (the value, like kafka-console-consumer)."""
    start = _parse_start(offset)
    if start is not None and partition is None:
        raise typer.BadParameter("--offset needs --partition", param_hint="--offset")
    if start is not None and from_beginning:
        raise typer.BadParameter("--offset and --from-beginning exclude each other", param_hint="--offset")
    output = _Output(print_partition, print_offset, print_key, key_separator.encode())
    started = False
    try:
        with user_errors("consume"), connect(bootstrap_server) as conn:
            meta = topic_metadata(conn, topic)
            ids = [p.partition for p in meta.partitions]
            if partition is not None:
                if partition not in ids:
                    raise CommandError(f"--partition {partition}: topic '{topic}' has {len(ids)} partition(s)", 2)
                ids = [partition]
            reset = EARLIEST_TIMESTAMP if from_beginning else LATEST_TIMESTAMP
            if start is None or start < 0:
                first = start if start is not None else reset
                offsets = list_offsets(conn, topic, ids, first, isolation_level=isolation_level.wire)
                states = {p: _PartitionState(offsets[p]) for p in ids}
            else:
                states = {p: _PartitionState(start) for p in ids}
            started = True
            _consume_loop(
                conn, topic, states, output, max_messages, timeout_ms, isolation_level, reset
            )
    except BrokenPipeError:  # `eoslog consume ... | head`: the reader is gone, stop quietly
        _silence_stdout()
    finally:
        if started:  # like kafka-console-consumer, once reading has begun
            typer.echo(f"Processed a total of {output.count} messages", err=True)


def _consume_loop(
    conn: BrokerConnection,
    topic: str,
    states: dict[int, _PartitionState],
    output: _Output,
    max_messages: int | None,
    timeout_ms: int | None,
    isolation_level: IsolationLevel,
    reset: int,
) -> int:
    version = conn.pick_version(ApiKey.FETCH, 12, wanted_min=4)
    m = request_types(ApiKey.FETCH, version)
    read_committed = isolation_level is IsolationLevel.read_committed
    consumed = 0
    idle_deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
    while True:
        wait_ms = FETCH_MAX_WAIT_MS
        if idle_deadline is not None:
            wait_ms = max(0, min(wait_ms, int((idle_deadline - time.monotonic()) * 1000)))
        request = build(
            m.FetchRequest, replica_id=-1, max_wait=datetime.timedelta(milliseconds=wait_ms),
            min_bytes=1, max_bytes=FETCH_MAX_BYTES, isolation_level=isolation_level.wire,
            session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="",
            topics=(
                build(
                    m.FetchTopic, topic=topic,
                    partitions=tuple(
                        build(m.FetchPartition, partition=p, fetch_offset=s.position,
                              partition_max_bytes=PARTITION_MAX_BYTES, log_start_offset=-1,
                              current_leader_epoch=-1, last_fetched_epoch=-1)
                        for p, s in states.items()
                    ),
                ),
            ),
        )
        response = conn.send(request, timeout_s=REQUEST_TIMEOUT_S + wait_ms / 1000)
        if response.error_code != ErrorCode.none:
            raise KafkaProtocolError(int(response.error_code), "Fetch")
        got = 0
        for t in response.responses:
            for pd in t.partitions:
                p = int(pd.partition_index)
                state = states[p]
                code = int(pd.error_code)
                if code == ErrorCode.offset_out_of_range:
                    new = list_offsets(conn, topic, [p], reset, isolation_level=isolation_level.wire)[p]
                    typer.echo(
                        f"eoslog consume: offset {state.position} is out of range for "
                        f"{topic}-{p}; resetting to {new}", err=True,
                    )
                    state.position = new
                    continue
                if code != ErrorCode.none:
                    raise CommandError(f"fetching {topic}-{p} failed: {KafkaProtocolError(code)}")
                if read_committed and pd.aborted_transactions:
                    state.aborted_ahead = sorted(
                        (int(a.producer_id), int(a.first_offset)) for a in pd.aborted_transactions
                    )
                limit = None if max_messages is None else max_messages - consumed - got
                got += _emit_partition(p, bytes(pd.records or b""), state, output, read_committed, limit)
                if max_messages is not None and consumed + got >= max_messages:
                    break
        consumed += got
        sys.stdout.buffer.flush()
        if max_messages is not None and consumed >= max_messages:
            return consumed
        if got and timeout_ms is not None:
            idle_deadline = time.monotonic() + timeout_ms / 1000
        if idle_deadline is not None and time.monotonic() >= idle_deadline:
            return consumed


def _emit_partition(
    partition: int,
    records: bytes,
    state: _PartitionState,
    output: _Output,
    read_committed: bool,
    limit: int | None,
) -> int:
    """Print the records of one partition's fetched data; returns how many were printed.

    Control batches are skipped. With read_committed, batches of transactions the broker
    listed as aborted are skipped too, as Kafka's consumer does: a producer's batches are
    dropped from its aborted transaction's first offset until its ABORT marker.
    """
    printed = 0
    for pos, h in _complete_batches(records):
        if h.last_offset < state.position:
            continue
        if read_committed and h.producer_id >= 0:
            while state.aborted_ahead and state.aborted_ahead[0][1] <= h.last_offset:
                state.aborted_producers.add(state.aborted_ahead.pop(0)[0])
            if h.is_control:
                try:
                    marker, _ = parse_control_record(decode_records(records[pos : pos + h.size])[0])
                except (InvalidRecordError, IndexError, ValueError):
                    marker = None
                if marker is ControlRecordType.ABORT:
                    state.aborted_producers.discard(h.producer_id)
            elif h.is_transactional and h.producer_id in state.aborted_producers:
                state.position = h.next_offset
                continue
        if h.is_control:
            state.position = h.next_offset
            continue
        try:
            batch_records = decode_records(records[pos : pos + h.size])
        except (InvalidRecordError, ValueError) as e:
            raise CommandError(f"cannot decode batch at offset {h.base_offset}: {e}") from None
        for r in batch_records:
            if r.offset < state.position:
                continue
            if limit is not None and printed >= limit:
                return printed
            output.line(partition, r.offset, r.key, r.value)
            printed += 1
            state.position = r.offset + 1
        state.position = max(state.position, h.next_offset)
    return printed


def _silence_stdout() -> None:
    """After EPIPE, point stdout at /dev/null so the interpreter's final flush is quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)

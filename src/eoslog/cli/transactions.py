"""``eoslog transactions list|describe|describe-producers|abort|find-hanging``, like Kafka's
kafka-transactions.sh (``org.apache.kafka.tools.TransactionsCommand``).

The tool for a *hanging* transaction: one that is open in a partition (its producer has a
``CurrentTransactionStartOffset``) while no transaction coordinator will ever finish it,
so the partition's last stable offset stays pinned and read_committed consumers stop.

- ``list`` / ``describe`` ask the coordinators (ListTransactions on every broker,
  DescribeTransactions on the transactional id's coordinator).
- ``describe-producers`` asks a partition's leader (DescribeProducers).
- ``find-hanging`` is Kafka's search: the partitions' open transactions whose producer
  wrote nothing for longer than ``--max-transaction-timeout`` are candidates; a candidate
  hangs unless a coordinator lists its producer id *and* still counts that partition in
  the transaction (DescribeTransactions names the partitions of an ongoing transaction
  and those still awaiting markers).
- ``abort`` writes the ABORT marker itself, as Kafka's Admin.abortTransaction does:
  WriteTxnMarkers to the partition's leader with the producer id, producer epoch and
  coordinator epoch, taken from DescribeProducers when ``--start-offset`` is given.

Two-phase commit (KIP-939): a transactional id whose timeout is Integer.MAX_VALUE takes part
in an external two-phase commit; the coordinator never aborts its transaction on a timeout,
so a prepared one pins the LSO until its external coordinator commits or aborts it.
``list`` and ``describe`` mark such transactions (``two_phase_commit`` in JSON, a note on
stderr for an open one), and ``find-hanging`` reports a prepared one it finds open in a
partition separately: it is not hanging, and ``abort`` must not be used on it.

Every request goes through the admin client (``eoslog.client.Admin``: routing to leaders
and coordinators, retries while a coordinator loads); the search and the abort are
``eoslog.tools.transactions`` (the console calls them too); this module parses and prints.
What it must never do: abort anything ``abort`` was not pointed at, or decide a transaction
hangs without having asked the coordinators.
"""

from __future__ import annotations

import enum
import json
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
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
    user_errors,
)
from eoslog.tools.transactions import (
    DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
    OPEN_STATES,
    Cluster,
    TransactionDescription,
    candidate_open_transactions,
    describe_producers,
    describe_transactions,
    hanging_transactions,
    list_transactions,
    write_abort_marker,
)

transactions_app = typer.Typer(
    help="List and describe transactions, find hanging ones and abort them (kafka-transactions.sh).",
    no_args_is_help=True,
)
app.add_typer(transactions_app, name="transactions")


class OutputFormat(enum.StrEnum):
    table = "table"
    json = "json"


Output = Annotated[
    OutputFormat, typer.Option("--output", "-O", help="table (for people) or json (for scripts)"),
]


@contextmanager
def open_cluster(bootstrap_server: str, command_config: Path | None = None) -> Iterator[Cluster]:
    with open_admin(bootstrap_server, command_config=command_config) as admin:
        yield Cluster(admin)


def note_two_phase_commit(descriptions: Iterable[TransactionDescription]) -> None:
    """A note on stderr for each open two-phase-commit transaction: it is not hanging."""
    for d in descriptions:
        if d.two_phase_commit and d.state in OPEN_STATES:
            typer.echo(f"note: {d.transactional_id} takes part in a two-phase commit (KIP-939): its {d.state} "
                       "transaction is finished by its external coordinator, never by a timeout", err=True)


# -- output ---------------------------------------------------------------------------------------


def _console() -> Console:
    """Tables are never cut to 80 columns when the output goes to a pipe or a file."""
    return Console(soft_wrap=True, width=None if sys.stdout.isatty() else 1000)


def _print_table(headers: Sequence[str], rows: Iterable[Sequence[object]], numeric: Iterable[str] = ()) -> None:
    right = set(numeric)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for h in headers:
        table.add_column(h, justify="right" if h in right else "left")
    for row in rows:
        table.add_row(*("None" if v is None else str(v) for v in row))
    _console().print(table)


def _print_json(value: object) -> None:
    typer.echo(json.dumps(value, indent=2))


def _now_ms() -> int:
    return int(time.time() * 1000)


# -- commands -------------------------------------------------------------------------------------


@transactions_app.command("list")
def list_command(
    state: Annotated[list[str] | None, typer.Option(
        "--state", help="Only transactions in this state (Ongoing, PrepareCommit, ...); repeatable")] = None,
    producer_id: Annotated[list[int] | None, typer.Option(
        "--producer-id", help="Only transactions of this producer id; repeatable")] = None,
    duration_filter: Annotated[int, typer.Option(
        "--duration-filter", help="Only transactions running longer than this many ms (-1: all)")] = -1,
    transactional_id_pattern: Annotated[str | None, typer.Option(
        "--transactional-id-pattern", help="Only transactional ids matching this regular expression")] = None,
    output: Output = OutputFormat.table,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """List the transactions every coordinator knows (ListTransactions)."""
    with user_errors("transactions list"), open_cluster(bootstrap_server, command_config) as cluster:
        listings = list_transactions(cluster, state or [], producer_id or [], duration_filter,
                                     transactional_id_pattern)
        # ListTransactions does not carry the timeout that marks a 2PC transactional id.
        described = describe_transactions(cluster, [x.transactional_id for x in listings]) if listings else {}
    two_pc = {t for t, d in described.items() if isinstance(d, TransactionDescription) and d.two_phase_commit}
    note_two_phase_commit(d for x in listings if isinstance(d := described.get(x.transactional_id),
                                                            TransactionDescription) and d.state == x.state)
    if output is OutputFormat.json:
        _print_json([{**asdict(x), "two_phase_commit": x.transactional_id in two_pc} for x in listings])
        return
    _print_table(("TransactionalId", "Coordinator", "ProducerId", "TransactionState"),
                 ((x.transactional_id, x.coordinator_id, x.producer_id, x.state) for x in listings),
                 numeric=("Coordinator", "ProducerId"))


@transactions_app.command("describe")
def describe_command(
    transactional_id: Annotated[list[str], typer.Option(
        "--transactional-id", help="Transactional id; repeatable")],
    output: Output = OutputFormat.table,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """Describe transactional ids at their coordinator (DescribeTransactions).

    Producer id and epoch, state, timeout, when the current transaction started, for how long, its partitions.
    """
    with user_errors("transactions describe"), open_cluster(bootstrap_server, command_config) as cluster:
        found = describe_transactions(cluster, transactional_id)
        now = _now_ms()
        for txn_id in transactional_id:
            result = found.get(txn_id)
            if not isinstance(result, TransactionDescription):
                raise CommandError(f"Failed to describe transaction state of transactional-id `{txn_id}`: "
                                   f"{result or 'no answer from its coordinator'}")
    descriptions = [d for t in dict.fromkeys(transactional_id) if isinstance(d := found[t], TransactionDescription)]
    note_two_phase_commit(descriptions)
    if output is OutputFormat.json:
        _print_json([
            {**asdict(d), "partitions": [{"topic": t, "partition": p} for t, p in d.partitions],
             "duration_ms": None if d.start_time_ms is None else now - d.start_time_ms,
             "two_phase_commit": d.two_phase_commit}
            for d in descriptions
        ])
        return
    _print_table(
        ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
         "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"),
        ((d.coordinator_id, d.transactional_id, d.producer_id, d.producer_epoch, d.state, d.timeout_ms,
          d.start_time_ms, None if d.start_time_ms is None else now - d.start_time_ms,
          ",".join(f"{t}-{p}" for t, p in d.partitions)) for d in descriptions),
        numeric=("CoordinatorId", "ProducerId", "ProducerEpoch", "TransactionTimeoutMs",
                 "CurrentTransactionStartTimeMs", "TransactionDurationMs"),
    )


_PRODUCER_HEADERS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                     "CurrentTransactionStartOffset")


@transactions_app.command("describe-producers")
def describe_producers_command(
    topic: Annotated[str, typer.Option("--topic", help="Topic name")],
    partition: Annotated[int, typer.Option("--partition", min=0, help="Partition number")],
    broker_id: Annotated[int | None, typer.Option(
        "--broker-id", help="Ask this replica instead of the leader")] = None,
    output: Output = OutputFormat.table,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """Describe the active producers of a partition (DescribeProducers).

    CurrentTransactionStartOffset is where the producer's open transaction begins.
    """
    with user_errors("transactions describe-producers"), open_cluster(bootstrap_server, command_config) as cluster:
        node = broker_id if broker_id is not None else cluster.leader(topic, partition)
        producers = describe_producers(cluster, [(topic, partition)], node).get((topic, partition), [])
    producers.sort(key=lambda p: p.producer_id)
    if output is OutputFormat.json:
        _print_json([asdict(p) for p in producers])
        return
    _print_table(_PRODUCER_HEADERS,
                 ((p.producer_id, p.producer_epoch, p.coordinator_epoch, p.last_sequence, p.last_timestamp,
                   p.current_txn_start_offset) for p in producers),
                 numeric=_PRODUCER_HEADERS)


@transactions_app.command("abort")
def abort_command(
    topic: Annotated[str, typer.Option("--topic", help="Topic name")],
    partition: Annotated[int, typer.Option("--partition", min=0, help="Partition number")],
    start_offset: Annotated[int | None, typer.Option(
        "--start-offset", help="Start offset of the transaction to abort (what find-hanging shows)")] = None,
    producer_id: Annotated[int | None, typer.Option(
        "--producer-id", help="Producer id (instead of --start-offset, with both epochs)")] = None,
    producer_epoch: Annotated[int | None, typer.Option("--producer-epoch", help="Producer epoch")] = None,
    coordinator_epoch: Annotated[int | None, typer.Option("--coordinator-epoch", help="Coordinator epoch")] = None,
    output: Output = OutputFormat.table,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """Abort a hanging transaction in one partition (WriteTxnMarkers).

    Writes the ABORT marker at the partition's leader. Only for transactions find-hanging lists.
    """
    with user_errors("transactions abort"), open_cluster(bootstrap_server, command_config) as cluster:
        if start_offset is None and producer_id is None:
            raise CommandError("The transaction to abort must be identified either with --start-offset or "
                               "with --producer-id, --producer-epoch and --coordinator-epoch", 2)
        leader = cluster.leader(topic, partition)
        if start_offset is not None:
            producers = describe_producers(cluster, [(topic, partition)], leader).get((topic, partition), [])
            found = next((p for p in producers if p.current_txn_start_offset == start_offset), None)
            if found is None:
                raise CommandError(f"Could not find any open transactions starting at offset {start_offset} "
                                   f"on partition {topic}-{partition}")
            producer_id, producer_epoch, coordinator_epoch = (
                found.producer_id, found.producer_epoch, found.coordinator_epoch)
        if producer_epoch is None:
            raise CommandError("Missing required argument --producer-epoch", 2)
        if coordinator_epoch is None:
            raise CommandError("Missing required argument --coordinator-epoch", 2)
        assert producer_id is not None
        # A producer that hung in its first transaction has no coordinator epoch yet (-1):
        # 0 is no greater than any epoch a coordinator could have had, as in Kafka's tool.
        coordinator_epoch = max(coordinator_epoch, 0)
        write_abort_marker(cluster, topic, partition, producer_id, producer_epoch, coordinator_epoch)
    result = {"topic": topic, "partition": partition, "producer_id": producer_id, "producer_epoch": producer_epoch,
              "coordinator_epoch": coordinator_epoch, "start_offset": start_offset}
    if output is OutputFormat.json:
        _print_json(result)
        return
    typer.echo(f"Aborted the transaction of producer {producer_id} (epoch {producer_epoch}, coordinator epoch "
               f"{coordinator_epoch}) on {topic}-{partition}"
               + (f", started at offset {start_offset}." if start_offset is not None else "."))


@transactions_app.command("find-hanging")
def find_hanging_command(
    broker_id: Annotated[int | None, typer.Option(
        "--broker-id", help="Search the partitions this broker holds a replica of")] = None,
    topic: Annotated[str | None, typer.Option("--topic", help="Search only this topic")] = None,
    partition: Annotated[int | None, typer.Option(
        "--partition", min=0, help="Search only this partition (needs --topic)")] = None,
    max_transaction_timeout: Annotated[int, typer.Option(
        "--max-transaction-timeout", min=0,
        help="Minutes: open transactions idle for longer are candidates (the largest transaction "
             "timeout any producer uses, at most transaction.max.timeout.ms)")] = DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
    output: Output = OutputFormat.table,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """Find hanging transactions: open in a partition, unknown to every coordinator.

    It pins the last stable offset of its partition: read_committed consumers stop there. Abort it with `abort`.
    """
    with user_errors("transactions find-hanging"):
        if topic is None and broker_id is None:
            raise CommandError("The `find-hanging` command requires either --topic or --broker-id to limit "
                               "the scope of the search", 2)
        if partition is not None and topic is None:
            raise CommandError("The --partition argument requires --topic to be provided", 2)
        with open_cluster(bootstrap_server, command_config) as cluster:
            if broker_id is not None and broker_id not in cluster.brokers:
                raise CommandError(f"broker {broker_id} is not in the cluster (brokers: "
                                   f"{', '.join(str(n) for n in sorted(cluster.brokers))})")
            partitions = cluster.leaders(None if topic is None else [topic], broker_id)
            if partition is not None:
                if (topic, partition) not in partitions:
                    raise CommandError(f"Partition {topic}-{partition} does not exist"
                                       + ("" if broker_id is None else f" on broker {broker_id}"))
                partitions = {(str(topic), partition): partitions[(str(topic), partition)]}
            now = _now_ms()
            candidates = candidate_open_transactions(cluster, partitions, broker_id,
                                                     max_transaction_timeout * 60_000, now)
            hanging, prepared = hanging_transactions(cluster, candidates)
    for c, d in prepared:
        typer.echo(f"not hanging: {c.topic}-{c.partition} from offset {c.producer.current_txn_start_offset} is the "
                   f"prepared two-phase-commit transaction of {d.transactional_id} (producer {d.producer_id} epoch "
                   f"{d.producer_epoch}), awaiting its external coordinator; do not abort it here", err=True)
    if output is OutputFormat.json:
        _print_json([
            {"topic": h.topic, "partition": h.partition, "producer_id": h.producer.producer_id,
             "producer_epoch": h.producer.producer_epoch, "coordinator_epoch": h.producer.coordinator_epoch,
             "start_offset": h.producer.current_txn_start_offset, "last_timestamp": h.producer.last_timestamp,
             "duration_ms": now - h.producer.last_timestamp}
            for h in hanging
        ])
        return
    headers = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
               "LastTimestamp", "Duration(min)")
    _print_table(headers, ((h.topic, h.partition, h.producer.producer_id, h.producer.producer_epoch,
                            h.producer.coordinator_epoch, h.producer.current_txn_start_offset,
                            h.producer.last_timestamp, (now - h.producer.last_timestamp) // 60_000)
                           for h in hanging), numeric=headers[1:])
    for h in hanging:
        typer.echo(f"abort with: eoslog transactions abort --topic {h.topic} --partition {h.partition} "
                   f"--start-offset {h.producer.current_txn_start_offset}", err=True)

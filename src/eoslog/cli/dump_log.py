"""``eoslog dump-log``: print a segment's batches, records and index entries.

Output follows kafka-dump-log.sh (DumpLogSegments) line for line, so people and
scripts used to Kafka read it the same way::

    Dumping 00000000000000000000.log
    Log starting offset: 0
    baseOffset: 0 lastOffset: 0 count: 1 baseSequence: 0 lastSequence: 0 producerId: 4000 ...
    | offset: 0 CreateTime: 1602... keySize: 1 valueSize: 3 sequence: 0 headerKeys: [] key: k payload: v

Files are only read, never opened for writing (a LogSegment would create and rewrite
index files), so dumping the log of a running broker is safe. A torn or corrupt tail
is reported as Kafka does ("Found N invalid bytes at the end of ..."), not raised.
"""

from __future__ import annotations

import os
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, TextIO

import typer
from rich.console import Console
from rich.table import Table

from eoslog.cli.common import app
from eoslog.records.batch import (
    BATCH_HEADER_SIZE,
    DELETE_HORIZON_MASK,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_SEQUENCE,
    BatchHeader,
    ControlRecordType,
    InvalidRecordError,
    Record,
    TimestampType,
    compute_crc,
    control_marker,
    decode_records,
    parse_control_record,
    read_batch_header,
)
from eoslog.storage.producer_state import ProducerStateEntry, ProducerStateManager
from eoslog.storage.txn_index import VERSION as TXN_INDEX_VERSION
from eoslog.storage.txn_index import CorruptTxnIndexError, TxnIndex

RECORD_INDENT = "|"
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_TIMESTAMP_TYPE_NAMES = {
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}


class DumpError(Exception):
    """The file cannot be dumped at all (missing, unknown kind, unreadable name)."""


def _base_offset(path: Path) -> int:
    try:
        return int(path.name.split(".")[0])
    except ValueError:
        raise DumpError(f"{path.name}: a segment file name is <baseOffset>{path.suffix}") from None


# -- .log ----------------------------------------------------------------------------


def _scan_batches(fd: int, size: int) -> Iterator[tuple[int, BatchHeader | None, str | None]]:
    """(position, header, None) per whole batch; finally (position, None, reason) if
    the file does not end on a batch boundary."""
    pos = 0
    while pos < size:
        if size - pos < BATCH_HEADER_SIZE:
            yield pos, None, f"{size - pos} trailing bytes are too short for a batch header"
            return
        h = read_batch_header(os.pread(fd, BATCH_HEADER_SIZE, pos))
        if h.magic != MAGIC_V2:
            yield pos, None, f"batch at position {pos} has magic {h.magic}; only magic 2 is supported"
            return
        if h.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
            yield pos, None, f"batch at position {pos} has an invalid length {h.batch_length}"
            return
        if pos + h.size > size:
            yield pos, None, f"batch at position {pos} claims {h.size} bytes, {size - pos} remain"
            return
        yield pos, h, None
        pos += h.size


def _batch_line(h: BatchHeader, position: int, valid: bool) -> str:
    horizon = (
        f"OptionalLong[{h.base_timestamp}]" if h.attributes & DELETE_HORIZON_MASK
        else "OptionalLong.empty"
    )
    return (
        f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
        f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} "
        f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
        f"partitionLeaderEpoch: {h.partition_leader_epoch} "
        f"isTransactional: {str(h.is_transactional).lower()} "
        f"isControl: {str(h.is_control).lower()} deleteHorizonMs: {horizon} "
        f"position: {position} {_TIMESTAMP_TYPE_NAMES[h.timestamp_type]}: {h.max_timestamp} "
        f"size: {h.size} magic: {h.magic} compresscodec: {h.compression.name.lower()} "
        f"crc: {h.crc} isvalid: {str(valid).lower()}"
    )


def _record_line(h: BatchHeader, r: Record, print_data: bool) -> str:
    timestamp = h.max_timestamp if h.timestamp_type is TimestampType.LOG_APPEND_TIME else r.timestamp
    offset_delta = r.offset - h.base_offset
    # Kafka's DefaultRecord.sequence: the batch's base sequence plus the offset delta.
    sequence = (
        NO_SEQUENCE if h.base_sequence == NO_SEQUENCE
        else (h.base_sequence + offset_delta) % (2**31)
    )
    line = (
        f"{RECORD_INDENT} offset: {r.offset} {_TIMESTAMP_TYPE_NAMES[h.timestamp_type]}: {timestamp} "
        f"keySize: {-1 if r.key is None else len(r.key)} "
        f"valueSize: {-1 if r.value is None else len(r.value)} "
        f"sequence: {sequence} headerKeys: [{','.join(k for k, _ in r.headers)}]"
    )
    if h.is_control:
        try:
            marker, coordinator_epoch = parse_control_record(r)
            line += f" endTxnMarker: {marker.name} coordinatorEpoch: {coordinator_epoch}"
        except (InvalidRecordError, ValueError):
            type_id = struct.unpack_from(">h", r.key, 2)[0] if r.key and len(r.key) >= 4 else -1
            line += f" controlType: UNKNOWN({type_id})"
    elif print_data:
        if r.key is not None:
            line += f" key: {r.key.decode('utf-8', 'replace')}"
        if r.value is not None:
            line += f" payload: {r.value.decode('utf-8', 'replace')}"
    return line


def dump_log(path: Path, out: TextIO, *, print_data_log: bool = False,
             deep_iteration: bool = False) -> int:
    """Dump one ``.log`` segment; returns the number of invalid trailing bytes."""
    out.write(f"Log starting offset: {_base_offset(path)}\n")
    deep = print_data_log or deep_iteration
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        valid_bytes = 0
        reason: str | None = None
        for position, h, problem in _scan_batches(fd, size):
            if h is None:
                reason = problem
                break
            batch = os.pread(fd, h.size, position)
            out.write(_batch_line(h, position, compute_crc(batch, 0, h.size) == h.crc) + "\n")
            if deep:
                try:
                    records = decode_records(batch)
                except (InvalidRecordError, ValueError) as e:
                    out.write(f"{RECORD_INDENT} cannot decode records: {e}\n")
                    records = []
                for r in records:
                    out.write(_record_line(h, r, print_data_log) + "\n")
            valid_bytes += h.size
    finally:
        os.close(fd)
    trailing = size - valid_bytes
    if trailing > 0:
        out.write(f"Found {trailing} invalid bytes at the end of {path.name}\n")
        if reason:
            sys.stderr.write(f"{path.name}: {reason}\n")
    return trailing


# -- .index / .timeindex -------------------------------------------------------------


def _log_headers(log_path: Path) -> list[tuple[int, BatchHeader]]:
    """(position, header) of the whole batches of the segment's log, if it exists."""
    if not log_path.exists():
        return []
    fd = os.open(log_path, os.O_RDONLY)
    try:
        return [(p, h) for p, h, _ in _scan_batches(fd, os.fstat(fd).st_size) if h is not None]
    finally:
        os.close(fd)


def dump_index(path: Path, out: TextIO) -> list[str]:
    """Print ``offset: O position: P`` per entry; returns problems found (for stderr).

    eoslog indexes the *base* offset of the batch at each position, so an entry is
    consistent when the batch found at its position holds its offset.
    """
    base = _base_offset(path)
    data = path.read_bytes()
    if not data:
        out.write(f"{path} is empty.\n")
        return []
    by_position = {p: h for p, h in _log_headers(path.with_suffix(".log"))}
    problems: list[str] = []
    usable = len(data) - len(data) % _OFFSET_ENTRY.size
    for i, (rel, position) in enumerate(_OFFSET_ENTRY.iter_unpack(data[:usable])):
        if rel == 0 and i > 0:  # Kafka's rule for preallocated, zero-filled index files
            break
        offset = base + rel
        h = by_position.get(position)
        if h is None:
            problems.append(f"  Index offset: {offset}, position {position} is not the start of a batch")
        elif not h.base_offset <= offset <= h.last_offset:
            problems.append(f"  Index offset: {offset}, log offset: {h.base_offset}")
        out.write(f"offset: {offset} position: {position}\n")
    if usable != len(data):
        problems.append(f"  {len(data) - usable} trailing bytes do not form an index entry")
    return [f"Mismatches in :{path.resolve()}", *problems] if problems else []


def dump_time_index(path: Path, out: TextIO) -> list[str]:
    """Print ``timestamp: T offset: O`` per entry; returns problems found (for stderr). An empty
    time index prints nothing, as kafka-dump-log.sh's."""
    base = _base_offset(path)
    data = path.read_bytes()
    if not data:
        return []
    headers = _log_headers(path.with_suffix(".log"))
    log_end = headers[-1][1].next_offset if headers else None
    out_of_order: list[str] = []
    not_found: list[str] = []
    previous = -1
    usable = len(data) - len(data) % _TIME_ENTRY.size
    for i, (timestamp, rel) in enumerate(_TIME_ENTRY.iter_unpack(data[:usable])):
        if rel == 0 and i > 0:
            break
        offset = base + rel
        if previous >= timestamp:
            out_of_order.append(f"  Index timestamp: {timestamp}, Previously indexed timestamp: {previous}")
        if log_end is not None and offset >= log_end:
            not_found.append(f"Indexed offset: {offset}, found log offset: -1")
        out.write(f"timestamp: {timestamp} offset: {offset}\n")
        previous = timestamp
    problems: list[str] = []
    if out_of_order:
        problems += [f"Found out of order timestamp in :{path.resolve()}", *out_of_order]
    if not_found:
        problems += ["The following indexed offsets are not found in the log.", *not_found]
    if usable != len(data):
        problems.append(f"{path.name}: {len(data) - usable} trailing bytes do not form an index entry")
    return problems


def dump_txn_index(path: Path, out: TextIO) -> None:
    """Print each aborted transaction of a .txnindex as kafka-dump-log.sh does."""
    index = TxnIndex(path)
    try:
        index.load()
    except CorruptTxnIndexError as e:
        raise DumpError(str(e)) from None
    for t in index.entries:
        out.write(f"version: {TXN_INDEX_VERSION} producerId: {t.producer_id} firstOffset: {t.first_offset} "
                  f"lastOffset: {t.last_offset} lastStableOffset: {t.last_stable_offset}\n")


# -- producer state (.snapshot files, --producers) --------------------------------------


def _producer_line(e: ProducerStateEntry) -> str:
    """One producer as kafka-dump-log.sh prints a producer snapshot entry."""
    txn = "None" if e.current_txn_first_offset < 0 else str(e.current_txn_first_offset)
    line = (
        f"producerId: {e.producer_id} producerEpoch: {e.producer_epoch} "
        f"coordinatorEpoch: {e.coordinator_epoch} currentTxnFirstOffset: {txn} "
        f"lastTimestamp: {e.last_timestamp}"
    )
    if e.batches:
        b = e.batches[-1]
        line += (
            f" firstSequence: {b.first_seq} lastSequence: {b.last_seq} lastOffset: {b.last_offset} "
            f"offsetDelta: {b.offset_delta} timestamp: {b.timestamp}"
        )
    return line


def dump_snapshot(path: Path, out: TextIO) -> None:
    try:
        producers = ProducerStateManager.read_snapshot(path)
    except (ValueError, struct.error) as e:
        raise DumpError(f"{path.name}: {e}") from None
    for entry in producers.values():
        out.write(_producer_line(entry) + "\n")


def partition_producer_state(directory: Path) -> tuple[ProducerStateManager, int]:
    """The producer state of a partition directory, computed read-only as the broker
    loads it: the newest readable snapshot, then a replay of the batches after it.
    Returns the state and the offset of the snapshot used (-1 for none)."""
    state = ProducerStateManager(directory, directory.name, expiration_ms=2**62)
    snapshot_offset = -1
    snapshots = sorted(directory.glob("*.snapshot"), key=lambda p: p.name, reverse=True)
    for snap in snapshots:
        try:
            state.producers = ProducerStateManager.read_snapshot(snap)
        except (ValueError, struct.error):
            continue
        snapshot_offset = state.map_end_offset = _base_offset(snap)
        break
    batches: list[tuple[BatchHeader, tuple[bool, int] | None]] = []
    for segment in sorted(directory.glob("*.log"), key=lambda p: p.name):
        with open(segment, "rb") as fh:
            for pos, h in _log_headers(segment):
                marker = None
                if h.is_control and h.next_offset > state.map_end_offset:
                    marker = control_marker(os.pread(fh.fileno(), h.size, pos))
                batches.append((h, marker))
    state.replay(batches)
    return state, snapshot_offset


def dump_producers(directory: Path, out: TextIO) -> None:
    state, snapshot_offset = partition_producer_state(directory)
    source = f"snapshot at offset {snapshot_offset}" if snapshot_offset >= 0 else "no snapshot"
    table = Table(title=f"Producers of {directory.name} ({source} + log replay to offset "
                        f"{state.map_end_offset})")
    for column in ("producerId", "epoch", "lastSequence", "lastOffset", "lastTimestamp",
                   "coordinatorEpoch", "txnStartOffset", "cachedBatches"):
        table.add_column(column, justify="right", no_wrap=True)
    for e in sorted(state.producers.values(), key=lambda e: e.producer_id):
        table.add_row(
            str(e.producer_id), str(e.producer_epoch), str(e.last_seq), str(e.last_offset),
            str(e.last_timestamp), str(e.coordinator_epoch),
            "-" if e.current_txn_first_offset < 0 else str(e.current_txn_first_offset),
            " ".join(f"{b.first_seq}-{b.last_seq}" for b in e.batches),
        )
    # Off a terminal (pipes, files) rich assumes 80 columns; the rows must not be cut there.
    Console(file=out, width=None if out.isatty() else 250).print(table)


# -- command -------------------------------------------------------------------------


@app.command("dump-log")
def dump_log_command(
    paths: Annotated[
        list[Path], typer.Argument(help=".log segment(s), or .index/.timeindex/.txnindex/.snapshot files",
                                   metavar="PATH...")
    ],
    print_data_log: Annotated[
        bool, typer.Option("--print-data-log", help="Print each record with its key and payload")
    ] = False,
    deep_iteration: Annotated[
        bool, typer.Option("--deep-iteration", help="Print each record's metadata, without data")
    ] = False,
    producers: Annotated[
        bool, typer.Option("--producers", help="PATH is a partition directory: print its producer state")
    ] = False,
) -> None:
    """Print the batches of a segment (and with --print-data-log, its records), like
    kafka-dump-log.sh; also .index, .timeindex, .txnindex and producer .snapshot files, and with
    --producers the producer state of a partition directory."""
    failed = False
    out = sys.stdout
    if producers:
        for path in paths:
            if not path.is_dir() or not list(path.glob("*.log")):
                typer.echo(f"eoslog dump-log: error: {path}: not a partition directory", err=True)
                raise typer.Exit(1)
            dump_producers(path, out)
        return
    for path in paths:
        if not path.is_file():
            typer.echo(f"eoslog dump-log: error: {path}: no such file", err=True)
            failed = True
            continue
        if path.suffix not in (".log", ".index", ".timeindex", ".txnindex", ".snapshot"):
            typer.echo(
                f"eoslog dump-log: error: {path}: not a .log, .index, .timeindex, .txnindex or .snapshot file",
                err=True,
            )
            failed = True
            continue
        out.write(f"Dumping {path}\n")
        try:
            if path.suffix == ".log":
                dump_log(path, out, print_data_log=print_data_log, deep_iteration=deep_iteration)
                problems: list[str] = []
            elif path.suffix == ".snapshot":
                dump_snapshot(path, out)
                problems = []
            elif path.suffix == ".txnindex":
                dump_txn_index(path, out)
                problems = []
            elif path.suffix == ".index":
                problems = dump_index(path, out)
            else:
                problems = dump_time_index(path, out)
        except (DumpError, OSError) as e:
            typer.echo(f"eoslog dump-log: error: {e}", err=True)
            failed = True
            continue
        out.flush()
        for line in problems:
            typer.echo(line, err=True)
    if failed:
        raise typer.Exit(1)


__all__ = [
    "ControlRecordType", "dump_index", "dump_log", "dump_producers", "dump_snapshot", "dump_time_index",
    "dump_txn_index",
    "partition_producer_state",
]

"""``spark.read.format("eoslog")`` and ``spark.readStream.format("eoslog")``: the readers.

What it owns: turning options into offset ranges and ranges into rows, as Spark's Kafka
source does — resolving the subscription to partitions, ``earliest``/``latest``/JSON to
offsets (``latest`` is the last stable offset under read_committed, so an open
transaction pins the end of every batch at its first offset), the streaming offsets Spark
checkpoints (``{"topic": {"0": 123}}``), ``maxOffsetsPerTrigger`` through Spark's
``ReadLimit``, ``Trigger.AvailableNow``, ``minPartitions`` splits, and data loss (a range
that starts before the log start offset, a partition that went away): an error by
default, a warning and a skip with ``failOnDataLoss=false``. Each Spark task reads one
range with ``LogReader`` and yields Arrow record batches.

What it must never do: keep broker connections in what Spark pickles (readers and input
partitions are shipped to Python workers), or filter records itself — ``LogReader``
returns only what a read_committed consumer may see.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from eoslog.client.types import TopicPartition
from eoslog.spark.log_reader import LogReader, OffsetOutOfRange
from eoslog.spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetRange,
    OffsetSpec,
    PartitionOffsets,
    from_json,
    rate_limit,
    split_ranges,
    to_json,
)
from eoslog.spark.options import OptionError, SourceOptions, Subscription
from eoslog.spark.schema import source_schema, to_record_batch

log = logging.getLogger(__name__)

# Rows per Arrow batch handed to Spark: big enough to amortise the hand-over, small
# enough that one batch of 1 KB records stays a few MB.
ARROW_BATCH_ROWS = 4096

_DATA_LOSS_HINT = (
    "Some data may have been lost because they are not available in the log any more; either the data "
    "was aged out by retention or the topic may have been deleted before all the data in the topic was "
    'processed. If you want your query to go on in such cases, set the source option "failOnDataLoss" '
    'to "false".'
)


class DataLossError(RuntimeError):
    pass


@dataclass(frozen=True)
class OffsetRangePartition(InputPartition):
    """One Spark task's work: offsets ``[start, end)`` of ``topic``-``partition``."""

    topic: str
    partition: int
    start: int
    end: int


def _open(options: SourceOptions) -> LogReader:
    return LogReader(options.bootstrap_servers, read_committed=options.read_committed, settings=options.kafka)


def _report_data_loss(options: SourceOptions, message: str) -> None:
    """Spark's reportDataLoss: fail the query, or warn and go on (failOnDataLoss=false)."""
    if options.fail_on_data_loss:
        raise DataLossError(f"{message}. {_DATA_LOSS_HINT}")
    log.warning("%s. Some data may have been lost (failOnDataLoss=false: going on).", message)


def subscribed_partitions(reader: LogReader, subscription: Subscription) -> list[TopicPartition]:
    """The partitions the subscription covers now (a topic that does not exist has none)."""
    if subscription.kind == "assign":
        return list(subscription.partitions)
    if subscription.kind == "subscribe":
        counts = reader.topics(subscription.topics)
    else:
        counts = {t: n for t, n in reader.topics(None).items() if subscription.matches(t)}
    return sorted(TopicPartition(t, p) for t, n in counts.items() for p in range(n))


def resolve_offsets(reader: LogReader, options: SourceOptions, spec: OffsetSpec, tps: Sequence[TopicPartition],
                    option: str) -> PartitionOffsets:
    """``earliest``/``latest``/JSON → an offset for every partition in ``tps``."""
    if spec == "earliest":
        return reader.beginning_offsets(tps)
    if spec == "latest":
        return reader.end_offsets(tps)
    assert isinstance(spec, dict)
    if set(spec) != set(tps):
        raise OptionError(
            f"if {option} contains specific offsets, you must specify all TopicPartitions. Use -1 for latest, "
            f"-2 for earliest. Specified: {sorted(f'{t}-{p}' for t, p in spec)} "
            f"Assigned: {sorted(f'{t}-{p}' for t, p in tps)}"
        )
    earliest = reader.beginning_offsets(tps)
    latest = reader.end_offsets(tps)
    out: PartitionOffsets = {}
    for tp, offset in spec.items():
        if offset == EARLIEST:
            out[tp] = earliest[tp]
        elif offset == LATEST:
            out[tp] = latest[tp]
        elif earliest[tp] <= offset <= latest[tp]:
            out[tp] = offset
        else:
            # Kafka's auto.offset.reset=earliest, as Spark's driver consumer.
            _report_data_loss(options, f"{option} for {tp.topic}-{tp.partition} was {offset} but the partition's "
                                       f"offsets are [{earliest[tp]}, {latest[tp]}]; resetting to {earliest[tp]}")
            out[tp] = earliest[tp]
    return out


def plan_ranges(reader: LogReader, options: SourceOptions, start: Mapping[TopicPartition, int],
                end: Mapping[TopicPartition, int]) -> list[OffsetRangePartition]:
    """The tasks of one batch: a partition new since ``start`` starts at its earliest offset
    (as Spark's Kafka source); a partition gone since, or one whose end is now before its
    start (a deleted and re-created topic), is data loss."""
    new = [tp for tp in end if tp not in start]
    from_offsets = {**dict(start), **reader.beginning_offsets(new)} if new else dict(start)
    gone = sorted(tp for tp in start if tp not in end)
    if gone:
        _report_data_loss(options, f"{', '.join(f'{t}-{p}' for t, p in gone)} are gone")
    ranges: list[OffsetRange] = []
    for tp, until in sorted(end.items()):
        begin = from_offsets[tp]
        if until < begin:
            _report_data_loss(options, f"{tp.topic}-{tp.partition}'s offset was changed from {begin} to {until}")
            continue
        ranges.append(OffsetRange(tp, begin, until))
    return [OffsetRangePartition(r.tp.topic, r.tp.partition, r.start, r.end)
            for r in split_ranges(ranges, options.min_partitions)]


def read_range(options: SourceOptions, part: OffsetRangePartition) -> Iterator[pa.RecordBatch]:
    """The rows of one task, as Arrow batches of at most ARROW_BATCH_ROWS rows."""
    tp = TopicPartition(part.topic, part.partition)
    start = part.start
    with _open(options) as reader:
        while start < part.end:
            try:
                for chunk in reader.read(tp, start, part.end, poll_timeout_ms=options.poll_timeout_ms):
                    for i in range(0, len(chunk), ARROW_BATCH_ROWS):
                        yield to_record_batch(part.topic, part.partition, chunk[i : i + ARROW_BATCH_ROWS],
                                              options.include_headers)
                    start = chunk[-1].offset + 1
                return
            except OffsetOutOfRange:
                earliest = reader.beginning_offsets([tp])[tp]
                _report_data_loss(options, f"cannot fetch offset {start} of {tp.topic}-{tp.partition} "
                                           f"(its log starts at {earliest})")
                if earliest <= start:  # not a retention gap: the offset is past the end
                    return
                start = earliest


class _Reader:
    """What the batch and the streaming reader share: options, schema check, a lazily
    opened LogReader that is never pickled."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        if schema != source_schema(options.include_headers):
            raise OptionError("the eoslog source has a fixed schema (Spark's Kafka source schema) and cannot "
                              "be read with a custom one")
        self.options = options
        self._log: LogReader | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_log"] = None
        return state

    @property
    def log_reader(self) -> LogReader:
        if self._log is None:
            self._log = _open(self.options)
        return self._log

    def close_log_reader(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRangePartition)
        return read_range(self.options, partition)


class EoslogBatchReader(_Reader, DataSourceReader):
    """``spark.read.format("eoslog")``: ``startingOffsets`` (default earliest) to
    ``endingOffsets`` (default latest: the LSO under read_committed), fixed when planned."""

    def partitions(self) -> Sequence[InputPartition]:
        try:
            reader = self.log_reader
            tps = subscribed_partitions(reader, self.options.subscription)
            start = resolve_offsets(reader, self.options, self.options.starting, tps, "startingOffsets")
            end = resolve_offsets(reader, self.options, self.options.ending, tps, "endingOffsets")
            return plan_ranges(reader, self.options, start, end)
        finally:
            self.close_log_reader()


class EoslogStreamReader(_Reader, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("eoslog")``: micro-batches between offsets Spark checkpoints."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        super().__init__(options, schema)
        self._available_now: PartitionOffsets | None = None
        self._latest: PartitionOffsets | None = None

    def _current_latest(self) -> PartitionOffsets:
        reader = self.log_reader
        return reader.end_offsets(subscribed_partitions(reader, self.options.subscription))

    def initialOffset(self) -> dict[str, dict[str, int]]:
        reader = self.log_reader
        tps = subscribed_partitions(reader, self.options.subscription)
        return to_json(resolve_offsets(reader, self.options, self.options.starting, tps, "startingOffsets"))

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def prepareForTriggerAvailableNow(self) -> None:
        # Trigger.AvailableNow: everything up to the offsets of now, and nothing after.
        self._available_now = self._current_latest()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, dict[str, int]]:
        latest = dict(self._available_now) if self._available_now is not None else self._current_latest()
        self._latest = latest
        if isinstance(limit, ReadMaxRows):
            begin = from_json(start)
            new = [tp for tp in latest if tp not in begin]
            if new:
                begin.update(self.log_reader.beginning_offsets(new))
            latest = rate_limit(limit.max_rows, begin, latest)
        return to_json(latest)

    def reportLatestOffset(self) -> dict[str, dict[str, int]] | None:
        return None if self._latest is None else to_json(self._latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return plan_ranges(self.log_reader, self.options, from_json(start), from_json(end))

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: as Spark's Kafka source, progress lives in Spark's checkpoint only."""

    def stop(self) -> None:
        self.close_log_reader()

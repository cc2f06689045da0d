"""``df.writeStream.format("eoslog")`` and ``df.write.format("eoslog")``: the writers.

What it owns: the two writer classes Spark calls — ``EoslogStreamWriter`` (micro-batches)
and ``EoslogBatchWriter`` (one job) — and turning Arrow record batches of the Kafka sink's
columns (``value``; optional ``key``, ``topic``, ``partition``, ``headers``) into records.
Both take Arrow batches (``DataSource[Stream]ArrowWriter``): Spark's Row path converts
Arrow to Rows anyway, so Arrow saves that conversion per row.

In ``exactly-once`` mode (the default) every write task writes its rows in one two-phase
transaction and only prepares it; the driver's ``commit`` records the decision and
completes the transactions; ``abort`` finishes a decided batch and aborts anything else
(``commit.py`` says how; ``decisions.py`` what a decision is). In ``at-least-once`` mode
tasks write with an idempotent producer and ``commit``/``abort`` do nothing.

What it must never do: keep connections or producers in what Spark pickles (the writers
go to Python workers on executors and on the driver), or read a file the driver wrote.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from eoslog.client.producer import Producer
from eoslog.faults import exit_now, pause_until_released
from eoslog.spark.commit import (
    Rows,
    TaskCommitMessage,
    TaskIdentity,
    abort_batch,
    finish_batch,
    prepare_task,
    write_task_at_least_once,
)
from eoslog.spark.sink_options import Columns, SinkOptionError, SinkOptions, check_columns, parse_sink_options

log = logging.getLogger(__name__)

QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
# StreamExecution runs each start of a query under the job group of its run id.
RUN_ID_PROPERTY = "spark.jobGroup.id"


class _ArrowRecords:
    """A task's Arrow batches, sent as records (``commit.Rows``)."""

    def __init__(self, options: SinkOptions, columns: Columns, batches: Iterator[pa.RecordBatch],
                 task: TaskIdentity) -> None:
        self.options = options
        self.columns = columns
        self.batches = batches
        # Fault points (tests only): only a task's first attempt crashes or pauses.
        faults = options.faults
        self.crash_after_rows = faults.task_crash_after_rows if task.attempt == 0 else None
        self.pause_path = faults.task_pause_path(task.batch_id, task.partition, task.attempt)
        self._ahead: list[pa.RecordBatch] = []

    def is_empty(self) -> bool:
        for batch in self.batches:
            if batch.num_rows:
                self._ahead.append(batch)
                return False
        return True

    def _all(self) -> Iterator[pa.RecordBatch]:
        while self._ahead:
            yield self._ahead.pop(0)
        yield from self.batches

    def send_all(self, producer: Producer) -> int:
        sent = 0
        for batch in self._all():
            sent += self._send_batch(producer, batch)
            if self.crash_after_rows is not None and sent >= self.crash_after_rows:
                producer.flush()
                exit_now(17)  # the task-crash fault: a crashed Python worker
        if self.pause_path is not None:
            producer.flush()
            pause_until_released(self.pause_path)  # the task-pause fault: until the test kills it
        return sent

    def drain(self) -> None:
        for _ in self._all():
            pass

    def _send_batch(self, producer: Producer, batch: pa.RecordBatch) -> int:
        c = self.columns
        cols = batch.columns
        values: list[Any] = cols[c.value].to_pylist()
        keys: list[Any] | None = cols[c.key].to_pylist() if c.key is not None else None
        send = producer.send
        if c.topic is None and c.partition is None and c.headers is None:
            topic = self.options.topic
            assert topic is not None  # check_columns made sure
            if keys is None:
                for value in values:
                    send(topic, value)
            else:
                for key, value in zip(keys, values, strict=True):
                    send(topic, value, key)
            return len(values)
        n = len(values)
        topics: list[Any] = cols[c.topic].to_pylist() if c.topic is not None else [self.options.topic] * n
        partitions: list[Any] = cols[c.partition].to_pylist() if c.partition is not None else [None] * n
        headers: list[Any] = cols[c.headers].to_pylist() if c.headers is not None else [None] * n
        for i in range(n):
            topic = topics[i]
            if topic is None:
                raise SinkOptionError("null topic present in the data. Use the topic option for setting a topic.")
            hs = headers[i]
            send(topic, values[i], None if keys is None else keys[i], partition=partitions[i],
                 headers=None if not hs else [(h["key"], h["value"]) for h in hs])
        return n


def write_task(options: SinkOptions, task: TaskIdentity, rows: Rows) -> TaskCommitMessage:
    """One write task: its rows prepared in a transaction, or written at-least-once."""
    if options.exactly_once:
        return prepare_task(options, task, rows)
    return write_task_at_least_once(options, task, rows)


def _task_context() -> TaskContext:
    context = TaskContext.get()
    if context is None:
        raise RuntimeError("the eoslog sink's write() runs in a Spark task")
    return context


def stream_task_identity() -> TaskIdentity:
    """The running streaming write task: query id, run id, batch id, partition, attempt."""
    context = _task_context()
    query_id = context.getLocalProperty(QUERY_ID_PROPERTY)
    batch_id = context.getLocalProperty(BATCH_ID_PROPERTY)
    run_id = context.getLocalProperty(RUN_ID_PROPERTY)
    if not query_id or batch_id is None or not run_id:
        raise RuntimeError(f"the eoslog stream writer runs in a micro-batch streaming query ({QUERY_ID_PROPERTY}"
                           f"={query_id!r}, {BATCH_ID_PROPERTY}={batch_id!r}, {RUN_ID_PROPERTY}={run_id!r})")
    return TaskIdentity(query_id, run_id, int(batch_id), context.partitionId(), context.attemptNumber())


def _messages(messages: Sequence[WriterCommitMessage | None]) -> list[TaskCommitMessage | None]:
    out: list[TaskCommitMessage | None] = []
    for m in messages:
        if m is not None and not isinstance(m, TaskCommitMessage):
            raise TypeError(f"not a commit message of the eoslog sink: {type(m).__name__}")
        out.append(m)
    return out


class EoslogStreamWriter(DataSourceStreamArrowWriter):
    """The streaming sink: one two-phase transaction per task and micro-batch."""

    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool = False) -> None:
        # ``overwrite`` is output mode complete: every batch writes the whole result, as Kafka's sink.
        self.options = parse_sink_options(options)
        self.columns = check_columns(schema, self.options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        task = stream_task_identity()
        records = _ArrowRecords(self.options, self.columns, iterator, task)
        return write_task(self.options, task, records)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.options.exactly_once:
            outcome = finish_batch(self.options, batchId, _messages(messages))
            log.info("batch %d committed: %d transactions committed, %d aborted", batchId,
                     outcome.count("committed"), outcome.count("aborted"))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.options.exactly_once:
            outcome = abort_batch(self.options, batchId, _messages(messages))
            log.info("batch %d aborted: %d transactions committed (decided before), %d aborted", batchId,
                     outcome.count("committed"), outcome.count("aborted"))


class EoslogBatchWriter(DataSourceArrowWriter):
    """The batch sink (``df.write``): one two-phase transaction per task, all committed by
    the driver once every task has prepared — the job's output appears, or none of it."""

    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool = False) -> None:
        if overwrite:
            raise SinkOptionError("Save mode Overwrite is not allowed for eoslog: it can only append "
                                  '(use .mode("append"))')
        self.options = parse_sink_options(options)
        self.columns = check_columns(schema, self.options)
        # Made once on the driver and pickled to every task and to commit/abort.
        self.job_key = f"batch-{uuid.uuid4()}"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        context = _task_context()
        task = TaskIdentity(self.job_key, "job", 0, context.partitionId(), context.attemptNumber(), replayable=False)
        records = _ArrowRecords(self.options, self.columns, iterator, task)
        return write_task(self.options, task, records)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.options.exactly_once:
            log.info("committing batch write %s (recover(options, %r) settles it if this driver dies)",
                     self.job_key, self.job_key)
            finish_batch(self.options, 0, _messages(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.options.exactly_once:
            abort_batch(self.options, 0, _messages(messages), self.job_key)

"""The eoslog sink's options, parsed and checked once, with Spark's Kafka sink names.

What it owns: turning the string options of ``df.write[Stream].format("eoslog")`` into
one frozen ``SinkOptions``: ``kafka.bootstrap.servers`` (or ``bootstrap.servers``), the
default ``topic``, the delivery guarantee ``eoslog.sink.mode`` (``exactly-once``, the
default, or ``at-least-once``), producer settings (``kafka.*``, passed to eoslog's
producer under their Kafka names), where the sink keeps its commit decisions, the prefix
of its transactional ids, and the test-only fault points (``eoslog.sink.test.failAt``).
Also checks the DataFrame's columns as Spark's KafkaWriter does (a ``value`` column of
string or binary; optional ``key``, ``topic``, ``partition``, ``headers``).

What it must never do: talk to a broker.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from eoslog.client.security import security_settings
from eoslog.spark.options import kafka_client_options

Mode = Literal["exactly-once", "at-least-once"]
EXACTLY_ONCE: Mode = "exactly-once"
AT_LEAST_ONCE: Mode = "at-least-once"

DEFAULT_DECISIONS_TOPIC = "__eoslog_spark_commits"
DEFAULT_TRANSACTIONAL_ID_PREFIX = "eoslog-spark-"

# Producer settings the sink decides itself (Spark's Kafka sink refuses its serializers too).
_MANAGED_PRODUCER = {
    "key.serializer": "keys are written as the bytes of the key column (string or binary)",
    "value.serializer": "values are written as the bytes of the value column (string or binary)",
    "transactional.id": "the sink derives transactional ids from the query id, partition and attempt",
    "transaction.two.phase.commit.enable": "the sink turns two-phase commit on in exactly-once mode",
    "enable.idempotence": "the sink always writes with an idempotent producer",
    "interceptor.classes": "interceptors are not supported",
    "transaction.timeout.ms": "two-phase transactions never time out; the driver ends them",
}

# Test-only fault points (``eoslog.sink.test.failAt``), see ``FaultPoints``.
COMMIT_BEFORE_DECISION = "commit-before-decision"
COMMIT_AFTER_DECISION = "commit-after-decision"
PAUSE_BEFORE_DECISION = "pause-before-decision"
PAUSE_AFTER_DECISION = "pause-after-decision"
TASK_CRASH = "task-crash"
TASK_PAUSE = "task-pause"
_FAULT_NAMES = {COMMIT_BEFORE_DECISION, COMMIT_AFTER_DECISION, PAUSE_BEFORE_DECISION, PAUSE_AFTER_DECISION,
                TASK_CRASH, TASK_PAUSE}


class SinkOptionError(ValueError):
    """An option or a column is missing, malformed or not allowed (Spark shows the message)."""


@dataclass(frozen=True)
class FaultPoints:
    """Where a test asks the sink to fail, from ``eoslog.sink.test.failAt`` — a comma list of
    ``commit-before-decision@B`` and ``commit-after-decision@B`` (the driver's commit of batch
    B raises just before / just after recording its decision), ``pause-before-decision@B:PATH``
    and ``pause-after-decision@B:PATH`` (the commit writes its process id to PATH just before /
    just after recording the decision and then sleeps until killed or PATH is deleted) and
    ``task-crash:N`` (the first attempt of every write task exits its Python worker, as a
    crash, once N rows are sent and flushed) and ``task-pause@B/P:PATH`` (the first attempt
    of partition P's write task in batch B sends and flushes its rows, writes its process id
    to PATH and sleeps until killed — its transaction stays open, never prepared — or PATH is
    deleted)."""

    raise_before_decision: frozenset[int] = frozenset()
    raise_after_decision: frozenset[int] = frozenset()
    pause_after_decision: tuple[tuple[int, str], ...] = ()
    task_crash_after_rows: int | None = None
    pause_before_decision: tuple[tuple[int, str], ...] = ()
    task_pause: tuple[tuple[int, int, str], ...] = ()  # (batch, partition, path)

    @classmethod
    def parse(cls, raw: str | None) -> FaultPoints:
        if not raw or not raw.strip():
            return cls()
        before: set[int] = set()
        after: set[int] = set()
        pause: dict[str, list[tuple[int, str]]] = {PAUSE_BEFORE_DECISION: [], PAUSE_AFTER_DECISION: []}
        crash: int | None = None
        task_pause: list[tuple[int, int, str]] = []
        for item in (i.strip() for i in raw.split(",")):
            if not item:
                continue
            name, _, arg = item.partition("@") if "@" in item else item.partition(":")
            if name not in _FAULT_NAMES:
                raise SinkOptionError(f"unknown fault point {item!r} in eoslog.sink.test.failAt")
            try:
                if name == TASK_CRASH:
                    crash = int(arg)
                elif name == TASK_PAUSE:
                    where, _, path = arg.partition(":")
                    batch, slash, partition = where.partition("/")
                    if not path or not slash:
                        raise ValueError
                    task_pause.append((int(batch), int(partition), path))
                elif name in pause:
                    batch, _, path = arg.partition(":")
                    if not path:
                        raise ValueError
                    pause[name].append((int(batch), path))
                else:
                    (before if name == COMMIT_BEFORE_DECISION else after).add(int(arg))
            except ValueError:
                raise SinkOptionError(f"malformed fault point {item!r} in eoslog.sink.test.failAt") from None
        return cls(frozenset(before), frozenset(after), tuple(pause[PAUSE_AFTER_DECISION]), crash,
                   tuple(pause[PAUSE_BEFORE_DECISION]), tuple(task_pause))

    def task_pause_path(self, batch_id: int, partition: int, attempt: int) -> str | None:
        """Where the first attempt of this write task reports its pause, if it pauses."""
        if attempt != 0:
            return None
        return next((path for b, p, path in self.task_pause if (b, p) == (batch_id, partition)), None)


@dataclass(frozen=True)
class SinkOptions:
    bootstrap_servers: str
    topic: str | None = None
    mode: Mode = EXACTLY_ONCE
    # ``kafka.*`` settings without the prefix, for every producer the sink makes.
    producer: Mapping[str, str] = field(default_factory=dict)
    decisions_topic: str = DEFAULT_DECISIONS_TOPIC
    transactional_id_prefix: str = DEFAULT_TRANSACTIONAL_ID_PREFIX
    faults: FaultPoints = field(default_factory=FaultPoints)

    @property
    def exactly_once(self) -> bool:
        return self.mode == EXACTLY_ONCE

    @property
    def client_id(self) -> str:
        return self.producer.get("client.id", "eoslog-spark-sink")

    def connection_settings(self, **extra: object) -> dict[str, object]:
        """Settings for the sink's admin and consumers: where, who (client.id) and how (the
        security settings among ``kafka.*``)."""
        return {**security_settings(self.producer), "bootstrap.servers": self.bootstrap_servers,
                "client.id": self.client_id, **extra}

    def producer_settings(self, **extra: object) -> dict[str, object]:
        """Settings for eoslog's Producer: the user's ``kafka.*`` ones, then the sink's own."""
        return {**self.producer, "bootstrap.servers": self.bootstrap_servers, **extra}


def parse_sink_options(raw_options: Mapping[str, str]) -> SinkOptions:
    """Check and parse the options of one ``df.write[Stream].format("eoslog")``."""
    options, bootstrap, producer = kafka_client_options(raw_options, "sink", _MANAGED_PRODUCER, SinkOptionError)
    mode_name = options.get("eoslog.sink.mode", EXACTLY_ONCE).strip().lower()
    if mode_name not in (EXACTLY_ONCE, AT_LEAST_ONCE):
        raise SinkOptionError(f"eoslog.sink.mode must be {EXACTLY_ONCE} or {AT_LEAST_ONCE}, not {mode_name!r}")
    if mode_name == EXACTLY_ONCE and producer.get("acks", "all").strip().lower() not in ("all", "-1"):
        raise SinkOptionError(f"kafka.acks={producer['acks']} is not allowed in exactly-once mode: transactions "
                              "need acks=all")
    topic = options.get("topic")
    if topic is not None and not topic.strip():
        raise SinkOptionError("option 'topic' must not be empty")
    prefix = options.get("eoslog.sink.transactional.id.prefix", DEFAULT_TRANSACTIONAL_ID_PREFIX)
    return SinkOptions(
        bootstrap_servers=bootstrap,
        topic=topic.strip() if topic is not None else None,
        mode=EXACTLY_ONCE if mode_name == EXACTLY_ONCE else AT_LEAST_ONCE,
        producer=producer,
        decisions_topic=options.get("eoslog.sink.decisions.topic", DEFAULT_DECISIONS_TOPIC).strip(),
        transactional_id_prefix=prefix,
        faults=FaultPoints.parse(options.get("eoslog.sink.test.failat")),
    )


# -- columns ---------------------------------------------------------------------------------------

_HEADER_TYPE = ArrayType(StructType().add("key", StringType()).add("value", BinaryType()))


@dataclass(frozen=True)
class Columns:
    """Which of the Kafka sink's columns the DataFrame has, by position."""

    value: int
    key: int | None = None
    topic: int | None = None
    partition: int | None = None
    headers: int | None = None


def _same_header_type(t: DataType) -> bool:
    if not isinstance(t, ArrayType) or not isinstance(t.elementType, StructType):
        return False
    fields = t.elementType.fields
    return (len(fields) == 2 and [f.name for f in fields] == ["key", "value"]
            and isinstance(fields[0].dataType, StringType) and isinstance(fields[1].dataType, BinaryType))


def check_columns(schema: StructType, options: SinkOptions) -> Columns:
    """The columns to write, checked as Spark's KafkaWriter.validateQuery checks them."""
    names = [f.name.lower() for f in schema.fields]
    types = {f.name.lower(): f.dataType for f in schema.fields}

    def index(name: str, allowed: tuple[type[DataType], ...], what: str) -> int | None:
        if name not in types:
            return None
        if not isinstance(types[name], allowed):
            raise SinkOptionError(f"{name} attribute type must be {what}, not {types[name].simpleString()}")
        return names.index(name)

    value = index("value", (StringType, BinaryType), "a String or BinaryType")
    if value is None:
        raise SinkOptionError("Required attribute 'value' not found")
    # The topic option, when given, overrides a topic column (as Spark's Kafka sink).
    topic = index("topic", (StringType,), "a StringType") if options.topic is None else None
    if topic is None and options.topic is None:
        raise SinkOptionError("topic option required when no 'topic' attribute is present. Use the topic option "
                              "for setting a topic.")
    headers = None
    if "headers" in types:
        if not _same_header_type(types["headers"]):
            raise SinkOptionError(f"headers attribute type must be {_HEADER_TYPE.simpleString()}, not "
                                  f"{types['headers'].simpleString()}")
        headers = names.index("headers")
    return Columns(
        value=value,
        key=index("key", (StringType, BinaryType), "a String or BinaryType"),
        topic=topic,
        partition=index("partition", (IntegerType,), "an IntegerType"),
        headers=headers,
    )

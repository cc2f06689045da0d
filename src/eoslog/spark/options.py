"""The eoslog source's options, parsed and checked once, with Spark's Kafka source names.

What it owns: turning the case-insensitive string options Spark hands a data source into
one frozen ``SourceOptions`` — the subscription (``subscribe``, ``subscribePattern`` or
``assign``), the offset specs (``startingOffsets``, ``endingOffsets``), the trigger and
split knobs (``maxOffsetsPerTrigger``, ``minPartitions``), ``failOnDataLoss``,
``includeHeaders`` and the client settings (``kafka.bootstrap.servers`` or
``bootstrap.servers``, ``isolation.level``…) — and the error messages for option mistakes,
worded as Spark's ``KafkaSourceProvider`` words them. What it must never do: talk to a
broker; turning ``latest`` into numbers is ``source``'s job.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from eoslog.client.types import TopicPartition
from eoslog.spark.offsets import EARLIEST, LATEST, OffsetJsonError, OffsetSpec, from_json, to_json

READ_UNCOMMITTED = 0
READ_COMMITTED = 1
_ISOLATION_LEVELS = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}

# Kafka consumer settings Spark's source refuses because the source manages them itself.
_UNSUPPORTED_KAFKA = {
    "auto.offset.reset": "use startingOffsets to choose where to start",
    "enable.auto.commit": "the source never commits offsets to Kafka; Spark's checkpoint keeps them",
    "key.deserializer": "keys are always returned as binary; cast or parse them in Spark",
    "value.deserializer": "values are always returned as binary; cast or parse them in Spark",
    "interceptor.classes": "interceptors are not supported",
}

Mode = Literal["batch", "stream"]


class OptionError(ValueError):
    """An option is missing, malformed or not allowed here (Spark shows the message)."""


@dataclass(frozen=True)
class Subscription:
    """Exactly one of: topic names, a Java-style regex over topic names, fixed partitions."""

    kind: Literal["subscribe", "subscribePattern", "assign"]
    topics: tuple[str, ...] = ()
    pattern: str = ""
    partitions: tuple[TopicPartition, ...] = ()

    def matches(self, topic: str) -> bool:
        """For ``subscribePattern``: Java's ``Pattern.matcher(topic).matches()`` is a full match."""
        return re.fullmatch(self.pattern, topic) is not None

    def describe(self) -> str:
        if self.kind == "subscribe":
            return f"subscribe={','.join(self.topics)}"
        if self.kind == "subscribePattern":
            return f"subscribePattern={self.pattern}"
        return "assign=" + ",".join(f"{t}-{p}" for t, p in self.partitions)


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    isolation_level: int = READ_COMMITTED
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    poll_timeout_ms: int = 120_000
    # The other ``kafka.*`` settings, without the prefix: consumer settings under Kafka's
    # names (client.id, request.timeout.ms, fetch.max.bytes…).
    kafka: Mapping[str, str] = field(default_factory=dict)

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == READ_COMMITTED


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name.lower())
    if raw is None:
        return default
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise OptionError(f"option {name} must be true or false, not {raw!r}")
    return text == "true"


def _positive_int(options: Mapping[str, str], name: str) -> int | None:
    raw = options.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(f"option {name} must be a positive integer, not {raw!r}") from None
    if value <= 0:
        raise OptionError(f"option {name} must be a positive integer, not {raw!r}")
    return value


def _subscription(options: Mapping[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in options]
    if len(given) != 1:
        raise OptionError(
            "exactly one of the options 'assign', 'subscribe' or 'subscribePattern' must be given"
            + (f"; got {', '.join(given)}" if given else "")
        )
    kind = given[0]
    raw = options[kind].strip()
    if kind == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise OptionError(f"no topics to subscribe to in subscribe={raw!r}")
        return Subscription("subscribe", topics=topics)
    if kind == "subscribepattern":
        if not raw:
            raise OptionError("pattern to subscribe is empty")
        try:
            re.compile(raw)
        except re.error as e:
            raise OptionError(f"subscribePattern {raw!r} is not a valid regular expression: {e}") from None
        return Subscription("subscribePattern", pattern=raw)
    try:
        parsed = json.loads(raw)
        partitions = tuple(
            TopicPartition(str(topic), int(p)) for topic, ps in parsed.items() for p in ps
        )
    except (ValueError, TypeError, AttributeError):
        raise OptionError(
            f'expected e.g. {{"topicA":[0,1],"topicB":[0,1]}} for assign, got {raw}'
        ) from None
    if not partitions:
        raise OptionError(f"no partitions to assign in assign={raw}")
    return Subscription("assign", partitions=tuple(sorted(set(partitions))))


def _isolation_level(options: Mapping[str, str]) -> int:
    raw = options.get("kafka.isolation.level", options.get("isolation.level", "read_committed"))
    level = _ISOLATION_LEVELS.get(raw.strip().lower())
    if level is None:
        raise OptionError(f"isolation.level must be read_committed or read_uncommitted, not {raw!r}")
    return level


def parse_offset_spec(raw: str | None, option: str, default: Literal["earliest", "latest"]) -> OffsetSpec:
    """An offsets option: ``earliest``, ``latest`` or a JSON object of per-partition offsets."""
    if raw is None:
        return default
    text = raw.strip()
    if text.lower() in ("earliest", "latest"):
        return "earliest" if text.lower() == "earliest" else "latest"
    try:
        parsed = json.loads(text)
        if not isinstance(parsed, dict):
            raise OffsetJsonError(text)
        offsets = from_json(parsed)
    except (ValueError, OffsetJsonError):
        raise OptionError(
            f'{option} must be "earliest", "latest" or JSON like '
            f'{{"topicA":{{"0":23,"1":-1}},"topicB":{{"0":-2}}}} (-2 earliest, -1 latest); got {raw}'
        ) from None
    bad = {tp: o for tp, o in offsets.items() if o < EARLIEST}
    if bad:
        raise OptionError(f"{option}: offsets must be >= 0, or -2 (earliest) / -1 (latest); got {to_json(bad)}")
    return offsets


def kafka_client_options(
    raw_options: Mapping[str, str], role: str, refused: Mapping[str, str],
    error: type[ValueError] = ValueError, *, own: tuple[str, ...] = (),
) -> tuple[dict[str, str], str, dict[str, str]]:
    """What the eoslog source and sink share: (the options lower-cased, ``kafka.bootstrap.servers`` or
    ``bootstrap.servers``, the ``kafka.*`` client settings without their prefix). ``refused`` maps a
    client setting the connector manages itself to why it is refused; ``own`` are ``kafka.*``
    options the connector reads itself rather than passing on."""
    options = {str(k).lower(): str(v) for k, v in raw_options.items()}
    bootstrap = options.get("kafka.bootstrap.servers") or options.get("bootstrap.servers")
    if not bootstrap or not bootstrap.strip():
        raise error("option 'kafka.bootstrap.servers' (or 'bootstrap.servers') must be specified "
                    f"for the eoslog {role}, e.g. 127.0.0.1:9092")
    client = {k.removeprefix("kafka."): v for k, v in options.items()
              if k.startswith("kafka.") and k != "kafka.bootstrap.servers" and k not in own}
    for name, why in refused.items():
        if name in client:
            raise error(f"Kafka option 'kafka.{name}' is not supported: {why}")
    return options, bootstrap.strip(), client


def parse_options(raw_options: Mapping[str, str], mode: Mode) -> SourceOptions:
    """Check and parse the options of one ``spark.read``/``spark.readStream`` on format eoslog."""
    options, bootstrap, kafka = kafka_client_options(raw_options, "source", _UNSUPPORTED_KAFKA, OptionError,
                                                     own=("kafka.isolation.level",))

    starting = parse_offset_spec(options.get("startingoffsets"), "startingOffsets",
                                 default="earliest" if mode == "batch" else "latest")
    ending = parse_offset_spec(options.get("endingoffsets"), "endingOffsets", default="latest")
    if mode == "stream" and "endingoffsets" in options:
        raise OptionError("ending offset not valid in streaming queries (endingOffsets is for batch reads)")
    if mode == "batch":
        # As Spark: a batch read from "latest" would read nothing, to "earliest" likewise.
        if starting == "latest" or (isinstance(starting, dict) and LATEST in starting.values()):
            raise OptionError("starting offset can't be latest for batch queries on eoslog")
        if ending == "earliest" or (isinstance(ending, dict) and EARLIEST in ending.values()):
            raise OptionError("ending offset can't be earliest for batch queries on eoslog")
    for name in ("minOffsetsPerTrigger", "maxTriggerDelay", "startingOffsetsByTimestamp", "startingTimestamp"):
        if name.lower() in options:
            raise OptionError(f"option {name} is not supported by the eoslog source")

    return SourceOptions(
        bootstrap_servers=bootstrap,
        subscription=_subscription(options),
        starting=starting,
        ending=ending,
        isolation_level=_isolation_level(options),
        max_offsets_per_trigger=_positive_int(options, "maxOffsetsPerTrigger"),
        min_partitions=_positive_int(options, "minPartitions"),
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        include_headers=_bool(options, "includeHeaders", False),
        poll_timeout_ms=_positive_int(options, "kafkaConsumer.pollTimeoutMs") or 120_000,
        kafka=kafka,
    )

"""Topic configs: what CreateTopics, AlterConfigs and IncrementalAlterConfigs accept and refuse,
and in which order, against Apache Kafka 4.4 (with remote storage off, which is what eoslog is);
DescribeConfigs of a topic with every config Kafka 4.4 has set."""

from __future__ import annotations

from conformance.session import Broker, Catalogue, Target, i8
from conformance.steps import DESCRIBE_CONFIGS, call, create_topic

CATALOGUE = Catalogue("configs")
session = CATALOGUE.session
ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 33, 44
TOPIC, SET = 2, 0

# A value Kafka 4.4 accepts for each topic config (remote.storage.enable only as false: true
# needs remote storage), and values it refuses.
ACCEPTED = {
    "cleanup.policy": "compact,delete", "compression.gzip.level": "9", "compression.lz4.level": "17",
    "compression.type": "zstd", "compression.zstd.level": "-5", "delete.retention.ms": "1000",
    "errors.deadletterqueue.group.enable": "true", "file.delete.delay.ms": "0", "flush.messages": "10",
    "flush.ms": "1000", "follower.replication.throttled.replicas": "0:1", "index.interval.bytes": "100",
    "leader.replication.throttled.replicas": "*", "local.retention.bytes": "1000", "local.retention.ms": "1000",
    "max.compaction.lag.ms": "100000", "max.decompressed.message.bytes": "1000",
    "max.message.bytes": "5000", "message.timestamp.after.max.ms": "1000",
    "message.timestamp.before.max.ms": "1000", "message.timestamp.type": "LogAppendTime",
    "min.cleanable.dirty.ratio": "0.1", "min.compaction.lag.ms": "10", "min.insync.replicas": "1",
    "preallocate": "true", "remote.copy.lag.bytes": "10", "remote.copy.lag.ms": "-1",
    "remote.log.copy.disable": "true", "remote.log.delete.on.disable": "true", "remote.storage.enable": "false",
    "retention.bytes": "100000", "retention.ms": "100000", "segment.bytes": "2000000", "segment.index.bytes": "4096",
    "segment.jitter.ms": "10", "segment.ms": "100000", "unclean.leader.election.enable": "true",
}
REFUSED = [
    ("message.downconversion.enable", "true"), ("remote.storage.enable", "true"), ("no.such.config", "1"),
    ("compression.type", "none"), ("compression.gzip.level", "12"), ("compression.lz4.level", "0"),
    ("compression.zstd.level", "23"), ("segment.jitter.ms", "-1"), ("max.compaction.lag.ms", "0"),
    ("max.decompressed.message.bytes", "2147483640"), ("local.retention.ms", "-3"), ("remote.copy.lag.bytes", "-2"),
    ("leader.replication.throttled.replicas", "x"), ("preallocate", "maybe"), ("segment.bytes", "x"),
    ("min.cleanable.dirty.ratio", "1.5"),
]


def test_session(session_name: str, brokers: tuple[Broker, Broker]) -> None:
    CATALOGUE.run(session_name, brokers)


def incremental(t: Target, topic: str, configs: dict[str, str], *, validate_only: bool = False,
                label: str | None = None) -> None:
    m = t.types(INCREMENTAL_ALTER_CONFIGS, t.v(INCREMENTAL_ALTER_CONFIGS))
    call(t, INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigsRequest", label=label, validate_only=validate_only,
         resources=(m.AlterConfigsResource(resource_type=i8(TOPIC), resource_name=topic, configs=tuple(
             m.AlterableConfig(name=k, config_operation=i8(SET), value=v) for k, v in configs.items())),))


def legacy(t: Target, topic: str, configs: dict[str, str], *, label: str | None = None) -> None:
    m = t.types(ALTER_CONFIGS, t.v(ALTER_CONFIGS))
    call(t, ALTER_CONFIGS, "AlterConfigsRequest", label=label, validate_only=False,
         resources=(m.AlterConfigsResource(resource_type=i8(TOPIC), resource_name=topic, configs=tuple(
             m.AlterableConfig(name=k, value=v) for k, v in configs.items())),))


def describe(t: Target, topic: str, label: str) -> None:
    m = t.types(DESCRIBE_CONFIGS, t.v(DESCRIBE_CONFIGS))
    call(t, DESCRIBE_CONFIGS, "DescribeConfigsRequest", label=label, include_synonyms=True,
         include_documentation=False, resources=(m.DescribeConfigsResource(
             resource_type=i8(TOPIC), resource_name=topic, configuration_keys=None),))


@session("every-topic-config", "each of Kafka 4.4's topic configs set, alone, by IncrementalAlterConfigs; "
         "the topic described with all of them")
def _every(t: Target) -> None:
    create_topic(t, "allconfigs")
    for name, value in ACCEPTED.items():
        incremental(t, "allconfigs", {name: value}, label=f"set {name}")
    describe(t, "allconfigs", "described")


@session("refused-values", "values Kafka 4.4 refuses, by IncrementalAlterConfigs (validate only) and CreateTopics")
def _refused(t: Target) -> None:
    create_topic(t, "refusing")
    for name, value in REFUSED:
        incremental(t, "refusing", {name: value}, validate_only=True, label=f"set {name}={value}")
        create_topic(t, f"refused-{name}", configs={name: value}, record=True)
    create_topic(t, "refused-lags", configs={"min.compaction.lag.ms": "5000", "max.compaction.lag.ms": "1000"},
                 record=True)
    incremental(t, "refusing", {"min.compaction.lag.ms": "5000", "max.compaction.lag.ms": "1000"},
                label="min over max lag")


@session("alter-order", "AlterConfigs and IncrementalAlterConfigs on a topic that does not exist: the configs "
         "are judged before the topic is looked for")
def _order(t: Target) -> None:
    for name, value in (("max.compaction.lag.ms", "1000"), ("no.such.config", "1"),
                        ("remote.storage.enable", "true"), ("segment.bytes", "x")):
        incremental(t, "no-such-topic", {name: value}, label=f"incremental {name}={value}")
        legacy(t, "no-such-topic", {name: value}, label=f"legacy {name}={value}")


# Broker configs neither broker's test settings touch: the topic defaults eoslog added for Kafka 4.4's
# topic configs, the unit synonyms, and Kafka settings eoslog lists read-only with Kafka's default.
BROKER_KEYS = (
    "log.segment.delete.delay.ms", "log.preallocate", "log.roll.jitter.ms", "log.roll.jitter.hours",
    "log.cleaner.max.compaction.lag.ms", "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
    "max.decompressed.message.bytes", "log.local.retention.ms", "log.local.retention.bytes",
    "log.remote.copy.lag.ms", "log.retention.ms", "log.retention.minutes", "log.retention.hours",
    "unclean.leader.election.enable", "log.dir", "queued.max.requests", "request.timeout.ms",
    "delegation.token.secret.key", "remote.log.storage.system.enable",
)


@session("broker-configs", "DescribeConfigs of the broker, with synonyms, for configs neither broker's settings "
         "touch (eoslog lists Kafka's, read-only where it does not act on them)")
def _broker(t: Target) -> None:
    m = t.types(DESCRIBE_CONFIGS, t.v(DESCRIBE_CONFIGS))
    call(t, DESCRIBE_CONFIGS, "DescribeConfigsRequest", label="broker", include_synonyms=True,
         include_documentation=False, resources=(m.DescribeConfigsResource(
             resource_type=i8(4), resource_name="1", configuration_keys=BROKER_KEYS),))

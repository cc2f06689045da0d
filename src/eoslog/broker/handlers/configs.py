"""DescribeConfigs (key 32): topic, broker and group configuration, with Kafka's sources
and synonyms.

Also owns the config view CreateTopics returns (v5+), so both APIs describe a topic
alike. What Kafka answers, and eoslog with it:

- TOPIC (2): every topic config, its effective value and its source: DYNAMIC_TOPIC_CONFIG for
  an override; else the broker synonym that supplies it — DYNAMIC_BROKER_CONFIG (altered for
  this broker), DYNAMIC_DEFAULT_BROKER_CONFIG (altered cluster-wide), STATIC_BROKER_CONFIG
  (the properties file or a flag) — or DEFAULT_CONFIG. With ``include_synonyms`` the chain
  is listed in that order, each layer over the whole unit chain (``log.retention.ms``,
  ``.minutes``, ``.hours``) with each name's default last, and then — Kafka's ``dropWhile`` —
  without the names listed before the primary broker name. So with ``log.retention.ms`` set a
  topic's retention.ms lists it and then ``log.retention.hours``' default (168), and with only
  ``log.retention.hours`` set it lists nothing and says DEFAULT_CONFIG, as Kafka 4.4 does. A
  primary name whose Kafka default is null (``log.retention.ms``, ``log.roll.ms``,
  ``log.flush.interval.ms``) gets no DEFAULT_CONFIG synonym, as from Kafka (checked by
  tests/conformance, whose brokers set ``log.retention.ms``: configs/*, produce-fetch/describe-configs).
- BROKER (4) named by this node's id: every broker config plus any other key that was
  set; unknown keys are reported as Kafka does (sensitive, value null, type UNKNOWN).
  BROKER with an empty name: the cluster-wide dynamic defaults that were set, each with
  source DYNAMIC_DEFAULT_BROKER_CONFIG.
- GROUP (32, Kafka 4.0's group configs): every group config of a group, existing or not;
  GROUP_CONFIG for one altered for the group, else the broker's ``group.*`` config that
  supplies its default (or the group config's own default when there is none).
- An unknown topic → UNKNOWN_TOPIC_OR_PARTITION; another broker id, an empty group name or
  another resource type → INVALID_REQUEST; each per resource, never failing the request.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import NO_THROTTLE, ApiSpec, build, response_types
from eoslog.config import (
    BROKER_CONFIGS,
    BROKER_SYNONYMS,
    DYNAMIC_BROKER_CONFIGS,
    GROUP_CONFIGS,
    LIST_CONFIGS,
    REPLICATION_THROTTLE_CONFIGS,
    SYNONYM_CHAIN,
    TOPIC_CONFIGS,
    TOPIC_INT_CONFIGS,
    BrokerConfig,
    ConfigDef,
    TopicConfig,
    config_string,
    is_secret,
)
from eoslog.kafka_configs import BROKER as KAFKA_BROKER
from eoslog.kafka_configs import TOPIC as KAFKA_TOPIC
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.configs import ConfigResourceType, ConfigSource, ConfigSynonym, ConfigType
from eoslog.protocol.errors import ErrorCode
from eoslog.security.acls import AclOperation, ResourceType
from eoslog.storage import TopicError
from eoslog.storage.log_manager import validate_topic_name

if TYPE_CHECKING:
    from eoslog.protocol.requests import DescribeConfigsRequest
    from eoslog.protocol.responses import DescribeConfigsResponse

# ConfigDef keeps Python types; Kafka tells INT from LONG and LIST from STRING. The
# configs Kafka defines as INT (any other int is LONG):
_INT_CONFIGS = TOPIC_INT_CONFIGS | frozenset({
    "compression.gzip.level", "compression.lz4.level", "compression.zstd.level", "max.decompressed.message.bytes",
    "log.roll.jitter.hours", "node.id", "num.partitions", "default.replication.factor",
    "socket.request.max.bytes", "log.segment.bytes", "message.max.bytes", "log.index.interval.bytes",
    "log.index.size.max.bytes", "fetch.max.bytes", "group.initial.rebalance.delay.ms",
    "log.retention.minutes", "log.retention.hours", "log.roll.hours", "log.roll.minutes",
    "producer.id.expiration.ms", "producer.id.expiration.check.interval.ms",
    "group.min.session.timeout.ms", "group.max.session.timeout.ms", "group.max.size",
    "offsets.topic.num.partitions", "offsets.topic.segment.bytes", "offsets.topic.compression.codec",
    "offsets.load.buffer.size", "offsets.retention.minutes", "offset.metadata.max.bytes",
    "offsets.commit.timeout.ms", "transaction.max.timeout.ms",
    "transactional.id.expiration.ms", "transaction.state.log.num.partitions",
    "transaction.state.log.segment.bytes",
    "transaction.state.log.min.isr", "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    "transaction.remove.expired.transaction.cleanup.interval.ms",
    "broker.id", "zookeeper.session.timeout.ms", "zookeeper.connection.timeout.ms",
    "replica.fetch.max.bytes", "replica.fetch.response.max.bytes", "replica.fetch.wait.max.ms",
    "replica.fetch.min.bytes", "replica.fetch.backoff.ms", "replica.socket.timeout.ms",
    "num.replica.fetchers", "controlled.shutdown.max.retries", "leader.imbalance.per.broker.percentage",
}) | {n for n, d in GROUP_CONFIGS.items() if d.type is int} | {
    n for n in BROKER_CONFIGS if n.startswith(("group.consumer.", "group.share."))
}
_SHORT_CONFIGS = frozenset({"offsets.topic.replication.factor", "transaction.state.log.replication.factor"})

_UNIT_ALIASES: dict[str, str] = {
    alias: f"{primary.removesuffix('.ms')} in {alias.rsplit('.', 1)[1]}, used when {primary} is not set"
    for primary, chain in BROKER_SYNONYMS.items() for alias in chain[1:]
}


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    is_sensitive: bool
    synonyms: tuple[ConfigSynonym, ...]
    config_type: ConfigType
    documentation: str | None


def _config_type(name: str, defn: ConfigDef | None, kafka_type: str | None = None) -> ConfigType:
    if kafka_type is not None:  # Kafka's own definition (kafka_configs.py)
        return ConfigType[kafka_type]
    if name in _UNIT_ALIASES or name in _INT_CONFIGS:
        return ConfigType.INT
    if name in _SHORT_CONFIGS:
        return ConfigType.SHORT
    if defn is None:
        return ConfigType.UNKNOWN
    if name in LIST_CONFIGS:
        return ConfigType.LIST
    if defn.type is bool:
        return ConfigType.BOOLEAN
    if defn.type is float:
        return ConfigType.DOUBLE
    if defn.type is int:
        return ConfigType.LONG
    return ConfigType.STRING


# Broker configs Kafka defines without a default (another unit, or nothing, supplies the value):
# Kafka lists no DEFAULT_CONFIG synonym for them.
_NULL_IN_KAFKA = frozenset(n for n, (_, default, _) in KAFKA_BROKER.items() if default is None)


def _static_default(name: str) -> str | None:
    """A broker config's default as Kafka's ``staticDefaultConfigs`` has it: eoslog's own for the
    configs it defines (none where Kafka defines none), Kafka's for the rest (hour/minute aliases)."""
    defn = BROKER_CONFIGS.get(name)
    if defn is not None:
        return None if defn.default is None or name in _NULL_IN_KAFKA else config_string(defn.default)
    return KAFKA_BROKER.get(name, ("", None))[1]


def _broker_synonyms(broker: BrokerConfig, primary: str, *, per_broker: bool = True) -> list[ConfigSynonym]:
    """The broker-level chain for ``primary`` as Kafka's ConfigHelper.configSynonyms lists
    it: every name of its unit chain (``log.retention.ms``, ``.minutes``, ``.hours``) set
    dynamically for this broker, then cluster-wide, then statically, then each one's default —
    without the names listed before the first ``primary`` (Kafka's ``dropWhile``: describing
    ``log.retention.hours`` does not list a static ``log.retention.ms``, describing
    ``log.retention.ms`` lists ``log.retention.hours``' default after it). Only the cluster-wide
    ones for the cluster-default resource."""
    chain = SYNONYM_CHAIN.get(primary, (primary,))
    known = primary in BROKER_CONFIGS or primary in _UNIT_ALIASES or primary in KAFKA_BROKER
    known = known and not is_secret(primary)
    defaults = {n: d for n in chain if (d := _static_default(n)) is not None}
    layers: list[tuple[dict[str, Any], ConfigSource]] = [
        (broker.dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
        (broker.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ({n: config_string(broker.static_value(n)) for n in chain if n in broker.explicit},
         ConfigSource.STATIC_BROKER_CONFIG),
        (defaults, ConfigSource.DEFAULT_CONFIG),
    ]
    listed = [
        # Kafka treats a key it has no definition for as possibly a password.
        ConfigSynonym(n, layer[n] if known else None, source)
        for layer, source in layers if per_broker or source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        for n in chain if n in layer
    ]
    return list(itertools.dropwhile(lambda s: s.name != primary, listed))


def _entry(name: str, value: str | None, synonyms: list[ConfigSynonym], defn: ConfigDef | None, *,
           read_only: bool = False, sensitive: bool = False, doc: str | None = None) -> ConfigEntry:
    return ConfigEntry(
        name, value, synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG, read_only=read_only,
        is_sensitive=sensitive, synonyms=tuple(synonyms), config_type=_config_type(name, defn),
        documentation=doc if doc is not None else defn.doc if defn is not None else None,
    )


def topic_config_entries(broker: BrokerConfig, config: TopicConfig) -> list[ConfigEntry]:
    """Every topic config of a topic with ``config``, sorted by name."""
    entries = []
    for name, defn in sorted(TOPIC_CONFIGS.items()):
        kafka_type = KAFKA_TOPIC[name][0] if name in KAFKA_TOPIC else None
        value = config_string(config[name])
        synonyms: list[ConfigSynonym] = []
        if name in config.overrides:
            synonyms.append(ConfigSynonym(name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        if defn.broker_default:
            synonyms += _broker_synonyms(broker, defn.broker_default)
        entry = _entry(name, value, synonyms, defn)
        entries.append(entry if kafka_type is None else dataclasses.replace(entry, config_type=ConfigType[kafka_type]))
    return entries


_NOT_USED = "Kafka's setting, listed with Kafka's default; eoslog does not act on it"


def broker_config_entries(broker: BrokerConfig) -> list[ConfigEntry]:
    """This node's configuration: every broker config eoslog or Kafka defines (Kafka's with
    Kafka's default, as Kafka lists them) and every key that was set."""
    entries = []
    names = (set(BROKER_CONFIGS) | set(KAFKA_BROKER) | broker.explicit | set(broker.dynamic_default)
             | set(broker.dynamic_broker))
    for name in sorted(names):
        defn = BROKER_CONFIGS.get(name)
        kafka = KAFKA_BROKER.get(name)
        throttle = name in REPLICATION_THROTTLE_CONFIGS  # dynamic-only: listed once set
        known = defn is not None or name in _UNIT_ALIASES or kafka is not None or throttle
        secret = is_secret(name)  # Kafka's PASSWORD type: reported sensitive, never its value
        synonyms = _broker_synonyms(broker, name)
        if not known or secret:
            value = None
        elif kafka is not None and ((defn is None and name not in broker.values) or (
                not synonyms and (name in BROKER_SYNONYMS or (defn is not None and defn.default in ("", None))))):
            # Nothing set it: Kafka's default, null where Kafka has none (log.retention.ms,
            # which log.retention.hours supplies; advertised.listeners...).
            value = kafka[1]
        else:
            value = config_string(broker.values.get(name))
        if secret:
            synonyms = [ConfigSynonym(s.name, None, s.source) for s in synonyms]
        doc = _UNIT_ALIASES.get(name) or (_NOT_USED if defn is None and kafka is not None else None)
        entry = _entry(name, value, synonyms, defn, read_only=name not in DYNAMIC_BROKER_CONFIGS,
                       sensitive=not known or secret, doc=doc)
        if kafka is not None or throttle:
            entry = dataclasses.replace(entry, config_type=ConfigType[kafka[0] if kafka else "LONG"])
        entries.append(entry)
    return entries


def default_broker_config_entries(broker: BrokerConfig) -> list[ConfigEntry]:
    """The cluster-wide dynamic broker defaults that were set (broker resource "")."""
    entries = []
    for name in sorted(broker.dynamic_default):
        defn = BROKER_CONFIGS.get(name)
        known = defn is not None or name in _UNIT_ALIASES or name in REPLICATION_THROTTLE_CONFIGS
        entries.append(_entry(name, broker.dynamic_default[name] if known else None,
                              _broker_synonyms(broker, name, per_broker=False), defn,
                              read_only=name not in DYNAMIC_BROKER_CONFIGS, sensitive=not known,
                              doc=_UNIT_ALIASES.get(name)))
    return entries


def group_config_entries(broker: BrokerConfig, overrides: dict[str, str]) -> list[ConfigEntry]:
    """Every group config of a group with these overrides (Kafka's createGroupConfigEntry); an
    internal one only if the group sets it, as Kafka 4.4 lists consumer.assignor.offload.enable."""
    entries = []
    for name, defn in sorted(GROUP_CONFIGS.items()):
        if defn.internal and name not in overrides:
            continue
        synonyms: list[ConfigSynonym] = []
        if name in overrides:
            synonyms.append(ConfigSynonym(name, overrides[name], ConfigSource.GROUP_CONFIG))
        if defn.broker_default:
            synonyms += _broker_synonyms(broker, defn.broker_default)
        else:
            synonyms.append(ConfigSynonym(name, config_string(defn.default), ConfigSource.DEFAULT_CONFIG))
        value = overrides.get(name, config_string(broker.values.get(defn.broker_default or "", defn.default)))
        entries.append(_entry(name, value, synonyms, defn))
    return entries


def _describe_resource(
    ctx: RequestContext, resource_type: int, name: str
) -> tuple[ErrorCode, str | None, list[ConfigEntry]]:
    state = ctx.state
    if resource_type == ConfigResourceType.TOPIC:
        try:
            validate_topic_name(name)
        except TopicError as e:
            return ErrorCode.invalid_topic_exception, str(e), []
        config = state.metadata_support.topic_config(name)
        if config is None:
            return ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition.", []
        return ErrorCode.none, None, topic_config_entries(state.config, config)
    if resource_type == ConfigResourceType.BROKER:
        if not name:
            return ErrorCode.none, None, default_broker_config_entries(state.config)
        try:
            node = int(name)
        except ValueError:
            return ErrorCode.invalid_request, f"Broker id must be an integer, but it is: {name}", []
        if node != state.node_id:
            return (ErrorCode.invalid_request,
                    f"Unexpected broker id, expected {state.node_id} or empty string, but received {name}", [])
        return ErrorCode.none, None, broker_config_entries(state.config)
    if resource_type == ConfigResourceType.GROUP:
        if not name:
            return ErrorCode.invalid_request, "Group name must not be empty", []
        return ErrorCode.none, None, group_config_entries(state.config, state.config_admin.group_configs(name))
    return ErrorCode.invalid_request, f"Unsupported resource type: {resource_type}", []


def config_refusal(ctx: RequestContext, resource_type: int, name: str, operation: AclOperation) -> ErrorCode | None:
    """Kafka's checks for DescribeConfigs (DESCRIBE_CONFIGS) and the AlterConfigs APIs
    (ALTER_CONFIGS): on the topic, the group, or the cluster for broker resources."""
    if resource_type == ConfigResourceType.TOPIC:
        ok, refused = ctx.allowed(operation, ResourceType.TOPIC, name), ErrorCode.topic_authorization_failed
    elif resource_type == ConfigResourceType.GROUP:
        ok, refused = ctx.allowed(operation, ResourceType.GROUP, name), ErrorCode.group_authorization_failed
    else:
        ok, refused = ctx.allowed_on_cluster(operation), ErrorCode.cluster_authorization_failed
    return None if ok else refused


def _filter(entries: list[ConfigEntry], keys: Iterable[str] | None) -> list[ConfigEntry]:
    wanted = set(keys or ())
    return [e for e in entries if e.name in wanted] if wanted else entries


async def handle_describe_configs(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    module = response_types(ctx)
    include_synonyms = bool(getattr(request, "include_synonyms", False))
    include_docs = bool(getattr(request, "include_documentation", False))
    results = []
    for resource in request.resources:
        refusal = config_refusal(ctx, int(resource.resource_type), resource.resource_name,
                                 AclOperation.DESCRIBE_CONFIGS)
        code, message, entries = (_describe_resource(ctx, int(resource.resource_type), resource.resource_name)
                                  if refusal is None else (refusal, None, []))
        configs = tuple(
            build(
                module.DescribeConfigsResourceResult,
                name=e.name, value=e.value, read_only=e.read_only, config_source=int(e.source),
                is_sensitive=e.is_sensitive,
                synonyms=tuple(
                    build(module.DescribeConfigsSynonym, name=s.name, value=s.value, source=int(s.source))
                    for s in e.synonyms
                ) if include_synonyms else (),
                config_type=int(e.config_type),
                documentation=e.documentation if include_docs else None,
            )
            for e in _filter(entries, resource.configuration_keys)
        )
        results.append(build(
            module.DescribeConfigsResult,
            error_code=code, error_message=message, resource_type=resource.resource_type,
            resource_name=resource.resource_name, configs=configs,
        ))
    return cast("DescribeConfigsResponse", build(
        module.DescribeConfigsResponse, throttle_time=NO_THROTTLE, results=tuple(results)))


APIS = [ApiSpec(ApiKey.DESCRIBE_CONFIGS, "DescribeConfigs", 1, 4, handle_describe_configs)]

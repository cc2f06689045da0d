"""Dynamic configuration changes on this node: what AlterConfigs (33) and
IncrementalAlterConfigs (44) do to topics, to this broker (and the cluster-wide broker
default) and to groups.

Kafka splits this between the broker's ConfigAdminManager (request checks, broker configs),
the controller's ConfigurationControlManager (SET / DELETE / APPEND / SUBTRACT applied to a
resource's stored configs; legacy AlterConfigs replaces them all) and
ControllerConfigurationValidator (topic and group configs); one node does it all here, with
their checks in their order and their error codes and messages. A resource's change is
validated whole before anything is stored, and ``validate_only`` stops there.

Where changes live: topic overrides in ``topics.json`` (``LogManager.alter_topic_config``),
in a cluster in ZooKeeper's ``/config/topics/T`` (every replica applies what its watch
sees, the answering broker at once), broker and group configs in ``dynamic-configs.json``
(``ConfigStore``). Each takes effect as soon as it is stored, as Kafka's do: partition logs
read their TopicConfig on every append (max.message.bytes, message.timestamp.type, a compact
policy's key check), roll (segment.*), retention pass (retention.*, cleanup.policy) and cleaner pass; a broker-level
topic default is folded into every topic's effective config; ``on_broker_change`` callbacks
re-read broker settings (the log cleaner's).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from eoslog.config import (
    BROKER_CONFIGS,
    DYNAMIC_BROKER_CONFIGS,
    GROUP_CONFIGS,
    LIST_CONFIGS,
    REPLICATION_THROTTLE_CONFIGS,
    SYNONYM_CHAIN,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigDef,
    ConfigError,
    check_topic_config,
    config_string,
    convert,
)
from eoslog.errors import Errors, KafkaError
from eoslog.kafka_configs import BROKER as KAFKA_BROKER
from eoslog.protocol.configs import AlterConfigOpType, ConfigResourceType
from eoslog.storage import LogManager, TopicError
from eoslog.storage.config_store import BROKER, GROUP, ConfigStore
from eoslog.storage.log_manager import validate_topic_name

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AlterOp:
    name: str
    op: AlterConfigOpType | int
    value: str | None


class TopicConfigs(Protocol):
    """Where the topics' overrides live: ``topics.json`` on one node, ZooKeeper in a cluster
    (the broker's ``MetadataSupport``)."""

    def topic_overrides(self, name: str) -> dict[str, str] | None:
        """The topic's overrides; None when there is no such topic."""

    def alter_topic_config(self, name: str, overrides: dict[str, str]) -> Awaitable[None] | None:
        """Replace the topic's overrides: done on return, or the write to await."""

    def alter_group_config(self, group: str, overrides: dict[str, str]) -> Awaitable[None] | None:
        """Share a group's configs with the other brokers (a cluster: the write to await)."""


class Refused(KafkaError):
    """A resource's change refused with a Kafka error and message."""

    @property
    def message(self) -> str:
        return str(self)


# GroupConfig's lower bounds (ConfigDef.Range.atLeast) and the broker configs bounding each.
_GROUP_AT_LEAST = {"share.record.lock.duration.ms": 1000, "consumer.assignment.interval.ms": 0}
_GROUP_BOUNDS = {
    "consumer.session.timeout.ms": "group.consumer.{}.session.timeout.ms",
    "consumer.heartbeat.interval.ms": "group.consumer.{}.heartbeat.interval.ms",
    "consumer.assignment.interval.ms": "group.consumer.{}.assignment.interval.ms",
    "share.session.timeout.ms": "group.share.{}.session.timeout.ms",
    "share.heartbeat.interval.ms": "group.share.{}.heartbeat.interval.ms",
    "share.record.lock.duration.ms": "group.share.{}.record.lock.duration.ms",
    "share.delivery.count.limit": "group.share.{}.delivery.count.limit",
    "share.partition.max.record.locks": "group.share.{}.partition.max.record.locks",
}


def check_request(resources: Iterable[tuple[int, str, Sequence[AlterOp]]], incremental: bool) -> list[Refused | None]:
    """ConfigAdminManager.preprocess's checks of each resource of a request, in its order:
    a resource given twice, a key given twice, a null value to set."""
    keys = [(int(t), n) for t, n, _ in resources]
    out: list[Refused | None] = []
    for (key, (_, _, ops)) in zip(keys, resources, strict=True):
        names = [o.name for o in ops]
        nulls = [o.name for o in ops if o.value is None and (not incremental or o.op != AlterConfigOpType.DELETE)]
        unknown_ops = [int(o.op) for o in ops if int(o.op) not in set(AlterConfigOpType)]
        if keys.count(key) > 1:
            out.append(Refused(Errors.INVALID_REQUEST, "Each resource must appear at most once."))
        elif unknown_ops:
            out.append(Refused(Errors.INVALID_REQUEST, f"Unknown operations type {unknown_ops[0]}"))
        elif len(set(names)) != len(names):
            out.append(Refused(Errors.INVALID_REQUEST, "Error due to duplicate config keys"))
        elif nulls:
            out.append(Refused(Errors.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls)))
        else:
            out.append(None)
    return out


def _parts(value: str | None) -> list[str]:
    return [v for v in (value or "").split(",") if v]


NotAList = Callable[[AlterConfigOpType, str], Refused]


def apply_ops(current: dict[str, str], ops: Sequence[AlterOp], *, incremental: bool,
              default: Callable[[str], str | None], not_a_list: NotAList) -> dict[str, str]:
    """The configs a resource has after ``ops``: legacy AlterConfigs sets exactly the given
    ones; incremental ops change one key each (APPEND/SUBTRACT on a LIST, starting from its
    default when it is not set)."""
    if not incremental:
        return {o.name: str(o.value) for o in ops}
    new = dict(current)
    for o in ops:
        op = AlterConfigOpType(o.op)
        if op is AlterConfigOpType.SET:
            new[o.name] = str(o.value)
        elif op is AlterConfigOpType.DELETE:
            new.pop(o.name, None)
        else:
            if o.name not in LIST_CONFIGS:
                raise not_a_list(op, o.name)
            parts = _parts(new[o.name] if o.name in new else default(o.name))
            for v in str(o.value).split(","):
                if op is AlterConfigOpType.APPEND and v not in parts:
                    parts.append(v)
                elif op is AlterConfigOpType.SUBTRACT and v in parts:
                    parts.remove(v)
            new[o.name] = ",".join(parts)
    return new


def _controller_not_a_list(op: AlterConfigOpType, name: str) -> Refused:
    return Refused(Errors.INVALID_CONFIG, f"Can't {op.name} to key {name} because its type is not LIST.")


def _broker_not_a_list(op: AlterConfigOpType, name: str) -> Refused:
    if name not in BROKER_CONFIGS and name not in SYNONYM_CHAIN:
        return Refused(Errors.INVALID_CONFIG, f"Unknown config name: {name}")
    return Refused(Errors.INVALID_CONFIG, f"Config value {op.name.lower()} is not allowed for config key: {name}")


class ConfigAdmin:
    """Validates, stores and applies dynamic config changes (see the module doc)."""

    def __init__(self, config: BrokerConfig, logs: LogManager, topics: TopicConfigs,
                 store: ConfigStore | None = None) -> None:
        self.config = config
        self.logs = logs
        self.topics = topics
        self.store = store or ConfigStore(logs.log_dir)
        self.on_broker_change: list[Callable[[], None]] = []
        default, mine = self.store.get(BROKER, ""), self.store.get(BROKER, str(config.node_id))
        try:
            config.set_dynamic(default, mine)
        except ConfigError as e:  # only a hand edit of the file can get here
            log.error("ignoring the stored dynamic broker configs: %s", e)
        logs.update_topic_defaults(config.topic_defaults())

    def group_configs(self, group: str) -> dict[str, str]:
        return self.store.get(GROUP, group)

    def group_value(self, group: str, key: str) -> Any:
        """A group config's value for ``group``: its own, else the broker config it defaults to."""
        return self._group_value(key, GROUP_CONFIGS[key], self.store.get(GROUP, group))

    def alter(self, resource_type: int, name: str, ops: Sequence[AlterOp], *,
              incremental: bool, validate_only: bool) -> Awaitable[None] | None:
        """Change one resource's configs; raises Refused. In a cluster a topic's or a group's
        change is returned as the ZooKeeper write to await (which raises Refused too)."""
        if resource_type == ConfigResourceType.TOPIC:
            return self._alter_topic(name, ops, incremental, validate_only)
        if resource_type == ConfigResourceType.BROKER:
            self._alter_broker(name, ops, incremental, validate_only)
        elif resource_type == ConfigResourceType.GROUP:
            return self._alter_group(name, ops, incremental, validate_only)
        else:
            raise Refused(Errors.INVALID_REQUEST, f"Unknown resource type {resource_type}")
        return None

    # -- topics ------------------------------------------------------------------------

    def topic_overrides(self, name: str) -> dict[str, str] | None:
        """A topic's overrides, from this broker's logs or (cluster) from ZooKeeper's; None
        when there is no such topic."""
        return self.topics.topic_overrides(name)

    def _alter_topic(self, name: str, ops: Sequence[AlterOp], incremental: bool,
                     validate_only: bool) -> Awaitable[None] | None:
        overrides = self.topic_overrides(name)
        new = apply_ops(overrides or {}, ops, incremental=incremental, not_a_list=_controller_not_a_list,
                        default=lambda key: config_string(TOPIC_CONFIGS[key].default))
        if not name:
            raise Refused(Errors.INVALID_REQUEST, "Default topic resources are not allowed.")
        try:
            validate_topic_name(name)
        except TopicError as e:
            raise Refused(e.error, str(e)) from None
        # Kafka 4.4 judges the configs before it looks for the topic: an unknown name or a bad
        # value on a missing topic is INVALID_CONFIG, a good change UNKNOWN_TOPIC_OR_PARTITION
        # (conformance: configs/alter-order).
        try:
            check_topic_config(self.logs.topic_defaults, new)
        except ConfigError as e:
            raise Refused(Errors.INVALID_CONFIG, str(e)) from None
        if overrides is None:
            raise Refused(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        if validate_only:
            return None
        try:
            pending = self.topics.alter_topic_config(name, new)
        except KafkaError as e:
            raise Refused(e.error, str(e)) from None
        return None if pending is None else self._refused_as_such(pending)

    @staticmethod
    async def _refused_as_such(pending: Awaitable[None]) -> None:
        try:
            await pending
        except KafkaError as e:
            raise Refused(e.error, str(e)) from None

    # -- brokers -----------------------------------------------------------------------

    def _alter_broker(self, name: str, ops: Sequence[AlterOp], incremental: bool, validate_only: bool) -> None:
        if name:
            try:
                node = int(name)
            except ValueError:
                raise Refused(Errors.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}") from None
            if node != self.config.node_id:
                raise Refused(Errors.INVALID_REQUEST,
                              f"Unexpected broker id, expected {self.config.node_id}, but received {name}")
        new = apply_ops(self.store.get(BROKER, name), ops, incremental=incremental, not_a_list=_broker_not_a_list,
                        default=lambda key: config_string(BROKER_CONFIGS[key].default))
        # Kafka's configs eoslog does not act on are listed read-only, so refused here too.
        known = BROKER_CONFIGS.keys() | SYNONYM_CHAIN.keys() | KAFKA_BROKER.keys()
        fixed = [k for k in sorted(new) if k in known and k not in DYNAMIC_BROKER_CONFIGS]
        if fixed:
            # Kafka answers INVALID_REQUEST for a broker config it cannot apply (KAFKA-13609).
            raise Refused(Errors.INVALID_REQUEST,
                          f"Cannot update these configs dynamically: Set({', '.join(fixed)})")
        for key in sorted(REPLICATION_THROTTLE_CONFIGS & new.keys()):
            if not new[key].strip().isdigit():  # DynamicConfig.Broker: a LONG, at least 0
                raise Refused(Errors.INVALID_CONFIG,
                              f"Invalid value {new[key]} for configuration {key}: Not a number of type LONG"
                              if not new[key].strip().lstrip("-").isdigit()
                              else f"Invalid value {new[key]} for configuration {key}: Value must be at least 0")
        default = new if not name else self.config.dynamic_default
        mine = new if name else self.config.dynamic_broker
        try:
            BrokerConfig(self.config.with_dynamic(default, mine)).topic_defaults()
        except ConfigError as e:
            raise Refused(Errors.INVALID_REQUEST, str(e)) from None
        if validate_only:
            return
        self.store.put(BROKER, name, new)
        self.config.set_dynamic(default, mine)
        self.logs.update_topic_defaults(self.config.topic_defaults())
        log.info("dynamic broker configs %s now %s", f"of broker {name}" if name else "(cluster default)", new)
        for callback in self.on_broker_change:
            callback()

    # -- groups ------------------------------------------------------------------------

    def _alter_group(self, name: str, ops: Sequence[AlterOp], incremental: bool,
                     validate_only: bool) -> Awaitable[None] | None:
        """Stored here at once; in a cluster also written to ZooKeeper (returned to await), which
        the other brokers' watches follow (``cluster/group_config_store.py``)."""
        new = apply_ops(self.store.get(GROUP, name), ops, incremental=incremental, not_a_list=_controller_not_a_list,
                        default=lambda key: None)
        if not name:
            raise Refused(Errors.INVALID_REQUEST, "Default group resources are not allowed.")
        self._validate_group(new)
        if validate_only:
            return None
        self.store.put(GROUP, name, new)
        return self.topics.alter_group_config(name, new)

    def _validate_group(self, overrides: dict[str, str]) -> None:
        """Kafka's GroupConfig.validate: known names, parsable values in range, each within
        its broker bounds, and each session timeout above its heartbeat interval."""
        values: dict[str, Any] = {}
        for key, defn in GROUP_CONFIGS.items():
            values[key] = self._group_value(key, defn, overrides)
        for key in overrides:
            if key not in GROUP_CONFIGS:
                raise Refused(Errors.INVALID_CONFIG, f"Unknown group config name: {key}")
        for key, bound in _GROUP_BOUNDS.items():
            low, high = self.config[bound.format("min")], self.config[bound.format("max")]
            if values[key] < low:
                raise Refused(Errors.INVALID_CONFIG, f"{key} must be greater than or equal to {bound.format('min')}")
            if values[key] > high:
                raise Refused(Errors.INVALID_CONFIG, f"{key} must be less than or equal to {bound.format('max')}")
        for kind in ("consumer", "share"):
            if values[f"{kind}.session.timeout.ms"] <= values[f"{kind}.heartbeat.interval.ms"]:
                raise Refused(Errors.INVALID_CONFIG,
                              f"{kind}.session.timeout.ms must be greater than {kind}.heartbeat.interval.ms")

    def _group_value(self, key: str, defn: ConfigDef, overrides: dict[str, str]) -> Any:
        if key not in overrides:
            return self.config.values.get(defn.broker_default or "", defn.default)
        try:
            return convert(defn, overrides[key], at_least=_GROUP_AT_LEAST.get(key, 1) if defn.type is int else None)
        except ConfigError as e:
            raise Refused(Errors.INVALID_CONFIG, str(e)) from None

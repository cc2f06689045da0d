"""Dynamic configs (broker/config_admin.py): SET / DELETE / APPEND / SUBTRACT and legacy
AlterConfigs on topics, this broker, the cluster-wide broker default and groups; Kafka's
checks, error codes and messages; the change in effect at once (the partition logs' configs,
DescribeConfigs' sources) and kept across a restart of the log manager.

Real files in a temporary directory; expected values come from what each test set."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from eoslog.broker.config_admin import AlterOp, ConfigAdmin, Refused, check_request
from eoslog.broker.handlers.configs import group_config_entries, topic_config_entries
from eoslog.broker.metadata_support import Advertised, SingleNode
from eoslog.config import BrokerConfig
from eoslog.errors import Errors
from eoslog.protocol.configs import AlterConfigOpType as OpType
from eoslog.protocol.configs import ConfigSource
from eoslog.records import InvalidRecordError, build_batch
from eoslog.storage import LogManager

TOPIC, BROKER, GROUP = 2, 4, 32
T0 = 1_700_000_000_000
SET, DELETE, APPEND, SUBTRACT = OpType.SET, OpType.DELETE, OpType.APPEND, OpType.SUBTRACT


class Node:
    """A log manager and its config admin on one data directory, restartable."""

    def __init__(self, root: Path, **static: str) -> None:
        self.root, self.static = root, static
        self.start()

    def start(self) -> None:
        self.config = BrokerConfig.load(overrides={"log.dirs": str(self.root), **self.static})
        self.logs = LogManager(self.root, self.config.topic_defaults(), lambda: T0)
        self.admin = ConfigAdmin(self.config, self.logs, SingleNode(self.config, self.logs, Advertised()))
        self.logs.startup()

    def restart(self) -> None:
        self.logs.shutdown()
        self.start()

    def alter(self, resource: int, name: str, *ops: tuple[str, OpType, str | None],
              incremental: bool = True, validate_only: bool = False) -> None:
        self.admin.alter(resource, name, [AlterOp(n, op, v) for n, op, v in ops],
                         incremental=incremental, validate_only=validate_only)

    def refusal(self, resource: int, name: str, *ops: tuple[str, OpType, str | None],
                incremental: bool = True) -> tuple[Errors, str]:
        with pytest.raises(Refused) as e:
            self.alter(resource, name, *ops, incremental=incremental)
        return e.value.error, e.value.message

    def overrides(self, topic: str) -> dict[str, object]:
        return dict(self.logs.topics[topic].config.overrides)

    def source(self, topic: str, name: str) -> tuple[str | None, ConfigSource]:
        entry = next(e for e in topic_config_entries(self.config, self.logs.topics[topic].config) if e.name == name)
        return entry.value, entry.source


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    n = Node(tmp_path, **{"log.retention.hours": "5"})
    n.logs.create_topic("t", 2, {"retention.ms": "1000"})
    yield n
    n.logs.shutdown()


def test_incremental_ops_on_a_topic_take_effect_on_its_logs_and_survive_a_restart(node: Node) -> None:
    node.alter(TOPIC, "t", ("max.message.bytes", SET, "2048"), ("retention.ms", DELETE, None))
    assert node.overrides("t") == {"max.message.bytes": 2048}
    for p in range(2):
        plog = node.logs.get_log("t", p)
        assert plog is not None and plog.config.max_message_bytes == 2048
        assert plog.config.retention_ms == 5 * 3_600_000  # back to the broker's log.retention.hours
    # Kafka 4.4 lists no synonym (so source DEFAULT) for a topic's retention.ms when only
    # log.retention.hours is set: ConfigHelper.configSynonyms drops every name before
    # log.retention.ms. Seen on Kafka 4.4 with log.retention.hours=5: 18000000, DEFAULT_CONFIG, [].
    assert node.source("t", "retention.ms") == (str(5 * 3_600_000), ConfigSource.DEFAULT_CONFIG)

    node.alter(TOPIC, "t", ("cleanup.policy", APPEND, "compact"))
    assert node.overrides("t")["cleanup.policy"] == "delete,compact"  # appended to Kafka's default
    node.alter(TOPIC, "t", ("cleanup.policy", SUBTRACT, "delete"))
    assert node.overrides("t")["cleanup.policy"] == "compact"
    node.alter(TOPIC, "t", ("cleanup.policy", APPEND, "compact"))  # already there: unchanged
    assert node.overrides("t")["cleanup.policy"] == "compact"

    node.restart()
    assert node.overrides("t") == {"max.message.bytes": 2048, "cleanup.policy": "compact"}
    plog = node.logs.get_log("t", 1)
    assert plog is not None and plog.config.compact and not plog.config.delete


def test_a_topic_switched_to_compact_refuses_keyless_records_at_once(node: Node) -> None:
    plog = node.logs.get_log("t", 0)
    assert plog is not None
    keyless = build_batch([(None, b"v", ())], timestamp=T0)
    plog.append_as_leader(keyless)
    node.alter(TOPIC, "t", ("cleanup.policy", SET, "compact"))
    with pytest.raises(InvalidRecordError) as e:
        plog.append_as_leader(keyless)
    assert e.value.error is Errors.INVALID_RECORD
    plog.append_as_leader(build_batch([(b"k", b"v", ())], timestamp=T0))
    node.alter(TOPIC, "t", ("cleanup.policy", DELETE, None))
    assert plog.append_as_leader(keyless).first_offset == 2


def test_legacy_alter_configs_replaces_every_override(node: Node) -> None:
    node.alter(TOPIC, "t", ("segment.ms", SET, "60000"), incremental=False)
    assert node.overrides("t") == {"segment.ms": 60000}


def test_validate_only_changes_nothing(node: Node) -> None:
    node.alter(TOPIC, "t", ("retention.ms", SET, "7"), validate_only=True)
    node.alter(BROKER, "0", ("log.retention.ms", SET, "7"), validate_only=True)
    node.alter(GROUP, "g", ("consumer.session.timeout.ms", SET, "50000"), validate_only=True)
    assert node.overrides("t") == {"retention.ms": 1000}
    assert node.config.dynamic_broker == {} and node.admin.group_configs("g") == {}
    assert not (node.root / "dynamic-configs.json").exists()


def test_topic_refusals_in_kafkas_order_and_words(node: Node) -> None:
    invalid_config, invalid_request = Errors.INVALID_CONFIG, Errors.INVALID_REQUEST
    assert node.refusal(TOPIC, "t", ("retention.ms", APPEND, "5")) == (
        invalid_config, "Can't APPEND to key retention.ms because its type is not LIST.")
    assert node.refusal(TOPIC, "t", ("no.such.config", SET, "1")) == (
        invalid_config, "Unknown topic config name: no.such.config")
    assert node.refusal(TOPIC, "t", ("cleanup.policy", SET, "shred"))[0] == invalid_config
    assert node.refusal(TOPIC, "t", ("retention.ms", SET, "soon"))[0] == invalid_config
    assert node.refusal(TOPIC, "missing", ("retention.ms", SET, "1")) == (
        Errors.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'missing' does not exist.")
    # A bad value is reported before a missing topic, as Kafka's controller validates first.
    assert node.refusal(TOPIC, "missing", ("retention.ms", SET, "x"))[0] == invalid_config
    assert node.refusal(TOPIC, "", ("retention.ms", SET, "1")) == (
        invalid_request, "Default topic resources are not allowed.")
    assert node.refusal(TOPIC, "bad/name", ("retention.ms", SET, "1"))[0] == Errors.INVALID_TOPIC_EXCEPTION
    assert node.refusal(8, "0", ("root", SET, "DEBUG")) == (invalid_request, "Unknown resource type 8")
    assert node.overrides("t") == {"retention.ms": 1000}


def test_request_checks_before_any_resource_is_touched() -> None:
    ops = [AlterOp("a", SET, "1")]
    checked = check_request([(TOPIC, "x", ops), (TOPIC, "x", ops), (TOPIC, "y", ops + ops),
                             (TOPIC, "z", [AlterOp("a", SET, None), AlterOp("b", DELETE, None)]),
                             (TOPIC, "w", [AlterOp("a", 7, "1")]), (TOPIC, "ok", ops)], incremental=True)
    assert [(r.error, r.message) if r else None for r in checked] == [
        (Errors.INVALID_REQUEST, "Each resource must appear at most once."),
        (Errors.INVALID_REQUEST, "Each resource must appear at most once."),
        (Errors.INVALID_REQUEST, "Error due to duplicate config keys"),
        (Errors.INVALID_REQUEST, "Null value not supported for : a"),
        (Errors.INVALID_REQUEST, "Unknown operations type 7"),
        None,
    ]
    legacy = check_request([(TOPIC, "z", [AlterOp("b", SET, None)])], incremental=False)
    assert legacy[0] is not None and legacy[0].message == "Null value not supported for : b"


def test_dynamic_broker_configs_layer_over_static_ones_and_apply_to_every_topic(node: Node) -> None:
    node.logs.create_topic("plain", 1)
    node.alter(BROKER, "", ("log.retention.ms", SET, "111"), ("log.segment.bytes", SET, "4096"))
    assert node.source("plain", "retention.ms") == ("111", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    node.alter(BROKER, "0", ("log.retention.ms", SET, "222"))
    assert node.source("plain", "retention.ms") == ("222", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert node.source("t", "retention.ms") == ("1000", ConfigSource.DYNAMIC_TOPIC_CONFIG)  # its override wins
    plog = node.logs.get_log("plain", 0)
    assert plog is not None and plog.config.retention_ms == 222 and plog.config.segment_bytes == 4096

    node.restart()
    assert node.config.dynamic_default == {"log.retention.ms": "111", "log.segment.bytes": "4096"}
    assert node.config.dynamic_broker == {"log.retention.ms": "222"}
    plog = node.logs.get_log("plain", 0)
    assert plog is not None and plog.config.retention_ms == 222 and plog.config.segment_bytes == 4096

    node.alter(BROKER, "0", ("log.retention.ms", DELETE, None))
    assert node.source("plain", "retention.ms") == ("111", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    node.alter(BROKER, "", ("log.retention.ms", DELETE, None))
    # As Kafka 4.4 lists it with only log.retention.hours set (test above).
    assert node.source("plain", "retention.ms") == (str(5 * 3_600_000), ConfigSource.DEFAULT_CONFIG)


def test_broker_refusals(node: Node) -> None:
    invalid_request = Errors.INVALID_REQUEST
    assert node.refusal(BROKER, "0", ("node.id", SET, "3"), ("log.dirs", SET, "/x")) == (
        invalid_request, "Cannot update these configs dynamically: Set(log.dirs, node.id)")
    assert node.refusal(BROKER, "7", ("log.retention.ms", SET, "1")) == (
        invalid_request, "Unexpected broker id, expected 0, but received 7")
    assert node.refusal(BROKER, "x", ("log.retention.ms", SET, "1")) == (
        invalid_request, "Node id must be an integer, but it is: x")
    assert node.refusal(BROKER, "0", ("log.retention.ms", SET, "soon"))[0] == invalid_request
    assert node.refusal(BROKER, "0", ("log.cleanup.policy", SET, "shred"))[0] == invalid_request
    assert node.refusal(BROKER, "0", ("log.retention.ms", APPEND, "1")) == (
        Errors.INVALID_CONFIG, "Config value append is not allowed for config key: log.retention.ms")
    node.alter(BROKER, "0", ("log.cleanup.policy", APPEND, "compact"))
    assert node.config["log.cleanup.policy"] == "delete,compact"
    assert node.config.dynamic_broker == {"log.cleanup.policy": "delete,compact"}


def test_group_configs_with_kafkas_bounds_and_sources(node: Node) -> None:
    def entries(group: str) -> dict[str, tuple[str | None, ConfigSource]]:
        return {e.name: (e.value, e.source)
                for e in group_config_entries(node.config, node.admin.group_configs(group))}

    untouched = entries("any-group")
    assert untouched["consumer.session.timeout.ms"] == ("45000", ConfigSource.DEFAULT_CONFIG)
    assert untouched["share.auto.offset.reset"] == ("latest", ConfigSource.DEFAULT_CONFIG)
    assert untouched["share.delivery.count.limit"] == ("5", ConfigSource.DEFAULT_CONFIG)
    assert untouched["share.isolation.level"] == ("read_uncommitted", ConfigSource.DEFAULT_CONFIG)
    assert untouched["consumer.assignment.interval.ms"] == ("1000", ConfigSource.DEFAULT_CONFIG)
    assert "consumer.assignor.offload.enable" not in untouched  # internal in Kafka: listed once set
    assert len(untouched) == 10

    node.alter(GROUP, "g", ("consumer.session.timeout.ms", SET, "50000"), ("share.auto.offset.reset", SET, "earliest"),
               ("consumer.assignor.offload.enable", SET, "false"))
    assert entries("g")["consumer.session.timeout.ms"] == ("50000", ConfigSource.GROUP_CONFIG)
    assert entries("g")["share.auto.offset.reset"] == ("earliest", ConfigSource.GROUP_CONFIG)
    assert entries("g")["consumer.assignor.offload.enable"] == ("false", ConfigSource.GROUP_CONFIG)
    node.restart()
    assert entries("g")["consumer.session.timeout.ms"] == ("50000", ConfigSource.GROUP_CONFIG)
    assert entries("other")["consumer.session.timeout.ms"] == ("45000", ConfigSource.DEFAULT_CONFIG)

    invalid_config = Errors.INVALID_CONFIG
    assert node.refusal(GROUP, "g", ("consumer.session.timeout.ms", SET, "70000")) == (
        invalid_config,
        "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms")
    assert node.refusal(GROUP, "g", ("consumer.heartbeat.interval.ms", SET, "1000")) == (
        invalid_config,
        "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms")
    assert node.refusal(GROUP, "g", ("consumer.session.timeout.ms", SET, "0"))[0] == invalid_config
    assert node.refusal(GROUP, "g", ("share.auto.offset.reset", SET, "sometimes"))[0] == invalid_config
    assert node.refusal(GROUP, "g", ("share.delivery.count.limit", SET, "11")) == (
        invalid_config, "share.delivery.count.limit must be less than or equal to group.share.max.delivery.count.limit")
    assert node.refusal(GROUP, "g", ("share.isolation.level", SET, "read_sometimes"))[0] == invalid_config
    assert node.refusal(GROUP, "g", ("session.timeout.ms", SET, "1")) == (
        invalid_config, "Unknown group config name: session.timeout.ms")
    assert node.refusal(GROUP, "g", ("consumer.session.timeout.ms", APPEND, "1")) == (
        invalid_config, "Can't APPEND to key consumer.session.timeout.ms because its type is not LIST.")
    assert node.refusal(GROUP, "", ("consumer.session.timeout.ms", SET, "50000"))[0] == Errors.INVALID_REQUEST
    node.alter(GROUP, "g", ("consumer.session.timeout.ms", DELETE, None), ("share.auto.offset.reset", DELETE, None),
               ("consumer.assignor.offload.enable", DELETE, None))
    assert node.admin.group_configs("g") == {}

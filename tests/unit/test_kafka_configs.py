"""eoslog's DescribeConfigs against Kafka 4.4's own definitions, read from the reference jars by
scripts/KafkaConfigs.java (run here): every broker and topic config Kafka lists is listed, with
Kafka's type, its default where eoslog has not chosen another (each such choice named below with
its reason), Kafka's broker synonyms for topic configs, and passwords never shown. The generated
src/eoslog/kafka_configs.py must match the jars (scripts/kafka_configs.py rewrites it)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from eoslog.broker.handlers.configs import broker_config_entries, topic_config_entries
from eoslog.config import BrokerConfig, TopicConfig
from eoslog.protocol.configs import ConfigSource, ConfigType
from support.deps import require, require_java
from support.kafka_harness import kafka_classpath

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import kafka_configs  # noqa: E402  (scripts/ is not a package)

# eoslog's defaults that are not Kafka's, and why.
OWN_DEFAULTS = {
    "listeners": "one loopback listener on 9092, not every interface",
    "log.dirs": "./eoslog-data (Kafka's is null: log.dir's /tmp/kafka-logs supplies it)",
    "log.flush.interval.ms": "Long.MAX_VALUE, what Kafka's null means (flush.ms's default)",
    "node.id": "a single node is node 0 without being told (Kafka has no default)",
    "broker.id": "node.id's value (Kafka's -1 means the same: take node.id)",
    "offsets.topic.replication.factor": "a single node holds one replica (config.SINGLE_NODE_DEFAULTS)",
    "transaction.state.log.replication.factor": "a single node holds one replica",
    "transaction.state.log.min.isr": "a single node holds one replica",
    "ssl.keystore.type": "PEM only (Kafka: JKS)",
    "ssl.truststore.type": "PEM only (Kafka: JKS)",
    "log.flush.scheduler.interval.ms": "flush.ms and file.delete.delay.ms are checked every second "
                                       "(Kafka's Long.MAX_VALUE never checks flush.ms)",
}


@pytest.fixture(scope="module")
def kafka() -> list[dict[str, Any]]:
    require_java()
    require("a JDK (javac; Java's single-file source launcher needs its compiler)", shutil.which("javac") is not None,
            "apt-get install -y openjdk-17-jdk-headless (scripts/setup.sh does it)")
    kafka_classpath()  # fails naming scripts/setup.sh when the reference jars are missing
    return kafka_configs.read_definitions()


def test_the_generated_table_matches_the_jars(kafka: list[dict[str, Any]]) -> None:
    assert kafka_configs.render(kafka, kafka_configs.kafka_version()) == kafka_configs.TARGET.read_text(), (
        "src/eoslog/kafka_configs.py is out of date: run scripts/kafka_configs.py")


def test_describe_configs_lists_every_broker_config_kafka_lists(kafka: list[dict[str, Any]]) -> None:
    ours = {e.name: e for e in broker_config_entries(BrokerConfig.load(overrides={"zookeeper.connect": ""}))}
    theirs = {d["name"]: d for d in kafka if d["kind"] == "broker"}
    assert len(theirs) > 300
    assert sorted(set(theirs) - set(ours)) == []
    differ = {}
    for name, d in theirs.items():
        e = ours[name]
        assert e.config_type is ConfigType[d["type"]], name
        if d["type"] == "PASSWORD":
            assert e.is_sensitive and e.value is None, name
            continue
        if e.source is ConfigSource.DEFAULT_CONFIG and e.value != d["default"]:
            differ[name] = (e.value, d["default"])
    assert {n: v for n, v in differ.items() if n not in OWN_DEFAULTS} == {}, \
        "eoslog's default differs from Kafka's; give the reason in OWN_DEFAULTS or take Kafka's"
    assert sorted(set(OWN_DEFAULTS) - set(differ)) == []  # the list stays true
    # What eoslog lets change at run time, Kafka does too (the rest it lists read-only).
    assert sorted(n for n, e in ours.items() if not e.read_only and n in theirs and not theirs[n]["dynamic"]) == []


def test_describe_configs_lists_every_topic_config_with_kafkas_synonyms(kafka: list[dict[str, Any]]) -> None:
    broker = BrokerConfig.load()
    entries = {e.name: e for e in topic_config_entries(broker, TopicConfig(broker.topic_defaults()))}
    theirs = {d["name"]: d for d in kafka if d["kind"] == "topic"}
    assert sorted(entries) == sorted(theirs)
    for name, d in theirs.items():
        e = entries[name]
        assert (e.config_type, e.value) == (ConfigType[d["type"]], d["default"]), name
        # Kafka's synonyms name the broker configs in its order; those whose default is null in
        # Kafka (log.retention.ms, log.roll.ms, log.roll.jitter.ms, log.flush.interval.ms) are
        # not listed by a DescribeConfigs of a fresh broker.
        listed = [s.name for s in e.synonyms]
        assert listed == [n for n in d["synonyms"] if n in listed], name
        assert set(listed) <= set(d["synonyms"]), name

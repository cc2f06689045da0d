"""Admin APIs through real admin clients: CreateTopics, DeleteTopics, CreatePartitions,
DescribeConfigs and DescribeCluster.

librdkafka (confluent-kafka) speaks CreateTopics v4, DeleteTopics v1, CreatePartitions
v1, DescribeConfigs v1 and DescribeCluster v0; kafka-python 3 the newest versions
(CreateTopics v7, DeleteTopics v6 by topic id, DescribeConfigs v4, DescribeCluster v2);
aiokafka the v1-v3 range. Expected values come from what each test asked for or from
the broker's own configuration, never from a copy of the broker's answer.
"""

from __future__ import annotations

import asyncio
import datetime
import socket
import struct
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KpNewTopic
from kio.index import load_payload_module
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader
from kio.static.constants import EntityType

from eoslog.config import BROKER_CONFIGS, TOPIC_CONFIGS
from eoslog.protocol.codec import encode_request

sys.path.insert(0, str(Path(__file__).parent.parent))
from support.harness import BrokerProcess

TIMEOUT_S = 30.0
RETENTION_HOURS = 5
NUM_PARTITIONS = 4


@pytest.fixture(scope="module")
def tuned_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker whose properties differ from the defaults, with topic deletion off."""
    b = BrokerProcess(
        tmp_path_factory.mktemp("tuned") / "data",
        overrides={"num.partitions": str(NUM_PARTITIONS), "log.retention.hours": str(RETENTION_HOURS),
                   "delete.topic.enable": "false"},
    ).start()
    yield b
    if b.alive():
        b.stop()


def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def kp_admin(broker: BrokerProcess) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=int(TIMEOUT_S * 1000))


def result_error(future: Any) -> KafkaError | None:
    """The KafkaError a confluent admin future failed with, or None on success."""
    try:
        future.result(timeout=TIMEOUT_S)
    except KafkaException as e:
        err: KafkaError = e.args[0]
        return err
    return None


def partition_count(a: AdminClient, topic: str) -> int:
    md = a.list_topics(topic=topic, timeout=TIMEOUT_S).topics[topic]
    assert md.error is None, md.error
    return len(md.partitions)


def topic_names(broker: BrokerProcess) -> set[str]:
    # kafka-python asks for all topics; librdkafka's all-topics Metadata request is
    # not used here (see the report on codec trailing bytes).
    client = kp_admin(broker)
    try:
        return set(client.list_topics())
    finally:
        client.close()


def partition_dirs(broker: BrokerProcess, topic: str) -> list[str]:
    return sorted(d.name for d in broker.data_dir.iterdir() if d.is_dir() and d.name.rsplit("-", 1)[0] == topic)


def cluster_id(broker: BrokerProcess) -> str:
    props = dict(line.split("=", 1) for line in (broker.data_dir / "meta.properties").read_text().splitlines()
                 if "=" in line)
    return props["cluster.id"]


# -- confluent-kafka (librdkafka) ---------------------------------------------------


def test_create_topics_with_partitions_configs_and_defaults(tuned_broker: BrokerProcess) -> None:
    a = admin(tuned_broker)
    futures = a.create_topics([
        NewTopic("adm-explicit", 3, 1, config={"retention.ms": "123456", "cleanup.policy": "compact"}),
        NewTopic("adm-defaults"),  # -1 / -1: num.partitions and default.replication.factor
    ], request_timeout=TIMEOUT_S)
    assert {t: result_error(f) for t, f in futures.items()} == {"adm-explicit": None, "adm-defaults": None}
    assert partition_count(a, "adm-explicit") == 3
    assert partition_count(a, "adm-defaults") == NUM_PARTITIONS
    assert partition_dirs(tuned_broker, "adm-explicit") == [f"adm-explicit-{p}" for p in range(3)]

    again = a.create_topics([NewTopic("adm-explicit", 3, 1)], request_timeout=TIMEOUT_S)
    err = result_error(again["adm-explicit"])
    assert err is not None and err.code() == KafkaError.TOPIC_ALREADY_EXISTS


def test_create_topics_validate_only_creates_nothing(shared_broker: BrokerProcess) -> None:
    a = admin(shared_broker)
    futures = a.create_topics([NewTopic("adm-validate", 2, 1)], validate_only=True, request_timeout=TIMEOUT_S)
    assert result_error(futures["adm-validate"]) is None
    assert "adm-validate" not in topic_names(shared_broker)
    assert partition_dirs(shared_broker, "adm-validate") == []
    # A refusal is still reported in validate-only mode.
    bad = a.create_topics([NewTopic("adm-validate", 1, 2)], validate_only=True, request_timeout=TIMEOUT_S)
    err = result_error(bad["adm-validate"])
    assert err is not None and err.code() == KafkaError.INVALID_REPLICATION_FACTOR


def test_create_topics_refusals(shared_broker: BrokerProcess) -> None:
    a = admin(shared_broker)
    futures = a.create_topics([
        NewTopic("adm-rf3", 1, 3),
        NewTopic("adm-unknown-config", 1, 1, config={"no.such.config": "1"}),
        NewTopic("adm-bad-value", 1, 1, config={"retention.ms": "soon"}),
        NewTopic("adm-bad-policy", 1, 1, config={"cleanup.policy": "shred"}),
        NewTopic("adm-zero-partitions", 0, 1),
        NewTopic("bad/name", 1, 1),
    ], request_timeout=TIMEOUT_S)
    errors = {t: result_error(f) for t, f in futures.items()}
    codes = {t: e.code() if e is not None else None for t, e in errors.items()}
    assert codes == {
        "adm-rf3": KafkaError.INVALID_REPLICATION_FACTOR,
        "adm-unknown-config": KafkaError.INVALID_CONFIG,
        "adm-bad-value": KafkaError.INVALID_CONFIG,
        "adm-bad-policy": KafkaError.INVALID_CONFIG,
        "adm-zero-partitions": KafkaError.INVALID_PARTITIONS,
        "bad/name": KafkaError.TOPIC_EXCEPTION,
    }
    rf3 = errors["adm-rf3"]
    assert rf3 is not None and "replication factor of 3" in rf3.str() and "1 broker(s)" in rf3.str()
    unknown = errors["adm-unknown-config"]
    assert unknown is not None and "no.such.config" in unknown.str()
    assert not topic_names(shared_broker) & set(futures)


def test_create_topics_manual_assignment(shared_broker: BrokerProcess) -> None:
    a = admin(shared_broker)
    ok = a.create_topics([NewTopic("adm-assigned", 2, replica_assignment=[[0], [0]])], request_timeout=TIMEOUT_S)
    assert result_error(ok["adm-assigned"]) is None
    assert partition_count(a, "adm-assigned") == 2
    bad = a.create_topics([NewTopic("adm-assigned-bad", 2, replica_assignment=[[0], [1]])], request_timeout=TIMEOUT_S)
    err = result_error(bad["adm-assigned-bad"])
    assert err is not None and err.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert "broker 1" in err.str()


def test_describe_configs_topic(tuned_broker: BrokerProcess) -> None:
    a = admin(tuned_broker)
    created = a.create_topics([NewTopic("adm-described", 1, 1, config={"max.message.bytes": "4242"})],
                              request_timeout=TIMEOUT_S)
    assert result_error(created["adm-described"]) is None
    resource = ConfigResource(ResourceType.TOPIC, "adm-described")
    configs = a.describe_configs([resource], request_timeout=TIMEOUT_S)[resource].result(timeout=TIMEOUT_S)
    assert set(configs) == set(TOPIC_CONFIGS)

    override = configs["max.message.bytes"]
    assert (override.value, override.source) == ("4242", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert override.synonyms["max.message.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert "message.max.bytes" in override.synonyms  # the broker default behind it

    # retention.ms comes from the broker's log.retention.hours property; Kafka 4.4 then lists no
    # synonym and says DEFAULT_CONFIG (ConfigHelper.configSynonyms drops the names before
    # log.retention.ms), and so does eoslog.
    retention = configs["retention.ms"]
    assert retention.value == str(RETENTION_HOURS * 3_600_000)
    assert retention.source == ConfigSource.DEFAULT_CONFIG.value
    assert not retention.synonyms

    segment = configs["segment.bytes"]
    assert segment.value == str(TOPIC_CONFIGS["segment.bytes"].default)
    assert segment.source == ConfigSource.DEFAULT_CONFIG.value
    assert not segment.is_read_only and not segment.is_sensitive

    missing = ConfigResource(ResourceType.TOPIC, "adm-no-such-topic")
    fut = a.describe_configs([missing], request_timeout=TIMEOUT_S)[missing]
    err = result_error(fut)
    assert err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_describe_configs_broker(tuned_broker: BrokerProcess) -> None:
    a = admin(tuned_broker)
    resource = ConfigResource(ResourceType.BROKER, "0")
    configs = a.describe_configs([resource], request_timeout=TIMEOUT_S)[resource].result(timeout=TIMEOUT_S)
    assert set(BROKER_CONFIGS) <= set(configs)

    partitions = configs["num.partitions"]
    assert (partitions.value, partitions.source) == (str(NUM_PARTITIONS), ConfigSource.STATIC_BROKER_CONFIG.value)
    assert partitions.is_read_only
    log_dirs = configs["log.dirs"]
    assert (log_dirs.value, log_dirs.source) == (str(tuned_broker.data_dir), ConfigSource.STATIC_BROKER_CONFIG.value)
    assert configs["delete.topic.enable"].value == "false"

    untouched = configs["socket.request.max.bytes"]
    assert untouched.value == str(BROKER_CONFIGS["socket.request.max.bytes"].default)
    assert untouched.source == ConfigSource.DEFAULT_CONFIG.value
    assert not configs["log.segment.bytes"].is_read_only  # a topic default: dynamic in Kafka



def test_create_partitions(shared_broker: BrokerProcess) -> None:
    a = admin(shared_broker)
    assert result_error(a.create_topics([NewTopic("adm-grow", 1, 1)], request_timeout=TIMEOUT_S)["adm-grow"]) is None

    dry = a.create_partitions([NewPartitions("adm-grow", 5)], validate_only=True, request_timeout=TIMEOUT_S)
    assert result_error(dry["adm-grow"]) is None
    assert partition_count(a, "adm-grow") == 1

    grown = a.create_partitions([NewPartitions("adm-grow", 3)], request_timeout=TIMEOUT_S)
    assert result_error(grown["adm-grow"]) is None
    assert partition_count(a, "adm-grow") == 3
    assert partition_dirs(shared_broker, "adm-grow") == [f"adm-grow-{p}" for p in range(3)]

    # The new partitions take writes.
    p = Producer({"bootstrap.servers": shared_broker.bootstrap, "acks": "all"})
    delivered: list[tuple[int, int]] = []
    p.produce("adm-grow", b"v", partition=2,
              on_delivery=lambda err, msg: delivered.append((msg.partition(), msg.offset())) if err is None else None)
    assert p.flush(TIMEOUT_S) == 0
    assert delivered == [(2, 0)]

    shrink = a.create_partitions([NewPartitions("adm-grow", 2)], request_timeout=TIMEOUT_S)
    err = result_error(shrink["adm-grow"])
    assert err is not None and err.code() == KafkaError.INVALID_PARTITIONS
    unknown = a.create_partitions([NewPartitions("adm-grow-missing", 2)], request_timeout=TIMEOUT_S)
    err = result_error(unknown["adm-grow-missing"])
    assert err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert partition_count(a, "adm-grow") == 3


def test_delete_topics(shared_broker: BrokerProcess) -> None:
    a = admin(shared_broker)
    created = a.create_topics([NewTopic("adm-doomed", 2, 1)], request_timeout=TIMEOUT_S)
    assert result_error(created["adm-doomed"]) is None
    p = Producer({"bootstrap.servers": shared_broker.bootstrap})
    for i in range(20):
        p.produce("adm-doomed", b"%d" % i, partition=i % 2)
    assert p.flush(TIMEOUT_S) == 0
    assert partition_dirs(shared_broker, "adm-doomed") == ["adm-doomed-0", "adm-doomed-1"]

    futures = a.delete_topics(["adm-doomed", "adm-never-existed"], request_timeout=TIMEOUT_S)
    assert result_error(futures["adm-doomed"]) is None
    err = result_error(futures["adm-never-existed"])
    assert err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    assert "adm-doomed" not in topic_names(shared_broker)
    assert not [d for d in shared_broker.data_dir.iterdir() if d.name.startswith("adm-doomed")]
    again = a.delete_topics(["adm-doomed"], request_timeout=TIMEOUT_S)
    err = result_error(again["adm-doomed"])
    assert err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_delete_topics_disabled(tuned_broker: BrokerProcess) -> None:
    a = admin(tuned_broker)
    assert result_error(a.create_topics([NewTopic("adm-kept", 1, 1)], request_timeout=TIMEOUT_S)["adm-kept"]) is None
    err = result_error(a.delete_topics(["adm-kept"], request_timeout=TIMEOUT_S)["adm-kept"])
    assert err is not None and err.code() == KafkaError.TOPIC_DELETION_DISABLED
    client = kp_admin(tuned_broker)
    try:
        result = client.delete_topics(["adm-kept"], raise_errors=False)
    finally:
        client.close()
    assert [(t["name"], t["error_code"]) for t in result["topics"]] == [
        ("adm-kept", KafkaError.TOPIC_DELETION_DISABLED)]
    # Before v3 Kafka had no TOPIC_DELETION_DISABLED and answered INVALID_REQUEST.
    v1 = load_payload_module(20, 1, EntityType.request)
    old = raw_call(tuned_broker, v1.DeleteTopicsRequest(topic_names=("adm-kept",), timeout=datetime.timedelta(0)))
    assert [(r.name, r.error_code) for r in old.responses] == [("adm-kept", KafkaError.INVALID_REQUEST)]
    assert "adm-kept" in topic_names(tuned_broker)
    assert partition_dirs(tuned_broker, "adm-kept") == ["adm-kept-0"]


def test_describe_cluster_confluent(shared_broker: BrokerProcess) -> None:
    a = admin(shared_broker)  # kept alive until the future resolves
    result = a.describe_cluster(request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
    assert result.cluster_id == cluster_id(shared_broker)
    assert result.controller.id == 0
    assert [(n.id, n.host, n.port) for n in result.nodes] == [(0, "127.0.0.1", shared_broker.port)]


# -- kafka-python -------------------------------------------------------------------


def test_kafka_python_create_describe_delete(shared_broker: BrokerProcess) -> None:
    client = kp_admin(shared_broker)
    try:
        created = client.create_topics({"adm-kp": {"num_partitions": 2, "configs": {"segment.ms": "3600000"}}})
        [topic] = created["topics"]
        assert (topic["name"], topic["error_code"], topic["num_partitions"], topic["replication_factor"]) == (
            "adm-kp", 0, 2, 1)
        assert topic["configs"]["segment.ms"]["value"] == "3600000"
        assert topic["configs"]["segment.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert set(topic["configs"]) == set(TOPIC_CONFIGS)
        [described] = client.describe_topics(["adm-kp"])
        assert uuid.UUID(str(described["topic_id"])) == uuid.UUID(str(topic["topic_id"]))

        configs = client.describe_configs([KpConfigResource("TOPIC", "adm-kp")], config_filter="all")
        topic_configs = configs["topic"]["adm-kp"]
        assert topic_configs["segment.ms"]["value"] == "3600000"
        assert topic_configs["segment.ms"]["config_type"] == "LONG"
        assert topic_configs["cleanup.policy"]["config_type"] == "LIST"
        assert topic_configs["cleanup.policy"]["documentation"] is None  # not asked for
        broker_configs = client.describe_configs([KpConfigResource("BROKER", "0")], config_filter="all")
        assert broker_configs["broker"]["0"]["log.dirs"]["value"] == str(shared_broker.data_dir)
        assert broker_configs["broker"]["0"]["log.dirs"]["config_source"] == "STATIC_BROKER_CONFIG"

        # Duplicates in one request: INVALID_REQUEST for that name, the rest proceed.
        dup = client.create_topics([KpNewTopic("adm-kp-dup", 1, 1), KpNewTopic("adm-kp-dup", 1, 1),
                                    KpNewTopic("adm-kp-single", 1, 1)], raise_errors=False)
        by_name = {t["name"]: (t["error_code"], t["error_message"]) for t in dup["topics"]}
        assert by_name == {"adm-kp-dup": (KafkaError.INVALID_REQUEST, "Duplicate topic name."),
                           "adm-kp-single": (0, None)}

        # DeleteTopics v6 by topic id, and an unknown id.
        topic_id = uuid.UUID(str(topic["topic_id"]))
        missing_id = uuid.uuid4()
        deleted = client.delete_topics([topic_id, missing_id], raise_errors=False)
        outcome = {uuid.UUID(str(t["topic_id"])): t["error_code"] for t in deleted["topics"]}
        assert outcome == {topic_id: 0, missing_id: KafkaError.UNKNOWN_TOPIC_ID}
        assert client.delete_topics(["adm-kp-single"])["topics"][0]["error_code"] == 0
        assert not {"adm-kp", "adm-kp-single"} & set(client.list_topics())

        cluster = client.describe_cluster()
        assert cluster["cluster_id"] == cluster_id(shared_broker)
        assert cluster["controller_id"] == 0
        assert [(b["broker_id"], b["port"]) for b in cluster["brokers"]] == [(0, shared_broker.port)]
    finally:
        client.close()
    assert partition_dirs(shared_broker, "adm-kp") == []


# -- aiokafka -----------------------------------------------------------------------


def test_aiokafka_create_partitions_describe_delete(shared_broker: BrokerProcess) -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import NewPartitions as AioNewPartitions
    from aiokafka.admin import NewTopic as AioNewTopic
    from aiokafka.admin.config_resource import ConfigResource as AioConfigResource
    from aiokafka.admin.config_resource import ConfigResourceType

    async def scenario() -> None:
        client = AIOKafkaAdminClient(bootstrap_servers=shared_broker.bootstrap)
        await client.start()
        try:
            created = await client.create_topics([AioNewTopic("adm-aio", 1, 1, topic_configs={"flush.ms": "5000"})])
            assert [(t[0], t[1]) for t in created.topic_errors] == [("adm-aio", 0)]
            clash = await client.create_topics([AioNewTopic("adm-aio", 1, 1)])
            assert [(t[0], t[1]) for t in clash.topic_errors] == [("adm-aio", KafkaError.TOPIC_ALREADY_EXISTS)]

            grown = await client.create_partitions({"adm-aio": AioNewPartitions(2)})
            assert [(t[0], t[1]) for t in grown.topic_errors] == [("adm-aio", 0)]

            [described] = await client.describe_configs(
                [AioConfigResource(ConfigResourceType.TOPIC, "adm-aio", {"flush.ms": None})])
            [(code, _msg, _type, name, entries)] = described.resources
            assert (code, name) == (0, "adm-aio")
            assert [(e[0], e[1], e[3]) for e in entries] == [
                ("flush.ms", "5000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)]

            deleted = await client.delete_topics(["adm-aio"])
            assert list(deleted.topic_error_codes) == [("adm-aio", 0)]
            assert "adm-aio" not in await client.list_topics()
        finally:
            await client.close()

    asyncio.run(scenario())
    assert partition_dirs(shared_broker, "adm-aio") == []


# -- raw protocol: what no client library sends --------------------------------------


def raw_call(broker: BrokerProcess, request: Any) -> Any:
    """One request on its own connection; the decoded response body."""
    with socket.create_connection(("127.0.0.1", broker.port), timeout=TIMEOUT_S) as sock:
        sock.sendall(encode_request(1, request, "admin-test"))
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = sock.recv(65536)
            assert chunk, "broker closed the connection"
            data += chunk
    frame = data[4:]
    module = load_payload_module(request.__api_key__, request.__version__, EntityType.response)
    response_cls = getattr(module, type(request).__name__.replace("Request", "Response"))
    header_cls = ResponseHeaderV1 if response_cls.__flexible__ else ResponseHeaderV0
    header, pos = entity_reader(header_cls)(frame, 0)
    assert header.correlation_id == 1
    body, _size = entity_reader(response_cls)(frame, pos)
    return body


def test_raw_describe_configs_edges(shared_broker: BrokerProcess) -> None:
    m = load_payload_module(32, 4, EntityType.request)
    topic_module = load_payload_module(19, 7, EntityType.request)
    created = raw_call(shared_broker, topic_module.CreateTopicsRequest(
        topics=(topic_module.CreatableTopic(name="adm-raw", num_partitions=-1, replication_factor=-1,
                                            assignments=(), configs=()),),
        timeout=datetime.timedelta(seconds=10), validate_only=False))
    [topic] = created.topics
    assert (topic.error_code, topic.num_partitions, topic.replication_factor) == (0, BROKER_CONFIGS[
        "num.partitions"].default, 1)

    def resource(kind: int, name: str, keys: tuple[str, ...] | None = None) -> Any:
        return m.DescribeConfigsResource(resource_type=kind, resource_name=name, configuration_keys=keys)

    response = raw_call(shared_broker, m.DescribeConfigsRequest(
        resources=(resource(2, "adm-raw", ("retention.ms", "segment.bytes", "not.a.config")),
                   resource(2, "adm-raw-missing"), resource(4, ""), resource(4, "7"), resource(8, "0")),
        include_synonyms=True, include_documentation=True))
    results = {(r.resource_type, r.resource_name): r for r in response.results}
    described = results[(2, "adm-raw")]
    assert described.error_code == 0
    assert sorted(c.name for c in described.configs) == ["retention.ms", "segment.bytes"]
    kafka_types = {"retention.ms": 5, "segment.bytes": 3}  # ConfigType LONG, INT as in Kafka's LogConfig
    for c in described.configs:
        assert c.documentation == TOPIC_CONFIGS[c.name].doc
        assert c.config_type == kafka_types[c.name]
    # A DEFAULT_CONFIG synonym only where Kafka's broker config has a default: Kafka's
    # log.retention.ms has none (log.retention.hours supplies it), so it lists no synonym.
    synonyms = {c.name: [(s.name, s.source) for s in c.synonyms] for c in described.configs}
    assert synonyms == {"retention.ms": [], "segment.bytes": [("log.segment.bytes", 5)]}
    assert results[(2, "adm-raw-missing")].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    # The cluster-wide dynamic default: nothing was ever altered, so nothing to list.
    assert (results[(4, "")].error_code, results[(4, "")].configs) == (0, ())
    assert results[(4, "7")].error_code == KafkaError.INVALID_REQUEST
    assert results[(8, "0")].error_code == KafkaError.INVALID_REQUEST

    d = load_payload_module(20, 6, EntityType.request)
    topic_id = uuid.UUID(str(topic.topic_id))
    refused = raw_call(shared_broker, d.DeleteTopicsRequest(
        topics=(d.DeleteTopicState(name="adm-raw", topic_id=topic_id),), timeout=datetime.timedelta(seconds=10)))
    assert [r.error_code for r in refused.responses] == [KafkaError.INVALID_REQUEST]
    twice = raw_call(shared_broker, d.DeleteTopicsRequest(
        topics=(d.DeleteTopicState(name=None, topic_id=topic_id), d.DeleteTopicState(name="adm-raw", topic_id=None)),
        timeout=datetime.timedelta(seconds=10)))
    # The same topic by id and by name: Kafka refuses it, with one answer, and keeps the topic.
    assert [(r.name, r.error_code) for r in twice.responses] == [("adm-raw", KafkaError.INVALID_REQUEST)]
    assert partition_dirs(shared_broker, "adm-raw") == ["adm-raw-0"]
    deleted = raw_call(shared_broker, d.DeleteTopicsRequest(
        topics=(d.DeleteTopicState(name=None, topic_id=topic_id),), timeout=datetime.timedelta(seconds=10)))
    assert [(r.name, r.topic_id, r.error_code) for r in deleted.responses] == [("adm-raw", topic_id, 0)]
    assert partition_dirs(shared_broker, "adm-raw") == []

"""AlterConfigs (33), IncrementalAlterConfigs (44) and group DescribeConfigs through
librdkafka's, kafka-python's, aiokafka's and eoslog's admin clients against the real broker.

Each client switches a topic to ``cleanup.policy=compact`` (incrementally where the client
can; aiokafka 0.14 has only the legacy AlterConfigs) and lowers its ``max.message.bytes``
with the legacy call; the effect is checked on the data with librdkafka's producer — a
keyless record refused with INVALID_RECORD, an oversized one with MESSAGE_TOO_LARGE, a keyed
one accepted — and again after a broker restart. Each describes a group's configs (Kafka
4.0's GROUP resource), sets one where the client can and sees it kept across a restart.
A dynamic broker config (message.max.bytes for every topic) is changed and reverted.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ResourceType
from confluent_kafka.admin import AlterConfigOpType as RdOp
from confluent_kafka.admin import ConfigEntry as RdConfigEntry
from confluent_kafka.admin import ConfigResource as RdConfigResource

from eoslog.client import (
    Admin,
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    NewTopic,
)
from eoslog.client.errors import InvalidConfigError
from support.harness import BrokerProcess

TIMEOUT_S = 30.0
TOPIC, BROKER, GROUP = 2, 4, 32
SMALL = 2000  # max.message.bytes set by the legacy call


@pytest.fixture(scope="module")
def admin(shared_broker: BrokerProcess) -> Iterator[Admin]:
    with Admin({"bootstrap.servers": shared_broker.bootstrap}) as a:
        yield a


def produce(broker: BrokerProcess, topic: str, key: bytes | None, value: bytes) -> int | None:
    """librdkafka's delivery error code for one record (None: delivered)."""
    p = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 1_000_000,
                  "retries": 0, "linger.ms": 0})
    outcome: list[int | None] = []
    p.produce(topic, key=key, value=value,
              on_delivery=lambda err, _: outcome.append(None if err is None else err.code()))
    assert p.flush(TIMEOUT_S) == 0
    return outcome[0]


def effective(admin: Admin, resource_type: ConfigResourceType, name: str) -> dict[str, tuple[str | None, ConfigSource]]:
    r = ConfigResource(resource_type, name)
    return {k: (e.value, e.source) for k, e in admin.describe_configs([r])[r].items()}


def check_topic(broker: BrokerProcess, admin: Admin, topic: str) -> None:
    """The topic is compact with max.message.bytes=SMALL, in its configs and on the data."""
    configs = effective(admin, ConfigResourceType.TOPIC, topic)
    assert configs["cleanup.policy"] == ("compact", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert configs["max.message.bytes"] == (str(SMALL), ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert produce(broker, topic, None, b"no key") == KafkaError.INVALID_RECORD
    assert produce(broker, topic, b"k", b"x" * (2 * SMALL)) == KafkaError.MSG_SIZE_TOO_LARGE
    assert produce(broker, topic, b"k", b"fits") is None


# -- each client: (bootstrap, topic) → compact incrementally (or legacy), then legacy max.message.bytes --


def alter_confluent(bootstrap: str, topic: str) -> None:
    a = AdminClient({"bootstrap.servers": bootstrap})
    inc = RdConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        RdConfigEntry("cleanup.policy", "compact", incremental_operation=RdOp.SET)])
    for f in a.incremental_alter_configs([inc]).values():
        f.result(timeout=TIMEOUT_S)
    # Legacy AlterConfigs replaces every override: the compact policy is given again.
    legacy = RdConfigResource(ResourceType.TOPIC, topic,
                              set_config={"cleanup.policy": "compact", "max.message.bytes": str(SMALL)})
    with warnings.catch_warnings():  # the legacy API is what this step tests
        warnings.filterwarnings("ignore", "alter_configs has been deprecated", DeprecationWarning)
        futures = a.alter_configs([legacy])
    for f in futures.values():
        f.result(timeout=TIMEOUT_S)


def alter_kafka_python(bootstrap: str, topic: str) -> None:
    from kafka.admin import AlterConfigOp as KpOp
    from kafka.admin import ConfigResource as KpConfigResource
    from kafka.admin import ConfigResourceType as KpType
    from kafka.admin import KafkaAdminClient

    a = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        r = a.alter_configs([KpConfigResource(KpType.TOPIC, topic, {"cleanup.policy": (KpOp.SET, "compact")})],
                            incremental=True)
        assert r == {"topic": {topic: "OK"}}, r
        r = a.alter_configs([KpConfigResource(KpType.TOPIC, topic, {"max.message.bytes": str(SMALL)})],
                            incremental=False)  # kafka-python re-sends the other overrides itself
        assert r == {"topic": {topic: "OK"}}, r
    finally:
        a.close()


def alter_aiokafka(bootstrap: str, topic: str) -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource as AioConfigResource
    from aiokafka.admin.config_resource import ConfigResourceType as AioType

    async def run() -> None:
        a = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await a.start()
        try:
            responses = await a.alter_configs([AioConfigResource(
                AioType.TOPIC, topic, {"cleanup.policy": "compact", "max.message.bytes": str(SMALL)})])
            codes = [r[0] for resp in responses for r in resp.resources]
            assert codes == [0], responses
        finally:
            await a.close()

    asyncio.run(run())


def alter_eoslog(bootstrap: str, topic: str) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as a:
        resource = ConfigResource(ConfigResourceType.TOPIC, topic)
        a.incremental_alter_configs({resource: [AlterConfigOp("cleanup.policy", "compact")]})
        a.alter_configs({resource: {"cleanup.policy": "compact", "max.message.bytes": str(SMALL)}})


ALTER: dict[str, Callable[[str, str], None]] = {
    "confluent": alter_confluent, "kafka-python": alter_kafka_python,
    "aiokafka": alter_aiokafka, "eoslog": alter_eoslog,
}


@pytest.mark.parametrize("client", list(ALTER))
def test_alter_topic_configs_takes_effect_on_the_data_and_survives_a_restart(
        shared_broker: BrokerProcess, admin: Admin, client: str) -> None:
    topic = f"cfg-{client}"
    admin.create_topics([NewTopic(topic, 1)])
    assert produce(shared_broker, topic, None, b"keyless is fine under cleanup.policy=delete") is None

    ALTER[client](shared_broker.bootstrap, topic)
    check_topic(shared_broker, admin, topic)

    shared_broker.restart()
    check_topic(shared_broker, admin, topic)


# -- group configs: each client describes them; those that can, set one ---------------------


def group_confluent(bootstrap: str, group: str, timeout: str | None) -> dict[str, tuple[str, int]]:
    a = AdminClient({"bootstrap.servers": bootstrap})
    if timeout is not None:
        r = RdConfigResource(ResourceType.GROUP, group, incremental_configs=[
            RdConfigEntry("consumer.session.timeout.ms", timeout, incremental_operation=RdOp.SET)])
        for f in a.incremental_alter_configs([r]).values():
            f.result(timeout=TIMEOUT_S)
    resource = RdConfigResource(ResourceType.GROUP, group)
    described = a.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)
    return {k: (e.value, int(e.source)) for k, e in described.items()}


def group_kafka_python(bootstrap: str, group: str, timeout: str | None) -> dict[str, tuple[str, int]]:
    from kafka.admin import ConfigResource as KpConfigResource
    from kafka.admin import ConfigResourceType as KpType
    from kafka.admin import ConfigSourceType, KafkaAdminClient

    a = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        if timeout is not None:
            r = a.alter_configs([KpConfigResource(KpType.GROUP, group, {"consumer.session.timeout.ms": timeout})],
                                incremental=True)
            assert r == {"group": {group: "OK"}}, r
        found = a.describe_configs([KpConfigResource(KpType.GROUP, group)], config_filter="all")
        return {k: (c["value"], int(ConfigSourceType[c["config_source"]])) for k, c in found["group"][group].items()}
    finally:
        a.close()


def group_aiokafka(bootstrap: str, group: str, timeout: str | None) -> dict[str, tuple[str, int]]:
    """aiokafka 0.14 knows no GROUP resource type nor IncrementalAlterConfigs: it describes
    the group through its ConfigResource with the wire type set to GROUP (32)."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource as AioConfigResource
    from aiokafka.admin.config_resource import ConfigResourceType as AioType

    assert timeout is None

    async def run() -> dict[str, tuple[str, int]]:
        a = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await a.start()
        try:
            resource = AioConfigResource(AioType.TOPIC, group)
            resource.resource_type = GROUP  # type: ignore[assignment]
            [response] = await a.describe_configs([resource], include_synonyms=True)
            [(code, _, rtype, name, entries)] = [r[:5] for r in response.resources]
            assert (code, rtype, name) == (0, GROUP, group)
            return {e[0]: (e[1], int(e[3])) for e in entries}
        finally:
            await a.close()

    return asyncio.run(run())


def group_eoslog(bootstrap: str, group: str, timeout: str | None) -> dict[str, tuple[str, int]]:
    resource = ConfigResource(ConfigResourceType.GROUP, group)
    with Admin({"bootstrap.servers": bootstrap}) as a:
        if timeout is not None:
            a.incremental_alter_configs({resource: [AlterConfigOp("consumer.session.timeout.ms", timeout)]})
        return {k: (str(e.value), int(e.source)) for k, e in a.describe_configs([resource])[resource].items()}


GROUPS: dict[str, Callable[[str, str, str | None], dict[str, tuple[str, int]]]] = {
    "confluent": group_confluent, "kafka-python": group_kafka_python,
    "aiokafka": group_aiokafka, "eoslog": group_eoslog,
}
# What DescribeConfigs lists for a group without configs: the GroupConfig names eoslog serves, with
# the broker's defaults, a subset of the 21 Kafka 4.4 lists (measured: eoslog has no streams.*,
# errors.deadletterqueue.*, share.renew.acknowledge.enable, share.assignment.interval.ms). Neither
# lists the internal consumer.assignor.offload.enable until a group sets it.
GROUP_DEFAULTS = {
    "consumer.session.timeout.ms": "45000", "consumer.heartbeat.interval.ms": "5000",
    "consumer.assignment.interval.ms": "1000",
    "share.session.timeout.ms": "45000", "share.heartbeat.interval.ms": "5000",
    "share.record.lock.duration.ms": "30000", "share.auto.offset.reset": "latest",
    "share.delivery.count.limit": "5", "share.partition.max.record.locks": "2000",
    "share.isolation.level": "read_uncommitted",
}


@pytest.mark.parametrize("client", list(GROUPS))
def test_group_configs_described_altered_and_kept(shared_broker: BrokerProcess, client: str) -> None:
    describe = GROUPS[client]
    group = f"cfg-group-{client}"
    assert describe(shared_broker.bootstrap, group, None) == {
        k: (v, int(ConfigSource.DEFAULT_CONFIG)) for k, v in GROUP_DEFAULTS.items()}
    if client == "aiokafka":
        group_eoslog(shared_broker.bootstrap, group, "50000")  # aiokafka cannot alter; it reads
    else:
        describe(shared_broker.bootstrap, group, "50000")
    shared_broker.restart()
    found = describe(shared_broker.bootstrap, group, None)
    assert found["consumer.session.timeout.ms"] == ("50000", int(ConfigSource.GROUP_CONFIG))
    assert found["consumer.heartbeat.interval.ms"] == ("5000", int(ConfigSource.DEFAULT_CONFIG))


def test_group_config_out_of_kafkas_bounds_is_refused(admin: Admin) -> None:
    resource = ConfigResource(ConfigResourceType.GROUP, "cfg-group-bounds")
    with pytest.raises(InvalidConfigError, match=r"group\.consumer\.max\.session\.timeout\.ms"):
        admin.incremental_alter_configs({resource: [AlterConfigOp("consumer.session.timeout.ms", "70000")]})
    a = AdminClient({"bootstrap.servers": admin.config.bootstrap_servers})
    rd = RdConfigResource(ResourceType.GROUP, "cfg-group-bounds", incremental_configs=[
        RdConfigEntry("consumer.heartbeat.interval.ms", "1", incremental_operation=RdOp.SET)])
    with pytest.raises(KafkaException) as e:
        a.incremental_alter_configs([rd])[rd].result(timeout=TIMEOUT_S)
    assert e.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_dynamic_broker_config_applies_to_every_topic_at_once(shared_broker: BrokerProcess, admin: Admin) -> None:
    topic = "cfg-broker-wide"
    admin.create_topics([NewTopic(topic, 1)])
    big = b"x" * 5000
    assert produce(shared_broker, topic, b"k", big) is None
    a = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    broker = RdConfigResource(ResourceType.BROKER, "0", incremental_configs=[
        RdConfigEntry("message.max.bytes", "3000", incremental_operation=RdOp.SET)])
    for f in a.incremental_alter_configs([broker]).values():
        f.result(timeout=TIMEOUT_S)
    try:
        assert produce(shared_broker, topic, b"k", big) == KafkaError.MSG_SIZE_TOO_LARGE
        configs = effective(admin, ConfigResourceType.TOPIC, topic)
        assert configs["max.message.bytes"] == ("3000", ConfigSource.DYNAMIC_BROKER_CONFIG)
        shared_broker.restart()
        assert produce(shared_broker, topic, b"k", big) == KafkaError.MSG_SIZE_TOO_LARGE
        read_only = RdConfigResource(ResourceType.BROKER, "0", incremental_configs=[
            RdConfigEntry("num.partitions", "3", incremental_operation=RdOp.SET)])
        with pytest.raises(KafkaException) as e:
            a.incremental_alter_configs([read_only])[read_only].result(timeout=TIMEOUT_S)
        assert e.value.args[0].code() == KafkaError.INVALID_REQUEST
    finally:
        admin.incremental_alter_configs({ConfigResource(ConfigResourceType.BROKER, "0"): [
            AlterConfigOp("message.max.bytes", op_type=AlterConfigOpType.DELETE)]})
    assert produce(shared_broker, topic, b"k", big) is None


def eoslog_cli(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "eoslog", *args, "--bootstrap-server", broker.bootstrap],
                          capture_output=True, text=True, timeout=60)


def test_cli_configs_and_topics_alter_config(shared_broker: BrokerProcess, admin: Admin) -> None:
    topic = "cfg-cli"
    admin.create_topics([NewTopic(topic, 1)])
    done = eoslog_cli(shared_broker, "configs", "--entity-type", "topics", "--entity-name", topic, "--alter",
                      "--add-config", "retention.ms=1234,cleanup.policy=[compact,delete]")
    assert done.returncode == 0, done.stderr
    configs = effective(admin, ConfigResourceType.TOPIC, topic)
    assert configs["retention.ms"] == ("1234", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert configs["cleanup.policy"] == ("compact,delete", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert produce(shared_broker, topic, None, b"v") == KafkaError.INVALID_RECORD

    deleted = eoslog_cli(shared_broker, "topics", "alter-config", topic, "--delete-config", "cleanup.policy")
    assert deleted.returncode == 0, deleted.stderr
    assert produce(shared_broker, topic, None, b"v") is None
    shown = eoslog_cli(shared_broker, "configs", "--entity-type", "topics", "--entity-name", topic, "--describe")
    rows = {line.split()[0]: line.split()[1:3] for line in shown.stdout.splitlines()[3:] if line.strip()}
    assert rows == {"retention.ms": ["1234", "DYNAMIC_TOPIC_CONFIG"]}

    refused = eoslog_cli(shared_broker, "configs", "--entity-type", "brokers", "--entity-name", "0", "--alter",
                         "--add-config", "num.partitions=3")
    assert refused.returncode == 1
    assert refused.stderr.strip().endswith(
        "INVALID_REQUEST (42): Cannot update these configs dynamically: Set(num.partitions)")
    group = eoslog_cli(shared_broker, "configs", "--entity-type", "groups", "--entity-name", "g", "--describe", "--all")
    assert "consumer.session.timeout.ms" in group.stdout and "45000" in group.stdout


def test_librdkafka_fails_only_the_keyless_records_of_a_batch_to_a_compacted_topic(
        shared_broker: BrokerProcess, admin: Admin) -> None:
    """librdkafka's test 0011 (test_message_single_partition_record_fail): 100 records in one
    batch to a compacted topic, every tenth without a key. The Produce answer names the 10
    keyless ones (KIP-467 record_errors): librdkafka fails those INVALID_RECORD and the other 90
    _INVALID_DIFFERENT_RECORD, as against Kafka 4.4; without record errors all 100 fail
    INVALID_RECORD (what eoslog answered before)."""
    admin.create_topics([NewTopic("record-errors", 1, 1, {"cleanup.policy": "compact"})])
    # One batch: a linger far longer than queueing 100 records takes on a loaded machine (with
    # 1 s the last few went in a batch of their own at load 6 and were answered OK); flush()
    # sends at once, whatever the linger.
    p = Producer({"bootstrap.servers": shared_broker.bootstrap, "linger.ms": 30000, "batch.num.messages": 1000,
                  "retries": 0})
    outcome: dict[int, str] = {}

    def delivered(i: int) -> Callable[[KafkaError | None, object], None]:
        return lambda err, _: outcome.__setitem__(i, "OK" if err is None else err.name())

    for i in range(100):
        p.produce("record-errors", key=None if i % 10 == 0 else b"k%d" % i, value=b"v%d" % i, partition=0,
                  on_delivery=delivered(i))
    assert p.flush(TIMEOUT_S) == 0
    assert {i for i, name in outcome.items() if name == "INVALID_RECORD"} == set(range(0, 100, 10))
    assert {name for i, name in outcome.items() if i % 10} == {"_INVALID_DIFFERENT_RECORD"}

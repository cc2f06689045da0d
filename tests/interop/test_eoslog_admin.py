"""eoslog.client's admin client (``Admin``, ``AIOAdmin``) against the real broker process.

Every call, and its errors raised as the exception class of the Kafka error code:

- topics: create (configs, validate_only, TOPIC_ALREADY_EXISTS, INVALID_CONFIG,
  INVALID_REPLICATION_FACTOR), list, describe, create_partitions (INVALID_PARTITIONS),
  delete (UNKNOWN_TOPIC_OR_PARTITION); what librdkafka's metadata shows agrees;
- describe_configs of a topic and of the broker, describe_cluster;
- list_offsets: earliest, latest, max timestamp, by timestamp, for records produced by
  librdkafka with chosen timestamps;
- groups: a librdkafka consumer group listed, described (members, assignment) and its
  offsets read; offsets altered (refused while the group is active), deleted, the group
  deleted; GROUP_ID_NOT_FOUND;
- transactions: a librdkafka transactional producer begins, writes and never commits. The
  admin finds it (list_transactions, describe_transactions, describe_producers), the LSO
  is pinned and a read_committed consumer sees nothing; abort_transaction ends it, the LSO
  moves to the high watermark and the consumer reads the committed records behind it;
- features: describe_features reports transaction.version supported and finalized;
  update_features validate_only accepts a safe downgrade and raises Kafka's
  INVALID_UPDATE_VERSION for a downgrade sent as an upgrade, changing nothing;
- retries: a call made while the broker is down (kill -9) completes once it is back; one
  whose timeout runs out first raises KafkaTimeoutError.

Waiting loops are hang guards; nothing asserts on timing.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from clients import read_values
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as RdTopicPartition
from confluent_kafka.admin import AdminClient

from eoslog.client.admin import (
    AbortTransactionSpec,
    Admin,
    AIOAdmin,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    ElectionType,
    FeatureUpdate,
    IsolationLevel,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    UpgradeType,
)
from eoslog.client.errors import (
    ElectionNotNeededError,
    GroupIdNotFoundError,
    IllegalStateError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidProducerEpochError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidUpdateVersionError,
    KafkaTimeoutError,
    TopicAlreadyExistsError,
    TransactionalIdNotFoundError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)
from eoslog.client.types import OffsetAndMetadata, TopicPartition
from support.harness import BrokerProcess, wait_until

WAIT_S = 60.0


@pytest.fixture(scope="module")
def admin(shared_broker: BrokerProcess) -> Iterator[Admin]:
    with Admin({"bootstrap.servers": shared_broker.bootstrap}, default_api_timeout_ms=30000) as a:
        yield a


def rd_partition_counts(bootstrap: str) -> dict[str, int]:
    """Topic → partition count, as librdkafka's metadata shows them."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    return {name: len(t.partitions) for name, t in md.topics.items()}


def produce(bootstrap: str, topic: str, records: list[tuple[int, bytes, int]]) -> None:
    """(partition, value, timestamp ms) records through librdkafka."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for partition, value, ts in records:
        p.produce(topic, value=value, partition=partition, timestamp=ts)
    assert p.flush(WAIT_S) == 0


# -- topics ---------------------------------------------------------------------------------------


def test_topics_are_created_listed_described_grown_and_deleted(admin: Admin, shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    created = admin.create_topics([
        NewTopic("adm-orders", 3, configs={"retention.ms": "3600000", "cleanup.policy": "compact"}),
        NewTopic("adm-defaults"),
    ])
    assert created["adm-orders"].num_partitions == 3 and created["adm-orders"].topic_id is not None
    assert created["adm-orders"].configs["retention.ms"] == "3600000"
    assert created["adm-defaults"].num_partitions == 1  # the broker's num.partitions
    counts = rd_partition_counts(bootstrap)
    assert counts["adm-orders"] == 3 and counts["adm-defaults"] == 1

    checked = admin.create_topics([NewTopic("adm-only-validated", 2)], validate_only=True)
    assert checked["adm-only-validated"].num_partitions == 2
    assert "adm-only-validated" not in rd_partition_counts(bootstrap)

    with pytest.raises(TopicAlreadyExistsError, match="adm-orders"):
        admin.create_topics([NewTopic("adm-orders", 1)])
    with pytest.raises(InvalidConfigError, match=r"no\.such\.config"):
        admin.create_topics([NewTopic("adm-bad-config", 1, configs={"no.such.config": "1"})])
    with pytest.raises(InvalidConfigError, match=r"retention\.ms"):
        admin.create_topics([NewTopic("adm-bad-config", 1, configs={"retention.ms": "soon"})])
    with pytest.raises(InvalidReplicationFactorError):
        admin.create_topics([NewTopic("adm-bad-config", 1, replication_factor=3)])
    # One refused topic does not stop the others of the request; the first failure is raised.
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic("adm-orders", 1), NewTopic("adm-second", 1)])
    # Apache Kafka answers CreateTopics a moment before its metadata has the topic.
    wait_until(lambda: "adm-second" in rd_partition_counts(bootstrap), "adm-second in the metadata")

    listed = admin.list_topics()
    assert {"adm-orders", "adm-defaults", "adm-second"} <= set(listed)
    assert not any(t.is_internal for t in listed.values())
    assert listed["adm-orders"].topic_id == created["adm-orders"].topic_id
    with_internal = admin.list_topics(internal=True)
    assert {n for n, t in with_internal.items() if t.is_internal} <= {"__consumer_offsets", "__transaction_state"}

    [described] = admin.describe_topics(["adm-orders"]).values()
    assert [p.partition for p in described.partitions] == [0, 1, 2]
    assert all(p.leader == 0 and p.replicas == (0,) and p.isr == (0,) for p in described.partitions)
    assert described.replication_factor == 1 and not described.is_internal
    with pytest.raises(UnknownTopicOrPartitionError, match="adm-missing"):
        admin.describe_topics(["adm-orders", "adm-missing"])

    admin.create_partitions({"adm-orders": 5, "adm-defaults": NewPartitions(2)})
    assert len(admin.describe_topics(["adm-orders"])["adm-orders"].partitions) == 5
    wait_until(lambda: rd_partition_counts(bootstrap)["adm-defaults"] == 2, "librdkafka to see 2 partitions")
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({"adm-orders": 5})
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({"adm-orders": 4})
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.create_partitions({"adm-missing": 4})

    admin.delete_topics(["adm-orders", "adm-defaults", "adm-second"])
    # Apache Kafka answers DeleteTopics before its metadata drops the topics (eoslog after).
    deleted = {"adm-orders", "adm-defaults", "adm-second"}
    wait_until(lambda: not deleted & set(admin.list_topics()), "the deleted topics to leave the metadata")
    assert not deleted & set(rd_partition_counts(bootstrap))
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics(["adm-orders"])


def test_configs_and_cluster(admin: Admin, shared_broker: BrokerProcess) -> None:
    admin.create_topics([NewTopic("adm-configs", 1, configs={"retention.ms": "7200000"})])
    topic = ConfigResource(ConfigResourceType.TOPIC, "adm-configs")
    broker = ConfigResource(ConfigResourceType.BROKER, "0")
    found = admin.describe_configs([topic, broker], include_synonyms=True)
    retention = found[topic]["retention.ms"]
    assert retention.value == "7200000" and retention.source is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert retention.synonyms[0].source is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert found[topic]["segment.bytes"].is_default
    assert found[broker]["listeners"].value is not None
    assert str(shared_broker.port) in str(found[broker]["listeners"].value)
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "adm-no-such-topic")])
    with pytest.raises(InvalidRequestError):
        admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "7")])

    cluster = admin.describe_cluster()
    assert [(n.id, n.port) for n in cluster.nodes] == [(0, shared_broker.port)]
    assert cluster.controller is not None and cluster.controller.id == 0
    rd_cluster_id = AdminClient({"bootstrap.servers": shared_broker.bootstrap}).list_topics(timeout=30).cluster_id
    assert cluster.cluster_id == rd_cluster_id


def test_leader_election_on_one_node(admin: Admin) -> None:
    """One node leads every partition: nothing to elect (a cluster's elections: tests/cluster)."""
    admin.create_topics([NewTopic("adm-elect", 2)])
    wanted = [TopicPartition("adm-elect", 0), TopicPartition("adm-elect", 1), TopicPartition("adm-elect", 5)]
    results = admin.elect_leaders(ElectionType.PREFERRED, wanted)
    assert [type(results[tp]) for tp in wanted] == [
        ElectionNotNeededError, ElectionNotNeededError, UnknownTopicOrPartitionError]
    assert admin.elect_leaders(ElectionType.PREFERRED) == {}  # all partitions: none needed one


def test_list_offsets(admin: Admin, shared_broker: BrokerProcess) -> None:
    topic = "adm-offsets"
    admin.create_topics([NewTopic(topic, 2)])
    base = 1_700_000_000_000
    # Partition 0: timestamps base, base+10, ..., with the largest in the middle.
    stamps = [base, base + 10, base + 50, base + 20, base + 30]
    produce(shared_broker.bootstrap, topic, [(0, f"v{i}".encode(), ts) for i, ts in enumerate(stamps)])
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    found = admin.list_offsets({
        tp0: OffsetSpec.latest(), tp1: OffsetSpec.latest(),
    })
    assert (found[tp0].offset, found[tp1].offset) == (5, 0)
    assert admin.list_offsets({tp0: OffsetSpec.earliest()})[tp0].offset == 0
    top = admin.list_offsets({tp0: OffsetSpec.max_timestamp()})[tp0]
    assert (top.offset, top.timestamp) == (2, base + 50)
    at = admin.list_offsets({tp0: OffsetSpec.for_timestamp(base + 15)})[tp0]
    assert (at.offset, at.timestamp) == (2, base + 50)  # the first record at or after base+15
    assert admin.list_offsets({tp0: OffsetSpec.for_timestamp(base + 51)})[tp0].offset == -1
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.list_offsets({TopicPartition(topic, 9): OffsetSpec.latest()})
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.list_offsets({TopicPartition("adm-no-such-topic", 0): OffsetSpec.latest()})


# -- groups ---------------------------------------------------------------------------------------


def test_consumer_group_is_listed_described_and_its_offsets_managed(admin: Admin,
                                                                     shared_broker: BrokerProcess) -> None:
    bootstrap, topic, group = shared_broker.bootstrap, "adm-group-topic", "adm-group"
    admin.create_topics([NewTopic(topic, 2)])
    produce(bootstrap, topic, [(p, f"r{p}-{i}".encode(), int(time.time() * 1000)) for p in (0, 1) for i in range(4)])
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "adm-member",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        got: list[Any] = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < 8 and time.monotonic() < deadline:
            got += [m for m in consumer.consume(100, 0.2) if m.error() is None]
        assert len(got) == 8
        consumer.commit(asynchronous=False)

        listed = {g.group_id: g for g in admin.list_groups()}
        assert listed[group].state == "Stable" and listed[group].protocol_type == "consumer"
        assert group in {g.group_id for g in admin.list_groups(["Stable"])}
        assert group not in {g.group_id for g in admin.list_groups(["Empty"])}

        described = admin.describe_groups([group])[group]
        assert described.state == "Stable" and described.protocol_type == "consumer"
        assert described.partition_assignor in ("range", "roundrobin", "cooperative-sticky")
        [member] = described.members
        assert member.client_id == "adm-member"
        assert sorted(member.assignment) == [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        assert described.coordinator is not None and described.coordinator.port == shared_broker.port

        committed = admin.list_consumer_group_offsets(group)
        rd_committed = consumer.committed([RdTopicPartition(topic, 0), RdTopicPartition(topic, 1)], timeout=30)
        assert {tp: o.offset for tp, o in committed.items()} == {
            TopicPartition(topic, p.partition): p.offset for p in rd_committed} == {
            TopicPartition(topic, 0): 4, TopicPartition(topic, 1): 4}
        only_1 = admin.list_consumer_group_offsets(group, [TopicPartition(topic, 1)], require_stable=True)
        assert list(only_1) == [TopicPartition(topic, 1)]

        with pytest.raises(UnknownMemberIdError):  # an active group takes no admin's offsets
            admin.alter_consumer_group_offsets(group, {TopicPartition(topic, 0): 1})
    finally:
        consumer.close()

    wait_until(lambda: admin.describe_groups([group])[group].state == "Empty", "the group to be empty")
    admin.alter_consumer_group_offsets(group, {TopicPartition(topic, 0): 1,
                                              TopicPartition(topic, 1): OffsetAndMetadata(2, "by admin")})
    after = admin.list_consumer_group_offsets(group)
    assert after == {TopicPartition(topic, 0): OffsetAndMetadata(1, ""),
                     TopicPartition(topic, 1): OffsetAndMetadata(2, "by admin")}
    checker = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        seen = checker.committed([RdTopicPartition(topic, 0), RdTopicPartition(topic, 1)], timeout=30)
        assert [(p.partition, p.offset) for p in seen] == [(0, 1), (1, 2)]
    finally:
        checker.close()

    admin.delete_consumer_group_offsets(group, [TopicPartition(topic, 0)])
    assert list(admin.list_consumer_group_offsets(group)) == [TopicPartition(topic, 1)]
    admin.delete_groups([group])
    assert group not in {g.group_id for g in admin.list_groups()}
    assert admin.describe_groups([group])[group].state == "Dead"
    assert admin.list_consumer_group_offsets(group) == {}
    with pytest.raises(GroupIdNotFoundError, match=group):
        admin.delete_groups([group])
    with pytest.raises(GroupIdNotFoundError):
        admin.delete_consumer_group_offsets(group, [TopicPartition(topic, 1)])


# -- transactions ---------------------------------------------------------------------------------


def test_open_transaction_is_found_and_aborted(admin: Admin, shared_broker: BrokerProcess) -> None:
    """A transaction that began, wrote and was never committed pins the partition's LSO;
    the admin finds it and aborts it with an ABORT marker written at the leader."""
    bootstrap, topic, txn_id = shared_broker.bootstrap, "adm-txn", "adm-stuck-app"
    admin.create_topics([NewTopic(topic, 1)])
    tp = TopicPartition(topic, 0)
    # An earlier instance first, so the stuck one has epoch 1 and a stale epoch (0) is a valid
    # one (Apache Kafka answers UNKNOWN_SERVER_ERROR to a marker of epoch -1).
    Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id}).init_transactions(WAIT_S)
    stuck = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0,
                      "transaction.timeout.ms": 600_000})
    stuck.init_transactions(WAIT_S)
    stuck.begin_transaction()
    for i in range(3):
        stuck.produce(topic, value=f"open-{i}".encode(), partition=0)
    assert stuck.flush(WAIT_S) == 0
    # Committed records of another producer land behind the open transaction.
    healthy = Producer({"bootstrap.servers": bootstrap, "transactional.id": "adm-healthy-app", "linger.ms": 0})
    healthy.init_transactions(WAIT_S)
    healthy.begin_transaction()
    for i in range(2):
        healthy.produce(topic, value=f"committed-{i}".encode(), partition=0)
    healthy.commit_transaction(WAIT_S)
    # The coordinator writes the COMMIT markers after answering EndTxn: wait for them.
    wait_until(lambda: admin.describe_transactions(["adm-healthy-app"])["adm-healthy-app"].state == "CompleteCommit",
          "the healthy transaction's markers")

    listed = {t.transactional_id: t for t in admin.list_transactions()}
    assert listed[txn_id].state == "Ongoing" and listed[txn_id].coordinator_id == 0
    assert listed["adm-healthy-app"].state == "CompleteCommit"
    assert [t.transactional_id for t in admin.list_transactions(states=["Ongoing"])] == [txn_id]
    by_producer = admin.list_transactions(producer_ids=[listed[txn_id].producer_id])
    assert [t.transactional_id for t in by_producer] == [txn_id]

    described = admin.describe_transactions([txn_id])[txn_id]
    assert described.state == "Ongoing" and described.topic_partitions == (tp,)
    assert described.producer_id == listed[txn_id].producer_id
    assert described.transaction_timeout_ms == 600_000 and described.transaction_start_time_ms is not None
    idle = admin.describe_transactions(["adm-healthy-app"])["adm-healthy-app"]
    assert idle.state == "CompleteCommit"
    with pytest.raises(TransactionalIdNotFoundError, match="adm-no-such-app"):
        admin.describe_transactions([txn_id, "adm-no-such-app"])

    producers = admin.describe_producers([tp])[tp]
    [open_txn] = [p for p in producers if p.current_transaction_start_offset is not None]
    assert (open_txn.producer_id, open_txn.producer_epoch, open_txn.current_transaction_start_offset) == (
        described.producer_id, described.producer_epoch, 0)
    assert admin.describe_producers([tp], broker_id=0)[tp] == producers

    high_watermark = admin.list_offsets({tp: OffsetSpec.latest()})[tp].offset
    assert high_watermark == 6  # 3 open records, 2 committed, a COMMIT marker
    lso = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=IsolationLevel.READ_COMMITTED)[tp].offset
    assert lso == 0
    assert read_values(bootstrap, topic, 0, settled=False) == []  # read up to the pinned LSO

    spec = AbortTransactionSpec(tp, open_txn.producer_id, open_txn.producer_epoch, open_txn.coordinator_epoch or 0)
    with pytest.raises(InvalidProducerEpochError):
        admin.abort_transaction(AbortTransactionSpec(tp, open_txn.producer_id, open_txn.producer_epoch - 1, 0))
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.abort_transaction(AbortTransactionSpec(TopicPartition(topic, 3), open_txn.producer_id, 0, 0))
    admin.abort_transaction(spec)

    after = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=IsolationLevel.READ_COMMITTED)[tp]
    assert after.offset == high_watermark + 1  # the LSO moved past the ABORT marker
    assert admin.list_offsets({tp: OffsetSpec.latest()})[tp].offset == high_watermark + 1
    assert read_values(bootstrap, topic, 0) == ["committed-0", "committed-1"]
    assert all(p.current_transaction_start_offset is None for p in admin.describe_producers([tp])[tp])
    stuck.purge()
    healthy.flush(WAIT_S)


# -- asyncio, retries -------------------------------------------------------------------------------


def test_features_are_described_and_checked(admin: Admin) -> None:
    described = admin.describe_features()
    low, high = described.supported_features["transaction.version"]
    level = described.finalized_features["transaction.version"]
    assert low == 0 and 1 <= level <= high and described.finalized_features_epoch is not None
    admin.update_features({"transaction.version": FeatureUpdate(0, UpgradeType.SAFE_DOWNGRADE)}, validate_only=True)
    with pytest.raises(InvalidUpdateVersionError, match="Can't downgrade the version of this feature"):
        admin.update_features({"transaction.version": FeatureUpdate(0)}, validate_only=True)
    after = admin.describe_features()
    assert (after.supported_features, after.finalized_features) == (described.supported_features,
                                                                    described.finalized_features)
    # Kafka's epoch is its metadata log's offset, which its periodic no-op records move on.
    assert after.finalized_features_epoch is not None
    assert after.finalized_features_epoch >= described.finalized_features_epoch


def test_aio_admin(shared_broker: BrokerProcess) -> None:
    async def main() -> None:
        async with AIOAdmin(bootstrap_servers=shared_broker.bootstrap) as admin:
            await admin.create_topics([NewTopic("adm-aio", 2)])
            described, cluster = await asyncio.gather(admin.describe_topics(["adm-aio"]), admin.describe_cluster())
            assert len(described["adm-aio"].partitions) == 2 and cluster.nodes[0].port == shared_broker.port
            with pytest.raises(TopicAlreadyExistsError):
                await admin.create_topics([NewTopic("adm-aio", 2)])
            await admin.delete_topics(["adm-aio"])
        with pytest.raises(IllegalStateError):
            await admin.list_topics()

    asyncio.run(main())


def test_calls_retry_through_a_broker_restart(broker: BrokerProcess) -> None:
    with Admin({"bootstrap.servers": broker.bootstrap, "reconnect.backoff.max.ms": 200}) as admin:
        admin.create_topics([NewTopic("adm-survivor", 2)])
        broker.kill()
        with pytest.raises(KafkaTimeoutError):
            admin.list_topics(timeout_ms=500)
        restarter = threading.Timer(1.0, broker.start)
        restarter.start()
        try:
            listed = admin.list_topics()  # waits out the restart within default.api.timeout.ms
        finally:
            restarter.join()
        assert "adm-survivor" in listed
        assert len(admin.describe_topics(["adm-survivor"])["adm-survivor"].partitions) == 2

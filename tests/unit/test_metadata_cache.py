"""Metadata's topic entries kept encoded (issue 28, ``broker/metadata_cache.py``): a response
with kept entries is byte for byte what encoding it whole gives, at every version, and any change
a response could show is in the next one.

- the spliced encoding (``codec.EncodedItems``) equals kio's encoding of the same response for
  Metadata v0-v12, error entries and the v8-v10 cluster operations included, and the request
  metrics count the same error codes;
- in a cluster (``ZkSupport`` over the ZooKeeper-fed ``ClusterMetadata``) a new leader, a shrunk
  ISR, a broker gone, partitions added, a topic deleted and made again are each in the next
  entry; a change to another topic leaves an entry as it was (it is kept, not encoded again);
- on one node (``SingleNode``) added partitions and a topic deleted and made again under the
  same name are in the next entry.

Mutants (not committed), each failing here: ``ClusterMetadata._changed`` not versioning "state"
changes (a new leader stayed out of the next entry); the brokers' version left out of
``topic_version`` (a dead broker's partitions stayed led); ``SingleNode.topic_version`` without
the partition count (added partitions stayed out); the cache ignoring the operations value.
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from pathlib import Path
from typing import Any

import pytest

from eoslog.broker.handlers.base import build
from eoslog.broker.handlers.metadata import _error_entry, _topic_entry
from eoslog.broker.metadata_cache import TopicEntries
from eoslog.broker.metadata_support import Advertised, MetadataSupport, SingleNode, TopicDescription
from eoslog.cluster.metadata import PartitionView
from eoslog.cluster.znodes import BrokerRegistration, LeaderAndIsr, TopicAssignment
from eoslog.config import BrokerConfig
from eoslog.errors import Errors
from eoslog.metrics.requests import error_counts
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.codec import decode_response, encode_response
from eoslog.protocol.encoded import EncodedItems, encode_entity
from eoslog.protocol.errors import ErrorCode, error_code
from eoslog.protocol.messages import response_types
from eoslog.storage import LogManager
from eoslog.types import TopicPartition

VERSIONS = range(13)
OMITTED = -(2**31)


def response(version: int, topics: Any) -> Any:
    m = response_types(ApiKey.METADATA, version)
    return build(
        m.MetadataResponse, throttle_time=datetime.timedelta(milliseconds=7),
        brokers=(build(m.MetadataResponseBroker, node_id=1, host="h1", port=9092, rack="r1"),
                 build(m.MetadataResponseBroker, node_id=2, host="host-two", port=19092, rack=None)),
        cluster_id="c-id", controller_id=2, topics=topics, cluster_authorized_operations=0b1010,
    )


def topic_entries(version: int) -> list[Any]:
    m = response_types(ApiKey.METADATA, version)
    partitions = tuple(
        build(m.MetadataResponsePartition, error_code=ErrorCode.leader_not_available if p == 1 else ErrorCode.none,
              partition_index=p, leader_id=-1 if p == 1 else 2, leader_epoch=p + 3, replica_nodes=(2, 1),
              isr_nodes=(2,), offline_replicas=(1,) if p == 1 else ())
        for p in range(3))
    return [
        build(m.MetadataResponseTopic, error_code=ErrorCode.none, name="t", topic_id=uuid.uuid4(),
              is_internal=False, partitions=partitions, topic_authorized_operations=0b11000),
        _error_entry(m, "missing", ErrorCode.unknown_topic_or_partition),
        build(m.MetadataResponseTopic, error_code=ErrorCode.none, name="__consumer_offsets", topic_id=uuid.uuid4(),
              is_internal=True, partitions=partitions[:1], topic_authorized_operations=OMITTED),
    ]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_spliced_response_is_kios_encoding_byte_for_byte(version: int) -> None:
    entries = topic_entries(version)
    whole = response(version, tuple(entries))
    spliced = response(version, EncodedItems(
        [encode_entity(e) for e in entries],
        [c for e in entries for c in error_counts(e).elements()]))
    assert encode_response(41, spliced, ApiKey.METADATA) == encode_response(41, whole, ApiKey.METADATA)
    assert error_counts(spliced) == error_counts(whole) and sum(error_counts(whole).values()) == 2
    # A throttled answer (the dispatcher replaces throttle_time) keeps its encoded topics.
    throttled = dataclasses.replace(spliced, **{"throttle_time": datetime.timedelta(milliseconds=900)}
                                    if version >= 3 else {})
    _, decoded = decode_response(encode_response(5, throttled, ApiKey.METADATA)[4:], ApiKey.METADATA, version)
    assert [t.name for t in decoded.topics] == ["t", "missing", "__consumer_offsets"]
    assert [int(p.leader_id) for p in decoded.topics[0].partitions] == [2, -1, 2]
    # An empty array spliced in is an empty array.
    assert (encode_response(1, response(version, EncodedItems([])), ApiKey.METADATA)
            == encode_response(1, response(version, ()), ApiKey.METADATA))


@pytest.mark.parametrize("version", VERSIONS)
def test_a_topic_entry_is_kios_encoding_byte_for_byte(version: int) -> None:
    """The handler's entry (partitions encoded flat, spliced into the topic) against the same
    entry built of kio objects and encoded by kio."""
    m = response_types(ApiKey.METADATA, version)
    views = [PartitionView(0, 2, 7, (2, 1, 3), (2, 3), (), Errors.NONE),
             PartitionView(1, -1, 0, (1,), (), (1,), Errors.LEADER_NOT_AVAILABLE),
             PartitionView(2, 300_000, 2**31 - 1, tuple(range(300)), tuple(range(130)), (5,), Errors.NONE)]
    for topic, operations in ((TopicDescription("t", uuid.uuid4(), False, views), OMITTED),
                              (TopicDescription("__consumer_offsets", uuid.uuid4(), True, views[:1]), 0b111000),
                              (TopicDescription("empty", uuid.uuid4(), False, []), OMITTED)):
        reference = build(
            m.MetadataResponseTopic, error_code=ErrorCode.none, name=topic.name, topic_id=topic.topic_id,
            is_internal=topic.internal, topic_authorized_operations=operations, partitions=tuple(
                build(m.MetadataResponsePartition, error_code=error_code(p.error), partition_index=p.partition,
                      leader_id=p.leader, leader_epoch=p.leader_epoch, replica_nodes=p.replicas, isr_nodes=p.isr,
                      offline_replicas=p.offline_replicas)
                for p in topic.partitions))
        assert _topic_entry(m, topic, operations) == encode_entity(reference), topic.name


def entry(entries: TopicEntries, support: MetadataSupport, name: str, version: int = 12,
          operations: int = OMITTED) -> Any:
    """The topic's entry as the Metadata handler gets it, decoded (None: no entry)."""
    m = response_types(ApiKey.METADATA, version)
    kept = entries.entry(support, version, name, operations, lambda topic: _topic_entry(m, topic, operations))
    if kept is None:
        return None
    frame = encode_response(1, response(version, EncodedItems([kept.data])), ApiKey.METADATA)
    _, decoded = decode_response(frame[4:], ApiKey.METADATA, version)
    [topic] = decoded.topics
    return topic


def uncached(support: MetadataSupport, name: str, version: int = 12, operations: int = OMITTED) -> Any:
    """The same entry described and encoded afresh."""
    return entry(TopicEntries(), support, name, version, operations)


def leaders(topic: Any) -> list[tuple[int, int, tuple[int, ...], tuple[int, ...]]]:
    return [(int(p.leader_id), int(p.leader_epoch), tuple(map(int, p.isr_nodes)), tuple(map(int, p.offline_replicas)))
            for p in topic.partitions]


@pytest.fixture
def cluster(tmp_path: Path) -> Any:
    from eoslog.broker.zk_support import ZkSupport  # kazoo: the cluster's path only

    config = BrokerConfig.load(overrides={"log.dirs": str(tmp_path), "zookeeper.connect": "127.0.0.1:1",
                                          "broker.id": "1"})
    logs = LogManager(tmp_path, config.topic_defaults(), lambda: 0)
    return ZkSupport(config, logs, Advertised())


def test_every_change_in_a_cluster_is_in_the_next_entry(cluster: Any) -> None:
    md = cluster.member.metadata
    md.set_brokers({b: BrokerRegistration(b, "127.0.0.1", 9000 + b) for b in (1, 2, 3)})
    topic_id = uuid.uuid4()
    md.set_topic("t", TopicAssignment("t", topic_id, {0: (1, 2), 1: (2, 3)}))
    md.set_topic("other", TopicAssignment("other", uuid.uuid4(), {0: (3,)}))
    states = {0: LeaderAndIsr(1, 0, (1, 2), 1, 0), 1: LeaderAndIsr(2, 0, (2, 3), 1, 0)}
    for p, s in states.items():
        md.set_state(TopicPartition("t", p), s)
    entries = TopicEntries()

    def check() -> Any:
        got = entry(entries, cluster, "t")
        assert got == uncached(cluster, "t")
        return got

    assert leaders(check()) == [(1, 0, (1, 2), ()), (2, 0, (2, 3), ())]
    kept = entries.entry(cluster, 12, "t", OMITTED, lambda _t: pytest.fail("encoded again"))
    assert kept is not None
    md.set_state(TopicPartition("other", 0), LeaderAndIsr(3, 4, (3,), 1, 0))  # another topic's change
    assert entries.entry(cluster, 12, "t", OMITTED, lambda _t: pytest.fail("encoded again")) is kept

    md.set_state(TopicPartition("t", 0), LeaderAndIsr(2, 1, (1, 2), 1, 1))  # a new leader
    assert leaders(check())[0] == (2, 1, (1, 2), ())
    md.set_state(TopicPartition("t", 1), LeaderAndIsr(2, 0, (2,), 1, 1))  # the ISR shrinks
    assert leaders(check())[1] == (2, 0, (2,), ())
    md.set_brokers({b: BrokerRegistration(b, "127.0.0.1", 9000 + b) for b in (1, 3)})  # broker 2 is gone
    got = check()
    assert leaders(got) == [(-1, 1, (1, 2), (2,)), (-1, 0, (2,), (2,))]
    assert [int(p.error_code) for p in got.partitions] == [ErrorCode.leader_not_available.value] * 2
    md.set_topic("t", TopicAssignment("t", topic_id, {0: (1, 2), 1: (2, 3), 2: (3, 1)}))  # a partition added
    assert [int(p.partition_index) for p in check().partitions] == [0, 1, 2]
    md.set_topic("t", None)  # deleted
    assert entry(entries, cluster, "t") is None
    again = uuid.uuid4()
    md.set_topic("t", TopicAssignment("t", again, {0: (3,)}))  # made again
    got = check()
    assert got.topic_id == again and len(got.partitions) == 1
    # The operations value is part of the entry.
    assert int(entry(entries, cluster, "t", operations=0b1000).topic_authorized_operations) == 0b1000
    assert int(entry(entries, cluster, "t").topic_authorized_operations) == OMITTED
    # Every version keeps an entry of its own.
    assert entry(entries, cluster, "t", version=0) == uncached(cluster, "t", version=0)


def test_every_change_on_one_node_is_in_the_next_entry(tmp_path: Path) -> None:
    config = BrokerConfig.load(overrides={"log.dirs": str(tmp_path)})
    logs = LogManager(tmp_path, config.topic_defaults(), lambda: 0)
    logs.startup()
    try:
        support = SingleNode(config, logs, Advertised())
        entries = TopicEntries()
        first = logs.create_topic("t", 2, {})
        got = entry(entries, support, "t")
        assert got == uncached(support, "t") and len(got.partitions) == 2 and got.topic_id == first.topic_id
        logs.create_partitions("t", 5)
        got = entry(entries, support, "t")
        assert got == uncached(support, "t") and [int(p.partition_index) for p in got.partitions] == [0, 1, 2, 3, 4]
        logs.delete_topic("t")
        assert entry(entries, support, "t") is None
        second = logs.create_topic("t", 5, {})  # the same name and count, a new id
        got = entry(entries, support, "t")
        assert got == uncached(support, "t") and got.topic_id == second.topic_id != first.topic_id
    finally:
        logs.shutdown()

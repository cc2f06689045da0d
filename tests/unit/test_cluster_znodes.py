"""The znodes' JSON is Kafka's (ZkData.scala): what a Kafka 3.x broker wrote decodes, and
what eoslog writes decodes back to the same value."""

from __future__ import annotations

import json
import uuid

import pytest

from eoslog.cluster.znodes import (
    BrokerRegistration,
    LeaderAndIsr,
    LogDirEvent,
    ProducerIdBlock,
    TopicAssignment,
    ZnodeDataError,
    decode_cluster_id,
    decode_controller,
    decode_controller_epoch,
    decode_topic_config,
    decode_topic_id,
    encode_cluster_id,
    encode_controller,
    encode_controller_epoch,
    encode_topic_config,
    encode_topic_id,
    partition_state_path,
)


def test_topic_id_is_kafkas_base64url_uuid() -> None:
    assert encode_topic_id(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"
    some = uuid.uuid4()
    assert decode_topic_id(encode_topic_id(some)) == some


def test_kafka_written_znodes_decode() -> None:
    state = b'{"controller_epoch":3,"leader":2,"version":1,"leader_epoch":7,"isr":[2,1]}'
    assert LeaderAndIsr.decode("/s", state, zk_version=9) == LeaderAndIsr(2, 7, (2, 1), 3, 9)
    broker = (b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
              b'"endpoints":["PLAINTEXT://kafka-1:9092"],"jmx_port":-1,"port":9092,"host":"kafka-1",'
              b'"version":5,"timestamp":"1700000000000"}')
    assert BrokerRegistration.decode(1, broker, epoch=42) == BrokerRegistration(1, "kafka-1", 9092, None, 42)
    endpoints_only = b'{"version":5,"host":null,"port":-1,"endpoints":["PLAINTEXT://h:1234"],"jmx_port":-1}'
    assert BrokerRegistration.decode(3, endpoints_only).port == 1234
    topic = b'{"version":2,"partitions":{"1":[2,3],"0":[1,2]},"adding_replicas":{},"removing_replicas":{}}'
    assignment = TopicAssignment.decode("t", topic)
    assert assignment.partitions == {0: (1, 2), 1: (2, 3)}
    assert assignment.topic_id == TopicAssignment.decode("t", topic).topic_id  # stable without an id
    block = b'{"version":1,"broker":35,"block_start":"4000","block_end":"4999"}'  # Kafka's ProducerIdBlockZNode
    assert ProducerIdBlock.decode(block) == ProducerIdBlock(35, 4000, 4999)
    assert decode_controller(b'{"version":1,"brokerid":2,"timestamp":"1"}') == 2
    assert decode_controller_epoch(b"12") == 12
    assert decode_cluster_id(b'{"version":"1","id":"abc"}') == "abc"
    assert decode_topic_config("t", b'{"version":1,"config":{"min.insync.replicas":"2"}}') == {
        "min.insync.replicas": "2"}


def test_round_trips() -> None:
    state = LeaderAndIsr(1, 4, (1, 3), 2)
    assert LeaderAndIsr.decode("/s", state.encode()) == state
    assert json.loads(state.encode()) == {"controller_epoch": 2, "leader": 1, "version": 1,
                                          "leader_epoch": 4, "isr": [1, 3]}
    reg = BrokerRegistration(2, "10.0.0.2", 9093, "r1")
    assert BrokerRegistration.decode(2, reg.encode(timestamp_ms=5)) == reg
    a = TopicAssignment("orders", uuid.uuid4(), {0: (1, 2, 3), 1: (2, 3, 1)})
    assert TopicAssignment.decode("orders", a.encode()) == a
    block = ProducerIdBlock(1, 1000, 1999)
    assert json.loads(block.encode())["block_start"] == "1000"  # a string, as Kafka writes it
    assert ProducerIdBlock.decode(block.encode()) == block
    assert decode_controller(encode_controller(3, 7)) == 3
    assert decode_controller_epoch(encode_controller_epoch(8)) == 8
    assert decode_cluster_id(encode_cluster_id("xyz")) == "xyz"
    assert decode_topic_config("t", encode_topic_config({"retention.ms": 5})) == {"retention.ms": "5"}


def test_leader_change_moves_the_epoch_isr_change_does_not() -> None:
    state = LeaderAndIsr(1, 4, (1, 2, 3), controller_epoch=2, zk_version=6)
    moved = state.new_leader(2, (2, 3), controller_epoch=5)
    assert (moved.leader, moved.leader_epoch, moved.isr, moved.controller_epoch) == (2, 5, (2, 3), 5)
    shrunk = state.with_isr((1, 3))
    assert (shrunk.leader, shrunk.leader_epoch, shrunk.isr) == (1, 4, (1, 3))


@pytest.mark.parametrize("data", [b"not json", b"[1]", b'{"leader":1}', b'{"leader":"x","leader_epoch":0,'
                                  b'"isr":[],"controller_epoch":0}'])
def test_malformed_state_names_the_path(data: bytes) -> None:
    path = partition_state_path("t", 0)
    with pytest.raises(ZnodeDataError, match="/brokers/topics/t/partitions/0/state"):
        LeaderAndIsr.decode(path, data)


def test_a_log_dir_event_is_kafkas_with_the_broker_epoch_and_offline_partitions() -> None:
    event = LogDirEvent(2, 4096, (("cut", 0), ("t", 3)))
    doc = json.loads(event.encode())
    assert (doc["version"], doc["broker"], doc["event"]) == (1, 2, 1)  # what Kafka's controller reads
    assert LogDirEvent.decode("/log_dir_event_notification/log_dir_event_0000000001", event.encode()) == event
    # Kafka's own (no eoslog fields): a broker epoch nobody has, no partitions.
    assert LogDirEvent.decode("/x", b'{"version":1,"broker":2,"event":1}') == LogDirEvent(2, -1, ())
    with pytest.raises(ZnodeDataError, match="/x"):
        LogDirEvent.decode("/x", b'{"version":1}')

"""Issue 15, acceptance test 2: the authorization matrix on the wire.

One table row per API: the ACLs it needs (docs/security.md's table says which), the request,
and what a refusal must not show. For each row, bob (SASL, no ACL of his own) sends the request
once per required permission, holding every other one: each time every error code in the answer
is Kafka's code for the missing permission, the answer carries no data, and no log byte on the
broker changes, nor the ACLs, SCRAM credentials or topic configs it stores. Then, holding them
all, the same request succeeds. Every served API has a row (or, without permissions to check,
is named in ELSEWHERE); each row's permissions must be those docs/security.md's table names.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kio.schema.types import ProducerId
from kio.static.primitive import f64, i8, i16, i32, i64

from eoslog.broker.handlers.registry import REGISTRY
from eoslog.protocol.messages import build, request_types
from eoslog.protocol.share_transactions import TRANSACTIONAL_ACCEPT, ShareTransaction
from eoslog.records import build_batch
from eoslog.security.acls import AclOperation as Op
from eoslog.security.acls import ResourceType as Res
from support.harness import wait_until
from support.rawkafka import (
    EARLIEST,
    LATEST,
    RawClient,
    create_topic,
    create_topics_request,
    fetch_request,
    list_offset,
    list_offsets_request,
    metadata_request,
    produce,
    produce_request,
    simple_batch,
)
from support.security_harness import USERS, SecuredBroker, scram_login

TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED = 29, 30, 31, 53
HIDDEN = -1  # filtering APIs (ListTransactions) refuse by leaving the resource out
ELECTION_NOT_NEEDED, MEMBER_ID_REQUIRED, NOT_LEADER = 84, 79, 6
LOG_DIR_NOT_FOUND = 57
BOB = "User:bob"
TOPIC, DEL_TOPIC, GROUP = "mx", "mx-del", "mx-group"


def req(api: str, version: int, cls: str, **fields: Any) -> Any:
    """kio's ``cls`` (a request or one of its parts) of ``api`` at ``version``."""
    api_key = next(s.api_key for s in REGISTRY.values() if s.name == api)
    return build(getattr(request_types(api_key, version), cls), **fields)


@dataclass
class Need:
    """One ACL a row needs, and the code Kafka answers without it."""

    resource: Res
    name: str
    operation: Op
    code: int


@dataclass
class World:
    """The broker, an admin and a bob connection, and what rows' setups made (producer ids)."""

    sb: SecuredBroker
    admin: RawClient
    bob: RawClient
    txns: dict[str, tuple[int, int]] = field(default_factory=dict)
    members: dict[str, tuple[int, str]] = field(default_factory=dict)

    def coordinator(self, key: str, key_type: int, init: bool = False) -> None:
        """Wait until the coordinator of a group (key type 0) or TransactionalId (1) is loaded;
        ``init``: then take the admin's producer id and epoch for that TransactionalId."""
        find = find_coordinator_request(key, key_type)
        for _ in range(300):
            if int(self.admin.call(find).coordinators[0].error_code) == 0:
                if not init:
                    return
                answer = self.admin.call(req(
                    "InitProducerId", 4, "InitProducerIdRequest", transactional_id=key,
                    transaction_timeout=datetime.timedelta(minutes=10), producer_id=i64(-1), producer_epoch=i16(-1)))
                if int(answer.error_code) == 0:
                    self.txns[key] = (int(answer.producer_id), int(answer.producer_epoch))
                    return
            time.sleep(0.1)
        raise AssertionError(f"no coordinator for {key}")

    def commit(self, group: str) -> None:
        """The admin commits an offset for ``group`` (which then exists, Empty)."""
        self.coordinator(group, 0)
        assert set(error_codes(self.admin.call(offset_commit_request(group)))) == {0}

    def share_group(self) -> None:
        """SHARE_GROUP exists, Empty: the admin's member joins and leaves (as the heartbeat rows' do)."""
        self.coordinator(SHARE_GROUP, 0)
        for epoch, topics in ((0, (TOPIC,)), (-1, None)):
            assert int(self.admin.call(share_heartbeat_request(epoch, topics)).error_code) == 0

    def member(self, group: str) -> None:
        """The admin joins ``group`` and syncs as its leader: ``members[group]`` = (generation, member id)."""
        self.coordinator(group, 0)
        member_id = ""
        for _ in range(2):  # the first JoinGroup only hands out the member id (MEMBER_ID_REQUIRED)
            joined = self.admin.call(join_request(group, member_id))
            member_id = joined.member_id
        assert int(joined.error_code) == 0, joined
        self.members[group] = (int(joined.generation_id), member_id)
        assert error_codes(self.admin.call(sync_request(group, self.members[group], leader=True))) == [0]

    def quota(self, client_id: str) -> None:
        """The admin sets a producer_byte_rate quota for ``client_id``."""
        assert set(error_codes(self.admin.call(quota_request(client_id)))) == {0}

    @property
    def broker_id(self) -> str:
        """The broker's id, as the admin's DescribeCluster answers it."""
        return str(self.admin.call(describe_cluster_request()).brokers[0].broker_id)

    def create_topic(self, name: str) -> None:
        assert create_topic(self.admin, name) == 0

    def create_acls(self, principal: str, needs: list[Need]) -> None:
        if needs:
            created = self.admin.call(req("CreateAcls", 3, "CreateAclsRequest",
                                          creations=tuple(_acl(principal, n) for n in needs)))
            assert set(error_codes(created)) == {0}

    def add_partition(self, txn: str) -> None:
        """Make ``txn`` Ongoing with TOPIC's partition 0 in it (the admin's AddPartitionsToTxn v3)."""
        self.coordinator(txn, 1, init=True)
        pid, epoch = self.txns[txn]
        added = self.admin.call(req(
            "AddPartitionsToTxn", 3, "AddPartitionsToTxnRequest", v3_and_below_transactional_id=txn,
            v3_and_below_producer_id=i64(pid), v3_and_below_producer_epoch=i16(epoch), v3_and_below_topics=(
                req("AddPartitionsToTxn", 3, "AddPartitionsToTxnTopic", name=TOPIC, partitions=(i32(0),)),)))
        assert set(error_codes(added)) == {0}

    def add_offsets(self, txn: str) -> None:
        """Make ``txn`` Ongoing with GROUP's offsets in it (the admin's AddOffsetsToTxn)."""
        self.coordinator(txn, 1, init=True)
        assert error_codes(self.admin.call(add_offsets_request(txn, *self.txns[txn]))) == [0]


def add_offsets_request(txn: str, pid: int, epoch: int) -> Any:
    return req("AddOffsetsToTxn", 3, "AddOffsetsToTxnRequest", transactional_id=txn, producer_id=i64(pid),
               producer_epoch=i16(epoch), group_id=GROUP)


def transactional_produce_request(w: World, txn: str) -> Any:
    pid, epoch = w.txns[txn]
    batch = build_batch([(None, b"t", ())], timestamp=int(time.time() * 1000), producer_id=pid, producer_epoch=epoch,
                        base_sequence=0, transactional=True)
    return dataclasses.replace(produce_request(TOPIC, 0, batch), transactional_id=txn)


def describe_cluster_request() -> Any:
    return req("DescribeCluster", 1, "DescribeClusterRequest", include_cluster_authorized_operations=True,
               endpoint_type=i8(1))


def find_coordinator_request(key: str, key_type: int) -> Any:
    return req("FindCoordinator", 4, "FindCoordinatorRequest", key_type=i8(key_type), coordinator_keys=(key,), key="")


def join_request(group: str, member_id: str) -> Any:
    return req("JoinGroup", 9, "JoinGroupRequest", group_id=group, session_timeout=datetime.timedelta(minutes=2),
               rebalance_timeout=datetime.timedelta(minutes=2), member_id=member_id, group_instance_id=None,
               protocol_type="consumer", reason=None,
               protocols=(req("JoinGroup", 9, "JoinGroupRequestProtocol", name="range", metadata=b""),))


def describe_configs_request(resource_type: int, name: str) -> Any:
    return req("DescribeConfigs", 4, "DescribeConfigsRequest", include_synonyms=False, include_documentation=False,
               resources=(req("DescribeConfigs", 4, "DescribeConfigsResource", resource_type=i8(resource_type),
                              resource_name=name, configuration_keys=None),))


def offset_commit_request(group: str) -> Any:
    return req("OffsetCommit", 8, "OffsetCommitRequest", group_id=group, generation_id_or_member_epoch=i32(-1),
               member_id="", group_instance_id=None, topics=(
                   req("OffsetCommit", 8, "OffsetCommitRequestTopic", name=TOPIC, partitions=(
                       req("OffsetCommit", 8, "OffsetCommitRequestPartition", partition_index=i32(0),
                           committed_offset=i64(1), committed_leader_epoch=i32(-1), committed_metadata=""),)),))


def sync_request(group: str, member: tuple[int, str], leader: bool = False) -> Any:
    generation, member_id = member
    assignments = (req("SyncGroup", 5, "SyncGroupRequestAssignment", member_id=member_id, assignment=b"mine"),)
    return req("SyncGroup", 5, "SyncGroupRequest", group_id=group, generation_id=i32(generation),
               member_id=member_id, group_instance_id=None, protocol_type="consumer", protocol_name="range",
               assignments=assignments if leader else ())


SHARE_GROUP, SHARE_MEMBER = "mx-share", "mx-share-member"
CONSUMER_GROUP, CONSUMER_MEMBER = "mx-consumer", "mx-consumer-member"


def consumer_heartbeat_request(epoch: int, topics: tuple[str, ...] | None) -> Any:
    """A ConsumerGroupHeartbeat (KIP-848): a join (epoch 0) subscribing to ``topics``, or a leave (-1)."""
    return req("ConsumerGroupHeartbeat", 1, "ConsumerGroupHeartbeatRequest", group_id=CONSUMER_GROUP,
               member_id=CONSUMER_MEMBER, member_epoch=i32(epoch), instance_id=None, rack_id=None,
               rebalance_timeout=datetime.timedelta(milliseconds=30000 if epoch == 0 else -1),
               subscribed_topic_names=topics,
               subscribed_topic_regex=None, server_assignor=None, topic_partitions=() if epoch == 0 else None)


def share_heartbeat_request(epoch: int, topics: tuple[str, ...] | None) -> Any:
    return req("ShareGroupHeartbeat", 1, "ShareGroupHeartbeatRequest", group_id=SHARE_GROUP, member_id=SHARE_MEMBER,
               member_epoch=i32(epoch), rack_id=None, subscribed_topic_names=topics)


def share_fetch_request(w: World, epoch: int, acks: bool = False, group: str = SHARE_GROUP,
                        member: str = SHARE_MEMBER) -> Any:
    """A ShareFetch (epoch 0: opening bob's share session) of TOPIC's partition 0, or with ``acks``
    a ShareAcknowledge (epoch 1) of its offset 0 in that session."""
    topic_id = next(t.topic_id for t in w.admin.call(metadata_request([TOPIC])).topics)
    if acks:
        batch = req("ShareAcknowledge", 1, "AcknowledgementBatch", first_offset=i64(0), last_offset=i64(0),
                    acknowledge_types=(i8(1),))
        return req("ShareAcknowledge", 1, "ShareAcknowledgeRequest", group_id=SHARE_GROUP, member_id=SHARE_MEMBER,
                   share_session_epoch=i32(epoch), topics=(req(
                       "ShareAcknowledge", 1, "AcknowledgeTopic", topic_id=topic_id, partitions=(req(
                           "ShareAcknowledge", 1, "AcknowledgePartition", partition_index=i32(0),
                           acknowledgement_batches=(batch,)),)),))
    return req("ShareFetch", 1, "ShareFetchRequest", group_id=group, member_id=member,
               share_session_epoch=i32(epoch), max_wait=datetime.timedelta(0), min_bytes=i32(1),
               max_bytes=i32(1 << 20), max_records=i32(10), batch_size=i32(10), forgotten_topics_data=(),
               topics=(req("ShareFetch", 1, "FetchTopic", topic_id=topic_id, partitions=(
                   req("ShareFetch", 1, "FetchPartition", partition_index=i32(0), acknowledgement_batches=()),)),))


def share_acknowledge_request(w: World) -> Any:
    """bob's share session opened first (a refused ShareFetch leaves none: the acknowledgement is
    refused for the group either way)."""
    w.bob.call(share_fetch_request(w, 0))
    return share_fetch_request(w, 1, acks=True)


SHARE_TXN_GROUP, SHARE_TXN = "mx-share-txn-g", "mx-share-txn"


def share_transaction_setup(w: World) -> None:
    """The admin's transaction, and the group's share-partition initialized (at the log start) and
    its records released again by an admin session, so that bob's fetches only acquire (nothing
    stored changes while bob is refused)."""
    w.coordinator(SHARE_TXN, 1, init=True)
    w.coordinator(SHARE_TXN_GROUP, 0)
    w.admin.call(req("IncrementalAlterConfigs", 1, "IncrementalAlterConfigsRequest", validate_only=False,
                     resources=(req("IncrementalAlterConfigs", 1, "AlterConfigsResource", resource_type=i8(32),
                                    resource_name=SHARE_TXN_GROUP, configs=(req(
                                        "IncrementalAlterConfigs", 1, "AlterableConfig",
                                        name="share.auto.offset.reset", config_operation=i8(0),
                                        value="earliest"),)),)))
    w.admin.call(share_fetch_request(w, 0, group=SHARE_TXN_GROUP, member="mx-share-txn-admin"))
    w.admin.call(share_acknowledge_request_for(w, SHARE_TXN_GROUP, "mx-share-txn-admin", -1, ()))


def share_acknowledge_request_for(w: World, group: str, member: str, epoch: int, batches: tuple[Any, ...],
                                  transaction: Any = None) -> Any:
    topic_id = next(t.topic_id for t in w.admin.call(metadata_request([TOPIC])).topics)
    return req("ShareAcknowledge", 1, "ShareAcknowledgeRequest", group_id=group, member_id=member,
               share_session_epoch=i32(epoch), eoslog_transaction=transaction or ShareTransaction(),
               topics=(req("ShareAcknowledge", 1, "AcknowledgeTopic", topic_id=topic_id, partitions=(req(
                   "ShareAcknowledge", 1, "AcknowledgePartition", partition_index=i32(0),
                   acknowledgement_batches=batches),)),) if batches else ())


def share_acknowledge_in_transaction_request(w: World) -> Any:
    """eoslog's extension (protocol/share_transactions.py): bob's session opened, its offset 0
    accepted inside the admin's transaction."""
    w.bob.call(share_fetch_request(w, 0, group=SHARE_TXN_GROUP))
    pid, epoch = w.txns[SHARE_TXN]
    batch = req("ShareAcknowledge", 1, "AcknowledgementBatch", first_offset=i64(0), last_offset=i64(0),
                acknowledge_types=(i8(TRANSACTIONAL_ACCEPT),))
    return share_acknowledge_request_for(w, SHARE_TXN_GROUP, SHARE_MEMBER, 1, (batch,), ShareTransaction(
        transactional_id=SHARE_TXN, producer_id=ProducerId(pid), producer_epoch=i16(epoch)))


def share_state_request(w: World, api: str) -> Any:
    """One of the share coordinator's inter-broker requests, for partition 0 of TOPIC in a group of
    its own (``mx-share-state``)."""
    topic_id = next(t.topic_id for t in w.admin.call(metadata_request([TOPIC])).topics)
    fields: dict[str, Any] = {
        "InitializeShareGroupState": {"state_epoch": i32(0), "start_offset": i64(0)},
        "ReadShareGroupState": {"leader_epoch": i32(0)},
        "WriteShareGroupState": {"state_epoch": i32(0), "leader_epoch": i32(0), "start_offset": i64(1),
                                 "delivery_complete_count": i32(-1), "state_batches": ()},
        "DeleteShareGroupState": {},
        "ReadShareGroupStateSummary": {"leader_epoch": i32(0)},
    }[api]
    version = 1 if api in ("WriteShareGroupState", "ReadShareGroupStateSummary") else 0
    topic_cls = {"InitializeShareGroupState": "InitializeStateData", "ReadShareGroupState": "ReadStateData",
                 "WriteShareGroupState": "WriteStateData", "DeleteShareGroupState": "DeleteStateData",
                 "ReadShareGroupStateSummary": "ReadStateSummaryData"}[api]
    return req(api, version, f"{api}Request", group_id="mx-share-state", topics=(req(
        api, version, topic_cls, topic_id=topic_id, partitions=(
            req(api, version, "PartitionData", partition=i32(0), **fields),)),))


def _refusals(response: Any) -> list[int]:
    """The codes a refusal shows: those not 0 (a partition's refusal leaves the top level at 0), or [0]."""
    return [c for c in error_codes(response) if c] or [0]


def config_request(api: str, version: int, **op: Any) -> Any:
    """AlterConfigs / IncrementalAlterConfigs setting TOPIC's retention.ms."""
    config = req(api, version, "AlterableConfig", name="retention.ms", value="86400000", **op)
    return req(api, version, f"{api}Request", validate_only=False, resources=(
        req(api, version, "AlterConfigsResource", resource_type=i8(2), resource_name=TOPIC, configs=(config,)),))


def quota_request(client_id: str) -> Any:
    """AlterClientQuotas setting ``client_id``'s producer_byte_rate."""
    return req("AlterClientQuotas", 1, "AlterClientQuotasRequest", validate_only=False, entries=(
        req("AlterClientQuotas", 1, "EntryData", entity=(
            req("AlterClientQuotas", 1, "EntityData", entity_type="client-id", entity_name=client_id),), ops=(
            req("AlterClientQuotas", 1, "OpData", key="producer_byte_rate", value=f64(1048576.0), remove=False),)),))


def error_codes(response: Any) -> list[int]:
    """Every *error_code anywhere in a response (top level, per topic, per partition)."""
    found: list[int] = []

    def walk(value: Any) -> None:
        if dataclasses.is_dataclass(value):
            for f in dataclasses.fields(value):
                if f.name.endswith("error_code"):
                    found.append(int(getattr(value, f.name)))
                else:
                    walk(getattr(value, f.name))
        elif isinstance(value, tuple):
            for v in value:
                walk(v)

    walk(response)
    return found


def partitions(response: Any, *path: str) -> list[Any]:
    """The innermost entries of ``response`` along attribute ``path`` (tuples flattened)."""
    level = [response]
    for name in path:
        level = [item for x in level for item in getattr(x, name)]
    return level


@dataclass
class Row:
    api: str
    needs: list[Need]
    request: Callable[[World], Any]
    leaked: Callable[[Any], bool] = lambda _r: False  # data in a refused answer
    setup: Callable[[World], None] = lambda _w: None
    codes: Callable[[Any], list[int]] = error_codes
    ok: frozenset[int] = frozenset({0})
    label: str = ""  # the test id when an API has several rows


def _txn(w: World, txn: str) -> dict[str, Any]:
    pid, epoch = w.txns[txn]
    return {"transactional_id": txn, "producer_id": i64(pid), "producer_epoch": i16(epoch)}


def _listed(txn: str) -> Callable[[Any], list[int]]:
    """ListTransactions' answer as codes: its error, else whether ``txn`` is listed."""
    return lambda r: [int(r.error_code) or (0 if txn in {t.transactional_id for t in r.transaction_states}
                                            else HIDDEN)]


ROWS: list[Row] = [
    Row("ListOffsets", [Need(Res.TOPIC, TOPIC, Op.DESCRIBE, TOPIC_DENIED)],
        lambda w: list_offsets_request(TOPIC, 0, LATEST),
        leaked=lambda r: any(int(p.offset) != -1 for p in partitions(r, "topics", "partitions"))),
    Row("OffsetForLeaderEpoch", [Need(Res.TOPIC, TOPIC, Op.DESCRIBE, TOPIC_DENIED)],
        lambda w: req("OffsetForLeaderEpoch", 4, "OffsetForLeaderEpochRequest", replica_id=i32(-1), topics=(
            req("OffsetForLeaderEpoch", 4, "OffsetForLeaderTopic", topic=TOPIC, partitions=(
                req("OffsetForLeaderEpoch", 4, "OffsetForLeaderPartition", partition=i32(0),
                     current_leader_epoch=i32(-1), leader_epoch=i32(0)),)),)),
        leaked=lambda r: any(int(p.end_offset) != -1 for p in partitions(r, "topics", "partitions"))),
    Row("DeleteRecords", [Need(Res.TOPIC, DEL_TOPIC, Op.DELETE, TOPIC_DENIED)],
        lambda w: req("DeleteRecords", 2, "DeleteRecordsRequest", timeout=datetime.timedelta(seconds=10), topics=(
            req("DeleteRecords", 2, "DeleteRecordsTopic", name=DEL_TOPIC, partitions=(
                req("DeleteRecords", 2, "DeleteRecordsPartition", partition_index=i32(0), offset=i64(1)),)),)),
        leaked=lambda r: any(int(p.low_watermark) != -1 for p in partitions(r, "topics", "partitions"))),
    Row("DescribeProducers", [Need(Res.TOPIC, TOPIC, Op.READ, TOPIC_DENIED)],
        lambda w: req("DescribeProducers", 0, "DescribeProducersRequest", topics=(
            req("DescribeProducers", 0, "TopicRequest", name=TOPIC, partition_indexes=(i32(0),)),)),
        leaked=lambda r: any(p.active_producers for p in partitions(r, "topics", "partitions"))),
    Row("DescribeTransactions", [Need(Res.TRANSACTIONAL_ID, "mx-desc", Op.DESCRIBE, TXN_DENIED)],
        lambda w: req("DescribeTransactions", 0, "DescribeTransactionsRequest", transactional_ids=("mx-desc",)),
        setup=lambda w: w.add_offsets("mx-desc"),
        # Kafka's refusal carries the id and the schema's zeros: no state, timeout, producer, partition.
        leaked=lambda r: any(t.transaction_state or t.topics or t.transaction_timeout.total_seconds()
                             or int(t.producer_id) not in (0, -1) for t in r.transaction_states)),
    Row("ListTransactions", [Need(Res.TRANSACTIONAL_ID, "mx-list", Op.DESCRIBE, HIDDEN)],
        lambda w: req("ListTransactions", 1, "ListTransactionsRequest", state_filters=(), producer_id_filters=()),
        setup=lambda w: w.add_offsets("mx-list"), codes=_listed("mx-list")),
    Row("AddOffsetsToTxn", [Need(Res.TRANSACTIONAL_ID, "mx-add", Op.WRITE, TXN_DENIED),
                            Need(Res.GROUP, GROUP, Op.READ, GROUP_DENIED)],
        lambda w: add_offsets_request("mx-add", *w.txns["mx-add"]),
        setup=lambda w: w.coordinator("mx-add", 1, init=True)),
    Row("TxnOffsetCommit", [Need(Res.TRANSACTIONAL_ID, "mx-toc", Op.WRITE, TXN_DENIED),
                            Need(Res.GROUP, GROUP, Op.READ, GROUP_DENIED),
                            Need(Res.TOPIC, TOPIC, Op.READ, TOPIC_DENIED)],
        lambda w: req("TxnOffsetCommit", 3, "TxnOffsetCommitRequest", **_txn(w, "mx-toc"), group_id=GROUP,
                      generation_id=i32(-1), member_id="", group_instance_id=None, topics=(
                          req("TxnOffsetCommit", 3, "TxnOffsetCommitRequestTopic", name=TOPIC, partitions=(
                              req("TxnOffsetCommit", 3, "TxnOffsetCommitRequestPartition", partition_index=i32(0),
                                   committed_offset=i64(1), committed_leader_epoch=i32(-1),
                                   committed_metadata=""),)),)),
        setup=lambda w: w.add_offsets("mx-toc")),
    Row("EndTxn", [Need(Res.TRANSACTIONAL_ID, "mx-end", Op.WRITE, TXN_DENIED)],
        lambda w: req("EndTxn", 3, "EndTxnRequest", **_txn(w, "mx-end"), committed=False),
        setup=lambda w: w.add_offsets("mx-end")),
    Row("OffsetCommit", [Need(Res.GROUP, GROUP, Op.READ, GROUP_DENIED), Need(Res.TOPIC, TOPIC, Op.READ, TOPIC_DENIED)],
        lambda w: offset_commit_request(GROUP), setup=lambda w: w.coordinator(GROUP, 0)),
    Row("WriteTxnMarkers", [Need(Res.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION, CLUSTER_DENIED)],
        lambda w: req("WriteTxnMarkers", 1, "WriteTxnMarkersRequest", markers=(
            req("WriteTxnMarkers", 1, "WritableTxnMarker", producer_id=i64(w.txns["mx-mark"][0]),
                 producer_epoch=i16(w.txns["mx-mark"][1]), transaction_result=False, coordinator_epoch=i32(0),
                 topics=(req("WriteTxnMarkers", 1, "WritableTxnMarkerTopic", name=TOPIC,
                              partition_indexes=(i32(0),)),)),)),
        setup=lambda w: w.coordinator("mx-mark", 1, init=True)),
    Row("ElectLeaders", [Need(Res.CLUSTER, "kafka-cluster", Op.ALTER, CLUSTER_DENIED)],
        lambda w: req("ElectLeaders", 2, "ElectLeadersRequest", election_type=0,
                      timeout=datetime.timedelta(seconds=10), topic_partitions=(
                          req("ElectLeaders", 2, "TopicPartitions", topic=TOPIC, partitions=(i32(0),)),)),
        ok=frozenset({0, ELECTION_NOT_NEEDED})),
    Row("AlterPartitionReassignments", [Need(Res.CLUSTER, "kafka-cluster", Op.ALTER, CLUSTER_DENIED)],
        lambda w: req("AlterPartitionReassignments", 0, "AlterPartitionReassignmentsRequest", topics=(
            req("AlterPartitionReassignments", 0, "ReassignableTopic", name=TOPIC, partitions=(
                req("AlterPartitionReassignments", 0, "ReassignablePartition", partition_index=i32(0),
                    replicas=(i32(0),)),)),))),
    Row("ListPartitionReassignments", [Need(Res.CLUSTER, "kafka-cluster", Op.DESCRIBE, CLUSTER_DENIED)],
        lambda w: req("ListPartitionReassignments", 0, "ListPartitionReassignmentsRequest", topics=None)),
    Row("DescribeLogDirs", [Need(Res.CLUSTER, "kafka-cluster", Op.DESCRIBE, CLUSTER_DENIED)],
        lambda w: req("DescribeLogDirs", 4, "DescribeLogDirsRequest", topics=None),
        leaked=lambda r: bool(r.results)),
    Row("AlterReplicaLogDirs", [Need(Res.CLUSTER, "kafka-cluster", Op.ALTER, CLUSTER_DENIED)],
        lambda w: req("AlterReplicaLogDirs", 2, "AlterReplicaLogDirsRequest", dirs=(
            req("AlterReplicaLogDirs", 2, "AlterReplicaLogDir", path="/no/such/log/dir", topics=(
                req("AlterReplicaLogDirs", 2, "AlterReplicaLogDirTopic", name=TOPIC, partitions=(i32(0),)),)),)),
        ok=frozenset({LOG_DIR_NOT_FOUND})),
    Row("DescribeClientQuotas", [Need(Res.CLUSTER, "kafka-cluster", Op.DESCRIBE_CONFIGS, CLUSTER_DENIED)],
        lambda w: req("DescribeClientQuotas", 1, "DescribeClientQuotasRequest", components=(), strict=False),
        setup=lambda w: w.quota("mx-described"), leaked=lambda r: bool(r.entries)),
    Row("AlterClientQuotas", [Need(Res.CLUSTER, "kafka-cluster", Op.ALTER_CONFIGS, CLUSTER_DENIED)],
        lambda w: quota_request("mx-altered")),
    Row("UpdateFeatures", [Need(Res.CLUSTER, "kafka-cluster", Op.ALTER, CLUSTER_DENIED)],
        lambda w: req("UpdateFeatures", 2, "UpdateFeaturesRequest", timeout=datetime.timedelta(seconds=10),
                      validate_only=True, feature_updates=(
                          req("UpdateFeatures", 2, "FeatureUpdateKey", feature="transaction.version",
                              max_version_level=i16(0), upgrade_type=i8(2)),))),
    Row("AddPartitionsToTxn", [Need(Res.TRANSACTIONAL_ID, "mx-apt", Op.WRITE, TXN_DENIED),
                               Need(Res.TOPIC, TOPIC, Op.WRITE, TOPIC_DENIED)],
        lambda w: req("AddPartitionsToTxn", 3, "AddPartitionsToTxnRequest", v3_and_below_transactional_id="mx-apt",
                      v3_and_below_producer_id=i64(w.txns["mx-apt"][0]),
                      v3_and_below_producer_epoch=i16(w.txns["mx-apt"][1]), v3_and_below_topics=(
                          req("AddPartitionsToTxn", 3, "AddPartitionsToTxnTopic", name=TOPIC,
                              partitions=(i32(0),)),)),
        setup=lambda w: w.coordinator("mx-apt", 1, init=True)),
    Row("Heartbeat", [Need(Res.GROUP, "mx-hb", Op.READ, GROUP_DENIED)],
        lambda w: req("Heartbeat", 4, "HeartbeatRequest", group_id="mx-hb", generation_id=i32(w.members["mx-hb"][0]),
                      member_id=w.members["mx-hb"][1], group_instance_id=None),
        setup=lambda w: w.member("mx-hb")),
    Row("SyncGroup", [Need(Res.GROUP, "mx-sync", Op.READ, GROUP_DENIED)],
        lambda w: sync_request("mx-sync", w.members["mx-sync"]),
        setup=lambda w: w.member("mx-sync"), leaked=lambda r: bool(r.assignment)),
    Row("LeaveGroup", [Need(Res.GROUP, "mx-leave", Op.READ, GROUP_DENIED)],
        lambda w: req("LeaveGroup", 5, "LeaveGroupRequest", group_id="mx-leave", members=(
            req("LeaveGroup", 5, "MemberIdentity", member_id=w.members["mx-leave"][1], group_instance_id=None,
                reason=None),)),
        setup=lambda w: w.member("mx-leave")),
    Row("ListGroups", [Need(Res.GROUP, "mx-listed", Op.DESCRIBE, HIDDEN)],
        lambda w: req("ListGroups", 5, "ListGroupsRequest", states_filter=(), types_filter=()),
        setup=lambda w: w.commit("mx-listed"),
        codes=lambda r: [int(r.error_code) or (0 if "mx-listed" in {g.group_id for g in r.groups} else HIDDEN)]),
    Row("DeleteGroups", [Need(Res.GROUP, "mx-gone", Op.DELETE, GROUP_DENIED)],
        lambda w: req("DeleteGroups", 2, "DeleteGroupsRequest", groups_names=("mx-gone",)),
        setup=lambda w: w.commit("mx-gone")),
    Row("OffsetDelete", [Need(Res.GROUP, "mx-offdel", Op.DELETE, GROUP_DENIED),
                         Need(Res.TOPIC, TOPIC, Op.READ, TOPIC_DENIED)],
        lambda w: req("OffsetDelete", 0, "OffsetDeleteRequest", group_id="mx-offdel", topics=(
            req("OffsetDelete", 0, "OffsetDeleteRequestTopic", name=TOPIC, partitions=(
                req("OffsetDelete", 0, "OffsetDeleteRequestPartition", partition_index=i32(0)),)),)),
        setup=lambda w: w.commit("mx-offdel"),
        # Kafka: a refused group is the top-level error; a refused topic only its partitions'.
        codes=lambda r: [int(r.error_code)] if int(r.error_code) else error_codes(r.topics)),
    Row("AlterConfigs", [Need(Res.TOPIC, TOPIC, Op.ALTER_CONFIGS, TOPIC_DENIED)],
        lambda w: config_request("AlterConfigs", 2)),
    Row("IncrementalAlterConfigs", [Need(Res.TOPIC, TOPIC, Op.ALTER_CONFIGS, TOPIC_DENIED)],
        lambda w: config_request("IncrementalAlterConfigs", 1, config_operation=i8(0))),
    Row("DeleteAcls", [Need(Res.CLUSTER, "kafka-cluster", Op.ALTER, CLUSTER_DENIED)],
        lambda w: req("DeleteAcls", 3, "DeleteAclsRequest", filters=(acl_filter("User:mx-nobody"),)),
        setup=lambda w: w.create_acls("User:mx-nobody", [Need(Res.TOPIC, TOPIC, Op.READ, 0)])),
    Row("AlterUserScramCredentials", [Need(Res.CLUSTER, "kafka-cluster", Op.ALTER, CLUSTER_DENIED)],
        lambda w: req("AlterUserScramCredentials", 0, "AlterUserScramCredentialsRequest", deletions=(), upsertions=(
            req("AlterUserScramCredentials", 0, "ScramCredentialUpsertion", name="mx-user", mechanism=i8(2),
                iterations=i32(4096), salt=b"0123456789abcdef", salted_password=b"s" * 64),))),
    Row("Produce", [Need(Res.TOPIC, TOPIC, Op.WRITE, TOPIC_DENIED)],
        lambda w: produce_request(TOPIC, 0, simple_batch([b"bob"])),
        leaked=lambda r: any(int(p.base_offset) != -1 for p in partitions(r, "responses", "partition_responses"))),
    Row("Produce", [Need(Res.TRANSACTIONAL_ID, "mx-tp", Op.WRITE, TXN_DENIED),
                    Need(Res.TOPIC, TOPIC, Op.WRITE, TOPIC_DENIED)],
        lambda w: transactional_produce_request(w, "mx-tp"), setup=lambda w: w.add_partition("mx-tp"),
        leaked=lambda r: any(int(p.base_offset) != -1 for p in partitions(r, "responses", "partition_responses")),
        label="Produce(transactional)"),
    # Past authorization, a replica id the partition does not have is NOT_LEADER_OR_FOLLOWER (Kafka's answer).
    Row("Fetch", [Need(Res.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION, TOPIC_DENIED)],
        lambda w: dataclasses.replace(fetch_request(TOPIC, 0, 0), replica_id=i32(1)),
        codes=lambda r: error_codes(r.responses), label="Fetch(follower)", ok=frozenset({0, NOT_LEADER}),
        leaked=lambda r: any(p.records or int(p.high_watermark) != -1
                             for p in partitions(r, "responses", "partitions"))),
    Row("AddPartitionsToTxn", [Need(Res.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION, CLUSTER_DENIED)],
        lambda w: req("AddPartitionsToTxn", 5, "AddPartitionsToTxnRequest", transactions=(
            req("AddPartitionsToTxn", 5, "AddPartitionsToTxnTransaction", transactional_id="mx-apt4",
                producer_id=i64(w.txns["mx-apt4"][0]), producer_epoch=i16(w.txns["mx-apt4"][1]), verify_only=True,
                topics=(req("AddPartitionsToTxn", 5, "AddPartitionsToTxnTopic", name=TOPIC,
                            partitions=(i32(0),)),)),)),
        setup=lambda w: w.add_partition("mx-apt4"), label="AddPartitionsToTxn(broker)"),
    Row("Fetch", [Need(Res.TOPIC, TOPIC, Op.READ, TOPIC_DENIED)],
        lambda w: fetch_request(TOPIC, 0, 0), codes=lambda r: error_codes(r.responses),  # top level: sessions
        leaked=lambda r: any(p.records or int(p.high_watermark) != -1
                             for p in partitions(r, "responses", "partitions"))),
    Row("Metadata", [Need(Res.TOPIC, TOPIC, Op.DESCRIBE, TOPIC_DENIED)],
        lambda w: metadata_request([TOPIC]), leaked=lambda r: any(t.partitions for t in r.topics)),
    Row("Metadata", [Need(Res.TOPIC, TOPIC, Op.DESCRIBE, HIDDEN)], lambda w: metadata_request(None),
        codes=lambda r: [*error_codes(r), 0 if TOPIC in {t.name for t in r.topics} else HIDDEN], label="Metadata(all)"),
    Row("InitProducerId", [Need(Res.TRANSACTIONAL_ID, "mx-ipid", Op.WRITE, TXN_DENIED)],
        lambda w: req("InitProducerId", 4, "InitProducerIdRequest", transactional_id="mx-ipid",
                      transaction_timeout=datetime.timedelta(minutes=10), producer_id=i64(-1), producer_epoch=i16(-1)),
        setup=lambda w: w.coordinator("mx-ipid", 1), leaked=lambda r: int(r.producer_id) != -1),
    Row("FindCoordinator", [Need(Res.GROUP, "mx-fc", Op.DESCRIBE, GROUP_DENIED)],
        lambda w: find_coordinator_request("mx-fc", 0),
        leaked=lambda r: any(int(c.node_id) != -1 for c in r.coordinators), label="FindCoordinator(group)"),
    Row("FindCoordinator", [Need(Res.TRANSACTIONAL_ID, "mx-fc", Op.DESCRIBE, TXN_DENIED)],
        lambda w: find_coordinator_request("mx-fc", 1),
        leaked=lambda r: any(int(c.node_id) != -1 for c in r.coordinators), label="FindCoordinator(txn)"),
    # A first JoinGroup (v4+) that gets past authorization is answered MEMBER_ID_REQUIRED, as in Kafka.
    Row("JoinGroup", [Need(Res.GROUP, "mx-join", Op.READ, GROUP_DENIED)],
        lambda w: join_request("mx-join", ""), setup=lambda w: w.coordinator("mx-join", 0),
        leaked=lambda r: bool(r.member_id or r.members), ok=frozenset({0, MEMBER_ID_REQUIRED})),
    Row("DescribeGroups", [Need(Res.GROUP, "mx-dg", Op.DESCRIBE, GROUP_DENIED)],
        lambda w: req("DescribeGroups", 5, "DescribeGroupsRequest", groups=("mx-dg",),
                      include_authorized_operations=True),
        setup=lambda w: w.member("mx-dg"), leaked=lambda r: any(g.members or g.group_state for g in r.groups)),
    Row("OffsetFetch", [Need(Res.GROUP, "mx-of", Op.DESCRIBE, GROUP_DENIED),
                        Need(Res.TOPIC, TOPIC, Op.DESCRIBE, TOPIC_DENIED)],
        lambda w: req("OffsetFetch", 8, "OffsetFetchRequest", require_stable=False, groups=(
            req("OffsetFetch", 8, "OffsetFetchRequestGroup", group_id="mx-of", topics=(
                req("OffsetFetch", 8, "OffsetFetchRequestTopics", name=TOPIC, partition_indexes=(i32(0),)),)),)),
        setup=lambda w: w.commit("mx-of"),
        codes=lambda r: [int(g.error_code) for g in r.groups] if any(int(g.error_code) for g in r.groups)
        else error_codes(r.groups[0].topics),
        leaked=lambda r: any(int(p.committed_offset) != -1 for p in partitions(r, "groups", "topics", "partitions"))),
    Row("CreateTopics", [Need(Res.TOPIC, "mx-new", Op.CREATE, TOPIC_DENIED)],  # or CREATE on the cluster
        lambda w: create_topics_request("mx-new", 1), codes=lambda r: [int(t.error_code) for t in r.topics],
        leaked=lambda r: any(t.configs or int(t.num_partitions) != -1 for t in r.topics)),
    Row("DeleteTopics", [Need(Res.TOPIC, "mx-doomed", Op.DELETE, TOPIC_DENIED)],
        lambda w: req("DeleteTopics", 5, "DeleteTopicsRequest", topic_names=("mx-doomed",),
                      timeout=datetime.timedelta(seconds=10)),
        setup=lambda w: w.create_topic("mx-doomed")),
    Row("CreatePartitions", [Need(Res.TOPIC, "mx-grow", Op.ALTER, TOPIC_DENIED)],
        lambda w: req("CreatePartitions", 3, "CreatePartitionsRequest", validate_only=False,
                      timeout=datetime.timedelta(seconds=10), topics=(
                          req("CreatePartitions", 3, "CreatePartitionsTopic", name="mx-grow", count=i32(2),
                              assignments=None),)),
        setup=lambda w: w.create_topic("mx-grow")),
    Row("DescribeConfigs", [Need(Res.TOPIC, TOPIC, Op.DESCRIBE_CONFIGS, TOPIC_DENIED)],
        lambda w: describe_configs_request(2, TOPIC), leaked=lambda r: any(x.configs for x in r.results),
        label="DescribeConfigs(topic)"),
    Row("DescribeConfigs", [Need(Res.CLUSTER, "kafka-cluster", Op.DESCRIBE_CONFIGS, CLUSTER_DENIED)],
        lambda w: describe_configs_request(4, w.broker_id), leaked=lambda r: any(x.configs for x in r.results),
        label="DescribeConfigs(broker)"),
    Row("CreateAcls", [Need(Res.CLUSTER, "kafka-cluster", Op.ALTER, CLUSTER_DENIED)],
        lambda w: req("CreateAcls", 3, "CreateAclsRequest",
                      creations=(_acl("User:mx-other", Need(Res.TOPIC, TOPIC, Op.READ, 0)),))),
    Row("DescribeAcls", [Need(Res.CLUSTER, "kafka-cluster", Op.DESCRIBE, CLUSTER_DENIED)],
        lambda w: req("DescribeAcls", 3, "DescribeAclsRequest", resource_type_filter=i8(1), resource_name_filter=None,
                      pattern_type_filter=i8(1), principal_filter=None, host_filter=None, operation=i8(1),
                      permission_type=i8(1)),
        leaked=lambda r: bool(r.resources)),
    Row("DescribeCluster", [Need(Res.CLUSTER, "kafka-cluster", Op.DESCRIBE, CLUSTER_DENIED)],
        lambda w: describe_cluster_request(),
        leaked=lambda r: bool(r.brokers)),
    Row("DescribeUserScramCredentials", [Need(Res.CLUSTER, "kafka-cluster", Op.DESCRIBE, CLUSTER_DENIED)],
        lambda w: req("DescribeUserScramCredentials", 0, "DescribeUserScramCredentialsRequest", users=None),
        leaked=lambda r: bool(r.results)),
    # Share groups (KIP-932). The member joins, then leaves in the next row (its session would
    # otherwise expire and write during a later row); nothing is acquired (share.auto.offset.reset
    # is latest and TOPIC's records came before), so no lock runs out later either.
    Row("ConsumerGroupHeartbeat", [Need(Res.GROUP, CONSUMER_GROUP, Op.READ, GROUP_DENIED),
                                   Need(Res.TOPIC, TOPIC, Op.DESCRIBE, TOPIC_DENIED)],
        lambda w: consumer_heartbeat_request(0, (TOPIC,)), setup=lambda w: w.coordinator(CONSUMER_GROUP, 0),
        leaked=lambda r: r.assignment is not None or int(r.member_epoch) != 0, label="ConsumerGroupHeartbeat(join)"),
    Row("ConsumerGroupHeartbeat", [Need(Res.GROUP, CONSUMER_GROUP, Op.READ, GROUP_DENIED)],
        lambda w: consumer_heartbeat_request(-1, None), label="ConsumerGroupHeartbeat(leave)"),
    Row("ConsumerGroupDescribe", [Need(Res.GROUP, CONSUMER_GROUP, Op.DESCRIBE, GROUP_DENIED)],
        lambda w: req("ConsumerGroupDescribe", 1, "ConsumerGroupDescribeRequest", group_ids=(CONSUMER_GROUP,),
                      include_authorized_operations=False),
        leaked=lambda r: any(g.members or g.group_epoch for g in r.groups)),
    Row("ShareGroupHeartbeat", [Need(Res.GROUP, SHARE_GROUP, Op.READ, GROUP_DENIED),
                                Need(Res.TOPIC, TOPIC, Op.DESCRIBE, TOPIC_DENIED)],
        lambda w: share_heartbeat_request(0, (TOPIC,)), setup=lambda w: w.coordinator(SHARE_GROUP, 0),
        leaked=lambda r: r.assignment is not None or int(r.member_epoch) != 0, label="ShareGroupHeartbeat(join)"),
    Row("ShareGroupHeartbeat", [Need(Res.GROUP, SHARE_GROUP, Op.READ, GROUP_DENIED)],
        lambda w: share_heartbeat_request(-1, None), label="ShareGroupHeartbeat(leave)"),
    Row("ShareGroupDescribe", [Need(Res.GROUP, SHARE_GROUP, Op.DESCRIBE, GROUP_DENIED)],
        lambda w: req("ShareGroupDescribe", 1, "ShareGroupDescribeRequest", group_ids=(SHARE_GROUP,),
                      include_authorized_operations=False),
        leaked=lambda r: any(g.members or g.group_epoch for g in r.groups)),
    Row("ShareFetch", [Need(Res.GROUP, SHARE_GROUP, Op.READ, GROUP_DENIED),
                       Need(Res.TOPIC, TOPIC, Op.READ, TOPIC_DENIED)],
        lambda w: share_fetch_request(w, 0), codes=_refusals,
        leaked=lambda r: any(p.records or p.acquired_records for t in r.responses for p in t.partitions)),
    Row("ShareAcknowledge", [Need(Res.GROUP, SHARE_GROUP, Op.READ, GROUP_DENIED),
                             Need(Res.TOPIC, TOPIC, Op.READ, TOPIC_DENIED)],
        lambda w: share_acknowledge_request(w), codes=_refusals),
    Row("ShareAcknowledge", [Need(Res.GROUP, SHARE_TXN_GROUP, Op.READ, GROUP_DENIED),
                             Need(Res.TOPIC, TOPIC, Op.READ, TOPIC_DENIED),
                             Need(Res.TRANSACTIONAL_ID, SHARE_TXN, Op.WRITE, TXN_DENIED)],
        share_acknowledge_in_transaction_request, setup=share_transaction_setup, codes=_refusals,
        label="ShareAcknowledge(in a transaction)"),
    Row("DescribeShareGroupOffsets", [Need(Res.GROUP, SHARE_GROUP, Op.DESCRIBE, GROUP_DENIED)],
        lambda w: req("DescribeShareGroupOffsets", 1, "DescribeShareGroupOffsetsRequest", groups=(
            req("DescribeShareGroupOffsets", 1, "DescribeShareGroupOffsetsRequestGroup", group_id=SHARE_GROUP,
                topics=None),)),
        setup=World.share_group, leaked=lambda r: any(g.topics for g in r.groups)),
    Row("AlterShareGroupOffsets", [Need(Res.GROUP, SHARE_GROUP, Op.READ, GROUP_DENIED),
                                   Need(Res.TOPIC, TOPIC, Op.READ, TOPIC_DENIED)],
        lambda w: req("AlterShareGroupOffsets", 0, "AlterShareGroupOffsetsRequest", group_id=SHARE_GROUP, topics=(
            req("AlterShareGroupOffsets", 0, "AlterShareGroupOffsetsRequestTopic", topic_name=TOPIC, partitions=(
                req("AlterShareGroupOffsets", 0, "AlterShareGroupOffsetsRequestPartition", partition_index=i32(0),
                    start_offset=i64(1)),)),)),
        setup=World.share_group, codes=_refusals),
    *[Row(api, [Need(Res.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION, CLUSTER_DENIED)],
          lambda w, api=api: share_state_request(w, api), codes=_refusals)  # type: ignore[misc]
      for api in ("InitializeShareGroupState", "ReadShareGroupState", "WriteShareGroupState",
                  "DeleteShareGroupState", "ReadShareGroupStateSummary")],
    Row("DeleteShareGroupOffsets", [Need(Res.GROUP, SHARE_GROUP, Op.DELETE, GROUP_DENIED),
                                    Need(Res.TOPIC, TOPIC, Op.READ, TOPIC_DENIED)],
        lambda w: req("DeleteShareGroupOffsets", 0, "DeleteShareGroupOffsetsRequest", group_id=SHARE_GROUP, topics=(
            req("DeleteShareGroupOffsets", 0, "DeleteShareGroupOffsetsRequestTopic", topic_name=TOPIC),)),
        setup=World.share_group, codes=_refusals),
]

# Served APIs with no row here, and why.
ELSEWHERE = {
    "ApiVersions": "no check (admitted before authentication)",
    "SaslHandshake": "the authentication itself (test_security)",
    "SaslAuthenticate": "the authentication itself (test_security)",
}


STORED = ("acls.json", "scram-credentials.json", "topics.json",  # ACLs, credentials, topic configs
          "dynamic-configs.json")  # broker and group configs, client quotas


def _digest(sb: SecuredBroker) -> str:
    """Every log byte and what the broker keeps outside logs (ACLs, SCRAM credentials, configs)."""
    return sb.log_digest() + "".join(
        hashlib.sha256(p.read_bytes()).hexdigest() for p in (sb.data / name for name in STORED) if p.exists())


def _quiet_digest(w: World) -> str:
    """_digest once no transaction is between its EndTxn and COMPLETE_* (a previous row's markers
    are written after the answer) and it stops changing."""
    pending = req("ListTransactions", 0, "ListTransactionsRequest", state_filters=("PrepareCommit", "PrepareAbort"),
                  producer_id_filters=())
    wait_until(lambda: not w.admin.call(pending).transaction_states, "earlier rows' transactions to complete")
    sb = w.sb
    last = _digest(sb)
    for _ in range(50):
        time.sleep(0.3)
        now = _digest(sb)
        if now == last:
            return now
        last = now
    raise AssertionError("the broker's logs never went quiet")


def _acl(principal: str, need: Need) -> Any:
    return req("CreateAcls", 3, "AclCreation", resource_type=i8(int(need.resource)), resource_name=need.name,
               resource_pattern_type=i8(3), principal=principal, host="*", operation=i8(int(need.operation)),
               permission_type=i8(3))


def acl_filter(principal: str) -> Any:
    """Every ACL of ``principal``."""
    return req("DeleteAcls", 3, "DeleteAclsFilter", resource_type_filter=i8(1), resource_name_filter=None,
               pattern_type_filter=i8(1), principal_filter=principal, host_filter=None, operation=i8(1),
               permission_type=i8(1))


def hold(w: World, needs: list[Need]) -> None:
    """bob holds exactly ``needs``: every other ACL of his is deleted first."""
    deleted = w.admin.call(req("DeleteAcls", 3, "DeleteAclsRequest", filters=(acl_filter(BOB),)))
    assert set(error_codes(deleted)) <= {0}
    w.create_acls(BOB, needs)


def _login(sb: SecuredBroker, user: str) -> RawClient:
    raw = sb.raw("SASL_PLAINTEXT")
    assert scram_login(raw, user, USERS[user]).error_code == 0
    return raw


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    sb = SecuredBroker(tmp_path_factory.mktemp("matrix"))
    b = sb.broker.start()
    w = World(sb, _login(sb, "admin"), _login(sb, "bob"))
    for topic in (TOPIC, DEL_TOPIC):
        assert create_topic(w.admin, topic) == 0
        for _ in range(100):
            if produce(w.admin, topic, 0, simple_batch([b"r0", b"r1", b"r2"]))[0] == 0:
                break
            time.sleep(0.1)
    yield w
    w.admin.close()
    w.bob.close()
    if b.alive():
        b.stop()


@pytest.mark.parametrize("row", ROWS, ids=[r.label or r.api for r in ROWS])
def test_each_missing_permission_gets_kafkas_code_and_nothing_else_then_the_acls_let_it_through(
        world: World, row: Row) -> None:
    row.setup(world)
    for missing in row.needs:
        hold(world, [n for n in row.needs if n is not missing])
        before = _quiet_digest(world)
        earliest = list_offset(world.admin, DEL_TOPIC, 0, EARLIEST)
        answer = world.bob.call(row.request(world))
        assert set(row.codes(answer)) == {missing.code}, f"{row.api} without {missing}: {answer}"
        assert not row.leaked(answer), f"{row.api} refused but answered data: {answer}"
        assert _digest(world.sb) == before, f"{row.api} refused but something stored changed"
        assert list_offset(world.admin, DEL_TOPIC, 0, EARLIEST) == earliest
    hold(world, row.needs)
    answer = world.bob.call(row.request(world))
    assert set(row.codes(answer)) <= row.ok, f"{row.api} with {row.needs}: {answer}"
    hold(world, [])


def test_every_served_api_is_in_the_matrix_or_named_with_where_it_is_tested() -> None:
    served = {spec.name for spec in REGISTRY.values()}
    rows = {r.api for r in ROWS}
    assert not rows & set(ELSEWHERE)
    assert served == rows | set(ELSEWHERE)


def test_each_row_needs_what_docs_security_md_says_the_api_checks() -> None:
    """The rows' permissions are those of docs/security.md's table (one source of truth)."""
    doc = (Path(__file__).parents[2] / "docs" / "security.md").read_text()
    documented = dict(re.findall(r"^\| (\w+) \| (.*) \|$", doc, re.MULTILINE))
    for row in ROWS:
        for need in row.needs:
            assert re.search(rf"\b{need.operation.name}\b", documented[row.api]), (row.api, need)

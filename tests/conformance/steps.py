"""Request steps shared by the sessions: each builds a kio request at the version both brokers
speak (or the one asked for), sends it through the session's Target and returns the answer, which
the Target records unless the step is set-up (``record=False``)."""

from __future__ import annotations

from typing import Any

from conformance.session import Target, i8, i16, i32, i64, ms
from eoslog.protocol.messages import build
from eoslog.records import build_batch

PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH = 0, 1, 2, 3, 8, 9
FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 10, 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, CREATE_TOPICS, DELETE_RECORDS, INIT_PRODUCER_ID = 15, 16, 19, 21, 22
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
DESCRIBE_CONFIGS, OFFSET_DELETE, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 32, 47, 61, 65, 66
CONSUMER_GROUP_HEARTBEAT = 68

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
TS = 1_700_000_000_000  # record timestamps are fixed: both brokers get the same bytes


def batch(values: list[bytes | None], *, ts: int = TS, pid: int = -1, epoch: int = -1, seq: int = -1,
          txn: bool = False, keys: list[bytes | None] | None = None,
          headers: tuple[tuple[str, bytes | None], ...] = (), timestamps: list[int] | None = None) -> bytes:
    keys = keys or [None] * len(values)
    return build_batch([(k, v, headers) for k, v in zip(keys, values, strict=True)], timestamp=ts,
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=txn,
                       timestamps=timestamps)


def call(t: Target, api: int, cls: str, *, version: int | None = None, label: str | None = None,
         record: bool = True, conn: str = "main", **fields: Any) -> Any:
    v = t.v(api) if version is None else version
    req = build(getattr(t.types(api, v), cls), **fields)
    return t.call(req, label, conn) if record else t.quiet_call(req, conn)


def metadata(t: Target, topics: list[str] | None, *, record: bool = True, version: int | None = None) -> Any:
    v = t.v(METADATA) if version is None else version
    m = t.types(METADATA, v)
    wanted = None if topics is None else tuple(build(m.MetadataRequestTopic, name=x, topic_id=None) for x in topics)
    return call(t, METADATA, "MetadataRequest", version=v, record=record, topics=wanted,
                allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False)


def wait_for_leaders(t: Target, topic: str, partitions: int) -> None:
    def leaders() -> int:
        resp = metadata(t, [topic], record=False)
        return sum(1 for x in resp.topics for p in x.partitions if x.name == topic
                   and int(p.error_code) == 0 and int(p.leader_id) >= 0)
    t.until(f"leaders of {topic}", leaders, lambda n: n == partitions)


def create_topic(t: Target, name: str, partitions: int = 1, configs: dict[str, str] | None = None,
                 *, record: bool = False) -> Any:
    """CreateTopics, then wait until the broker serves every partition (Kafka's brokers learn of
    a new topic from the controller a moment after CreateTopics answers)."""
    v = t.v(CREATE_TOPICS)
    m = t.types(CREATE_TOPICS, v)
    topic = build(m.CreatableTopic, name=name, num_partitions=i32(partitions), replication_factor=i16(1),
                  assignments=(), configs=tuple(build(m.CreatableTopicConfig, name=k, value=x)
                                                for k, x in (configs or {}).items()))
    resp = call(t, CREATE_TOPICS, "CreateTopicsRequest", version=v, record=record, label=f"create {name}",
                topics=(topic,), timeout=ms(10000), validate_only=False)
    if int(resp.topics[0].error_code) == 0:
        wait_for_leaders(t, name, partitions)
        for p in range(partitions):  # the leader's replica manager hosts it (metadata comes first)
            t.until(f"{name}-{p} hosted", lambda p=p: int(list_offsets(
                t, name, p, LATEST, record=False).topics[0].partitions[0].error_code), lambda e: e == 0)
    return resp


def produce(t: Target, topic: str, partition: int, records: bytes | None, *, acks: int = -1,
            txn_id: str | None = None, version: int | None = None, label: str | None = None,
            conn: str = "main") -> Any:
    v = t.v(PRODUCE) if version is None else version
    m = t.types(PRODUCE, v)
    req = build(m.ProduceRequest, transactional_id=txn_id, acks=i16(acks), timeout=ms(10000),
                topic_data=(build(m.TopicProduceData, name=topic, partition_data=(
                    build(m.PartitionProduceData, index=i32(partition), records=records),)),))
    if acks == 0:
        t.send_only(req, conn)
        return None
    return t.call(req, label, conn)


def fetch(t: Target, topic: str, partition: int, offset: int, *, isolation: int = READ_UNCOMMITTED,
          max_bytes: int = 1 << 20, partition_max_bytes: int | None = None, max_wait_ms: int = 0,
          version: int | None = None, label: str | None = None, record: bool = True,
          conn: str = "main") -> Any:
    v = t.v(FETCH) if version is None else version
    m = t.types(FETCH, v)
    part = build(m.FetchPartition, partition=i32(partition), current_leader_epoch=i32(-1),
                 fetch_offset=i64(offset), last_fetched_epoch=i32(-1), log_start_offset=i64(-1),
                 partition_max_bytes=i32(partition_max_bytes or max_bytes))
    req = build(m.FetchRequest, cluster_id=None, replica_id=i32(-1), max_wait=ms(max_wait_ms),
                min_bytes=i32(1), max_bytes=i32(max_bytes), isolation_level=i8(isolation),
                session_id=i32(0), session_epoch=i32(-1),
                topics=(build(m.FetchTopic, topic=topic, topic_id=None, partitions=(part,)),),
                forgotten_topics_data=(), rack_id="")
    return t.call(req, label, conn) if record else t.quiet_call(req, conn)


def list_offsets(t: Target, topic: str, partition: int, timestamp: int, *,
                 isolation: int = READ_UNCOMMITTED, version: int | None = None,
                 label: str | None = None, record: bool = True) -> Any:
    v = t.v(LIST_OFFSETS) if version is None else version
    m = t.types(LIST_OFFSETS, v)
    part = build(m.ListOffsetsPartition, partition_index=i32(partition), current_leader_epoch=i32(-1),
                 timestamp=i64(timestamp), max_num_offsets=i32(1))
    return call(t, LIST_OFFSETS, "ListOffsetsRequest", version=v, label=label, record=record, replica_id=i32(-1),
                isolation_level=i8(isolation), timeout=ms(10000),
                topics=(build(m.ListOffsetsTopic, name=topic, partitions=(part,)),))


def stable(t: Target, topic: str, partition: int = 0) -> None:
    """Wait until the partition's last stable offset reaches its high watermark (transaction
    markers are written after EndTxn answers, at each broker's own pace)."""
    def lso_hw() -> tuple[int, int]:
        return tuple(int(list_offsets(t, topic, partition, LATEST, isolation=i, record=False)
                         .topics[0].partitions[0].offset) for i in (READ_COMMITTED, READ_UNCOMMITTED))
    t.until(f"a stable {topic}-{partition}", lso_hw, lambda x: x[0] == x[1])


# -- transactions -------------------------------------------------------------------------

def find_coordinator(t: Target, key: str, key_type: int = 1) -> Any:
    """FindCoordinator, retried quietly while the coordinator loads; the final answer recorded."""
    v = t.v(FIND_COORDINATOR)
    m = t.types(FIND_COORDINATOR, v)
    req = build(m.FindCoordinatorRequest, key=key, key_type=i8(key_type), coordinator_keys=(key,))
    t.until(f"a coordinator for {key}", lambda: t.quiet_call(req),
            lambda r: all(int(c.error_code) == 0 for c in getattr(r, "coordinators", [r])))
    return t.call(req, f"FindCoordinator {key}")


def init_txn(t: Target, txn_id: str | None, *, timeout_ms: int = 60000, pid: int = -1, epoch: int = -1,
             version: int | None = None, label: str | None = None, record: bool = True) -> tuple[int, int, Any]:
    resp = call(t, INIT_PRODUCER_ID, "InitProducerIdRequest", version=version, label=label, record=record,
                transactional_id=txn_id, transaction_timeout=ms(timeout_ms), producer_id=i64(pid),
                producer_epoch=i16(epoch))
    return int(resp.producer_id), int(resp.producer_epoch), resp


def add_partitions(t: Target, txn_id: str, pid: int, epoch: int, topic: str, partitions: list[int], *,
                   version: int = 3, label: str | None = None) -> Any:
    """AddPartitionsToTxn as clients send it (v3 and below; v4+ is the brokers' batched form)."""
    m = t.types(ADD_PARTITIONS_TO_TXN, version)
    return call(t, ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxnRequest", version=version, label=label,
                v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=i64(pid),
                v3_and_below_producer_epoch=i16(epoch),
                v3_and_below_topics=(build(m.AddPartitionsToTxnTopic, name=topic,
                                           partitions=tuple(i32(p) for p in partitions)),))


def add_offsets(t: Target, txn_id: str, pid: int, epoch: int, group: str, *, version: int | None = None,
                label: str | None = None) -> Any:
    return call(t, ADD_OFFSETS_TO_TXN, "AddOffsetsToTxnRequest", version=version, label=label,
                transactional_id=txn_id, producer_id=i64(pid), producer_epoch=i16(epoch), group_id=group)


def end_txn(t: Target, txn_id: str, pid: int, epoch: int, commit: bool, *, version: int | None = None,
            label: str | None = None) -> Any:
    return call(t, END_TXN, "EndTxnRequest", version=version, label=label, transactional_id=txn_id,
                producer_id=i64(pid), producer_epoch=i16(epoch), committed=commit)


def txn_offset_commit(t: Target, txn_id: str, group: str, pid: int, epoch: int, topic: str, partition: int,
                      offset: int, *, version: int | None = None, label: str | None = None) -> Any:
    v = t.v(TXN_OFFSET_COMMIT) if version is None else version
    m = t.types(TXN_OFFSET_COMMIT, v)
    part = build(m.TxnOffsetCommitRequestPartition, partition_index=i32(partition),
                 committed_offset=i64(offset), committed_leader_epoch=i32(-1), committed_metadata="")
    return call(t, TXN_OFFSET_COMMIT, "TxnOffsetCommitRequest", version=v, label=label,
                transactional_id=txn_id, group_id=group, producer_id=i64(pid), producer_epoch=i16(epoch),
                generation_id=i32(-1), member_id="", group_instance_id=None,
                topics=(build(m.TxnOffsetCommitRequestTopic, name=topic, partitions=(part,)),))


def describe_txn(t: Target, *txn_ids: str, label: str | None = None, record: bool = True) -> Any:
    return call(t, DESCRIBE_TRANSACTIONS, "DescribeTransactionsRequest", label=label, record=record,
                transactional_ids=txn_ids)


def txn_state(t: Target, txn_id: str) -> str:
    return str(describe_txn(t, txn_id, record=False).transaction_states[0].transaction_state)


def settle(t: Target, txn_id: str) -> None:
    """Wait until the coordinator has written every marker (Complete*/Empty): markers go out
    after EndTxn is answered, at each broker's own pace."""
    t.until(f"{txn_id} complete", lambda: txn_state(t, txn_id),
            lambda s: s in ("CompleteCommit", "CompleteAbort", "Empty"))


def list_txns(t: Target, *, states: tuple[str, ...] = (), pids: tuple[int, ...] = (),
              label: str | None = None) -> Any:
    return call(t, LIST_TRANSACTIONS, "ListTransactionsRequest", label=label, state_filters=states,
                producer_id_filters=tuple(i64(p) for p in pids), duration_filter=i64(-1))


def describe_producers(t: Target, topic: str, partitions: list[int], *, label: str | None = None) -> Any:
    m = t.types(DESCRIBE_PRODUCERS, t.v(DESCRIBE_PRODUCERS))
    return call(t, DESCRIBE_PRODUCERS, "DescribeProducersRequest", label=label,
                topics=(build(m.TopicRequest, name=topic, partition_indexes=tuple(i32(p) for p in partitions)),))


def offset_commit(t: Target, group: str, topic: str, partition: int, offset: int, *, generation: int = -1,
                  member: str = "", metadata: str = "", version: int | None = None, label: str | None = None) -> Any:
    """OffsetCommit of one partition; ``generation`` is a classic group's generation or (v9+) a consumer
    group member's epoch."""
    v = t.v(OFFSET_COMMIT) if version is None else version
    m = t.types(OFFSET_COMMIT, v)
    part = build(m.OffsetCommitRequestPartition, partition_index=i32(partition), committed_offset=i64(offset),
                 committed_leader_epoch=i32(-1), committed_metadata=metadata, commit_timestamp=i64(-1))
    return call(t, OFFSET_COMMIT, "OffsetCommitRequest", version=v, label=label, group_id=group,
                generation_id_or_member_epoch=i32(generation), generation_id=i32(generation), member_id=member,
                group_instance_id=None, retention_time=i64(-1),
                topics=(build(m.OffsetCommitRequestTopic, name=topic, partitions=(part,)),))


def offset_fetch(t: Target, group: str, topic: str, partitions: list[int], *, require_stable: bool,
                 member: str | None = None, member_epoch: int = -1, version: int | None = None,
                 label: str | None = None) -> Any:
    v = t.v(OFFSET_FETCH) if version is None else version
    m = t.types(OFFSET_FETCH, v)
    topics = (build(m.OffsetFetchRequestTopics, name=topic, partition_indexes=tuple(i32(p) for p in partitions)),)
    return call(t, OFFSET_FETCH, "OffsetFetchRequest", version=v, label=label, require_stable=require_stable,
                groups=(build(m.OffsetFetchRequestGroup, group_id=group, member_id=member,
                              member_epoch=i32(member_epoch), topics=topics),))

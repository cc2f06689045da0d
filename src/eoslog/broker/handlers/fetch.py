"""Fetch (key 1), v4-v12: the request becomes one ``ReplicaManager.fetch_messages`` call
(which long-polls, woken by appends), its results the response.

Byte limits follow Kafka (KIP-74): ``max_bytes`` (capped by ``fetch.max.bytes``) caps the
response and ``partition_max_bytes`` each partition, except that the first batch of the
first partition with data is returned whole. Fetch sessions (KIP-227) are declined: every
response carries session id 0, which tells clients to keep sending full fetch requests.
read_committed (isolation level 1) reads only below the last stable offset, with the
aborted transactions of the range read. Fetch v4-v9 clients cannot read zstd (KIP-110): a
partition whose data is zstd answers them UNSUPPORTED_COMPRESSION_TYPE instead, as Kafka's
KafkaApis does after the read. A consumer's ``consumer_byte_rate`` caps what one fetch may
take; an answer that goes over it is sent empty, with the throttle time (the client fetches
the same offsets again once it has waited).

From v11 (KIP-392) a consumer names its rack: with ``replica.selector.class`` set, the leader
may answer a partition empty with the ``preferred_read_replica`` to fetch it from, and a
follower serves such a consumer (``replica.selector``).

The records are slices of the segment files (``FileRecords``) that the response carries
unread: a plaintext connection sends them with ``sendfile`` (``broker/connection.py``).
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import NO_THROTTLE, ApiSpec, build, response_types
from eoslog.errors import Errors
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import ErrorCode, error_code
from eoslog.quotas.client import QuotaType
from eoslog.records import CompressionType, iter_batch_headers
from eoslog.replica import FetchedRecords, FetchParams, FetchPartition, IsolationLevel
from eoslog.security.acls import AclOperation, ResourceType
from eoslog.types import TopicPartition

if TYPE_CHECKING:
    from eoslog.protocol.requests import FetchRequest
    from eoslog.protocol.responses import FetchResponse

INVALID_SESSION_ID = 0
ZSTD_MIN_VERSION = 10
_COMPRESSION_MASK = 0x07


def _has_zstd(records: bytes) -> bool:
    return any(
        h.attributes & _COMPRESSION_MASK == CompressionType.ZSTD
        for _, h in iter_batch_headers(records)
    )


FOLLOWER_FETCH_MIN_VERSION = 11


def _partition_data(module: ModuleType, index: int, r: FetchedRecords, version: int, read_committed: bool) -> Any:
    records, error = r.records, r.error
    if version < ZSTD_MIN_VERSION and records:
        records = r.data  # its batch headers are looked at
        if _has_zstd(records):
            error, records = Errors.UNSUPPORTED_COMPRESSION_TYPE, b""
    if error is Errors.NONE:
        hw, lso, log_start = r.high_watermark, r.last_stable_offset, r.log_start_offset
        aborted = tuple(
            build(module.AbortedTransaction, producer_id=a.producer_id, first_offset=a.first_offset)
            for a in r.aborted or ()
        ) if read_committed else None
    else:
        # Kafka's error answers carry no offsets; its unknown-topic answer is built apart,
        # with an empty (not null) aborted-transaction list.
        hw = lso = log_start = -1
        aborted = () if error is Errors.UNKNOWN_TOPIC_OR_PARTITION else None
    return build(
        module.PartitionData,
        partition_index=index, error_code=error_code(error), high_watermark=hw,
        last_stable_offset=lso, log_start_offset=log_start, aborted_transactions=aborted,
        preferred_read_replica=r.preferred_read_replica, records=records,
    )


async def handle_fetch(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    module = response_types(ctx)
    session_id = int(getattr(request, "session_id", 0))
    if session_id != INVALID_SESSION_ID:
        # We never hand out session ids, so an incremental fetch cannot be ours.
        return cast("FetchResponse", build(
            module.FetchResponse, throttle_time=NO_THROTTLE,
            error_code=ErrorCode.fetch_session_id_not_found, session_id=0, responses=(),
        ))
    replica_id = int(getattr(request, "replica_id", -1))
    quotas = ctx.state.quota_admin.quotas
    # consumer_byte_rate (followers have their own throttles): at most what the quota lets
    # through in its windows, and an answer over the quota goes back empty (Kafka's KafkaApis).
    quota_bytes = (quotas.max_value_in_window(QuotaType.FETCH, ctx.principal.name, ctx.client_id or "")
                   if replica_id < 0 else math.inf)
    params = FetchParams(
        replica_id=replica_id,
        max_wait_ms=int(request.max_wait.total_seconds() * 1000),
        min_bytes=int(request.min_bytes),
        max_bytes=int(min(int(request.max_bytes), int(ctx.state.config["fetch.max.bytes"]), quota_bytes)),
        isolation=IsolationLevel(int(request.isolation_level)),
        # KIP-392: from v11 a consumer may be sent to (and read from) a follower.
        client_rack=str(getattr(request, "rack_id", "") or "") if ctx.api_version >= FOLLOWER_FETCH_MIN_VERSION
        else None,
    )
    # Kafka's KafkaApis: a follower needs CLUSTER_ACTION on the cluster, a consumer READ on
    # each topic; a refused topic's partitions answer TOPIC_AUTHORIZATION_FAILED, unread.
    follower_refused = params.replica_id >= 0 and not ctx.allowed_on_cluster(AclOperation.CLUSTER_ACTION)
    readable = {t.topic for t in request.topics
                if not follower_refused and (params.replica_id >= 0
                                             or ctx.allowed(AclOperation.READ, ResourceType.TOPIC, t.topic))}
    wanted = [
        FetchPartition(TopicPartition(t.topic, int(p.partition)), int(p.fetch_offset), int(p.partition_max_bytes),
                       int(getattr(p, "current_leader_epoch", -1)))
        for t in request.topics if t.topic in readable for p in t.partitions
    ]
    read_committed = params.isolation is IsolationLevel.READ_COMMITTED
    fetched = await ctx.state.replicas.fetch_messages(params, wanted) if wanted else []
    if replica_id < 0 and quotas.enabled(QuotaType.FETCH):
        size = sum(len(r.records) for r in fetched)
        if ctx.record_quota(QuotaType.FETCH, size) > 0:
            quotas.unrecord(QuotaType.FETCH, ctx.principal.name, ctx.client_id or "", size)  # not sent
            return cast("FetchResponse", build(
                module.FetchResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                session_id=INVALID_SESSION_ID, responses=()))
    results = iter(fetched)
    refused = FetchedRecords(Errors.TOPIC_AUTHORIZATION_FAILED)
    topics = tuple(
        build(module.FetchableTopicResponse, topic=t.topic, partitions=tuple(
            _partition_data(module, int(p.partition), next(results) if t.topic in readable else refused,
                            ctx.api_version, read_committed)
            for p in t.partitions
        ))
        for t in request.topics
    )
    return cast("FetchResponse", build(
        module.FetchResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
        session_id=INVALID_SESSION_ID, responses=topics,
    ))


# v13+ addresses topics by id (KIP-516); kept out until the whole id path exists.
APIS = [ApiSpec(ApiKey.FETCH, "Fetch", 4, 12, handle_fetch)]

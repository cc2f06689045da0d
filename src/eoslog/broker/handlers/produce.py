"""Produce (key 0), v3+ (record batch v2 only): the request becomes one
``ReplicaManager.append_records`` call, its results the response.

The replica layer checks acks, verifies transactional batches (KIP-890), appends with the
client's checks and holds acks=all until the in-sync replicas have the records (once the
appends are done the request lets its connection go on meanwhile: ``ctx.detach``); this module
only adds what depends on the request's version (zstd needs v7+) and answers, counting the
request's bytes against the client's ``producer_byte_rate`` (a throttle goes in the answer). acks=0
requests get no response at all, as in Kafka; when such a request fails, the connection is
closed instead, which is the only way Kafka has to tell the producer (it then refreshes
metadata and reconnects).
"""

from __future__ import annotations

import datetime
import logging
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import NO_THROTTLE, ApiSpec, CloseConnection, build, response_types
from eoslog.errors import Errors
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import ErrorCode, error_code
from eoslog.quotas.client import QuotaType
from eoslog.records import BATCH_HEADER_SIZE, CompressionType, read_batch_header
from eoslog.replica import ProduceResult
from eoslog.replica.verification import produce_request_operation
from eoslog.security.acls import AclOperation, ResourceType
from eoslog.types import ADMIN_CLIENT_ID, TopicPartition

if TYPE_CHECKING:
    from eoslog.protocol.requests import ProduceRequest
    from eoslog.protocol.responses import ProduceResponse

log = logging.getLogger(__name__)

_UTC = datetime.UTC
# KIP-110: zstd batches need Produce v7+ (older clients could not read them back).
ZSTD_MIN_VERSION = 7
_COMPRESSION_MASK = 0x07


def _is_zstd(records: bytes) -> bool:
    if len(records) < BATCH_HEADER_SIZE:
        return False
    return read_batch_header(records).attributes & _COMPRESSION_MASK == CompressionType.ZSTD


def _partition_response(module: ModuleType, index: int, r: ProduceResult) -> Any:
    return build(
        module.PartitionProduceResponse,
        index=index, error_code=error_code(r.error), base_offset=r.base_offset,
        log_append_time=(
            datetime.datetime.fromtimestamp(r.log_append_time / 1000, _UTC) if r.log_append_time >= 0 else None
        ),
        log_start_offset=r.log_start_offset, error_message=r.message,
        record_errors=tuple(build(module.BatchIndexAndErrorMessage, batch_index=i, batch_index_error_message=m)
                            for i, m in r.record_errors),
    )


async def handle_produce(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
    module = response_types(ctx)
    if ctx.state.quota_admin.quotas.enabled(QuotaType.PRODUCE):
        # Kafka counts the whole request once it is answered, while the channel is muted;
        # here the next requests may be handled while this one waits for its acks, so it is
        # counted (and the connection muted) on arrival.
        ctx.record_quota(QuotaType.PRODUCE, ctx.request_size)
    replicas = ctx.state.replicas
    acks = int(request.acks)
    entries: dict[TopicPartition, bytes] = {}
    refused: dict[TopicPartition, ProduceResult] = {}
    order: list[tuple[str, list[tuple[int, TopicPartition]]]] = []
    # Kafka's KafkaApis: a transactional request needs WRITE on its transactional id (else
    # every partition is refused), each topic WRITE on the topic.
    txn_refused = request.transactional_id is not None and not ctx.allowed(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
    for topic_data in request.topic_data:
        indexes = []
        topic_refused = txn_refused or not ctx.allowed(AclOperation.WRITE, ResourceType.TOPIC, topic_data.name)
        for pdata in topic_data.partition_data:
            tp = TopicPartition(topic_data.name, int(pdata.index))
            indexes.append((tp.partition, tp))
            records = pdata.records or b""
            if topic_refused:
                refused[tp] = ProduceResult(Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED if txn_refused
                                            else Errors.TOPIC_AUTHORIZATION_FAILED)
            elif (ctx.api_version < ZSTD_MIN_VERSION and _is_zstd(records)
                    and replicas.get_partition(tp) is not None):
                refused[tp] = ProduceResult(Errors.UNSUPPORTED_COMPRESSION_TYPE)
            else:
                entries[tp] = records
        order.append((topic_data.name, indexes))
    results = await replicas.append_records(
        entries, required_acks=acks, timeout_ms=int(request.timeout.total_seconds() * 1000),
        transactional_id=request.transactional_id, operation=produce_request_operation(ctx.api_version),
        internal_topics_allowed=ctx.client_id == ADMIN_CLIENT_ID, on_appended=ctx.detach,
    )
    results.update(refused)
    topics = []
    for name, indexes in order:
        partitions = []
        for index, tp in indexes:
            r = results[tp]
            if r.message is not None:
                log.info("rejected produce to %s-%d from %s: %s", name, index, ctx.client_id, r.message)
            partitions.append(_partition_response(module, index, r))
        topics.append(build(module.TopicProduceResponse, name=name, partition_responses=tuple(partitions)))
    if acks == 0:
        failed = [
            (t.name, p.index, p.error_code) for t in topics for p in t.partition_responses
            if p.error_code != ErrorCode.none
        ]
        if failed:
            raise CloseConnection(f"acks=0 produce failed, closing as Kafka does: {failed}")
        return None
    return cast("ProduceResponse", build(module.ProduceResponse, responses=tuple(topics), throttle_time=NO_THROTTLE))


# v12+ signals KIP-890 part 2 (implicit AddPartitionsToTxn); v13 switches to topic ids.
# Produce v0-v2 (message formats 0 and 1) are not served, but ApiVersions claims them
# as Kafka 4.0 does (KAFKA-18659): older librdkafka (librdkafka#4956; kcat's 2.0.2)
# compresses with gzip, snappy or lz4 only when the broker's Produce range includes v0,
# and otherwise silently sends uncompressed batches. Clients pick the highest common version, so none sends v0-v2;
# one that did would have its connection closed, as by Kafka.
APIS = [ApiSpec(ApiKey.PRODUCE, "Produce", 3, 12, handle_produce, advertised_min_version=0)]

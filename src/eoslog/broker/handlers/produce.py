"""Produce (key 0), v3+ (record batch v2 only).

Validation and offset assignment live in the partition log; this module maps its
results and errors onto the response. acks=0 requests get no response at all, as in
Kafka; when such a request fails, the connection is closed instead, which is the
only way Kafka has to tell the producer (it then refreshes metadata and reconnects).
With one node, acks=1 and acks=-1 both mean "appended to the leader's log", which is
also the whole ISR.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import NO_THROTTLE, ApiSpec, build, response_types
from eoslog.broker.handlers.transactions import verify_transactional_produce
from eoslog.protocol.errors import ErrorCode, error_code
from eoslog.records import (
    BATCH_HEADER_SIZE,
    CompressionType,
    InvalidRecordError,
    RecordValidationError,
    read_batch_header,
)
from eoslog.storage.producer_state import ProducerStateError

log = logging.getLogger(__name__)

_UTC = datetime.UTC
# KIP-110: zstd batches need Produce v7+ (older clients could not read them back).
ZSTD_MIN_VERSION = 7
_COMPRESSION_MASK = 0x07


_REFUSED_BEFORE_THE_LOG = frozenset(
    {ErrorCode.message_too_large, ErrorCode.record_list_too_large, ErrorCode.corrupt_message})


def _is_zstd(records: bytes) -> bool:
    if len(records) < BATCH_HEADER_SIZE:
        return False
    return read_batch_header(records).attributes & _COMPRESSION_MASK == CompressionType.ZSTD


def _partition_response(
    module: Any, index: int, code: ErrorCode, base_offset: int = -1,
    log_append_time: int = -1, log_start_offset: int = -1, message: str | None = None,
    record_errors: tuple[tuple[int, str], ...] = (),
) -> Any:
    return build(
        module.PartitionProduceResponse,
        index=index, error_code=code, base_offset=base_offset,
        log_append_time=(
            datetime.datetime.fromtimestamp(log_append_time / 1000, _UTC)
            if log_append_time >= 0 else None
        ),
        log_start_offset=log_start_offset, error_message=message,
        record_errors=tuple(build(module.BatchIndexAndErrorMessage, batch_index=i, batch_index_error_message=m)
                            for i, m in record_errors),
    )


async def handle_produce(ctx: RequestContext, request: Any) -> Any | None:
    module = response_types(ctx)
    state = ctx.state
    acks = int(request.acks)
    topics = []
    for topic_data in request.topic_data:
        name = topic_data.name
        partitions = []
        for pdata in topic_data.partition_data:
            index = int(pdata.index)
            if acks not in (0, 1, -1):
                partitions.append(_partition_response(module, index, ErrorCode.invalid_required_acks))
                continue
            plog = state.logs.get_log(name, index)
            if plog is None:
                partitions.append(
                    _partition_response(module, index, ErrorCode.unknown_topic_or_partition)
                )
                continue
            records = pdata.records or b""
            if ctx.api_version < ZSTD_MIN_VERSION and _is_zstd(records):
                partitions.append(
                    _partition_response(module, index, ErrorCode.unsupported_compression_type)
                )
                continue
            refused = verify_transactional_produce(ctx, request.transactional_id, plog, records)
            if refused is not None:
                log.info("rejected transactional produce to %s-%d from %s: %s", name, index,
                         ctx.client_id, refused[1])
                partitions.append(_partition_response(module, index, refused[0], message=refused[1]))
                continue
            try:
                # An empty record set is INVALID_RECORD (ProduceRequest.validateRecords).
                info = plog.append_as_leader(records)
            except (InvalidRecordError, ProducerStateError) as e:
                log.info("rejected produce to %s-%d from %s: %s", name, index, ctx.client_id, e)
                # Kafka answers append errors with the partition's log start offset: on
                # UNKNOWN_PRODUCER_ID clients compare it with their last acked offset to
                # tell retention (retry after an epoch bump) from data loss. Batches refused
                # before they reach the log (empty, too large, corrupt) get -1, as in Kafka's
                # KafkaApis and ReplicaManager.
                code = error_code(e.error)
                refused_early = code in _REFUSED_BEFORE_THE_LOG or not records
                partitions.append(_partition_response(
                    module, index, code, message=str(e),
                    log_start_offset=-1 if refused_early else plog.log_start_offset,
                    record_errors=tuple(e.record_errors) if isinstance(e, RecordValidationError) else (),
                ))
                continue
            if not info.duplicate:
                state.purgatory.notify((name, index))
            partitions.append(
                _partition_response(
                    module, index, ErrorCode.none, info.first_offset, info.log_append_time,
                    info.log_start_offset,
                )
            )
        topics.append(build(module.TopicProduceResponse, name=name, partition_responses=tuple(partitions)))
    if acks == 0:
        failed = [
            (t.name, p.index, p.error_code) for t in topics for p in t.partition_responses
            if p.error_code != ErrorCode.none
        ]
        if failed:
            from eoslog.broker.dispatcher import CloseConnection

            raise CloseConnection(f"acks=0 produce failed, closing as Kafka does: {failed}")
        return None
    return build(module.ProduceResponse, responses=tuple(topics), throttle_time=NO_THROTTLE)


# v12+ signals KIP-890 part 2 (implicit AddPartitionsToTxn); v13 switches to topic ids.
# Produce v0-v2 (message formats 0 and 1) are not served, but ApiVersions claims them
# as Kafka 4.0 does (KAFKA-18659): older librdkafka (librdkafka#4956; kcat's 2.0.2)
# compresses with gzip, snappy or lz4 only when the broker's Produce range includes v0,
# and otherwise silently sends uncompressed batches. Clients pick the highest common version, so none sends v0-v2;
# one that did would have its connection closed, as by Kafka.
APIS = [ApiSpec(0, "Produce", 3, 11, handle_produce, advertised_min_version=0)]

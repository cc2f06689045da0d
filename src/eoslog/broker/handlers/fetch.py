"""Fetch (key 1), v4-v12: long-poll reads woken by appends.

Byte limits follow Kafka (KIP-74): ``max_bytes`` caps the response and
``partition_max_bytes`` each partition, except that the first batch of the first
partition with data is returned whole even when it is larger, so consumers always
progress. Fetch sessions (KIP-227) are declined: every response carries session id 0,
which tells clients to keep sending full fetch requests.
read_committed (isolation level 1) reads only below the last stable offset.
Fetch v4-v9 clients cannot read zstd (KIP-110): a partition whose data is zstd
answers them UNSUPPORTED_COMPRESSION_TYPE instead, as Kafka does.
"""

from __future__ import annotations

import time
from typing import Any

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import NO_THROTTLE, ApiSpec, build, response_types
from eoslog.protocol.errors import ErrorCode
from eoslog.records import CompressionType, iter_batch_headers
from eoslog.storage import OffsetOutOfRange, PartitionLog

READ_COMMITTED = 1
INVALID_SESSION_ID = 0
FINAL_EPOCH = -1
ZSTD_MIN_VERSION = 10
_COMPRESSION_MASK = 0x07


def _has_zstd(records: bytes) -> bool:
    return any(
        h.attributes & _COMPRESSION_MASK == CompressionType.ZSTD
        for _, h in iter_batch_headers(records)
    )


def _aborted_in(module: Any, plog: PartitionLog, fetch_offset: int, records: bytes) -> tuple[Any, ...]:
    """The aborted transactions a read_committed consumer must filter out of ``records``:
    (producer id, first offset) of each one overlapping the fetched range."""
    end = fetch_offset
    for _, h in iter_batch_headers(records):
        end = h.next_offset
    return tuple(
        build(module.AbortedTransaction, producer_id=a.producer_id, first_offset=a.first_offset)
        for a in plog.aborted_transactions(fetch_offset, end)
    )


def _read_all(ctx: RequestContext, request: Any, module: Any) -> tuple[list[Any], int, bool]:
    """One pass over the requested partitions → (topic responses, bytes, any error)."""
    logs = ctx.state.logs
    read_committed = request.isolation_level == READ_COMMITTED
    remaining = min(int(request.max_bytes), int(ctx.state.config["fetch.max.bytes"]))
    total = 0
    errors = False
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            index = int(p.partition)
            plog = logs.get_log(topic.topic, index)
            code = ErrorCode.none
            records = b""
            aborted: tuple[Any, ...] | None = ()
            hw = lso = lso_start = -1
            if plog is None:
                code = ErrorCode.unknown_topic_or_partition
            else:
                hw, lso_start = plog.high_watermark, plog.log_start_offset
                lso = plog.last_stable_offset
                try:
                    info = plog.read(
                        int(p.fetch_offset),
                        min(int(p.partition_max_bytes), remaining),
                        upper_bound=lso if read_committed else None,
                        min_one=total == 0,
                    )
                    records = info.records
                    if ctx.api_version < ZSTD_MIN_VERSION and records and _has_zstd(records):
                        code, records = ErrorCode.unsupported_compression_type, b""
                    elif read_committed and records:
                        aborted = _aborted_in(module, plog, int(p.fetch_offset), records)
                except OffsetOutOfRange:
                    code = ErrorCode.offset_out_of_range
            if code != ErrorCode.none:
                errors = True
                # Kafka's error answers carry no offsets; its unknown-topic answer is built
                # apart, with an empty (not null) aborted-transaction list.
                hw = lso = lso_start = -1
                aborted = () if code == ErrorCode.unknown_topic_or_partition else None
            total += len(records)
            remaining = max(0, remaining - len(records))
            partitions.append(
                build(
                    module.PartitionData,
                    partition_index=index, error_code=code, high_watermark=hw,
                    last_stable_offset=lso, log_start_offset=lso_start,
                    aborted_transactions=aborted if read_committed or code != ErrorCode.none else None,
                    preferred_read_replica=-1, records=records,
                )
            )
        topics.append(build(module.FetchableTopicResponse, topic=topic.topic, partitions=tuple(partitions)))
    return topics, total, errors


async def handle_fetch(ctx: RequestContext, request: Any) -> Any:
    module = response_types(ctx)
    session_id = int(getattr(request, "session_id", 0))
    if session_id != INVALID_SESSION_ID:
        # We never hand out session ids, so an incremental fetch cannot be ours.
        return build(
            module.FetchResponse, throttle_time=NO_THROTTLE,
            error_code=ErrorCode.fetch_session_id_not_found, session_id=0, responses=(),
        )
    deadline = time.monotonic() + request.max_wait.total_seconds()
    min_bytes = max(1, int(request.min_bytes))
    wanted = [(t.topic, int(p.partition)) for t in request.topics for p in t.partitions]
    while True:
        topics, total, errors = _read_all(ctx, request, module)
        left = deadline - time.monotonic()
        if total >= min_bytes or errors or left <= 0 or not wanted:
            break
        await ctx.state.purgatory.wait(wanted, left)
    return build(
        module.FetchResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
        session_id=INVALID_SESSION_ID, responses=tuple(topics),
    )


# v13+ addresses topics by id (KIP-516); kept out until the whole id path exists.
APIS = [ApiSpec(1, "Fetch", 4, 12, handle_fetch)]

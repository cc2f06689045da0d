"""ListOffsets (key 2): earliest (-2), latest (-1), max timestamp (-3), or by timestamp."""

from __future__ import annotations

from typing import Any

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import NO_THROTTLE, ApiSpec, build, response_types
from eoslog.protocol.errors import ErrorCode
from eoslog.storage import PartitionLog

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
READ_COMMITTED = 1


def _max_timestamp(plog: PartitionLog) -> tuple[int, int]:
    """(timestamp, offset) of the first record carrying the log's largest timestamp.

    The log tracks the maximum per batch (its last offset, as Kafka's batch header
    does); since KAFKA-16310 Kafka answers with the record's own offset, so the batch
    is searched for the first record at that timestamp.
    """
    ts, offset = plog.max_timestamp()
    if ts < 0:
        return -1, -1
    found = plog.offset_for_timestamp(ts)
    return (ts, found[0]) if found is not None else (ts, offset)


async def handle_list_offsets(ctx: RequestContext, request: Any) -> Any:
    module = response_types(ctx)
    read_committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            plog = ctx.state.logs.get_log(topic.name, int(p.partition_index))
            code, ts, offset = ErrorCode.none, -1, -1
            target = int(p.timestamp)
            if plog is None:
                code = ErrorCode.unknown_topic_or_partition
            elif target == LATEST:
                offset = plog.last_stable_offset if read_committed else plog.high_watermark
            elif target == EARLIEST:
                offset = plog.log_start_offset
            elif target == MAX_TIMESTAMP:
                ts, offset = _max_timestamp(plog)
            elif target < 0:
                code = ErrorCode.invalid_request
            else:
                found = plog.offset_for_timestamp(target)
                if found is not None:
                    offset, ts = found
                    bound = plog.last_stable_offset if read_committed else plog.high_watermark
                    if offset >= bound:
                        offset, ts = -1, -1
            partitions.append(
                build(
                    module.ListOffsetsPartitionResponse,
                    partition_index=p.partition_index, error_code=code, timestamp=ts,
                    offset=offset,
                    # Kafka names no epoch when it found no offset (Optional.empty -> -1).
                    leader_epoch=plog.leader_epoch if plog is not None and code == ErrorCode.none
                    and offset >= 0 else -1,
                )
            )
        topics.append(build(module.ListOffsetsTopicResponse, name=topic.name, partitions=tuple(partitions)))
    return build(module.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


APIS = [ApiSpec(2, "ListOffsets", 1, 7, handle_list_offsets)]

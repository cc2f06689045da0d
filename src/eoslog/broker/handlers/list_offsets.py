"""ListOffsets (key 2): earliest (-2), latest (-1), max timestamp (-3), or by timestamp,
answered by the partition's leader (``ReplicaManager.fetch_offset_for_timestamp``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import NO_THROTTLE, ApiSpec, build, response_types
from eoslog.errors import KafkaError
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import ErrorCode, error_code
from eoslog.replica import IsolationLevel
from eoslog.types import TopicPartition

if TYPE_CHECKING:
    from eoslog.protocol.requests import ListOffsetsRequest
    from eoslog.protocol.responses import ListOffsetsResponse


async def handle_list_offsets(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    module = response_types(ctx)
    isolation = IsolationLevel(int(getattr(request, "isolation_level", 0)))
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            code, ts, offset, epoch = ErrorCode.none, -1, -1, -1
            try:
                found = ctx.state.replicas.fetch_offset_for_timestamp(
                    TopicPartition(topic.name, int(p.partition_index)), int(p.timestamp), isolation)
                # Kafka names no epoch when it found no offset (Optional.empty -> -1).
                ts, offset, epoch = found.timestamp, found.offset, found.leader_epoch if found.offset >= 0 else -1
            except KafkaError as e:
                code = error_code(e.error)
            partitions.append(
                build(
                    module.ListOffsetsPartitionResponse,
                    partition_index=p.partition_index, error_code=code, timestamp=ts,
                    offset=offset, leader_epoch=epoch,
                )
            )
        topics.append(build(module.ListOffsetsTopicResponse, name=topic.name, partitions=tuple(partitions)))
    return cast("ListOffsetsResponse", build(
        module.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics)))


APIS = [ApiSpec(ApiKey.LIST_OFFSETS, "ListOffsets", 1, 7, handle_list_offsets)]

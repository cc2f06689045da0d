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
from eoslog.security.acls import AclOperation, ResourceType
from eoslog.types import TopicPartition

if TYPE_CHECKING:
    from eoslog.protocol.requests import ListOffsetsRequest
    from eoslog.protocol.responses import ListOffsetsResponse


def _lookup(ctx: RequestContext, tp: TopicPartition, timestamp: int,
            isolation: IsolationLevel) -> tuple[ErrorCode, int, int, int]:
    try:
        found = ctx.state.replicas.fetch_offset_for_timestamp(tp, timestamp, isolation)
    except KafkaError as e:
        return error_code(e.error), -1, -1, -1
    # Kafka names no epoch when it found no offset (Optional.empty -> -1).
    return ErrorCode.none, found.timestamp, found.offset, found.leader_epoch if found.offset >= 0 else -1


async def handle_list_offsets(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    module = response_types(ctx)
    isolation = IsolationLevel(int(getattr(request, "isolation_level", 0)))
    # What was acknowledged before it was durable counts as written (ReplicaManager.acknowledged_visible).
    await ctx.state.replicas.acknowledged_visible(
        [TopicPartition(t.name, int(p.partition_index)) for t in request.topics for p in t.partitions])
    topics = []
    for topic in request.topics:
        described = ctx.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name)  # Kafka's check
        partitions = []
        for p in topic.partitions:
            code, ts, offset, epoch = (
                _lookup(ctx, TopicPartition(topic.name, int(p.partition_index)), int(p.timestamp), isolation)
                if described else (ErrorCode.topic_authorization_failed, -1, -1, -1))
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

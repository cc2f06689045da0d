"""DeleteRecords (key 21), v0-v2: move partitions' log start offsets forward (KIP-107).

Each partition is answered on its own, as Kafka's ReplicaManager.deleteRecords does:
the new low watermark (the log start offset) or an error with low watermark -1 —
UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION for an internal topic,
POLICY_VIOLATION when cleanup.policy lacks ``delete``, OFFSET_OUT_OF_RANGE for an offset
below -1 or above the high watermark (-1 means the high watermark). On one node the low
watermark is reached at once, so the request's timeout never applies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import NO_THROTTLE, ApiSpec, build, response_types
from eoslog.errors import KafkaError
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import ErrorCode, error_code
from eoslog.security.acls import AclOperation, ResourceType
from eoslog.types import TopicPartition

if TYPE_CHECKING:
    from eoslog.protocol.requests import DeleteRecordsRequest
    from eoslog.protocol.responses import DeleteRecordsResponse

NO_LOW_WATERMARK = -1


def _delete(ctx: RequestContext, topic: str, partition: int, offset: int) -> tuple[ErrorCode, int]:
    try:
        return ErrorCode.none, ctx.state.replicas.delete_records(TopicPartition(topic, partition), offset)
    except KafkaError as e:
        return error_code(e.error), NO_LOW_WATERMARK
    except OSError:
        return ErrorCode.kafka_storage_error, NO_LOW_WATERMARK


async def handle_delete_records(ctx: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    module = response_types(ctx)
    topics = []
    for t in request.topics:
        partitions = []
        deletable = ctx.allowed(AclOperation.DELETE, ResourceType.TOPIC, t.name)  # Kafka's check
        for p in t.partitions:
            code, low = (_delete(ctx, t.name, int(p.partition_index), int(p.offset)) if deletable
                         else (ErrorCode.topic_authorization_failed, NO_LOW_WATERMARK))
            partitions.append(build(module.DeleteRecordsPartitionResult, partition_index=p.partition_index,
                                    low_watermark=low, error_code=code))
        topics.append(build(module.DeleteRecordsTopicResult, name=t.name, partitions=tuple(partitions)))
    return cast("DeleteRecordsResponse", build(
        module.DeleteRecordsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics)))


APIS = [ApiSpec(ApiKey.DELETE_RECORDS, "DeleteRecords", 0, 2, handle_delete_records)]

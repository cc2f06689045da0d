"""OffsetForLeaderEpoch (key 23), v2-v4: where a leader epoch ended on this partition's leader.

Followers ask it after a leader change and truncate to the answer before fetching (KIP-101,
KIP-279); consumers ask it to validate their position after a leader change (KIP-320). The
answer comes from the leader's leader-epoch cache (``Partition.last_offset_for_leader_epoch``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import NO_THROTTLE, ApiSpec, build, response_types
from eoslog.errors import Errors
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import error_code
from eoslog.security.acls import AclOperation, ResourceType
from eoslog.types import TopicPartition

if TYPE_CHECKING:
    from eoslog.protocol.requests import OffsetForLeaderEpochRequest
    from eoslog.protocol.responses import OffsetForLeaderEpochResponse


async def handle_offset_for_leader_epoch(
    ctx: RequestContext, request: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse:
    module = response_types(ctx)
    topics = []
    # Kafka: a follower (replica_id >= 0) needs CLUSTER_ACTION, a consumer DESCRIBE on each topic.
    follower = int(getattr(request, "replica_id", -1)) >= 0
    for t in request.topics:
        results = []
        allowed = (ctx.allowed_on_cluster(AclOperation.CLUSTER_ACTION) if follower
                   else ctx.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, t.topic))
        for p in t.partitions:
            partition = ctx.state.replicas.get_partition(TopicPartition(t.topic, int(p.partition)))
            if not allowed:
                error, epoch, end = Errors.TOPIC_AUTHORIZATION_FAILED, -1, -1
            elif partition is None:
                error, epoch, end = Errors.UNKNOWN_TOPIC_OR_PARTITION, -1, -1
            else:
                error, epoch, end = partition.last_offset_for_leader_epoch(
                    int(getattr(p, "current_leader_epoch", -1)), int(p.leader_epoch))
            results.append(build(module.EpochEndOffset, error_code=error_code(error), partition=int(p.partition),
                                 leader_epoch=epoch, end_offset=end))
        topics.append(build(module.OffsetForLeaderTopicResult, topic=t.topic, partitions=tuple(results)))
    return cast("OffsetForLeaderEpochResponse", build(
        module.OffsetForLeaderEpochResponse, throttle_time=NO_THROTTLE, topics=tuple(topics)))


APIS = [ApiSpec(ApiKey.OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderEpoch", 2, 4, handle_offset_for_leader_epoch)]

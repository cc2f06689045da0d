"""Share groups' membership and offsets (KIP-932): ShareGroupHeartbeat (76) v1,
ShareGroupDescribe (77) v1, DescribeShareGroupOffsets (90) v0-v1, AlterShareGroupOffsets (91) v0,
DeleteShareGroupOffsets (92) v0 — translated into ``coordinator.group.share_groups`` calls.

Topics are named by id in assignments; ids come from this broker's view of the topics (its logs,
or the cluster's metadata). Authorization as Kafka's KafkaApis: READ on the group to heartbeat
(DESCRIBE on its subscribed topics), DESCRIBE to describe it and its offsets, READ to alter them,
DELETE to delete them.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, cast

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import NO_THROTTLE, ApiSpec, authorized_operations, build, response_types
from eoslog.broker.handlers.groups import client_host
from eoslog.coordinator.group.share_groups import ShareHeartbeat
from eoslog.errors import Errors
from eoslog.features import SHARE_VERSION
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import ErrorCode, error_code
from eoslog.security.acls import AclOperation, ResourceType
from eoslog.types import TopicPartition

if TYPE_CHECKING:
    from eoslog.protocol.requests import (
        AlterShareGroupOffsetsRequest,
        DeleteShareGroupOffsetsRequest,
        DescribeShareGroupOffsetsRequest,
        ShareGroupDescribeRequest,
        ShareGroupHeartbeatRequest,
    )
    from eoslog.protocol.responses import (
        AlterShareGroupOffsetsResponse,
        DeleteShareGroupOffsetsResponse,
        DescribeShareGroupOffsetsResponse,
        ShareGroupDescribeResponse,
        ShareGroupHeartbeatResponse,
    )

ASSIGNOR_NAME = "simple"


def share_groups_enabled(ctx: RequestContext) -> bool:
    """share.version >= 1 is finalized. Otherwise every share API is answered UNSUPPORTED_VERSION,
    as Kafka 4.4's KafkaApis answers while share groups are off (they are still advertised: the
    broker supports them, the cluster has not switched them on)."""
    return ctx.state.features.finalized_level(SHARE_VERSION) >= 1


def _topic_partitions(cls: Any, assignment: dict[Any, frozenset[int]], names: dict[Any, str]) -> Any:
    return tuple(build(cls, topic_id=t, topic_name=names.get(t, ""), partitions=tuple(sorted(ps)))
                 for t, ps in sorted(assignment.items(), key=lambda kv: names.get(kv[0], "")))


async def handle_share_group_heartbeat(ctx: RequestContext,
                                       request: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse:
    module = response_types(ctx)

    def refused(code: ErrorCode, message: str | None = None) -> ShareGroupHeartbeatResponse:
        return cast("ShareGroupHeartbeatResponse", build(
            module.ShareGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=code, error_message=message,
            member_id=None, member_epoch=0, heartbeat_interval=datetime.timedelta(0), assignment=None))

    if not share_groups_enabled(ctx):
        return refused(ErrorCode.unsupported_version)
    if not ctx.allowed(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return refused(ErrorCode.group_authorization_failed)
    topics = tuple(request.subscribed_topic_names) if request.subscribed_topic_names is not None else None
    if topics and any(not ctx.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, t) for t in topics):
        return refused(ErrorCode.topic_authorization_failed)
    result = await ctx.state.group_coordinator.share.heartbeat(ShareHeartbeat(
        request.group_id, request.member_id, int(request.member_epoch), request.rack_id, topics,
        ctx.client_id or "", client_host(ctx)))
    if result.error != Errors.NONE:
        return refused(error_code(result.error), result.message)
    assignment = None
    if result.assignment is not None:
        assignment = build(module.Assignment, topic_partitions=tuple(
            build(module.TopicPartitions, topic_id=t, partitions=tuple(sorted(ps)))
            for t, ps in sorted(result.assignment.items(), key=lambda kv: str(kv[0]))))
    return cast("ShareGroupHeartbeatResponse", build(
        module.ShareGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
        member_id=result.member_id, member_epoch=result.member_epoch,
        heartbeat_interval=datetime.timedelta(milliseconds=result.heartbeat_interval_ms), assignment=assignment))


async def handle_share_group_describe(ctx: RequestContext,
                                      request: ShareGroupDescribeRequest) -> ShareGroupDescribeResponse:
    module = response_types(ctx)
    names = ctx.state.topic_names()
    groups = []
    for group_id in request.group_ids:
        if not share_groups_enabled(ctx):
            error, described = Errors.UNSUPPORTED_VERSION, None
        elif not ctx.allowed(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            error, described = Errors.GROUP_AUTHORIZATION_FAILED, None
        else:
            error, described = ctx.state.group_coordinator.share.describe(group_id)
        if described is None:
            message = f"Group {group_id} not found." if error == Errors.GROUP_ID_NOT_FOUND else None
            groups.append(build(module.DescribedGroup, error_code=error_code(error), error_message=message,
                                group_id=group_id, group_state="", group_epoch=0, assignment_epoch=0,
                                assignor_name="", members=(), authorized_operations=-(2**31)))
            continue
        members = tuple(build(
            module.Member, member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
            client_id=m.client_id, client_host=m.client_host, subscribed_topic_names=tuple(m.subscribed_topic_names),
            assignment=build(module.Assignment, topic_partitions=_topic_partitions(
                module.TopicPartitions, m.assignment, names)))
            for m in described.members)
        groups.append(build(
            module.DescribedGroup, error_code=ErrorCode.none, error_message=None, group_id=group_id,
            group_state=described.state.value, group_epoch=described.group_epoch,
            assignment_epoch=described.assignment_epoch, assignor_name=ASSIGNOR_NAME, members=members,
            authorized_operations=authorized_operations(bool(request.include_authorized_operations),
                                                        ctx.allowed_operations(ResourceType.GROUP, group_id))))
    return cast("ShareGroupDescribeResponse", build(
        module.ShareGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=tuple(groups)))


# -- offsets ---------------------------------------------------------------------------------------


async def handle_describe_share_group_offsets(
        ctx: RequestContext, request: DescribeShareGroupOffsetsRequest) -> DescribeShareGroupOffsetsResponse:
    module = response_types(ctx)
    share = ctx.state.group_coordinator.share
    ids = ctx.state.topic_ids()
    out = []
    for g in request.groups:
        refusal = (ErrorCode.unsupported_version if not share_groups_enabled(ctx) else
                   ErrorCode.group_authorization_failed
                   if not ctx.allowed(AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id) else None)
        if refusal is not None:
            out.append(build(module.DescribeShareGroupOffsetsResponseGroup, group_id=g.group_id, topics=(),
                             error_code=refusal, error_message=None))
            continue
        wanted = None if g.topics is None else [(str(t.topic_name), int(p)) for t in g.topics for p in t.partitions
                                               if ctx.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, t.topic_name)]
        error, summaries = await share.offsets(g.group_id, wanted)
        if error != Errors.NONE:
            out.append(build(module.DescribeShareGroupOffsetsResponseGroup, group_id=g.group_id, topics=(),
                             error_code=error_code(error), error_message=None))
            continue
        by_topic: dict[str, list[Any]] = {}
        for s in summaries:
            lag = _lag(ctx, s.tp_topic, s.partition, s.start_offset, s.delivery_complete_count)
            by_topic.setdefault(s.tp_topic, []).append(build(
                module.DescribeShareGroupOffsetsResponsePartition, partition_index=s.partition,
                start_offset=s.start_offset, leader_epoch=s.leader_epoch, lag=lag, error_code=error_code(s.error),
                error_message=None))
        topics = tuple(build(module.DescribeShareGroupOffsetsResponseTopic, topic_name=name,
                             topic_id=ids.get(name, (None, 0))[0], partitions=tuple(parts))
                       for name, parts in by_topic.items())
        out.append(build(module.DescribeShareGroupOffsetsResponseGroup, group_id=g.group_id, topics=topics,
                         error_code=ErrorCode.none, error_message=None))
    return cast("DescribeShareGroupOffsetsResponse", build(
        module.DescribeShareGroupOffsetsResponse, throttle_time=NO_THROTTLE, groups=tuple(out)))


def _lag(ctx: RequestContext, topic: str, partition: int, start_offset: int, completed: int) -> int:
    """Records of the share-partition not yet delivered for good: from its start offset to the
    partition's end, less those already done (Kafka's share-partition lag); -1 when unknown."""
    if start_offset < 0 or completed < 0:
        return -1
    p = ctx.state.replicas.get_partition(TopicPartition(topic, partition))
    if p is None or not p.is_leader:
        return -1  # led elsewhere: not known here
    return max(0, p.high_watermark - start_offset - completed)


async def handle_alter_share_group_offsets(
        ctx: RequestContext, request: AlterShareGroupOffsetsRequest) -> AlterShareGroupOffsetsResponse:
    module = response_types(ctx)
    ids = ctx.state.topic_ids()

    def answer(code: ErrorCode, results: dict[tuple[str, int], Errors]) -> AlterShareGroupOffsetsResponse:
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), e in results.items():
            by_topic.setdefault(topic, []).append(build(
                module.AlterShareGroupOffsetsResponsePartition, partition_index=partition, error_code=error_code(e),
                error_message=None))
        return cast("AlterShareGroupOffsetsResponse", build(
            module.AlterShareGroupOffsetsResponse, throttle_time=NO_THROTTLE, error_code=code, error_message=None,
            responses=tuple(build(module.AlterShareGroupOffsetsResponseTopic, topic_name=t,
                                  topic_id=ids.get(t, (None, 0))[0], partitions=tuple(ps))
                            for t, ps in by_topic.items())))

    if not share_groups_enabled(ctx):
        return answer(ErrorCode.unsupported_version, {})
    if not ctx.allowed(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return answer(ErrorCode.group_authorization_failed, {})
    refused: dict[tuple[str, int], Errors] = {
        (str(t.topic_name), int(p.partition_index)): Errors.TOPIC_AUTHORIZATION_FAILED for t in request.topics
               for p in t.partitions if not ctx.allowed(AclOperation.READ, ResourceType.TOPIC, t.topic_name)}
    wanted = {(str(t.topic_name), int(p.partition_index)): int(p.start_offset) for t in request.topics
              for p in t.partitions if (str(t.topic_name), int(p.partition_index)) not in refused}
    error, results = await ctx.state.group_coordinator.share.alter_offsets(request.group_id, wanted)
    if error != Errors.NONE:
        return answer(error_code(error), {})
    return answer(ErrorCode.none, {**refused, **results})


async def handle_delete_share_group_offsets(
        ctx: RequestContext, request: DeleteShareGroupOffsetsRequest) -> DeleteShareGroupOffsetsResponse:
    module = response_types(ctx)
    ids = ctx.state.topic_ids()

    def answer(code: ErrorCode, results: dict[str, Errors]) -> DeleteShareGroupOffsetsResponse:
        return cast("DeleteShareGroupOffsetsResponse", build(
            module.DeleteShareGroupOffsetsResponse, throttle_time=NO_THROTTLE, error_code=code, error_message=None,
            responses=tuple(build(module.DeleteShareGroupOffsetsResponseTopic, topic_name=t,
                                  topic_id=ids.get(t, (None, 0))[0], error_code=error_code(e), error_message=None)
                            for t, e in results.items())))

    if not share_groups_enabled(ctx):
        return answer(ErrorCode.unsupported_version, {})
    if not ctx.allowed(AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return answer(ErrorCode.group_authorization_failed, {})
    refused: dict[str, Errors] = {str(t.topic_name): Errors.TOPIC_AUTHORIZATION_FAILED for t in request.topics
                                  if not ctx.allowed(AclOperation.READ, ResourceType.TOPIC, t.topic_name)}
    error, results = await ctx.state.group_coordinator.share.delete_offsets(
        request.group_id, [str(t.topic_name) for t in request.topics if t.topic_name not in refused])
    if error != Errors.NONE:
        return answer(error_code(error), {})
    return answer(ErrorCode.none, {**refused, **results})


APIS = [
    ApiSpec(ApiKey.SHARE_GROUP_HEARTBEAT, "ShareGroupHeartbeat", 1, 1, handle_share_group_heartbeat,
            feature=SHARE_VERSION),
    ApiSpec(ApiKey.SHARE_GROUP_DESCRIBE, "ShareGroupDescribe", 1, 1, handle_share_group_describe,
            feature=SHARE_VERSION),
    ApiSpec(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, "DescribeShareGroupOffsets", 0, 1,
            handle_describe_share_group_offsets, feature=SHARE_VERSION),
    ApiSpec(ApiKey.ALTER_SHARE_GROUP_OFFSETS, "AlterShareGroupOffsets", 0, 0, handle_alter_share_group_offsets,
            feature=SHARE_VERSION),
    ApiSpec(ApiKey.DELETE_SHARE_GROUP_OFFSETS, "DeleteShareGroupOffsets", 0, 0, handle_delete_share_group_offsets,
            feature=SHARE_VERSION),
]

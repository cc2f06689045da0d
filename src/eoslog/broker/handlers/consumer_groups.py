"""KIP-848 consumer groups: ConsumerGroupHeartbeat (68) v0-v1 and ConsumerGroupDescribe (69) v0-v1,
translated into ``coordinator.group.consumer_groups`` calls.

Both exist with ``group.version`` 1 (``ApiSpec(feature=GROUP_VERSION)``): advertised while this
broker implements it, and answered UNSUPPORTED_VERSION — as Kafka 4.4's KafkaApis answers — while the
cluster's finalized level is 0 or ``group.coordinator.rebalance.protocols`` leaves ``consumer`` out.
Topics are named by id in assignments; ids come from this broker's view of the topics.
Authorization as Kafka's: READ on the group to heartbeat (DESCRIBE on the topics it subscribes to by
name), DESCRIBE to describe it.
"""

from __future__ import annotations

import datetime
import uuid
from typing import TYPE_CHECKING, Any, cast

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import (
    NO_THROTTLE,
    ApiSpec,
    authorized_operations,
    build,
    response_types,
    to_ms,
)
from eoslog.broker.handlers.groups import client_host
from eoslog.coordinator.group.consumer_groups import ConsumerHeartbeat
from eoslog.errors import Errors
from eoslog.features import GROUP_VERSION
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import ErrorCode, error_code
from eoslog.security.acls import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.protocol.requests import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
    from eoslog.protocol.responses import ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatResponse

MEMBER_TYPE_CLASSIC, MEMBER_TYPE_CONSUMER = 0, 1  # ConsumerGroupDescribe v1's MemberType


def consumer_groups_enabled(ctx: RequestContext) -> bool:
    """group.version >= 1 finalized and the consumer protocol among the broker's rebalance protocols
    (Kafka's KafkaApis.isConsumerGroupProtocolEnabled)."""
    protocols = {p.strip().lower() for p in str(ctx.state.config["group.coordinator.rebalance.protocols"]).split(",")}
    return "consumer" in protocols and ctx.state.features.finalized_level(GROUP_VERSION) >= 1


def _topic_partitions(cls: Any, assignment: dict[uuid.UUID, frozenset[int]], names: dict[uuid.UUID, str] | None) -> Any:
    """Assigned partitions by topic id (with the name, for ConsumerGroupDescribe)."""
    def extra(topic_id: uuid.UUID) -> dict[str, str]:
        return {} if names is None else {"topic_name": names.get(topic_id, "")}
    return tuple(build(cls, topic_id=t, partitions=tuple(sorted(ps)), **extra(t))
                 for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0])) if ps)


async def handle_consumer_group_heartbeat(
    ctx: RequestContext, request: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse:
    module = response_types(ctx)

    def refused(code: ErrorCode, message: str | None = None) -> ConsumerGroupHeartbeatResponse:
        return cast("ConsumerGroupHeartbeatResponse", build(
            module.ConsumerGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=code, error_message=message,
            member_id=None, member_epoch=0, heartbeat_interval=datetime.timedelta(0), assignment=None))

    if not consumer_groups_enabled(ctx):
        return refused(ErrorCode.unsupported_version)
    if not ctx.allowed(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return refused(ErrorCode.group_authorization_failed)
    names = tuple(request.subscribed_topic_names) if request.subscribed_topic_names is not None else None
    if names and any(not ctx.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, t) for t in names):
        return refused(ErrorCode.topic_authorization_failed)
    owned = None if request.topic_partitions is None else {
        tp.topic_id: frozenset(int(p) for p in tp.partitions) for tp in request.topic_partitions
        if tp.topic_id is not None}
    result = await ctx.state.group_coordinator.consumer.heartbeat(ConsumerHeartbeat(
        request.group_id, request.member_id, int(request.member_epoch), request.instance_id, request.rack_id,
        to_ms(request.rebalance_timeout), names, getattr(request, "subscribed_topic_regex", None),
        request.server_assignor, owned,
        ctx.client_id or "", client_host(ctx), ctx.api_version))
    if result.error != Errors.NONE:
        return refused(error_code(result.error), result.message)
    assignment = None
    if result.assignment is not None:
        assignment = build(module.Assignment, topic_partitions=_topic_partitions(
            module.TopicPartitions, dict(result.assignment), None))
    return cast("ConsumerGroupHeartbeatResponse", build(
        module.ConsumerGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
        error_message=None, member_id=result.member_id, member_epoch=result.member_epoch,
        heartbeat_interval=datetime.timedelta(milliseconds=result.heartbeat_interval_ms), assignment=assignment))


async def handle_consumer_group_describe(
    ctx: RequestContext, request: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse:
    module = response_types(ctx)
    coordinator = ctx.state.group_coordinator
    names = ctx.state.topic_names()
    settings = coordinator.config.consumer
    groups = []
    for group_id in request.group_ids:
        message: str | None = None
        group = None
        if not consumer_groups_enabled(ctx):
            error = Errors.UNSUPPORTED_VERSION
        elif not ctx.allowed(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            error = Errors.GROUP_AUTHORIZATION_FAILED
        else:
            error, message, group = coordinator.consumer.describe(group_id)
        if group is None:
            groups.append(build(module.DescribedGroup, error_code=error_code(error), error_message=message,
                                group_id=group_id, group_state="", group_epoch=0, assignment_epoch=0,
                                assignor_name="", members=(), authorized_operations=-(2**31)))
            continue
        members = tuple(build(
            module.Member, member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
            member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=tuple(m.subscribed_topic_names),
            subscribed_topic_regex=m.subscribed_topic_regex or "",
            assignment=build(module.Assignment, topic_partitions=_topic_partitions(
                module.TopicPartitions, m.assigned_partitions(), names)),
            target_assignment=build(module.Assignment, topic_partitions=_topic_partitions(
                module.TopicPartitions, dict(group.target.get(m.member_id, {})), names)),
            **({"member_type": MEMBER_TYPE_CLASSIC if m.uses_classic_protocol else MEMBER_TYPE_CONSUMER}
               if ctx.api_version >= 1 else {}))
            for m in group.members.values())
        groups.append(build(
            module.DescribedGroup, error_code=ErrorCode.none, error_message=None, group_id=group_id,
            group_state=group.state.value, group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
            assignor_name=coordinator.consumer.preferred_assignor(group, settings), members=members,
            authorized_operations=authorized_operations(bool(request.include_authorized_operations),
                                                        ctx.allowed_operations(ResourceType.GROUP, group_id))))
    return cast("ConsumerGroupDescribeResponse", build(
        module.ConsumerGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=tuple(groups)))


APIS = [
    ApiSpec(ApiKey.CONSUMER_GROUP_HEARTBEAT, "ConsumerGroupHeartbeat", 0, 1, handle_consumer_group_heartbeat,
            feature=GROUP_VERSION),
    ApiSpec(ApiKey.CONSUMER_GROUP_DESCRIBE, "ConsumerGroupDescribe", 0, 1, handle_consumer_group_describe,
            feature=GROUP_VERSION),
]

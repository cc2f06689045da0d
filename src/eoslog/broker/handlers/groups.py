"""Group APIs: FindCoordinator (10), JoinGroup (11), Heartbeat (12), LeaveGroup (13),
SyncGroup (14), DescribeGroups (15), ListGroups (16), DeleteGroups (42).

Requests become ``GroupCoordinator`` calls; results (``Errors`` members) become responses.
JoinGroup and SyncGroup wait on a future that the coordinator resolves when the
rebalance gets there, which holds this connection's later requests back, as a Kafka
broker does. Versions are those kio has and clients send: JoinGroup v0-v9 (v4+ with the
MEMBER_ID_REQUIRED round, v5+ static membership, v9 skip_assignment), SyncGroup v0-v5.

FindCoordinator answers GROUP and TRANSACTION keys: this node coordinates them all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import (
    AUTHORIZED_OPERATIONS_OMITTED,
    NO_THROTTLE,
    ApiSpec,
    authorized_operations,
    build,
    replicated,
    response_types,
    to_ms,
    versioned,
)
from eoslog.coordinator.group import (
    GroupState,
    JoinRequest,
    JoinResult,
    SyncRequest,
    SyncResult,
)
from eoslog.coordinator.group.records import offsets_partition_for
from eoslog.coordinator.internal_topic import InternalTopic
from eoslog.coordinator.transaction.log import transaction_partition_for
from eoslog.errors import Errors
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import ErrorCode, error_code
from eoslog.security.acls import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.protocol.requests import (
        DeleteGroupsRequest,
        DescribeGroupsRequest,
        FindCoordinatorRequest,
        HeartbeatRequest,
        JoinGroupRequest,
        LeaveGroupRequest,
        ListGroupsRequest,
        SyncGroupRequest,
    )
    from eoslog.protocol.responses import (
        DeleteGroupsResponse,
        DescribeGroupsResponse,
        FindCoordinatorResponse,
        HeartbeatResponse,
        JoinGroupResponse,
        LeaveGroupResponse,
        ListGroupsResponse,
        SyncGroupResponse,
    )

T = TypeVar("T")

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
NO_AUTHORIZED_OPERATIONS = AUTHORIZED_OPERATIONS_OMITTED
CLASSIC_GROUP_TYPE = "classic"
CONSUMER_GROUP_TYPE = "consumer"  # KIP-848's; its protocol type is "consumer" too
SHARE_GROUP_TYPE = "share"

def client_host(ctx: RequestContext) -> str:
    """Kafka reports a member's host as Java's InetAddress.toString: ``/127.0.0.1``."""
    return "/" + ctx.client_address.rsplit(":", 1)[0].strip("[]")


async def wait_for(register: Callable[[Callable[[T], None]], None]) -> T:
    """Run ``register(callback)`` and wait until the coordinator calls the callback."""
    future: asyncio.Future[T] = asyncio.get_running_loop().create_future()

    def resolve(result: T) -> None:
        if not future.done():
            future.set_result(result)

    register(resolve)
    return await future


# -- FindCoordinator ------------------------------------------------------------------------


def _find(ctx: RequestContext, key_type: int, key: str) -> dict[str, Any]:
    """The leader of the key's internal partition (on one node, this node; docs/cluster.md),
    the internal topic made on first use, as Kafka does."""
    topic: InternalTopic
    partition_for: Callable[[str, int], int]
    if key_type == GROUP_KEY_TYPE:
        topic, partition_for = ctx.state.group_coordinator.topic, offsets_partition_for
    elif key_type == TRANSACTION_KEY_TYPE:
        topic, partition_for = ctx.state.txn_coordinator.state.topic, transaction_partition_for
    else:
        return _coordinator_fields(ErrorCode.invalid_request, f"unsupported coordinator key type {key_type}")
    error, broker = ctx.state.metadata_support.find_coordinator(topic, partition_for, key, ctx.listener)
    if broker is None:
        return _coordinator_fields(error_code(error), error.name)
    return _coordinator_fields(ErrorCode.none, None, broker.node_id, broker.host, broker.port)


def _coordinator_fields(code: ErrorCode, message: str | None, node_id: int = -1, host: str = "",
                        port: int = -1) -> dict[str, Any]:
    return dict(error_code=code, error_message=message, node_id=node_id, host=host, port=port)


def _find_refusal(ctx: RequestContext, key_type: int, key: str) -> ErrorCode | None:
    """Kafka's checks: DESCRIBE on the group, or on the transactional id."""
    if key_type == GROUP_KEY_TYPE and not ctx.allowed(AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return ErrorCode.group_authorization_failed
    if key_type == TRANSACTION_KEY_TYPE and not ctx.allowed(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return ErrorCode.transactional_id_authorization_failed
    return None


def _may_read(ctx: RequestContext, group_id: str) -> bool:
    """READ on the group: what JoinGroup, SyncGroup, Heartbeat and LeaveGroup need."""
    return ctx.allowed(AclOperation.READ, ResourceType.GROUP, group_id)


async def handle_find_coordinator(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    module = response_types(ctx)
    key_type = int(getattr(request, "key_type", GROUP_KEY_TYPE))

    def fields(key: str) -> dict[str, Any]:
        refusal = _find_refusal(ctx, key_type, key)
        if refusal is not None:
            return _coordinator_fields(refusal, None)
        return _find(ctx, key_type, key)

    if ctx.api_version < 4:
        return cast("FindCoordinatorResponse", build(
            module.FindCoordinatorResponse, throttle_time=NO_THROTTLE, **fields(versioned(request).key)))
    coordinators = [build(module.Coordinator, key=key, **fields(key)) for key in versioned(request).coordinator_keys]
    return cast("FindCoordinatorResponse", build(
        module.FindCoordinatorResponse, throttle_time=NO_THROTTLE, coordinators=tuple(coordinators)))


# -- JoinGroup / SyncGroup ---------------------------------------------------------------------


async def handle_join_group(ctx: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse:
    module = response_types(ctx)
    version = ctx.api_version
    session_timeout = to_ms(request.session_timeout)
    join = JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        client_id=ctx.client_id or "",
        client_host=client_host(ctx),
        session_timeout_ms=session_timeout,
        # v0 has no rebalance timeout: the session timeout served both purposes.
        rebalance_timeout_ms=to_ms(versioned(request).rebalance_timeout) if version >= 1 else session_timeout,
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, p.metadata) for p in request.protocols),
        require_known_member_id=version >= 4,
        supports_skip_assignment=version >= 9,
        reason=getattr(request, "reason", None),
    )
    result: JoinResult = (
        await wait_for(lambda cb: ctx.state.group_coordinator.join_group(join, cb)) if _may_read(ctx, request.group_id)
        else JoinResult(Errors.GROUP_AUTHORIZATION_FAILED, ""))
    members = tuple(
        build(module.JoinGroupResponseMember, member_id=m.member_id,
              group_instance_id=m.group_instance_id, metadata=m.metadata)
        for m in result.members
    )
    return cast("JoinGroupResponse", build(
        module.JoinGroupResponse, throttle_time=NO_THROTTLE, error_code=error_code(result.error),
        generation_id=result.generation_id, protocol_type=result.protocol_type,
        # Nullable from v7; before, "" stands for none.
        protocol_name=result.protocol_name if version >= 7 else (result.protocol_name or ""),
        leader=result.leader_id, skip_assignment=result.skip_assignment,
        member_id=result.member_id, members=members,
    ))


async def handle_sync_group(ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
    module = response_types(ctx)
    protocol_type = getattr(request, "protocol_type", None)
    protocol_name = getattr(request, "protocol_name", None)
    result: SyncResult
    if not _may_read(ctx, request.group_id):
        result = SyncResult(Errors.GROUP_AUTHORIZATION_FAILED)
    elif ctx.api_version >= 5 and (protocol_type is None or protocol_name is None):
        result = SyncResult(Errors.INCONSISTENT_GROUP_PROTOCOL)  # mandatory from v5
    else:
        sync = SyncRequest(
            group_id=request.group_id, member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            generation_id=int(request.generation_id), protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments={a.member_id: a.assignment for a in request.assignments},
        )
        result = await wait_for(lambda cb: ctx.state.group_coordinator.sync_group(sync, cb))
        if result.error is Errors.NONE:
            result = await _assignment_replicated(ctx, request.group_id, result)
    return cast("SyncGroupResponse", build(
        module.SyncGroupResponse, throttle_time=NO_THROTTLE, error_code=error_code(result.error),
        protocol_type=result.protocol_type, protocol_name=result.protocol_name,
        assignment=result.assignment,
    ))


async def _assignment_replicated(ctx: RequestContext, group_id: str, result: SyncResult) -> SyncResult:
    """Hand a generation's assignment out only once its group record is replicated (and, with
    group commit, fsynced), as Kafka's storeGroup callback does: a coordinator that failed over
    before would load the previous generation, and could give the same generation id a second,
    different assignment while a member still acts on the first (KIP-447's generation fencing
    of TxnOffsetCommit would then let that zombie through). Every member's answer waits for the
    coordinator's writes to the group's partition so far, which include the record."""
    groups = ctx.state.group_coordinator
    error = await replicated(ctx, groups.topic, groups.partition_for(group_id), Errors.NONE)
    return result if error is Errors.NONE else SyncResult(error)


# -- Heartbeat / LeaveGroup ---------------------------------------------------------------------------


async def handle_heartbeat(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    module = response_types(ctx)
    error = ctx.state.group_coordinator.heartbeat(
        request.group_id, request.member_id, getattr(request, "group_instance_id", None),
        int(request.generation_id),
    ) if _may_read(ctx, request.group_id) else Errors.GROUP_AUTHORIZATION_FAILED
    return cast("HeartbeatResponse", build(
        module.HeartbeatResponse, throttle_time=NO_THROTTLE, error_code=error_code(error)))


async def handle_leave_group(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    module = response_types(ctx)
    leaving: list[tuple[str, str | None, str | None]]
    if ctx.api_version < 3:
        leaving = [(versioned(request).member_id, None, None)]
    else:
        leaving = [(m.member_id, m.group_instance_id, getattr(m, "reason", None)) for m in versioned(request).members]
    error, member_errors = (ctx.state.group_coordinator.leave_group(request.group_id, leaving)
                            if _may_read(ctx, request.group_id) else (Errors.GROUP_AUTHORIZATION_FAILED, []))
    if ctx.api_version < 3:
        # One member, one error code: the group's, else the member's.
        if error == Errors.NONE and member_errors:
            error = member_errors[0]
        return cast("LeaveGroupResponse", build(
            module.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=error_code(error)))
    members = tuple(
        build(module.MemberResponse, member_id=mid, group_instance_id=iid, error_code=error_code(e))
        for (mid, iid, _), e in zip(leaving, member_errors, strict=False)
    )
    return cast("LeaveGroupResponse", build(
        module.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=error_code(error),
                 members=members))


# -- DescribeGroups / ListGroups / DeleteGroups --------------------------------------------------------


async def handle_describe_groups(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    module = response_types(ctx)
    coordinator = ctx.state.group_coordinator
    include_ops = bool(getattr(request, "include_authorized_operations", False))
    groups = []
    for group_id in request.groups:
        if not ctx.allowed(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append(build(
                module.DescribedGroup, error_code=ErrorCode.group_authorization_failed, group_id=group_id,
                group_state="", protocol_type="", protocol_data="", members=(),
                authorized_operations=NO_AUTHORIZED_OPERATIONS))
            continue
        error, summary = coordinator.describe_group(group_id)
        members = tuple(
            build(module.DescribedGroupMember, member_id=m.member_id,
                  group_instance_id=m.group_instance_id, client_id=m.client_id,
                  client_host=m.client_host, member_metadata=m.metadata,
                  member_assignment=m.assignment)
            for m in summary.members
        )
        groups.append(build(
            module.DescribedGroup, error_code=error_code(error), group_id=group_id,
            group_state=summary.state.value if error == Errors.NONE else "",
            protocol_type=summary.protocol_type, protocol_data=summary.protocol, members=members,
            authorized_operations=authorized_operations(
                include_ops, ctx.allowed_operations(ResourceType.GROUP, group_id)),
        ))
    return cast("DescribeGroupsResponse", build(
        module.DescribeGroupsResponse, throttle_time=NO_THROTTLE, groups=tuple(groups)))


async def handle_list_groups(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    module = response_types(ctx)
    coordinator = ctx.state.group_coordinator
    wanted_types = {t.lower() for t in getattr(request, "types_filter", ())}
    state_names = {name.lower() for name in getattr(request, "states_filter", ())}
    states = {s for s in (GroupState.parse(name) for name in state_names) if s is not None}
    unknown_state_only = bool(state_names) and not states
    error, classic = coordinator.list_groups(states or None)
    if unknown_state_only or (wanted_types and CLASSIC_GROUP_TYPE not in wanted_types):
        classic = []
    listed = [(g.group_id, g.protocol_type, g.state.value, CLASSIC_GROUP_TYPE) for g in classic]
    if not wanted_types or CONSUMER_GROUP_TYPE in wanted_types:
        listed += [(g.group_id, CONSUMER_GROUP_TYPE, g.state.value, CONSUMER_GROUP_TYPE)
                   for g in coordinator.list_consumer_groups(state_names or None)]
    if not wanted_types or SHARE_GROUP_TYPE in wanted_types:
        listed += [(g.group_id, SHARE_GROUP_TYPE, g.state.value, SHARE_GROUP_TYPE)
                   for g in coordinator.share.owned(coordinator.owns_partition)
                   if not state_names or g.state.value.lower() in state_names]
    if not ctx.allowed_on_cluster(AclOperation.DESCRIBE):  # Kafka: else only the groups it may describe
        listed = [g for g in listed if ctx.allowed(AclOperation.DESCRIBE, ResourceType.GROUP, g[0])]
    groups = tuple(
        build(module.ListedGroup, group_id=group_id, protocol_type=protocol_type, group_state=state,
              group_type=group_type)
        for group_id, protocol_type, state, group_type in listed
    )
    return cast("ListGroupsResponse", build(
        module.ListGroupsResponse, throttle_time=NO_THROTTLE, error_code=error_code(error),
                 groups=groups))


async def handle_delete_groups(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    module = response_types(ctx)
    coordinator = ctx.state.group_coordinator
    deletable = [g for g in request.groups_names if ctx.allowed(AclOperation.DELETE, ResourceType.GROUP, g)]
    results: dict[str, Errors] = {g: Errors.GROUP_AUTHORIZATION_FAILED for g in request.groups_names}
    share = [g for g in deletable if g in coordinator.share.groups and coordinator.serves(g)]
    classic = [g for g in deletable if g not in share]
    if classic:
        results.update(coordinator.delete_groups(classic))
    for group_id in share:  # their share-partition states are deleted first (the share coordinators)
        results[group_id] = await coordinator.share.delete(group_id)
    return cast("DeleteGroupsResponse", build(
        module.DeleteGroupsResponse, throttle_time=NO_THROTTLE,
        results=tuple(
            build(module.DeletableGroupResult, group_id=g, error_code=error_code(e))
            for g, e in results.items()
        ),
    ))


APIS = [
    ApiSpec(ApiKey.FIND_COORDINATOR, "FindCoordinator", 0, 4, handle_find_coordinator),
    ApiSpec(ApiKey.JOIN_GROUP, "JoinGroup", 0, 9, handle_join_group),
    ApiSpec(ApiKey.HEARTBEAT, "Heartbeat", 0, 4, handle_heartbeat),
    ApiSpec(ApiKey.LEAVE_GROUP, "LeaveGroup", 0, 5, handle_leave_group),
    ApiSpec(ApiKey.SYNC_GROUP, "SyncGroup", 0, 5, handle_sync_group),
    # v6 (KIP-1043) answers GROUP_ID_NOT_FOUND for unknown groups; kept to v5's Dead state.
    ApiSpec(ApiKey.DESCRIBE_GROUPS, "DescribeGroups", 0, 5, handle_describe_groups),
    ApiSpec(ApiKey.LIST_GROUPS, "ListGroups", 0, 5, handle_list_groups),
    ApiSpec(ApiKey.DELETE_GROUPS, "DeleteGroups", 0, 2, handle_delete_groups),
]

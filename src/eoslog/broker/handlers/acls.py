"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31), v1-v3: Kafka's ACL administration.

DescribeAcls needs DESCRIBE on the cluster, CreateAcls and DeleteAcls ALTER on it (Kafka's
AclApis). Without an authorizer (``authorizer.class.name`` empty) all three answer
SECURITY_DISABLED. The model and the decision live in ``security/acls.py``; changes are
stored before the answer and apply to the next request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import NO_THROTTLE, ApiSpec, build, response_types
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import ErrorCode
from eoslog.security.acls import AclBinding, AclFilter, AclOperation, PatternType, PermissionType, ResourceType

if TYPE_CHECKING:
    from eoslog.protocol.requests import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest

_DISABLED = "No Authorizer is configured on the broker"


def _enum(cls: type[Any], value: int) -> Any:
    try:
        return cls(int(value))
    except ValueError:
        return cls(0)  # UNKNOWN


def _filter(f: Any) -> AclFilter:
    return AclFilter(_enum(ResourceType, f.resource_type_filter), f.resource_name_filter,
                     _enum(PatternType, f.pattern_type_filter), f.principal_filter, f.host_filter,
                     _enum(AclOperation, f.operation), _enum(PermissionType, f.permission_type))


def _refusal(ctx: RequestContext, operation: AclOperation) -> tuple[ErrorCode, str] | None:
    if not ctx.state.security.acls_enabled:
        return ErrorCode.security_disabled, _DISABLED
    if not ctx.allowed_on_cluster(operation):
        return ErrorCode.cluster_authorization_failed, f"{ctx.principal} may not {operation.name} the cluster's ACLs"
    return None


async def handle_describe_acls(ctx: RequestContext, request: DescribeAclsRequest) -> Any:
    module = response_types(ctx)
    refusal = _refusal(ctx, AclOperation.DESCRIBE)
    if refusal is not None:
        return build(module.DescribeAclsResponse, throttle_time=NO_THROTTLE, error_code=refusal[0],
                     error_message=refusal[1], resources=())
    flt = _filter(request)
    by_resource: dict[tuple[ResourceType, str, PatternType], list[AclBinding]] = {}
    for acl in ctx.state.security.acl_store.acls:
        if flt.matches(acl):
            by_resource.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(acl)
    resources = tuple(
        build(module.DescribeAclsResource, resource_type=rt, resource_name=name, pattern_type=pt,
              acls=tuple(build(module.AclDescription, principal=a.principal, host=a.host, operation=a.operation,
                               permission_type=a.permission) for a in acls))
        for (rt, name, pt), acls in by_resource.items()
    )
    return build(module.DescribeAclsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                 error_message=None, resources=resources)


async def handle_create_acls(ctx: RequestContext, request: CreateAclsRequest) -> Any:
    module = response_types(ctx)
    refusal = _refusal(ctx, AclOperation.ALTER)
    results: list[tuple[ErrorCode, str | None]] = []
    new: list[AclBinding] = []
    for c in request.creations:
        if refusal is not None:
            results.append(refusal)
            continue
        acl = AclBinding(_enum(ResourceType, c.resource_type), c.resource_name,
                         _enum(PatternType, getattr(c, "resource_pattern_type", PatternType.LITERAL)),
                         c.principal, c.host, _enum(AclOperation, c.operation),
                         _enum(PermissionType, c.permission_type))
        reason = acl.invalid_reason()
        results.append((ErrorCode.invalid_request, reason) if reason else (ErrorCode.none, None))
        if reason is None:
            new.append(acl)
    if new:
        await ctx.state.security.store_acls([*ctx.state.security.acl_store.acls, *new])
    return build(module.CreateAclsResponse, throttle_time=NO_THROTTLE, results=tuple(
        build(module.AclCreationResult, error_code=code, error_message=msg) for code, msg in results))


async def handle_delete_acls(ctx: RequestContext, request: DeleteAclsRequest) -> Any:
    module = response_types(ctx)
    refusal = _refusal(ctx, AclOperation.ALTER)
    if refusal is not None:
        return build(module.DeleteAclsResponse, throttle_time=NO_THROTTLE, filter_results=tuple(
            build(module.DeleteAclsFilterResult, error_code=refusal[0], error_message=refusal[1], matching_acls=())
            for _ in request.filters))
    current = ctx.state.security.acl_store.acls
    filters = [_filter(f) for f in request.filters]
    results = []
    for flt in filters:
        matched = [a for a in current if flt.matches(a)]
        results.append(build(module.DeleteAclsFilterResult, error_code=ErrorCode.none, error_message=None,
                             matching_acls=tuple(build(
                                 module.DeleteAclsMatchingAcl, error_code=ErrorCode.none, error_message=None,
                                 resource_type=a.resource_type, resource_name=a.resource_name,
                                 pattern_type=a.pattern_type, principal=a.principal, host=a.host,
                                 operation=a.operation, permission_type=a.permission) for a in matched)))
    kept = [a for a in current if not any(f.matches(a) for f in filters)]
    if len(kept) != len(current):
        await ctx.state.security.store_acls(kept)
    return build(module.DeleteAclsResponse, throttle_time=NO_THROTTLE, filter_results=tuple(results))


APIS = [
    ApiSpec(ApiKey.DESCRIBE_ACLS, "DescribeAcls", 1, 3, handle_describe_acls),
    ApiSpec(ApiKey.CREATE_ACLS, "CreateAcls", 1, 3, handle_create_acls),
    ApiSpec(ApiKey.DELETE_ACLS, "DeleteAcls", 1, 3, handle_delete_acls),
]

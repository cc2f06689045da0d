"""AlterConfigs (key 33, v0-v2) and IncrementalAlterConfigs (key 44, v0-v1): translation
only; what a change means, its checks and where it is kept are ``broker/config_admin.py``'s.

Each resource is answered on its own (error code and message, or NONE), in request order;
one refused resource never fails the others, as in Kafka.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from eoslog.broker.config_admin import AlterOp, Refused, check_request
from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import NO_THROTTLE, ApiSpec, build, response_types
from eoslog.broker.handlers.configs import config_refusal
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.configs import AlterConfigOpType
from eoslog.protocol.errors import ErrorCode, error_code, from_code
from eoslog.security.acls import AclOperation

if TYPE_CHECKING:
    from eoslog.protocol.requests import AlterConfigsRequest, IncrementalAlterConfigsRequest
    from eoslog.protocol.responses import AlterConfigsResponse, IncrementalAlterConfigsResponse


async def _alter(ctx: RequestContext, request: Any, incremental: bool) -> Any:
    module = response_types(ctx)
    resources = [
        (int(r.resource_type), str(r.resource_name),
         [AlterOp(c.name, int(c.config_operation) if incremental else AlterConfigOpType.SET, c.value)
          for c in r.configs])
        for r in request.resources
    ]
    admin, validate_only = ctx.state.config_admin, bool(request.validate_only)
    responses = []
    for (resource_type, name, ops), refusal in zip(resources, check_request(resources, incremental), strict=True):
        denied = config_refusal(ctx, resource_type, name, AclOperation.ALTER_CONFIGS)
        if denied is not None:
            refusal = Refused(from_code(denied), "Authorization failed.")
        elif refusal is None:
            try:
                pending = admin.alter(resource_type, name, ops, incremental=incremental, validate_only=validate_only)
                if pending is not None:  # a topic's or a group's change, written to ZooKeeper
                    await pending
            except Refused as e:
                refusal = e
        responses.append(build(
            module.AlterConfigsResourceResponse,
            error_code=ErrorCode.none if refusal is None else error_code(refusal.error),
            error_message=None if refusal is None else refusal.message,
            resource_type=resource_type, resource_name=name,
        ))
    response_class = module.IncrementalAlterConfigsResponse if incremental else module.AlterConfigsResponse
    return build(response_class, throttle_time=NO_THROTTLE, responses=tuple(responses))


async def handle_alter_configs(ctx: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
    return cast("AlterConfigsResponse", await _alter(ctx, request, incremental=False))


async def handle_incremental_alter_configs(
    ctx: RequestContext, request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse:
    return cast("IncrementalAlterConfigsResponse", await _alter(ctx, request, incremental=True))


APIS = [
    ApiSpec(ApiKey.ALTER_CONFIGS, "AlterConfigs", 0, 2, handle_alter_configs),
    ApiSpec(ApiKey.INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs", 0, 1, handle_incremental_alter_configs),
]

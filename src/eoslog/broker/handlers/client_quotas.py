"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49), KIP-546: translated to the
broker's QuotaAdmin (``broker/quota_admin.py``), with Kafka's permissions (DESCRIBE_CONFIGS and
ALTER_CONFIGS on the cluster) and answers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import NO_THROTTLE, ApiSpec, build, response_types
from eoslog.broker.quota_admin import Alteration
from eoslog.errors import Errors, KafkaError
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import error_code
from eoslog.quotas.entities import Component
from eoslog.security.acls import AclOperation

if TYPE_CHECKING:
    from eoslog.protocol.requests import AlterClientQuotasRequest, DescribeClientQuotasRequest
    from eoslog.protocol.responses import AlterClientQuotasResponse, DescribeClientQuotasResponse


async def handle_describe_client_quotas(ctx: RequestContext, request: DescribeClientQuotasRequest
                                        ) -> DescribeClientQuotasResponse:
    module = response_types(ctx)
    error, message, entries = Errors.NONE, None, None
    if not ctx.allowed_on_cluster(AclOperation.DESCRIBE_CONFIGS):
        error = Errors.CLUSTER_AUTHORIZATION_FAILED
    else:
        try:
            found = ctx.state.quota_admin.describe(
                [Component(str(c.entity_type), int(c.match_type), c.match) for c in request.components],
                bool(request.strict))
        except KafkaError as e:
            error, message = e.error, str(e)
        else:
            entries = tuple(build(
                module.EntryData,
                entity=tuple(build(module.EntityData, entity_type=t, entity_name=n) for t, n in entity.parts()),
                values=tuple(build(module.ValueData, key=k, value=v) for k, v in sorted(values.items())))
                for entity, values in sorted(found.items(), key=lambda kv: kv[0].path))
    return cast("DescribeClientQuotasResponse", build(
        module.DescribeClientQuotasResponse, throttle_time=NO_THROTTLE, error_code=error_code(error),
        error_message=message, entries=entries))


async def handle_alter_client_quotas(ctx: RequestContext, request: AlterClientQuotasRequest
                                     ) -> AlterClientQuotasResponse:
    module = response_types(ctx)
    entries = [Alteration(tuple((str(e.entity_type), e.entity_name) for e in entry.entity),
                          tuple((str(op.key), None if op.remove else float(op.value)) for op in entry.ops))
               for entry in request.entries]
    results: list[tuple[Errors, str | None]]
    if not ctx.allowed_on_cluster(AclOperation.ALTER_CONFIGS):
        results = [(Errors.CLUSTER_AUTHORIZATION_FAILED, None)] * len(entries)
    else:
        results = await ctx.state.quota_admin.alter(entries, bool(request.validate_only))
    out: list[Any] = [build(module.EntryData, error_code=error_code(error), error_message=message,
                            entity=tuple(build(module.EntityData, entity_type=t, entity_name=n) for t, n in e.parts))
                      for e, (error, message) in zip(entries, results, strict=True)]
    return cast("AlterClientQuotasResponse", build(
        module.AlterClientQuotasResponse, throttle_time=NO_THROTTLE, entries=tuple(out)))


APIS = [
    ApiSpec(ApiKey.DESCRIBE_CLIENT_QUOTAS, "DescribeClientQuotas", 0, 1, handle_describe_client_quotas),
    ApiSpec(ApiKey.ALTER_CLIENT_QUOTAS, "AlterClientQuotas", 0, 1, handle_alter_client_quotas),
]

"""ApiVersions (key 18): advertises exactly the version ranges of the registry it is built
for (``handlers/registry.py`` builds it last, over every other handler's ``APIS``).

v3+ requests carry the client's software name and version (KIP-511); Kafka answers
INVALID_REQUEST, without any API ranges, when either is not of its allowed form.

v3+ responses carry the features (KIP-584, ``eoslog.features``) as Kafka 4.4 serves them: the
supported ranges, the finalized levels (those above 0) and their epoch, each list in Kafka's
order. Below v4 the supported features whose range starts at 0 are left out (Kafka's
KAFKA-17492: older clients could not read a minimum of 0) — so a v3 client sees none of eoslog's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import NO_THROTTLE, ApiSpec, build, response_module, response_types, versioned
from eoslog.features import supported_features
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from eoslog.protocol.requests import ApiVersionsRequest
    from eoslog.protocol.responses import ApiVersionsResponse

API_KEY = ApiKey.API_VERSIONS
MAX_VERSION = 4
CLIENT_SOFTWARE_VERSION = 3  # first version naming the client software, and carrying features
FEATURE_LEVEL_0_VERSION = 4  # first version whose clients read a supported range starting at 0
# ApiVersionsRequest.SOFTWARE_NAME_VERSION_PATTERN in Kafka.
_SOFTWARE_NAME_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def _valid_client_software(request: ApiVersionsRequest, version: int) -> bool:
    if version < CLIENT_SOFTWARE_VERSION:
        return True
    v3 = versioned(request)
    return all(
        _SOFTWARE_NAME_VERSION.fullmatch(v) is not None
        for v in (v3.client_software_name, v3.client_software_version)
    )


def _api_keys(module: ModuleType, registry: Mapping[int, ApiSpec]) -> tuple[Any, ...]:
    return tuple(
        build(module.ApiVersion, api_key=s.api_key, min_version=s.advertised[0],
              max_version=s.advertised[1])
        for s in sorted(registry.values(), key=lambda s: s.api_key)
    )


def unsupported_version_response(registry: Mapping[int, ApiSpec]) -> Any:
    """Kafka's answer to an ApiVersions request of a version it does not know: a v0
    response with UNSUPPORTED_VERSION and the supported ranges, so the client can retry
    with a version both sides speak."""
    module = response_module(API_KEY, 0)
    return module.ApiVersionsResponse(
        error_code=ErrorCode.unsupported_version, api_keys=_api_keys(module, registry)
    )


def _features(module: ModuleType, ctx: RequestContext) -> dict[str, Any]:
    """The response's feature fields (v3+; none below)."""
    if ctx.api_version < CLIENT_SOFTWARE_VERSION:
        return {}
    omit_level0 = ctx.api_version < FEATURE_LEVEL_0_VERSION
    finalized = ctx.state.features.finalized
    return {
        "supported_features": tuple(
            build(module.SupportedFeatureKey, name=name, min_version=low, max_version=high)
            for name, (low, high) in supported_features().items() if not (omit_level0 and low == 0)),
        "finalized_features_epoch": finalized.epoch,
        "finalized_features": tuple(
            build(module.FinalizedFeatureKey, name=name, max_version_level=level, min_version_level=level)
            for name, level in finalized.in_kafka_order()),
    }


async def handle_api_versions(registry: Mapping[int, ApiSpec], ctx: RequestContext,
                              request: ApiVersionsRequest) -> ApiVersionsResponse:
    module = response_types(ctx)
    if not _valid_client_software(request, ctx.api_version):
        return cast("ApiVersionsResponse", build(
            module.ApiVersionsResponse, error_code=ErrorCode.invalid_request, api_keys=(),
            throttle_time=NO_THROTTLE, supported_features=(), finalized_features_epoch=-1,
            finalized_features=(), zk_migration_ready=False,
        ))
    return cast("ApiVersionsResponse", build(
        module.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=_api_keys(module, registry),
        throttle_time=NO_THROTTLE,
        zk_migration_ready=False,
        **_features(module, ctx),
    ))


def api_versions_spec(registry: Mapping[int, ApiSpec]) -> ApiSpec:
    """ApiVersions answering from ``registry`` (which it is then added to)."""

    async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
        return await handle_api_versions(registry, ctx, request)

    return ApiSpec(API_KEY, "ApiVersions", 0, MAX_VERSION, handle)

"""UpdateFeatures (key 57): raise or lower a finalized feature level (KIP-584), as Kafka 4.4's
controller answers it.

Every update of the request is checked (``eoslog.features.plan_update``: Kafka's rules and
messages); one refused update refuses them all, with INVALID_UPDATE_VERSION and Kafka's message
at the top level. Otherwise, unless ``validate_only``, the levels are stored (``FeatureStore``:
the log directory's file on one node, the ``/feature`` znode in a cluster, conditionally on what
was validated) before the answer. Kafka's per-version quirks are kept: v0 has no upgrade type
(Kafka 4.4's controller reads the field's default, UPGRADE, whatever ``allow_downgrade`` says) and
no ``validate_only``; v0 and v1 answer success with one result per requested update, each with the
message "NONE", and failure with none; v2 answers the top-level error only. It needs ALTER on the
cluster (Kafka's controller checks it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import NO_THROTTLE, ApiSpec, build, response_types, versioned
from eoslog.errors import Errors
from eoslog.features import FeatureUpdate, FeatureUpdateError, UpgradeType, plan_update
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import error_code
from eoslog.security.acls import AclOperation

if TYPE_CHECKING:
    from eoslog.protocol.requests import UpdateFeaturesRequest
    from eoslog.protocol.responses import UpdateFeaturesResponse

UPGRADE_TYPE_VERSION = 1  # v0's allow_downgrade is ignored
NONE_MESSAGE = "NONE"  # ApiError.NONE's message as Kafka 4.4 puts it in each v0/v1 result


def _updates(request: UpdateFeaturesRequest, version: int) -> list[FeatureUpdate]:
    return [FeatureUpdate(str(u.feature), int(u.max_version_level),
                          UpgradeType.of(int(versioned(u).upgrade_type)) if version >= UPGRADE_TYPE_VERSION
                          else UpgradeType.UPGRADE)
            for u in request.feature_updates]


async def handle_update_features(ctx: RequestContext, request: UpdateFeaturesRequest) -> UpdateFeaturesResponse:
    module = response_types(ctx)
    error, message = Errors.NONE, None
    if not ctx.allowed_on_cluster(AclOperation.ALTER):
        error, message = Errors.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
    else:
        updates = _updates(request, ctx.api_version)
        validate_only = bool(getattr(request, "validate_only", False))
        try:
            await ctx.state.metadata_support.feature_store.update(
                lambda current: plan_update(current, updates, ctx.state.node_id), validate_only)
        except FeatureUpdateError as e:
            error, message = e.error, str(e)
    results = () if error is not Errors.NONE else tuple(
        build(module.UpdatableFeatureResult, feature=u.feature, error_code=error_code(Errors.NONE),
              error_message=NONE_MESSAGE)
        for u in request.feature_updates) if hasattr(module, "UpdatableFeatureResult") else ()
    return cast("UpdateFeaturesResponse", build(
        module.UpdateFeaturesResponse, throttle_time=NO_THROTTLE, error_code=error_code(error),
        error_message=message, results=results))


APIS = [ApiSpec(ApiKey.UPDATE_FEATURES, "UpdateFeatures", 0, 2, handle_update_features)]

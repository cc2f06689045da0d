"""Features (KIP-584): ``describe_features`` (an ApiVersions request, as Kafka's
Admin.describeFeatures sends) and ``update_features`` (UpdateFeatures).

An update is all or nothing on the broker: one refused feature refuses them all, and the call
raises that error (InvalidUpdateVersionError with the broker's message). ``validate_only`` asks
whether the broker would accept, changing nothing (``kafka-features.sh --dry-run``).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from eoslog.client.admin.core import AdminCore, raise_for
from eoslog.client.admin.types import FeatureMetadata, FeatureUpdate
from eoslog.client.versions import CLIENT_SOFTWARE_NAME, ApiVersionTable, package_version
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.messages import build, request_types

FEATURES_FIRST_VERSION = 3  # ApiVersions' first version with features
LEVEL_0_FEATURES_VERSION = 4  # and the first listing supported ranges that start at 0
UPGRADE_TYPE_VERSION = 1  # UpdateFeatures' first version with an upgrade type and validate_only


class FeatureAdmin(AdminCore):
    async def describe_features(self, *, node_id: int | None = None,
                                timeout_ms: int | None = None) -> FeatureMetadata:
        """The features as ``node_id`` (default: the least loaded broker) reports them."""

        def make(versions: ApiVersionTable) -> Any:
            v = versions.pick(ApiKey.API_VERSIONS, LEVEL_0_FEATURES_VERSION, FEATURES_FIRST_VERSION)
            return build(request_types(ApiKey.API_VERSIONS, v).ApiVersionsRequest,
                         client_software_name=CLIENT_SOFTWARE_NAME, client_software_version=package_version())

        def handle(_: int | None, response: Any) -> FeatureMetadata:
            raise_for(response.error_code, "ApiVersions")
            epoch = int(response.finalized_features_epoch)
            return FeatureMetadata(
                {str(f.name): int(f.max_version_level) for f in response.finalized_features},
                epoch if epoch >= 0 else None,
                {str(f.name): (int(f.min_version), int(f.max_version)) for f in response.supported_features})

        return await self._call("describe_features", make, handle,
                                node=None if node_id is None else self._fixed(node_id), timeout_ms=timeout_ms)

    async def update_features(self, updates: Mapping[str, FeatureUpdate], *, validate_only: bool = False,
                              timeout_ms: int | None = None) -> None:
        """Finalize each feature at its level; raises the broker's error if any is refused."""
        if not updates:
            raise ValueError("no feature to update")
        budget = self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms

        def make(versions: ApiVersionTable) -> Any:
            v = versions.pick(ApiKey.UPDATE_FEATURES, 2, UPGRADE_TYPE_VERSION)
            m = request_types(ApiKey.UPDATE_FEATURES, v)
            return build(m.UpdateFeaturesRequest, timeout=datetime.timedelta(milliseconds=budget),
                         validate_only=validate_only, feature_updates=tuple(
                             build(m.FeatureUpdateKey, feature=name, max_version_level=u.max_version_level,
                                   upgrade_type=int(u.upgrade_type))
                             for name, u in updates.items()))

        def handle(_: int | None, response: Any) -> None:
            raise_for(response.error_code, response.error_message)
            for result in getattr(response, "results", ()):  # v1: per feature (all NONE on success)
                raise_for(result.error_code, result.error_message)

        await self._call("update_features", make, handle, timeout_ms=timeout_ms)

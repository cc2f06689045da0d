"""Finalizing a feature level (KIP-584) on a running eoslog or Kafka broker through
eoslog.client's Admin, as ``kafka-features.sh upgrade|downgrade`` does: tests that run
clients at transaction version 1 on a broker that starts at 2 (a new log directory's level)."""

from __future__ import annotations

from eoslog.client import Admin
from eoslog.client.admin.types import FeatureUpdate, UpgradeType
from eoslog.features import TRANSACTION_VERSION


def finalize(bootstrap: str, level: int, feature: str = TRANSACTION_VERSION) -> int:
    """Finalize ``feature`` at ``level`` (an upgrade or a safe downgrade); returns the level
    it was at. Clients connecting afterwards are told the new level in ApiVersions."""
    with Admin({"bootstrap.servers": bootstrap}, default_api_timeout_ms=30000) as admin:
        before = admin.describe_features().finalized_features.get(feature, 0)
        if before != level:
            kind = UpgradeType.UPGRADE if level > before else UpgradeType.SAFE_DOWNGRADE
            admin.update_features({feature: FeatureUpdate(level, kind)})
    return before

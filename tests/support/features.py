"""Finalizing a feature level (KIP-584) on a running eoslog or Kafka broker through
eoslog.client's Admin, as ``kafka-features.sh upgrade|downgrade`` does: tests that run
clients at transaction version 1 on a broker that starts at 2 (a new log directory's level);
and Kafka's own tools for it (``kafka-features.sh``) and for what it shows
(``kafka-transactions.sh describe-producers``: the epochs transaction version 2 bumps)."""

from __future__ import annotations

from pathlib import Path

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


def kafka_features_tool(bootstrap: str, work: Path, *args: str) -> str:
    """Kafka 4.4's ``kafka-features.sh`` (FeatureCommand) against ``bootstrap``: its output."""
    from support.kafka_harness import run_tool

    return run_tool("org.apache.kafka.tools.FeatureCommand", ["--bootstrap-server", bootstrap, *args], work).stdout


def kafka_describe_producers(bootstrap: str, work: Path, topic: str, partition: int) -> dict[int, int]:
    """Kafka 4.4's ``kafka-transactions.sh describe-producers``: producer id → its epoch in the
    partition (DescribeProducers)."""
    from support.kafka_harness import run_tool

    out = run_tool("org.apache.kafka.tools.TransactionsCommand", [
        "--bootstrap-server", bootstrap, "describe-producers", "--topic", topic, "--partition", str(partition)],
        work).stdout
    lines = [line.split() for line in out.strip().splitlines()]
    header = lines[0]
    assert header[:2] == ["ProducerId", "ProducerEpoch"], out
    return {int(row[0]): int(row[1]) for row in lines[1:]}

"""Features (KIP-584): what ApiVersions v3/v4 carries and UpdateFeatures' answers at v0-v2 —
refusals of every kind and validate-only checks, so neither broker's levels change and the
sessions after see them as they were.

Kafka 4.4 also finalizes KRaft's features (metadata.version, kraft.version, eligible leader
replicas) and the streams protocol, which eoslog does not have, and share.version 2, where eoslog
has 1: those entries are known differences (allowed.py). group.version 1 (KIP-848) is identical.
Kafka's epoch is its metadata log's offset, eoslog's counts changes: only whether one is set is
compared.
"""

from __future__ import annotations

from typing import Any

from conformance.session import Broker, Catalogue, Target, i8, i16, ms
from conformance.steps import call
from eoslog.features import TRANSACTION_VERSION
from support.rawkafka import api_versions_request

CATALOGUE = Catalogue("features")
session = CATALOGUE.session
UPDATE_FEATURES = 57
UP, SAFE, UNSAFE = 1, 2, 3


def test_session(session_name: str, brokers: tuple[Broker, Broker]) -> None:
    CATALOGUE.run(session_name, brokers)


def features(t: Target, version: int) -> None:
    """ApiVersions' feature fields, the lists as maps by name (each broker lists what it has)."""
    r = t.quiet_call(api_versions_request(version))
    t.record(f"v{version}", {
        "error_code": r.error_code,
        "supported_features": {f.name: [int(f.min_version), int(f.max_version)] for f in r.supported_features},
        "finalized_features": {f.name: [int(f.min_version_level), int(f.max_version_level)]
                               for f in r.finalized_features},
        "finalized_features_epoch_set": int(r.finalized_features_epoch) >= 0,
    })


@session("api-versions", "the features of ApiVersions v3 (supported ranges starting at 0 left out, KAFKA-17492) "
         "and v4")
def _api_versions(t: Target) -> None:
    features(t, 3)
    features(t, 4)


def update(t: Target, version: int, label: str, *updates: tuple[str, int, int], validate_only: bool = True) -> Any:
    keys = tuple(t.request(UPDATE_FEATURES, version, "FeatureUpdateKey", feature=name, max_version_level=i16(level),
                           upgrade_type=i8(kind), allow_downgrade=kind != UP)
                 for name, level, kind in updates)
    return call(t, UPDATE_FEATURES, "UpdateFeaturesRequest", version=version, label=label, timeout=ms(30000),
                feature_updates=keys, validate_only=validate_only)


@session("update-refused", "UpdateFeatures refusals at v0-v2: an unknown feature (at a level, at 0), a negative "
         "level, an upgrade type Kafka does not know, a downgrade sent as an upgrade, a downgrade to a newer "
         "level, one refusal among valid updates, nothing to do")
def _refused(t: Target) -> None:
    for v in range(0, 3):
        update(t, v, f"v{v} unknown feature", ("unknown.feature", 1, UP))
        update(t, v, f"v{v} unknown feature at 0", ("unknown.feature", 0, SAFE))
        update(t, v, f"v{v} negative", (TRANSACTION_VERSION, -1, SAFE))
        update(t, v, f"v{v} downgrade as upgrade", (TRANSACTION_VERSION, 0, UP))
        update(t, v, f"v{v} one bad among good", (TRANSACTION_VERSION, 1, SAFE), ("unknown.feature", 1, UP))
        update(t, v, f"v{v} nothing", validate_only=v > 0)
    for v in (1, 2):  # v0 has no upgrade type (Kafka reads UPGRADE whatever allow_downgrade says)
        update(t, v, f"v{v} unknown upgrade type", (TRANSACTION_VERSION, 1, 0))
        update(t, v, f"v{v} downgrade to newer", (TRANSACTION_VERSION, 99, SAFE))


@session("update-validate-only", "UpdateFeatures v1-v2 validate_only that both brokers accept: a safe and an unsafe "
         "downgrade of transaction.version to 0, a feature eoslog does not implement left at 0")
def _validate_only(t: Target) -> None:
    for v in (1, 2):
        update(t, v, f"v{v} safe downgrade", (TRANSACTION_VERSION, 0, SAFE))
        update(t, v, f"v{v} unsafe downgrade", (TRANSACTION_VERSION, 0, UNSAFE))
        update(t, v, f"v{v} streams.version stays 0", ("streams.version", 0, SAFE))
    features(t, 4)  # nothing changed


DESCRIBE_CLUSTER = 60


@session("describe-cluster", "DescribeCluster at every version both brokers speak, with and without the cluster's "
         "authorized operations, and asking a broker for the controllers' endpoints (v1+)")
def _describe_cluster(t: Target) -> None:
    for v in range(t.v(DESCRIBE_CLUSTER) + 1):
        for authorized in (False, True):
            call(t, DESCRIBE_CLUSTER, "DescribeClusterRequest", version=v, label=f"v{v} authorized={authorized}",
                 include_cluster_authorized_operations=authorized, endpoint_type=i8(1),
                 include_fenced_brokers=False)
        if v >= 1:
            call(t, DESCRIBE_CLUSTER, "DescribeClusterRequest", version=v, label=f"v{v} controllers",
                 include_cluster_authorized_operations=False, endpoint_type=i8(2), include_fenced_brokers=False)

"""Every API this broker serves: each handler family's ``APIS`` (those whose feature it
implements), then ApiVersions, which advertises exactly this registry (and is the one entry
built from it)."""

from __future__ import annotations

from eoslog.broker.handlers import (
    acls,
    alter_configs,
    client_quotas,
    cluster,
    configs,
    consumer_groups,
    delete_records,
    features,
    fetch,
    groups,
    leader_epoch,
    list_offsets,
    log_dirs,
    metadata,
    offsets,
    produce,
    reassignments,
    sasl,
    scram_credentials,
    share_fetch,
    share_groups,
    share_state,
    topics,
    transactions,
)
from eoslog.broker.handlers.api_versions import api_versions_spec
from eoslog.broker.handlers.base import ApiSpec

_FAMILIES = (metadata, produce, fetch, list_offsets, transactions, topics, configs, alter_configs, cluster, groups,
             offsets, delete_records, leader_epoch, consumer_groups, sasl, acls, scram_credentials,
             share_groups, share_fetch, share_state, features, reassignments, log_dirs,
             client_quotas)

# Every API a handler is written for (scripts/typegen.py types them all, served or not).
HANDLED: dict[int, ApiSpec] = {spec.api_key: spec for family in _FAMILIES for spec in family.APIS}
# An API whose feature this build does not implement is not served at all (ApiSpec.enabled).
REGISTRY: dict[int, ApiSpec] = {key: spec for key, spec in HANDLED.items() if spec.enabled}
_api_versions = api_versions_spec(REGISTRY)
REGISTRY[_api_versions.api_key] = HANDLED[_api_versions.api_key] = _api_versions

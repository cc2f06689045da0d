"""Finalized features (KIP-584): what the cluster has switched on, and what this broker supports.

Kafka versions cluster-wide behaviour with named features, each a level (a small int). A broker
*supports* a range of levels of each feature it implements; the cluster *finalizes* one level,
raised (UPGRADE) or lowered (SAFE_DOWNGRADE / UNSAFE_DOWNGRADE) by UpdateFeatures, and clients read
it from ApiVersions (v3+: SupportedFeatures, FinalizedFeaturesEpoch, FinalizedFeatures). Kafka 4's
Java producer, for one, uses transaction protocol 2 (KIP-890 part 2) exactly when
``transaction.version`` >= 2 is finalized.

This module is the one place that knows the features: the table of those eoslog knows
(``FEATURES``: the names of Kafka 4.4's, each with the levels eoslog implements), Kafka's rules
for an update (``plan_update``, with Kafka's messages), Kafka ≤ 3.x's ``/feature`` znode JSON
(which is also the single node's file), and the broker's live view (``Features``: the finalized
level of a feature, and callbacks on a change). Where the levels are stored is not its business:
``storage/feature_file.py`` on a single node, ``cluster/feature_store.py`` (the ``/feature``
znode) in a cluster; both implement ``FeatureStore``.

How other parts use it:

- a level: ``features.finalized_level(TRANSACTION_VERSION)`` (``BrokerState.features``; the
  transaction coordinator is handed the ``Features`` object);
- a change: ``features.on_change(callback)`` — called on the event loop with the new
  ``FinalizedFeatures`` after every change, whichever broker made it;
- implementing a feature's next level: raise its ``max_supported`` in ``FEATURES`` (a new data
  directory or cluster then finalizes it by default, as Kafka 4 finalizes its latest production
  levels), and give the APIs that only exist with the feature ``ApiSpec(feature=..., feature_level=...)``
  (broker/handlers/base.py): ApiVersions advertises an API only while this broker supports its
  feature at that level. As Kafka 4.4 does, an API is advertised whatever level is *finalized*
  (Kafka 4.4 still advertises ConsumerGroupHeartbeat with group.version=0, and the share-group
  APIs with share.version=0 — measured); its handler checks the finalized level per request and
  refuses as Kafka does (Kafka's KafkaApis answers UNSUPPORTED_VERSION).

Never does I/O; imports only ``eoslog.errors`` and ``eoslog.javahash``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Protocol

from eoslog.errors import Errors, KafkaError
from eoslog.javahash import java_hash_map_order

TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"
SHARE_VERSION = "share.version"
STREAMS_VERSION = "streams.version"
KRAFT_VERSION = "kraft.version"
ELIGIBLE_LEADER_REPLICAS_VERSION = "eligible.leader.replicas.version"
# transaction.version 2 (KIP-890 part 2): every EndTxn bumps the epoch, Produce v12+ and TxnOffsetCommit
# v5+ add their partition themselves. Also what a request's or a transaction's protocol is said to be.
TRANSACTION_VERSION_2 = 2


@dataclass(frozen=True, slots=True)
class Feature:
    """One feature of Kafka's: the levels eoslog implements (``max_supported`` 0: none, and then
    it is neither advertised nor finalized) and what it means."""

    name: str
    max_supported: int
    about: str
    min_supported: int = 0

    @property
    def default_level(self) -> int:
        """The level a new data directory or cluster finalizes: the highest supported (Kafka's
        BrokerFeatures.defaultFinalizedFeatures)."""
        return self.max_supported

    def supports(self, level: int) -> bool:
        return self.min_supported <= level <= self.max_supported


# Kafka 4.4's features (org.apache.kafka.server.common.Feature); metadata.version, the KRaft log's
# format, is not one eoslog can have and is unknown here.
FEATURES: dict[str, Feature] = {f.name: f for f in (  # in Kafka's enum order
    Feature(KRAFT_VERSION, 0, "KRaft's own quorum format (eoslog's cluster runs on ZooKeeper)"),
    Feature(TRANSACTION_VERSION, 2, "1: flexible __transaction_state records (previous/next producer id, "
            "the client's transaction version); 2: KIP-890 part 2 — the epoch bumped by every EndTxn, "
            "partitions and offsets added implicitly by Produce v12+ and TxnOffsetCommit v5"),
    Feature(GROUP_VERSION, 1, "1: the consumer group protocol of KIP-848 (ConsumerGroupHeartbeat, "
            "ConsumerGroupDescribe, member epochs on offset commits)"),
    Feature(ELIGIBLE_LEADER_REPLICAS_VERSION, 0, "eligible leader replicas (KIP-966)"),
    Feature(SHARE_VERSION, 1, "1: share groups (KIP-932); Kafka 4.4's 2, share groups' dead letter queues "
            "(KIP-1191), is not implemented"),
    Feature(STREAMS_VERSION, 0, "1: the streams group protocol (KIP-1071)"),
)}


def supported_features() -> dict[str, tuple[int, int]]:
    """What ApiVersions advertises as supported, in Kafka's order: every feature with a level
    above 0 implemented (Kafka's BrokerFeatures lists only features whose latest level is above 0;
    its HashMap of 7 has 16 buckets)."""
    ranges = {f.name: (f.min_supported, f.max_supported) for f in FEATURES.values() if f.max_supported > 0}
    return {name: ranges[name] for name in java_hash_map_order(ranges, 16)}


def default_levels() -> dict[str, int]:
    """The finalized levels of a new data directory or cluster."""
    return {f.name: f.default_level for f in FEATURES.values() if f.default_level > 0}


@dataclass(frozen=True, slots=True)
class FinalizedFeatures:
    """The finalized levels (features at level 0 are not listed) and their epoch, which grows
    with every change (-1: nothing was ever finalized). ApiVersions reports both; clients keep
    the answer with the highest epoch."""

    levels: Mapping[str, int] = field(default_factory=dict)
    epoch: int = -1

    def level(self, name: str) -> int:
        return self.levels.get(name, 0)

    def in_kafka_order(self) -> list[tuple[str, int]]:
        """The levels as ApiVersions lists them (Kafka copies them into a HashMap: 8 buckets
        for its 6)."""
        return [(name, self.levels[name]) for name in java_hash_map_order(self.levels, 8)]


NOTHING_FINALIZED = FinalizedFeatures()


# -- the broker's live view -------------------------------------------------------------------


class Features:
    """What this broker supports and what the cluster finalized, as the broker last learnt it
    (from its own write, or a store's watch). Lives on the broker's event loop."""

    def __init__(self, finalized: FinalizedFeatures = NOTHING_FINALIZED) -> None:
        self._finalized = finalized
        self._callbacks: list[Callable[[FinalizedFeatures], None]] = []

    @property
    def finalized(self) -> FinalizedFeatures:
        return self._finalized

    def finalized_level(self, name: str) -> int:
        """The finalized level of ``name`` (0: not finalized, the feature is off)."""
        return self._finalized.level(name)

    def on_change(self, callback: Callable[[FinalizedFeatures], None]) -> None:
        """``callback(new)`` after every change of the finalized levels."""
        self._callbacks.append(callback)

    def set_finalized(self, finalized: FinalizedFeatures) -> None:
        """The store's news: the levels now finalized (an older epoch than known is ignored, as a
        watch may deliver a read that a later local write has overtaken)."""
        if finalized.epoch < self._finalized.epoch or finalized == self._finalized:
            return
        changed = dict(finalized.levels) != dict(self._finalized.levels)
        self._finalized = finalized
        if changed:
            for callback in list(self._callbacks):
                callback(finalized)


class FeatureStore(Protocol):
    """Where the finalized levels are kept (a file on one node, a znode in a cluster)."""

    async def update(self, plan: Callable[[FinalizedFeatures], dict[str, int]], validate_only: bool) -> None:
        """Read the current levels, ask ``plan`` for the new ones (it raises
        ``FeatureUpdateError`` to refuse), and unless ``validate_only`` store them durably —
        conditionally on the levels ``plan`` saw — and publish them to ``Features``."""
        ...


# -- UpdateFeatures -------------------------------------------------------------------------


class UpgradeType(IntEnum):
    """FeatureUpdate.UpgradeType: what UpdateFeatures v1+ may do to a level."""

    UNKNOWN = 0
    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3

    @classmethod
    def of(cls, code: int) -> UpgradeType:
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class FeatureUpdate:
    feature: str
    level: int
    upgrade_type: UpgradeType


class FeatureUpdateError(KafkaError):
    """A refused update, with Kafka's error (INVALID_UPDATE_VERSION for a refused level) and
    message (``str(error)``)."""

    def __init__(self, message: str, error: Errors = Errors.INVALID_UPDATE_VERSION) -> None:
        super().__init__(error, message)


def _invalid(update: FeatureUpdate, reason: str) -> FeatureUpdateError:
    return FeatureUpdateError(
        "The update failed for all features since the following feature had an error: "
        f"Invalid update version {update.level} for feature {update.feature}. {reason}")


def _not_supported(level: int, node_id: int, feature: Feature | None) -> str | None:
    """Kafka's QuorumFeatures.reasonNotSupported for this node (an unknown feature supports 0 only)."""
    low, high = (feature.min_supported, feature.max_supported) if feature is not None else (0, 0)
    if low <= level <= high:
        return None
    if high == 0:
        return f"Local controller {node_id} does not support this feature."
    return f"Local controller {node_id} only supports versions {low}-{high}"


def _check(update: FeatureUpdate, current: int, node_id: int) -> str | None:
    """Kafka's FeatureControlManager.updateFeature, in its order: the reason to refuse, or None."""
    if update.upgrade_type is UpgradeType.UNKNOWN:
        return "The controller does not support the given upgrade type."
    if update.level < 0:
        return "A feature version cannot be less than 0."
    feature = FEATURES.get(update.feature)
    reason = _not_supported(update.level, node_id, feature)
    if reason is not None:
        return reason
    if update.level < current and update.upgrade_type is UpgradeType.UPGRADE:
        return ("Can't downgrade the version of this feature without setting the upgrade type to "
                "either safe or unsafe downgrade.")
    if update.level > current and update.upgrade_type is not UpgradeType.UPGRADE:
        return "Can't downgrade to a newer version."
    if feature is None:
        return f"Feature {update.feature} not found."  # Kafka's Feature.featureFromName
    return None  # Kafka 4.4's features have no dependencies between them at these levels


def plan_update(current: FinalizedFeatures, updates: Iterable[FeatureUpdate], node_id: int) -> dict[str, int]:
    """The levels after ``updates`` (all or nothing), or ``FeatureUpdateError`` naming the first
    refused one in the order Kafka checks them (its HashMap of the request's updates; the last
    update of a feature named twice wins, as in that map)."""
    by_feature = {u.feature: u for u in updates}
    levels = dict(current.levels)
    for name in java_hash_map_order(by_feature, 16):
        update = by_feature[name]
        reason = _check(update, current.level(name), node_id)
        if reason is not None:
            raise _invalid(update, reason)
        if update.level == 0:
            levels.pop(name, None)
        else:
            levels[name] = update.level
    return levels


# -- Kafka ≤ 3.x's /feature znode (also the single node's file) -----------------------------------

ZNODE_VERSION = 2  # FeatureZNode.V2: max_version_level only
STATUS_ENABLED = 1


class FeatureZnodeError(ValueError):
    """A ``/feature`` znode (or the single node's file) that cannot be decoded."""


def encode_levels(levels: Mapping[str, int], extra: Mapping[str, Any] | None = None) -> bytes:
    """Kafka's FeatureZNode.encode (V2, status enabled); ``extra`` keys (the file's epoch) are
    ignored by Kafka's decoder."""
    doc: dict[str, Any] = {"version": ZNODE_VERSION, "status": STATUS_ENABLED,
                           "features": {name: {"max_version_level": level}
                                        for name, level in sorted(levels.items()) if level > 0}}
    doc.update(extra or {})
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_levels(data: bytes) -> tuple[dict[str, int], dict[str, Any]]:
    """The finalized levels (V1 or V2 JSON) and the whole document; raises FeatureZnodeError."""
    try:
        doc = json.loads(data)
        version = int(doc["version"])
        if version not in (1, 2) or "status" not in doc:
            raise FeatureZnodeError(f"unsupported feature information: {data!r}")
        levels = {str(name): int(info["max_version_level"]) for name, info in doc["features"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise FeatureZnodeError(f"cannot decode feature information {data!r}: {e}") from None
    if int(doc["status"]) != STATUS_ENABLED:
        levels = {}  # FeatureZNodeStatus.Disabled: nothing is finalized
    return {k: v for k, v in levels.items() if v > 0}, doc

"""A cluster's finalized features: the ``/feature`` znode, as Kafka ≤ 3.x kept them (KIP-584).

The znode holds FeatureZNode's JSON (``eoslog.features``); its data version is the features'
epoch, as Kafka's FinalizedFeatureCache took it. Every broker watches it and publishes what it
reads to its ``Features`` (Kafka's FinalizedFeatureChangeListener), so a change made through any
broker reaches all of them. Any broker may make one: it reads the znode, validates against what
it read and sets it *conditionally on that version* — ZooKeeper decides between two brokers
updating at once; the loser reads again and validates against the winner's levels.

The first broker of a cluster creates the znode: with Kafka 4's default levels when the cluster
has no topic yet (a new cluster), with nothing finalized when it already has topics (a cluster of
brokers that knew no features keeps what it had until upgraded). Brokers starting together race
on the create; ZooKeeper keeps one, the others read it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from eoslog.cluster import znodes
from eoslog.cluster.zk import ZkSession, Znode
from eoslog.errors import Errors
from eoslog.features import (
    Features,
    FeatureUpdateError,
    FeatureZnodeError,
    FinalizedFeatures,
    decode_levels,
    default_levels,
    encode_levels,
)

log = logging.getLogger(__name__)

# Conditional sets lost to another broker's update before this one gives up (FEATURE_UPDATE_FAILED).
MAX_CONFLICTS = 10


def _finalized(node: Znode) -> FinalizedFeatures:
    levels, _ = decode_levels(node.data)
    return FinalizedFeatures(levels, node.version)


class ZkFeatureStore:
    """The cluster's ``FeatureStore``."""

    def __init__(self, zk: ZkSession, features: Features) -> None:
        self.zk = zk
        self.features = features

    async def start(self) -> FinalizedFeatures:
        """Create ``/feature`` if no broker has, publish it and watch it."""
        node = await self.zk.get(znodes.FEATURE)
        if node is None:
            existing = bool(await self.zk.children(znodes.TOPICS))
            levels = {} if existing else default_levels()
            try:
                await self.zk.create(znodes.FEATURE, encode_levels(levels))
                log.info("created %s for %s cluster: %s", znodes.FEATURE, "an existing" if existing else "a new",
                         levels or "nothing finalized")
            except NodeExistsError:
                pass  # another broker of the cluster created it first
            node = await self.zk.get(znodes.FEATURE)
            assert node is not None, f"{znodes.FEATURE} vanished"  # never deleted
        self.features.set_finalized(_finalized(node))
        await self.zk.watch_data(znodes.FEATURE, self._on_change)
        return self.features.finalized

    def _on_change(self, _path: str, node: Znode | None) -> None:
        if node is None:
            log.error("%s was deleted; keeping the finalized features last read", znodes.FEATURE)
            return
        try:
            self.features.set_finalized(_finalized(node))
        except FeatureZnodeError as e:
            log.error("ignoring %s: %s", znodes.FEATURE, e)

    async def update(self, plan: Callable[[FinalizedFeatures], dict[str, int]], validate_only: bool) -> None:
        for _ in range(MAX_CONFLICTS):
            node = await self.zk.get(znodes.FEATURE)
            if node is None:
                raise FeatureUpdateError(f"{znodes.FEATURE} does not exist", Errors.FEATURE_UPDATE_FAILED)
            current = _finalized(node)
            levels = plan(current)
            if validate_only:
                return
            try:
                version = await self.zk.set(znodes.FEATURE, encode_levels(levels), node.version)
            except (BadVersionError, NoNodeError):
                continue  # another broker updated first: validate against its levels
            log.info("finalized features updated: %s (epoch %d)", levels or "none", version)
            self.features.set_finalized(FinalizedFeatures(levels, version))
            return
        raise FeatureUpdateError(f"{znodes.FEATURE} kept changing during the update ({MAX_CONFLICTS} attempts)",
                                 Errors.FEATURE_UPDATE_FAILED)

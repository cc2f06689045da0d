"""A single node's finalized features: ``finalized-features.json`` in the log directory.

The file holds Kafka ≤ 3.x's ``/feature`` znode JSON (``eoslog.features``), plus the epoch — which
in ZooKeeper is the znode's version — under ``"epoch"``, which Kafka's decoder ignores. It is
replaced atomically (``fileio.atomic_write``: temporary file, fsync, rename, fsync of the
directory), so after a crash it holds the old levels or the new ones.

At start-up (``load``) a log directory without the file gets one: a new directory gets Kafka 4's
default, the highest level of every supported feature (``transaction.version=2``); a directory
that already holds data (``topics.json``: it was written by an eoslog that knew no features)
keeps what it had, nothing finalized, until someone upgrades it. A directory with no topics
holds nothing a level could be wrong for, so it counts as new; that also covers a crash between
``meta.properties`` and this file on a new directory's first start.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

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
from eoslog.storage.fileio import atomic_write
from eoslog.storage.log_manager import TOPICS_FILE

log = logging.getLogger(__name__)

FEATURES_FILE = "finalized-features.json"


class FeatureFile:
    """The single node's ``FeatureStore``."""

    def __init__(self, log_dir: Path, features: Features) -> None:
        self.path = log_dir / FEATURES_FILE
        self.log_dir = log_dir
        self.features = features

    def load(self) -> FinalizedFeatures:
        """Read the file (creating it first, see above) and publish its levels."""
        if self.path.exists():
            try:
                levels, doc = decode_levels(self.path.read_bytes())
                epoch = int(doc.get("epoch", 0))
            except (FeatureZnodeError, ValueError, TypeError) as e:
                raise FeatureZnodeError(f"{self.path}: {e}") from None
            finalized = FinalizedFeatures(levels, epoch)
        else:
            existing = (self.log_dir / TOPICS_FILE).exists()
            finalized = FinalizedFeatures({} if existing else default_levels(), 0)
            self._write(finalized)
            log.info("finalized features of %s log directory %s: %s", "existing" if existing else "new",
                     self.log_dir, dict(finalized.levels) or "none")
        self.features.set_finalized(finalized)
        return finalized

    def _write(self, finalized: FinalizedFeatures) -> None:
        atomic_write(self.path, encode_levels(finalized.levels, {"epoch": finalized.epoch}))

    async def update(self, plan: Callable[[FinalizedFeatures], dict[str, int]], validate_only: bool) -> None:
        current = self.features.finalized
        levels = plan(current)
        if validate_only:
            return
        updated = FinalizedFeatures(levels, current.epoch + 1)
        try:
            self._write(updated)
        except OSError as e:
            raise FeatureUpdateError(f"Unable to update finalized features: {e}",
                                     Errors.FEATURE_UPDATE_FAILED) from None
        log.info("finalized features updated: %s (epoch %d)", dict(levels) or "none", updated.epoch)
        self.features.set_finalized(updated)

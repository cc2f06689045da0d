"""Finalized features (KIP-584): Kafka 4.4's rules for an update and their messages (each one
read off a Kafka 4.4 broker's UpdateFeatures answers, tests/conformance holds the two side by
side), the order Kafka lists features in, the /feature JSON, the single node's file and the
live view's callbacks."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from eoslog.features import (
    FEATURES,
    TRANSACTION_VERSION,
    Features,
    FeatureUpdate,
    FeatureUpdateError,
    FinalizedFeatures,
    UpgradeType,
    decode_levels,
    default_levels,
    encode_levels,
    plan_update,
    supported_features,
)
from eoslog.javahash import java_hash_map_order
from eoslog.storage.feature_file import FEATURES_FILE, FeatureFile

PREFIX = "The update failed for all features since the following feature had an error: "
UP, SAFE, UNSAFE = UpgradeType.UPGRADE, UpgradeType.SAFE_DOWNGRADE, UpgradeType.UNSAFE_DOWNGRADE
TV_MAX = FEATURES[TRANSACTION_VERSION].max_supported


def refusal(current: dict[str, int], *updates: tuple[str, int, UpgradeType], node: int = 1) -> str:
    with pytest.raises(FeatureUpdateError) as e:
        plan_update(FinalizedFeatures(current, 3), [FeatureUpdate(*u) for u in updates], node)
    assert e.value.error.name == "INVALID_UPDATE_VERSION"
    message = str(e.value)
    assert message.startswith(PREFIX)
    return message.removeprefix(PREFIX)


def test_kafkas_rules_and_messages() -> None:
    tv = {TRANSACTION_VERSION: 1}
    assert refusal(tv, (TRANSACTION_VERSION, 0, UP)) == (
        "Invalid update version 0 for feature transaction.version. Can't downgrade the version of this feature "
        "without setting the upgrade type to either safe or unsafe downgrade.")
    assert refusal({}, (TRANSACTION_VERSION, 1, SAFE)) == (
        "Invalid update version 1 for feature transaction.version. Can't downgrade to a newer version.")
    assert refusal(tv, (TRANSACTION_VERSION, TV_MAX + 1, UP), node=7) == (
        f"Invalid update version {TV_MAX + 1} for feature transaction.version. Local controller 7 only supports "
        f"versions 0-{TV_MAX}")
    assert refusal(tv, (TRANSACTION_VERSION, -1, SAFE)) == (
        "Invalid update version -1 for feature transaction.version. A feature version cannot be less than 0.")
    assert refusal(tv, (TRANSACTION_VERSION, 1, UpgradeType.UNKNOWN)) == (
        "Invalid update version 1 for feature transaction.version. The controller does not support the given "
        "upgrade type.")
    assert refusal({}, ("unknown.feature", 1, UP)) == (
        "Invalid update version 1 for feature unknown.feature. Local controller 1 does not support this feature.")
    assert refusal({}, ("unknown.feature", 0, SAFE)) == (
        "Invalid update version 0 for feature unknown.feature. Feature unknown.feature not found.")
    # A feature of Kafka's that eoslog does not implement: supported at 0 only.
    assert refusal({}, ("streams.version", 1, UP)) == (
        "Invalid update version 1 for feature streams.version. Local controller 1 does not support this feature.")


def test_all_or_nothing_in_kafkas_order() -> None:
    current = FinalizedFeatures({TRANSACTION_VERSION: 1}, 3)
    # Both refused: Kafka reports the one its HashMap iterates first.
    first = java_hash_map_order(["unknown.feature", TRANSACTION_VERSION], 16)[0]
    message = refusal({TRANSACTION_VERSION: 1}, (TRANSACTION_VERSION, 0, UP), ("unknown.feature", 1, UP))
    assert f"for feature {first}." in message
    with pytest.raises(FeatureUpdateError):
        plan_update(current, [FeatureUpdate(TRANSACTION_VERSION, 0, SAFE), FeatureUpdate("x", 1, UP)], 1)
    assert plan_update(current, [FeatureUpdate(TRANSACTION_VERSION, 0, UNSAFE)], 1) == {}
    assert plan_update(current, [FeatureUpdate(TRANSACTION_VERSION, 1, SAFE)], 1) == {TRANSACTION_VERSION: 1}
    assert plan_update(current, [FeatureUpdate("streams.version", 0, SAFE)], 1) == {TRANSACTION_VERSION: 1}
    assert plan_update(current, [], 1) == {TRANSACTION_VERSION: 1}


def test_java_hash_map_order_is_kafkas() -> None:
    """The orders a Kafka 4.4 broker's ApiVersions listed (tests/conformance compares them)."""
    supported = ["metadata.version", "kraft.version", "transaction.version", "group.version",
                 "eligible.leader.replicas.version", "share.version", "streams.version"]
    assert java_hash_map_order(supported, 16) == [
        "group.version", "kraft.version", "metadata.version", "share.version", "streams.version",
        "transaction.version", "eligible.leader.replicas.version"]
    finalized = ["group.version", "transaction.version", "eligible.leader.replicas.version", "share.version",
                 "streams.version", "metadata.version"]
    assert java_hash_map_order(finalized, 8) == [
        "group.version", "streams.version", "transaction.version", "eligible.leader.replicas.version",
        "share.version", "metadata.version"]


def test_supported_features_list_only_implemented_levels() -> None:
    assert supported_features() == {f.name: (0, f.max_supported) for f in FEATURES.values() if f.max_supported}
    assert TRANSACTION_VERSION in supported_features() and "streams.version" not in supported_features()
    assert default_levels() == {n: high for n, (_, high) in supported_features().items()}


def test_znode_json_is_kafkas_feature_znode_v2() -> None:
    data = encode_levels({TRANSACTION_VERSION: 2, "group.version": 0})
    assert data == b'{"version":2,"status":1,"features":{"transaction.version":{"max_version_level":2}}}'
    assert decode_levels(data)[0] == {TRANSACTION_VERSION: 2}
    v1 = b'{"version":1,"status":1,"features":{"transaction.version":{"min_version_level":1,"max_version_level":1}}}'
    assert decode_levels(v1)[0] == {TRANSACTION_VERSION: 1}
    assert decode_levels(b'{"version":2,"status":0,"features":{"transaction.version":{"max_version_level":2}}}')[0] \
        == {}  # FeatureZNodeStatus.Disabled


def test_live_view_calls_back_on_a_change_and_ignores_older_epochs() -> None:
    features = Features()
    seen: list[FinalizedFeatures] = []
    features.on_change(seen.append)
    features.set_finalized(FinalizedFeatures({TRANSACTION_VERSION: 1}, 0))
    features.set_finalized(FinalizedFeatures({TRANSACTION_VERSION: 1}, 0))  # the same: no call
    features.set_finalized(FinalizedFeatures({}, 2))
    features.set_finalized(FinalizedFeatures({TRANSACTION_VERSION: 1}, 1))  # a stale read: ignored
    assert [dict(f.levels) for f in seen] == [{TRANSACTION_VERSION: 1}, {}]
    assert features.finalized_level(TRANSACTION_VERSION) == 0 and features.finalized.epoch == 2


def test_a_new_log_directory_finalizes_the_defaults_an_existing_one_nothing(tmp_path: Path) -> None:
    new = tmp_path / "new"
    new.mkdir()
    assert FeatureFile(new, Features()).load() == FinalizedFeatures(default_levels(), 0)
    old = tmp_path / "old"
    old.mkdir()
    (old / "topics.json").write_text('{"topics": []}')  # data written by an eoslog without features
    assert FeatureFile(old, Features()).load() == FinalizedFeatures({}, 0)
    (old / "topics.json").unlink()  # the file, once written, decides; topics.json no longer matters
    assert FeatureFile(old, Features()).load() == FinalizedFeatures({}, 0)


def test_the_file_keeps_updates_and_refuses_without_writing(tmp_path: Path) -> None:
    features = Features()
    store = FeatureFile(tmp_path, features)
    store.load()
    before = (tmp_path / FEATURES_FILE).read_bytes()

    def update(level: int, kind: UpgradeType, validate_only: bool = False) -> None:
        asyncio.run(store.update(lambda cur: plan_update(cur, [FeatureUpdate(TRANSACTION_VERSION, level, kind)], 0),
                                 validate_only))

    update(0, SAFE, validate_only=True)
    assert (tmp_path / FEATURES_FILE).read_bytes() == before and features.finalized.epoch == 0
    with pytest.raises(FeatureUpdateError):
        update(0, UP)
    assert (tmp_path / FEATURES_FILE).read_bytes() == before
    others = {n: level for n, level in default_levels().items() if n != TRANSACTION_VERSION}  # share.version
    update(0, SAFE)
    assert FeatureFile(tmp_path, Features()).load() == FinalizedFeatures(others, 1) == features.finalized
    update(TV_MAX, UP)
    assert FeatureFile(tmp_path, Features()).load() == FinalizedFeatures({**others, TRANSACTION_VERSION: TV_MAX}, 2)
    assert not list(tmp_path.glob("*.tmp"))

"""The leader-epoch cache answers OffsetForLeaderEpoch as Kafka's LeaderEpochFileCache does,
keeps its entries monotonic, and survives a restart (its checkpoint file)."""

from __future__ import annotations

from pathlib import Path

from eoslog.storage.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, EpochEntry, LeaderEpochCache

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def _cache(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochCache:
    tmp_path.mkdir(parents=True, exist_ok=True)
    cache = LeaderEpochCache(tmp_path)
    for epoch, offset in entries:
        cache.assign(epoch, offset)
    return cache


def test_end_offset_for_an_epoch(tmp_path: Path) -> None:
    cache = _cache(tmp_path, (1, 0), (3, 10), (5, 20))
    leo = 25
    assert cache.end_offset_for(5, leo) == (5, 25)  # the latest epoch runs to the log end
    assert cache.end_offset_for(3, leo) == (3, 20)  # ended where epoch 5 began
    assert cache.end_offset_for(4, leo) == (3, 20)  # unknown epoch 4: the one before it
    assert cache.end_offset_for(2, leo) == (1, 10)
    assert cache.end_offset_for(0, leo) == (0, 0)  # before the first: it ended where epoch 1 began
    assert cache.end_offset_for(6, leo) == UNDEFINED  # newer than anything known
    assert cache.end_offset_for(UNDEFINED_EPOCH, leo) == UNDEFINED
    assert LeaderEpochCache(tmp_path / "empty").end_offset_for(1, 0) == UNDEFINED


def test_assign_keeps_entries_monotonic(tmp_path: Path) -> None:
    cache = _cache(tmp_path, (1, 0), (2, 5))
    assert not cache.assign(2, 7)  # a later batch of the latest epoch
    assert cache.assign(3, 9)
    # A new leader's epoch starting before entries that a deposed leader wrote removes them.
    assert cache.assign(4, 6)
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, 5), EpochEntry(4, 6)]
    assert cache.assign(2, 3)  # older epoch, earlier start: everything at or after goes
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, 3)]


def test_truncation_and_restart(tmp_path: Path) -> None:
    cache = _cache(tmp_path, (1, 0), (2, 10), (4, 20))
    cache.truncate_from_end(20)
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, 10)]
    cache.truncate_from_end(15)  # mid-epoch: the epoch stays
    assert cache.latest_epoch == 2
    cache.truncate_from_start(12)
    assert cache.entries == [EpochEntry(2, 12)]
    reopened = LeaderEpochCache(tmp_path)
    assert reopened.entries == [EpochEntry(2, 12)]
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n1\n2 12\n"  # Kafka's format


def test_malformed_checkpoint_reads_empty(tmp_path: Path) -> None:
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n3\n1 0\n")
    assert LeaderEpochCache(tmp_path).entries == []


def test_follower_truncation_kip_101_and_279(tmp_path: Path) -> None:
    from eoslog.storage.leader_epoch import Truncation, follower_truncation

    # KIP-101's case: the follower wrote offsets 10..11 in epoch 1 that the new leader (which
    # also led epoch 1, up to 10) never had: cut at 10.
    follower = _cache(tmp_path / "a", (0, 0), (1, 5))
    assert follower_truncation(follower, 12, 8, leader_epoch=1, leader_end_offset=10) == Truncation(10, True)
    # Both agree and the leader has more: keep everything.
    assert follower_truncation(follower, 12, 8, leader_epoch=1, leader_end_offset=30) == Truncation(12, True)
    # KIP-279: the leader answers an epoch (0) smaller than the follower's latest (2); the
    # follower's epoch 0 ended at 5 → cut there and ask again about its new latest epoch.
    diverged = _cache(tmp_path / "b", (0, 0), (2, 5))
    assert follower_truncation(diverged, 9, 3, leader_epoch=0, leader_end_offset=7) == Truncation(5, True)
    other = _cache(tmp_path / "c", (0, 0), (3, 5))
    assert follower_truncation(other, 9, 3, leader_epoch=2, leader_end_offset=7) == Truncation(5, False)
    # The leader cannot say: the old rule, the high watermark.
    assert follower_truncation(follower, 12, 8, leader_epoch=-1, leader_end_offset=-1) == Truncation(8, True)

"""Many partitions on one broker (issue 28): what a partition costs when it is created, when it is
first written and while it sits idle.

- a new partition holds no file descriptor, and its segment files are made by its first write;
  the segment files of all partitions together never hold more descriptors than the process's
  descriptor cache allows (``storage/fd_cache.py``), however many partitions are read and
  written, and every record reads back after its descriptor was closed and opened again;
- a single node's new partition has its leader-epoch checkpoint from its creation: its first
  write rewrites nothing (before issue 28 it was written with fsync, rename and a directory
  fsync on every new partition's first use); a lost first checkpoint is rebuilt from the batches;
- the directory entries a new partition's first write makes (its directory, its segment files)
  are fsynced by the group-commit round that acknowledges it, never later; the power-cut test
  ``tests/chaos/test_power_cut.py::test_acknowledged_writes_survive_power_cuts[group-commit]``
  shows the same on a file system that loses unsynced entries (a mutant marking the entries
  durable without syncing them lost 110,484 acknowledged records there; not committed);
- ``create_topic_async`` lets the event loop serve others between slices of partitions, and the
  topic appears to requests only with all of its partitions;
- an idle partition writes no producer-state snapshot at each clean shutdown.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from eoslog.config import BrokerConfig
from eoslog.errors import Errors
from eoslog.records import build_batch, decode_records, iter_batch_headers
from eoslog.replica import ReplicaManager
from eoslog.storage import LogManager, PartitionLog, TopicError, leader_epoch
from eoslog.storage.fd_cache import SEGMENT_FILES
from eoslog.storage.leader_epoch import CHECKPOINT_FILE, EpochEntry
from eoslog.storage.log_manager import _CREATE_SLICE
from eoslog.types import TopicPartition

CLOCK_MS = 1_700_000_000_000


def batch(value: bytes) -> bytes:
    return build_batch([(None, value, ())], timestamp=CLOCK_MS)


def manager(directory: Path, *, replicated: bool = False) -> LogManager:
    config = BrokerConfig.load(overrides={"log.dirs": str(directory)})
    logs = LogManager(directory, config.topic_defaults(), lambda: CLOCK_MS, replicated=replicated)
    logs.startup()
    return logs


def values(lg: PartitionLog) -> list[bytes | None]:
    """Every record value of ``lg``, read from its files."""
    data = lg.read(0, 1 << 20, upper_bound=lg.log_end_offset).records
    return [r.value for pos, h in iter_batch_headers(data) for r in decode_records(data[pos:pos + h.size])]


def open_descriptors_under(directory: Path) -> list[str]:
    """The partitions' files under ``directory`` this process holds open (not the log directory's lock)."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(directory.resolve())) and not target.endswith("/.lock"):
            out.append(target)
    return out


@pytest.fixture
def small_cache() -> Iterator[int]:
    """The process's segment-descriptor cache at 8 descriptors for the test."""
    capacity = SEGMENT_FILES.capacity
    SEGMENT_FILES.capacity = 8
    try:
        yield 8
    finally:
        SEGMENT_FILES.capacity = capacity


def test_descriptors_stay_within_the_cache_however_many_partitions(tmp_path: Path, small_cache: int) -> None:
    logs = manager(tmp_path / "data")
    logs.create_topic("t", 60)
    assert open_descriptors_under(tmp_path) == [], "a new partition holds a descriptor"
    assert not list((tmp_path / "data" / "t-0").glob("*.log")), "a new partition's segment exists before a write"
    for round_ in range(3):
        for p in range(60):
            logs.logs[("t", p)].append_as_leader(batch(f"{p}-{round_}".encode()))
            assert len(open_descriptors_under(tmp_path)) <= small_cache
    assert (tmp_path / "data" / "t-0" / "00000000000000000000.txnindex").exists()
    for p in range(60):  # each read opens the segment again: the cache evicted it long ago
        assert values(logs.logs[("t", p)]) == [f"{p}-{r}".encode() for r in range(3)]
        assert len(open_descriptors_under(tmp_path)) <= small_cache
    logs.shutdown()
    assert open_descriptors_under(tmp_path) == []
    reopened = manager(tmp_path / "data")
    assert reopened.had_clean_shutdown
    assert values(reopened.logs[("t", 59)]) == [b"59-0", b"59-1", b"59-2"]
    reopened.shutdown()


def test_a_new_partitions_first_write_does_not_rewrite_its_leader_epoch_checkpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = manager(tmp_path / "data")
    logs.create_topic("t", 3)
    checkpoint = tmp_path / "data" / "t-1" / CHECKPOINT_FILE
    assert checkpoint.read_text() == "0\n1\n0 0\n", "a single node's partition starts in epoch 0 (Kafka's file)"
    before = checkpoint.stat()
    replaced: list[Path] = []
    monkeypatch.setattr(leader_epoch, "atomic_write", lambda path, data: replaced.append(path))
    replicas = ReplicaManager(0, logs, lambda: CLOCK_MS, group_commit=True)
    tp = TopicPartition("t", 1)

    async def produce() -> Errors:
        result = await replicas.append_records({tp: batch(b"first")}, required_acks=-1, timeout_ms=5000)
        return result[tp].error

    assert asyncio.run(produce()) is Errors.NONE
    after = checkpoint.stat()
    assert replaced == [] and (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert logs.logs[("t", 1)].epochs.entries == [EpochEntry(0, 0)]


def test_a_lost_first_checkpoint_is_rebuilt_from_the_batches(tmp_path: Path) -> None:
    """The first checkpoint of a cache is written without an fsync: a crash may lose it, and the
    cache is then rebuilt from the leader epochs the batches carry."""
    logs = manager(tmp_path / "data", replicated=True)
    logs.create_topic("t", 1)
    lg = logs.logs[("t", 0)]
    lg.leader_epoch = 3
    lg.epochs.assign(3, 0)  # a replica made leader in epoch 3 (make_leader)
    lg.append_as_leader(batch(b"a"))
    lg.append_as_leader(batch(b"b"))
    lg.flush()
    (lg.dir / CHECKPOINT_FILE).unlink()  # what a power cut before any writeback leaves
    logs.release_log_dir_lock()  # (a crash: no clean shutdown)
    reopened = manager(tmp_path / "data", replicated=True)
    assert reopened.logs[("t", 0)].epochs.entries == [EpochEntry(3, 0)]


def test_a_new_partitions_directory_entries_are_synced_by_the_round_that_acknowledges_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = manager(tmp_path / "data")
    logs.create_topic("t", 2)
    synced: list[str] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real_fsync(fd)))
    replicas = ReplicaManager(0, logs, lambda: CLOCK_MS, group_commit=True)
    tp = TopicPartition("t", 0)
    acknowledged_after: list[list[str]] = []

    async def produce(value: bytes) -> None:
        result = await replicas.append_records({tp: batch(value)}, required_acks=-1, timeout_ms=5000)
        assert result[tp].error is Errors.NONE
        acknowledged_after.append(list(synced))

    asyncio.run(produce(b"first"))
    data = str((tmp_path / "data").resolve())
    assert f"{data}/t-0" in acknowledged_after[0], "the new segment's name was not made durable"
    assert data in acknowledged_after[0], "the new partition directory's name was not made durable"
    assert f"{data}/t-1" not in synced, "an unwritten partition's directory was synced"
    synced.clear()
    asyncio.run(produce(b"second"))
    assert synced == [], "directories synced again with no new entry"


def test_topic_creation_yields_to_the_event_loop_and_appears_whole(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    logs = manager(tmp_path / "data")
    partitions = 1000
    made = [0]  # logs made so far
    new_log = logs._new_log
    monkeypatch.setattr(logs, "_new_log", lambda info, p, d: (made.__setitem__(0, made[0] + 1), new_log(info, p, d))[1])
    seen: list[tuple[int, int | None]] = []  # at each turn of a concurrent task: (made, partitions visible)

    async def run() -> None:
        done = asyncio.Event()

        async def watch() -> None:
            while not done.is_set():
                visible = None if "big" not in logs.topics else sum(("big", p) in logs.logs for p in range(partitions))
                seen.append((made[0], visible))
                await asyncio.sleep(0)

        watcher = asyncio.create_task(watch())
        creating = asyncio.create_task(logs.create_topic_async("big", partitions))
        await asyncio.sleep(0)  # the creation has begun: the name is taken
        with pytest.raises(TopicError) as refused:
            await logs.create_topic_async("big", 1)
        assert refused.value.error is Errors.TOPIC_ALREADY_EXISTS
        await creating
        done.set()
        await watcher

    asyncio.run(run())
    between_slices = {m for m, _ in seen if 0 < m < partitions}
    assert len(between_slices) >= partitions // _CREATE_SLICE - 1, "the loop was held while the logs were made"
    assert {v for _, v in seen} <= {None, partitions}, "a topic was visible with some of its partitions"
    assert seen[-1] == (partitions, partitions)
    assert manager_reads_topic(tmp_path / "data", "big") == partitions


def manager_reads_topic(directory: Path, name: str) -> int:
    """The partition count ``topics.json`` holds for ``name`` (a restart sees the topic)."""
    import json

    return next(t["partitions"] for t in json.loads((directory / "topics.json").read_text())["topics"]
                if t["name"] == name)


def test_an_idle_partition_writes_no_snapshot_at_shutdown(tmp_path: Path) -> None:
    logs = manager(tmp_path / "data")
    logs.create_topic("t", 2)
    logs.logs[("t", 0)].append_as_leader(batch(b"a"))
    logs.shutdown()
    assert [p.name for p in (tmp_path / "data" / "t-0").glob("*.snapshot")] == ["00000000000000000001.snapshot"]
    assert not list((tmp_path / "data" / "t-1").glob("*.snapshot")), "an empty log wrote a snapshot"
    snapshot = tmp_path / "data" / "t-0" / "00000000000000000001.snapshot"
    written = snapshot.stat().st_mtime_ns
    for _ in range(2):  # restarts with nothing written: nothing rewritten
        logs = manager(tmp_path / "data")
        logs.shutdown()
    assert snapshot.stat().st_mtime_ns == written
    logs = manager(tmp_path / "data")
    logs.logs[("t", 0)].append_as_leader(batch(b"b"))
    logs.shutdown()
    assert (tmp_path / "data" / "t-0" / "00000000000000000002.snapshot").exists()

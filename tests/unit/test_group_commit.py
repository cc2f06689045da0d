"""Group commit (log.flush.policy=group-commit, issue 14) in the replica layer: an acks=all
produce is answered only after an fsync round covered it, consumers read nothing unsynced,
concurrent produces to many partitions share rounds, and a truncation voids a round that
started before it. The power-cut tests (tests/chaos/test_power_cut.py) show the same on a
file system that drops unsynced writes."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from eoslog.config import BrokerConfig, ConfigError
from eoslog.errors import Errors
from eoslog.records import build_batch
from eoslog.replica import FetchParams, FetchPartition, IsolationLevel, ReplicaManager
from eoslog.storage import LogManager
from eoslog.types import TopicPartition

CLOCK_MS = 1_700_000_000_000


def batch(value: bytes) -> bytes:
    return build_batch([(None, value, ())], timestamp=CLOCK_MS)


def manager(tmp_path: Path, partitions: int = 1) -> ReplicaManager:
    config = BrokerConfig.load(overrides={"log.dirs": str(tmp_path)})
    logs = LogManager(tmp_path, config.topic_defaults(), lambda: CLOCK_MS)
    logs.startup()
    logs.create_topic("t", partitions, {})
    return ReplicaManager(0, logs, lambda: CLOCK_MS, group_commit=True)


def test_policy_resolves_by_mode() -> None:
    def resolved(**overrides: str) -> bool:
        return BrokerConfig.load(overrides=overrides).group_commit

    assert resolved() is True  # single node: durable by default
    assert resolved(**{"zookeeper.connect": "127.0.0.1:2181"}) is False  # a cluster: Kafka's behaviour
    assert resolved(**{"log.flush.policy": "kafka"}) is False
    assert resolved(**{"log.flush.policy": "group-commit", "zookeeper.connect": "127.0.0.1:2181"}) is True
    with pytest.raises(ConfigError):
        resolved(**{"log.flush.policy": "sometimes"})


def test_acks_all_is_answered_after_the_fsync_that_covers_it(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    rm = manager(tmp_path)
    tp = TopicPartition("t", 0)
    synced: list[int] = []
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)

    async def run() -> None:
        task = asyncio.create_task(rm.append_records({tp: batch(b"a")}, required_acks=-1, timeout_ms=5000))
        await asyncio.sleep(0)  # appended, the round not yet run
        partition = rm.get_partition(tp)
        assert partition is not None
        assert partition.log.log_end_offset == 1 and partition.high_watermark == 0
        params = FetchParams(-1, 0, 1, 1 << 20, IsolationLevel.READ_UNCOMMITTED)
        [fetched] = await rm.fetch_messages(params, [FetchPartition(tp, 0, 1 << 20)])
        assert fetched.records == b"", "a consumer read a record no fsync covers yet"
        result = (await task)[tp]
        assert result.error is Errors.NONE and synced, "acknowledged before any fsync"
        assert partition.high_watermark == 1 and partition.log.recovery_point == 1
        # acks=1 is answered at once (not durable: Kafka's contract for acks=1) and synced in the background.
        one = await rm.append_records({tp: batch(b"b")}, required_acks=1, timeout_ms=5000)
        assert one[tp].error is Errors.NONE and partition.high_watermark == 1
        await rm.wait_for_replication(tp, 2, 5000)
        assert partition.high_watermark == 2

    asyncio.run(run())


def test_concurrent_produces_share_fsync_rounds(tmp_path: Path) -> None:
    rm = manager(tmp_path, partitions=4)
    assert rm.group_commit is not None

    async def run() -> None:
        requests = [rm.append_records({TopicPartition("t", i % 4): batch(b"%d" % i)}, required_acks=-1,
                                      timeout_ms=5000) for i in range(200)]
        results = await asyncio.gather(*requests)
        assert all(r[tp].error is Errors.NONE for r in results for tp in r)

    asyncio.run(run())
    stats = rm.group_commit.stats
    assert stats.offsets_synced == 200
    assert stats.rounds < 200 / 4, f"{stats.rounds} rounds for 200 concurrent produces: no grouping"


def test_a_truncation_voids_a_round_that_began_before_it(tmp_path: Path) -> None:
    rm = manager(tmp_path)
    tp = TopicPartition("t", 0)
    asyncio.run(rm.append_records({tp: batch(b"a") + b""}, required_acks=1, timeout_ms=5000))
    log = rm.logs.logs[("t", 0)]
    log.append_as_leader(batch(b"b"))
    plan = log.begin_sync()
    assert plan is not None and plan.target == 2
    log.truncate_to(1)
    log.append_as_leader(batch(b"c"))  # offset 1 again, other (unsynced) data
    for fd in plan.fds:
        os.close(fd)
    log.end_sync(plan)
    assert log.recovery_point < 2, "a round begun before a truncation marked the new data durable"

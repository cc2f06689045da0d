"""Group commit (log.flush.policy=group-commit, issue 14) in the replica layer: an acks=all
produce is answered only after an fsync round covered it, consumers read nothing unsynced,
concurrent produces to many partitions share rounds, and a truncation voids a round that
started before it; a follower reports (its next fetch offset) only what it fsynced. The
power-cut tests (tests/chaos/test_power_cut.py) show the same on a file system that drops
unsynced writes."""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from eoslog.client.versions import ApiVersionTable
from eoslog.cluster.channel import BrokerChannel
from eoslog.cluster.fetcher import FetcherSettings, ReplicaFetcher
from eoslog.config import BrokerConfig, ConfigError
from eoslog.errors import Errors
from eoslog.protocol.api_keys import ApiKey
from eoslog.records import build_batch
from eoslog.replica import FetchParams, FetchPartition, IsolationLevel, ReplicaManager
from eoslog.replica.group_commit import RETRY_WITHOUT_DESCRIPTORS_S
from eoslog.stats import LOG_FLUSH
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
    assert resolved(**{"zookeeper.connect": "127.0.0.1:2181"}) is True  # a cluster too (issue 28)
    assert resolved(**{"log.flush.policy": "kafka"}) is False
    assert resolved(**{"log.flush.policy": "kafka", "zookeeper.connect": "127.0.0.1:2181"}) is False
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


def test_a_round_short_of_descriptors_leaves_its_partitions_to_a_later_round(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The process out of descriptors (clients' sockets took them) while a round takes one per
    segment: nothing is acknowledged and no ``synced`` caller answered before a later round has
    synced the partition, and the log directory stays online (before: EMFILE took it offline and
    halted the broker)."""
    rm = manager(tmp_path)
    tp = TopicPartition("t", 0)
    partition = rm.get_partition(tp)
    assert partition is not None and rm.group_commit is not None
    out_of_descriptors = [True]
    real_dup = os.dup

    def dup(fd: int) -> int:
        if out_of_descriptors[0]:
            raise OSError(errno.EMFILE, "Too many open files")
        return real_dup(fd)

    monkeypatch.setattr(os, "dup", dup)

    async def run() -> None:
        assert rm.group_commit is not None
        produce = asyncio.create_task(rm.append_records({tp: batch(b"a")}, required_acks=-1, timeout_ms=30_000))
        follower = asyncio.create_task(rm.group_commit.synced([partition]))
        for _ in range(3):  # rounds come and go, each short of a descriptor
            await asyncio.sleep(2 * RETRY_WITHOUT_DESCRIPTORS_S)
        assert not produce.done() and not follower.done(), "answered before any round synced it"
        assert partition.high_watermark == 0 and partition.log.recovery_point == 0
        assert partition.log.log_dir.offline is None, "out of descriptors taken for a failed disk"
        out_of_descriptors[0] = False
        result = (await asyncio.wait_for(produce, 10))[tp]
        await asyncio.wait_for(follower, 10)
        assert result.error is Errors.NONE
        assert partition.high_watermark == 1 and partition.log.recovery_point == 1

    asyncio.run(run())


def test_group_commit_fsyncs_are_counted_in_the_flush_metric(tmp_path: Path) -> None:
    """kafka_log_logflushstats_logflush_seconds (and the EoslogSlowFsync alert on it) sees the
    group-commit rounds' fdatasyncs, the single node's default way to flush."""
    rm = manager(tmp_path)

    def flushes() -> float:
        return LOG_FLUSH.count

    before = flushes()
    result = asyncio.run(rm.append_records({TopicPartition("t", 0): batch(b"a")}, required_acks=-1,
                                           timeout_ms=5000))
    assert result[TopicPartition("t", 0)].error is Errors.NONE
    assert flushes() > before, "a group-commit fsync was not counted"


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
    for f in plan.files:
        os.close(f.fd)
    log.end_sync(plan)
    assert log.recovery_point < 2, "a round begun before a truncation marked the new data durable"


# -- a follower (cluster mode) -------------------------------------------------------------------

FOLLOWER_ID = 1
FETCH_VERSIONS = ApiVersionTable({ApiKey.FETCH: (4, 12), ApiKey.OFFSET_FOR_LEADER_EPOCH: (3, 4)})


def replica_manager(directory: Path, node_id: int, group_commit: bool) -> ReplicaManager:
    config = BrokerConfig.load(overrides={"log.dirs": str(directory)})
    logs = LogManager(directory, config.topic_defaults(), lambda: CLOCK_MS)
    logs.startup()
    logs.create_topic("t", 2, {})
    return ReplicaManager(node_id, logs, lambda: CLOCK_MS, leads_every_local_log=False, group_commit=group_commit)


class Loopback:
    """The follower's channel to its leader, in process: OffsetForLeaderEpoch and Fetch answered
    by the leader's ReplicaManager. Notes every fetch offset the follower reports above its own
    recovery point (what the leader would count as replicated while a power cut could take it)."""

    def __init__(self, leader: ReplicaManager, follower: ReplicaManager) -> None:
        self.leader, self.follower = leader, follower
        self.unsynced_reports: list[tuple[TopicPartition, int, int]] = []  # (tp, fetch offset, recovery point)
        self.fetches_with_data = 0

    async def send(self, broker_id: int, make: Callable[[ApiVersionTable], Any]) -> Any:
        request = make(FETCH_VERSIONS)
        if type(request).__name__ == "OffsetForLeaderEpochRequest":
            topics = []
            for t in request.topics:
                parts = []
                for p in t.partitions:
                    partition = self.leader.partition_or_error(TopicPartition(t.topic, p.partition))
                    error, epoch, end = partition.last_offset_for_leader_epoch(p.current_leader_epoch, p.leader_epoch)
                    parts.append(SimpleNamespace(partition=p.partition, error_code=error.value, leader_epoch=epoch,
                                                 end_offset=end))
                topics.append(SimpleNamespace(topic=t.topic, partitions=parts))
            return SimpleNamespace(topics=topics)
        wanted = []
        for t in request.topics:
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition)
                follower_log = self.follower.logs.logs[(tp.topic, tp.partition)]
                if p.fetch_offset > follower_log.recovery_point:
                    self.unsynced_reports.append((tp, p.fetch_offset, follower_log.recovery_point))
                wanted.append(FetchPartition(tp, p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch))
        params = FetchParams(request.replica_id, int(request.max_wait.total_seconds() * 1000), request.min_bytes,
                             request.max_bytes, IsolationLevel.READ_UNCOMMITTED)
        fetched = await self.leader.fetch_messages(params, wanted)
        self.fetches_with_data += any(f.records for f in fetched)
        return SimpleNamespace(responses=[SimpleNamespace(topic=w.tp.topic, partitions=[SimpleNamespace(
            partition_index=w.tp.partition, error_code=f.error.value, high_watermark=f.high_watermark,
            log_start_offset=f.log_start_offset, records=f.data)]) for w, f in zip(wanted, fetched, strict=True)])


@pytest.mark.parametrize("policy", ["group-commit", "kafka"])
def test_a_follower_reports_only_what_it_fsynced(tmp_path: Path, policy: str) -> None:
    """The follower's fetch offset moves the leader's high watermark (acks=all answers): under
    group commit it never passes the follower's fsynced end, and one round covers a fetch's
    partitions. Under Kafka's policy the follower reports what it merely wrote (asserted, so
    the check is seen to catch it)."""
    durable = policy == "group-commit"
    leader = replica_manager(tmp_path / "leader", 0, durable)
    follower = replica_manager(tmp_path / "follower", FOLLOWER_ID, durable)
    tps = [TopicPartition("t", 0), TopicPartition("t", 1)]
    for tp in tps:
        leader.create_partition(tp).make_leader(0, (0, FOLLOWER_ID), (0, FOLLOWER_ID))
        follower.create_partition(tp).make_follower(0, 0, (0, FOLLOWER_ID), (0, FOLLOWER_ID))
    channel = Loopback(leader, follower)
    settings = FetcherSettings(broker_id=FOLLOWER_ID, max_wait_ms=200, min_bytes=1, max_bytes=1 << 20,
                               partition_max_bytes=1 << 20, backoff_s=0.05)
    acked_unsynced = 0

    async def run() -> None:
        nonlocal acked_unsynced
        fetcher = ReplicaFetcher(0, cast(BrokerChannel, channel), follower, settings)
        for tp in tps:
            fetcher.add(tp, 0)
        try:
            for i in range(10):
                results = await leader.append_records({tp: batch(b"%d" % i) for tp in tps}, required_acks=-1,
                                                      timeout_ms=10_000)
                assert all(r.error is Errors.NONE for r in results.values()), results
                for tp in tps:
                    acked = leader.partition_or_error(tp).high_watermark
                    assert acked >= i + 1
                    acked_unsynced += follower.logs.logs[(tp.topic, tp.partition)].recovery_point < acked
        finally:
            fetcher.close()

    asyncio.run(run())
    if durable:
        assert not channel.unsynced_reports, f"the follower reported unsynced offsets: {channel.unsynced_reports[:5]}"
        assert acked_unsynced == 0
        assert follower.group_commit is not None
        assert follower.group_commit.stats.rounds <= channel.fetches_with_data, "a round per partition, not per fetch"
    else:
        assert channel.unsynced_reports and acked_unsynced > 0, "Kafka's policy: acknowledged before any fsync"

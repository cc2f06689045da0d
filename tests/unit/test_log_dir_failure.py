"""A failed fsync is never acknowledged (issue 30): the file's log directory goes offline (Kafka's
LogDirFailureChannel, KIP-112), its partitions answer KAFKA_STORAGE_ERROR and nothing of them is
made durable or visible again, with no log directory left the broker's halt runs, and the
metrics and readiness say so. The fsync fails here by a patched ``os.fsync``/``os.fdatasync``
raising EIO; tests/chaos/test_fsync_failure.py shows the same on a file system that loses the
writes as Linux does, then a power cut.

Mutants shown (not committed): group commit syncing the partitions of a failed round again 0.5 s
later (the code before issue 30) fails the first test (the produce waiting on the failed round is
acknowledged); ``sync_round`` ignoring ``sync_files``' failures fails the first test and the
follower's (the follower reports the offsets of its failed round, the leader acknowledges).
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import cast

import pytest
from prometheus_client import CollectorRegistry
from test_group_commit import FOLLOWER_ID, Loopback, replica_manager

from eoslog.cluster.channel import BrokerChannel
from eoslog.cluster.fetcher import FetcherSettings, ReplicaFetcher
from eoslog.config import BrokerConfig
from eoslog.errors import Errors
from eoslog.metrics.broker import LogDirCollector
from eoslog.metrics.server import READY_PATH, MetricsServer
from eoslog.records import build_batch
from eoslog.replica import FetchParams, FetchPartition, IsolationLevel, ReplicaManager
from eoslog.storage import AppendOrigin, LogManager
from eoslog.storage.log_dir_failure import KafkaStorageError
from eoslog.storage.log_manager import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_FILE
from eoslog.types import TopicPartition
from support.harness import free_port

CLOCK_MS = 1_700_000_000_000
TP = TopicPartition("t", 0)
SRC = Path(__file__).resolve().parents[2] / "src" / "eoslog"


def batch(value: bytes) -> bytes:
    return build_batch([(None, value, ())], timestamp=CLOCK_MS)


class Broker:
    """A log manager and replica layer over ``directory``; ``halts`` counts the broker's halt."""

    def __init__(self, directory: Path, *, group_commit: bool = True, overrides: dict[str, str] | None = None) -> None:
        self.halts = 0
        config = BrokerConfig.load(overrides={"log.dirs": str(directory)})
        self.logs = LogManager(directory, config.topic_defaults(), lambda: CLOCK_MS, on_all_log_dirs_failed=self.halt)
        self.logs.startup()
        self.logs.create_topic("t", 2, overrides or {})
        self.replicas = ReplicaManager(0, self.logs, lambda: CLOCK_MS, group_commit=group_commit)

    def halt(self) -> None:
        self.halts += 1

    async def produce(self, value: bytes, acks: int = -1) -> Errors:
        return (await self.replicas.append_records({TP: batch(value)}, required_acks=acks, timeout_ms=5000))[TP].error

    async def fetch(self) -> Errors:
        params = FetchParams(-1, 0, 1, 1 << 20, IsolationLevel.READ_UNCOMMITTED)
        [fetched] = await self.replicas.fetch_messages(params, [FetchPartition(TP, 0, 1 << 20)])
        return fetched.error


class FailingSync:
    """``os.fsync`` / ``os.fdatasync`` failing with EIO for the files ``fails(path)`` picks, once armed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fails: Callable[[str], bool]) -> None:
        self.fails = fails
        self.armed = False
        self.failed: list[str] = []
        for name in ("fsync", "fdatasync"):
            real = getattr(os, name)
            monkeypatch.setattr(os, name, lambda fd, real=real: self._sync(fd, real))

    def _sync(self, fd: int, real: Callable[[int], None]) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if self.armed and self.fails(path):
            self.armed = False
            self.failed.append(path)
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real(fd)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    yield Broker(tmp_path / "data")


def test_a_failed_group_commit_fsync_is_never_acknowledged(broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    sync = FailingSync(monkeypatch, lambda path: path.endswith(".log") and "/t-0/" in path)
    partition = broker.replicas.partition_or_error(TP)

    async def run() -> None:
        assert await broker.produce(b"synced") is Errors.NONE
        sync.armed = True
        assert await broker.produce(b"lost") is Errors.KAFKA_STORAGE_ERROR, "the waiting acks=all got no error"
        assert sync.failed and not sync.armed
        await asyncio.sleep(0)  # (the directory's handler runs on the loop, after the failing call)
        # The fsync would succeed now, and write nothing of what the failed one lost: never tried.
        assert await broker.produce(b"later") is Errors.KAFKA_STORAGE_ERROR
        assert await broker.produce(b"later", acks=1) is Errors.KAFKA_STORAGE_ERROR
        assert await broker.fetch() is Errors.KAFKA_STORAGE_ERROR

    asyncio.run(run())
    assert partition.high_watermark == 1 and partition.log.recovery_point == 1
    assert broker.logs.offline_log_dirs == [broker.logs.log_dir] and broker.logs.live_log_dirs == []
    assert broker.halts == 1, "with its only log directory offline the broker halts"
    # The other partition of the directory is offline too, and the background jobs skip them all.
    other = broker.replicas.partition_or_error(TopicPartition("t", 1))
    assert other.check_enough_replicas_reach_offset(0) == (True, Errors.KAFKA_STORAGE_ERROR)
    assert list(broker.logs.all_logs()) == []


def test_a_failed_flush_of_the_kafka_policy_is_never_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """log.flush.policy=kafka: acks do not wait for fsyncs, but an explicit flush (here
    flush.messages=2) that fails takes the directory offline: the recovery point stays below
    what it lost, and nothing is appended (or acknowledged) after it."""
    broker = Broker(tmp_path / "data", group_commit=False, overrides={"flush.messages": "2"})
    sync = FailingSync(monkeypatch, lambda path: path.endswith(".log") and "/t-0/" in path)
    log = broker.logs.logs[("t", 0)]

    async def run() -> None:
        assert await broker.produce(b"a") is Errors.NONE
        assert await broker.produce(b"b") is Errors.NONE  # flushed: the recovery point is 2
        assert await broker.produce(b"c") is Errors.NONE
        sync.armed = True
        assert await broker.produce(b"d") is Errors.KAFKA_STORAGE_ERROR  # its flush failed
        assert await broker.produce(b"e") is Errors.KAFKA_STORAGE_ERROR

    asyncio.run(run())
    assert sync.failed and log.recovery_point == 2 and log.offline
    with pytest.raises(KafkaStorageError):
        log.flush()


def test_a_failed_fsync_of_a_metadata_file_takes_the_directory_offline(broker: Broker,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint's write-temp/fsync/rename failing at its fsync: the directory goes offline, no
    checkpoint is written again, and the shutdown is not a clean one (the next start recovers)."""
    sync = FailingSync(monkeypatch, lambda path: path.endswith(f"{RECOVERY_POINT_FILE}.tmp"))
    sync.armed = True
    with pytest.raises(OSError):
        broker.logs.checkpoint()
    assert sync.failed and broker.logs.offline_log_dirs and broker.halts == 1
    before = (broker.logs.log_dir / RECOVERY_POINT_FILE).read_bytes()
    broker.logs.checkpoint()  # skipped
    assert asyncio.run(broker.produce(b"x")) is Errors.KAFKA_STORAGE_ERROR
    broker.logs.shutdown()
    assert not (broker.logs.log_dir / CLEAN_SHUTDOWN_FILE).exists()
    assert (broker.logs.log_dir / RECOVERY_POINT_FILE).read_bytes() == before


def test_a_follower_whose_fsync_fails_never_reports_the_offsets(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Cluster mode, group commit: the follower's next fetch offset would move the leader's high
    watermark (the acks=all answers). Its round failing, it reports nothing of it again."""
    leader = replica_manager(tmp_path / "leader", 0, True)
    follower = replica_manager(tmp_path / "follower", FOLLOWER_ID, True)
    leader.create_partition(TP).make_leader(0, (0, FOLLOWER_ID), (0, FOLLOWER_ID))
    follower.create_partition(TP).make_follower(0, 0, (0, FOLLOWER_ID), (0, FOLLOWER_ID))
    sync = FailingSync(monkeypatch, lambda path: "/follower/t-0/" in path and path.endswith(".log"))
    channel = Loopback(leader, follower)
    settings = FetcherSettings(broker_id=FOLLOWER_ID, max_wait_ms=100, min_bytes=1, max_bytes=1 << 20,
                               partition_max_bytes=1 << 20, backoff_s=0.05)

    async def run() -> Errors:
        fetcher = ReplicaFetcher(0, cast(BrokerChannel, channel), follower, settings)
        fetcher.add(TP, 0)
        try:
            first = await leader.append_records({TP: batch(b"a")}, required_acks=-1, timeout_ms=10_000)
            assert first[TP].error is Errors.NONE
            sync.armed = True
            second = await leader.append_records({TP: batch(b"b")}, required_acks=-1, timeout_ms=1_000)
            return second[TP].error
        finally:
            fetcher.close()

    assert asyncio.run(run()) is Errors.REQUEST_TIMED_OUT
    assert sync.failed and follower.logs.offline_log_dirs
    assert not channel.unsynced_reports, f"the follower reported unsynced offsets: {channel.unsynced_reports}"
    assert leader.partition_or_error(TP).high_watermark == 1


def test_the_metrics_and_readiness_show_an_offline_log_directory(broker: Broker,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    registry = CollectorRegistry()
    registry.register(LogDirCollector(broker.logs, broker.replicas))

    def not_ready() -> str | None:  # as the broker's: every log directory online
        return f"offline: {broker.logs.offline_log_dirs}" if broker.logs.offline_log_dirs else None

    def sample(name: str, labels: dict[str, str] | None = None) -> float | None:
        return registry.get_sample_value(name, labels)

    directory = str(broker.logs.log_dir.absolute())
    assert sample("kafka_log_logmanager_offlinelogdirectorycount") == 0
    assert sample("kafka_log_logmanager_logdirectoryoffline", {"logdirectory": directory}) == 0
    assert sample("kafka_server_replicamanager_offlinereplicacount") == 0
    server = MetricsServer(registry, "127.0.0.1", free_port(), not_ready=not_ready)

    def get(path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}", timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    async def run() -> None:
        await server.start()
        try:
            assert await asyncio.to_thread(get, READY_PATH) == (200, "ready\n")
            sync = FailingSync(monkeypatch, lambda path: "/t-1/" in path)
            sync.armed = True
            assert await broker.produce(b"x") is Errors.NONE  # partition 0: fine
            broker.logs.logs[("t", 1)].append_as_leader(batch(b"y"))  # (an empty log has nothing to fsync)
            with pytest.raises(KafkaStorageError):
                broker.logs.logs[("t", 1)].flush()
            status, body = await asyncio.to_thread(get, READY_PATH)
            assert status == 503 and directory in body
            _, text = await asyncio.to_thread(get, "/metrics")
            assert re.search(r"^kafka_log_logmanager_offlinelogdirectorycount 1\.0$", text, re.M), text
        finally:
            await server.stop()

    asyncio.run(run())
    assert sample("kafka_log_logmanager_logdirectoryoffline", {"logdirectory": directory}) == 1
    assert sample("kafka_server_replicamanager_offlinereplicacount") == 2


def test_only_fileio_calls_fsync() -> None:
    """Every fsync of eoslog goes through storage/fileio.py, which takes the file's log directory
    offline when it fails: a new one elsewhere could be caught and retried."""
    calls = [f"{path.relative_to(SRC)}:{n}" for path in SRC.rglob("*.py") if path.name != "fileio.py"
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if re.search(r"\bos\.(fsync|fdatasync)\(", line)]
    assert calls == []


def test_an_unclean_start_reads_the_segments_it_revalidates_from_the_disk(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """After a failed write-back Linux keeps the lost pages, clean, in its page cache: recovery
    drops the cached pages of every segment it re-validates (after writing out the dirty ones),
    so that it reads what is on disk. Segments below the recovery point are left alone."""
    broker = Broker(tmp_path / "data", group_commit=False, overrides={"segment.bytes": "200"})
    log = broker.logs.logs[("t", 0)]
    for i in range(4):
        log.append_as_leader(batch(b"%d" % i))  # a roll per batch: each roll fsyncs the last segment
    log.append_as_leader(batch(b"unsynced"))
    broker.logs.checkpoint()
    bases = [seg.base_offset for seg in log.segments]
    floor = max(b for b in bases if b <= log.recovery_point)  # recovery re-validates from this segment on
    assert floor > 0, bases  # segments below it are not re-read
    dropped: list[Path] = []

    def fadvise(fd: int, offset: int, length: int, advice: int) -> None:
        if advice == os.POSIX_FADV_DONTNEED:
            dropped.append(Path(os.readlink(f"/proc/self/fd/{fd}")))

    monkeypatch.setattr(os, "posix_fadvise", fadvise)
    broker.logs.release_log_dir_lock()  # (no clean shutdown: opened again as after a crash)
    LogManager(tmp_path / "data", broker.logs.topic_defaults, lambda: CLOCK_MS).startup()
    assert sorted(int(p.stem) for p in dropped if p.parent.name == "t-0") == [b for b in bases if b >= floor]


def test_with_two_log_dirs_a_failed_one_takes_only_its_partitions_offline(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """JBOD (KIP-112): partitions are spread over ``log.dirs``; a failed fsync in one directory
    takes its partitions offline, the other directory's keep taking writes and reads, the broker
    does not halt, and DescribeLogDirs says which is which. After a restart every acknowledged
    record is found in its partition's directory."""
    first, second = tmp_path / "d1", tmp_path / "d2"
    config = BrokerConfig.load(overrides={"log.dirs": f"{first},{second}"})
    halts: list[int] = []
    logs = LogManager(config.log_dirs, config.topic_defaults(), lambda: CLOCK_MS, on_all_log_dirs_failed=lambda:
                      halts.append(1))
    logs.startup()
    logs.create_topic("t", 4)
    placed = {p: logs.log_dir_of("t", p) for p in range(4)}
    assert sorted(placed.values()) == [first, first, second, second], placed
    replicas = ReplicaManager(0, logs, lambda: CLOCK_MS, group_commit=True)
    doomed = next(p for p, d in placed.items() if d == second)
    survivor = next(p for p, d in placed.items() if d == first)
    sync = FailingSync(monkeypatch, lambda path: path.endswith(".log") and f"/d2/t-{doomed}/" in path)

    async def produce(p: int, value: bytes) -> Errors:
        tp = TopicPartition("t", p)
        return (await replicas.append_records({tp: batch(value)}, required_acks=-1, timeout_ms=5000))[tp].error

    async def fetch(p: int) -> Errors:
        params = FetchParams(-1, 0, 1, 1 << 20, IsolationLevel.READ_UNCOMMITTED)
        [fetched] = await replicas.fetch_messages(params, [FetchPartition(TopicPartition("t", p), 0, 1 << 20)])
        return fetched.error

    async def run() -> None:
        for p in range(4):
            assert await produce(p, b"before") is Errors.NONE
        sync.armed = True
        assert await produce(doomed, b"lost") is Errors.KAFKA_STORAGE_ERROR
        await asyncio.sleep(0)
        assert await produce(survivor, b"after") is Errors.NONE
        assert await fetch(survivor) is Errors.NONE
        assert await fetch(doomed) is Errors.KAFKA_STORAGE_ERROR

    asyncio.run(run())
    assert sync.failed and logs.offline_log_dirs == [second] and logs.live_log_dirs == [first] and not halts
    described = {d.path: d for d in replicas.describe_log_dirs(None)}
    assert described[str(second.resolve())].error is Errors.KAFKA_STORAGE_ERROR
    assert described[str(first.resolve())].error is Errors.NONE
    assert {r.tp.partition for r in described[str(first.resolve())].replicas} == {p for p, d in placed.items()
                                                                                 if d == first}
    assert not (second / CLEAN_SHUTDOWN_FILE).exists()
    logs.shutdown()
    assert (first / CLEAN_SHUTDOWN_FILE).exists() and not (second / CLEAN_SHUTDOWN_FILE).exists()

    again = LogManager(config.log_dirs, config.topic_defaults(), lambda: CLOCK_MS)
    again.startup()
    assert {p: again.log_dir_of("t", p) for p in range(4)} == placed
    assert again.logs[("t", survivor)].log_end_offset == 2
    assert all(again.logs[("t", p)].log_end_offset >= 1 for p in range(4))
    again.shutdown()


def test_a_replica_deleted_under_a_parked_fetch_and_an_fsync_round_leaves_its_directory_online(
        broker: Broker) -> None:
    """A partition deleted (its replica reassigned away, its topic deleted) while a fetch is
    parked on it and its writes wait for the next group-commit round: the parked fetch, answered
    at the deletion, and the round find its files closed and its directory gone, which is no
    I/O failure of the log directory. In a CI run a broker took its only log directory offline
    so, and halted, while partitions moved to a new broker."""
    partition = broker.replicas.partition_or_error(TP)
    group_commit = broker.replicas.group_commit
    assert group_commit is not None

    async def run() -> None:
        assert await broker.produce(b"synced") is Errors.NONE
        params = FetchParams(-1, 5000, 1, 1 << 20, IsolationLevel.READ_UNCOMMITTED)
        parked = asyncio.ensure_future(broker.replicas.fetch_messages(params, [FetchPartition(TP, 1, 1 << 20)]))
        await asyncio.sleep(0.05)
        assert not parked.done()
        partition.append_records_to_leader(batch(b"unsynced"), AppendOrigin.CLIENT, 1)
        partition.log.roll()  # a new segment: its entry in the partition's directory is synced next round
        group_commit.written(partition)  # the round is due: it runs at this task's next await
        # As the leadership layer removes a replica (cluster/leadership.py _remove), no await in between.
        broker.logs.remove_replica("t", 0)
        broker.replicas.high_watermark_moved(TP)
        await group_commit.sync_round()
        [fetched] = await parked
        assert fetched.error in (Errors.KAFKA_STORAGE_ERROR, Errors.NOT_LEADER_OR_FOLLOWER,
                                 Errors.UNKNOWN_TOPIC_OR_PARTITION), fetched
        with pytest.raises(KafkaStorageError, match="its replica was deleted from this broker"):
            partition.log.read(0, 1 << 20)

    asyncio.run(run())
    assert broker.logs.offline_log_dirs == [] and broker.halts == 0
    broker.logs.create_topic("u", 1, {})  # the directory goes on serving
    assert broker.logs.logs[("u", 0)].log_end_offset == 0

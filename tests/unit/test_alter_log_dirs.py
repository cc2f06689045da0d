"""AlterReplicaLogDirs (KIP-113): a replica moved to another log directory of its broker while it
is written to — idempotent batches, committed, aborted and open transactions — ends up byte for
byte what the same writes made of a partition that never moved, with the same producer state,
aborted-transaction index, last stable offset and high watermark, before and after a restart; a
move cut by a crash (mid-copy, or between the swap's two renames) resumes or completes at the next
start. The reference partition gets every write the moving one gets, in the same turn.

Mutants (not committed): the swap taken once the future log reaches the high watermark instead of
the log end offset (group commit keeps the high watermark behind the log end under writes) —
``test_a_replica_moves_while_written_to`` fails (records missing after the move); the copy not
truncating the future log where the current one diverged — ``test_a_future_log_follows_a_truncated
_current_log`` fails."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from eoslog.config import BrokerConfig
from eoslog.errors import Errors
from eoslog.records import build_batch
from eoslog.replica import FetchParams, FetchPartition, IsolationLevel, ReplicaManager, alter_log_dirs
from eoslog.storage import AppendOrigin, LogManager, PartitionLog
from eoslog.storage.log_dir_failure import KafkaStorageError
from eoslog.types import TopicPartition

CLOCK_MS = 1_700_000_000_000
MOVING, REFERENCE = TopicPartition("t", 0), TopicPartition("ref", 0)
IDEMPOTENT, TRANSACTIONAL = 1000, 2000


class Node:
    """A single node with two log directories; ``t-0`` and ``ref-0`` both start in the first."""

    def __init__(self, root: Path, *, create: bool = True) -> None:
        self.dirs = [root / "d1", root / "d2"]
        config = BrokerConfig.load(overrides={"log.dirs": ",".join(map(str, self.dirs))})
        self.logs = LogManager(self.dirs, config.topic_defaults(), lambda: CLOCK_MS)
        self.logs.startup()
        if create:
            self.logs.create_topic("t", 1)
            self.logs.create_topic("pad", 1)  # (so that ref-0 lands in d1 too)
            self.logs.create_topic("ref", 1)
        self.replicas = ReplicaManager(0, self.logs, lambda: CLOCK_MS, group_commit=True)
        self.sequences: dict[int, int] = {}

    def log(self, tp: TopicPartition) -> PartitionLog:
        return self.logs.logs[(tp.topic, tp.partition)]

    def append(self, pid: int, count: int, *, transactional: bool = False) -> None:
        """The same batch to both partitions."""
        seq = self.sequences.get(pid, 0)
        self.sequences[pid] = seq + count
        records = build_batch([(None, b"v%d-%d" % (pid, seq + i) * 20, ()) for i in range(count)],
                              timestamp=CLOCK_MS, producer_id=pid, producer_epoch=0, base_sequence=seq,
                              transactional=transactional)
        for tp in (MOVING, REFERENCE):
            partition = self.replicas.partition_or_error(tp)
            partition.append_records_to_leader(records, AppendOrigin.CLIENT, 1)
            self.replicas._written(partition)

    def marker(self, pid: int, commit: bool) -> None:
        for tp in (MOVING, REFERENCE):
            assert self.replicas.write_txn_marker(tp, pid, 0, 0, commit) is Errors.NONE

    async def read_committed(self, tp: TopicPartition) -> tuple[bytes, tuple[tuple[int, int], ...]]:
        params = FetchParams(-1, 0, 1, 64 << 20, IsolationLevel.READ_COMMITTED)
        [fetched] = await self.replicas.fetch_messages(params, [FetchPartition(tp, 0, 64 << 20)])
        assert fetched.error is Errors.NONE
        assert fetched.aborted is not None
        return fetched.data, tuple((a.producer_id, a.first_offset) for a in fetched.aborted)  # (what the wire carries)

    async def settle(self) -> None:
        assert self.replicas.group_commit is not None
        await self.replicas.group_commit.sync_round()


async def moved_to(node: Node, target: Path) -> None:
    """Until the partition is in ``target`` (each turn of the loop lets the copy take a step); a
    move that stopped fails here rather than spinning."""
    for _ in range(100_000):
        if node.logs.log_dir_of("t", 0) == target:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"t-0 is still in {node.logs.log_dir_of('t', 0)}, future: {node.logs.futures}")


def state(lg: PartitionLog) -> tuple[object, ...]:
    """Everything of a partition the move must carry: its records, producer state, open
    transactions, aborted transactions, offsets."""
    segments = b"".join(s.log_path.read_bytes() for s in lg.segments)
    ps = lg.producer_state
    # (Without the LSO each .txnindex entry notes: where the log stood when it was indexed, which a
    # copy indexing many batches at a time notes later — as a Kafka follower does. Nothing reads it.)
    aborted = [(a.producer_id, a.first_offset, a.last_offset) for a in lg.aborted_transactions(0, lg.log_end_offset)]
    producers = {pid: (e.producer_epoch, list(e.batches), e.coordinator_epoch, e.current_txn_first_offset)
                 for pid, e in ps.producers.items()}
    return (segments, producers, ps.ongoing, ps.unreplicated, aborted,
            lg.last_stable_offset,
            lg.high_watermark, lg.log_start_offset, lg.log_end_offset, lg.producer_state.first_unstable_offset,
            [(e.epoch, e.start_offset) for e in lg.epochs.entries])


def assert_same(node: Node) -> None:
    assert node.log(MOVING).log_end_offset > 0
    assert state(node.log(MOVING)) == state(node.log(REFERENCE))


def test_a_replica_moves_while_written_to(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(alter_log_dirs, "STEP_BYTES", 4096)  # many turns: writes land between them
    node = Node(tmp_path)
    d1, d2 = node.dirs

    async def run() -> None:
        for i in range(60):
            node.append(IDEMPOTENT, 5)
            node.append(TRANSACTIONAL, 3, transactional=True)
            node.marker(TRANSACTIONAL, commit=i % 3 != 0)
        await node.settle()
        assert node.logs.log_dir_of("t", 0) == d1
        old = node.log(MOVING)
        assert node.replicas.alter_replica_log_dirs({MOVING: str(d2)}) == {MOVING: Errors.NONE}
        described = {d.path: d for d in node.replicas.describe_log_dirs({MOVING})}
        [future] = described[str(d2.resolve())].replicas
        assert future.is_future and future.offset_lag == node.log(MOVING).log_end_offset
        turns = 0
        while node.logs.log_dir_of("t", 0) != d2:
            turns += 1
            assert turns < 10_000
            node.append(IDEMPOTENT, 2)
            if turns % 4 == 1:
                node.append(TRANSACTIONAL, 2, transactional=True)
            elif turns % 4 == 3:
                node.marker(TRANSACTIONAL, commit=turns % 8 == 3)
            await asyncio.sleep(0)
        assert turns > 5  # the move took many turns, each with writes
        node.append(IDEMPOTENT, 2)
        node.append(TRANSACTIONAL, 4, transactional=True)  # left open: the LSO stays at its start
        await node.settle()
        assert_same(node)
        assert node.log(MOVING).last_stable_offset < node.log(MOVING).high_watermark
        assert await node.read_committed(MOVING) == await node.read_committed(REFERENCE)
        assert node.logs.futures == {}
        assert not [p for p in d1.iterdir() if p.name.startswith("t-0")]
        # A reader that held the old log across the move (a coordinator's loader between two chunks)
        # gets an error, and the directory the log left stays online.
        with pytest.raises(KafkaStorageError, match="moved to another log directory"):
            old.read(0, 1 << 20)
        assert node.logs.offline_log_dirs == []

    asyncio.run(run())
    assert [(d.path, r.is_future) for d in node.replicas.describe_log_dirs({MOVING}) for r in d.replicas] == [
        (str(d2.resolve()), False)]
    node.logs.shutdown()
    again = Node(tmp_path, create=False)
    assert again.logs.log_dir_of("t", 0) == d2
    assert_same(again)
    again.logs.shutdown()


def test_moving_a_replica_is_refused_as_kafka_refuses_it(tmp_path: Path) -> None:
    node = Node(tmp_path)
    d1, d2 = node.dirs
    answers = node.replicas.alter_replica_log_dirs({
        MOVING: str(tmp_path / "elsewhere"), TopicPartition("nope", 0): str(d2),
        TopicPartition("t", 7): str(d2), REFERENCE: str(d1)})
    assert answers == {MOVING: Errors.LOG_DIR_NOT_FOUND, TopicPartition("nope", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION,
                       TopicPartition("t", 7): Errors.REPLICA_NOT_AVAILABLE, REFERENCE: Errors.NONE}
    assert node.logs.futures == {} and node.logs.preferred_log_dirs == {("t", 7): d2}
    node.logs.dir_states[d2].fail("a test", OSError(5, "Input/output error"))
    assert node.replicas.alter_replica_log_dirs({MOVING: str(d1), REFERENCE: str(d2)}) == {
        MOVING: Errors.NONE, REFERENCE: Errors.KAFKA_STORAGE_ERROR}  # (already there; the target offline)


def test_a_move_cut_mid_copy_resumes_at_the_next_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(alter_log_dirs, "STEP_BYTES", 2048)
    node = Node(tmp_path)
    d2 = node.dirs[1]

    async def cut() -> None:
        for i in range(40):
            node.append(IDEMPOTENT, 5)
            node.append(TRANSACTIONAL, 3, transactional=True)
            node.marker(TRANSACTIONAL, commit=i % 2 == 0)
        node.append(TRANSACTIONAL, 3, transactional=True)  # open across the crash
        await node.settle()
        node.replicas.alter_replica_log_dirs({MOVING: str(d2)})
        future = node.logs.futures[("t", 0)]
        while future.log_end_offset < node.log(MOVING).log_end_offset // 2:
            await asyncio.sleep(0)
        node.replicas.log_dir_mover.shutdown()  # the process dies here: nothing is closed or flushed

    asyncio.run(cut())
    node.logs.release_log_dir_lock()
    again = Node(tmp_path, create=False)
    [(key, future)] = again.logs.futures.items()
    assert key == ("t", 0) and future.log_dir.path == d2 and future.log_end_offset > 0

    async def resume() -> None:
        again.replicas.log_dir_mover.resume()
        await moved_to(again, d2)
        again.append(TRANSACTIONAL, 1, transactional=True)
        again.marker(TRANSACTIONAL, commit=True)
        await again.settle()

    again.sequences = {IDEMPOTENT: 200, TRANSACTIONAL: 123}
    asyncio.run(resume())
    assert_same(again)
    again.logs.shutdown()


def test_a_swap_cut_between_its_renames_is_completed_at_the_next_start(tmp_path: Path) -> None:
    node = Node(tmp_path)
    d1, d2 = node.dirs

    async def copy() -> None:
        for i in range(10):
            node.append(TRANSACTIONAL, 3, transactional=True)
            node.marker(TRANSACTIONAL, commit=i % 2 == 0)
        await node.settle()
        node.logs.create_future_log("t", 0, d2)
        future = node.logs.futures[("t", 0)]
        source = node.log(MOVING)
        future.append_as_follower(source.read(0, 1 << 20, upper_bound=source.log_end_offset).records)
        assert future.log_end_offset == source.log_end_offset
        future.flush()
        # The swap's first rename done, the process killed before the second.
        source.dir.rename(source.dir.with_name("t-0.deleted"))

    asyncio.run(copy())
    node.logs.release_log_dir_lock()
    again = Node(tmp_path, create=False)
    assert again.logs.log_dir_of("t", 0) == d2 and again.logs.futures == {}
    assert not (d1 / "t-0.deleted").exists() and not list(d2.glob("*-future"))
    assert_same(again)
    again.logs.shutdown()


def test_a_future_log_follows_a_truncated_current_log(tmp_path: Path) -> None:
    """The current log loses its tail after the copy took it (a follower truncated by its new
    leader): the future log is cut there too before it copies on (leader epochs, as Kafka's
    ReplicaAlterLogDirsThread), so the moved log holds what the current one held at the swap."""
    node = Node(tmp_path)
    d2 = node.dirs[1]

    async def run() -> None:
        for _ in range(10):
            node.append(IDEMPOTENT, 3)
        await node.settle()
        node.logs.create_future_log("t", 0, d2)
        future = node.logs.futures[("t", 0)]
        source = node.log(MOVING)
        future.append_as_follower(source.read(0, 1 << 20, upper_bound=source.log_end_offset).records)
        # Both logs cut back to offset 15 and then written in a new epoch, as a follower would be.
        for tp in (MOVING, REFERENCE):
            lg = node.log(tp)
            lg.truncate_to(15)
            lg.leader_epoch = 1
            lg.epochs.assign(1, 15)
            lg.append_as_leader(build_batch([(None, b"new", ())] * 7, timestamp=CLOCK_MS), AppendOrigin.COORDINATOR)
            lg.update_high_watermark(lg.log_end_offset)
        assert future.log_end_offset == 30 and source.log_end_offset == 22
        node.replicas.log_dir_mover.resume()
        await moved_to(node, d2)
        await node.settle()

    asyncio.run(run())
    assert_same(node)
    node.logs.shutdown()


def test_no_move_starts_while_any_log_dir_is_offline(tmp_path: Path) -> None:
    """Kafka makes no future log while a log directory is offline (the replica may still be there)."""
    dirs = [tmp_path / f"d{i}" for i in (1, 2, 3)]
    config = BrokerConfig.load(overrides={"log.dirs": ",".join(map(str, dirs))})
    logs = LogManager(dirs, config.topic_defaults(), lambda: CLOCK_MS)
    logs.startup()
    logs.create_topic("t", 1)
    replicas = ReplicaManager(0, logs, lambda: CLOCK_MS)
    assert logs.log_dir_of("t", 0) == dirs[0]
    logs.dir_states[dirs[2]].fail("a test", OSError(5, "Input/output error"))
    assert replicas.alter_replica_log_dirs({MOVING: str(dirs[1])}) == {MOVING: Errors.KAFKA_STORAGE_ERROR}
    assert logs.futures == {} and not list(dirs[1].glob("*-future"))

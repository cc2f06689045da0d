"""The share coordinator and a share-partition leader, driven directly over a real log on a
controllable clock (ManualScheduler: acquisition locks run out by advancing it, never by
sleeping). ``reload`` builds a second coordinator over the same ``__share_group_state`` and a
second share-partition over it: what a broker killed at that point comes back to.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from eoslog.config import BrokerConfig
from eoslog.coordinator.share import (
    DeliveryState,
    ShareCoordinator,
    SharePartitionKey,
    StateBatch,
    StateWrite,
)
from eoslog.coordinator.share.persister import LocalPersister
from eoslog.coordinator.share.records import decode_key, decode_value, encode_snapshot
from eoslog.coordinator.share.state import ShareGroupOffset, combine
from eoslog.coordinator.timers import ManualScheduler
from eoslog.errors import Errors
from eoslog.records import ControlRecordType, build_batch, build_control_batch
from eoslog.replica import ReplicaManager
from eoslog.share.partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    LogBounds,
    SharePartition,
    ShareSettings,
)
from eoslog.share.record_state import IllegalRecordStateTransition, RecordState, transition
from eoslog.storage import AppendOrigin
from eoslog.types import TopicPartition
from support.leader_log import append

T = TypeVar("T")
TP = TopicPartition("q", 0)
TOPIC_ID = uuid.UUID(int=42)
KEY = SharePartitionKey("g", TOPIC_ID, 0)
LOCK_MS = 30_000
ACCEPT, RELEASE, REJECT, GAP, RENEW = (int(AcknowledgeType.ACCEPT), int(AcknowledgeType.RELEASE),
                                        int(AcknowledgeType.REJECT), int(AcknowledgeType.GAP),
                                        int(AcknowledgeType.RENEW))


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.get_event_loop().run_until_complete(coro)


@pytest.fixture(autouse=True)
def loop() -> Any:
    lp = asyncio.new_event_loop()
    asyncio.set_event_loop(lp)
    yield lp
    lp.close()


class Harness:
    def __init__(self, tmp_path: Path, limit: int = 5, reset: str = "earliest", read_committed: bool = False,
                 per_snapshot: int = 500, max_locks: int = 2000) -> None:
        self.sched = ManualScheduler(1_000_000)
        self.config = BrokerConfig.load(overrides={
            "log.dirs": str(tmp_path), "share.coordinator.state.topic.num.partitions": "3",
            "share.coordinator.snapshot.update.records.per.snapshot": str(per_snapshot)})
        from eoslog.storage import LogManager

        self.logs = LogManager(tmp_path, self.config.topic_defaults(), self.sched.now_ms)
        self.logs.startup()
        self.logs.create_topic("q", 1)
        self.replicas = ReplicaManager(0, self.logs, self.sched.now_ms)
        self.settings = ShareSettings(LOCK_MS, limit, max_locks, read_committed, reset)
        self.coord = ShareCoordinator.for_broker(self.config, self.replicas, self.sched.now_ms)
        self.coord.ensure_topic()
        self.woken = 0
        self.sp = self._partition()

    def _partition(self) -> SharePartition:
        def wake() -> None:
            self.woken += 1
        return SharePartition(KEY, TP, lambda: self.settings, LocalPersister(self.coord), self.sched, wake)

    def init(self) -> Errors:
        lg = self.logs.get_log("q", 0)
        assert lg is not None
        return run(self.sp.initialize(0, lambda: LogBounds(lg.log_start_offset, lg.high_watermark,
                                                           lg.last_stable_offset)))

    def reload(self) -> SharePartition:
        """A new coordinator loaded from __share_group_state, and a new share-partition over it."""
        self.sp.close()
        self.coord.shutdown()
        self.coord = ShareCoordinator.for_broker(self.config, self.replicas, self.sched.now_ms)
        for p in self.coord.begin_loading():
            self.coord.load_partition_now(p)
        self.sp = self._partition()
        assert self.init() == Errors.NONE
        return self.sp

    def produce(self, n: int, *, producer_id: int = -1, transactional: bool = False, epoch: int = -1,
                seq: int = -1) -> None:
        lg = self.logs.get_log("q", 0)
        assert lg is not None
        batch = build_batch([(b"k", b"v%d" % i, ()) for i in range(n)], timestamp=self.sched.now_ms(),
                            producer_id=producer_id, producer_epoch=epoch, base_sequence=seq,
                            transactional=transactional)
        append(lg, batch)

    def marker(self, producer_id: int, epoch: int, commit: bool) -> None:
        lg = self.logs.get_log("q", 0)
        assert lg is not None
        append(lg, build_control_batch(ControlRecordType.COMMIT if commit else ControlRecordType.ABORT,
                                       producer_id=producer_id, producer_epoch=epoch, coordinator_epoch=0,
                                       timestamp=self.sched.now_ms()), AppendOrigin.COORDINATOR)

    def fetch(self, member: str, max_records: int = 500) -> list[AcquiredRecords]:
        lg = self.logs.get_log("q", 0)
        assert lg is not None
        partition = self.replicas.get_partition(TP)
        assert partition is not None
        from eoslog.replica.partition import IsolationLevel

        isolation = IsolationLevel.READ_COMMITTED if self.settings.read_committed else IsolationLevel.READ_UNCOMMITTED
        fetched = partition.read_records(self.sp.next_fetch_offset(), 1 << 20, isolation=isolation)
        return self.sp.acquire(member, bytes(fetched.records), fetched.aborted, max_records)

    def ack(self, member: str, first: int, last: int, *types: int) -> Errors:
        return run(self.sp.acknowledge(member, [AcknowledgementBatch(first, last, tuple(types))]))

    def advance(self, ms: int) -> None:
        """Move the clock on, inside the event loop (a released record's write is a task)."""
        in_loop(lambda: self.sched.advance(ms))

    def settle(self) -> None:
        """Let background writes (releases) finish."""
        run(asyncio.sleep(0.01))


def in_loop(call: Callable[[], T]) -> T:
    async def inside() -> T:
        return call()
    return run(inside())


def offsets(ranges: list[AcquiredRecords]) -> list[int]:
    return [o for r in ranges for o in range(r.first_offset, r.last_offset + 1)]


# -- the state table and the combiner ----------------------------------------------------------


def test_record_state_table_refuses_what_it_does_not_list() -> None:
    assert transition(0, RecordState.AVAILABLE, RecordState.ACQUIRED) is RecordState.ACQUIRED
    for current, target in [(RecordState.ACKNOWLEDGED, RecordState.AVAILABLE),
                            (RecordState.ARCHIVED, RecordState.ACQUIRED),
                            (RecordState.AVAILABLE, RecordState.ACKNOWLEDGED),
                            (RecordState.AVAILABLE, RecordState.HELD_BY_TRANSACTION)]:
        with pytest.raises(IllegalRecordStateTransition):
            transition(7, current, target)


def test_combine_lays_newer_ranges_over_older_and_cuts_below_the_start() -> None:
    old = [StateBatch(0, 9, DeliveryState.AVAILABLE, 1)]
    new = [StateBatch(3, 4, DeliveryState.ACKNOWLEDGED, 1), StateBatch(8, 12, DeliveryState.ARCHIVED, 2)]
    assert combine(old, new, 2) == (
        StateBatch(2, 2, DeliveryState.AVAILABLE, 1), StateBatch(3, 4, DeliveryState.ACKNOWLEDGED, 1),
        StateBatch(5, 7, DeliveryState.AVAILABLE, 1), StateBatch(8, 12, DeliveryState.ARCHIVED, 2))
    # neighbours saying the same thing are joined
    assert combine([StateBatch(0, 1, DeliveryState.ARCHIVED, 1)], [StateBatch(2, 3, DeliveryState.ARCHIVED, 1)],
                   0) == (StateBatch(0, 3, DeliveryState.ARCHIVED, 1),)


def test_records_round_trip_in_kafkas_layout() -> None:
    state = ShareGroupOffset(3, 1, 7, 100, 2, 11, 12, (StateBatch(100, 101, DeliveryState.ACKNOWLEDGED, 1),))
    key, value = encode_snapshot(KEY, state)
    # key: int16 type 0, then group (int16 length), uuid, int32 partition: not flexible
    assert key[:2] == b"\x00\x00" and key[2:4] == b"\x00\x01" and key[4:5] == b"g"
    assert key[5:21] == TOPIC_ID.bytes and key[21:] == b"\x00\x00\x00\x00"
    typed = decode_key(key)
    assert typed is not None and typed[1] == KEY
    assert decode_value(typed[0], value) == state


# -- the share coordinator -----------------------------------------------------------------------


def test_coordinator_fences_old_state_and_leader_epochs_and_survives_a_reload(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    c = h.coord
    assert c.initialize_state(KEY, 0, -1) == Errors.NONE
    assert c.initialize_state(KEY, 0, 5) == Errors.FENCED_STATE_EPOCH
    error, state = c.read_state(KEY, 3)
    assert error == Errors.NONE and state is not None and state.start_offset == -1
    assert c.read_state(KEY, 2)[0] == Errors.FENCED_LEADER_EPOCH
    batches = (StateBatch(10, 14, DeliveryState.ACKNOWLEDGED, 1), StateBatch(15, 15, DeliveryState.AVAILABLE, 2))
    assert c.write_state(KEY, StateWrite(0, 3, 10, batches)) == Errors.NONE
    assert c.write_state(KEY, StateWrite(0, 2, 10, ())) == Errors.FENCED_LEADER_EPOCH
    # a re-initialization (AlterShareGroupOffsets) bumps the state epoch: the old leader is fenced
    assert c.initialize_state(KEY, 1, 20) == Errors.NONE
    assert c.write_state(KEY, StateWrite(0, 3, 16, ())) == Errors.FENCED_STATE_EPOCH
    assert c.write_state(KEY, StateWrite(1, 3, 20, (StateBatch(20, 21, DeliveryState.ARCHIVED, 5),))) == Errors.NONE
    h.coord.shutdown()
    again = ShareCoordinator.for_broker(h.config, h.replicas, h.sched.now_ms)
    for p in again.begin_loading():
        again.load_partition_now(p)
    error, state = again.read_state(KEY, -1)
    assert error == Errors.NONE and state is not None
    assert (state.state_epoch, state.start_offset, state.state_batches) == (
        1, 20, (StateBatch(20, 21, DeliveryState.ARCHIVED, 5),))
    assert state.leader_epoch == 3


def test_coordinator_folds_updates_into_a_snapshot_and_prunes_below_it(tmp_path: Path) -> None:
    h = Harness(tmp_path, per_snapshot=3)
    c = h.coord
    assert c.initialize_state(KEY, 0, 0) == Errors.NONE
    for i in range(7):
        assert c.write_state(KEY, StateWrite(0, 0, i + 1, (StateBatch(i, i, DeliveryState.ACKNOWLEDGED, 1),))) \
            == Errors.NONE
    partition = c.partition_for(KEY)
    lg = h.logs.get_log("__share_group_state", partition)
    assert lg is not None
    before = lg.log_end_offset
    assert c.prune() == 1
    assert 0 < lg.log_start_offset < before
    reloaded = ShareCoordinator.for_broker(h.config, h.replicas, h.sched.now_ms)
    for p in reloaded.begin_loading():
        reloaded.load_partition_now(p)
    error, state = reloaded.read_state(KEY, -1)
    assert error == Errors.NONE and state is not None and state.start_offset == 7


# -- a share-partition leader --------------------------------------------------------------------


def test_acquire_ack_and_start_offset(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.produce(10)
    assert h.init() == Errors.NONE
    a = h.fetch("m1", max_records=4)
    assert offsets(a) == [0, 1, 2, 3] and a[0].delivery_count == 1
    b = h.fetch("m2")
    assert offsets(b) == list(range(4, 10))  # never two members at once
    assert h.fetch("m3") == []
    assert h.ack("m2", 0, 0, ACCEPT) == Errors.INVALID_RECORD_STATE  # not m2's
    assert h.sp.start_offset == 0
    assert h.ack("m1", 0, 3, ACCEPT, ACCEPT, RELEASE, REJECT) == Errors.NONE
    assert h.sp.start_offset == 2  # 2 is available again, 3 archived behind it
    assert offsets(h.fetch("m3")) == [2]
    assert h.sp.records[2].delivery_count == 2
    assert h.ack("m3", 2, 2, ACCEPT) == Errors.NONE and h.ack("m2", 4, 9, ACCEPT) == Errors.NONE
    assert h.sp.start_offset == 10 and not h.sp.records


def test_released_records_come_back_with_their_delivery_count_and_archive_at_the_limit(tmp_path: Path) -> None:
    h = Harness(tmp_path, limit=3)
    h.produce(1)
    assert h.init() == Errors.NONE
    for delivery in (1, 2, 3):
        got = h.fetch(f"m{delivery}")
        assert offsets(got) == [0] and got[0].delivery_count == delivery
        assert h.ack(f"m{delivery}", 0, 0, RELEASE) == Errors.NONE
    assert h.fetch("m4") == []  # archived at the limit: the poison record is gone
    assert h.sp.start_offset == 1


def test_lock_timeout_releases_and_a_late_ack_is_refused(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.produce(3)
    assert h.init() == Errors.NONE
    assert offsets(h.fetch("m1")) == [0, 1, 2]
    h.advance(LOCK_MS - 1)
    assert h.fetch("m2") == []
    h.advance(1)
    h.settle()
    assert h.woken >= 1
    assert offsets(h.fetch("m2")) == [0, 1, 2]
    assert h.ack("m1", 0, 2, ACCEPT) == Errors.INVALID_RECORD_STATE


def test_renew_keeps_the_lock(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.produce(2)
    assert h.init() == Errors.NONE
    assert offsets(h.fetch("m1")) == [0, 1]
    h.advance(LOCK_MS - 10)
    assert h.ack("m1", 0, 0, RENEW) == Errors.NONE
    h.advance(20)
    h.settle()
    assert offsets(h.fetch("m2")) == [1]  # 1's lock ran out, 0's was renewed
    assert h.ack("m1", 0, 0, ACCEPT) == Errors.NONE


def test_member_leaving_releases_only_its_records(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.produce(4)
    assert h.init() == Errors.NONE
    h.fetch("m1", 2)
    h.fetch("m2", 2)
    assert in_loop(lambda: h.sp.release_member("m1")) == 2
    h.settle()
    assert offsets(h.fetch("m3")) == [0, 1]
    assert h.ack("m2", 2, 3, ACCEPT) == Errors.NONE


def test_markers_and_aborted_records_are_never_handed_out_under_read_committed(tmp_path: Path) -> None:
    h = Harness(tmp_path, read_committed=True)
    h.produce(2)  # 0, 1
    h.produce(2, producer_id=7, transactional=True, epoch=0, seq=0)  # 2, 3 aborted
    h.marker(7, 0, commit=False)  # 4
    h.produce(1, producer_id=8, transactional=True, epoch=0, seq=0)  # 5 committed
    h.marker(8, 0, commit=True)  # 6
    h.produce(1)  # 7
    assert h.init() == Errors.NONE
    got = offsets(h.fetch("m1"))
    assert got == [0, 1, 5, 7]
    assert h.ack("m1", 0, 1, ACCEPT) == Errors.NONE
    assert h.ack("m1", 5, 5, ACCEPT) == Errors.NONE and h.ack("m1", 7, 7, ACCEPT) == Errors.NONE
    assert h.sp.start_offset == 8


def test_read_uncommitted_hands_out_aborted_records_but_not_markers(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.produce(2, producer_id=7, transactional=True, epoch=0, seq=0)
    h.marker(7, 0, commit=False)
    assert h.init() == Errors.NONE
    assert offsets(h.fetch("m1")) == [0, 1]


def test_acknowledged_state_survives_a_reload_and_unacknowledged_records_come_back(tmp_path: Path) -> None:
    h = Harness(tmp_path, limit=5)
    h.produce(6)
    assert h.init() == Errors.NONE
    assert offsets(h.fetch("m1")) == list(range(6))
    assert h.ack("m1", 0, 1, ACCEPT) == Errors.NONE
    assert h.ack("m1", 3, 3, ACCEPT) == Errors.NONE
    assert h.ack("m1", 4, 4, RELEASE) == Errors.NONE
    # 2 and 5 were acquired when the broker "died": not acknowledged, so not lost
    sp = h.reload()
    assert sp.start_offset == 2
    got = offsets(h.fetch("m2"))
    assert got == [2, 4, 5]  # 3 was acknowledged: never again
    assert sp.records[4].delivery_count == 2  # the release was written with its count


def test_latest_reset_starts_at_the_end_and_is_kept_across_a_reload(tmp_path: Path) -> None:
    h = Harness(tmp_path, reset="latest")
    h.produce(5)
    assert h.init() == Errors.NONE
    assert h.sp.start_offset == 5
    h.produce(2)
    h.reload()
    assert offsets(h.fetch("m")) == [5, 6]


def test_in_flight_records_are_capped(tmp_path: Path) -> None:
    h = Harness(tmp_path, max_locks=3)
    h.produce(5)
    assert h.init() == Errors.NONE
    assert offsets(h.fetch("m1")) == [0, 1, 2]
    assert h.fetch("m2") == []
    assert h.ack("m1", 0, 0, ACCEPT) == Errors.NONE
    assert offsets(h.fetch("m2")) == [3]


def test_a_malformed_acknowledgement_is_refused_whole(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.produce(3)
    assert h.init() == Errors.NONE
    h.fetch("m1")
    assert run(h.sp.acknowledge("m1", [AcknowledgementBatch(0, 2, (ACCEPT, ACCEPT))])) == Errors.INVALID_REQUEST
    assert run(h.sp.acknowledge("m1", [AcknowledgementBatch(0, 0, (9,))])) == Errors.INVALID_REQUEST
    # an offset never handed out: INVALID_REQUEST, as Kafka's "batch record not found"
    assert run(h.sp.acknowledge("m1", [AcknowledgementBatch(0, 0, (ACCEPT,)),
                                       AcknowledgementBatch(5, 5, (ACCEPT,))])) == Errors.INVALID_REQUEST
    assert run(h.sp.acknowledge("m2", [AcknowledgementBatch(0, 0, (ACCEPT,))])) == Errors.INVALID_RECORD_STATE
    assert h.sp.records[0].state is RecordState.ACQUIRED  # nothing applied


# -- acknowledgements inside a producer's transaction (eoslog's extension) ---------------------

STATE_TP = TopicPartition("__share_group_state", 0)


class Verifier:
    """The transaction coordinator's side of the share coordinator's add: answers ``answer``
    and remembers what was added."""

    def __init__(self) -> None:
        self.answer = Errors.NONE
        self.added: list[tuple[str, int, int, TopicPartition]] = []

    async def add_partition(self, transactional_id: str, producer_id: int, producer_epoch: int,
                            tp: TopicPartition) -> Errors:
        if self.answer == Errors.NONE:
            self.added.append((transactional_id, producer_id, producer_epoch, tp))
        return self.answer


def txn_harness(tmp_path: Path, told: bool = True, **kwargs: Any) -> tuple[Harness, Verifier]:
    """A harness whose share coordinator adds to transactions through a Verifier; ``told``: the
    coordinator tells the share-partition the outcomes (else it learns them by reading)."""
    h = Harness(tmp_path, **kwargs)
    verifier = Verifier()
    h.replicas.verifier = verifier  # type: ignore[assignment]
    if told:
        h.coord.outcome_listeners.append(lambda key, pid, committed, offsets: h.sp.transaction_decided(
            pid, committed, offsets))
    return h, verifier


def txn_ack(h: Harness, member: str, first: int, last: int, producer_id: int = 7, epoch: int = 0) -> Errors:
    from eoslog.coordinator.share.coordinator import TransactionalWrite

    return run(h.sp.acknowledge(member, [AcknowledgementBatch(first, last, (ACCEPT,))],
                                TransactionalWrite("t", producer_id, epoch)))


def end_txn(h: Harness, producer_id: int, commit: bool, epoch: int = 0) -> None:
    """The transaction coordinator's marker in the key's ``__share_group_state`` partition."""
    tp = TopicPartition("__share_group_state", h.coord.partition_for(KEY))
    assert in_loop(lambda: h.replicas.write_txn_marker(tp, producer_id, epoch, 0, commit)) == Errors.NONE
    h.settle()


def test_records_accepted_in_a_transaction_are_held_until_it_commits(tmp_path: Path) -> None:
    h, verifier = txn_harness(tmp_path)
    h.produce(4)
    assert h.init() == Errors.NONE
    assert offsets(h.fetch("m1")) == [0, 1, 2, 3]
    assert txn_ack(h, "m1", 0, 1) == Errors.NONE
    assert [a[3].topic for a in verifier.added] == ["__share_group_state"]  # the partition joined the transaction
    assert h.sp.records[0].state is RecordState.HELD_BY_TRANSACTION
    # Held: no lock runs out on them, a member leaving does not release them.
    in_loop(lambda: h.sp.release_member("m1"))
    h.advance(LOCK_MS * 2)
    h.settle()
    assert offsets(h.fetch("m2")) == [2, 3]
    assert h.sp.start_offset == 0
    end_txn(h, 7, commit=True)
    assert h.sp.start_offset == 2 and 1 not in h.sp.records  # acknowledged, and done with
    assert h.ack("m2", 2, 3, ACCEPT) == Errors.NONE
    sp = h.reload()
    assert sp.start_offset == 4 and h.fetch("m3") == []


def test_an_aborted_transaction_releases_its_records_with_their_delivery_counts(tmp_path: Path) -> None:
    h, _ = txn_harness(tmp_path, limit=2)
    h.produce(2)
    assert h.init() == Errors.NONE
    h.fetch("m1")
    assert txn_ack(h, "m1", 0, 1) == Errors.NONE
    end_txn(h, 7, commit=False)
    got = h.fetch("m2")
    assert offsets(got) == [0, 1] and got[0].delivery_count == 2
    assert txn_ack(h, "m2", 0, 0, producer_id=8) == Errors.NONE
    end_txn(h, 8, commit=False)  # offset 0 at the limit: archived
    assert h.ack("m2", 1, 1, RELEASE) == Errors.NONE
    h.settle()
    sp = h.reload()
    assert h.fetch("m3") == [] and sp.start_offset == 2  # both archived, durably


def test_a_transaction_open_across_a_restart_keeps_its_records_held(tmp_path: Path) -> None:
    h, _ = txn_harness(tmp_path)
    h.produce(3)
    assert h.init() == Errors.NONE
    h.fetch("m1")
    assert txn_ack(h, "m1", 0, 1) == Errors.NONE
    h.reload()
    h.coord.outcome_listeners.append(lambda key, pid, committed, offsets: h.sp.transaction_decided(
        pid, committed, offsets))
    assert h.sp.records[0].state is RecordState.HELD_BY_TRANSACTION
    assert offsets(h.fetch("m2")) == [2]  # the held records are not handed out again
    end_txn(h, 7, commit=True)
    assert h.sp.start_offset == 2
    h.reload()
    assert h.sp.start_offset == 2


def test_a_leader_not_told_learns_the_outcome_by_reading_the_state(tmp_path: Path) -> None:
    h, _ = txn_harness(tmp_path, told=False)
    h.produce(4)
    assert h.init() == Errors.NONE
    h.fetch("m1")
    assert txn_ack(h, "m1", 0, 1) == Errors.NONE
    assert txn_ack(h, "m1", 2, 3, producer_id=8) == Errors.NONE
    before = h.sp.held()
    error, stored = run(h.sp.persister.read_state(KEY, 0))
    assert error == Errors.NONE and stored is not None
    assert h.sp.reconcile_held(stored, before) == 0  # both still open
    end_txn(h, 7, commit=True)
    end_txn(h, 8, commit=False)
    error, stored = run(h.sp.persister.read_state(KEY, 0))
    assert stored is not None and in_loop(lambda: h.sp.reconcile_held(stored, before)) == 4
    h.settle()
    assert h.sp.start_offset == 2 and offsets(h.fetch("m2")) == [2, 3]
    # A hold newer than the read is left alone: the read cannot know its transaction.
    assert txn_ack(h, "m2", 2, 3, producer_id=9) == Errors.NONE
    assert h.sp.reconcile_held(stored, before) == 0 and h.sp.records[2].state is RecordState.HELD_BY_TRANSACTION


def test_a_transactional_acknowledgement_needs_every_record_acquired_by_the_member(tmp_path: Path) -> None:
    h, verifier = txn_harness(tmp_path)
    h.produce(3)
    assert h.init() == Errors.NONE
    h.fetch("m1", max_records=1)
    h.fetch("m2")
    assert txn_ack(h, "m1", 0, 1) == Errors.INVALID_RECORD_STATE  # 1 is m2's
    assert h.ack("m1", 0, 0, ACCEPT) == Errors.NONE
    # Done with (below the start offset): fine outside a transaction, refused inside one.
    assert h.ack("m1", 0, 0, ACCEPT) == Errors.NONE
    assert txn_ack(h, "m1", 0, 0) == Errors.INVALID_RECORD_STATE
    from eoslog.coordinator.share.coordinator import TransactionalWrite

    assert run(h.sp.acknowledge("m2", [AcknowledgementBatch(1, 1, (RELEASE,))],
                                TransactionalWrite("t", 7, 0))) == Errors.INVALID_REQUEST
    verifier.answer = Errors.PRODUCER_FENCED  # the transaction coordinator refuses: nothing held
    assert txn_ack(h, "m2", 1, 2) == Errors.PRODUCER_FENCED
    assert h.sp.records[1].state is RecordState.ACQUIRED and h.sp.records[1].pending is None
    assert not verifier.added

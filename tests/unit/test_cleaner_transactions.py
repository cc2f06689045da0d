"""Transaction-aware compaction (KIP-98's log cleaner): aborted data goes, committed data is
compacted by key, markers stay while their transaction has data, open transactions are
never touched, and a reload after cleaning rebuilds the same producer state and LSO."""

from __future__ import annotations

from pathlib import Path

from test_group_compaction import DELETE_RETENTION_MS, Clock, append, make_topic, open_logs

from eoslog.records import build_batch, decode_records
from eoslog.records.batch import DELETE_HORIZON_MASK, BatchHeader, control_marker
from eoslog.storage import LogManager, PartitionLog
from eoslog.storage.cleaner import LogCleaner
from eoslog.storage.producer_state import SNAPSHOT_SUFFIX
from support.leader_log import append as leader_append
from support.leader_log import append_marker

P1, P2, P3, P4 = 7001, 7002, 7003, 7004  # P1, P2, P4 transactional; P3 idempotent only


class Producer:
    def __init__(self, plog: PartitionLog, clock: Clock, pid: int, transactional: bool) -> None:
        self.plog, self.clock, self.pid, self.transactional = plog, clock, pid, transactional
        self.seq = 0

    def send(self, *records: tuple[bytes, bytes]) -> int:
        self.clock.now += 1
        batch = build_batch([(k, v, ()) for k, v in records], timestamp=self.clock.now,
                            producer_id=self.pid, producer_epoch=0, base_sequence=self.seq,
                            transactional=self.transactional)
        self.seq += len(records)
        return leader_append(self.plog, batch).first_offset

    def end(self, commit: bool) -> int:
        return append_marker(self.plog, self.pid, 0, coordinator_epoch=0, commit=commit).first_offset


def batches(plog: PartitionLog) -> list[tuple[BatchHeader, bytes]]:
    out = []
    for seg in plog.segments:
        for pos, h in seg.iter_headers():
            out.append((h, seg.pread(pos, h.size)))
    return out


def markers(plog: PartitionLog) -> dict[int, tuple[bool, bool]]:
    """Marker offset → (is commit, has a delete horizon)."""
    return {h.base_offset: (control_marker(raw)[0], bool(h.attributes & DELETE_HORIZON_MASK))
            for h, raw in batches(plog) if h.is_control}


def read_committed(plog: PartitionLog) -> dict[bytes, bytes]:
    """Latest value per key a read_committed consumer sees below the LSO (it drops the records
    of the transactions the aborted-transaction index reports)."""
    lso = plog.last_stable_offset
    aborted = plog.aborted_transactions(plog.log_start_offset, lso)
    seen: dict[bytes, bytes] = {}
    for h, raw in batches(plog):
        if h.is_control or h.base_offset >= lso:
            continue
        if h.is_transactional and any(
            a.producer_id == h.producer_id and a.first_offset <= h.base_offset <= a.last_offset
            for a in aborted
        ):
            continue
        for r in decode_records(raw):
            assert r.key is not None and r.value is not None
            seen[r.key] = r.value
    return seen


def producer_view(plog: PartitionLog) -> dict[int, tuple[int, int, int]]:
    """pid → (epoch, last sequence, open transaction's first offset)."""
    return {pid: (e.producer_epoch, e.last_seq, e.current_txn_first_offset)
            for pid, e in plog.producer_state.producers.items()}


def segment_files(plog: PartitionLog) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(plog.dir.glob("*.log")))


def reopen(path: Path, clock: Clock, logs: LogManager, drop_snapshots: bool) -> tuple[LogManager, PartitionLog]:
    logs.shutdown()
    if drop_snapshots:  # replay the whole (cleaned) log from its start
        for p in (path / "c-0").glob("*" + SNAPSHOT_SUFFIX):
            p.unlink()
    logs = open_logs(path, clock)
    plog = logs.get_log("c", 0)
    assert plog is not None
    return logs, plog


def test_transactional_compaction(tmp_path: Path) -> None:
    clock = Clock()
    data = tmp_path / "data"
    logs = open_logs(data, clock)
    plog = make_topic(logs, **{"min.cleanable.dirty.ratio": 0.01})
    p1, p2 = Producer(plog, clock, P1, True), Producer(plog, clock, P2, True)
    p3, p4 = Producer(plog, clock, P3, False), Producer(plog, clock, P4, True)

    p1.send((b"a", b"a1"), (b"b", b"b1"))
    p2.send((b"a", b"ABORTED-1"), (b"c", b"ABORTED-1"))
    commit1 = p1.end(commit=True)
    abort1 = p2.end(commit=False)
    p3.send((b"b", b"b2"))  # supersedes all of P1's first transaction
    plog.roll()
    p1.send((b"a", b"a2"))
    p2.send((b"c", b"ABORTED-2"))  # P2's last batch: emptied but kept for its sequence
    p3.send((b"d", b"d1"))
    commit2 = p1.end(commit=True)
    abort2 = p2.end(commit=False)
    plog.roll()
    open_first = p4.send((b"a", b"OPEN"))  # an open transaction: the LSO stays here
    p3.send((b"e", b"e1"))
    plog.roll()
    p3.send((b"f", b"f1"))
    assert plog.last_stable_offset == open_first
    expected = {b"a": b"a2", b"b": b"b2", b"d": b"d1"}
    assert read_committed(plog) == expected
    above_lso = [seg.log_path.read_bytes() for seg in plog.segments if seg.base_offset >= open_first]
    state_before = producer_view(plog)

    cleaner = LogCleaner(logs, clock, 1 << 20)
    stats = cleaner.run()
    assert stats and stats[0].cleaned_up_to == open_first
    assert read_committed(plog) == expected
    assert b"ABORTED" not in segment_files(plog)  # aborted records are physically gone
    assert [seg.log_path.read_bytes() for seg in plog.segments if seg.base_offset >= open_first] == above_lso
    # Every marker's transaction had batches in this pass: all stay, without a horizon.
    assert markers(plog) == {commit1: (True, False), abort1: (False, False),
                             commit2: (True, False), abort2: (False, False)}
    # P2's last batch is kept empty (its sequence), so its last abort stays indexed too.
    p2_batches = [h for h, _ in batches(plog) if h.producer_id == P2 and not h.is_control]
    assert [(h.records_count, h.last_sequence) for h in p2_batches] == [(0, 2)]
    assert [(a.producer_id, a.last_offset) for a in plog.aborted_transactions(0, open_first)] == [
        (P2, abort1), (P2, abort2)]
    assert producer_view(plog) == state_before

    # Second pass: the first commit and abort have no data left: they get a delete horizon.
    cleaner.clean(plog)
    assert markers(plog) == {commit1: (True, True), abort1: (False, True),
                             commit2: (True, False), abort2: (False, False)}
    clock.now += DELETE_RETENTION_MS - 10
    cleaner.clean(plog)
    assert set(markers(plog)) == {commit1, abort1, commit2, abort2}  # horizon not reached
    clock.now += 20
    cleaner.clean(plog)  # past the horizon: both go, with the abort's index entry
    assert markers(plog) == {commit2: (True, False), abort2: (False, False)}
    assert [(a.producer_id, a.last_offset) for a in plog.aborted_transactions(0, open_first)] == [
        (P2, abort2)]
    assert read_committed(plog) == expected

    # Reloads (from the snapshot, then replaying the whole cleaned log) agree.
    lso = plog.last_stable_offset
    for drop in (False, True):
        logs, plog = reopen(data, clock, logs, drop_snapshots=drop)
        assert producer_view(plog) == state_before
        assert plog.last_stable_offset == lso == open_first
        assert read_committed(plog) == expected
        assert [(a.producer_id, a.last_offset) for a in plog.aborted_transactions(0, open_first)] == [
            (P2, abort2)]
    # The open transaction commits; its record becomes the latest value of ``a``.
    p4 = Producer(plog, clock, P4, True)
    p4.end(commit=True)
    assert read_committed(plog)[b"a"] == b"OPEN"
    logs.shutdown()


def test_committed_duplicate_keys_compact_and_aborted_never_shadow(tmp_path: Path) -> None:
    clock = Clock()
    logs = open_logs(tmp_path / "data", clock)
    plog = make_topic(logs, **{"min.cleanable.dirty.ratio": 0.01})
    p1, p2 = Producer(plog, clock, P1, True), Producer(plog, clock, P2, True)
    for i in range(20):
        p1.send((b"k", b"c%d" % i))
        p1.end(commit=True)
        p2.send((b"k", b"ABORTED-%d" % i))  # later than the commit: must not win
        p2.end(commit=False)
    append(plog, clock, [(b"z", b"plain")])
    plog.roll()
    LogCleaner(logs, clock, 1 << 20).run()
    assert read_committed(plog) == {b"k": b"c19", b"z": b"plain"}
    assert b"ABORTED" not in segment_files(plog)
    data_batches = [h for h, _ in batches(plog) if not h.is_control]
    # One record of each producer's data is left: P1's last commit, P2's empty last batch, z.
    assert sorted((h.producer_id, h.records_count) for h in data_batches) == [(-1, 1), (P1, 1), (P2, 0)]
    logs.shutdown()

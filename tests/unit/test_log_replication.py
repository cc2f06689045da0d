"""A partition log as a replica: the leader epoch of every batch lands in the leader-epoch
cache (leader and follower appends alike), a follower's copy is byte-identical to its
leader's, and truncation (KIP-101) takes back the records, producer state, transactions and
epochs above the cut — also after a restart."""

from __future__ import annotations

from pathlib import Path

from eoslog.config import BrokerConfig, TopicConfig
from eoslog.records import ControlRecordType, build_batch, build_control_batch, iter_batch_headers
from eoslog.replica import Partition
from eoslog.storage import AppendOrigin, PartitionLog
from eoslog.storage.leader_epoch import EpochEntry
from eoslog.types import TopicPartition

NOW = 1_700_000_000_000
PID = 7


def open_log(root: Path, clean: bool = True) -> PartitionLog:
    config = TopicConfig(BrokerConfig.load().topic_defaults(), {})
    return PartitionLog(root / "t-0", config, lambda: NOW, clean_shutdown=clean)


def leading(lg: PartitionLog, epoch: int) -> Partition:
    partition = Partition(TopicPartition("t", 0), lg, 1, lambda: NOW)
    partition.make_leader(epoch, (1,), (1,))
    return partition


def data(seq: int, count: int = 1, transactional: bool = False) -> bytes:
    return build_batch([(None, f"v{seq + i}".encode(), ()) for i in range(count)], timestamp=NOW,
                       producer_id=PID, producer_epoch=0, base_sequence=seq, transactional=transactional)


def marker(commit: bool) -> bytes:
    return build_control_batch(ControlRecordType.COMMIT if commit else ControlRecordType.ABORT,
                               producer_id=PID, producer_epoch=0, coordinator_epoch=3, timestamp=NOW)


def raw(lg: PartitionLog) -> bytes:
    return b"".join(seg.log_path.read_bytes() for seg in lg.segments)


def test_epochs_are_cached_and_a_follower_copy_is_identical(tmp_path: Path) -> None:
    leader_log = open_log(tmp_path / "leader")
    leader = leading(leader_log, 2)
    leader.append_records_to_leader(data(0, 3), AppendOrigin.CLIENT, 1)  # 0-2
    leader.append_records_to_leader(data(3), AppendOrigin.CLIENT, 1)  # 3
    leader.make_leader(5, (1,), (1,))
    leader.append_records_to_leader(data(4, 2), AppendOrigin.CLIENT, 1)  # 4-5
    assert leader_log.epochs.entries == [EpochEntry(2, 0), EpochEntry(5, 4)]
    assert [h.partition_leader_epoch for _, h in iter_batch_headers(raw(leader_log))] == [2, 2, 5]

    follower_log = open_log(tmp_path / "follower")
    follower_log.append_as_follower(raw(leader_log))
    assert raw(follower_log) == raw(leader_log)
    assert follower_log.epochs.entries == leader_log.epochs.entries
    assert follower_log.epochs.end_offset_for(2, follower_log.log_end_offset) == (2, 4)


def test_truncation_takes_back_state_above_the_cut(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    leader = leading(lg, 1)
    leader.append_records_to_leader(data(0, 2, transactional=True), AppendOrigin.CLIENT, 1)  # 0-1
    leader.append_records_to_leader(marker(commit=False), AppendOrigin.COORDINATOR, 1)  # 2
    leader.make_leader(4, (1,), (1,))
    leader.append_records_to_leader(data(2, 2, transactional=True), AppendOrigin.CLIENT, 1)  # 3-4
    assert lg.last_stable_offset == 3 and lg.epochs.latest_epoch == 4
    assert [(a.first_offset, a.last_offset) for a in lg.aborted_transactions(0, lg.log_end_offset)] == [(0, 2)]

    assert lg.truncate_to(3) == 3  # the deposed leader's epoch-4 transaction goes
    assert lg.log_end_offset == 3 and lg.high_watermark == 3 and lg.last_stable_offset == 3
    assert lg.epochs.entries == [EpochEntry(1, 0)]
    assert PID not in lg.producer_state.ongoing  # no open transaction is left behind
    assert lg.producer_state.producers[PID].last_seq == 1  # sequence state of the kept batch
    again = leading(lg, 6).append_records_to_leader(data(2), AppendOrigin.CLIENT, 1)
    assert again.first_offset == 3 and not again.duplicate  # seq 2 is new again, not a retry

    lg.truncate_to(2)  # through the abort marker: its txn-index entry goes too
    assert lg.aborted_transactions(0, lg.log_end_offset) == []
    assert lg.last_stable_offset == 0  # the transaction of offsets 0-1 is open again
    lg.close()
    reopened = open_log(tmp_path, clean=False)
    assert reopened.log_end_offset == 2 and reopened.epochs.entries == [EpochEntry(1, 0)]
    assert reopened.last_stable_offset == 0


def test_truncate_fully_and_start_later(tmp_path: Path) -> None:
    lg = open_log(tmp_path)
    leading(lg, 1).append_records_to_leader(data(0, 3), AppendOrigin.CLIENT, 1)
    assert lg.truncate_fully_and_start_at(10) == 10
    assert (lg.log_start_offset, lg.log_end_offset, lg.epochs.entries) == (10, 10, [])
    info = leading(lg, 2).append_records_to_leader(data(3), AppendOrigin.CLIENT, 1)
    assert info.first_offset == 10 and lg.epochs.entries == [EpochEntry(2, 10)]

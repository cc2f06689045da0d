"""The partition-operations layer (eoslog.replica) over real logs: min.insync.replicas,
acks=all held until the ISR has the records, reads bounded by the high watermark for
consumers and by the log end for followers, NOT_LEADER_OR_FOLLOWER, replicated appends
that rebuild producer state, and the internal topics' replication on one broker.

A partition with followers is driven here directly (its followers are simulated by
their fetch offsets); the cluster layer that moves real followers builds on the same
calls."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from eoslog.config import BrokerConfig
from eoslog.coordinator.internal_topic import internal_topic_replication
from eoslog.errors import Errors, KafkaError
from eoslog.records import ControlRecordType, build_batch, build_control_batch, iter_batch_headers
from eoslog.replica import FetchParams, FetchPartition, IsolationLevel, ReplicaManager, TxnMarkerWrite
from eoslog.storage import AppendInfo, AppendOrigin, LogManager
from eoslog.types import TopicPartition

TP = TopicPartition("t", 0)
PID = 4000


class Clock:
    now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def records(*values: bytes, pid: int = -1, seq: int = -1, transactional: bool = False) -> bytes:
    return build_batch([(None, v, ()) for v in values], timestamp=Clock.now, producer_id=pid,
                       producer_epoch=0 if pid >= 0 else -1, base_sequence=seq, transactional=transactional)


def manager(tmp_path: Path, *, single_node: bool = True, **topic_config: str) -> ReplicaManager:
    config = BrokerConfig.load(overrides={"log.dirs": str(tmp_path)})
    logs = LogManager(tmp_path, config.topic_defaults(), Clock())
    logs.startup()
    logs.create_topic(TP.topic, 1, dict(topic_config))
    return ReplicaManager(0, logs, Clock(), leads_every_local_log=single_node)


def produce(rm: ReplicaManager, data: bytes, acks: int = -1, timeout_ms: int = 5_000) -> Errors:
    result = asyncio.run(rm.append_records({TP: data}, required_acks=acks, timeout_ms=timeout_ms))[TP]
    return result.error


def consume(rm: ReplicaManager, offset: int = 0, replica_id: int = -1) -> tuple[Errors, int]:
    """(error, number of records read) of a fetch that does not wait."""
    params = FetchParams(replica_id, 0, 1, 1 << 20, IsolationLevel.READ_UNCOMMITTED)
    [r] = asyncio.run(rm.fetch_messages(params, [FetchPartition(TP, offset, 1 << 20)]))
    return r.error, sum(h.records_count for _, h in iter_batch_headers(r.data))


# -- one node: the ISR is this broker ----------------------------------------------------------------


def test_single_node_acks_all_completes_with_the_append(tmp_path: Path) -> None:
    rm = manager(tmp_path)
    assert produce(rm, records(b"a", b"b")) == Errors.NONE
    partition = rm.get_partition(TP)
    assert partition is not None and partition.isr == {0} and partition.high_watermark == 2
    assert consume(rm) == (Errors.NONE, 2)
    assert rm.produce_purgatory.waiting() == 0


def test_min_insync_replicas_above_the_isr_refuses_acks_all_only(tmp_path: Path) -> None:
    """Kafka's Partition.appendRecordsToLeader: NOT_ENOUGH_REPLICAS before anything is
    written, for acks=all; acks=1 and acks=0 do not ask for replicas."""
    rm = manager(tmp_path, **{"min.insync.replicas": "2"})
    plog = rm.logs.get_log(*TP)
    assert plog is not None
    assert produce(rm, records(b"x"), acks=-1) == Errors.NOT_ENOUGH_REPLICAS
    assert plog.log_end_offset == 0
    assert produce(rm, records(b"x"), acks=1) == Errors.NONE
    assert produce(rm, records(b"y"), acks=0) == Errors.NONE
    assert plog.log_end_offset == 2
    # Coordinators write with acks=all too (a marker to such a partition waits for replicas).
    with pytest.raises(KafkaError) as e:
        rm.append_coordinator_records(TP, records(b"c"))
    assert e.value.error == Errors.NOT_ENOUGH_REPLICAS
    marker = rm.write_txn_marker(TP, PID, 0, 0, commit=True)
    assert marker == Errors.NOT_ENOUGH_REPLICAS and plog.log_end_offset == 2


def test_invalid_acks_and_unknown_partitions(tmp_path: Path) -> None:
    rm = manager(tmp_path)
    assert produce(rm, records(b"x"), acks=2) == Errors.INVALID_REQUIRED_ACKS
    other = TopicPartition("nope", 0)
    result = asyncio.run(rm.append_records({other: records(b"x")}, required_acks=1, timeout_ms=1))
    assert result[other].error == Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_a_transactional_produce_without_a_verifier_fails_loudly(tmp_path: Path) -> None:
    """The KIP-890 check is never skipped: a broker wired without its transaction
    coordinator is a bug, not a reason to append unverified."""
    rm = manager(tmp_path)
    with pytest.raises(RuntimeError, match="verifier"):
        asyncio.run(rm.append_records({TP: records(b"x", pid=PID, seq=0, transactional=True)},
                                      required_acks=-1, timeout_ms=1, transactional_id="tx"))


# -- a leader with a follower ---------------------------------------------------------------------------


def leader_with_follower(tmp_path: Path) -> ReplicaManager:
    rm = manager(tmp_path, single_node=False, **{"min.insync.replicas": "2"})
    rm.create_partition(TP).make_leader(leader_epoch=3, isr=(0, 1), replicas=(0, 1))
    return rm


def test_high_watermark_waits_for_the_isr_and_consumers_read_below_it(tmp_path: Path) -> None:
    rm = leader_with_follower(tmp_path)
    partition = rm.get_partition(TP)
    assert partition is not None
    assert produce(rm, records(b"a", b"b"), acks=1) == Errors.NONE
    assert (partition.log.log_end_offset, partition.high_watermark) == (2, 0)
    assert consume(rm) == (Errors.NONE, 0)  # nothing the follower lacks
    assert consume(rm, replica_id=1) == (Errors.NONE, 2)  # the follower reads to the log end
    assert partition.high_watermark == 0  # it fetched from 0: it has nothing yet
    assert consume(rm, offset=2, replica_id=1) == (Errors.NONE, 0)
    assert partition.high_watermark == 2
    assert consume(rm) == (Errors.NONE, 2)
    assert consume(rm, replica_id=7)[0] == Errors.NOT_LEADER_OR_FOLLOWER  # not a replica


def test_acks_all_waits_in_purgatory_until_the_follower_has_the_records(tmp_path: Path) -> None:
    rm = leader_with_follower(tmp_path)

    async def scenario() -> tuple[Errors, Errors]:
        pending = asyncio.ensure_future(
            rm.append_records({TP: records(b"a")}, required_acks=-1, timeout_ms=10_000))
        await asyncio.sleep(0.05)
        assert not pending.done() and rm.produce_purgatory.waiting() == 1
        params = FetchParams(1, 0, 1, 1 << 20, IsolationLevel.READ_UNCOMMITTED)
        await rm.fetch_messages(params, [FetchPartition(TP, 1, 1 << 20)])  # the follower is at 1
        first = (await asyncio.wait_for(pending, 1))[TP].error
        timed_out = (await rm.append_records({TP: records(b"b")}, required_acks=-1, timeout_ms=50))[TP].error
        return first, timed_out

    assert asyncio.run(scenario()) == (Errors.NONE, Errors.REQUEST_TIMED_OUT)


def test_a_txn_marker_is_acknowledged_only_once_the_isr_has_it(tmp_path: Path) -> None:
    """WriteTxnMarkers is acks=all under every flush policy: a marker acknowledged on append
    alone lets the coordinator complete the transaction while a new leader that never had the
    marker truncates it away (an aborted transaction's records then read as the next one's)."""
    rm = leader_with_follower(tmp_path)
    assert produce(rm, records(b"a", pid=PID, seq=0, transactional=True), acks=1) == Errors.NONE
    abort = [TxnMarkerWrite(TP, PID, 0, 1, False)]

    async def scenario() -> tuple[Errors, Errors]:
        pending = asyncio.ensure_future(rm.write_txn_markers(abort, 10_000))
        await asyncio.sleep(0.05)
        assert not pending.done()  # appended at 1, the follower has nothing yet
        params = FetchParams(1, 0, 1, 1 << 20, IsolationLevel.READ_UNCOMMITTED)
        await rm.fetch_messages(params, [FetchPartition(TP, 2, 1 << 20)])  # the follower has the marker
        [acknowledged] = await asyncio.wait_for(pending, 1)
        await rm.append_records({TP: records(b"b", pid=PID, seq=1, transactional=True)}, required_acks=1,
                                timeout_ms=1_000)
        [unreplicated] = await rm.write_txn_markers(abort, 50)  # the follower never fetches it
        return acknowledged, unreplicated

    assert asyncio.run(scenario()) == (Errors.NONE, Errors.REQUEST_TIMED_OUT)


def test_markers_of_one_partition_go_in_one_append_and_a_refused_one_alone(tmp_path: Path) -> None:
    """Several transactions' markers for one partition are appended together (one write); when
    one of them is refused the append writes nothing and each is written alone: the others are
    still written, in order, and the refused one gets its own error. The log then holds exactly
    the accepted markers, the transactions they end are no longer open, and the listener heard
    each written marker once."""
    rm = manager(tmp_path)
    heard: list[tuple[int, int, bool]] = []
    rm.on_txn_marker(TP.topic, lambda partition, pid, commit: heard.append((partition, pid, commit)))
    for pid in (PID, PID + 1, PID + 2):
        assert produce(rm, records(b"x", pid=pid, seq=0, transactional=True)) == Errors.NONE
    appends: list[TopicPartition] = []
    append = rm.append_coordinator_records

    def counted(tp: TopicPartition, batch: bytes, transaction_version: int = 0) -> AppendInfo:
        appends.append(tp)
        return append(tp, batch, transaction_version)

    rm.append_coordinator_records = counted  # type: ignore[method-assign]
    together = [TxnMarkerWrite(TP, PID, 0, 0, True), TxnMarkerWrite(TP, PID + 1, 0, 0, False)]
    end = rm.partition_or_error(TP).log.log_end_offset
    assert asyncio.run(rm.write_txn_markers(together, 5_000)) == [Errors.NONE, Errors.NONE]
    assert appends == [TP]  # one append for both
    log = rm.partition_or_error(TP).log
    assert log.log_end_offset == end + 2
    # A stale epoch among them (the producer's epoch is 0; -1 is older): the others are written.
    stale = [TxnMarkerWrite(TP, PID + 2, 0, 0, True), TxnMarkerWrite(TP, PID, -1, 0, True)]
    assert asyncio.run(rm.write_txn_markers(stale, 5_000))[0] is Errors.NONE
    assert log.log_end_offset == end + 3
    assert heard == [(0, PID, True), (0, PID + 1, False), (0, PID + 2, True)]
    controls = [h for _, h in iter_batch_headers(log.read(end, 1 << 20).records)]
    assert [(h.producer_id, h.is_control) for h in controls] == [(PID, True), (PID + 1, True), (PID + 2, True)]
    assert log.last_stable_offset == log.log_end_offset


def test_isr_shrinking_below_min_isr_after_the_append(tmp_path: Path) -> None:
    rm = leader_with_follower(tmp_path)
    partition = rm.get_partition(TP)
    assert partition is not None
    assert produce(rm, records(b"a"), acks=1) == Errors.NONE
    assert partition.check_enough_replicas_reach_offset(1) == (False, Errors.NONE)
    partition.update_isr((0,))  # the follower fell behind: the leader alone has offset 0
    assert partition.high_watermark == 1
    assert partition.check_enough_replicas_reach_offset(1) == (True, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    assert produce(rm, records(b"b")) == Errors.NOT_ENOUGH_REPLICAS


def test_a_follower_answers_not_leader_and_takes_replicated_batches(tmp_path: Path) -> None:
    """What the leader wrote (a transaction and its ABORT marker) appended as it is: same
    offsets, and the follower's producer state, LSO and aborted-transaction index match."""
    leader = manager(tmp_path / "leader")
    batch = records(b"t1", b"t2", pid=PID, seq=0, transactional=True)
    leader_partition = leader.get_partition(TP)
    assert leader_partition is not None
    leader_partition.append_records_to_leader(records(b"plain"), AppendOrigin.CLIENT, 1)
    leader_partition.append_records_to_leader(batch, AppendOrigin.CLIENT, -1)
    assert leader.write_txn_marker(TP, PID, 0, 5, commit=False) == Errors.NONE
    copied = leader_partition.log.read(0, 1 << 20).records

    follower = manager(tmp_path / "follower", single_node=False)
    partition = follower.create_partition(TP)
    partition.make_follower(leader_id=1, leader_epoch=3, isr=(1, 0), replicas=(1, 0))
    assert produce(follower, records(b"x"), acks=1) == Errors.NOT_LEADER_OR_FOLLOWER
    assert consume(follower)[0] == Errors.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(KafkaError) as e:
        follower.fetch_offset_for_timestamp(TP, -1, IsolationLevel.READ_UNCOMMITTED)
    assert e.value.error == Errors.NOT_LEADER_OR_FOLLOWER

    info = partition.append_records_to_follower(copied, leader_high_watermark=4)
    assert (info.first_offset, info.last_offset) == (0, 3)
    plog = partition.log
    assert (plog.log_end_offset, plog.high_watermark, plog.last_stable_offset) == (4, 4, 4)
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in plog.aborted_transactions(0, 4)] == [
        (PID, 1, 3)]
    entry = plog.producer_state.producers[PID]
    assert (entry.last_seq, entry.coordinator_epoch, entry.current_txn_first_offset) == (1, 5, -1)
    with pytest.raises(KafkaError):  # offsets below the log end: never appended twice
        partition.append_records_to_follower(copied, leader_high_watermark=4)
    # A follower's copy of a marker carries its coordinator epoch: an older one is fenced later.
    stale = build_control_batch(ControlRecordType.COMMIT, producer_id=PID, producer_epoch=0,
                                coordinator_epoch=4, timestamp=Clock.now)
    partition.make_leader(leader_epoch=4, isr=(0,), replicas=(1, 0))
    with pytest.raises(KafkaError) as e:
        partition.append_records_to_leader(stale, AppendOrigin.COORDINATOR, -1)
    assert e.value.error == Errors.TRANSACTION_COORDINATOR_FENCED


# -- the internal topics on one broker ------------------------------------------------------------------


def test_internal_topic_replication_is_capped_with_a_warning_naming_the_settings() -> None:
    # A single node defaults them to 1 (no warning); set above its one broker, they are capped and named.
    assert internal_topic_replication(BrokerConfig.load(), brokers=1).warning is None
    asked = BrokerConfig.load(overrides={"offsets.topic.replication.factor": "3",
                                         "transaction.state.log.replication.factor": "3",
                                         "transaction.state.log.min.isr": "2"})
    defaults = internal_topic_replication(asked, brokers=1)
    assert (defaults.offsets_replication_factor, defaults.transaction_replication_factor,
            defaults.transaction_min_isr) == (1, 1, 1)
    assert defaults.warning is not None
    for name in ("offsets.topic.replication.factor=3", "transaction.state.log.replication.factor=3",
                 "transaction.state.log.min.isr=2"):
        assert name in defaults.warning
    ones = BrokerConfig.load(overrides={"offsets.topic.replication.factor": "1",
                                        "transaction.state.log.replication.factor": "1",
                                        "transaction.state.log.min.isr": "1"})
    assert internal_topic_replication(ones, brokers=1).warning is None
    cluster_defaults = BrokerConfig.load(overrides={"zookeeper.connect": "127.0.0.1:2181"})  # Kafka's 3 and 2
    three = internal_topic_replication(cluster_defaults, brokers=3)
    assert (three.transaction_replication_factor, three.transaction_min_isr, three.warning) == (3, 2, None)


def test_the_leader_decides_to_shrink_its_isr_and_applies_it_only_once_persisted(tmp_path: Path) -> None:
    """Kafka's Partition.maybeShrinkIsr: a follower not caught up for more than
    replica.lag.time.max.ms is proposed out of the ISR; the partition keeps its ISR (and
    high watermark) until the cluster layer persisted the change and calls update_isr."""
    clock = Clock()
    clock.now = Clock.now
    config = BrokerConfig.load(overrides={"log.dirs": str(tmp_path)})
    logs = LogManager(tmp_path, config.topic_defaults(), clock)
    logs.startup()
    logs.create_topic(TP.topic, 1, {})
    rm = ReplicaManager(0, logs, clock, leads_every_local_log=False)
    partition = rm.create_partition(TP)
    partition.make_leader(leader_epoch=3, isr=(0, 1, 2), replicas=(0, 1, 2))
    partition.append_records_to_leader(records(b"a"), AppendOrigin.CLIENT, 1)
    clock.now += 1_000
    partition.update_follower_fetch_state(1, 1)  # caught up now
    partition.update_follower_fetch_state(2, 0)  # still behind: last caught up at make_leader
    assert partition.maybe_shrink_isr(clock.now, lag_time_max_ms=1_000) is None  # 1000 ms is not more
    clock.now += 1
    assert partition.maybe_shrink_isr(clock.now, lag_time_max_ms=1_000) == (0, 1)
    assert partition.isr == {0, 1, 2} and partition.high_watermark == 0  # proposed, not applied
    assert partition.update_isr((0, 1)) and partition.high_watermark == 1
    assert partition.maybe_shrink_isr(clock.now, lag_time_max_ms=1_000) is None
    partition.make_follower(1, 4, (1, 0), (0, 1, 2))
    assert partition.maybe_shrink_isr(clock.now + 10_000, lag_time_max_ms=1_000) is None  # only a leader decides


def test_a_caught_up_eligible_follower_is_proposed_into_the_isr(tmp_path: Path) -> None:
    """Kafka's Partition.maybeExpandIsr: a follower joins once it has everything up to the high
    watermark and the start of the leader's epoch, and only if eligible (KIP-841)."""
    rm = manager(tmp_path, single_node=False)
    partition = rm.create_partition(TP)
    partition.make_leader(leader_epoch=3, isr=(0,), replicas=(0, 1))
    partition.append_records_to_leader(records(b"a", b"b"), AppendOrigin.CLIENT, 1)  # high watermark 2
    partition.update_follower_fetch_state(1, 1)
    assert partition.maybe_expand_isr(1, lambda _: True) is None  # below the high watermark
    partition.update_follower_fetch_state(1, 2)
    assert partition.maybe_expand_isr(1, lambda _: False) is None  # shutting down, say
    assert partition.maybe_expand_isr(1, lambda _: True) == (0, 1)
    assert partition.isr == {0}  # proposed, not applied
    partition.update_isr((0, 1))
    assert partition.maybe_expand_isr(1, lambda _: True) is None  # already in

"""The transaction coordinator driven directly, on a controllable clock, over real logs.

Markers travel the real path: the coordinator's channel → the broker's ``MarkerSender`` →
``ReplicaManager.write_txn_marker`` → the partition log (and the group coordinator for
``__consumer_offsets``). ``drain`` runs the channel to completion; timeouts and expiry
are reached by advancing a ManualScheduler, never by sleeping. ``reload`` builds a second
coordinator that knows only what is in ``__transaction_state``.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Sequence
from pathlib import Path

import pytest

from eoslog.broker.marker_sender import MarkerSender as BrokerMarkerSender
from eoslog.broker.txn_verifier import LocalTransactionVerifier
from eoslog.config import BrokerConfig
from eoslog.coordinator.group import (
    GroupConfig,
    GroupCoordinator,
    OffsetAndMetadata,
    OffsetsTopic,
    OffsetsTopicConfig,
    TopicPartition,
)
from eoslog.coordinator.internal_topic import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from eoslog.coordinator.producer_id_manager import ProducerIdManager
from eoslog.coordinator.timers import ManualScheduler
from eoslog.coordinator.transaction import (
    MarkerSender,
    TransactionConfig,
    TransactionCoordinator,
    TxnMarker,
    TxnState,
)
from eoslog.coordinator.transaction.log import (
    TransactionLogValue,
    encode_key,
    encode_value,
    transaction_partition_for,
)
from eoslog.coordinator.transaction.state_manager import TransactionStateManager
from eoslog.coordinator.transaction.topic import TransactionStateTopic, TransactionStateTopicConfig
from eoslog.errors import Errors
from eoslog.records import CompressionType, build_batch, decode_records, iter_batch_headers, parse_control_record
from eoslog.replica import ReplicaManager
from eoslog.storage import AppendOrigin, LogManager
from eoslog.storage.producer_state import ProducerStateError

TXN_PARTITIONS = 4
TIMEOUT_MS = 60_000
ABORT_INTERVAL_MS = 10_000
T0, T1, T2 = (TopicPartition("t", p) for p in range(3))


class Harness:
    def __init__(self, tmp_path: Path, **overrides: str) -> None:
        self.sched = ManualScheduler(1_700_000_000_000)
        self.config = BrokerConfig.load(overrides={
            "log.dirs": str(tmp_path), "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
            **overrides,
        })
        self.logs = LogManager(tmp_path, self.config.topic_defaults(), self.sched.now_ms)
        self.logs.startup()
        self.logs.create_topic("t", 3)
        self.replicas = ReplicaManager(0, self.logs, self.sched.now_ms)
        self.producer_ids = ProducerIdManager(tmp_path, 0)
        groups = GroupCoordinator(
            GroupConfig.from_broker_config(self.config),
            OffsetsTopic(self.replicas, OffsetsTopicConfig(4, 1 << 20, CompressionType.NONE), self.sched.now_ms),
            ManualScheduler(self.sched.now_ms()),
        )
        groups.ensure_offsets_topic()
        self.replicas.on_txn_marker(OFFSETS_TOPIC, groups.complete_transaction)
        self.groups = groups
        self.coord = self._coordinator()
        self.coord.ensure_state_topic()
        self.coord.startup()

    def _coordinator(self, sender: MarkerSender | None = None) -> TransactionCoordinator:
        topic = TransactionStateTopic(self.replicas, TransactionStateTopicConfig(TXN_PARTITIONS, 1 << 20),
                                      self.sched.now_ms)

        def leader_for(tp: TopicPartition) -> int | None:
            return 0 if self.replicas.get_partition(tp) is not None else None

        coord = TransactionCoordinator(
            TransactionConfig.from_broker_config(self.config), TransactionStateManager(topic), self.sched,
            self.producer_ids.generate_producer_id, sender or BrokerMarkerSender(self.replicas), leader_for,
            self.groups.partition_for,
        )
        self.replicas.verifier = LocalTransactionVerifier(coord)
        return coord

    def reload(self, sender: MarkerSender | None = None) -> TransactionCoordinator:
        """A fresh coordinator that knows only what is in __transaction_state."""
        self.coord.shutdown()
        self.coord = self._coordinator(sender)
        for p in self.coord.begin_loading():
            self.coord.load_partition_now(p)
        self.coord.startup()
        return self.coord

    def drain(self) -> None:
        asyncio.run(self.coord.markers.drain())

    def init(self, txn_id: str = "tx", timeout_ms: int = TIMEOUT_MS,
             expected: tuple[int, int] | None = None) -> tuple[int, int]:
        r = self.coord.init_producer_id(txn_id, timeout_ms, expected)
        assert r.error == Errors.NONE, r
        return r.producer_id, r.producer_epoch

    def produce(self, pid: int, epoch: int, seq: int, tp: TopicPartition = T0, n: int = 1) -> None:
        partition = self.replicas.get_partition(tp)
        assert partition is not None
        partition.append_records_to_leader(build_batch(
            [(None, f"{pid}-{seq + i}".encode(), ()) for i in range(n)], timestamp=self.sched.now_ms(),
            producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True,
        ), AppendOrigin.CLIENT, -1)

    def begin(self, txn_id: str = "tx", tps: tuple[TopicPartition, ...] = (T0,)) -> tuple[int, int]:
        pid, epoch = self.init(txn_id)
        assert self.coord.add_partitions(txn_id, pid, epoch, list(tps)) == Errors.NONE
        for tp in tps:
            self.produce(pid, epoch, 0, tp, n=2)
        return pid, epoch

    def markers(self, tp: TopicPartition) -> list[tuple[int, int, str, int]]:
        """(offset, producer epoch, COMMIT/ABORT, coordinator epoch) of every marker."""
        plog = self.logs.get_log(tp.topic, tp.partition)
        assert plog is not None
        data = plog.read(0, 1 << 20).records
        out = []
        for pos, h in iter_batch_headers(data):
            if h.is_control:
                kind, coordinator_epoch = parse_control_record(decode_records(data[pos:pos + h.size])[0])
                out.append((h.base_offset, h.producer_epoch, kind.name, coordinator_epoch))
        return out

    def state_of(self, txn_id: str = "tx") -> TxnState:
        return self.coord.state.transactions[txn_id].state

    def lso(self, tp: TopicPartition = T0) -> tuple[int, int]:
        plog = self.logs.get_log(tp.topic, tp.partition)
        assert plog is not None
        return plog.last_stable_offset, plog.log_end_offset


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


# -- InitProducerId ------------------------------------------------------------------------------


def test_init_gives_the_same_producer_id_and_a_new_epoch_each_time(h: Harness) -> None:
    pid, epoch = h.init()
    assert epoch == 0
    assert h.init() == (pid, 1)
    assert h.init("other")[0] != pid
    h.reload()
    assert h.init() == (pid, 2)  # the epoch survived in __transaction_state


@pytest.mark.parametrize(("txn_id", "timeout", "error"), [
    ("", TIMEOUT_MS, Errors.INVALID_REQUEST),
    ("tx", 0, Errors.INVALID_TRANSACTION_TIMEOUT),
    ("tx", 900_001, Errors.INVALID_TRANSACTION_TIMEOUT),
])
def test_init_refusals(h: Harness, txn_id: str, timeout: int, error: str) -> None:
    assert h.coord.init_producer_id(txn_id, timeout).error == error
    assert h.coord.init_producer_id("tx", 900_000).error == Errors.NONE  # the maximum itself is allowed


def test_loading_and_not_coordinator(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.init()
    h.coord.shutdown()
    h.coord = h._coordinator()
    assert h.coord.init_producer_id("tx", TIMEOUT_MS).error == Errors.NOT_COORDINATOR  # nothing owned yet
    h.coord.begin_loading()
    assert h.coord.init_producer_id("tx", TIMEOUT_MS).error == Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert h.coord.list_transactions()[0] == Errors.COORDINATOR_LOAD_IN_PROGRESS
    for p in range(TXN_PARTITIONS):
        h.coord.load_partition_now(p)
    assert h.coord.init_producer_id("tx", TIMEOUT_MS).error == Errors.NONE


def test_kip360_resumption(h: Harness) -> None:
    pid, _ = h.init()
    pid, epoch = h.init()  # epoch 1, previous 0
    assert h.init(expected=(pid, epoch)) == (pid, 2)  # bump from the current epoch
    assert h.init(expected=(pid, 1)) == (pid, 2)  # a retry with the previous: same answer
    assert h.coord.init_producer_id("tx", TIMEOUT_MS, (pid, 0)).error == Errors.PRODUCER_FENCED
    assert h.coord.init_producer_id("tx", TIMEOUT_MS, (pid + 50, 2)).error == Errors.PRODUCER_FENCED


def test_exhausted_epochs_rotate_the_producer_id(h: Harness) -> None:
    # A transactional id 32766 epochs old, as __transaction_state would hold it.
    value = TransactionLogValue(77, 32766, TIMEOUT_MS, TxnState.COMPLETE_COMMIT, frozenset(), 1, 1)
    h.replicas.append_coordinator_records(
        TopicPartition(TRANSACTION_STATE_TOPIC, transaction_partition_for("old", TXN_PARTITIONS)),
        build_batch([(encode_key("old"), encode_value(value), ())], timestamp=1))
    h.reload()
    pid, epoch = h.init("old")
    assert pid != 77 and epoch == 0
    assert h.coord.state.transactions["old"].last_producer_id == 77


# -- the transaction -------------------------------------------------------------------------------


def test_commit_writes_prepare_markers_complete(h: Harness) -> None:
    pid, epoch = h.begin(tps=(T0, T1))
    assert h.state_of() is TxnState.ONGOING
    assert h.coord.add_partitions("tx", pid + 1, epoch, [T2]) == Errors.INVALID_PRODUCER_ID_MAPPING
    assert h.coord.add_partitions("tx", pid, epoch + 1, [T2]) == Errors.PRODUCER_FENCED
    assert h.lso(T0) == (0, 2)
    assert h.coord.end_transaction("tx", pid, epoch, commit=True).error == Errors.NONE
    assert h.state_of() is TxnState.PREPARE_COMMIT
    # Until the markers are written, retries and new work wait.
    assert h.coord.end_transaction("tx", pid, epoch, commit=True).error == Errors.CONCURRENT_TRANSACTIONS
    assert h.coord.add_partitions("tx", pid, epoch, [T2]) == Errors.CONCURRENT_TRANSACTIONS
    assert h.coord.init_producer_id("tx", TIMEOUT_MS).error == Errors.CONCURRENT_TRANSACTIONS
    h.drain()
    assert h.state_of() is TxnState.COMPLETE_COMMIT
    assert h.markers(T0) == [(2, epoch, "COMMIT", 0)] and h.markers(T1) == [(2, epoch, "COMMIT", 0)]
    assert h.markers(T2) == []
    assert h.lso(T0) == (3, 3)
    # A retry after completion succeeds; the other result is a protocol violation.
    assert h.coord.end_transaction("tx", pid, epoch, commit=True).error == Errors.NONE
    assert h.coord.end_transaction("tx", pid, epoch, commit=False).error == Errors.INVALID_TXN_STATE
    assert h.reload() and h.state_of() is TxnState.COMPLETE_COMMIT


def test_abort_and_next_transaction(h: Harness) -> None:
    pid, epoch = h.begin()
    assert h.coord.end_transaction("tx", pid, epoch, commit=False).error == Errors.NONE
    assert h.coord.end_transaction("tx", pid, epoch, commit=True).error == Errors.CONCURRENT_TRANSACTIONS  # pending
    h.drain()
    assert h.coord.end_transaction("tx", pid, epoch, commit=True).error == Errors.INVALID_TXN_STATE
    assert h.state_of() is TxnState.COMPLETE_ABORT and h.markers(T0) == [(2, epoch, "ABORT", 0)]
    plog = h.logs.get_log("t", 0)
    assert plog is not None
    assert [(a.producer_id, a.first_offset) for a in plog.aborted_transactions(0, 3)] == [(pid, 0)]
    # The same producer starts its next transaction from CompleteAbort.
    assert h.coord.add_partitions("tx", pid, epoch, [T1]) == Errors.NONE
    assert h.state_of() is TxnState.ONGOING


def test_end_without_a_transaction_and_an_empty_one(h: Harness) -> None:
    pid, epoch = h.init()
    assert h.coord.end_transaction("tx", pid, epoch, commit=True).error == Errors.INVALID_TXN_STATE
    assert h.coord.add_partitions("tx", pid, epoch, []) == Errors.NONE  # Ongoing, nothing to mark
    assert h.coord.end_transaction("tx", pid, epoch, commit=True).error == Errors.NONE
    h.drain()
    assert h.state_of() is TxnState.COMPLETE_COMMIT
    assert all(h.markers(tp) == [] for tp in (T0, T1, T2))


def test_a_deleted_partition_takes_no_marker(h: Harness) -> None:
    h.logs.create_topic("gone", 1)
    pid, epoch = h.begin(tps=(T0, TopicPartition("gone", 0)))
    h.replicas.delete_topic("gone")
    assert h.coord.end_transaction("tx", pid, epoch, commit=True).error == Errors.NONE
    h.drain()
    assert h.state_of() is TxnState.COMPLETE_COMMIT and len(h.markers(T0)) == 1


# -- fencing and timeouts ------------------------------------------------------------------------------


def test_new_instance_aborts_and_fences_the_old_one(h: Harness) -> None:
    pid, epoch = h.begin()
    result = h.coord.init_producer_id("tx", TIMEOUT_MS)
    assert result.error == Errors.CONCURRENT_TRANSACTIONS
    h.drain()
    # Kafka's zombie fencing as kafka-dump-log.sh shows it: data at epoch e, the ABORT marker at
    # e + 1, the new instance at e + 2.
    assert h.markers(T0) == [(2, epoch + 1, "ABORT", 0)]
    assert h.init() == (pid, epoch + 2)
    assert h.coord.add_partitions("tx", pid, epoch, [T1]) == Errors.PRODUCER_FENCED
    assert h.coord.end_transaction("tx", pid, epoch, commit=True).error == Errors.PRODUCER_FENCED
    with pytest.raises(ProducerStateError, match="epoch"):
        h.produce(pid, epoch, 2)
    assert h.coord.verify_partition("tx", pid, epoch, "t", 0) == Errors.PRODUCER_FENCED


def test_timed_out_transaction_is_aborted_with_a_bumped_epoch(h: Harness) -> None:
    pid, epoch = h.begin(tps=(T0, T1))
    h.sched.advance(TIMEOUT_MS - ABORT_INTERVAL_MS)
    assert h.state_of() is TxnState.ONGOING  # not yet past its timeout
    h.sched.advance(2 * ABORT_INTERVAL_MS)
    assert h.state_of() is TxnState.PREPARE_ABORT
    h.drain()
    assert h.state_of() is TxnState.COMPLETE_ABORT
    assert h.markers(T0) == [(2, epoch + 1, "ABORT", 0)] and h.lso(T0) == (3, 3)
    assert h.coord.end_transaction("tx", pid, epoch, commit=True).error == Errors.PRODUCER_FENCED
    assert h.init() == (pid, epoch + 2)


def test_ongoing_transaction_is_never_expired(tmp_path: Path) -> None:
    h = Harness(tmp_path, **{"transactional.id.expiration.ms": "60000",
                             "transaction.remove.expired.transaction.cleanup.interval.ms": "10000"})
    h.init("idle")
    pid, epoch = h.init("busy")
    assert h.coord.add_partitions("busy", pid, epoch, [T0]) == Errors.NONE
    h.sched.advance(30_000)
    h.coord.init_producer_id("busy", 900_000)  # CONCURRENT_TRANSACTIONS: aborts, then it is Empty
    h.drain()
    pid, epoch = h.init("busy", timeout_ms=900_000)
    assert h.coord.add_partitions("busy", pid, epoch, [T0]) == Errors.NONE
    h.sched.advance(120_000)
    assert "idle" not in h.coord.state.transactions
    assert h.coord.describe("idle").error == Errors.TRANSACTIONAL_ID_NOT_FOUND
    assert h.state_of("busy") is TxnState.ONGOING
    h.reload()
    assert "idle" not in h.coord.state.transactions  # the tombstone is in the log
    assert h.state_of("busy") is TxnState.ONGOING


# -- recovery ---------------------------------------------------------------------------------------


def test_prepared_transaction_rolls_forward_after_reload(h: Harness) -> None:
    pid, epoch = h.begin(tps=(T0, T1))
    assert h.coord.end_transaction("tx", pid, epoch, commit=True).error == Errors.NONE
    h.reload()  # as if the broker died before any marker
    assert h.state_of() is TxnState.PREPARE_COMMIT
    assert h.coord.end_transaction("tx", pid, epoch, commit=True).error == Errors.CONCURRENT_TRANSACTIONS
    h.drain()
    assert h.state_of() is TxnState.COMPLETE_COMMIT
    assert h.markers(T0) == [(2, epoch, "COMMIT", 0)] and h.markers(T1) == [(2, epoch, "COMMIT", 0)]
    assert h.coord.end_transaction("tx", pid, epoch, commit=True).error == Errors.NONE


def test_markers_written_twice_are_harmless(h: Harness) -> None:
    pid, epoch = h.begin()
    assert h.coord.end_transaction("tx", pid, epoch, commit=False).error == Errors.NONE
    h.drain()
    # A coordinator that died after the markers but before COMPLETE_ABORT reached the log:
    # replay the PREPARE_ABORT record alone and reload.
    metadata = h.coord.state.transactions["tx"]
    value = TransactionLogValue(pid, epoch, TIMEOUT_MS, TxnState.PREPARE_ABORT, frozenset({T0}),
                                h.sched.now_ms(), metadata.txn_start_timestamp)
    h.replicas.append_coordinator_records(
        TopicPartition(TRANSACTION_STATE_TOPIC, transaction_partition_for("tx", TXN_PARTITIONS)),
        build_batch([(encode_key("tx"), encode_value(value), ())], timestamp=1))
    h.reload()
    h.drain()
    assert h.state_of() is TxnState.COMPLETE_ABORT
    assert [m[2] for m in h.markers(T0)] == ["ABORT", "ABORT"]
    assert h.lso(T0) == (4, 4)


def test_marker_delivery_retries_and_stops_as_kafka_does(h: Harness) -> None:
    """The sender fails as only a cluster can (connection lost, a moved leader, a newer
    coordinator epoch): a double of the inter-broker channel, over the real local one."""
    real = BrokerMarkerSender(h.replicas)
    answers = ["raise", Errors.NOT_LEADER_OR_FOLLOWER, "real"]

    async def flaky(node: int, markers: Sequence[TxnMarker]) -> list[dict[TopicPartition, Errors]]:
        answer = answers.pop(0) if answers else "real"
        if answer == "raise":
            raise ConnectionError("broker went away")
        if answer == "real":
            return await real(node, markers)
        return [dict.fromkeys(m.partitions, answer) for m in markers]

    h.reload(flaky)
    pid, epoch = h.begin()
    assert h.coord.end_transaction("tx", pid, epoch, commit=True).error == Errors.NONE
    h.drain()
    assert answers == [] and h.state_of() is TxnState.COMPLETE_COMMIT
    assert h.markers(T0) == [(2, epoch, "COMMIT", 0)]

    async def fenced(node: int, markers: Sequence[TxnMarker]) -> list[dict[TopicPartition, Errors]]:
        return [dict.fromkeys(m.partitions, Errors.TRANSACTION_COORDINATOR_FENCED) for m in markers]

    h.reload(fenced)
    assert h.coord.add_partitions("tx", pid, epoch, [T1]) == Errors.NONE
    assert h.coord.end_transaction("tx", pid, epoch, commit=False).error == Errors.NONE
    h.drain()  # gives up: a newer coordinator owns the outcome
    assert h.state_of() is TxnState.PREPARE_ABORT and h.markers(T1) == []
    h.reload()
    h.drain()
    assert h.state_of() is TxnState.COMPLETE_ABORT and h.markers(T1) == [(0, epoch, "ABORT", 0)]


# -- offsets, verification, describe, list ---------------------------------------------------------------


def _txn_commit(h: Harness, pid: int, epoch: int, offset: int) -> dict[TopicPartition, Errors]:
    return h.groups.commit_transactional_offsets(
        "g", pid, epoch, "", None, -1, {T0: OffsetAndMetadata(offset, -1, "", h.sched.now_ms(), None)},
    )


@pytest.mark.parametrize("commit", [True, False])
def test_offsets_become_visible_with_the_commit_marker(h: Harness, commit: bool) -> None:
    pid, epoch = h.init()
    assert h.coord.add_offsets("tx", pid, epoch, "g") == Errors.NONE
    offsets_tp = TopicPartition("__consumer_offsets", h.groups.partition_for("g"))
    assert h.coord.verify_partition("tx", pid, epoch, *offsets_tp) == Errors.NONE
    assert _txn_commit(h, pid, epoch, 42) == {T0: Errors.NONE}
    assert h.groups.fetch_offsets("g", [T0], require_stable=True)[1][0].error == Errors.UNSTABLE_OFFSET_COMMIT
    assert h.coord.end_transaction("tx", pid, epoch, commit=commit).error == Errors.NONE
    h.drain()
    fetched = h.groups.fetch_offsets("g", [T0], require_stable=True)[1][0]
    assert fetched.error == Errors.NONE
    assert (fetched.offset.offset if fetched.offset else None) == (42 if commit else None)
    assert [m[2] for m in h.markers(offsets_tp)] == ["COMMIT" if commit else "ABORT"]


def test_verify_partitions(h: Harness) -> None:
    pid, epoch = h.begin()
    assert h.coord.verify_partitions("tx", pid, epoch, [T0, T1]) == {T0: Errors.NONE, T1: Errors.TRANSACTION_ABORTABLE}
    assert h.coord.verify_partition("tx", pid + 9, epoch, "t", 0) == Errors.INVALID_PRODUCER_ID_MAPPING
    assert h.coord.verify_partition("nobody", pid, epoch, "t", 0) == Errors.INVALID_PRODUCER_ID_MAPPING
    assert h.coord.end_transaction("tx", pid, epoch, commit=True).error == Errors.NONE
    assert h.coord.verify_partition("tx", pid, epoch, "t", 0) == Errors.CONCURRENT_TRANSACTIONS
    h.drain()
    assert h.coord.verify_partition("tx", pid, epoch, "t", 0) == Errors.TRANSACTION_ABORTABLE  # a late write


def test_describe_and_list(h: Harness) -> None:
    pid, epoch = h.begin("a", tps=(T0, T1))
    h.init("b")
    h.sched.advance(5_000)
    d = h.coord.describe("a")
    assert (d.error, d.state, d.producer_id, d.producer_epoch) == (Errors.NONE, "Ongoing", pid, epoch)
    assert d.timeout_ms == TIMEOUT_MS
    assert d.partitions == {T0, T1} and d.start_ms == h.sched.now_ms() - 5_000
    assert h.coord.describe("zzz").error == Errors.TRANSACTIONAL_ID_NOT_FOUND

    def ids(*args: object, **kw: object) -> list[str]:
        error, _, listed = h.coord.list_transactions(*args, **kw)  # type: ignore[arg-type]
        assert error == Errors.NONE
        return sorted(t.transactional_id for t in listed)

    assert ids() == ["a", "b"]
    assert ids(states=["Ongoing"]) == ["a"]
    assert ids(producer_ids=[pid]) == ["a"]
    assert ids(min_duration_ms=4_000, states=["Ongoing"]) == ["a"]
    assert ids(min_duration_ms=6_000, states=["Ongoing"]) == []
    assert ids(pattern="b.*") == ["b"]
    assert h.coord.list_transactions(states=["Nope"])[1] == ["Nope"]
    assert h.coord.list_transactions(pattern="(")[0] == Errors.INVALID_REGULAR_EXPRESSION


def test_state_records_in_the_log_are_kafkas(h: Harness) -> None:
    h.begin()
    plog = h.logs.get_log(TRANSACTION_STATE_TOPIC, transaction_partition_for("tx", TXN_PARTITIONS))
    assert plog is not None
    data = plog.read(0, 1 << 20).records
    records = [r for pos, hd in iter_batch_headers(data) for r in decode_records(data[pos:pos + hd.size])]
    statuses = [struct.unpack_from(">hqhib", r.value or b"")[4] for r in records]
    assert statuses == [TxnState.EMPTY.value, TxnState.ONGOING.value]
    assert all(r.key == encode_key("tx") for r in records)

"""The transaction coordinator: the transactional APIs and the two-phase completion.

Jobs (Kafka's ``TransactionCoordinator``):

- InitProducerId with a transactional id: one producer id per id, epoch + 1 on every
  call; an open transaction of an older instance is aborted under a bumped epoch
  (PrepareEpochFence) and the caller told CONCURRENT_TRANSACTIONS until that is done;
  KIP-360 resumption with the producer's id and epoch; a new producer id when the epochs
  run out;
- AddPartitionsToTxn / AddOffsetsToTxn, the KIP-890 check that a transactional write goes
  to a partition of the open transaction (``verify_partitions``), EndTxn;
- completion: once PREPARE_* is in the log the outcome is decided; markers go to every
  partition (``TxnMarkerChannel``), then COMPLETE_* is written;
- two-phase commit (KIP-939, when ``transaction.two.phase.commit.enable``): an id
  initialized with ``enable_2pc`` gets the timeout Integer.MAX_VALUE, so its transactions
  are never aborted by the timeout; ``keep_prepared_txn`` keeps its open transaction for
  the new instance (which gets a newer epoch and the kept transaction's producer id and
  epoch, to compare with what the external coordinator recorded) instead of aborting it;
- start-up: load ``__transaction_state`` and roll PrepareCommit/PrepareAbort forward;
- abort transactions past their timeout (never a 2PC one), expire idle transactional ids;
- DescribeTransactions and ListTransactions;
- hold a request it would answer CONCURRENT_TRANSACTIONS because the id's own previous
  step is still under way (``held``, ``transaction.concurrent.hold.ms``): once that step's
  transition ends the request is handled again, as the client's retry would be.

Results are ``eoslog.errors.Errors`` members; handlers map them to codes and to what older request
versions understand. Everything runs on the event loop; log appends are synchronous.

Test hook (``eoslog.faults``): ``EOSLOG_TEST_CRASH_AT`` = ``before_prepare`` |
``after_prepare`` | ``between_markers`` | ``after_markers`` | ``after_complete`` makes the
broker SIGKILL itself at that point of the first transaction it ends, so crash recovery is
tested on the real process (``between_markers`` is reached in ``broker.marker_sender``: one
partition's marker acknowledged, the others never written).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from eoslog.config import BrokerConfig
from eoslog.coordinator.internal_topic import (
    OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    drive_loader,
    finish_loader,
    internal_topic_replication,
)
from eoslog.coordinator.producer_id_manager import ProducerIdsExhausted, ProducerIdsUnavailable
from eoslog.coordinator.timers import AsyncioScheduler, Scheduler
from eoslog.coordinator.transaction.loader import load_partition
from eoslog.coordinator.transaction.log import FLEXIBLE_VALUE_VERSION, TWO_PHASE_COMMIT_TIMEOUT_MS, VALUE_VERSION
from eoslog.coordinator.transaction.marker_channel import (
    LeaderLookup,
    MarkerSender,
    PendingCompleteTxn,
    TxnMarkerChannel,
)
from eoslog.coordinator.transaction.metadata import (
    EPOCH_MAX,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from eoslog.coordinator.transaction.state import IllegalTransitionError, TxnState
from eoslog.coordinator.transaction.state_manager import TransactionStateManager
from eoslog.coordinator.transaction.topic import TransactionStateTopic, TransactionStateTopicConfig
from eoslog.errors import Errors
from eoslog.faults import CrashPoints
from eoslog.features import TRANSACTION_VERSION, TRANSACTION_VERSION_2, Features
from eoslog.replica import ReplicaManager
from eoslog.stats import LatencyHistogram
from eoslog.types import TopicPartition

log = logging.getLogger(__name__)

CRASH_POINTS = ("before_prepare", "after_prepare", "between_markers", "after_markers", "after_complete")
_ABORT_TIMER = ("txn", "abort-timed-out")
_EXPIRE_TIMER = ("txn", "expire-transactional-ids")
# Kafka's request.timeout.ms default, which its marker channel's requests have.
MARKER_WRITE_TIMEOUT_MS = 30_000
T = TypeVar("T")
# (producer id, partitions, timeout ms) → NONE once the producer's writes to them are durable.
DurableWrites = Callable[[int, Collection[TopicPartition], int], Awaitable[Errors]]


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    """The coordinator's settings, from the broker's config."""

    max_timeout_ms: int
    num_partitions: int
    segment_bytes: int
    load_buffer_bytes: int
    abort_timed_out_interval_ms: int
    id_expiration_ms: int
    remove_expired_interval_ms: int
    two_phase_commit_enable: bool = False
    concurrent_hold_ms: int = 0  # transaction.concurrent.hold.ms (0: answer CONCURRENT_TRANSACTIONS at once)
    # How long a marker waits to be acknowledged (replicated; fsynced with group commit)
    # before the marker channel tries it again, and a WriteTxnMarkers request's writes wait.
    marker_write_timeout_ms: int = MARKER_WRITE_TIMEOUT_MS

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> TransactionConfig:
        return cls(
            int(config["transaction.max.timeout.ms"]),
            int(config["transaction.state.log.num.partitions"]),
            int(config["transaction.state.log.segment.bytes"]),
            int(config["transaction.state.log.load.buffer.size"]),
            int(config["transaction.abort.timed.out.transaction.cleanup.interval.ms"]),
            int(config["transactional.id.expiration.ms"]),
            int(config["transaction.remove.expired.transaction.cleanup.interval.ms"]),
            bool(config["transaction.two.phase.commit.enable"]),
            int(config["transaction.concurrent.hold.ms"]),
        )


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: Errors
    producer_id: int = -1
    producer_epoch: int = -1
    # KIP-939 keep_prepared_txn: the kept open transaction's producer id and epoch.
    ongoing_txn_producer_id: int = -1
    ongoing_txn_producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class EndTxnResult:
    """EndTxn's answer: the error, and with transactions v2 the producer id and epoch the client
    continues with (-1 when not answered)."""

    error: Errors
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class DescribedTransaction:
    error: Errors
    transactional_id: str
    state: str = ""
    timeout_ms: int = 0
    start_ms: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    partitions: frozenset[TopicPartition] = frozenset()

    @property
    def two_phase_commit(self) -> bool:
        return self.timeout_ms == TWO_PHASE_COMMIT_TIMEOUT_MS


@dataclass(slots=True)
class TransactionCounts:
    """Transactions this coordinator finished since start-up (read by ``eoslog.metrics``)."""

    committed: int = 0  # CompleteCommit written
    aborted: int = 0  # CompleteAbort written, whatever asked for it
    timed_out: int = 0  # aborts this coordinator started because a transaction outlived its timeout
    # How an EndTxn's second phase spent its time (seconds), per transaction this coordinator
    # prepared: the PREPARE_* append, PREPARE_* appended → every marker written (the queue, the
    # wait for PREPARE_* to replicate, WriteTxnMarkers), and the COMPLETE_* append.
    end_phases: dict[str, LatencyHistogram] = field(
        default_factory=lambda: {phase: LatencyHistogram() for phase in ("prepare", "markers", "complete")})
    # CONCURRENT_TRANSACTIONS answered, per (request, what was under way: "PrepareCommit>CompleteCommit"
    # is a transaction whose markers are on their way), after any hold.
    concurrent: Counter[tuple[str, str]] = field(default_factory=Counter)
    # Requests held for their id's own step to end, per request: how long (seconds).
    held: dict[str, LatencyHistogram] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: str


class TransactionCoordinator:
    def __init__(
        self, config: TransactionConfig, state: TransactionStateManager, scheduler: Scheduler,
        generate_producer_id: Callable[[], int], sender: MarkerSender, leader_for: LeaderLookup,
        offsets_partition_for: Callable[[str], int], crash_points: CrashPoints | None = None,
        transaction_version: Callable[[], int] = lambda: 0,
    ) -> None:
        """``transaction_version()``: the finalized transaction.version, which aborts this
        coordinator starts itself (a fence, a timeout) follow, as Kafka's do."""
        self.config = config
        self.transaction_version = transaction_version
        self.state = state
        self.scheduler = scheduler
        self._generate_producer_id = generate_producer_id
        self._offsets_partition_for = offsets_partition_for
        self.markers = TxnMarkerChannel(sender, leader_for, self._on_markers_written,
                                        is_replicated=state.topic.is_replicated,
                                        wait_replicated=state.topic.wait_offset_replicated)
        self._crash_points = crash_points or CrashPoints()
        self.counts = TransactionCounts()
        # Set on a single node under group commit (broker/server.py): waits until a producer's
        # writes to some partitions are durable; its transactions' writes are then answered once
        # appended and made durable before PrepareCommit (``commit_makes_durable``).
        self.durable_before_prepare: DurableWrites | None = None
        # Set by the broker when writes no fsync covered were lost at its last stop (a power cut:
        # storage.unsynced_witness): the transactions open then are marked as they load
        # (``_mark_open_after_lost_writes``) and may not commit.
        self.unsynced_writes_lost = False
        # transactional id → (producer id, epoch, start time) of a transaction open when writes
        # were lost: it may have lost an acknowledged one (``make_durable_before_commit``).
        self._lost_writes: dict[str, tuple[int, int, int]] = {}

    @classmethod
    def for_broker(
        cls, config: BrokerConfig, replicas: ReplicaManager, clock_ms: Callable[[], int],
        generate_producer_id: Callable[[], int], sender: MarkerSender,
        offsets_partition_for: Callable[[str], int], brokers: int = 1,
        leader_for: LeaderLookup | None = None, features: Features | None = None,
    ) -> TransactionCoordinator:
        """The coordinator of a running broker: its partitions, timers on the event loop,
        every partition led by this node (``leader_for``: where each partition's leader is,
        in a cluster)."""
        txn_config = TransactionConfig.from_broker_config(config)
        min_isr = internal_topic_replication(config, brokers).transaction_min_isr
        topic = TransactionStateTopic(
            replicas, TransactionStateTopicConfig(txn_config.num_partitions, txn_config.segment_bytes, min_isr),
            clock_ms,
        )

        def local_leader(tp: TopicPartition) -> int | None:
            return config.node_id if replicas.get_partition(tp) is not None else None

        live = features or Features()

        def value_version() -> int:  # Kafka's TransactionVersion.transactionLogValueVersion
            return FLEXIBLE_VALUE_VERSION if live.finalized_level(TRANSACTION_VERSION) >= 1 else VALUE_VERSION

        return cls(txn_config, TransactionStateManager(topic, value_version), AsyncioScheduler(clock_ms),
                   generate_producer_id, sender, leader_for or local_leader, offsets_partition_for,
                   CrashPoints.from_env(CRASH_POINTS), lambda: live.finalized_level(TRANSACTION_VERSION))

    def _now(self) -> int:
        return self.scheduler.now_ms()

    # -- lifecycle ----------------------------------------------------------------------------

    def ensure_state_topic(self) -> None:
        self.state.ensure_topic()

    def begin_loading(self) -> list[int]:
        return self.state.begin_loading()

    def load_partition_now(self, partition: int) -> None:
        """Load one partition synchronously (tests)."""
        loader = load_partition(self.state.topic, partition, self.config.load_buffer_bytes)
        self._on_partition_loaded(partition, finish_loader(loader))

    async def load_all(self) -> None:
        """Load every partition marked by ``begin_loading``, yielding between chunks."""
        for partition in self.state.loading_partitions():
            loader = load_partition(self.state.topic, partition, self.config.load_buffer_bytes)
            loaded = await drive_loader(loader, f"{TRANSACTION_STATE_TOPIC}-{partition}")
            if loaded is not None:
                self._on_partition_loaded(partition, loaded)
            await asyncio.sleep(0)

    async def become_leader(self, partition: int, leader_epoch: int) -> None:
        """Cluster mode: load a ``__transaction_state`` partition this broker now leads, then
        roll its prepared transactions forward (Kafka's onElection)."""
        self.state.become_leader(partition, leader_epoch)
        loader = load_partition(self.state.topic, partition, self.config.load_buffer_bytes)
        loaded = await drive_loader(loader, f"{TRANSACTION_STATE_TOPIC}-{partition}")
        if loaded is not None:
            self._on_partition_loaded(partition, loaded, leader_epoch)

    def resign(self, partition: int) -> None:
        """Cluster mode: another broker leads the partition; stop sending its markers (Kafka's
        onResignation)."""
        self.state.resign(partition)
        self.markers.remove_for(lambda p: self.state.partition_for(p.transactional_id) == partition)

    def _on_partition_loaded(self, partition: int, loaded: dict[str, TransactionMetadata],
                             leader_epoch: int | None = None) -> None:
        epoch = self.state.on_partition_loaded(partition, loaded, leader_epoch)
        if epoch is None:
            return
        for m in loaded.values():
            if m.state.is_prepared:
                # PREPARE_* was the point of no return: write the markers (again) and complete.
                log.info("rolling %s of %s forward: markers to %d partitions", m.state.kafka_name,
                         m.transactional_id, len(m.partitions))
                marker_producer = m.marker_producer
                complete = m.prepare_complete(self._now())
                self.markers.add(PendingCompleteTxn(m.transactional_id, epoch, m, complete, set(m.partitions),
                                                    marker_producer=marker_producer))
        if self.unsynced_writes_lost:
            self._mark_open_after_lost_writes(loaded.values())

    def startup(self) -> None:
        """Start the periodic abort of timed-out transactions and expiry of idle ids."""
        self.scheduler.schedule(_ABORT_TIMER, self.config.abort_timed_out_interval_ms, self._abort_job)
        self.scheduler.schedule(_EXPIRE_TIMER, self.config.remove_expired_interval_ms, self._expire_job)

    def _abort_job(self) -> None:
        try:
            self.abort_timed_out_transactions()
        finally:
            self.scheduler.schedule(_ABORT_TIMER, self.config.abort_timed_out_interval_ms, self._abort_job)

    def _expire_job(self) -> None:
        try:
            self.state.expire_transactional_ids(self._now(), self.config.id_expiration_ms)
        finally:
            self.scheduler.schedule(_EXPIRE_TIMER, self.config.remove_expired_interval_ms, self._expire_job)

    def shutdown(self) -> None:
        self.scheduler.cancel_all()
        self.markers.remove_for(lambda _: True)
        self.state.shutdown()

    # -- InitProducerId --------------------------------------------------------------------------

    def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None = None, *,
        enable_2pc: bool = False, keep_prepared_txn: bool = False,
    ) -> InitProducerIdResult:
        """``expected`` is the (producer id, epoch) a KIP-360 producer sends to resume.

        ``enable_2pc`` (KIP-939) makes the id's transactions exempt from the timeout, which
        is then not checked; the broker must allow it, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        as Kafka answers. ``keep_prepared_txn`` (only with ``enable_2pc``) keeps an ongoing 2PC
        transaction instead of aborting it and reports its producer id and epoch.
        """
        if not transactional_id:
            return InitProducerIdResult(Errors.INVALID_REQUEST)
        if enable_2pc and not self.config.two_phase_commit_enable:
            log.info("%s: two-phase commit asked for, but transaction.two.phase.commit.enable is false",
                     transactional_id)
            return InitProducerIdResult(Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if keep_prepared_txn and not enable_2pc:
            return InitProducerIdResult(Errors.INVALID_REQUEST)
        if enable_2pc:
            timeout_ms = TWO_PHASE_COMMIT_TIMEOUT_MS
        elif not 0 < timeout_ms <= self.config.max_timeout_ms:
            return InitProducerIdResult(Errors.INVALID_TRANSACTION_TIMEOUT)
        error, entry = self.state.get(transactional_id)
        if error != Errors.NONE:
            return InitProducerIdResult(error)
        try:
            if entry is None:
                entry = self.state.put_if_absent(TransactionMetadata(
                    transactional_id, self._generate_producer_id(), txn_timeout_ms=timeout_ms,
                    txn_last_update_timestamp=self._now(),
                ))
            m = entry.metadata
            prepared = self._prepare_init(m, timeout_ms, expected, keep_prepared_txn)
        except ProducerIdsExhausted as e:
            log.error("%s: %s", transactional_id, e)
            return InitProducerIdResult(Errors.UNKNOWN_SERVER_ERROR)
        except ProducerIdsUnavailable:
            return InitProducerIdResult(Errors.COORDINATOR_LOAD_IN_PROGRESS)
        if isinstance(prepared, Errors):
            return InitProducerIdResult(prepared)
        if prepared.state is TxnState.PREPARE_EPOCH_FENCE:
            # Abort the older instance's transaction; the caller retries once it is done and
            # gets the epoch after the fenced one.
            error = self._fence_and_abort(m, prepared)
            return InitProducerIdResult(error if error != Errors.NONE else Errors.CONCURRENT_TRANSACTIONS)
        error = self.state.append_transition(m, entry.coordinator_epoch, prepared)
        if error != Errors.NONE:
            return InitProducerIdResult(error)
        if prepared.state is TxnState.ONGOING:
            log.info("initialized transactional id %s: producer %d epoch %d, keeping its prepared transaction "
                     "(producer %d epoch %d, %d partitions)", transactional_id, prepared.next_producer_id,
                     prepared.next_producer_epoch, m.producer_id, m.producer_epoch, len(m.partitions))
            return InitProducerIdResult(Errors.NONE, prepared.next_producer_id, prepared.next_producer_epoch,
                                        m.producer_id, m.producer_epoch)
        log.info("initialized transactional id %s: producer %d epoch %d", transactional_id,
                 prepared.producer_id, prepared.producer_epoch)
        return InitProducerIdResult(Errors.NONE, prepared.producer_id, prepared.producer_epoch)

    def _prepare_init(
        self, m: TransactionMetadata, timeout_ms: int, expected: tuple[int, int] | None, keep_prepared_txn: bool,
    ) -> TxnTransitMetadata | Errors:
        if m.pending_transition_in_progress:
            return Errors.CONCURRENT_TRANSACTIONS
        if expected is not None and not (
            m.producer_epoch == NO_PRODUCER_EPOCH or expected[0] in (m.producer_id, m.next_producer_id)
            or (expected[0] == m.last_producer_id and is_epoch_exhausted(expected[1]))
        ):
            return Errors.PRODUCER_FENCED
        if m.state.is_prepared:
            return Errors.CONCURRENT_TRANSACTIONS
        if m.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            if m.is_producer_epoch_exhausted and (expected is None or expected[1] == m.producer_epoch):
                new_id = self._generate_producer_id()
                log.info("%s: epochs of producer %d exhausted; new producer id %d",
                         m.transactional_id, m.producer_id, new_id)
                return m.prepare_producer_id_rotation(new_id, timeout_ms, self._now(), expected is not None)
            return m.prepare_increment_producer_epoch(
                timeout_ms, None if expected is None else expected[1], self._now()
            )
        if m.state is TxnState.ONGOING:
            if keep_prepared_txn and m.is_two_phase_commit:
                rotated = self._generate_producer_id() if m.is_client_epoch_exhausted else None
                return m.prepare_keep_prepared(rotated, self._now())
            # Not kept (or not a 2PC transaction, which was never safe from the timeout):
            # abort it, as any InitProducerId does.
            return m.prepare_fence_producer_epoch()
        raise IllegalTransitionError(f"{m!r}: InitProducerId in a state never left stable")

    # -- adding partitions ---------------------------------------------------------------------------

    def _producer_check(self, transactional_id: str, producer_id: int, producer_epoch: int
                        ) -> tuple[Errors, int, TransactionMetadata | None]:
        if not transactional_id:
            return Errors.INVALID_REQUEST, 0, None
        error, entry = self.state.get(transactional_id)
        if error != Errors.NONE:
            return error, 0, None
        if entry is None or entry.metadata.client_producer[0] != producer_id:
            return Errors.INVALID_PRODUCER_ID_MAPPING, 0, None
        if entry.metadata.client_producer[1] != producer_epoch:
            return Errors.PRODUCER_FENCED, 0, None
        return Errors.NONE, entry.coordinator_epoch, entry.metadata

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Collection[TopicPartition], client_transaction_version: int = 0) -> Errors:
        """AddPartitionsToTxn: a client's (transactions v1), or a partition leader's adding the
        partition a TV2 producer wrote to (``client_transaction_version`` 2: Kafka's
        transactionVersionForAddPartitionsToTxn of a v5 request), AddOffsetsToTxn (v1 always)."""
        error, coordinator_epoch, m = self._producer_check(transactional_id, producer_id, producer_epoch)
        if m is None:
            return error
        if m.pending_transition_in_progress or m.state.is_prepared:
            return Errors.CONCURRENT_TRANSACTIONS
        if m.is_kept:
            return Errors.INVALID_TXN_STATE  # a kept (prepared) transaction can only be ended
        if m.state is TxnState.ONGOING and set(partitions) <= m.partitions:
            return Errors.NONE
        return self.state.append_transition(m, coordinator_epoch, m.prepare_add_partitions(
            partitions, self._now(), client_transaction_version))

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> Errors:
        """The group's ``__consumer_offsets`` partition joins the transaction."""
        tp = TopicPartition(OFFSETS_TOPIC, self._offsets_partition_for(group_id))
        return self.add_partitions(transactional_id, producer_id, producer_epoch, [tp])

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, Errors]:
        """KIP-890 part 1: is each partition in the producer's open transaction?
        TRANSACTION_ABORTABLE for one that is not (handlers map it for older versions)."""
        tps = list(partitions)
        error, _, m = self._producer_check(transactional_id, producer_id, producer_epoch)
        if m is not None and m.state.is_prepared:
            error = Errors.CONCURRENT_TRANSACTIONS
        elif m is not None and m.is_kept:
            error = Errors.INVALID_TXN_STATE
        if m is None or error != Errors.NONE:
            return dict.fromkeys(tps, error)
        return {tp: Errors.NONE if tp in m.partitions else Errors.TRANSACTION_ABORTABLE for tp in tps}

    def verify_partition(self, transactional_id: str, producer_id: int, producer_epoch: int,
                         topic: str, partition: int) -> Errors:
        tp = TopicPartition(topic, partition)
        return self.verify_partitions(transactional_id, producer_id, producer_epoch, [tp])[tp]

    def is_fenced_by_kept_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int) -> bool:
        """Whether a newer instance kept this producer's open 2PC transaction: the producer
        must not add records to it, even to a partition it already wrote to (the partition
        only learns of the newer epoch from the markers)."""
        m = self.state.transactions.get(transactional_id)
        return (m is not None and m.is_kept and producer_id == m.producer_id
                and (producer_id, producer_epoch) != m.client_producer)

    # -- ending transactions ----------------------------------------------------------------------------

    def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                        client_transaction_version: int = 0) -> EndTxnResult:
        """EndTxn: Errors.NONE once PREPARE_* is in the log (markers follow), or when a retry
        finds the transaction completed with the same result. Transactions v2 (EndTxn v5+,
        ``client_transaction_version`` 2) answer the producer id and epoch the client goes on with."""
        return self._end_transaction(transactional_id, producer_id, producer_epoch, commit, from_client=True,
                                     client_transaction_version=client_transaction_version)

    def _fence_and_abort(self, m: TransactionMetadata, fence: TxnTransitMetadata) -> Errors:
        """Abort ``m``'s open transaction under the bumped epoch of a prepared fence, with the
        finalized transaction version (Kafka's: "since this is not from client, use server TV")."""
        result = self._end_transaction(m.transactional_id, fence.producer_id, fence.producer_epoch,
                                       commit=False, from_client=False,
                                       client_transaction_version=self.transaction_version())
        if result.error != Errors.NONE and m.pending_state is TxnState.PREPARE_EPOCH_FENCE:
            m.abandon_transition()
        return result.error

    def _end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                         commit: bool, from_client: bool, client_transaction_version: int) -> EndTxnResult:
        if not transactional_id:
            return EndTxnResult(Errors.INVALID_REQUEST)
        error, entry = self.state.get(transactional_id)
        if error != Errors.NONE:
            return EndTxnResult(error)
        if entry is None:
            return EndTxnResult(Errors.INVALID_PRODUCER_ID_MAPPING)
        m = entry.metadata
        # A kept KIP-939 transaction ends as in transactions v1 whatever the client speaks: its
        # markers already carry an epoch above its batches' (TransactionMetadata.marker_producer).
        tv2 = client_transaction_version >= TRANSACTION_VERSION_2 and not m.is_kept
        decided = (self._end_decision_v2(m, producer_id, producer_epoch, commit, from_client) if tv2
                   else self._end_decision_v1(m, producer_id, producer_epoch, commit, from_client))
        if isinstance(decided, EndTxnResult):
            if decided.error not in (Errors.NONE, Errors.CONCURRENT_TRANSACTIONS):
                log.info("%s: EndTxn(%s) of producer %d epoch %d in state %s: %s", transactional_id,
                         "commit" if commit else "abort", producer_id, producer_epoch, m.state.kafka_name,
                         decided.error.name)
            return decided
        state, no_partition_added = decided
        fencing = not commit and m.pending_state is TxnState.PREPARE_EPOCH_FENCE
        if fencing:
            m.begin_fenced_abort(producer_epoch, client_transaction_version if tv2 else 0)
        try:
            # Kafka's TV2 EndTxn: a new producer id when this bump uses the last epochs up.
            rotated = self._generate_producer_id() if tv2 and m.is_producer_epoch_exhausted else NO_PRODUCER_ID
        except (ProducerIdsExhausted, ProducerIdsUnavailable) as e:
            if fencing:
                m.pending_state = TxnState.PREPARE_EPOCH_FENCE  # nothing was written: the fence stays pending
            return EndTxnResult(Errors.COORDINATOR_LOAD_IN_PROGRESS if isinstance(e, ProducerIdsUnavailable)
                                else Errors.UNKNOWN_SERVER_ERROR)
        prepared = m.prepare_abort_or_commit(state, self._now(), client_transaction_version if tv2 else 0,
                                             rotated, no_partition_added)
        self._crash_points.reached("before_prepare")
        started = time.perf_counter()
        error = self.state.append_transition(m, entry.coordinator_epoch, prepared)
        prepared_at = time.perf_counter()
        if error != Errors.NONE:
            if fencing and not tv2:
                m.has_failed_epoch_fence = True
                log.warning("%s: fencing epoch %d not written (%s); it was never handed out",
                            transactional_id, producer_epoch, error)
            return EndTxnResult(error)
        self._crash_points.reached("after_prepare")
        # The outcome is decided: answer now, deliver the markers, then write COMPLETE_*.
        marker_producer = m.marker_producer
        complete = m.prepare_complete(self._now())
        partition = self.state.partition_for(transactional_id)
        pending = PendingCompleteTxn(transactional_id, entry.coordinator_epoch, m, complete,
                                     set(prepared.partitions), marker_producer=marker_producer,
                                     durable_at=(partition, self.state.topic.appended_end.get(partition, 0)),
                                     prepared_at=prepared_at)
        self.counts.end_phases["prepare"].observe(prepared_at - started)
        # No marker to write (a v2 abort of nothing): complete at once, as Kafka's
        # addTxnMarkersToSend does; only a retriable failure of that append goes to the channel.
        if prepared.partitions or self._on_markers_written(pending):
            self.markers.add(pending)
        return EndTxnResult(Errors.NONE, complete.producer_id, complete.producer_epoch)

    def _end_decision_v1(self, m: TransactionMetadata, producer_id: int, producer_epoch: int, commit: bool,
                         from_client: bool) -> tuple[TxnState, bool] | EndTxnResult:
        """Transactions v1 (Kafka's endTransactionWithTV1): the state to prepare, or the answer."""
        # A client must send its current pair (the newer one of a kept transaction); a fence
        # (from_client False) a newer epoch of the transaction's producer id.
        expected_id, expected_epoch = m.client_producer if from_client else (m.producer_id, m.producer_epoch)
        if producer_id != expected_id:
            return EndTxnResult(Errors.INVALID_PRODUCER_ID_MAPPING)
        if (from_client and producer_epoch != expected_epoch) or producer_epoch < expected_epoch:
            return EndTxnResult(Errors.PRODUCER_FENCED)
        if m.pending_transition_in_progress and m.pending_state is not TxnState.PREPARE_EPOCH_FENCE:
            return EndTxnResult(Errors.CONCURRENT_TRANSACTIONS)
        same, other = (TxnState.COMPLETE_COMMIT, TxnState.PREPARE_COMMIT) if commit else (
            TxnState.COMPLETE_ABORT, TxnState.PREPARE_ABORT)
        if m.state is same:
            return EndTxnResult(Errors.NONE, *m.client_producer)  # a retry of an EndTxn that completed
        if m.state is other:
            return EndTxnResult(Errors.CONCURRENT_TRANSACTIONS)  # a retry while the markers are on their way
        if m.state is not TxnState.ONGOING:
            return EndTxnResult(Errors.INVALID_TXN_STATE)
        return (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT), False

    def _end_decision_v2(self, m: TransactionMetadata, producer_id: int, producer_epoch: int, commit: bool,
                         from_client: bool) -> tuple[TxnState, bool] | EndTxnResult:
        """Transactions v2 (Kafka 4.4's TransactionCoordinator.endTransaction): a retry is told
        apart from the next EndTxn by the epoch, which every EndTxn bumps — a retry carries the
        epoch before the bump (or, after an overflow, the last epoch of the previous producer id);
        an abort with nothing added (Empty, or right after a completed transaction) is allowed and
        bumps the epoch too."""
        fence = m.pending_state is TxnState.PREPARE_EPOCH_FENCE
        retry_on_overflow = (not fence and m.last_producer_id == producer_id and producer_epoch == EPOCH_MAX - 1
                             and m.producer_epoch == 0)
        retry_on_bump = not fence and m.producer_epoch == producer_epoch + 1
        if fence:
            valid = (not from_client or producer_epoch == m.producer_epoch) and producer_epoch >= m.producer_epoch
        elif m.state.is_prepared:
            valid = retry_on_bump
        elif m.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            valid = retry_on_bump or retry_on_overflow or producer_epoch == m.producer_epoch
        else:
            valid = producer_epoch == m.producer_epoch
        is_retry = retry_on_bump or retry_on_overflow
        if m.pending_transition_in_progress and not fence:
            return EndTxnResult(Errors.CONCURRENT_TRANSACTIONS)
        if m.producer_id != producer_id and not retry_on_overflow:
            return EndTxnResult(Errors.INVALID_PRODUCER_ID_MAPPING)
        if not valid:
            return EndTxnResult(Errors.PRODUCER_FENCED)
        ended, pending = (TxnState.COMPLETE_COMMIT, TxnState.PREPARE_COMMIT) if commit else (
            TxnState.COMPLETE_ABORT, TxnState.PREPARE_ABORT)
        if m.state is TxnState.ONGOING:
            return pending, False
        if m.state is ended:  # the same outcome: a retry is answered with where it left the producer
            return EndTxnResult(Errors.NONE, m.producer_id, m.producer_epoch) if is_retry else (
                EndTxnResult(Errors.INVALID_TXN_STATE) if commit else (TxnState.PREPARE_ABORT, True))
        if m.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT, TxnState.EMPTY):
            # A commit after an abort (or of nothing) is refused; an abort of nothing is allowed.
            if commit or is_retry:
                return EndTxnResult(Errors.INVALID_TXN_STATE)
            return TxnState.PREPARE_ABORT, True
        if m.state is pending:
            return EndTxnResult(Errors.CONCURRENT_TRANSACTIONS)
        return EndTxnResult(Errors.INVALID_TXN_STATE)  # the other prepared outcome

    def _on_markers_written(self, p: PendingCompleteTxn) -> bool:
        """Every marker is written: COMPLETE_*, if this coordinator still owns the id at
        the epoch the markers went out with. True to be called again (retriable append)."""
        m = p.metadata
        partition = self.state.partition_for(p.transactional_id)
        if (self.state.coordinator_epoch(partition) != p.coordinator_epoch
                or self.state.transactions.get(p.transactional_id) is not m
                or m.pending_state is not p.transit.state):
            log.info("%s: not writing %s, the coordinator moved on", p.transactional_id, p.transit.state.kafka_name)
            return False
        self._crash_points.reached("after_markers")
        markers_written = time.perf_counter()
        error = self.state.append_transition(m, p.coordinator_epoch, p.transit,
                                             keep_pending_on=frozenset({Errors.COORDINATOR_NOT_AVAILABLE}))
        if error != Errors.NONE:
            return error == Errors.COORDINATOR_NOT_AVAILABLE
        self._crash_points.reached("after_complete")
        if p.prepared_at is not None:
            self.counts.end_phases["markers"].observe(markers_written - p.prepared_at)
            self.counts.end_phases["complete"].observe(time.perf_counter() - markers_written)
        if p.transit.state is TxnState.COMPLETE_COMMIT:
            self.counts.committed += 1
        elif p.transit.state is TxnState.COMPLETE_ABORT:
            self.counts.aborted += 1
        log.debug("%s: %s (producer %d epoch %d)", p.transactional_id, p.transit.state.kafka_name,
                  p.transit.producer_id, p.transit.producer_epoch)
        return False

    # -- timeouts ------------------------------------------------------------------------------------

    def abort_timed_out_transactions(self) -> int:
        """Abort, under a bumped epoch, every transaction open longer than its timeout."""
        aborted = 0
        for t in self.state.timed_out_transactions(self._now()):
            error, entry = self.state.get(t.transactional_id)
            if entry is None or error != Errors.NONE:
                continue
            m = entry.metadata
            if m.producer_id != t.producer_id or m.pending_transition_in_progress:
                continue
            fence = m.prepare_fence_producer_epoch()
            error = self._fence_and_abort(m, fence)
            if error == Errors.NONE:
                aborted += 1
                self.counts.timed_out += 1
                log.info("aborting transaction of %s (producer %d): open longer than %d ms; epoch now %d",
                         t.transactional_id, t.producer_id, m.txn_timeout_ms, fence.producer_epoch)
            else:
                log.warning("timed-out transaction of %s not aborted: %s", t.transactional_id, error)
        return aborted

    # -- writes durable at commit (a single node under group commit) --------------------------------

    def commit_makes_durable(self, transactional_id: str) -> bool:
        """Whether ``transactional_id``'s writes (its Produce batches, its TxnOffsetCommit) may be
        answered once appended, before they are durable: true when this coordinator makes them
        durable before it writes the transaction's PrepareCommit (``durable_before_prepare``, set on
        a single node under group commit), and the transaction is not a two-phase-commit one (its
        client's prepare must find its writes durable: KIP-939)."""
        if self.durable_before_prepare is None:
            return False
        error, entry = self.state.get(transactional_id)
        return error is Errors.NONE and entry is not None and not entry.metadata.is_two_phase_commit

    async def make_durable_before_commit(self, transactional_id: str, producer_id: int) -> Errors:
        """EndTxn(commit), before anything else: the transaction's writes so far made durable —
        PrepareCommit must never reach the disk ahead of a write it commits. NONE when there is
        nothing to wait for (the request is then handled, and refused if it must be, as always);
        COORDINATOR_NOT_AVAILABLE (retriable) when the writes could not be made durable;
        UNKNOWN_PRODUCER_ID when the transaction was open when writes were lost
        (``_mark_open_after_lost_writes``): abortable, and the client's abort bumps the epoch
        (Kafka's clients: KIP-360), so its producer goes on with a new transaction."""
        if self.durable_before_prepare is None:
            return Errors.NONE
        error, entry = self.state.get(transactional_id)
        if error is not Errors.NONE or entry is None:
            return Errors.NONE
        m = entry.metadata
        if m.state is not TxnState.ONGOING or m.is_two_phase_commit or not m.partitions:
            return Errors.NONE
        if self._lost_writes.get(transactional_id) == (m.producer_id, m.producer_epoch, m.txn_start_timestamp):
            log.warning("%s: commit refused, the transaction was open when the broker lost writes no fsync "
                        "covered (it may have lost an acknowledged one); the client aborts it", transactional_id)
            return Errors.UNKNOWN_PRODUCER_ID
        outcome = await self.durable_before_prepare(producer_id, tuple(m.partitions),
                                                    self.config.marker_write_timeout_ms)
        if outcome is not Errors.NONE:
            log.warning("%s: its writes were not made durable before its commit (%s)", transactional_id,
                        outcome.name)
            return Errors.COORDINATOR_NOT_AVAILABLE
        return Errors.NONE

    def _mark_open_after_lost_writes(self, loaded: Iterable[TransactionMetadata]) -> None:
        """``unsynced_writes_lost``: an open transaction's writes were answered before they were
        durable (``durable_before_prepare``), so any of them may be gone, and none may commit:
        its EndTxn(commit) is refused, abortably (``make_durable_before_commit``). Not aborted
        here: a producer fenced by an abort under a bumped epoch would have to start over,
        where a refused commit lets it abort and go on. Prepared ones roll forward as always
        (their writes were durable before PREPARE_* was written); two-phase-commit ones keep
        theirs (their writes waited to be durable)."""
        for m in loaded:
            if m.state is TxnState.ONGOING and not m.pending_transition_in_progress and not m.is_two_phase_commit:
                self._lost_writes[m.transactional_id] = (m.producer_id, m.producer_epoch, m.txn_start_timestamp)
                log.warning("%s: open when the broker lost writes no fsync covered: its commit will be refused",
                            m.transactional_id)

    def open_after_lost_writes(self) -> bool:
        """Whether a transaction open when writes were lost is still open (forgetting those that ended)."""
        for transactional_id, open_ in list(self._lost_writes.items()):
            error, entry = self.state.get(transactional_id)
            if error is Errors.COORDINATOR_LOAD_IN_PROGRESS:
                continue
            m = entry.metadata if entry is not None and error is Errors.NONE else None
            if m is None or m.state is not TxnState.ONGOING or (
                    m.producer_id, m.producer_epoch, m.txn_start_timestamp) != open_:
                del self._lost_writes[transactional_id]
        return bool(self._lost_writes)

    # -- holding instead of CONCURRENT_TRANSACTIONS -----------------------------------------------

    def under_way(self, transactional_id: str) -> str | None:
        """What makes requests of ``transactional_id`` answer CONCURRENT_TRANSACTIONS now: its
        pending transition (``"PrepareCommit>CompleteCommit"``: markers on their way) or a prepared
        transaction; None if nothing is (or the id is not served here)."""
        error, entry = self.state.get(transactional_id)
        if error != Errors.NONE or entry is None:
            return None
        m = entry.metadata
        if m.pending_state is not None:
            return f"{m.state.kafka_name}>{m.pending_state.kafka_name}"
        return m.state.kafka_name if m.state.is_prepared else None

    async def held(self, api: str, transactional_id: str, attempt: Callable[[], T],
                   error_of: Callable[[T], Errors]) -> T:
        """``attempt()``, again each time the id's pending transition ends while it answers
        CONCURRENT_TRANSACTIONS because of that transition, for up to ``concurrent_hold_ms``.

        Nothing but the answer's timing changes: every attempt is the whole request (fencing,
        epochs, ownership, the state table), against the state a client's retry would meet
        then. The wait ends early on any change of ownership or shutdown; after the cap the
        last answer (CONCURRENT_TRANSACTIONS) goes out, as Kafka's would at once."""
        result = attempt()
        reason = self.under_way(transactional_id) if error_of(result) is Errors.CONCURRENT_TRANSACTIONS else None
        if reason is None or self.config.concurrent_hold_ms <= 0:
            if reason is not None:
                self.counts.concurrent[api, reason] += 1
            return result
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + self.config.concurrent_hold_ms / 1000
        while reason is not None and (remaining := deadline - loop.time()) > 0:
            await self.state.transition_ended(transactional_id, remaining)
            result = attempt()
            reason = self.under_way(transactional_id) if error_of(result) is Errors.CONCURRENT_TRANSACTIONS else None
        if error_of(result) is Errors.CONCURRENT_TRANSACTIONS:
            self.counts.concurrent[api, reason or "unknown"] += 1
        self.counts.held.setdefault(api, LatencyHistogram()).observe(loop.time() - started)
        return result

    # -- describe and list ------------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> DescribedTransaction:
        if not self.state.active:
            return DescribedTransaction(Errors.COORDINATOR_NOT_AVAILABLE, transactional_id)
        if not transactional_id:
            return DescribedTransaction(Errors.INVALID_REQUEST, transactional_id)
        error, entry = self.state.get(transactional_id)
        if error != Errors.NONE:
            return DescribedTransaction(error, transactional_id)
        if entry is None or entry.metadata.state is TxnState.DEAD:
            return DescribedTransaction(Errors.TRANSACTIONAL_ID_NOT_FOUND, transactional_id)
        m = entry.metadata
        return DescribedTransaction(Errors.NONE, transactional_id, m.state.kafka_name, m.txn_timeout_ms,
                                    m.txn_start_timestamp, m.producer_id, m.producer_epoch,
                                    frozenset(m.partitions))

    def list_transactions(
        self, states: Collection[str] = (), producer_ids: Collection[int] = (),
        min_duration_ms: int = -1, pattern: str | None = None,
    ) -> tuple[Errors, list[str], list[ListedTransaction]]:
        """(error, unknown state filters, transactions) for ListTransactions."""
        if not self.state.active:
            return Errors.COORDINATOR_NOT_AVAILABLE, [], []
        unknown = [s for s in states if TxnState.from_kafka_name(s) is None]
        wanted = {s for name in states if (s := TxnState.from_kafka_name(name)) is not None}
        try:
            regex = re.compile(pattern) if pattern else None
        except re.error:
            return Errors.INVALID_REGULAR_EXPRESSION, unknown, []
        if self.state.is_loading:
            return Errors.COORDINATOR_LOAD_IN_PROGRESS, unknown, []
        now = self._now()
        out = [
            ListedTransaction(m.transactional_id, m.producer_id, m.state.kafka_name)
            for m in self.state.owned_transactions()
            if m.state is not TxnState.DEAD
            and (not producer_ids or m.producer_id in producer_ids)
            and (not states or m.state in wanted)
            and (min_duration_ms < 0 or now - m.txn_start_timestamp > min_duration_ms)
            and (regex is None or regex.fullmatch(m.transactional_id) is not None)
        ]
        return Errors.NONE, unknown, out

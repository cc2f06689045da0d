"""TransactionManager: the producer's idempotence and transaction state (Java's, KIP-98).

What it owns, and nothing else (it does no I/O):

- the client state, moved only along ``VALID_PREVIOUS`` by ``transition_to``, which raises
  IllegalStateError on anything else (COMMITTING_TRANSACTION → ABORTING_TRANSACTION, say);
- the producer id and epoch, and per partition the sequence bookkeeping of Java's TxnPartitionMap:
  next sequence, last acknowledged sequence, the batches in flight ordered by sequence,
  partitions whose sequences are unresolved (a batch expired after it was sent), and the
  partitions whose sequences restart at 0 after an epoch bump (KIP-360);
- for a transactional producer, the partitions in the transaction (new → pending → added),
  whether anything was added (no EndTxn otherwise), and the queue of coordinator requests
  (``txn_requests``' handlers) in priority order;
- two-phase commit (KIP-939, ``transaction.two.phase.commit.enable``): the prepared
  transaction's (producer id, epoch) — this instance's own after ``prepare_transaction``,
  or the one a crashed instance left open, found by ``init_transactions(keep_prepared_txn)``
  — and the PREPARED_TRANSACTION state, from which only commit, abort or
  ``complete_prepared`` lead.

The sender asks it what to do next (``next_request_handler``, ``should_stop_drain``,
``can_retry``, ``bump_idempotent_epoch_if_needed``) and tells it what happened
(``handle_completed_batch``, ``handle_failed_batch``); the producer's API methods call the
``begin_*`` methods, which check the state and enqueue requests. Everything runs in the
producer's event loop except ``maybe_add_partition`` and ``fail_if_not_ready_for_send``,
which ``send()`` calls from the application's threads (hence ``_lock``).
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections.abc import Callable, Mapping

from eoslog.client.errors import (
    IllegalStateError,
    InvalidTxnStateError,
    KafkaError,
    OutOfOrderSequenceNumberError,
    ProducerFencedError,
    UnknownProducerIdError,
    UnresolvedSequenceError,
)
from eoslog.client.producer.batch import ProducerBatch, increment_sequence
from eoslog.client.producer.partition_sequences import NO_LAST_ACKED, PartitionSequences
from eoslog.client.producer.txn_requests import (
    AddOffsetsToTxnHandler,
    AddPartitionsToTxnHandler,
    EndTxnHandler,
    FindCoordinatorHandler,
    InitProducerIdHandler,
    TxnOffsetCommitHandler,
    TxnRequestHandler,
)
from eoslog.client.producer.txn_state import (
    MAX_EPOCH,
    NO_PRODUCER_ID,
    VALID_PREVIOUS,
    CoordinatorType,
    ProducerIdAndEpoch,
    State,
    TopicPartition,
    TxnResult,
)
from eoslog.client.types import ConsumerGroupMetadata, OffsetAndMetadata, PreparedTxnState, TransactionIdentity
from eoslog.features import TRANSACTION_VERSION, TRANSACTION_VERSION_2
from eoslog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

# The finalized features the brokers last told the client (AioClient.finalized_features):
# (epoch, {name: level}); (-1, {}) before any ApiVersions v3+ answer.
FinalizedFeatures = Callable[[], tuple[int, dict[str, int]]]


def _none_finalized() -> tuple[int, dict[str, int]]:
    return -1, {}


class TransactionManager:
    def __init__(
        self,
        *,
        transactional_id: str | None,
        transaction_timeout_ms: int = 60000,
        enable_2pc: bool = False,
        finalized_features: FinalizedFeatures = _none_finalized,
    ) -> None:
        self.transactional_id = transactional_id
        self.transactional = transactional_id is not None
        self.transaction_timeout_ms = transaction_timeout_ms
        self.enable_2pc = enable_2pc
        # KIP-939: ask the coordinator to keep an open transaction (set by init_transactions).
        self.keep_prepared_txn = False
        self.prepared: ProducerIdAndEpoch | None = None
        self.state = State.UNINITIALIZED
        # The state in which send() needs no further check (read on every send).
        self.send_state = State.IN_TRANSACTION if self.transactional else State.READY
        self.last_error: BaseException | None = None
        self.producer = NO_PRODUCER_ID
        self.partitions: dict[TopicPartition, PartitionSequences] = {}
        self.unresolved: set[TopicPartition] = set()
        # Partitions whose sequences restart from 0 — under a bumped epoch (idempotent) or the
        # same one (transactional, the broker forgot us) — as soon as none of their batches
        # is on the wire: rewriting a batch whose first attempt may still land could duplicate it.
        self.rewrite_sequences: set[TopicPartition] = set()
        self.restart_sequences: set[TopicPartition] = set()
        self.epoch_bump_required = False
        # Transactions.
        self._lock = threading.Lock()
        self.new_partitions: set[TopicPartition] = set()
        self.pending_partitions: set[TopicPartition] = set()
        self.txn_partitions: set[TopicPartition] = set()
        self.transaction_started = False
        self.coordinators: dict[tuple[CoordinatorType, str], int] = {}
        self._pending: list[tuple[int, int, TxnRequestHandler]] = []
        self._order = 0
        self._pending_transition: tuple[str, State, TxnResult] | None = None
        # Transaction version 2 (KIP-890 part 2): on when the cluster finalized
        # transaction.version >= 2 — no AddPartitionsToTxn / AddOffsetsToTxn (the brokers add
        # partitions from Produce v12 and TxnOffsetCommit v5), and every EndTxn v5 bumps the epoch.
        self.transaction_v2 = False
        self._finalized_features = finalized_features
        self._features_epoch = -1

    def __repr__(self) -> str:
        return f"TransactionManager({self.transactional_id!r}, {self.state.name}, {self.producer})"

    # -- state -------------------------------------------------------------------------------

    def transition_to(self, target: State, error: BaseException | None = None) -> None:
        """Move to ``target`` if the table allows it from the current state; else raise."""
        if self.state not in VALID_PREVIOUS[target]:
            raise IllegalStateError(
                f"TransactionalId {self.transactional_id}: Invalid transition attempted from state "
                f"{self.state.name} to state {target.name}"
            )
        if target in (State.ABORTABLE_ERROR, State.FATAL_ERROR):
            self.last_error = error
        elif target is not State.ABORTING_TRANSACTION:
            self.last_error = None
        log.debug("%s: %s -> %s", self.transactional_id or "idempotent producer", self.state.name, target.name)
        self.state = target

    def transition_to_fatal(self, error: BaseException) -> None:
        if self.state is not State.FATAL_ERROR:
            log.error("producer %s: fatal error: %s", self.transactional_id or "", error)
        self.transition_to(State.FATAL_ERROR, error)
        for _, _, handler in self._pending:
            handler.result.fail(error)
        self._pending.clear()

    def transition_to_abortable(self, error: BaseException) -> None:
        if self.state is State.ABORTING_TRANSACTION:
            return  # already aborting (Java skips the transition too)
        if self.state is State.FATAL_ERROR:
            return
        self.transition_to(State.ABORTABLE_ERROR, error)

    @property
    def has_error(self) -> bool:
        return self.state in (State.ABORTABLE_ERROR, State.FATAL_ERROR)

    @property
    def has_fatal_error(self) -> bool:
        return self.state is State.FATAL_ERROR

    @property
    def is_completing(self) -> bool:
        return self.state in (State.COMMITTING_TRANSACTION, State.ABORTING_TRANSACTION)

    def _fail_if_error(self, operation: str) -> None:
        if self.has_error:
            error = self.last_error
            message = f"Cannot execute transactional method {operation} because we are in an error state"
            raise _wrap(error, message)

    def _ensure_transactional(self) -> None:
        if not self.transactional:
            raise IllegalStateError("Transactional method invoked on a non-transactional producer.")

    def _cached(self, operation: str, target: State) -> TxnResult | None:
        """A call that timed out is retried by calling it again: hand back its pending result."""
        pending = self._pending_transition
        if pending is None:
            return None
        if pending[2].done:
            if pending[1] is target and not pending[2].acked:
                return pending[2]  # it completed after the call timed out: the retry sees how
            self._pending_transition = None
            return None
        if pending[1] is not target:
            raise IllegalStateError(
                f"Cannot attempt operation `{operation}` because the previous call to "
                f"`{pending[0]}` timed out and must be retried"
            )
        return pending[2]

    # -- the producer's API --------------------------------------------------------------------

    def initialize_transactions(self, keep_prepared_txn: bool = False) -> TxnResult:
        """``keep_prepared_txn`` (2PC only): do not abort a transaction a previous instance
        left open; this instance then starts in PREPARED_TRANSACTION with it."""
        cached = self._cached("init_transactions", State.INITIALIZING)
        if cached is not None:
            return cached
        self._ensure_transactional()
        if keep_prepared_txn and not self.enable_2pc:
            raise InvalidTxnStateError("init_transactions(keep_prepared_txn=True) needs "
                                       "transaction.two.phase.commit.enable=true")
        if self.state is not State.UNINITIALIZED:
            raise IllegalStateError(f"init_transactions() was already called (state {self.state.name})")
        self.transition_to(State.INITIALIZING)
        self.keep_prepared_txn = keep_prepared_txn
        self.producer = NO_PRODUCER_ID
        result = TxnResult("init_transactions")
        self._enqueue_init(result, epoch_bump=False)
        self._pending_transition = ("init_transactions", State.INITIALIZING, result)
        return result

    def begin_transaction(self) -> None:
        self._ensure_transactional()
        if self._pending_transition is not None and not self._pending_transition[2].done:
            raise IllegalStateError(
                f"Cannot begin a transaction because the previous call to `{self._pending_transition[0]}` "
                "timed out and must be retried"
            )
        self._pending_transition = None
        self._fail_if_error("begin_transaction")
        self._fail_if_prepared("begin_transaction")
        if self.state is not State.READY:
            raise IllegalStateError(
                "Cannot begin a transaction before init_transactions() completed"
                if self.state in (State.UNINITIALIZED, State.INITIALIZING)
                else f"Cannot begin a transaction in state {self.state.name}"
            )
        self.transition_to(State.IN_TRANSACTION)

    def begin_commit(self) -> TxnResult:
        cached = self._cached("commit_transaction", State.COMMITTING_TRANSACTION)
        if cached is not None:
            return cached
        self._ensure_transactional()
        self._fail_if_error("commit_transaction")
        if self.state not in (State.IN_TRANSACTION, State.PREPARED_TRANSACTION):
            raise IllegalStateError(f"Cannot commit a transaction in state {self.state.name}")
        self.transition_to(State.COMMITTING_TRANSACTION)
        return self._begin_completing(commit=True)

    def begin_abort(self) -> TxnResult:
        cached = self._cached("abort_transaction", State.ABORTING_TRANSACTION)
        if cached is not None:
            return cached
        self._ensure_transactional()
        if self.state is State.FATAL_ERROR:
            self._fail_if_error("abort_transaction")
        if self.state not in (State.IN_TRANSACTION, State.PREPARED_TRANSACTION, State.ABORTABLE_ERROR):
            raise IllegalStateError(f"Cannot abort a transaction in state {self.state.name}")
        self.transition_to(State.ABORTING_TRANSACTION)
        with self._lock:
            self.new_partitions.clear()  # aborting: nothing more to add
        return self._begin_completing(commit=False)

    def _begin_completing(self, *, commit: bool) -> TxnResult:

        operation = "commit_transaction" if commit else "abort_transaction"
        result = TxnResult(operation)
        # The EndTxn speaks the version this transaction began under; a cluster that moved to
        # transaction version 2 since is taken up after it, with an epoch bump (Java's
        # beginCompletingTransaction → maybeUpdateTransactionV2Enabled).
        handler = EndTxnHandler(self, result, commit=commit, transaction_v2=self.transaction_v2)
        self.update_transaction_version(on_initialization=False)
        self.enqueue(handler)
        self._pending_transition = (operation, self.state, result)
        return result

    def update_transaction_version(self, *, on_initialization: bool) -> None:
        """Take up the finalized transaction.version if the brokers told a newer feature
        epoch. Moving from version 1 to 2 after initialization needs one client-side epoch
        bump (InitProducerId after the EndTxn): the coordinator then knows this producer runs
        version 2 (Java's maybeUpdateTransactionV2Enabled)."""
        epoch, features = self._finalized_features()
        if epoch <= self._features_epoch:
            return
        self._features_epoch = epoch
        was = self.transaction_v2
        self.transaction_v2 = features.get(TRANSACTION_VERSION, 0) >= TRANSACTION_VERSION_2
        if was != self.transaction_v2:
            log.info("%s: transaction version %d (finalized features epoch %d)", self.transactional_id,
                     2 if self.transaction_v2 else 1, epoch)
        if not on_initialization and not was and self.transaction_v2:
            self.epoch_bump_required = True

    def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], group: ConsumerGroupMetadata,
    ) -> TxnResult:

        self._ensure_transactional()
        self._fail_if_error("send_offsets_to_transaction")
        self._fail_if_prepared("send_offsets_to_transaction")
        if self.state is not State.IN_TRANSACTION:
            raise IllegalStateError(
                f"Cannot send offsets if a transaction is not in progress (currentState= {self.state.name})"
            )
        result = TxnResult("send_offsets_to_transaction")
        if self.transaction_v2:
            # TxnOffsetCommit v5: the group coordinator adds __consumer_offsets itself.
            self.transaction_started = True
            self.enqueue(TxnOffsetCommitHandler(self, result, dict(offsets), group, transaction_v2=True))
        else:
            self.enqueue(AddOffsetsToTxnHandler(self, result, dict(offsets), group))
        return result

    # -- eoslog's extension: share acknowledgements inside the transaction -------------------------

    def share_transaction(self) -> TransactionIdentity:
        """The open transaction a share consumer's acknowledgements are to join (docs/consumer.md)."""
        self._ensure_transactional()
        self._fail_if_error("send_acknowledgements_to_transaction")
        self._fail_if_prepared("send_acknowledgements_to_transaction")
        if self.state is not State.IN_TRANSACTION:
            raise IllegalStateError("Cannot send acknowledgements if a transaction is not in progress "
                                    f"(currentState= {self.state.name})")
        assert self.transactional_id is not None
        return TransactionIdentity(self.transactional_id, self.producer.producer_id, self.producer.epoch)

    def share_acknowledged(self, error: BaseException | None) -> None:
        """The acknowledgements' outcome. Held: the share coordinator added its partition to the
        transaction, so EndTxn is needed. Refused or unknown (a timeout): the transaction must
        abort, and the next one runs under a bumped epoch (KIP-360) — which aborts the
        transaction at the coordinator if the partition was added after all, and fences a
        request of this one still on its way."""
        if error is None:
            self.transaction_started = True
        elif isinstance(error, ProducerFencedError):
            self.transition_to_fatal(error)
        else:
            self.epoch_bump_required = True
            self.transition_to_abortable(error)

    # -- two-phase commit (KIP-939) ---------------------------------------------------------------

    def _fail_if_prepared(self, operation: str) -> None:
        if self.state is State.PREPARED_TRANSACTION:
            raise IllegalStateError(
                f"Cannot call {operation} while the transaction is in a prepared state: only "
                "commit_transaction(), abort_transaction() or complete_transaction() are permitted"
            )

    def check_can_prepare(self) -> None:
        """What prepare_transaction() checks before it flushes (Kafka's order)."""
        self._ensure_transactional()
        self._fail_if_prepared("prepare_transaction")
        if not self.enable_2pc:
            raise InvalidTxnStateError("Cannot prepare a transaction when 2PC is not enabled "
                                       "(transaction.two.phase.commit.enable)")

    def prepare_transaction(self) -> PreparedTxnState:
        """Everything was flushed: the transaction is prepared under this producer's pair."""
        self.check_can_prepare()
        self._fail_if_error("prepare_transaction")
        if self.state is not State.IN_TRANSACTION:
            raise IllegalStateError(f"Cannot prepare a transaction in state {self.state.name}")
        with self._lock:
            unadded = bool(self.new_partitions or self.pending_partitions)
        if unadded:
            raise IllegalStateError("Cannot prepare a transaction while partitions are still being added; "
                                    "flush() first")
        self.transition_to(State.PREPARED_TRANSACTION)
        self.prepared = self.producer
        return PreparedTxnState(self.producer.producer_id, self.producer.epoch)

    def prepared_transaction_state(self) -> PreparedTxnState | None:
        """The prepared transaction's pair while in PREPARED_TRANSACTION; None otherwise."""
        if self.state is not State.PREPARED_TRANSACTION or self.prepared is None:
            return None
        return PreparedTxnState(self.prepared.producer_id, self.prepared.epoch)

    def complete_prepared(self, state: PreparedTxnState) -> TxnResult:
        """Commit the prepared transaction if it is the one ``state`` names, else abort it."""
        self._ensure_transactional()
        if not isinstance(state, PreparedTxnState):
            # A stored string passed as is would never match: it must not abort silently.
            raise TypeError(f"complete_transaction() takes a PreparedTxnState (PreparedTxnState.from_string(...)), "
                            f"not {type(state).__name__}")
        current = self.prepared_transaction_state()
        if current is None:
            cached = self._pending_transition
            if cached is not None and not cached[2].done and cached[1] in (
                    State.COMMITTING_TRANSACTION, State.ABORTING_TRANSACTION):
                return cached[2]  # a retry of a call that timed out
            raise InvalidTxnStateError("Cannot complete transaction because no transaction has been prepared. "
                                       "Call prepare_transaction() first, or init_transactions(keep_prepared_txn=True)")
        if current == state:
            return self.begin_commit()
        log.info("%s: prepared transaction %s is not %s: aborting it", self.transactional_id,
                 current.to_string(), state.to_string())
        return self.begin_abort()

    def on_initialized(self, producer: ProducerIdAndEpoch, ongoing: ProducerIdAndEpoch) -> None:
        """InitProducerId succeeded; ``ongoing`` is the kept open transaction, if any."""
        self.producer = producer
        self.update_transaction_version(on_initialization=True)
        if self.keep_prepared_txn and ongoing.valid:
            self.prepared = ongoing
            self.transaction_started = True  # the coordinator has it open: EndTxn is needed
            self.transition_to(State.PREPARED_TRANSACTION)
        else:
            self.transition_to(State.READY)

    # -- send() (application threads) ------------------------------------------------------

    def fail_if_not_ready_for_send(self) -> None:
        if self.has_error:
            raise _wrap(self.last_error, "Cannot perform send because at least one previous transactional or "
                                         "idempotent request has failed with errors.")
        if self.transactional:
            if self.state in (State.UNINITIALIZED, State.INITIALIZING):
                raise IllegalStateError("Cannot perform a 'send' before completing a call to init_transactions() "
                                        "when transactions are enabled.")
            self._fail_if_prepared("send")
            if self.state is not State.IN_TRANSACTION:
                raise IllegalStateError(f"Cannot call send in state {self.state.name}")

    def maybe_add_partition(self, tp: TopicPartition) -> None:
        """First write to a partition in this transaction: AddPartitionsToTxn before Produce
        (version 1); under version 2 the partition's leader adds it, so it is in at once."""
        if tp in self.txn_partitions:
            return
        with self._lock:
            if self.transaction_v2:
                self.txn_partitions.add(tp)
                self.transaction_started = True
                return
            if tp not in self.txn_partitions and tp not in self.pending_partitions:
                self.new_partitions.add(tp)

    # -- coordinator requests (event loop) --------------------------------------------------

    def enqueue(self, handler: TxnRequestHandler) -> None:
        self._order += 1
        bisect.insort(self._pending, (handler.priority, self._order, handler), key=lambda e: (e[0], e[1]))

    def _enqueue_init(self, result: TxnResult, *, epoch_bump: bool) -> None:

        self.enqueue(InitProducerIdHandler(self, result, epoch_bump=epoch_bump))

    def next_request_handler(self, has_incomplete_batches: bool) -> TxnRequestHandler | None:
        """The coordinator request to send now, if any (Java's nextRequestHandler)."""

        with self._lock:
            if self.new_partitions and self.state in (State.IN_TRANSACTION, State.COMMITTING_TRANSACTION):
                partitions = set(self.new_partitions)
                self.pending_partitions |= partitions
                self.new_partitions.clear()
            else:
                partitions = set()
        if partitions:
            self.enqueue(AddPartitionsToTxnHandler(self, TxnResult("add_partitions"), partitions))
        while self._pending:
            handler = self._pending[0][2]
            if isinstance(handler, EndTxnHandler) and (has_incomplete_batches or self.pending_partitions):
                return None  # EndTxn only after every batch of the transaction completed
            self._pending.pop(0)
            if self.has_error and not (
                isinstance(handler, FindCoordinatorHandler) and self.state is State.ABORTABLE_ERROR
            ):
                handler.result.fail(_wrap(self.last_error, "the producer is in an error state"))
                continue
            if isinstance(handler, EndTxnHandler) and not self.transaction_started:
                # Nothing was added: there is nothing for the coordinator to end (Java's
                # TransactionManager.nextRequest sends no EndTxn then).
                self.complete_transaction(handler.result)
                continue
            return handler
        return None

    def coordinator(self, kind: CoordinatorType, key: str) -> int | None:
        return self.coordinators.get((kind, key))

    def set_coordinator(self, kind: CoordinatorType, key: str, node_id: int) -> None:
        self.coordinators[(kind, key)] = node_id

    def invalidate_coordinator(self, kind: CoordinatorType, key: str) -> None:
        self.coordinators.pop((kind, key), None)

    def on_epoch_bumped(self, producer: ProducerIdAndEpoch) -> None:
        """InitProducerId gave this producer a new epoch (KIP-360): every partition starts at
        sequence 0 under it."""
        self.set_producer_id(producer)
        self.epoch_bump_required = False
        self.partitions.clear()
        self.transition_to(State.READY)

    def set_producer_id(self, producer: ProducerIdAndEpoch) -> None:
        self.producer = producer

    def on_end_txn_epoch(self, producer: ProducerIdAndEpoch) -> None:
        """EndTxn v5 ended the transaction under a new epoch (or a new producer id when the
        epoch ran out): the next transaction starts every partition at sequence 0 under it."""
        self.producer = producer
        self.partitions.clear()
        self.unresolved.clear()

    def partitions_added(self, partitions: set[TopicPartition]) -> None:
        with self._lock:
            self.txn_partitions |= partitions
            self.pending_partitions -= partitions
        self.transaction_started = True

    def partitions_not_added(self, partitions: set[TopicPartition]) -> None:
        with self._lock:
            self.pending_partitions -= partitions

    def complete_transaction(self, result: TxnResult) -> None:
        """EndTxn succeeded (or was not needed): back to READY, or bump the epoch first."""
        with self._lock:
            self.new_partitions.clear()
            self.pending_partitions.clear()
            self.txn_partitions.clear()
        self.transaction_started = False
        self.prepared = None
        if self.epoch_bump_required:
            # Batches of the aborted transaction failed after getting sequences, or the cluster
            # just moved to transaction version 2: the next transaction starts under a new
            # epoch, from sequence 0 (KIP-360; Java's resetTransactionState).
            self.transition_to(State.INITIALIZING)
            self._enqueue_init(result, epoch_bump=True)
            return
        self.transition_to(State.READY)
        result.succeed()

    # -- idempotence: sequences (event loop) ----------------------------------------------------

    def _entry(self, tp: TopicPartition) -> PartitionSequences:
        entry = self.partitions.get(tp)
        if entry is None:
            entry = self.partitions[tp] = PartitionSequences(self.producer)
        return entry

    def is_send_to_partition_allowed(self, tp: TopicPartition) -> bool:
        if self.state is State.FATAL_ERROR:
            return False
        return not self.transactional or tp in self.txn_partitions

    def should_stop_drain(self, batch: ProducerBatch) -> bool:
        """Whether ``batch`` (first of its partition's deque) must wait (Java's
        shouldStopDrainBatchesForPartition)."""
        tp = (batch.topic, batch.partition)
        if not self.is_send_to_partition_allowed(tp) or not self.producer.valid:
            return True
        if tp in self.rewrite_sequences or tp in self.restart_sequences:
            return True  # its sequences restart once nothing of it is on the wire
        entry = self.partitions.get(tp)
        if not batch.has_sequence:
            if self.state is State.INITIALIZING:
                return True
            if entry is not None and entry.in_flight and entry.producer != self.producer:
                # Earlier batches under the old epoch must complete before sequence 0 of the new one.
                return True
            if entry is not None and entry.in_flight and entry.last_acked_sequence == NO_LAST_ACKED:
                # Nothing acknowledged yet under this id and epoch: the broker may hold no state
                # for us on this partition, and then it takes any first sequence (Kafka's
                # ProducerAppendInfo, KIP-360). A later batch landing before a refused sequence 0
                # would leave it OUT_OF_ORDER_SEQUENCE_NUMBER on every retry, so one batch
                # goes until the first is acknowledged; pipelining resumes after.
                return True
            if tp in self.unresolved:
                return True
        if entry is not None and entry.in_flight and batch.has_sequence:
            # Retrying: only the first batch in flight goes; the rest wait for it (Java's
            # RecordAccumulator.drain against TransactionManager.firstInFlightSequence).
            return batch.base_sequence != entry.in_flight[0].base_sequence
        return False

    def assign_sequence(self, batch: ProducerBatch) -> None:
        tp = (batch.topic, batch.partition)
        entry = self._entry(tp)
        if entry.producer != self.producer and not entry.in_flight:
            # Java's maybeUpdateProducerIdAndEpoch: a new id or epoch starts at sequence 0.
            entry.producer = self.producer
            entry.next_sequence = 0
            entry.last_acked_sequence = NO_LAST_ACKED
        batch.set_producer_state(self.producer.producer_id, self.producer.epoch, entry.next_sequence,
                                 self.transactional)
        entry.next_sequence = increment_sequence(entry.next_sequence, batch.count)
        entry.add_in_flight(batch)

    def sent(self, batch: ProducerBatch) -> None:
        entry = self.partitions.get((batch.topic, batch.partition))
        if entry is not None:
            entry.on_wire += 1

    def returned(self, batch: ProducerBatch) -> None:
        """The request carrying ``batch`` was answered or failed."""
        entry = self.partitions.get((batch.topic, batch.partition))
        if entry is not None and entry.on_wire > 0:
            entry.on_wire -= 1

    def _on_wire(self, tp: TopicPartition) -> bool:
        entry = self.partitions.get(tp)
        return entry is not None and entry.on_wire > 0

    def maybe_restart_sequences(self) -> None:
        """Transactional: restart the sequences the broker forgot, once none is on the wire."""
        for tp in [tp for tp in self.restart_sequences if not self._on_wire(tp)]:
            self.restart_sequences.discard(tp)
            self.start_sequences_at_beginning(tp)

    def add_in_flight(self, batch: ProducerBatch) -> None:
        """A batch split from one in flight keeps its sequences and is tracked the same way."""
        self._entry((batch.topic, batch.partition)).add_in_flight(batch)

    def remove_in_flight(self, batch: ProducerBatch) -> None:
        entry = self.partitions.get((batch.topic, batch.partition))
        if entry is not None:
            entry.remove_in_flight(batch)

    def _same_producer(self, batch: ProducerBatch) -> bool:
        return batch.producer_id == self.producer.producer_id

    def handle_completed_batch(self, batch: ProducerBatch, base_offset: int) -> None:
        entry = self.partitions.get((batch.topic, batch.partition))
        if entry is None:
            return
        entry.remove_in_flight(batch)
        if batch.has_sequence and batch.producer_id == entry.producer.producer_id \
                and batch.producer_epoch == entry.producer.epoch:
            last = batch.last_sequence
            if last > entry.last_acked_sequence or entry.last_acked_sequence - last > 2**30:  # wrapped
                entry.last_acked_sequence = last
            if base_offset >= 0:
                entry.last_acked_offset = max(entry.last_acked_offset, base_offset + batch.count - 1)

    def handle_failed_batch(self, batch: ProducerBatch, error: BaseException, adjust_sequences: bool) -> None:
        self._maybe_transition_to_error_state(error)
        self.remove_in_flight(batch)
        if self.has_fatal_error or not batch.has_sequence or not adjust_sequences:
            return
        if self.transactional:
            # Its sequences are lost to the partition: the next transaction starts afresh
            # under a new epoch — the abort's own under version 2 (EndTxn v5 bumps it).
            if not self.transaction_v2:
                self.epoch_bump_required = True
        else:
            self.request_epoch_bump((batch.topic, batch.partition))

    def _maybe_transition_to_error_state(self, error: BaseException) -> None:
        fatal = bool(getattr(error, "fatal", False)) or (
            self.transactional and isinstance(error, OutOfOrderSequenceNumberError)
        )
        if fatal:
            self.transition_to_fatal(error)
        elif self.transactional:
            if isinstance(error, KafkaError):
                error.txn_requires_abort = True
            self.transition_to_abortable(error)

    def can_retry(self, code: int, batch: ProducerBatch, log_start_offset: int, retriable: bool) -> bool:
        """Whether a produce error may be retried (Java's TransactionManager.canRetry)."""
        tp = (batch.topic, batch.partition)
        entry = self.partitions.get(tp)
        if code == ErrorCode.unknown_producer_id:
            if log_start_offset == -1 or batch.sequence_reset:
                return True
            if entry is not None and entry.last_acked_offset < log_start_offset:
                # The log's head was deleted (retention) and the broker forgot us with it.
                if self.transactional:
                    self.restart_sequences.add(tp)
                else:
                    self.request_epoch_bump(tp)
                return True
            if not self.transactional:
                self.request_epoch_bump(tp)
                return True
            return False
        if code == ErrorCode.out_of_order_sequence_number:
            if tp not in self.unresolved and (batch.sequence_reset or not self._is_next_sequence(tp, batch)):
                return True  # an earlier batch is still in flight or being retried
            if not self.transactional:
                if tp not in self.unresolved or self._is_next_for_unresolved(tp, batch):
                    self.request_epoch_bump(tp)  # a real gap
                return True
            return False
        return retriable

    def _is_next_sequence(self, tp: TopicPartition, batch: ProducerBatch) -> bool:
        """Whether the batch directly follows the last acknowledged one."""
        entry = self.partitions.get(tp)
        last = entry.last_acked_sequence if entry is not None else NO_LAST_ACKED
        return batch.base_sequence == increment_sequence(last, 1)

    def _is_next_for_unresolved(self, tp: TopicPartition, batch: ProducerBatch) -> bool:
        return tp in self.unresolved and self._is_next_sequence(tp, batch)

    def mark_sequence_unresolved(self, batch: ProducerBatch) -> None:
        self.unresolved.add((batch.topic, batch.partition))
        self.remove_in_flight(batch)

    def request_epoch_bump(self, tp: TopicPartition) -> None:
        if not self.transactional:
            self.rewrite_sequences.add(tp)
        self.epoch_bump_required = True

    def start_sequences_at_beginning(self, tp: TopicPartition) -> None:
        entry = self._entry(tp)
        sequence = 0
        for batch in entry.in_flight:
            batch.reset_producer_state(self.producer.producer_id, self.producer.epoch, sequence)
            sequence = increment_sequence(sequence, batch.count)
        entry.producer = self.producer
        entry.next_sequence = sequence
        entry.last_acked_sequence = NO_LAST_ACKED

    def maybe_resolve_sequences(self) -> None:
        """A partition whose expired batches left its sequences unknown is resolved once
        nothing of it is in flight: fine if the broker acknowledged up to the last sequence
        sent, else an epoch bump (idempotent) or a fatal error (transactional)."""
        for tp in list(self.unresolved):
            entry = self.partitions.get(tp)
            if entry is not None and entry.in_flight:
                continue
            self.unresolved.discard(tp)
            if entry is None or increment_sequence(entry.last_acked_sequence, 1) == entry.next_sequence:
                continue  # the expired batches had reached the broker after all
            if self.transactional:
                self.transition_to_fatal(UnresolvedSequenceError(
                    f"The client hasn't received acknowledgment for some previously sent messages to "
                    f"{tp[0]}-{tp[1]} and can no longer retry them. It isn't safe to continue."
                ))
            else:
                log.info("no batch of %s-%d in flight; last acknowledged sequence %d, next %d: bumping the epoch",
                         tp[0], tp[1], entry.last_acked_sequence, entry.next_sequence)
                self.request_epoch_bump(tp)

    def bump_idempotent_epoch_if_needed(self) -> TxnResult | None:
        """Idempotent producer: bump the epoch locally when asked to (KIP-360), and get a
        producer id when there is none; returns the result of an InitProducerId it enqueued."""
        if self.transactional or self.state is State.FATAL_ERROR:
            return None
        if self.epoch_bump_required and self.producer.valid and not any(
            self._on_wire(tp) for tp in self.rewrite_sequences
        ):
            if self.producer.epoch >= MAX_EPOCH:
                log.info("producer %d exhausted its epochs; asking for a new producer id", self.producer.producer_id)
                self.producer = NO_PRODUCER_ID
                if self.state is not State.UNINITIALIZED:
                    self.transition_to(State.UNINITIALIZED)
                self.partitions.clear()
            else:
                self.producer = ProducerIdAndEpoch(self.producer.producer_id, self.producer.epoch + 1)
                log.info("bumped the idempotent producer's epoch to %s", self.producer)
                for tp in self.rewrite_sequences:
                    self.start_sequences_at_beginning(tp)
                    self.unresolved.discard(tp)
            self.rewrite_sequences.clear()
            self.epoch_bump_required = False
        if not self.producer.valid and self.state is State.UNINITIALIZED:
            self.transition_to(State.INITIALIZING)
            result = TxnResult("init_producer_id")
            self._enqueue_init(result, epoch_bump=False)
            return result
        return None

    def has_in_flight(self, tp: TopicPartition) -> bool:
        entry = self.partitions.get(tp)
        return entry is not None and bool(entry.in_flight)


def _wrap(error: BaseException | None, message: str) -> BaseException:
    """The error to raise from an API call in an error state: the original one, so that its
    ``fatal`` / ``txn_requires_abort`` flags reach the application."""
    if error is not None:
        return error
    return IllegalStateError(message)


__all__ = [
    "VALID_PREVIOUS", "CoordinatorType", "PartitionSequences", "ProducerIdAndEpoch", "State",
    "TransactionManager", "TxnResult", "UnknownProducerIdError",
]

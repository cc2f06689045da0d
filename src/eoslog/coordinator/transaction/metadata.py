"""What the coordinator knows of one transactional id, and how it changes.

As Kafka's ``TransactionMetadata``: every change is *prepared* first — checked against the
state table, recorded as the pending state, and returned as an immutable
``TxnTransitMetadata`` — then written to ``__transaction_state``, and *completed*
(``complete_transition``) only after that append succeeded. A failed append calls
``abandon_transition`` and leaves the metadata as it was. While a transition is pending
no other may be prepared, which is how concurrent requests get CONCURRENT_TRANSACTIONS.

Expected refusals (a fenced epoch in InitProducerId) come back as an ``Errors`` member, not an
exception; ``IllegalTransitionError`` (``RuntimeError``) means a coordinator bug.
Never does I/O.

Two-phase commit (KIP-939): a transactional id whose producer enabled 2PC has the timeout
``TWO_PHASE_COMMIT_TIMEOUT_MS`` and its transactions never time out. When a new instance
asks to *keep* the open transaction (``prepare_keep_prepared``), the transaction keeps its
(producer id, epoch) — the pair the external coordinator recorded at prepare time, and the
one its batches carry — while the new client gets a bumped pair, ``next_producer_id`` /
``next_producer_epoch``; older instances are fenced by it. Ending the transaction writes
markers under ``marker_producer`` (a newer epoch than the batches', which fences the older
instance in every partition too) and then the client's pair becomes the id's pair.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from eoslog.coordinator.transaction.log import TWO_PHASE_COMMIT_TIMEOUT_MS, TransactionLogValue
from eoslog.coordinator.transaction.state import IllegalTransitionError, TxnState, validate_transition
from eoslog.errors import Errors
from eoslog.features import TRANSACTION_VERSION_2
from eoslog.types import TopicPartition

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
EPOCH_MAX = 2**15 - 1  # Short.MaxValue


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka never hands out Short.MaxValue itself, so that a fence can always bump."""
    return epoch >= EPOCH_MAX - 1


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """The target of one prepared transition; becomes the metadata once it is in the log."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    next_producer_id: int = NO_PRODUCER_ID
    next_producer_epoch: int = NO_PRODUCER_EPOCH
    client_transaction_version: int = 0
    rotated_producer_id: int = NO_PRODUCER_ID

    def log_value(self) -> TransactionLogValue:
        """The record. Kafka writes the producer id before the transition as the previous one,
        and in NextProducerId either a kept transaction's client id (with NextProducerEpoch) or
        the id a TV2 transaction moves to when it completes."""
        next_pid = self.next_producer_id if self.next_producer_id >= 0 else self.rotated_producer_id
        return TransactionLogValue(
            self.producer_id, self.producer_epoch, self.txn_timeout_ms, self.state,
            self.partitions, self.txn_last_update_timestamp, self.txn_start_timestamp,
            next_pid, self.next_producer_epoch, self.last_producer_id,
            self.client_transaction_version,
        )


class TransactionMetadata:
    def __init__(
        self, transactional_id: str, producer_id: int, *, producer_epoch: int = NO_PRODUCER_EPOCH,
        last_producer_id: int = NO_PRODUCER_ID, last_producer_epoch: int = NO_PRODUCER_EPOCH,
        txn_timeout_ms: int, state: TxnState = TxnState.EMPTY,
        partitions: Iterable[TopicPartition] = (), txn_start_timestamp: int = -1,
        txn_last_update_timestamp: int, next_producer_id: int = NO_PRODUCER_ID,
        next_producer_epoch: int = NO_PRODUCER_EPOCH, client_transaction_version: int = 0,
        rotated_producer_id: int = NO_PRODUCER_ID,
    ) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.last_producer_id = last_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = state
        self.partitions: set[TopicPartition] = set(partitions)
        self.txn_start_timestamp = txn_start_timestamp
        self.txn_last_update_timestamp = txn_last_update_timestamp
        self.next_producer_id = next_producer_id
        self.next_producer_epoch = next_producer_epoch
        # The transaction protocol of the requests that changed the transaction last
        # (Kafka's clientTransactionVersion: 0 for transactions v1 clients, 2 for KIP-890 part 2's).
        self.client_transaction_version = client_transaction_version
        # Transactions v2: the producer id a prepared transaction moves to (at epoch 0) when it
        # completes, because its EndTxn exhausted the epochs of this one (Kafka's nextProducerId).
        self.rotated_producer_id = rotated_producer_id
        self.pending_state: TxnState | None = None
        # A fence whose append failed already bumped the epoch in memory; it is not
        # bumped again (that epoch was never handed out).
        self.has_failed_epoch_fence = False

    @classmethod
    def from_log(cls, transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
        kept = value.is_kept
        return cls(
            transactional_id, value.producer_id, producer_epoch=value.producer_epoch,
            last_producer_id=value.previous_producer_id,
            txn_timeout_ms=value.timeout_ms, state=value.state, partitions=value.partitions,
            txn_start_timestamp=value.start_ms, txn_last_update_timestamp=value.last_update_ms,
            next_producer_id=value.next_producer_id if kept else NO_PRODUCER_ID,
            next_producer_epoch=value.next_producer_epoch if kept else NO_PRODUCER_EPOCH,
            client_transaction_version=value.client_transaction_version,
            rotated_producer_id=NO_PRODUCER_ID if kept else value.next_producer_id,
        )

    def __repr__(self) -> str:
        return (
            f"TransactionMetadata({self.transactional_id!r}, producer {self.producer_id} epoch "
            f"{self.producer_epoch}{self._kept_repr()}, {self.state.kafka_name}, pending "
            f"{self.pending_state.kafka_name if self.pending_state else None}, "
            f"{len(self.partitions)} partitions)"
        )

    def _kept_repr(self) -> str:
        return f" (client {self.next_producer_id} epoch {self.next_producer_epoch})" if self.is_kept else ""

    @property
    def is_two_phase_commit(self) -> bool:
        """Kafka's isDistributedTwoPhaseCommitTxn: never aborted by the coordinator's timeout."""
        return self.txn_timeout_ms == TWO_PHASE_COMMIT_TIMEOUT_MS

    @property
    def is_kept(self) -> bool:
        """An open transaction kept by InitProducerId(keep_prepared_txn) for a newer client."""
        return self.next_producer_id >= 0

    @property
    def client_producer(self) -> tuple[int, int]:
        """The (producer id, epoch) the current client instance uses in its requests."""
        if self.is_kept:
            return self.next_producer_id, self.next_producer_epoch
        return self.producer_id, self.producer_epoch

    @property
    def marker_producer(self) -> tuple[int, int]:
        """The (producer id, epoch) of the markers ending the open transaction: its own pair,
        or for a kept transaction a newer epoch of its producer id, which the partitions
        accept and which fences the instance that wrote the batches."""
        if not self.is_kept:
            return self.producer_id, self.producer_epoch
        if self.next_producer_id == self.producer_id:
            return self.producer_id, self.next_producer_epoch
        # The client moved to a new producer id once this one's epochs ran out: the last epoch
        # is above every one handed out, so no earlier instance can write under it again.
        return self.producer_id, EPOCH_MAX

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    # -- prepare ------------------------------------------------------------------------------

    def _prepare(
        self, state: TxnState, *, producer_id: int | None = None, epoch: int | None = None,
        last_epoch: int | None = None, timeout_ms: int | None = None,
        partitions: Iterable[TopicPartition] | None = None, start: int | None = None,
        update: int | None = None, next_producer: tuple[int, int] | None = None,
        client_transaction_version: int | None = None, rotated_producer_id: int | None = None,
    ) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransitionError(
                f"{self.transactional_id}: preparing {state.kafka_name} while "
                f"{self.pending_state.kafka_name} is pending"
            )
        new_pid = self.producer_id if producer_id is None else producer_id
        new_epoch = self.producer_epoch if epoch is None else epoch
        if new_pid < 0:
            raise IllegalTransitionError(f"{self.transactional_id}: illegal producer id {new_pid}")
        if state is not TxnState.DEAD and new_epoch < 0:
            raise IllegalTransitionError(f"{self.transactional_id}: illegal producer epoch {new_epoch}")
        validate_transition(self.state, state)
        next_pid, next_epoch = (self.next_producer_id, self.next_producer_epoch) if next_producer is None \
            else next_producer
        transit = TxnTransitMetadata(
            new_pid, self.producer_id, new_epoch,
            self.last_producer_epoch if last_epoch is None else last_epoch,
            self.txn_timeout_ms if timeout_ms is None else timeout_ms, state,
            frozenset(self.partitions if partitions is None else partitions),
            self.txn_start_timestamp if start is None else start,
            self.txn_last_update_timestamp if update is None else update,
            next_pid, next_epoch,
            self.client_transaction_version if client_transaction_version is None else client_transaction_version,
            self.rotated_producer_id if rotated_producer_id is None else rotated_producer_id,
        )
        self.pending_state = state
        return transit

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Ongoing → PrepareEpochFence with epoch + 1: the open transaction will be aborted
        with an epoch its producer does not have, which fences it everywhere. A kept
        transaction is fenced above the epoch its client was given (if that client has the
        same producer id; else at the last epoch, as every epoch of the producer id may have
        been handed out), and the client's pair is dropped."""
        if self.is_kept and self.next_producer_id != self.producer_id:
            bumped = EPOCH_MAX  # the next InitProducerId then rotates to a new producer id
        else:
            current = self.next_producer_epoch if self.is_kept else self.producer_epoch
            if current >= EPOCH_MAX:
                raise IllegalTransitionError(f"{self.transactional_id}: cannot fence epoch {current}")
            bumped = current if self.has_failed_epoch_fence else current + 1
        return self._prepare(TxnState.PREPARE_EPOCH_FENCE, epoch=bumped, last_epoch=NO_PRODUCER_EPOCH,
                             next_producer=(NO_PRODUCER_ID, NO_PRODUCER_EPOCH))

    def prepare_keep_prepared(self, new_producer_id: int | None, now: int) -> TxnTransitMetadata:
        """InitProducerId(keep_prepared_txn) of a 2PC transaction (KIP-939): Ongoing stays
        Ongoing with the same (producer id, epoch); the new client gets the next epoch of the
        client pair, or epoch 0 of ``new_producer_id`` when those epochs are used up."""
        if self.state is not TxnState.ONGOING or not self.is_two_phase_commit:
            raise IllegalTransitionError(f"{self!r}: only an ongoing 2PC transaction can be kept")
        client_id, client_epoch = self.client_producer
        if new_producer_id is not None:
            next_producer = (new_producer_id, 0)
        elif is_epoch_exhausted(client_epoch):
            raise IllegalTransitionError(f"{self!r}: the client's epochs are exhausted, a new producer id is needed")
        else:
            next_producer = (client_id, client_epoch + 1)
        return self._prepare(TxnState.ONGOING, update=now, next_producer=next_producer)

    @property
    def is_client_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.client_producer[1])

    def prepare_increment_producer_epoch(
        self, timeout_ms: int, expected_epoch: int | None, now: int
    ) -> TxnTransitMetadata | Errors:
        """InitProducerId: a new epoch (KIP-360: a producer that sends its current epoch
        gets it bumped; a retry that sends the previous one gets the current again)."""
        if self.is_producer_epoch_exhausted:
            raise IllegalTransitionError(f"{self.transactional_id}: producer epochs exhausted")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last_epoch = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            log.info("%s: expected epoch %d is neither the current %d nor the previous %d",
                     self.transactional_id, expected_epoch, self.producer_epoch, self.last_producer_epoch)
            return Errors.PRODUCER_FENCED
        return self._prepare(TxnState.EMPTY, epoch=epoch, last_epoch=last_epoch, timeout_ms=timeout_ms,
                             partitions=(), start=-1, update=now, next_producer=(NO_PRODUCER_ID, NO_PRODUCER_EPOCH))

    def prepare_producer_id_rotation(
        self, new_producer_id: int, timeout_ms: int, now: int, record_last_epoch: bool
    ) -> TxnTransitMetadata:
        """InitProducerId when the epochs of this producer id are used up: epoch 0 of a new id."""
        if self.has_pending_transaction:
            raise IllegalTransitionError(f"{self.transactional_id}: rotating ids with a transaction open")
        return self._prepare(
            TxnState.EMPTY, producer_id=new_producer_id, epoch=0,
            last_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms, partitions=(), start=-1, update=now,
            next_producer=(NO_PRODUCER_ID, NO_PRODUCER_EPOCH),
        )

    def prepare_add_partitions(self, added: Iterable[TopicPartition], now: int,
                               client_transaction_version: int = 0) -> TxnTransitMetadata:
        """AddPartitionsToTxn (a client's, or a partition leader's for TV2's implicit add) or
        AddOffsetsToTxn; the transaction protocol of the request is recorded (Kafka's
        clientTransactionVersion)."""
        starts = self.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
        return self._prepare(TxnState.ONGOING, partitions=self.partitions | set(added),
                             start=now if starts else self.txn_start_timestamp, update=now,
                             client_transaction_version=client_transaction_version)

    def prepare_abort_or_commit(self, state: TxnState, now: int, client_transaction_version: int = 0,
                                rotated_producer_id: int = NO_PRODUCER_ID,
                                no_partition_added: bool = False) -> TxnTransitMetadata:
        """PrepareCommit / PrepareAbort. Transactions v2 (``client_transaction_version`` >= 2,
        Kafka's TransactionMetadata.prepareAbortOrCommit): the epoch is bumped now — the markers
        and the client's next transaction use the new one, which fences every request of the
        ending transaction still on its way — and ``rotated_producer_id`` is the id to move to
        when the bump exhausted this one's epochs. An abort of a transaction that added nothing
        (``no_partition_added``: Empty or completed, allowed to a TV2 client) starts now."""
        if client_transaction_version >= TRANSACTION_VERSION_2:
            if self.producer_epoch == EPOCH_MAX and state is TxnState.PREPARE_ABORT:
                log.error("%s: aborting producer %d at the last epoch; not bumped", self.transactional_id,
                          self.producer_id)
                epoch = self.producer_epoch
            else:
                epoch = self.producer_epoch + 1
            last_epoch = self.producer_epoch
        else:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        return self._prepare(state, epoch=epoch, last_epoch=last_epoch, update=now,
                             start=now if no_partition_added else self.txn_start_timestamp,
                             client_transaction_version=client_transaction_version,
                             rotated_producer_id=rotated_producer_id)

    def prepare_complete(self, now: int) -> TxnTransitMetadata:
        """COMPLETE_*; a kept transaction's client pair becomes the id's pair; a TV2 transaction
        whose bump exhausted the epochs moves to epoch 0 of its rotated producer id."""
        state = TxnState.COMPLETE_COMMIT if self.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        # The PREPARE record is in the log, so an epoch fence before it has succeeded.
        self.has_failed_epoch_fence = False
        if self.is_kept:
            return self._prepare(state, producer_id=self.next_producer_id, epoch=self.next_producer_epoch,
                                 partitions=(), update=now, next_producer=(NO_PRODUCER_ID, NO_PRODUCER_EPOCH))
        if self.client_transaction_version >= TRANSACTION_VERSION_2 and self.rotated_producer_id >= 0:
            return self._prepare(state, producer_id=self.rotated_producer_id, epoch=0, partitions=(), update=now,
                                 rotated_producer_id=NO_PRODUCER_ID)
        return self._prepare(state, partitions=(), update=now, rotated_producer_id=NO_PRODUCER_ID)

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._prepare(TxnState.DEAD, partitions=())

    # -- complete -------------------------------------------------------------------------------

    def _fail(self, transit: TxnTransitMetadata) -> IllegalTransitionError:
        return IllegalTransitionError(f"{self!r} cannot complete the transition to {transit}")

    def _same_producer(self, t: TxnTransitMetadata) -> bool:
        return t.producer_id == self.producer_id and t.producer_epoch == self.producer_epoch

    def complete_transition(self, transit: TxnTransitMetadata) -> None:
        """Apply a prepared transition whose record is now in ``__transaction_state``."""
        target = self.pending_state
        if target is None or target is not transit.state:
            raise self._fail(transit)
        if target is not TxnState.ONGOING and not target.is_prepared and transit.next_producer_id >= 0:
            raise self._fail(transit)  # only an open transaction is kept for a newer client
        if target is TxnState.EMPTY:
            bump_ok = transit.producer_epoch == self.producer_epoch + 1 or (
                transit.producer_epoch == 0 and transit.producer_id != self.producer_id
            )
            if ((transit.producer_epoch != self.producer_epoch and not bump_ok)
                    or transit.partitions or transit.txn_start_timestamp != -1):
                raise self._fail(transit)
            self.txn_timeout_ms = transit.txn_timeout_ms
            self.txn_start_timestamp = transit.txn_start_timestamp  # -1: no transaction (DescribeTransactions)
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = transit.last_producer_epoch
            self.producer_id = transit.producer_id
            self.last_producer_id = transit.last_producer_id
            self.next_producer_id = self.next_producer_epoch = NO_PRODUCER_ID
        elif target is TxnState.ONGOING:
            if (not self._same_producer(transit) or not self.partitions <= transit.partitions
                    or transit.txn_timeout_ms != self.txn_timeout_ms
                    or (transit.next_producer_id < 0 and self.is_kept)):
                raise self._fail(transit)
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.partitions |= transit.partitions
            self.next_producer_id = transit.next_producer_id
            self.next_producer_epoch = transit.next_producer_epoch
        elif target.is_prepared:
            bumped = transit.client_transaction_version >= TRANSACTION_VERSION_2 and not self.is_kept
            # Transactions v2: the epoch was bumped (Kafka's validProducerEpoch); an abort of a
            # transaction that added nothing starts at the abort (Kafka's allowedEmptyAbort).
            producer_ok = (transit.producer_id == self.producer_id
                           and transit.last_producer_epoch == self.producer_epoch if bumped
                           else self._same_producer(transit))
            empty_abort = bumped and target is TxnState.PREPARE_ABORT and self.state in (
                TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
            if (not producer_ok or self.partitions != transit.partitions
                    or transit.txn_timeout_ms != self.txn_timeout_ms
                    or (transit.txn_start_timestamp != self.txn_start_timestamp and not empty_abort)
                    or (transit.next_producer_id, transit.next_producer_epoch)
                    != (self.next_producer_id, self.next_producer_epoch)):
                raise self._fail(transit)
            self.producer_epoch, self.last_producer_epoch = transit.producer_epoch, transit.last_producer_epoch
            self.rotated_producer_id = transit.rotated_producer_id
            self.txn_start_timestamp = transit.txn_start_timestamp
        elif target in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            client = (transit.producer_id, transit.producer_epoch) == self.client_producer
            rotated = transit.producer_epoch == 0 and transit.producer_id == self.rotated_producer_id >= 0
            if (not (client or rotated) or transit.txn_timeout_ms != self.txn_timeout_ms
                    or transit.txn_start_timestamp == -1):
                raise self._fail(transit)
            if transit.producer_id != self.producer_id:
                self.last_producer_id = self.producer_id  # a kept client's or a rotated id
            self.producer_id, self.producer_epoch = transit.producer_id, transit.producer_epoch
            self.next_producer_id = self.next_producer_epoch = NO_PRODUCER_ID
            self.rotated_producer_id = NO_PRODUCER_ID
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.partitions.clear()
        else:
            # PrepareEpochFence becomes PrepareAbort before anything is written; Dead ends in
            # removal from the cache, never in a completed state.
            raise self._fail(transit)
        self.client_transaction_version = transit.client_transaction_version
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.pending_state = None
        self.state = target

    def abandon_transition(self) -> None:
        """The append of the prepared transition failed: nothing changes."""
        self.pending_state = None

    def begin_fenced_abort(self, bumped_epoch: int, client_transaction_version: int = 0) -> None:
        """The pending PrepareEpochFence turns into PrepareAbort under the bumped epoch.
        Transactions v1: the epoch is set here (Kafka sets it before the PrepareAbort append; see
        ``has_failed_epoch_fence``); v2: the PrepareAbort itself bumps the epoch by one, to the
        same fencing epoch, so nothing changes here if its append fails."""
        if self.pending_state is not TxnState.PREPARE_EPOCH_FENCE:
            raise IllegalTransitionError(f"{self!r}: no epoch fence pending")
        self.pending_state = None
        if client_transaction_version < TRANSACTION_VERSION_2 or self.is_kept:
            self.producer_epoch = bumped_epoch
            self.last_producer_epoch = NO_PRODUCER_EPOCH
        self.next_producer_id = self.next_producer_epoch = NO_PRODUCER_ID

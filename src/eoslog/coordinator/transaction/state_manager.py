"""The transactional ids this broker coordinates, and their durable record.

Jobs (Kafka's ``TransactionStateManager``):

- own the ``__transaction_state`` partitions (all of them: one node), each with its
  coordinator epoch (the partition's leader epoch: 0 on a single node), and know which
  are still loading: ids there answer COORDINATOR_LOAD_IN_PROGRESS;
- hold the metadata of every loaded id;
- write a prepared transition to the id's partition and complete it only when the append
  succeeded (``append_transition``), mapping storage errors to what a client should see;
- find transactions past their timeout and ids past ``transactional.id.expiration.ms``;
- wake whoever waits for an id's pending transition to end (``transition_ended``): the
  coordinator holds requests it would answer CONCURRENT_TRANSACTIONS until then.

Everything runs on the broker's event loop: no locks. Appends are synchronous, so a
transition is in the log (in the OS) when ``append_transition`` returns.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from eoslog.coordinator.internal_topic import APPEND_ERRORS, TRANSACTION_STATE_TOPIC, CoordinatorAppendError, KeyValue
from eoslog.coordinator.transaction.log import (
    VALUE_VERSION,
    encode_key,
    encode_value,
    transaction_partition_for,
)
from eoslog.coordinator.transaction.metadata import TransactionMetadata, TxnTransitMetadata
from eoslog.coordinator.transaction.state import TxnState
from eoslog.coordinator.transaction.topic import TransactionStateTopic
from eoslog.errors import Errors
from eoslog.running_loop import LoopRef, time_out

log = logging.getLogger(__name__)

COORDINATOR_EPOCH = 0  # the leader epoch of every partition on a single node


@dataclass(frozen=True, slots=True)
class EpochAndMetadata:
    coordinator_epoch: int
    metadata: TransactionMetadata


@dataclass(frozen=True, slots=True)
class TimedOutTransaction:
    transactional_id: str
    producer_id: int
    producer_epoch: int


class TransactionStateManager:
    def __init__(self, topic: TransactionStateTopic, value_version: Callable[[], int] = lambda: VALUE_VERSION) -> None:
        """``value_version``: the ``__transaction_state`` value version to write now (Kafka's
        TransactionVersion.transactionLogValueVersion of the finalized transaction.version)."""
        self.topic = topic
        self.value_version = value_version
        self.transactions: dict[str, TransactionMetadata] = {}
        self._epochs: dict[int, int] = {}  # owned (loaded) partition → coordinator epoch
        self._loading: set[int] = set()
        self._loading_epoch: dict[int, int] = {}  # cluster mode: the leader epoch being loaded
        self.active = True
        # transactional id → futures of ``transition_ended`` callers, woken by the next change.
        self._watchers: dict[str, list[asyncio.Future[None]]] = {}
        self._loop = LoopRef()

    def partition_for(self, transactional_id: str) -> int:
        return transaction_partition_for(transactional_id, self.topic.num_partitions)

    # -- ownership and loading ---------------------------------------------------------------

    def ensure_topic(self) -> None:
        """Create ``__transaction_state`` on first use (FindCoordinator), as Kafka does; a
        new topic has nothing to load."""
        if self.topic.create():
            for p in range(self.topic.num_partitions):
                self._epochs[p] = COORDINATOR_EPOCH
            log.info("created %s with %d partitions", TRANSACTION_STATE_TOPIC, self.topic.num_partitions)

    def begin_loading(self) -> list[int]:
        if not self.topic.exists:
            return []
        self._loading = set(range(self.topic.num_partitions))
        return sorted(self._loading)

    def loading_partitions(self) -> list[int]:
        return sorted(self._loading)

    def on_partition_loaded(self, partition: int, loaded: dict[str, TransactionMetadata],
                            leader_epoch: int | None = None) -> int | None:
        """Serve the ids of a loaded partition; returns its coordinator epoch (None if this
        manager was shut down, or — cluster mode, ``leader_epoch`` given — the partition
        resigned or was led again in another epoch meanwhile)."""
        if not self.active:
            return None
        if leader_epoch is not None:
            if self._loading_epoch.get(partition) != leader_epoch or partition not in self._loading:
                return None
            del self._loading_epoch[partition]
        epoch = COORDINATOR_EPOCH if leader_epoch is None else leader_epoch
        self.transactions.update(loaded)
        self._loading.discard(partition)
        self._epochs[partition] = epoch
        self._wake_all()
        return epoch

    def become_leader(self, partition: int, leader_epoch: int) -> None:
        """Cluster mode: this broker now leads ``partition``; its ids load, then are served at
        coordinator epoch = the leader epoch (markers of an older coordinator are refused)."""
        self._epochs.pop(partition, None)
        self._loading.add(partition)
        self._loading_epoch[partition] = leader_epoch
        self._wake_all()

    def resign(self, partition: int) -> None:
        """Cluster mode: another broker leads ``partition`` now: its ids go (NOT_COORDINATOR)."""
        self._epochs.pop(partition, None)
        self._loading.discard(partition)
        self._loading_epoch.pop(partition, None)
        for txn_id in [t for t in self.transactions if self.partition_for(t) == partition]:
            del self.transactions[txn_id]
        self._wake_all()

    @property
    def is_loading(self) -> bool:
        return bool(self._loading)

    def coordinator_epoch(self, partition: int) -> int | None:
        """The epoch this coordinator serves ``partition`` at; None when not serving it."""
        return self._epochs.get(partition) if self.active else None

    def status(self, transactional_id: str) -> Errors:
        """Can this coordinator serve ``transactional_id`` now?"""
        if not self.active or not self.topic.exists:
            return Errors.NOT_COORDINATOR
        partition = self.partition_for(transactional_id)
        if partition in self._loading:
            return Errors.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self._epochs:
            return Errors.NOT_COORDINATOR
        return Errors.NONE

    def get(self, transactional_id: str) -> tuple[Errors, EpochAndMetadata | None]:
        """(error, metadata): Errors.NONE with None when the id is unknown."""
        error = self.status(transactional_id)
        if error != Errors.NONE:
            return error, None
        metadata = self.transactions.get(transactional_id)
        epoch = self._epochs[self.partition_for(transactional_id)]
        return Errors.NONE, None if metadata is None else EpochAndMetadata(epoch, metadata)

    def put_if_absent(self, metadata: TransactionMetadata) -> EpochAndMetadata:
        current = self.transactions.setdefault(metadata.transactional_id, metadata)
        return EpochAndMetadata(self._epochs[self.partition_for(metadata.transactional_id)], current)

    def owned_transactions(self) -> Iterator[TransactionMetadata]:
        for metadata in list(self.transactions.values()):
            if self.partition_for(metadata.transactional_id) in self._epochs:
                yield metadata

    # -- the durable record ---------------------------------------------------------------------

    def append_transition(
        self, metadata: TransactionMetadata, coordinator_epoch: int, transit: TxnTransitMetadata,
        *, keep_pending_on: frozenset[Errors] = frozenset(),
    ) -> Errors:
        """Write ``transit`` (a tombstone for Dead) and complete it; the error otherwise.

        On failure the prepared transition is abandoned, unless the (mapped) error is in
        ``keep_pending_on``: the caller retries the same transition later.
        """
        txn_id = metadata.transactional_id
        partition = self.partition_for(txn_id)
        if self.coordinator_epoch(partition) != coordinator_epoch or self.transactions.get(txn_id) is not metadata:
            metadata.abandon_transition()
            return Errors.NOT_COORDINATOR
        value = None if transit.state is TxnState.DEAD else encode_value(transit.log_value(), self.value_version())
        record: KeyValue = (encode_key(txn_id), value)
        try:
            self.topic.append(partition, [record])
        except CoordinatorAppendError as e:
            error = APPEND_ERRORS.get(e.error, Errors.UNKNOWN_SERVER_ERROR)
            log.error("appending %s of %s to %s-%d failed (%s): %s", transit.state.kafka_name, txn_id,
                      TRANSACTION_STATE_TOPIC, partition, error, e)
            if error not in keep_pending_on:
                metadata.abandon_transition()
            self._wake(txn_id)
            return error
        if transit.state is TxnState.DEAD:
            self.transactions.pop(txn_id, None)
        else:
            metadata.complete_transition(transit)
        self._wake(txn_id)
        return Errors.NONE

    # -- waiting for a transition to end ----------------------------------------------------------

    async def transition_ended(self, transactional_id: str, timeout_s: float) -> None:
        """Return after the next append of a transition of ``transactional_id`` (completed,
        abandoned or kept pending), a change of ownership or loading of any partition, or
        shutdown; at the latest after ``timeout_s``. The caller looks at the state again."""
        loop = self._loop.get()
        waiter: asyncio.Future[None] = loop.create_future()
        waiters = self._watchers.setdefault(transactional_id, [])
        waiters.append(waiter)
        # One future and one timer (asyncio.wait made a set, a callback and a second future
        # for each of the held requests every transaction's next AddPartitionsToTxn makes).
        timer = loop.call_later(timeout_s, time_out, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            if waiter in waiters:
                waiters.remove(waiter)
            if not waiters and self._watchers.get(transactional_id) is waiters:
                del self._watchers[transactional_id]

    def _wake(self, transactional_id: str) -> None:
        for waiter in self._watchers.pop(transactional_id, ()):
            if not waiter.done():
                waiter.set_result(None)

    def _wake_all(self) -> None:
        for transactional_id in list(self._watchers):
            self._wake(transactional_id)

    # -- timeouts and expiry ----------------------------------------------------------------------

    def timed_out_transactions(self, now: int) -> list[TimedOutTransaction]:
        """Ongoing transactions open longer than their timeout (best effort, as Kafka's).
        A two-phase-commit transaction has no timeout: only its external coordinator, through
        EndTxn, or an InitProducerId that does not keep it ends it (KIP-939)."""
        return [
            TimedOutTransaction(m.transactional_id, m.producer_id, m.producer_epoch)
            for m in self.owned_transactions()
            if m.state is TxnState.ONGOING and not m.pending_transition_in_progress
            and not m.is_two_phase_commit and m.txn_start_timestamp + m.txn_timeout_ms < now
        ]

    def expire_transactional_ids(self, now: int, expiration_ms: int) -> int:
        """Write a tombstone for, and forget, every id idle for ``expiration_ms`` with no
        transaction open; returns how many went."""
        removed = 0
        for metadata in self.owned_transactions():
            if (not metadata.state.expiration_allowed or metadata.pending_transition_in_progress
                    or metadata.txn_last_update_timestamp > now - expiration_ms):
                continue
            partition = self.partition_for(metadata.transactional_id)
            epoch = self._epochs[partition]
            error = self.append_transition(metadata, epoch, metadata.prepare_dead())
            if error == Errors.NONE:
                removed += 1
                log.info("transactional id %s expired (producer %d, last update %d)",
                         metadata.transactional_id, metadata.producer_id, metadata.txn_last_update_timestamp)
        return removed

    def shutdown(self) -> None:
        self.active = False
        self.transactions.clear()
        self._epochs.clear()
        self._loading.clear()
        self._wake_all()

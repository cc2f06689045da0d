"""The producer's transaction state as values: the client states and their one transition
table, the producer id and epoch, the coordinator kinds and the result a transactional call
waits on; and ``TransactionView``, all that a coordinator request handler (``txn_requests``)
may read or change in the transaction manager.

Shared by ``transaction_manager`` (which owns the state) and ``txn_requests`` (whose handlers
update it from the coordinator's answers), so neither imports the other's module for them.
"""

from __future__ import annotations

import asyncio
from enum import Enum
from typing import NamedTuple, Protocol

from eoslog.client.errors import KafkaTimeoutError

TopicPartition = tuple[str, int]
MAX_EPOCH = 32767


class State(Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    PREPARED_TRANSACTION = "PREPARED_TRANSACTION"  # KIP-939: flushed, waiting for the external decision
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


S = State
# The legal transitions, as each state's set of states it may be entered from (Kafka's
# TransactionManager.isTransitionValid). FATAL_ERROR can be entered from anywhere and left
# for nowhere: the only way out is close().
VALID_PREVIOUS: dict[State, frozenset[State]] = {
    # An idempotent producer drops its producer id (epoch exhausted) and asks for another.
    S.UNINITIALIZED: frozenset({S.READY, S.ABORTABLE_ERROR}),
    # init_transactions(); or the epoch bump after an abort that needs one (KIP-360), or
    # after the transaction that saw the cluster move to transaction version 2.
    S.INITIALIZING: frozenset({S.UNINITIALIZED, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    # prepare_transaction(); or init_transactions(keep_prepared_txn) found a transaction open.
    S.PREPARED_TRANSACTION: frozenset({S.IN_TRANSACTION, S.INITIALIZING}),
    S.COMMITTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.PREPARED_TRANSACTION}),
    S.ABORTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.PREPARED_TRANSACTION, S.ABORTABLE_ERROR}),
    S.ABORTABLE_ERROR: frozenset({S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR, S.INITIALIZING}),
    S.FATAL_ERROR: frozenset(State),
}


class ProducerIdAndEpoch(NamedTuple):
    producer_id: int
    epoch: int

    @property
    def valid(self) -> bool:
        return self.producer_id >= 0


NO_PRODUCER_ID = ProducerIdAndEpoch(-1, -1)


class CoordinatorType(Enum):
    GROUP = 0
    TRANSACTION = 1


class TxnResult:
    """The outcome of a transactional API call; awaited in the producer's loop."""

    def __init__(self, operation: str) -> None:
        self.operation = operation
        self.done = False
        # A caller saw the outcome (Java's isAcked): until then a call that timed out and is
        # made again gets this result, even when it completed meanwhile.
        self.acked = False
        self.error: BaseException | None = None
        self._waiters: list[asyncio.Future[None]] = []

    def succeed(self) -> None:
        self._finish(None)

    def fail(self, error: BaseException) -> None:
        self._finish(error)

    def _finish(self, error: BaseException | None) -> None:
        if self.done:
            return
        self.done = True
        self.error = error
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    async def wait(self, timeout_s: float | None) -> None:
        if not self.done:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter, timeout_s)
            except TimeoutError:
                raise KafkaTimeoutError(
                    f"{self.operation} did not complete within {timeout_s * 1000 if timeout_s else 0:.0f} ms; "
                    "call it again to keep waiting"
                ) from None
        self.acked = True
        if self.error is not None:
            raise self.error


class TransactionView(Protocol):
    """The transaction manager as a coordinator request handler sees it."""

    transactional_id: str | None
    transactional: bool
    transaction_timeout_ms: int
    enable_2pc: bool
    keep_prepared_txn: bool
    producer: ProducerIdAndEpoch
    epoch_bump_required: bool
    transaction_started: bool
    transaction_v2: bool

    def transition_to(self, target: State, error: BaseException | None = None) -> None: ...
    def transition_to_fatal(self, error: BaseException) -> None: ...
    def transition_to_abortable(self, error: BaseException) -> None: ...
    def on_initialized(self, producer: ProducerIdAndEpoch, ongoing: ProducerIdAndEpoch) -> None: ...
    def on_epoch_bumped(self, producer: ProducerIdAndEpoch) -> None: ...
    def on_end_txn_epoch(self, producer: ProducerIdAndEpoch) -> None: ...
    def set_coordinator(self, kind: CoordinatorType, key: str, node_id: int) -> None: ...
    def partitions_added(self, partitions: set[TopicPartition]) -> None: ...
    def partitions_not_added(self, partitions: set[TopicPartition]) -> None: ...
    def complete_transaction(self, result: TxnResult) -> None: ...

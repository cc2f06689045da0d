"""The states of a transactional id and the one table of legal transitions.

As Kafka's ``TransactionState``: each state lists the states it may be entered from
(``VALID_PREVIOUS``), and every state change goes through ``validate_transition``, which
raises ``IllegalTransitionError`` — the coordinator turns a refused *request* into a Kafka
error before it ever asks for a transition, so reaching the exception is a bug, never a
client's mistake.

The ids are the ``TransactionStatus`` byte of ``__transaction_state`` values and the names
are what DescribeTransactions and ListTransactions report; both are Kafka's. This is the
table of Kafka 4.4, transaction version 2 included: PrepareAbort is also entered from Empty
and the completed states (an EndTxn abort of a transaction that added nothing, which the
coordinator allows only to a v2 client).
"""

from __future__ import annotations

from enum import Enum


class IllegalTransitionError(RuntimeError):
    """A transition the table does not allow (a coordinator bug, not a request error)."""


class TxnState(Enum):
    EMPTY = 0  # an id with no open transaction, right after InitProducerId
    ONGOING = 1  # partitions (or a group's offsets) have been added
    PREPARE_COMMIT = 2  # EndTxn(commit) is in the log: the point of no return
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4  # every marker written
    COMPLETE_ABORT = 5
    DEAD = 6  # expired: only ever pending, its record is a tombstone
    PREPARE_EPOCH_FENCE = 7  # bumping the epoch to abort an older instance's transaction

    @property
    def kafka_name(self) -> str:
        return _NAMES[self]

    @property
    def expiration_allowed(self) -> bool:
        """Kafka's isExpirationAllowed: no transaction is open in this state."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def is_prepared(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @classmethod
    def from_kafka_name(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)


_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}

_S = TxnState
# target state → the states it may be entered from.
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    # InitProducerId (a new epoch) when no transaction is open.
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    # AddPartitionsToTxn / AddOffsetsToTxn: begins a transaction or extends the open one.
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    # EndTxn(commit).
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    # EndTxn(abort), a timed-out transaction, or a newer instance fencing an older one; with
    # transactions v2 also an abort of nothing (it bumps the epoch).
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE, _S.EMPTY, _S.COMPLETE_COMMIT,
                                 _S.COMPLETE_ABORT}),
    # Every marker of the transaction has been written.
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    # transactional.id.expiration.ms passed with no transaction open.
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    # InitProducerId or the timeout scan found an open transaction to abort.
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


def validate_transition(current: TxnState, target: TxnState) -> TxnState:
    """Return ``target`` if the table allows ``current`` → ``target``; raise otherwise."""
    if current not in VALID_PREVIOUS[target]:
        raise IllegalTransitionError(
            f"transaction state {current.kafka_name} cannot move to {target.kafka_name} "
            f"(allowed from {sorted(s.kafka_name for s in VALID_PREVIOUS[target])})"
        )
    return target

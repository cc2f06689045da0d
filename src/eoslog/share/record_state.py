"""An in-flight record's delivery state on its share-partition's leader, and the one table of
legal moves (Kafka's ``RecordState.validateTransition``, plus eoslog's transactional hold).

::

    AVAILABLE ──fetch──▶ ACQUIRED ──ACCEPT──▶ ACKNOWLEDGED
        ▲                 │  │  └──REJECT, or released at the delivery count limit──▶ ARCHIVED
        └──RELEASE, lock timeout, member gone──┘  │
        ▲                                         └──ACCEPT inside a transaction──▶ HELD_BY_TRANSACTION
        └──────────────── abort (delivery count kept) ───────────────────────────────┘  │
                                                   ACKNOWLEDGED ◀──commit────────────────┘
    AVAILABLE ──log start moved past it, aborted transaction (read_committed)──▶ ARCHIVED

ACKNOWLEDGED and ARCHIVED are final: the record is never handed out again, and once every record
below it is final too the share-partition start offset moves past it. ``transition`` is the
only way to move and raises on a move the table does not allow: an illegal move is a bug,
never an answer to a client (clients get INVALID_RECORD_STATE before a move is tried).
"""

from __future__ import annotations

from enum import Enum

from eoslog.coordinator.share.state import DeliveryState


class RecordState(Enum):
    AVAILABLE = "Available"
    ACQUIRED = "Acquired"
    ACKNOWLEDGED = "Acknowledged"
    ARCHIVED = "Archived"
    # eoslog's extension: accepted inside a producer's transaction, waiting for its outcome.
    HELD_BY_TRANSACTION = "HeldByTransaction"

    @property
    def final(self) -> bool:
        return self in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)

    @property
    def stored(self) -> DeliveryState:
        """The delivery state written to ``__share_group_state`` (an acquisition is not durable:
        after a crash the record is available again)."""
        return _STORED[self]


_STORED = {
    RecordState.AVAILABLE: DeliveryState.AVAILABLE,
    RecordState.ACQUIRED: DeliveryState.AVAILABLE,
    RecordState.ACKNOWLEDGED: DeliveryState.ACKNOWLEDGED,
    RecordState.ARCHIVED: DeliveryState.ARCHIVED,
    RecordState.HELD_BY_TRANSACTION: DeliveryState.ACQUIRED,
}

VALID_PREVIOUS: dict[RecordState, frozenset[RecordState]] = {
    # Handed to a consumer by a fetch.
    RecordState.ACQUIRED: frozenset({RecordState.AVAILABLE}),
    # Released (RELEASE, lock timeout, member gone) or its transaction aborted.
    RecordState.AVAILABLE: frozenset({RecordState.ACQUIRED, RecordState.HELD_BY_TRANSACTION}),
    # ACCEPT, or the transaction it was accepted in committed.
    RecordState.ACKNOWLEDGED: frozenset({RecordState.ACQUIRED, RecordState.HELD_BY_TRANSACTION}),
    # REJECT, released at the delivery count limit, below the log start, or of an aborted transaction.
    RecordState.ARCHIVED: frozenset({RecordState.ACQUIRED, RecordState.AVAILABLE, RecordState.HELD_BY_TRANSACTION}),
    RecordState.HELD_BY_TRANSACTION: frozenset({RecordState.ACQUIRED}),
}


class IllegalRecordStateTransition(RuntimeError):
    def __init__(self, offset: int, current: RecordState, target: RecordState) -> None:
        super().__init__(f"record {offset} cannot move from {current.value} to {target.value}; "
                         f"{target.value} may only follow "
                         + ", ".join(sorted(s.value for s in VALID_PREVIOUS[target])))


def transition(offset: int, current: RecordState, target: RecordState) -> RecordState:
    """Check ``current`` → ``target`` against VALID_PREVIOUS and return ``target``."""
    if current not in VALID_PREVIOUS[target]:
        raise IllegalRecordStateTransition(offset, current, target)
    return target


def from_stored(state: DeliveryState) -> RecordState:
    """A record's state when its share-partition is loaded: a stored ACQUIRED record is held by
    a transaction still open (the share coordinator reports those so)."""
    return {DeliveryState.AVAILABLE: RecordState.AVAILABLE, DeliveryState.ACKNOWLEDGED: RecordState.ACKNOWLEDGED,
            DeliveryState.ARCHIVED: RecordState.ARCHIVED,
            DeliveryState.ACQUIRED: RecordState.HELD_BY_TRANSACTION}[state]

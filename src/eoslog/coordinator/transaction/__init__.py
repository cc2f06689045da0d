"""The transaction coordinator: transactional ids, their producer ids and epochs, and the
two-phase completion of their transactions.

``coordinator.TransactionCoordinator`` is the entry point; ``state`` holds the state
table, ``metadata`` one id's state and its prepare/complete transitions,
``state_manager`` the ids of this broker and their durable record, ``log`` the
``__transaction_state`` record formats, ``topic`` that topic's I/O, ``loader`` the
start-up replay and ``marker_channel`` the delivery of COMMIT/ABORT markers. Nothing here
imports the wire protocol: handlers translate requests into these calls.
"""

from eoslog.coordinator.internal_topic import TRANSACTION_STATE_TOPIC
from eoslog.coordinator.transaction.coordinator import (
    DescribedTransaction,
    InitProducerIdResult,
    ListedTransaction,
    TransactionConfig,
    TransactionCoordinator,
)
from eoslog.coordinator.transaction.marker_channel import MarkerSender, TxnMarker
from eoslog.coordinator.transaction.state import VALID_PREVIOUS, TxnState

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "VALID_PREVIOUS",
    "DescribedTransaction",
    "InitProducerIdResult",
    "ListedTransaction",
    "MarkerSender",
    "TransactionConfig",
    "TransactionCoordinator",
    "TxnMarker",
    "TxnState",
]

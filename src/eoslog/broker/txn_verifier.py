"""The replica layer's KIP-890 check, answered by this broker's transaction coordinator.

In a cluster the transaction coordinator of a transactional id may be another broker
(Kafka's AddPartitionsToTxnManager then sends it a verify-only AddPartitionsToTxn); on
one node it is a call.
"""

from __future__ import annotations

from eoslog.coordinator.transaction import TransactionCoordinator
from eoslog.errors import Errors
from eoslog.types import TopicPartition


class LocalTransactionVerifier:
    """A ``replica.TransactionVerifier`` over the coordinator of this broker."""

    def __init__(self, coordinator: TransactionCoordinator) -> None:
        self.coordinator = coordinator

    async def verify_partition(self, transactional_id: str, producer_id: int, producer_epoch: int,
                               tp: TopicPartition) -> Errors:
        return self.coordinator.verify_partition(transactional_id, producer_id, producer_epoch, tp.topic, tp.partition)

    async def is_kept_by_newer_producer(self, transactional_id: str, producer_id: int, producer_epoch: int) -> bool:
        return self.coordinator.is_fenced_by_kept_transaction(transactional_id, producer_id, producer_epoch)

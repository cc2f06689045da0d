"""KIP-890 part 1: a transactional write must belong to its producer's open transaction.

A transactional batch whose producer has no open transaction in the partition is about to
open one there; the transaction coordinator must have that partition in the producer's
transaction (AddPartitionsToTxn), or a late or stray write would open a transaction that
nobody will ever close. Kafka's ReplicaManager asks the coordinator before appending (its
AddPartitionsToTxnManager sends a verify-only AddPartitionsToTxn); here the broker hands
in a ``TransactionVerifier`` — its own coordinator on a single node, a remote one in a
cluster.

KIP-939: a transaction kept by a newer instance of the producer (``keep_prepared_txn``)
takes no more writes from the instance that opened it.
"""

from __future__ import annotations

from enum import Enum
from typing import Protocol

from eoslog.errors import Errors
from eoslog.records import BATCH_HEADER_SIZE, read_batch_header
from eoslog.replica.partition import Partition
from eoslog.types import TopicPartition


class TransactionVerifier(Protocol):
    async def verify_partition(self, transactional_id: str, producer_id: int, producer_epoch: int,
                               tp: TopicPartition) -> Errors:
        """Errors.NONE when ``tp`` is in the producer's ongoing transaction."""
        ...

    async def is_kept_by_newer_producer(self, transactional_id: str, producer_id: int, producer_epoch: int) -> bool:
        """True when a newer instance kept this producer's prepared transaction (KIP-939)."""
        ...


class TransactionSupportedOperation(Enum):
    """What the client's request version lets a verification answer (Kafka's enum of the
    same name; its ADD_PARTITION, Produce v12+ of transactions v2, is not offered here)."""

    DEFAULT_ERROR = "default"  # INVALID_TXN_STATE for a partition not in the transaction
    GENERIC_ERROR_SUPPORTED = "generic"  # TRANSACTION_ABORTABLE instead (KIP-1050)


def produce_request_operation(version: int) -> TransactionSupportedOperation:
    """Kafka's AddPartitionsToTxnManager.produceRequestVersionToTransactionSupportedOperation."""
    return (TransactionSupportedOperation.GENERIC_ERROR_SUPPORTED if version >= 11
            else TransactionSupportedOperation.DEFAULT_ERROR)


# Verification errors an old producer would not retry: retried as NOT_ENOUGH_REPLICAS, which
# needs no metadata refresh (Kafka's ReplicaManager does the same).
_RETRY_AS_NOT_ENOUGH_REPLICAS = frozenset({
    Errors.CONCURRENT_TRANSACTIONS, Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_COORDINATOR, Errors.NETWORK_EXCEPTION,
})


async def verify_transactional_batch(
    verifier: TransactionVerifier, transactional_id: str, partition: Partition, records: bytes,
    operation: TransactionSupportedOperation = TransactionSupportedOperation.DEFAULT_ERROR,
) -> tuple[Errors, str] | None:
    """None when the records may be appended; else the error and message to answer with."""
    if len(records) < BATCH_HEADER_SIZE:
        return None  # the append refuses it
    h = read_batch_header(records)
    if not h.is_transactional or h.producer_id < 0:
        return None
    entry = partition.log.producer_state.producers.get(h.producer_id)
    if entry is not None and entry.current_txn_first_offset >= 0 and entry.producer_epoch == h.producer_epoch:
        if await verifier.is_kept_by_newer_producer(transactional_id, h.producer_id, h.producer_epoch):
            return Errors.INVALID_PRODUCER_EPOCH, "a newer producer kept this prepared transaction"
        return None
    error = await verifier.verify_partition(transactional_id, h.producer_id, h.producer_epoch, partition.tp)
    if error == Errors.NONE:
        return None
    if error in _RETRY_AS_NOT_ENOUGH_REPLICAS:
        return Errors.NOT_ENOUGH_REPLICAS, (
            f"Unable to verify the partition has been added to the transaction. Underlying error: {error}"
        )
    if error in (Errors.TRANSACTION_ABORTABLE, Errors.INVALID_TXN_STATE):
        abortable = operation is TransactionSupportedOperation.GENERIC_ERROR_SUPPORTED
        return (Errors.TRANSACTION_ABORTABLE if abortable else Errors.INVALID_TXN_STATE,
                "Partition was not added to the transaction")
    return (Errors.INVALID_PRODUCER_EPOCH if error == Errors.PRODUCER_FENCED else error), error.name

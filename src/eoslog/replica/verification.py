"""KIP-890: a transactional write must belong to its producer's open transaction.

A transactional batch whose producer has no open transaction in the partition is about to
open one there; the transaction coordinator must have that partition in the producer's
transaction, or a late or stray write would open a transaction that nobody will ever close.
Part 1 (transactions v1, Produce v11 and below): the client added the partition itself
(AddPartitionsToTxn), and Kafka's ReplicaManager *verifies* it with the coordinator before
appending (its AddPartitionsToTxnManager sends a verify-only AddPartitionsToTxn). Part 2
(transactions v2, Produce v12+: ``TransactionSupportedOperation.ADD_PARTITION``): the client
adds nothing, and the leader *adds* the partition at the coordinator (AddPartitionsToTxn v5,
not verify-only) before appending. Either way the broker hands in a ``TransactionVerifier`` —
its own coordinator on a single node, a remote one in a cluster. A request still on its way
from a transaction that has ended carries the epoch that transaction had, and every v2
transaction ends with an epoch bump: the coordinator refuses to add for it, and the
partition refuses the batch (its marker carried the newer epoch).

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

    async def add_partition(self, transactional_id: str, producer_id: int, producer_epoch: int,
                            tp: TopicPartition) -> Errors:
        """Transactions v2: add ``tp`` to the producer's transaction (durably, as a client's
        AddPartitionsToTxn would be) — Errors.NONE once it is in."""
        ...

    async def is_kept_by_newer_producer(self, transactional_id: str, producer_id: int, producer_epoch: int) -> bool:
        """True when a newer instance kept this producer's prepared transaction (KIP-939)."""
        ...

    def commit_makes_durable(self, transactional_id: str) -> bool:
        """True when the transaction's coordinator makes its writes durable before it writes the
        PrepareCommit that decides them (a single node under group commit): an acks=all write of
        the transaction is then answered once appended."""
        ...


class TransactionSupportedOperation(Enum):
    """What the client's request version lets the broker do and answer (Kafka's enum of the
    same name)."""

    DEFAULT_ERROR = "default"  # verify; INVALID_TXN_STATE for a partition not in the transaction
    GENERIC_ERROR_SUPPORTED = "generic"  # verify; TRANSACTION_ABORTABLE instead (KIP-1050)
    ADD_PARTITION = "add"  # transactions v2: add the partition to the transaction

    @property
    def supports_epoch_bump(self) -> bool:
        return self is TransactionSupportedOperation.ADD_PARTITION


def produce_request_operation(version: int) -> TransactionSupportedOperation:
    """Kafka's AddPartitionsToTxnManager.produceRequestVersionToTransactionSupportedOperation."""
    if version >= 12:
        return TransactionSupportedOperation.ADD_PARTITION
    return (TransactionSupportedOperation.GENERIC_ERROR_SUPPORTED if version >= 11
            else TransactionSupportedOperation.DEFAULT_ERROR)


def txn_offset_commit_operation(version: int) -> TransactionSupportedOperation:
    """Kafka's AddPartitionsToTxnManager.txnOffsetCommitRequestVersionToTransactionSupportedOperation."""
    if version >= 5:
        return TransactionSupportedOperation.ADD_PARTITION
    return (TransactionSupportedOperation.GENERIC_ERROR_SUPPORTED if version >= 4
            else TransactionSupportedOperation.DEFAULT_ERROR)


# Verification errors an old producer would not retry: retried as NOT_ENOUGH_REPLICAS, which
# needs no metadata refresh (Kafka's ReplicaManager does the same; a TV2 producer gets
# CONCURRENT_TRANSACTIONS itself, which it retries).
_RETRY_AS_NOT_ENOUGH_REPLICAS = frozenset({
    Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR,
    Errors.NETWORK_EXCEPTION,
})


def verification_error(error: Errors, operation: TransactionSupportedOperation) -> tuple[Errors, str] | None:
    """What a producer is told when the coordinator did not verify (or add) the partition:
    Kafka's AddPartitionsToTxnManager and ReplicaManager mappings. None for Errors.NONE."""
    if error == Errors.NONE:
        return None
    if error in _RETRY_AS_NOT_ENOUGH_REPLICAS or (
            error == Errors.CONCURRENT_TRANSACTIONS and not operation.supports_epoch_bump):
        return Errors.NOT_ENOUGH_REPLICAS, (
            f"Unable to verify the partition has been added to the transaction. Underlying error: {error.name}"
        )
    if error in (Errors.TRANSACTION_ABORTABLE, Errors.INVALID_TXN_STATE):
        abortable = (error == Errors.TRANSACTION_ABORTABLE
                     and operation is not TransactionSupportedOperation.DEFAULT_ERROR)
        return (Errors.TRANSACTION_ABORTABLE if abortable else Errors.INVALID_TXN_STATE,
                "Partition was not added to the transaction")
    return (Errors.INVALID_PRODUCER_EPOCH if error == Errors.PRODUCER_FENCED else error), error.name


class Verified(Enum):
    """What verification did for a batch that may be appended."""

    NOT_NEEDED = "not needed"  # not transactional, or its transaction is open here already
    VERIFIED = "verified"  # transactions v1: the coordinator has the partition in the transaction
    ADDED = "added"  # transactions v2: the coordinator added the partition (Kafka's VerificationGuard
    #                  with supportsEpochBump: the append then checks a v2 transaction starts at sequence 0)


async def verify_transactional_batch(
    verifier: TransactionVerifier, transactional_id: str, partition: Partition, records: bytes,
    operation: TransactionSupportedOperation = TransactionSupportedOperation.DEFAULT_ERROR,
) -> tuple[Errors, str] | Verified:
    """How the records may be appended; else the error and message to answer with."""
    if len(records) < BATCH_HEADER_SIZE:
        return Verified.NOT_NEEDED  # the append refuses it
    h = read_batch_header(records)
    if not h.is_transactional or h.producer_id < 0:
        return Verified.NOT_NEEDED
    entry = partition.log.producer_state.producers.get(h.producer_id)
    if entry is not None and entry.current_txn_first_offset >= 0 and entry.producer_epoch == h.producer_epoch:
        if await verifier.is_kept_by_newer_producer(transactional_id, h.producer_id, h.producer_epoch):
            return Errors.INVALID_PRODUCER_EPOCH, "a newer producer kept this prepared transaction"
        return Verified.NOT_NEEDED
    if not operation.supports_epoch_bump:
        refused = verification_error(
            await verifier.verify_partition(transactional_id, h.producer_id, h.producer_epoch, partition.tp),
            operation)
        return Verified.VERIFIED if refused is None else refused
    refused = verification_error(
        await verifier.add_partition(transactional_id, h.producer_id, h.producer_epoch, partition.tp), operation)
    return Verified.ADDED if refused is None else refused

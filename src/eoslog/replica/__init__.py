"""This broker's partitions, between the handlers and storage (Kafka's ReplicaManager and
Partition): ``manager.ReplicaManager`` is the entry point; ``partition`` holds one
partition's role, ISR and high watermark, ``purgatory`` the waiting fetches and acks=all
produces, ``verification`` the KIP-890 check of transactional writes. Nothing here speaks
the wire protocol."""

from eoslog.replica.manager import FetchParams, FetchPartition, ProduceResult, ReplicaManager, TxnMarkerWrite
from eoslog.replica.partition import (
    CONSUMER_REPLICA_ID,
    FetchedRecords,
    IsolationLevel,
    OffsetAndTimestamp,
    Partition,
    ReplicaState,
    Role,
)
from eoslog.replica.verification import TransactionVerifier

__all__ = [
    "CONSUMER_REPLICA_ID",
    "FetchParams",
    "FetchPartition",
    "FetchedRecords",
    "IsolationLevel",
    "OffsetAndTimestamp",
    "Partition",
    "ProduceResult",
    "ReplicaManager",
    "ReplicaState",
    "Role",
    "TransactionVerifier",
    "TxnMarkerWrite",
]

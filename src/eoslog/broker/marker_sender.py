"""How the transaction coordinator's COMMIT/ABORT markers reach the partitions' leaders.

The coordinator's marker channel speaks in domain values (``TxnMarker``) and asks one
``MarkerSender`` call per leader broker. For this broker's own partitions that is a direct
call into the replica layer (``ReplicaManager.write_txn_marker``, the same path a
WriteTxnMarkers request from another broker takes); another broker's partitions need the
inter-broker channel of cluster mode, which is not here yet.
"""

from __future__ import annotations

from collections.abc import Sequence

from eoslog.coordinator.transaction import TxnMarker
from eoslog.errors import Errors
from eoslog.replica import ReplicaManager
from eoslog.types import TopicPartition


class MarkerSender:
    """The coordinator's ``MarkerSender``: node id, markers → one result per marker."""

    def __init__(self, replicas: ReplicaManager) -> None:
        self.replicas = replicas

    async def __call__(self, node_id: int, markers: Sequence[TxnMarker]) -> list[dict[TopicPartition, Errors]]:
        if node_id != self.replicas.node_id:
            raise RuntimeError(f"no inter-broker channel to node {node_id}")
        return [
            {tp: self.replicas.write_txn_marker(tp, m.producer_id, m.producer_epoch, m.coordinator_epoch, m.commit)
             for tp in m.partitions}
            for m in markers
        ]

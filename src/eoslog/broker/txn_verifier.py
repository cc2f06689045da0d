"""The replica layer's KIP-890 check (verify, or for transactions v2 add), answered by this
broker's transaction coordinator.

In a cluster the transaction coordinator of a transactional id may be another broker
(Kafka's AddPartitionsToTxnManager then sends it AddPartitionsToTxn v4+:
``add_partitions_manager``); on one node it is a call.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from eoslog.broker.add_partitions_manager import AddPartitionsToTxnManager
from eoslog.broker.handlers.base import coordinator_write_replicated
from eoslog.coordinator.internal_topic import TRANSACTION_STATE_TOPIC
from eoslog.coordinator.transaction import TransactionCoordinator
from eoslog.coordinator.transaction.log import transaction_partition_for
from eoslog.errors import Errors
from eoslog.features import TRANSACTION_VERSION_2
from eoslog.types import TopicPartition

if TYPE_CHECKING:
    from eoslog.cluster.member import ClusterMember


class LocalTransactionVerifier:
    """A ``replica.TransactionVerifier`` over the coordinator of this broker."""

    def __init__(self, coordinator: TransactionCoordinator) -> None:
        self.coordinator = coordinator

    async def verify_partition(self, transactional_id: str, producer_id: int, producer_epoch: int,
                               tp: TopicPartition) -> Errors:
        return self.coordinator.verify_partition(transactional_id, producer_id, producer_epoch, tp.topic, tp.partition)

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             tps: Collection[TopicPartition], client_transaction_version: int) -> Errors:
        """AddPartitionsToTxn at this coordinator, as a client's or a leader's request is handled:
        held while the id's previous step is under way (``TransactionCoordinator.held``), and
        answered once the Ongoing record is replicated (it must be durable before the data or
        offsets it lets in)."""
        c = self.coordinator
        error = await c.held("AddPartitionsToTxn", transactional_id, lambda: c.add_partitions(
            transactional_id, producer_id, producer_epoch, tps, client_transaction_version), lambda e: e)
        return await coordinator_write_replicated(c.state.topic, c.state.partition_for(transactional_id), error)

    async def add_partition(self, transactional_id: str, producer_id: int, producer_epoch: int,
                            tp: TopicPartition) -> Errors:
        return await self.add_partitions(transactional_id, producer_id, producer_epoch, [tp], TRANSACTION_VERSION_2)

    async def is_kept_by_newer_producer(self, transactional_id: str, producer_id: int, producer_epoch: int) -> bool:
        return self.coordinator.is_fenced_by_kept_transaction(transactional_id, producer_id, producer_epoch)

    def commit_makes_durable(self, transactional_id: str) -> bool:
        return self.coordinator.commit_makes_durable(transactional_id)


class ClusterTransactionVerifier:
    """Cluster mode: the transactional id's coordinator may be another broker; it is asked with
    AddPartitionsToTxn v4+ (broker to broker) through Kafka's AddPartitionsToTxnManager: verify-only
    for transactions v1, adding (v5) for v2. An unreachable coordinator answers NETWORK_EXCEPTION,
    which the producer retries (it is told NOT_ENOUGH_REPLICAS)."""

    def __init__(self, local: LocalTransactionVerifier, cluster: ClusterMember) -> None:
        self.local = local
        self.cluster = cluster
        self.manager = AddPartitionsToTxnManager(cluster.channel.send)

    def _coordinator(self, transactional_id: str) -> int | None:
        metadata = self.cluster.metadata
        assignment = metadata.topics.get(TRANSACTION_STATE_TOPIC)
        if assignment is None:
            return None
        partition = transaction_partition_for(transactional_id, len(assignment.partitions))
        leader = metadata.leader(TopicPartition(TRANSACTION_STATE_TOPIC, partition))
        return None if leader < 0 else leader

    async def _ask(self, transactional_id: str, producer_id: int, producer_epoch: int, tp: TopicPartition,
                   verify_only: bool) -> Errors:
        coordinator = self._coordinator(transactional_id)
        if coordinator is None:
            return Errors.COORDINATOR_NOT_AVAILABLE
        if coordinator == self.cluster.broker_id:
            if verify_only:
                return await self.local.verify_partition(transactional_id, producer_id, producer_epoch, tp)
            return await self.local.add_partition(transactional_id, producer_id, producer_epoch, tp)
        answers = await self.manager.add_or_verify(coordinator, transactional_id, producer_id, producer_epoch,
                                                   {tp}, verify_only)
        return answers[tp]

    async def verify_partition(self, transactional_id: str, producer_id: int, producer_epoch: int,
                               tp: TopicPartition) -> Errors:
        return await self._ask(transactional_id, producer_id, producer_epoch, tp, verify_only=True)

    async def add_partition(self, transactional_id: str, producer_id: int, producer_epoch: int,
                            tp: TopicPartition) -> Errors:
        return await self._ask(transactional_id, producer_id, producer_epoch, tp, verify_only=False)

    async def is_kept_by_newer_producer(self, transactional_id: str, producer_id: int, producer_epoch: int) -> bool:
        """Known only where the id's coordinator is (no request asks it across brokers):
        elsewhere False, and the coordinator's own checks still fence the old instance."""
        if self._coordinator(transactional_id) == self.cluster.broker_id:
            return await self.local.is_kept_by_newer_producer(transactional_id, producer_id, producer_epoch)
        return False

    def commit_makes_durable(self, transactional_id: str) -> bool:
        """Never in a cluster: a transaction's writes are acknowledged once the ISR has them (and,
        under group commit, once every ISR member fsynced them), as in Kafka."""
        return False

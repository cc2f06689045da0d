"""The replica layer's KIP-890 check, answered by this broker's transaction coordinator.

In a cluster the transaction coordinator of a transactional id may be another broker
(Kafka's AddPartitionsToTxnManager then sends it a verify-only AddPartitionsToTxn); on
one node it is a call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eoslog.client.errors import KafkaError as ClientError
from eoslog.client.versions import ApiVersionTable
from eoslog.coordinator.internal_topic import TRANSACTION_STATE_TOPIC
from eoslog.coordinator.transaction import TransactionCoordinator
from eoslog.coordinator.transaction.log import transaction_partition_for
from eoslog.errors import Errors
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import from_code
from eoslog.protocol.messages import build, request_types
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

    async def is_kept_by_newer_producer(self, transactional_id: str, producer_id: int, producer_epoch: int) -> bool:
        return self.coordinator.is_fenced_by_kept_transaction(transactional_id, producer_id, producer_epoch)


class ClusterTransactionVerifier:
    """Cluster mode: the transactional id's coordinator may be another broker; it is asked
    with a verify-only AddPartitionsToTxn (v4+, broker to broker), as Kafka's
    AddPartitionsToTxnManager does. An unreachable coordinator answers NETWORK_EXCEPTION,
    which the producer retries."""

    def __init__(self, local: LocalTransactionVerifier, cluster: ClusterMember) -> None:
        self.local = local
        self.cluster = cluster

    def _coordinator(self, transactional_id: str) -> int | None:
        metadata = self.cluster.metadata
        assignment = metadata.topics.get(TRANSACTION_STATE_TOPIC)
        if assignment is None:
            return None
        partition = transaction_partition_for(transactional_id, len(assignment.partitions))
        leader = metadata.leader(TopicPartition(TRANSACTION_STATE_TOPIC, partition))
        return None if leader < 0 else leader

    async def verify_partition(self, transactional_id: str, producer_id: int, producer_epoch: int,
                               tp: TopicPartition) -> Errors:
        coordinator = self._coordinator(transactional_id)
        if coordinator is None:
            return Errors.COORDINATOR_NOT_AVAILABLE
        if coordinator == self.cluster.broker_id:
            return await self.local.verify_partition(transactional_id, producer_id, producer_epoch, tp)

        def make(versions: ApiVersionTable) -> Any:
            m = request_types(ApiKey.ADD_PARTITIONS_TO_TXN, versions.pick(ApiKey.ADD_PARTITIONS_TO_TXN, 5, 4))
            return build(m.AddPartitionsToTxnRequest, transactions=(build(
                m.AddPartitionsToTxnTransaction, transactional_id=transactional_id, producer_id=producer_id,
                producer_epoch=producer_epoch, verify_only=True,
                topics=(build(m.AddPartitionsToTxnTopic, name=tp.topic, partitions=(tp.partition,)),)),))

        try:
            response = await self.cluster.channel.send(coordinator, make)
        except (ClientError, OSError):
            return Errors.NETWORK_EXCEPTION
        if int(response.error_code) != 0:
            return from_code(int(response.error_code))
        for txn in response.results_by_transaction:
            for topic in txn.topic_results:
                for p in topic.results_by_partition:
                    if str(topic.name) == tp.topic and int(p.partition_index) == tp.partition:
                        return from_code(int(p.partition_error_code))
        return Errors.UNKNOWN_SERVER_ERROR

    async def is_kept_by_newer_producer(self, transactional_id: str, producer_id: int, producer_epoch: int) -> bool:
        """Known only where the id's coordinator is (no request asks it across brokers):
        elsewhere False, and the coordinator's own checks still fence the old instance."""
        if self._coordinator(transactional_id) == self.cluster.broker_id:
            return await self.local.is_kept_by_newer_producer(transactional_id, producer_id, producer_epoch)
        return False

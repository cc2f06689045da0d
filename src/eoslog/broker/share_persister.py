"""The way from a share-partition leader (or a group coordinator) to the share coordinator of a key
in a cluster (Kafka's DefaultStatePersister): the leader of the key's ``__share_group_state``
partition, this broker or another.

Each call finds that leader in the metadata cache (creating the topic on first use, as
FindCoordinator does), calls this broker's share coordinator (``LocalPersister``) when it is this
broker, and otherwise sends the inter-broker request (``handlers/share_state.py``) over the broker
channel. The coordinator not there yet — loading, moving, no leader, the connection lost — is
retried with a backoff until three times ``share.coordinator.write.timeout.ms`` have passed; what the
coordinator refuses (a fenced epoch) is answered at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from kio.schema.types import ProducerId, TransactionalId
from kio.static.primitive import i16

from eoslog.broker.metadata_support import MetadataSupport
from eoslog.cluster.channel import BrokerChannel
from eoslog.coordinator.partitioning import coordinator_partition_for
from eoslog.coordinator.share import ShareCoordinator, ShareGroupOffset, SharePartitionKey, StateWrite
from eoslog.coordinator.share.coordinator import TransactionalWrite
from eoslog.coordinator.share.persister import LocalPersister
from eoslog.coordinator.share.state import NO_OFFSET, DeliveryState, StateBatch
from eoslog.errors import Errors
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import from_code
from eoslog.protocol.messages import build, request_types
from eoslog.protocol.share_transactions import ShareTransaction

log = logging.getLogger(__name__)

T = TypeVar("T")
_RETRIABLE = frozenset({Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE,
                        Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.REQUEST_TIMED_OUT, Errors.NETWORK_EXCEPTION})
_BACKOFF_S = 0.1


class ClusterPersister:
    def __init__(self, coordinator: ShareCoordinator, support: MetadataSupport, channel: BrokerChannel,
                 broker_id: int, timeout_ms: int) -> None:
        self.local = LocalPersister(coordinator)
        self.local.create_topic = False  # created in ZooKeeper, by find_coordinator
        self.coordinator = coordinator
        self.support = support
        self.channel = channel
        self.broker_id = broker_id
        self.timeout_s = timeout_ms * 3 / 1000

    def _leader(self, key: SharePartitionKey) -> tuple[Errors, int]:
        error, found = self.support.find_coordinator(self.coordinator.topic, coordinator_partition_for,
                                                     key.coordinator_key, None)
        return (error, -1) if found is None else (Errors.NONE, found.node_id)

    async def _call(self, key: SharePartitionKey, what: str, local: Callable[[], Awaitable[T]],
                    remote: Callable[[int], Awaitable[T]], error_of: Callable[[T], Errors], refused: T) -> T:
        deadline = time.monotonic() + self.timeout_s
        while True:
            error, node = self._leader(key)
            result: T = refused
            if error == Errors.NONE:
                try:
                    result = await (local() if node == self.broker_id else remote(node))
                    error = error_of(result)
                except (OSError, TimeoutError, Exception) as e:  # the channel's connection failures
                    log.debug("%s of %s at broker %d failed: %s", what, key.coordinator_key, node, e)
                    error = Errors.NETWORK_EXCEPTION
            if error not in _RETRIABLE or time.monotonic() > deadline:
                if error in _RETRIABLE:
                    log.warning("%s of %s: no share coordinator answered within %.0f s (%s)", what,
                                key.coordinator_key, self.timeout_s, error.name)
                    return _with_error(refused, Errors.COORDINATOR_NOT_AVAILABLE, error_of)
                return result if error_of(result) == error else _with_error(refused, error, error_of)
            await asyncio.sleep(_BACKOFF_S)

    async def _send(self, node: int, api_key: ApiKey, max_version: int, fill: Callable[[Any], Any]) -> Any:
        def make(versions: Any) -> Any:
            return fill(request_types(api_key, versions.pick(api_key, max_version)))
        return await self.channel.send(node, make)

    # -- the Persister protocol ---------------------------------------------------------------

    async def read_state(self, key: SharePartitionKey, leader_epoch: int) -> tuple[Errors, ShareGroupOffset | None]:
        async def remote(node: int) -> tuple[Errors, ShareGroupOffset | None]:
            r = await self._send(node, ApiKey.READ_SHARE_GROUP_STATE, 0, lambda m: build(
                m.ReadShareGroupStateRequest, group_id=key.group_id, topics=(build(
                    m.ReadStateData, topic_id=key.topic_id, partitions=(build(
                        m.PartitionData, partition=key.partition, leader_epoch=leader_epoch),)),)))
            p = r.results[0].partitions[0]
            error = from_code(int(p.error_code))
            if error != Errors.NONE:
                return error, None
            batches = tuple(StateBatch(int(b.first_offset), int(b.last_offset), DeliveryState(int(b.delivery_state)),
                                       int(b.delivery_count)) for b in p.state_batches)
            if int(p.start_offset) == NO_OFFSET and not batches:
                return Errors.NONE, ShareGroupOffset(0, int(p.state_epoch), leader_epoch, NO_OFFSET, -1, 0, 0, ())
            return Errors.NONE, ShareGroupOffset(0, int(p.state_epoch), leader_epoch, int(p.start_offset), -1, 0, 0,
                                                 batches)

        return await self._call(key, "ReadShareGroupState", lambda: self.local.read_state(key, leader_epoch),
                                remote, lambda r: r[0], (Errors.NONE, None))

    async def write_state(self, key: SharePartitionKey, write: StateWrite,
                          txn: TransactionalWrite | None = None) -> Errors:
        def request(m: Any) -> Any:
            r = build(m.WriteShareGroupStateRequest, group_id=key.group_id, eoslog_transaction=_transaction(txn),
                      topics=(build(m.WriteStateData, topic_id=key.topic_id, partitions=(build(
                          m.PartitionData, partition=key.partition, state_epoch=write.state_epoch,
                          leader_epoch=write.leader_epoch, start_offset=write.start_offset,
                          delivery_complete_count=-1, state_batches=tuple(
                              build(m.StateBatch, first_offset=b.first_offset, last_offset=b.last_offset,
                                    delivery_state=int(b.delivery_state), delivery_count=b.delivery_count)
                              for b in write.state_batches)),)),))
            if txn is not None and getattr(r, "eoslog_transaction", ShareTransaction()).transactional_id is None:
                # Never written outside the transaction: only v1 carries eoslog's tagged field.
                raise ValueError("the share coordinator's broker does not take WriteShareGroupState v1")
            return r

        async def remote(node: int) -> Errors:
            r = await self._send(node, ApiKey.WRITE_SHARE_GROUP_STATE, 1, request)
            return from_code(int(r.results[0].partitions[0].error_code))

        return await self._call(key, "WriteShareGroupState", lambda: self.local.write_state(key, write, txn),
                                remote, lambda e: e, Errors.NONE)

    async def initialize_state(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> Errors:
        async def remote(node: int) -> Errors:
            r = await self._send(node, ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, lambda m: build(
                m.InitializeShareGroupStateRequest, group_id=key.group_id, topics=(build(
                    m.InitializeStateData, topic_id=key.topic_id, partitions=(build(
                        m.PartitionData, partition=key.partition, state_epoch=state_epoch,
                        start_offset=start_offset),)),)))
            return from_code(int(r.results[0].partitions[0].error_code))

        return await self._call(key, "InitializeShareGroupState",
                                lambda: self.local.initialize_state(key, state_epoch, start_offset), remote,
                                lambda e: e, Errors.NONE)

    async def read_summary(self, key: SharePartitionKey) -> tuple[Errors, ShareGroupOffset | None]:
        async def remote(node: int) -> tuple[Errors, ShareGroupOffset | None]:
            r = await self._send(node, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 1, lambda m: build(
                m.ReadShareGroupStateSummaryRequest, group_id=key.group_id, topics=(build(
                    m.ReadStateSummaryData, topic_id=key.topic_id, partitions=(build(
                        m.PartitionData, partition=key.partition, leader_epoch=-1),)),)))
            p = r.results[0].partitions[0]
            error = from_code(int(p.error_code))
            if error != Errors.NONE or (int(p.start_offset) == NO_OFFSET and int(p.state_epoch) == 0):
                return error, None
            return Errors.NONE, ShareGroupOffset(0, int(p.state_epoch), int(p.leader_epoch), int(p.start_offset),
                                                 int(getattr(p, "delivery_complete_count", -1)), 0, 0, ())

        return await self._call(key, "ReadShareGroupStateSummary", lambda: self.local.read_summary(key), remote,
                                lambda r: r[0], (Errors.NONE, None))

    async def delete_state(self, key: SharePartitionKey) -> Errors:
        async def remote(node: int) -> Errors:
            r = await self._send(node, ApiKey.DELETE_SHARE_GROUP_STATE, 0, lambda m: build(
                m.DeleteShareGroupStateRequest, group_id=key.group_id, topics=(build(
                    m.DeleteStateData, topic_id=key.topic_id, partitions=(build(
                        m.PartitionData, partition=key.partition),)),)))
            return from_code(int(r.results[0].partitions[0].error_code))

        return await self._call(key, "DeleteShareGroupState", lambda: self.local.delete_state(key), remote,
                                lambda e: e, Errors.NONE)


def _with_error(refused: T, error: Errors, error_of: Callable[[T], Errors]) -> T:
    """``refused`` (the empty answer) carrying ``error``."""
    if isinstance(refused, tuple):
        return (error, *refused[1:])  # type: ignore[return-value]
    return error  # type: ignore[return-value]


def _transaction(txn: TransactionalWrite | None) -> ShareTransaction:
    if txn is None:
        return ShareTransaction()
    return ShareTransaction(transactional_id=TransactionalId(txn.transactional_id),
                            producer_id=ProducerId(txn.producer_id), producer_epoch=i16(txn.producer_epoch))

"""How a share-partition leader reaches the share coordinator of a share-partition (Kafka's
``Persister``): read, write, initialize, summarize and delete a state, each answered once what
it wrote is durable (replicated; with group commit, fsynced).

``LocalPersister`` calls this broker's share coordinator (one node: it coordinates every key).
In a cluster the coordinator of a key may be another broker: ``eoslog.cluster.share_persister``
sends the inter-broker requests there, and uses a ``LocalPersister`` when it is this broker.
Users: the share-partition leaders (``eoslog.share``) and the group coordinator's share groups
(initialize, delete, summarize).
"""

from __future__ import annotations

from typing import Protocol

from eoslog.coordinator.share.coordinator import ShareCoordinator, StateWrite, TransactionalWrite
from eoslog.coordinator.share.state import ShareGroupOffset, SharePartitionKey
from eoslog.errors import Errors


class Persister(Protocol):
    async def read_state(self, key: SharePartitionKey, leader_epoch: int) -> tuple[Errors, ShareGroupOffset | None]:
        ...

    async def write_state(self, key: SharePartitionKey, write: StateWrite,
                          txn: TransactionalWrite | None = None) -> Errors: ...

    async def initialize_state(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> Errors: ...

    async def read_summary(self, key: SharePartitionKey) -> tuple[Errors, ShareGroupOffset | None]: ...

    async def delete_state(self, key: SharePartitionKey) -> Errors: ...


class LocalPersister:
    """One node: its share coordinator has every key; ``__share_group_state`` is created on
    first use, as Kafka creates it when a share coordinator is first looked up."""

    def __init__(self, coordinator: ShareCoordinator) -> None:
        self.coordinator = coordinator
        self.create_topic = True  # False in a cluster: the topic is created in ZooKeeper

    async def _durable(self, key: SharePartitionKey, error: Errors) -> Errors:
        return await self.coordinator.replicated(key) if error == Errors.NONE else error

    def _ensure(self) -> None:
        if self.create_topic:
            self.coordinator.ensure_topic()

    async def read_state(self, key: SharePartitionKey, leader_epoch: int) -> tuple[Errors, ShareGroupOffset | None]:
        self._ensure()
        error, state = self.coordinator.read_state(key, leader_epoch)
        # A read may record a newer leader epoch: durable before the leader acts on it.
        error = await self._durable(key, error)
        return error, state if error == Errors.NONE else None

    async def write_state(self, key: SharePartitionKey, write: StateWrite,
                          txn: TransactionalWrite | None = None) -> Errors:
        self._ensure()
        return await write_state(self.coordinator, key, write, txn)

    async def initialize_state(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> Errors:
        self._ensure()
        return await self._durable(key, self.coordinator.initialize_state(key, state_epoch, start_offset))

    async def read_summary(self, key: SharePartitionKey) -> tuple[Errors, ShareGroupOffset | None]:
        return self.coordinator.read_summary(key)

    async def delete_state(self, key: SharePartitionKey) -> Errors:
        return await self._durable(key, self.coordinator.delete_state(key))


async def write_state(coordinator: ShareCoordinator, key: SharePartitionKey, write: StateWrite,
                      txn: TransactionalWrite | None) -> Errors:
    """A write at this broker's share coordinator, answered once durable; inside ``txn`` once
    its partition is in the transaction too (a leader's call, or another broker's
    WriteShareGroupState)."""
    if txn is not None:
        error = await coordinator.add_to_transaction(key, txn)
        if error != Errors.NONE:
            return error
    error = coordinator.write_state(key, write, txn)
    return await coordinator.replicated(key) if error == Errors.NONE else error

"""The share coordinator: the durable state of every share-partition whose key maps to a
``__share_group_state`` partition this broker leads (Kafka's ``ShareCoordinatorShard`` and
``ShareCoordinatorService``).

Jobs:

- own ``__share_group_state`` partitions (all of them on one node) and load each one
  (``loader``); a key whose partition is loading answers COORDINATOR_LOAD_IN_PROGRESS, one it
  does not lead NOT_COORDINATOR;
- answer the share-partition leaders' requests: initialize a state (the group coordinator,
  AlterShareGroupOffsets), read it (a leader loading a share-partition), write what changed
  (a leader's acknowledgements, releases and start-offset moves), read a summary
  (DescribeShareGroupOffsets), delete it (DeleteGroups, DeleteShareGroupOffsets);
- fence stale writers: a write of an older state epoch (the state was re-initialized since)
  gets FENCED_STATE_EPOCH, a read or write of an older leader epoch (the partition has a newer
  leader) FENCED_LEADER_EPOCH;
- write an update record per write and a snapshot record every
  ``share.coordinator.snapshot.update.records.per.snapshot`` updates, and prune the log below
  the oldest snapshot still needed (the topic is ``cleanup.policy=delete`` with infinite
  retention, as Kafka's);
- (eoslog's extension, docs/consumer.md) hold updates written inside a producer's transaction
  until its COMMIT or ABORT marker lands in this partition, and tell the share-partition
  leaders waiting for the outcome.

Every write is appended (synchronously, through the replica layer) before the in-memory
state changes, and its caller awaits ``replicated`` before answering: nothing a leader is told
is durable is lost with this broker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from eoslog.config import BrokerConfig
from eoslog.coordinator.internal_topic import (
    APPEND_ERRORS,
    CoordinatorAppendError,
    InternalTopic,
    InternalTopicConfig,
    KeyValue,
    drive_loader,
    finish_loader,
    internal_topic_replication,
)
from eoslog.coordinator.ownership import PartitionOwnership
from eoslog.coordinator.share.loader import (
    HeldState,
    LoadedShareStates,
    PendingUpdate,
    apply_update,
    complete_pending,
    load_partition,
)
from eoslog.coordinator.share.records import (
    ShareUpdate,
    encode_snapshot,
    encode_tombstones,
    encode_update,
    share_state_partition_for,
)
from eoslog.coordinator.share.state import (
    NO_OFFSET,
    DeliveryState,
    ShareGroupOffset,
    SharePartitionKey,
    StateBatch,
    combine,
    delivery_complete_count,
)
from eoslog.errors import Errors
from eoslog.replica import ReplicaManager
from eoslog.types import SHARE_GROUP_STATE_TOPIC, TopicPartition

log = logging.getLogger(__name__)

NO_LEADER_EPOCH = -1

# (key, producer id, committed, offsets held) for each share-partition whose transactional
# update a marker decided.
OutcomeListener = Callable[[SharePartitionKey, int, bool, list[int]], None]


@dataclass(frozen=True, slots=True)
class ShareCoordinatorConfig:
    num_partitions: int
    segment_bytes: int
    min_insync_replicas: int
    updates_per_snapshot: int
    load_buffer_bytes: int
    write_timeout_ms: int

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> ShareCoordinatorConfig:
        """The min.insync.replicas capped as on one node (a cluster creates the topic with its own)."""
        return cls(int(config["share.coordinator.state.topic.num.partitions"]),
                   int(config["share.coordinator.state.topic.segment.bytes"]),
                   internal_topic_replication(config, brokers=1).share_state_min_isr,
                   int(config["share.coordinator.snapshot.update.records.per.snapshot"]),
                   int(config["share.coordinator.load.buffer.size"]),
                   int(config["share.coordinator.write.timeout.ms"]))


@dataclass(frozen=True, slots=True)
class StateWrite:
    """What a share-partition leader writes: its start offset and the ranges that changed."""

    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...]


@dataclass(frozen=True, slots=True)
class TransactionalWrite:
    """A write made inside a producer's transaction (eoslog's extension)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


class ShareStateTopic(InternalTopic):
    """``__share_group_state``: cleanup.policy=delete with infinite retention, as Kafka's."""

    def __init__(self, replicas: ReplicaManager, config: ShareCoordinatorConfig, clock_ms: Callable[[], int]) -> None:
        super().__init__(replicas, InternalTopicConfig(SHARE_GROUP_STATE_TOPIC, config.num_partitions,
                                                       config.segment_bytes, cleanup_policy="delete",
                                                       min_insync_replicas=config.min_insync_replicas), clock_ms)


class ShareCoordinator:
    def __init__(self, config: ShareCoordinatorConfig, topic: InternalTopic, clock_ms: Callable[[], int]) -> None:
        self.config = config
        self.topic = topic
        self.clock_ms = clock_ms
        self.states: dict[SharePartitionKey, HeldState] = {}
        self.pending: dict[int, list[PendingUpdate]] = {}  # producer id → transactional updates
        self.ownership = PartitionOwnership()
        # Told when a marker decides a transactional update (share-partition leaders on this node).
        self.outcome_listeners: list[OutcomeListener] = []

    @classmethod
    def for_broker(cls, config: BrokerConfig, replicas: ReplicaManager,
                   clock_ms: Callable[[], int]) -> ShareCoordinator:
        share_config = ShareCoordinatorConfig.from_broker_config(config)
        coordinator = cls(share_config, ShareStateTopic(replicas, share_config, clock_ms), clock_ms)
        replicas.on_txn_marker(SHARE_GROUP_STATE_TOPIC, coordinator.complete_transaction)
        return coordinator

    def partition_for(self, key: SharePartitionKey) -> int:
        return share_state_partition_for(key, self.topic.num_partitions)

    # -- partitions and loading ---------------------------------------------------------------

    def ensure_topic(self) -> None:
        """Create ``__share_group_state`` on first use (FindCoordinator), as Kafka does."""
        if self.topic.create():
            self.ownership.own_all(range(self.topic.num_partitions))
            log.info("created %s with %d partitions", SHARE_GROUP_STATE_TOPIC, self.topic.num_partitions)

    def begin_loading(self) -> list[int]:
        if not self.topic.exists:
            return []
        return self.ownership.begin_loading(range(self.topic.num_partitions))

    def _loader(self, partition: int):  # type: ignore[no-untyped-def]
        return load_partition(self.topic, partition, self.clock_ms(), self.config.load_buffer_bytes)

    def load_partition_now(self, partition: int) -> None:
        self._on_loaded(partition, finish_loader(self._loader(partition)), None)

    async def load_all(self) -> None:
        for partition in sorted(self.ownership.loading):
            loaded = await drive_loader(self._loader(partition), f"{self.topic.name}-{partition}")
            if loaded is not None:
                self._on_loaded(partition, loaded, None)
            await asyncio.sleep(0)

    async def become_leader(self, partition: int, leader_epoch: int) -> None:
        """Cluster mode: load a ``__share_group_state`` partition this broker now leads."""
        self._forget(partition)
        self.ownership.become_leader(partition, leader_epoch)
        loaded = await drive_loader(self._loader(partition), f"{self.topic.name}-{partition}")
        if loaded is not None:
            self._on_loaded(partition, loaded, leader_epoch)

    def resign(self, partition: int) -> None:
        self.ownership.resign(partition)
        self._forget(partition)

    def _forget(self, partition: int) -> None:
        for key in [k for k in self.states if self.partition_for(k) == partition]:
            del self.states[key]
        for producer_id, updates in list(self.pending.items()):
            kept = [u for u in updates if self.partition_for(u.key) != partition]
            if kept:
                self.pending[producer_id] = kept
            else:
                del self.pending[producer_id]

    def _on_loaded(self, partition: int, loaded: LoadedShareStates, leader_epoch: int | None) -> None:
        if not self.ownership.loaded(partition, leader_epoch):
            return
        self.states.update(loaded.states)
        for producer_id, updates in loaded.pending.items():
            self.pending.setdefault(producer_id, []).extend(updates)

    def status(self, key: SharePartitionKey) -> Errors:
        if not self.topic.exists:
            return Errors.NOT_COORDINATOR
        return self.ownership.status(self.partition_for(key))

    def shutdown(self) -> None:
        self.ownership.shutdown()
        self.states.clear()
        self.pending.clear()

    # -- appends ------------------------------------------------------------------------------

    def _append(self, key: SharePartitionKey, records: list[KeyValue],
                txn: TransactionalWrite | None = None) -> tuple[Errors, int]:
        """Append one batch to the key's partition → (error, base offset)."""
        try:
            if txn is None:
                base = self.topic.append(self.partition_for(key), records)
            else:
                base = self.topic.append(self.partition_for(key), records, producer_id=txn.producer_id,
                                         producer_epoch=txn.producer_epoch, transactional=True)
        except CoordinatorAppendError as e:
            error = APPEND_ERRORS.get(e.error, e.error)
            log.error("appending share state of %s to %s-%d failed (%s): %s", key.coordinator_key,
                      self.topic.name, self.partition_for(key), error, e)
            return error, -1
        return Errors.NONE, base

    async def replicated(self, key: SharePartitionKey) -> Errors:
        """Until this coordinator's appends to the key's partition so far are replicated (and
        with group commit fsynced): the answer to a write waits for this."""
        error = await self.topic.wait_replicated(self.partition_for(key), self.config.write_timeout_ms)
        return Errors.NONE if error == Errors.NONE else APPEND_ERRORS.get(error, error)

    def _snapshot(self, key: SharePartitionKey, state: ShareGroupOffset) -> Errors:
        error, base = self._append(key, [encode_snapshot(key, state)])
        if error == Errors.NONE:
            self.states[key] = HeldState(state, 0, base)
        return error

    # -- the share-partition leaders' requests ------------------------------------------------

    def initialize_state(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> Errors:
        """InitializeShareGroupState: a new state (start offset, or -1 for
        share.auto.offset.reset to decide) at ``state_epoch``; refused if the state already has
        that epoch or a newer one."""
        error = self.status(key)
        if error != Errors.NONE:
            return error
        held = self.states.get(key)
        if held is not None and held.state.state_epoch >= state_epoch:
            return Errors.FENCED_STATE_EPOCH
        now = self.clock_ms()
        snapshot_epoch = 0 if held is None else held.state.snapshot_epoch + 1
        # Leader epoch 0, as Kafka's initialized state has it (a leader of any epoch may read it).
        return self._snapshot(key, ShareGroupOffset(snapshot_epoch, state_epoch, 0, start_offset, 0, now, now, ()))

    def read_state(self, key: SharePartitionKey, leader_epoch: int) -> tuple[Errors, ShareGroupOffset | None]:
        """ReadShareGroupState: the state as a leader resumes from it (None: never initialized).
        A newer leader epoch is recorded (the older leader's writes are fenced from then on).
        Records held by an open transaction are reported ACQUIRED: not to be handed out."""
        error = self.status(key)
        if error != Errors.NONE:
            return error, None
        held = self.states.get(key)
        if held is None:
            return Errors.NONE, None
        if leader_epoch != NO_LEADER_EPOCH:
            if leader_epoch < held.state.leader_epoch:
                return Errors.FENCED_LEADER_EPOCH, None
            if leader_epoch > held.state.leader_epoch:
                error = self._write(key, held, StateWrite(held.state.state_epoch, leader_epoch,
                                                          held.state.start_offset, ()))
                if error != Errors.NONE:
                    return error, None
        return Errors.NONE, self._with_pending(key, held.state)

    def _with_pending(self, key: SharePartitionKey, state: ShareGroupOffset) -> ShareGroupOffset:
        held_by_txn = [StateBatch(b.first_offset, b.last_offset, DeliveryState.ACQUIRED, b.delivery_count)
                       for updates in self.pending.values() for p in updates if p.key == key
                       for b in p.update.state_batches]
        if not held_by_txn:
            return state
        batches = combine(state.state_batches, held_by_txn, state.start_offset)
        return ShareGroupOffset(state.snapshot_epoch, state.state_epoch, state.leader_epoch, state.start_offset,
                                state.delivery_complete_count, state.create_timestamp, state.write_timestamp, batches)

    def read_summary(self, key: SharePartitionKey) -> tuple[Errors, ShareGroupOffset | None]:
        """ReadShareGroupStateSummary: start offset, epochs and completed count (no batches needed)."""
        error = self.status(key)
        if error != Errors.NONE:
            return error, None
        held = self.states.get(key)
        return Errors.NONE, None if held is None else held.state

    def write_state(self, key: SharePartitionKey, write: StateWrite,
                    txn: TransactionalWrite | None = None) -> Errors:
        """WriteShareGroupState: lay the leader's changed ranges over the state. With ``txn``
        (eoslog's extension) the update is written inside the producer's transaction and waits
        for its marker."""
        error = self.status(key)
        if error != Errors.NONE:
            return error
        held = self.states.get(key)
        if held is None:
            if txn is not None:
                return Errors.INVALID_REQUEST  # a transaction acknowledges records a leader read first
            now = self.clock_ms()
            batches = combine((), write.state_batches, write.start_offset)
            return self._snapshot(key, ShareGroupOffset(0, write.state_epoch, write.leader_epoch, write.start_offset,
                                                        delivery_complete_count(batches), now, now, batches))
        if write.state_epoch < held.state.state_epoch:
            return Errors.FENCED_STATE_EPOCH
        if write.leader_epoch != NO_LEADER_EPOCH and write.leader_epoch < held.state.leader_epoch:
            return Errors.FENCED_LEADER_EPOCH
        if txn is not None:
            return self._write_transactional(key, held, write, txn)
        return self._write(key, held, write)

    def _write(self, key: SharePartitionKey, held: HeldState, write: StateWrite) -> Errors:
        state = held.state
        leader_epoch = max(state.leader_epoch, write.leader_epoch)
        if write.state_epoch > state.state_epoch or held.updates + 1 >= self.config.updates_per_snapshot:
            # A newer state epoch replaces the state; a long run of updates is folded into a snapshot.
            base = () if write.state_epoch > state.state_epoch else state.state_batches
            batches = combine(base, write.state_batches, write.start_offset)
            return self._snapshot(key, ShareGroupOffset(
                state.snapshot_epoch + 1, write.state_epoch, leader_epoch, write.start_offset,
                delivery_complete_count(batches), state.create_timestamp, self.clock_ms(), batches))
        update = ShareUpdate(state.snapshot_epoch, leader_epoch, write.start_offset,
                             delivery_complete_count(combine(state.state_batches, write.state_batches,
                                                             write.start_offset)), write.state_batches)
        error, _ = self._append(key, [encode_update(key, update)])
        if error == Errors.NONE:
            apply_update(held, update, self.clock_ms())
        return error

    async def add_to_transaction(self, key: SharePartitionKey, txn: TransactionalWrite) -> Errors:
        """Before a transactional write: the key's ``__share_group_state`` partition joins the
        producer's transaction at its transaction coordinator (this broker's or another's, as a
        partition leader adds itself for a transactions v2 producer), durably, so that the
        transaction's marker comes here. Refused as the coordinator refuses (a fenced or
        unknown producer, a transaction ending)."""
        error = self.status(key)
        if error != Errors.NONE:
            return error
        verifier = self.topic.replicas.verifier
        if verifier is None:
            return Errors.COORDINATOR_NOT_AVAILABLE
        tp = TopicPartition(self.topic.name, self.partition_for(key))
        error = await verifier.add_partition(txn.transactional_id, txn.producer_id, txn.producer_epoch, tp)
        if error != Errors.NONE:
            log.info("share state %s: producer %d epoch %d (%s) not added to its transaction: %s",
                     key.coordinator_key, txn.producer_id, txn.producer_epoch, txn.transactional_id, error.name)
        return error

    def _write_transactional(self, key: SharePartitionKey, held: HeldState, write: StateWrite,
                             txn: TransactionalWrite) -> Errors:
        update = ShareUpdate(held.state.snapshot_epoch, max(held.state.leader_epoch, write.leader_epoch),
                             NO_OFFSET, -1, write.state_batches)
        error, base = self._append(key, [encode_update(key, update)], txn)
        if error == Errors.NONE:
            self.pending.setdefault(txn.producer_id, []).append(PendingUpdate(key, update, txn.producer_epoch, base))
        return error

    def delete_state(self, key: SharePartitionKey) -> Errors:
        """DeleteShareGroupState: the share-partition's state goes (tombstones)."""
        error = self.status(key)
        if error != Errors.NONE:
            return error
        if key not in self.states:
            return Errors.NONE
        error, _ = self._append(key, encode_tombstones(key))
        if error == Errors.NONE:
            del self.states[key]
        return error

    # -- transactions (eoslog's extension) ------------------------------------------------------

    def complete_transaction(self, partition: int, producer_id: int, committed: bool) -> None:
        """A COMMIT or ABORT marker of ``producer_id`` is now in ``__share_group_state-N``."""
        mine = [u for u in self.pending.get(producer_id, []) if self.partition_for(u.key) == partition]
        if not mine:
            return
        rest = [u for u in self.pending[producer_id] if self.partition_for(u.key) != partition]
        loaded = LoadedShareStates(self.states, {producer_id: mine})
        complete_pending(loaded, producer_id, committed, self.clock_ms())
        if rest:
            self.pending[producer_id] = rest
        else:
            del self.pending[producer_id]
        for key in {u.key for u in mine}:
            offsets = sorted({o for u in mine if u.key == key for b in u.update.state_batches
                              for o in range(b.first_offset, b.last_offset + 1)})
            log.info("share state %s: transaction of producer %d %s (%d records)", key.coordinator_key, producer_id,
                     "committed" if committed else "aborted", len(offsets))
            for listener in self.outcome_listeners:
                listener(key, producer_id, committed, offsets)

    def pending_producers(self, key: SharePartitionKey) -> set[int]:
        """Producers whose open transaction holds records of the share-partition."""
        return {pid for pid, updates in self.pending.items() if any(u.key == key for u in updates)}

    # -- pruning ------------------------------------------------------------------------------

    def prunable_offset(self, partition: int) -> int | None:
        """The offset below which ``__share_group_state-N`` holds nothing a load needs: the oldest
        snapshot of a live state, or an open transaction's first update, whichever is lower."""
        if self.ownership.status(partition) != Errors.NONE:
            return None
        needed = [h.snapshot_offset for k, h in self.states.items() if self.partition_for(k) == partition]
        needed += [u.offset for updates in self.pending.values() for u in updates
                   if self.partition_for(u.key) == partition]
        if not needed:
            return self.topic.appended_end.get(partition)
        return min(needed)

    def prune(self) -> int:
        """Delete the records no load needs (Kafka's share.coordinator.state.topic.prune.interval.ms
        job); returns how many partitions moved their log start offset."""
        moved = 0
        for partition in sorted(self.ownership.epochs):
            offset = self.prunable_offset(partition)
            if offset is None:
                continue
            tp = TopicPartition(self.topic.name, partition)
            p = self.topic.replicas.get_partition(tp)
            if p is None or not p.is_leader or offset <= p.log.log_start_offset:
                continue
            try:
                self.topic.replicas.delete_records(tp, min(offset, p.high_watermark), allow_internal=True)
                moved += 1
            except Exception as e:  # a leadership change under way: the next run tries again
                log.warning("pruning %s below %d failed: %s", tp, offset, e)
        return moved

"""An internal compacted topic as a coordinator sees it: create it, find a partition's
log, append a batch of (key, value) records.

Coordinators reach their partitions only through here, and this only through the
replica layer (``ReplicaManager.append_coordinator_records``: origin COORDINATOR, offsets
assigned, producer epoch checked, no sequences, acks=all). Refusals come back as
``CoordinatorAppendError`` carrying the Kafka error; each coordinator maps it onto what its
clients should see.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from eoslog.config import BrokerConfig
from eoslog.errors import Errors, KafkaError
from eoslog.records import BatchHeader, CompressionType, build_batch, iter_batch_headers
from eoslog.records.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from eoslog.replica import ReplicaManager
from eoslog.storage import PartitionLog, TopicError
from eoslog.types import OFFSETS_TOPIC as OFFSETS_TOPIC  # re-exported: the coordinators' name for it
from eoslog.types import SHARE_GROUP_STATE_TOPIC as SHARE_GROUP_STATE_TOPIC
from eoslog.types import TRANSACTION_STATE_TOPIC as TRANSACTION_STATE_TOPIC
from eoslog.types import TopicPartition

log = logging.getLogger(__name__)

KeyValue = tuple[bytes, bytes | None]
T = TypeVar("T")
# Kafka's offsets.commit.timeout.ms / request.timeout.ms order: how long a coordinator waits
# for its own write to be replicated before trying again.
REPLICATION_WAIT_MS = 5000


# A coordinator's append refused → what its clients should see (Kafka's
# TransactionStateManager.appendTransactionToLog and ShareCoordinatorShard's mappings): retriable
# ones make the client find the coordinator again or retry.
APPEND_ERRORS = {
    Errors.UNKNOWN_TOPIC_OR_PARTITION: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.REQUEST_TIMED_OUT: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_LEADER_OR_FOLLOWER: Errors.NOT_COORDINATOR,
    Errors.KAFKA_STORAGE_ERROR: Errors.NOT_COORDINATOR,
}


class CoordinatorAppendError(KafkaError):
    """A coordinator's append refused; ``error`` is the replica layer's Kafka error."""


@dataclass(frozen=True, slots=True)
class InternalTopicConfig:
    name: str
    num_partitions: int
    segment_bytes: int
    compression: CompressionType = CompressionType.NONE
    # The topic's min.insync.replicas, when the coordinator sets one (__transaction_state,
    # __share_group_state).
    min_insync_replicas: int | None = None
    # compact (the offsets and transaction logs), or delete with infinite retention
    # (__share_group_state, whose share coordinator prunes it itself).
    cleanup_policy: str = "compact"


@dataclass(frozen=True, slots=True)
class InternalTopicReplication:
    """The replication the internal topics get on ``brokers`` brokers, and why it differs
    from the configured one."""

    offsets_replication_factor: int
    transaction_replication_factor: int
    transaction_min_isr: int
    warning: str | None
    share_state_replication_factor: int = 1
    share_state_min_isr: int = 1

    def for_topic(self, name: str) -> tuple[int, int | None]:
        """(replication factor, min.insync.replicas or None) of an internal topic."""
        if name == OFFSETS_TOPIC:
            return self.offsets_replication_factor, None
        if name == SHARE_GROUP_STATE_TOPIC:
            return self.share_state_replication_factor, self.share_state_min_isr
        return self.transaction_replication_factor, self.transaction_min_isr


def internal_topic_replication(config: BrokerConfig, brokers: int) -> InternalTopicReplication:
    """Kafka refuses to create ``__consumer_offsets`` / ``__transaction_state`` while fewer
    brokers are alive than their replication factor (3 by default), so a single Kafka
    broker needs them set to 1. eoslog caps them at the brokers there are instead (and
    ``transaction.state.log.min.isr`` at the capped factor, or no transaction could commit),
    and says so once with the settings' names: docs/architecture.md, "Decisions"."""
    offsets_rf = int(config["offsets.topic.replication.factor"])
    txn_rf = int(config["transaction.state.log.replication.factor"])
    txn_min_isr = int(config["transaction.state.log.min.isr"])
    share_rf = int(config["share.coordinator.state.topic.replication.factor"])
    share_min_isr = int(config["share.coordinator.state.topic.min.isr"])
    capped = InternalTopicReplication(min(offsets_rf, brokers), min(txn_rf, brokers),
                                      min(txn_min_isr, txn_rf, brokers), None, min(share_rf, brokers),
                                      min(share_min_isr, share_rf, brokers))
    over = [f"{name}={value}" for name, value in (
        ("offsets.topic.replication.factor", offsets_rf), ("transaction.state.log.replication.factor", txn_rf),
        ("transaction.state.log.min.isr", txn_min_isr),
    ) if value > brokers]
    if not over:
        return capped
    warning = (f"{', '.join(over)} exceed the {brokers} broker(s) of this cluster: {OFFSETS_TOPIC} and "
               f"{TRANSACTION_STATE_TOPIC} get replication factor {capped.offsets_replication_factor} and "
               f"{capped.transaction_replication_factor}, min.insync.replicas of {TRANSACTION_STATE_TOPIC} "
               f"{capped.transaction_min_isr} (Kafka would refuse to create them; set these to {brokers} "
               "to silence this warning)")
    return InternalTopicReplication(capped.offsets_replication_factor, capped.transaction_replication_factor,
                                    capped.transaction_min_isr, warning, capped.share_state_replication_factor,
                                    capped.share_state_min_isr)


class InternalTopic:
    def __init__(self, replicas: ReplicaManager, config: InternalTopicConfig, clock_ms: Callable[[], int]) -> None:
        self.replicas = replicas
        self.config = config
        self.name = config.name
        self._clock_ms = clock_ms
        # Per partition: the end of this coordinator's last append, which must be replicated
        # before its effects are shown (in a cluster; on one node the ISR is this broker).
        self.appended_end: dict[int, int] = {}

    @property
    def exists(self) -> bool:
        return self.name in self.replicas.logs.topics

    @property
    def num_partitions(self) -> int:
        """The existing topic's partition count wins over the config, as in Kafka."""
        info = self.replicas.logs.topics.get(self.name)
        return info.num_partitions if info is not None else self.config.num_partitions

    def overrides(self, min_insync_replicas: int | None = None) -> dict[str, object]:
        """The topic's config: its cleanup policy, its segment size, the producer's compression,
        and (``__transaction_state``, ``__share_group_state``) its min.insync.replicas."""
        overrides: dict[str, object] = {
            "cleanup.policy": self.config.cleanup_policy, "segment.bytes": self.config.segment_bytes,
            "compression.type": "producer",
        }
        if self.config.cleanup_policy == "delete":
            overrides["retention.ms"] = -1
        min_isr = self.config.min_insync_replicas if min_insync_replicas is None else min_insync_replicas
        if self.config.min_insync_replicas is not None:
            overrides["min.insync.replicas"] = min_isr
        return overrides

    def create(self) -> bool:
        """Create the topic (compacted) if it does not exist; True if this call created it.
        In a cluster the topic is created in ZooKeeper instead (``cluster.coordination``)."""
        if self.exists or not self.replicas.leads_every_local_log:
            return False
        try:
            self.replicas.logs.create_topic(self.name, self.config.num_partitions, self.overrides(), internal=True)
        except TopicError as e:
            if e.error != Errors.TOPIC_ALREADY_EXISTS:
                raise
            return False
        return True

    def partition_log(self, partition: int) -> PartitionLog:
        p = self.replicas.get_partition(TopicPartition(self.name, partition))
        if p is None:
            raise CoordinatorAppendError(
                Errors.UNKNOWN_TOPIC_OR_PARTITION, f"{self.name}-{partition} does not exist"
            )
        return p.log

    def append(
        self, partition: int, records: Sequence[KeyValue], *, producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH, transactional: bool = False,
    ) -> int:
        """Append one batch of (key, value) records; returns the batch's base offset."""
        batch = build_batch(
            [(k, v, ()) for k, v in records], timestamp=self._clock_ms(),
            compression=self.config.compression, producer_id=producer_id,
            producer_epoch=producer_epoch, transactional=transactional,
        )
        try:
            info = self.replicas.append_coordinator_records(TopicPartition(self.name, partition), batch)
        except KafkaError as e:
            raise CoordinatorAppendError(e.error, str(e)) from e
        self.appended_end[partition] = info.last_offset + 1
        return info.first_offset

    def is_replicated(self, partition: int, offset: int) -> bool:
        """Has the ISR of ``partition`` everything below ``offset``?"""
        p = self.replicas.get_partition(TopicPartition(self.name, partition))
        return p is not None and p.is_leader and p.high_watermark >= offset

    async def wait_offset_replicated(self, partition: int, offset: int) -> Errors:
        """Until the ISR of ``partition`` has everything below ``offset`` (with group commit:
        fsynced), or a replication timeout."""
        return await self.replicas.wait_for_replication(TopicPartition(self.name, partition), offset,
                                                        REPLICATION_WAIT_MS)

    async def wait_replicated(self, partition: int, timeout_ms: int) -> Errors:
        """Until this coordinator's appends to ``partition`` so far are replicated (acks=all);
        NONE, or the replica layer's reason why not."""
        end = self.appended_end.get(partition)
        if end is None:
            return Errors.NONE
        return await self.replicas.wait_for_replication(TopicPartition(self.name, partition), end, timeout_ms)


def read_chunks(topic: InternalTopic, partition: int, chunk_bytes: int) -> Iterator[list[tuple[BatchHeader, bytes]]]:
    """The batches of ``partition`` from its log start to its end as of the call, a chunk of
    about ``chunk_bytes`` at a time (a loader yields to the event loop between chunks)."""
    plog = topic.partition_log(partition)
    offset, end = plog.log_start_offset, plog.log_end_offset
    while offset < end:
        # Looked up at each chunk: between two, the partition may have moved to another log
        # directory (AlterReplicaLogDirs), with the same offsets in a new log.
        data = topic.partition_log(partition).read(offset, chunk_bytes, upper_bound=end).records
        if not data:
            return
        chunk: list[tuple[BatchHeader, bytes]] = []
        for pos, h in iter_batch_headers(data):
            if h.last_offset < offset:
                continue
            chunk.append((h, data[pos: pos + h.size]))
            offset = h.next_offset
        yield chunk


def finish_loader(loader: Generator[None, None, T]) -> T:
    """Run a chunked partition loader to the end at once (start-up in tests)."""
    while True:
        try:
            next(loader)
        except StopIteration as done:
            result: T = done.value
            return result


async def drive_loader(loader: Generator[None, None, T], what: str) -> T | None:
    """Run a chunked partition loader, yielding to the event loop between chunks so the
    broker keeps serving while a coordinator loads. None if loading failed (logged): the
    caller keeps the partition loading, so its keys answer COORDINATOR_LOAD_IN_PROGRESS
    instead of starting over without their state."""
    while True:
        try:
            next(loader)
        except StopIteration as done:
            result: T = done.value
            return result
        except Exception:
            log.exception("failed to load %s", what)
            return None
        await asyncio.sleep(0)

"""An internal compacted topic as a coordinator sees it: create it, find a partition's
log, append a batch of (key, value) records.

The only place coordinators touch storage. Appends come from a coordinator, not from a
client, so they take ``PartitionLog.append_from_coordinator`` (offsets assigned, producer
epoch checked, no sequences). Storage failures come back as ``CoordinatorAppendError``
carrying the storage's Kafka error; each coordinator maps it onto what its clients
should see.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from eoslog.errors import Errors, KafkaError
from eoslog.records import CompressionType, InvalidRecordError, build_batch
from eoslog.records.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from eoslog.storage import LogManager, PartitionLog, TopicError

log = logging.getLogger(__name__)

KeyValue = tuple[bytes, bytes | None]
T = TypeVar("T")


class CoordinatorAppendError(KafkaError):
    """A coordinator's append refused by storage; ``error`` is storage's Kafka error."""


@dataclass(frozen=True, slots=True)
class InternalTopicConfig:
    name: str
    num_partitions: int
    segment_bytes: int
    compression: CompressionType = CompressionType.NONE


class InternalTopic:
    def __init__(
        self, logs: LogManager, config: InternalTopicConfig, clock_ms: Callable[[], int],
        on_append: Callable[[tuple[str, int]], None] | None = None,
    ) -> None:
        self.logs = logs
        self.config = config
        self.name = config.name
        self._clock_ms = clock_ms
        self._on_append = on_append

    @property
    def exists(self) -> bool:
        return self.name in self.logs.topics

    @property
    def num_partitions(self) -> int:
        """The existing topic's partition count wins over the config, as in Kafka."""
        info = self.logs.topics.get(self.name)
        return info.num_partitions if info is not None else self.config.num_partitions

    def create(self) -> bool:
        """Create the topic (compacted) if it does not exist; True if this call created it."""
        if self.exists:
            return False
        try:
            self.logs.create_topic(
                self.name, self.config.num_partitions,
                {"cleanup.policy": "compact", "segment.bytes": self.config.segment_bytes,
                 "compression.type": "producer"},
                internal=True,
            )
        except TopicError as e:
            if e.error != Errors.TOPIC_ALREADY_EXISTS:
                raise
            return False
        return True

    def partition_log(self, partition: int) -> PartitionLog:
        plog = self.logs.get_log(self.name, partition)
        if plog is None:
            raise CoordinatorAppendError(
                Errors.UNKNOWN_TOPIC_OR_PARTITION, f"{self.name}-{partition} does not exist"
            )
        return plog

    def append(
        self, partition: int, records: Sequence[KeyValue], *, producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH, transactional: bool = False,
    ) -> int:
        """Append one batch of (key, value) records; returns the batch's base offset."""
        plog = self.partition_log(partition)
        batch = build_batch(
            [(k, v, ()) for k, v in records], timestamp=self._clock_ms(),
            compression=self.config.compression, producer_id=producer_id,
            producer_epoch=producer_epoch, transactional=transactional,
        )
        try:
            info = plog.append_from_coordinator(batch)
        except InvalidRecordError as e:
            raise CoordinatorAppendError(e.error, str(e)) from e
        except OSError as e:
            raise CoordinatorAppendError(Errors.KAFKA_STORAGE_ERROR, f"{self.name}-{partition}: {e}") from e
        if self._on_append is not None:
            self._on_append((self.name, partition))
        return info.first_offset


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

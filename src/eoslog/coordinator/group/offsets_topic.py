"""``__consumer_offsets`` as the group coordinator sees it (an InternalTopic)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from eoslog.coordinator.internal_topic import (
    CoordinatorAppendError,
    InternalTopic,
    InternalTopicConfig,
    KeyValue,
)
from eoslog.records import CompressionType
from eoslog.storage import LogManager

OFFSETS_TOPIC = "__consumer_offsets"

__all__ = ["OFFSETS_TOPIC", "CoordinatorAppendError", "KeyValue", "OffsetsTopic", "OffsetsTopicConfig"]


@dataclass(frozen=True, slots=True)
class OffsetsTopicConfig:
    num_partitions: int
    segment_bytes: int
    compression: CompressionType


class OffsetsTopic(InternalTopic):
    def __init__(
        self, logs: LogManager, config: OffsetsTopicConfig, clock_ms: Callable[[], int],
        on_append: Callable[[tuple[str, int]], None] | None = None,
    ) -> None:
        super().__init__(
            logs,
            InternalTopicConfig(OFFSETS_TOPIC, config.num_partitions, config.segment_bytes, config.compression),
            clock_ms, on_append,
        )

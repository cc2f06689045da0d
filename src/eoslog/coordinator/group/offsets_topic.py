"""``__consumer_offsets`` as the group coordinator sees it (an InternalTopic)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from eoslog.coordinator.internal_topic import (
    OFFSETS_TOPIC,
    CoordinatorAppendError,
    InternalTopic,
    InternalTopicConfig,
    KeyValue,
)
from eoslog.records import CompressionType
from eoslog.replica import ReplicaManager

__all__ = ["OFFSETS_TOPIC", "CoordinatorAppendError", "KeyValue", "OffsetsTopic", "OffsetsTopicConfig"]


@dataclass(frozen=True, slots=True)
class OffsetsTopicConfig:
    num_partitions: int
    segment_bytes: int
    compression: CompressionType


class OffsetsTopic(InternalTopic):
    def __init__(self, replicas: ReplicaManager, config: OffsetsTopicConfig, clock_ms: Callable[[], int]) -> None:
        super().__init__(
            replicas,
            InternalTopicConfig(OFFSETS_TOPIC, config.num_partitions, config.segment_bytes, config.compression),
            clock_ms,
        )

"""``__transaction_state`` as the transaction coordinator sees it (an InternalTopic).

Always uncompressed, as Kafka enforces for this topic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from eoslog.coordinator.internal_topic import InternalTopic, InternalTopicConfig
from eoslog.coordinator.transaction.log import TRANSACTION_STATE_TOPIC
from eoslog.storage import LogManager


@dataclass(frozen=True, slots=True)
class TransactionStateTopicConfig:
    num_partitions: int
    segment_bytes: int


class TransactionStateTopic(InternalTopic):
    def __init__(self, logs: LogManager, config: TransactionStateTopicConfig,
                 clock_ms: Callable[[], int]) -> None:
        super().__init__(
            logs, InternalTopicConfig(TRANSACTION_STATE_TOPIC, config.num_partitions, config.segment_bytes),
            clock_ms,
        )

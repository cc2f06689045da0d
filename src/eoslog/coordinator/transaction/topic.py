"""``__transaction_state`` as the transaction coordinator sees it (an InternalTopic).

Always uncompressed, as Kafka enforces for this topic; its min.insync.replicas is
``transaction.state.log.min.isr``, as Kafka sets it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from eoslog.coordinator.internal_topic import TRANSACTION_STATE_TOPIC, InternalTopic, InternalTopicConfig
from eoslog.replica import ReplicaManager


@dataclass(frozen=True, slots=True)
class TransactionStateTopicConfig:
    num_partitions: int
    segment_bytes: int
    min_insync_replicas: int | None = None


class TransactionStateTopic(InternalTopic):
    def __init__(self, replicas: ReplicaManager, config: TransactionStateTopicConfig,
                 clock_ms: Callable[[], int]) -> None:
        super().__init__(
            replicas,
            InternalTopicConfig(TRANSACTION_STATE_TOPIC, config.num_partitions, config.segment_bytes,
                                min_insync_replicas=config.min_insync_replicas),
            clock_ms,
        )

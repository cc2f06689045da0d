"""What every kind of group of Kafka 4's protocols (KIP-848 consumer groups, KIP-932 share groups)
holds in a group coordinator: the ``__consumer_offsets`` topic its records go to, the timers, the
coordinator's own checks (which partition, is it served here), the group's settings and the topics as
the broker sees them — and the wait for its own writes to be replicated before a member is answered.
``consumer_groups.ConsumerGroupCoordinator`` and ``share_groups.ShareGroupCoordinator`` sit side by
side in this shape; the classic groups are the ``Rebalancer``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from eoslog.coordinator.internal_topic import InternalTopic
from eoslog.coordinator.timers import Scheduler
from eoslog.errors import Errors

G = TypeVar("G")  # the group
S = TypeVar("S")  # its settings
M = TypeVar("M")  # the topics' metadata it needs

REPLICATION_WAIT_MS = 5000  # Kafka's offsets.commit.timeout.ms


class ModernGroups(Generic[G, S, M]):
    def __init__(self, topic: InternalTopic, scheduler: Scheduler, partition_for: Callable[[str], int],
                 status: Callable[[str], Errors], settings: Callable[[str], S], topics: Callable[[], M]) -> None:
        self.topic = topic
        self.scheduler = scheduler
        self.partition_for = partition_for
        self.status = status  # the group coordinator's: does it serve this group id now?
        self.settings = settings
        self.topics = topics
        self.groups: dict[str, G] = {}

    async def _replicated(self, group_id: str, error: Errors) -> Errors:
        """Once ``error`` is NONE: until this coordinator's appends to the group's partition are
        replicated (acks=all); a write that is not is COORDINATOR_NOT_AVAILABLE to the member."""
        if error != Errors.NONE:
            return error
        error = await self.topic.wait_replicated(self.partition_for(group_id), REPLICATION_WAIT_MS)
        return Errors.NONE if error == Errors.NONE else Errors.COORDINATOR_NOT_AVAILABLE

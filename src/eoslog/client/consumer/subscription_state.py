"""What the consumer reads and from where (Kafka's SubscriptionState).

What it owns: how partitions come to the consumer — none yet, ``assign()`` (user
assigned), ``subscribe(topics)`` or ``subscribe('^pattern')`` (group assigned) — which
are mutually exclusive as in Kafka; the assigned partitions in assignment order, each with
its position (the offset of the next record to hand out), a pending offset reset, the
paused flag, and the high watermark / last stable offset the last fetch reported.

A newly assigned partition has no position: it is *initializing* until its committed
offset (or the reset policy) gives it one. What it must never do: I/O — the fetcher and
the coordinator read and update it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import Enum, auto

from eoslog.client.errors import IllegalStateError
from eoslog.client.types import TopicPartition

EARLIEST = "earliest"
LATEST = "latest"
NO_RESET = "none"


class SubscriptionType(Enum):
    NONE = auto()
    AUTO_TOPICS = auto()
    AUTO_PATTERN = auto()
    AUTO_REGEX = auto()  # a regular expression the coordinator matches (KIP-848, RE2/J syntax)
    USER_ASSIGNED = auto()


class PartitionState:
    __slots__ = ("high_watermark", "last_stable_offset", "log_start_offset", "paused", "position", "reset")

    def __init__(self) -> None:
        self.position: int | None = None
        self.reset: str | None = None  # EARLIEST / LATEST while an offset reset is pending
        self.paused = False
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1

    @property
    def has_valid_position(self) -> bool:
        return self.position is not None and self.reset is None


_MIXED = "Subscription to topics, partitions and pattern are mutually exclusive"


class SubscriptionState:
    def __init__(self, default_reset: str) -> None:
        self.default_reset = default_reset
        self.type = SubscriptionType.NONE
        self.topics: frozenset[str] = frozenset()  # subscribed topics (a pattern: those it matched)
        self.pattern: re.Pattern[str] | None = None
        self.regex: str | None = None
        self.assignment: dict[TopicPartition, PartitionState] = {}
        # Bumped whenever the assignment changes, so that in-flight work can tell.
        self.assignment_id = 0

    # -- subscription type ------------------------------------------------------------------

    def _set_type(self, kind: SubscriptionType) -> None:
        if self.type is SubscriptionType.NONE:
            self.type = kind
        elif self.type is not kind:
            raise IllegalStateError(_MIXED)

    @property
    def auto_assigned(self) -> bool:
        return self.type in (SubscriptionType.AUTO_TOPICS, SubscriptionType.AUTO_PATTERN, SubscriptionType.AUTO_REGEX)

    def subscribe(self, topics: Iterable[str]) -> bool:
        """Subscribe to topics; True when the subscription changed."""
        self._set_type(SubscriptionType.AUTO_TOPICS)
        return self._change_topics(frozenset(topics))

    def subscribe_pattern(self, pattern: re.Pattern[str]) -> None:
        self._set_type(SubscriptionType.AUTO_PATTERN)
        self.pattern = pattern

    def subscribe_regex(self, regex: str) -> None:
        """The coordinator resolves the topics; ``topics`` follows what it assigns."""
        self._set_type(SubscriptionType.AUTO_REGEX)
        self.regex = regex

    def match_pattern(self, all_topics: Iterable[str]) -> bool:
        """Subscribe to the topics the pattern matches; True when that set changed."""
        assert self.pattern is not None
        return self._change_topics(frozenset(t for t in all_topics if self.pattern.match(t)))

    def _change_topics(self, topics: frozenset[str]) -> bool:
        changed = topics != self.topics
        self.topics = topics
        return changed

    def unsubscribe(self) -> None:
        self.type = SubscriptionType.NONE
        self.topics = frozenset()
        self.pattern = None
        self.regex = None
        self._replace_assignment(())

    # -- assignment -------------------------------------------------------------------------

    def assign_from_user(self, partitions: Iterable[TopicPartition]) -> None:
        partitions = list(partitions)
        if not partitions:
            self.unsubscribe()
            return
        self._set_type(SubscriptionType.USER_ASSIGNED)
        self._replace_assignment(partitions)
        self.topics = frozenset(tp.topic for tp in partitions)

    def assign_from_subscribed(self, partitions: Iterable[TopicPartition]) -> None:
        """The group's assignment; partitions kept from before keep their state."""
        if not self.auto_assigned:
            raise IllegalStateError("the consumer is not subscribed to any topic")
        self._replace_assignment(partitions)

    def _replace_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        old = self.assignment
        self.assignment = {tp: old.get(tp) or PartitionState() for tp in partitions}
        self.assignment_id += 1

    def assigned(self) -> list[TopicPartition]:
        return list(self.assignment)

    def state(self, tp: TopicPartition) -> PartitionState:
        s = self.assignment.get(tp)
        if s is None:
            raise IllegalStateError(f"No current assignment for partition {tp.topic}-{tp.partition}")
        return s

    def is_assigned(self, tp: TopicPartition) -> bool:
        return tp in self.assignment

    # -- positions --------------------------------------------------------------------------

    def seek(self, tp: TopicPartition, offset: int) -> None:
        s = self.state(tp)
        s.position = offset
        s.reset = None

    def request_reset(self, tps: Iterable[TopicPartition], strategy: str | None = None) -> None:
        for tp in tps:
            self.state(tp).reset = strategy or self.default_reset

    def initializing(self) -> list[TopicPartition]:
        """Partitions with neither a position nor a pending reset."""
        return [tp for tp, s in self.assignment.items() if s.position is None and s.reset is None]

    def awaiting_reset(self) -> list[TopicPartition]:
        return [tp for tp, s in self.assignment.items() if s.reset is not None]

    def has_all_positions(self) -> bool:
        return all(s.has_valid_position for s in self.assignment.values())

    def fetchable(self) -> list[TopicPartition]:
        return [tp for tp, s in self.assignment.items() if not s.paused and s.has_valid_position]

    def is_fetchable(self, tp: TopicPartition) -> bool:
        s = self.assignment.get(tp)
        return s is not None and not s.paused and s.has_valid_position

    def consumed_offsets(self) -> dict[TopicPartition, int]:
        """Positions of the partitions that have one: what a commit without offsets commits."""
        return {tp: s.position for tp, s in self.assignment.items() if s.position is not None and s.reset is None}

    # -- pause -------------------------------------------------------------------------------

    def pause(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self.state(tp).paused = True

    def resume(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self.state(tp).paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, s in self.assignment.items() if s.paused}

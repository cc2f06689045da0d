"""Keyed timers for the coordinator's deadlines (Kafka's heartbeat and rebalance purgatories).

Every deadline has a key (``("heartbeat", group, member)``, ``("join", group)``, ...);
scheduling a key again replaces its timer, so "complete and schedule the next heartbeat
expiration" is one call. ``AsyncioScheduler`` runs them on the event loop;
``ManualScheduler`` runs them when a test advances its clock, so every timeout can be
tested without sleeping.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Callable, Hashable
from typing import Protocol

log = logging.getLogger(__name__)

TimerKey = Hashable
Action = Callable[[], None]


class Scheduler(Protocol):
    def now_ms(self) -> int: ...

    def schedule(self, key: TimerKey, delay_ms: int, action: Action) -> None: ...

    def cancel(self, key: TimerKey) -> None: ...

    def cancel_all(self) -> None: ...

    def pending(self, key: TimerKey) -> bool: ...


def _run(key: TimerKey, action: Action) -> None:
    try:
        action()
    except Exception:
        log.exception("timer %s failed", key)


class AsyncioScheduler:
    def __init__(self, clock_ms: Callable[[], int]) -> None:
        self._clock_ms = clock_ms
        self._handles: dict[TimerKey, asyncio.TimerHandle] = {}

    def now_ms(self) -> int:
        return self._clock_ms()

    def schedule(self, key: TimerKey, delay_ms: int, action: Action) -> None:
        self.cancel(key)
        loop = asyncio.get_running_loop()
        self._handles[key] = loop.call_later(max(delay_ms, 0) / 1000, self._fire, key, action)

    def _fire(self, key: TimerKey, action: Action) -> None:
        self._handles.pop(key, None)
        _run(key, action)

    def cancel(self, key: TimerKey) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()

    def cancel_all(self) -> None:
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()

    def pending(self, key: TimerKey) -> bool:
        return key in self._handles


class ManualScheduler:
    """A clock that only moves when told to; due timers run in deadline order."""

    def __init__(self, now_ms: int = 0) -> None:
        self._now = now_ms
        self._seq = itertools.count()
        self._heap: list[tuple[int, int, TimerKey]] = []
        self._live: dict[TimerKey, tuple[int, Action]] = {}  # key → (seq, action)

    def now_ms(self) -> int:
        return self._now

    def schedule(self, key: TimerKey, delay_ms: int, action: Action) -> None:
        seq = next(self._seq)
        self._live[key] = (seq, action)
        heapq.heappush(self._heap, (self._now + max(delay_ms, 0), seq, key))

    def cancel(self, key: TimerKey) -> None:
        self._live.pop(key, None)

    def cancel_all(self) -> None:
        self._live.clear()
        self._heap.clear()

    def pending(self, key: TimerKey) -> bool:
        return key in self._live

    def advance(self, ms: int) -> None:
        """Move the clock forward, running every timer that falls due on the way."""
        target = self._now + ms
        while self._heap and self._heap[0][0] <= target:
            deadline, seq, key = heapq.heappop(self._heap)
            live = self._live.get(key)
            if live is None or live[0] != seq:
                continue  # cancelled or replaced
            del self._live[key]
            self._now = max(self._now, deadline)
            _run(key, live[1])
        self._now = target

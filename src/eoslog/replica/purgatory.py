"""Requests waiting for a partition to change: woken by the change, never by polling.

Kafka keeps delayed operations in purgatories keyed by partition: a fetch waits for
records (DelayedFetch), an acks=all produce for its in-sync replicas (DelayedProduce).
Both are the same mechanism here: a waiter registers one future under each partition it
waits on; ``notify(tp)`` resolves the futures there, and the waiter checks its condition
again (min_bytes for a fetch, the high watermark for a produce) and answers or waits for
the rest of its time.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Iterable

from eoslog.running_loop import LoopRef, time_out
from eoslog.types import TopicPartition


class Purgatory:
    def __init__(self) -> None:
        self._waiters: defaultdict[TopicPartition, set[asyncio.Future[float | None]]] = defaultdict(set)
        self._loop = LoopRef()

    def notify(self, tp: TopicPartition) -> None:
        waiters = self._waiters.pop(tp, None)
        if waiters:
            now = time.perf_counter()
            for fut in waiters:
                if not fut.done():
                    fut.set_result(now)

    async def wait(self, partitions: Iterable[TopicPartition], timeout_s: float) -> float | None:
        """Return when any of ``partitions`` is notified (``time.perf_counter()`` at the
        notification) or ``timeout_s`` passes (None). One future and one timer per wait (an
        ``asyncio.wait_for`` of a shielded future made three more objects and callbacks for every
        acks=all produce and coordinator write)."""
        loop = self._loop.get()
        fut: asyncio.Future[float | None] = loop.create_future()
        keys = tuple(partitions)
        for tp in keys:
            self._waiters[tp].add(fut)
        timer = loop.call_later(timeout_s, time_out, fut)
        try:
            return await fut
        finally:
            timer.cancel()
            for tp in keys:
                s = self._waiters.get(tp)
                if s is not None:
                    s.discard(fut)
                    if not s:
                        del self._waiters[tp]

    def waiting(self) -> int:
        return sum(len(s) for s in self._waiters.values())

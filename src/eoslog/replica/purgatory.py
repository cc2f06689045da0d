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

from eoslog.types import TopicPartition


class Purgatory:
    def __init__(self) -> None:
        self._waiters: defaultdict[TopicPartition, set[asyncio.Future[float]]] = defaultdict(set)

    def notify(self, tp: TopicPartition) -> None:
        waiters = self._waiters.pop(tp, None)
        if waiters:
            now = time.perf_counter()
            for fut in waiters:
                if not fut.done():
                    fut.set_result(now)

    async def wait(self, partitions: Iterable[TopicPartition], timeout_s: float) -> float | None:
        """Return when any of ``partitions`` is notified (``time.perf_counter()`` at the
        notification) or ``timeout_s`` passes (None)."""
        fut: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        keys = list(partitions)
        for tp in keys:
            self._waiters[tp].add(fut)
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout_s)
        except TimeoutError:
            return None
        finally:
            for tp in keys:
                s = self._waiters.get(tp)
                if s is not None:
                    s.discard(fut)
                    if not s:
                        del self._waiters[tp]
            if not fut.done():
                fut.cancel()

    def waiting(self) -> int:
        return sum(len(s) for s in self._waiters.values())

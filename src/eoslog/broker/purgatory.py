"""Fetch requests waiting for data: woken by appends, never by polling.

A waiting fetch registers one future under each partition it reads; an append to a
partition resolves the futures registered there. Kafka's DelayedFetch purgatory plays
the same role (with min_bytes re-checked by the waiter once woken).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable

TopicPartition = tuple[str, int]


class FetchPurgatory:
    def __init__(self) -> None:
        self._waiters: defaultdict[TopicPartition, set[asyncio.Future[None]]] = defaultdict(set)

    def notify(self, tp: TopicPartition) -> None:
        waiters = self._waiters.pop(tp, None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    async def wait(self, partitions: Iterable[TopicPartition], timeout_s: float) -> None:
        """Return when any of ``partitions`` gets an append or ``timeout_s`` passes."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(partitions)
        for tp in keys:
            self._waiters[tp].add(fut)
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout_s)
        except TimeoutError:
            pass
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

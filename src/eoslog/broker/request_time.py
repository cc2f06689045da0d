"""How long a request's handler itself ran on the event loop: Kafka's request-thread time, which
``request_percentage`` quotas measure (ClientRequestQuotaManager). A handler suspends while it
waits (for the ISR, a long poll, ZooKeeper) and other requests run meanwhile; ``timed`` drives
its coroutine one step at a time and adds up only the steps, so waiting costs nothing and
another request's work is not counted."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Generator
from typing import Any


class Timed:
    """Await it for the awaitable's result; ``busy_s`` is then its own running time."""

    def __init__(self, awaitable: Awaitable[Any]) -> None:
        self.awaitable = awaitable
        self.busy_s = 0.0

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self.awaitable.__await__()
        send: Any = None
        error: BaseException | None = None
        while True:
            started = time.perf_counter()
            try:
                yielded = coro.throw(error) if error is not None else coro.send(send)
            except StopIteration as done:
                self.busy_s += time.perf_counter() - started
                return done.value
            except BaseException:
                self.busy_s += time.perf_counter() - started
                raise
            self.busy_s += time.perf_counter() - started
            try:
                send, error = (yield yielded), None
            except BaseException as e:  # cancellation and the like go into the coroutine
                send, error = None, e

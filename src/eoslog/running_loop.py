"""The running event loop, found without a system call on the hot paths.

On Python 3.11 ``asyncio.get_running_loop()`` compares the loop's process id with ``getpid()``
on every call, and glibc's ``getpid`` is a system call: under 100 transactional producers it
was 6 % of the broker's event-loop time (every append marks its partition for group commit,
every acks=all write and marker waits in a purgatory). A ``LoopRef`` remembers the loop it
found, and the thread it runs in, while that loop runs. ``time_out`` ends a waiter's future
with None at its timer (one timer instead of ``asyncio.wait``'s extra future and callbacks).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any


class LoopRef:
    __slots__ = ("_loop", "_thread")

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = 0

    def get(self) -> asyncio.AbstractEventLoop:
        """The running loop of this thread; RuntimeError outside one, as ``asyncio.get_running_loop``."""
        loop = self._loop
        if loop is not None and self._thread == threading.get_ident() and loop.is_running():
            return loop
        loop = self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        return loop


def time_out(waiter: asyncio.Future[Any]) -> None:
    """A waiter's timer: its future ends with None unless something ended it first."""
    if not waiter.done():
        waiter.set_result(None)

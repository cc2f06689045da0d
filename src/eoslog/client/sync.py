"""The event loop behind the client's blocking facades (``Admin``, ``Producer``,
``Consumer``: one loop thread each).

What it owns: one asyncio event loop (uvloop when installed) running in a daemon thread
of its own — Java's ``kafka-producer-network-thread`` / ``kafka-admin-client-thread`` —
and the hop from a calling thread onto it: ``call(coro)`` runs a coroutine there and
waits for its result. What it must never do: know what the coroutines do. A blocking call
made from the loop's own thread (a callback) would wait for itself forever, so it raises
IllegalStateError instead.

Example::

    loop = LoopThread("eoslog-admin-client-thread", own_thread_error="...")
    try:
        topics = loop.call(aio_admin.list_topics())
    finally:
        loop.stop()
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Self, TypeVar

from eoslog.client.errors import IllegalStateError

T = TypeVar("T")


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop where it is installed, asyncio's otherwise."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency where it exists
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class LoopThread:
    """``LoopThread(name)`` starts the thread; ``stop()`` ends it and closes the loop."""

    def __init__(self, name: str, *, own_thread_error: str = "a blocking call from the client's own thread "
                 "(a callback) would deadlock") -> None:
        self.loop = new_event_loop()
        self.own_thread_error = own_thread_error
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def in_loop_thread(self) -> bool:
        return threading.get_ident() == self.thread.ident

    @property
    def closed(self) -> bool:
        return self.loop.is_closed()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop; a concurrent.futures.Future of its result."""
        if self.in_loop_thread():
            coro.close()
            raise IllegalStateError(self.own_thread_error)
        if self.loop.is_closed():
            coro.close()
            raise IllegalStateError("the client is closed")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and wait (at most ``timeout`` seconds) for its result."""
        return self.submit(coro).result(timeout)

    def run(self, fn: Callable[[], T]) -> T:
        """Run a plain function on the loop (to touch loop-owned state) and return its result."""
        async def call() -> T:
            return fn()

        return self.call(call())

    def stop(self) -> None:
        """Stop the loop, join its thread and close the loop (from any thread)."""
        if self.loop.is_closed():
            return
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
        if self.thread.is_alive() and not self.in_loop_thread():
            self.thread.join(10)
        if not self.loop.is_running():
            self.loop.close()


class BlockingFacade:
    """What ``Admin``, ``Producer`` and ``Consumer`` share: their loop thread, started
    together with the asyncio client (and stopped again if that start fails), the hop
    onto it, a close that runs once, and the ``with`` protocol."""

    _loop_thread: LoopThread

    def _start_loop(self, name: str, own_thread_error: str, start: Coroutine[Any, Any, None]) -> None:
        self._loop_thread = LoopThread(name, own_thread_error=own_thread_error)
        try:
            self._loop_thread.call(start)
        except BaseException:
            self._loop_thread.stop()
            raise

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return self._loop_thread.call(coro, timeout)

    def _run(self, fn: Callable[[], T]) -> T:
        return self._loop_thread.run(fn)

    def _close_once(self, close: Callable[[], object]) -> None:
        """Run ``close`` (which closes the asyncio client) unless already closed, then stop the loop."""
        if self._loop_thread.closed:
            return
        try:
            close()
        finally:
            self._loop_thread.stop()

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


__all__ = ["BlockingFacade", "LoopThread", "new_event_loop"]

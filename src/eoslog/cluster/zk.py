"""kazoo, bridged to the broker's asyncio event loop.

kazoo runs its own threads. Every call here is kazoo's ``*_async`` form whose result is
handed to the event loop (``call_soon_threadsafe``), so the broker awaits ZooKeeper without
blocking its loop and without a thread pool; watch callbacks and session-state changes are
handed over the same way and run on the loop, in the order ZooKeeper delivered them.
Only this module touches kazoo's client API; the recipes used (``Election``) take
``ZkSession.client``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError, RolledBackError

log = logging.getLogger(__name__)


class SessionState(Enum):
    """kazoo's connection states: SUSPENDED may recover the same session; after LOST the
    session's ephemeral znodes and watches are gone and must be made again."""

    CONNECTED = "CONNECTED"
    SUSPENDED = "SUSPENDED"
    LOST = "LOST"


@dataclass(frozen=True, slots=True)
class Znode:
    data: bytes
    version: int  # the data version: the condition of a conditional set
    czxid: int  # the creating transaction's id (a registration's broker epoch)
    ephemeral_owner: int
    ctime_ms: int = 0  # when it was created, by the ZooKeeper server's clock


class TransactionFailed(Exception):
    """A multi-op transaction was refused; ``cause`` is the first operation's own error
    (``BadVersionError`` for a failed check or conditional set, ``NodeExistsError`` ...)."""

    def __init__(self, index: int, cause: BaseException) -> None:
        super().__init__(f"operation {index} failed: {type(cause).__name__}")
        self.index = index
        self.cause = cause


@dataclass(frozen=True, slots=True)
class Op:
    """One operation of a transaction: ``check`` (version), ``create``, ``set``, ``delete``."""

    kind: str
    path: str
    data: bytes = b""
    version: int = -1
    ephemeral: bool = False


def _znode(data: bytes | None, stat: Any) -> Znode:
    return Znode(data or b"", int(stat.version), int(stat.czxid), int(stat.ephemeralOwner), int(stat.ctime))


class ZkSession:
    def __init__(self, hosts: str, session_timeout_ms: int, connection_timeout_ms: int) -> None:
        self.hosts = hosts
        self.connection_timeout_s = connection_timeout_ms / 1000
        # kazoo retries a dropped connection forever; the session timeout is what ZooKeeper
        # waits before it expires the session (and deletes its ephemeral znodes).
        self.client = KazooClient(hosts=hosts, timeout=session_timeout_ms / 1000,
                                  connection_retry={"max_tries": -1, "max_delay": 1.0})
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None, "ZkSession.start first"
        return self._loop

    @property
    def session_id(self) -> int:
        return int(self.client.client_id[0]) if self.client.client_id else 0

    async def start(self, on_state: Callable[[SessionState], None] | None = None) -> None:
        """Connect (within ``zookeeper.connection.timeout.ms``); ``on_state`` is then called on
        the loop at each change of the session's state."""
        self._loop = asyncio.get_running_loop()
        if on_state is not None:
            def listener(state: str) -> None:
                if not self._closed:
                    self.loop.call_soon_threadsafe(on_state, SessionState(state))
            self.client.add_listener(listener)
        # start() blocks until connected: run it off the loop.
        await asyncio.to_thread(self.client.start, self.connection_timeout_s)

    async def close(self) -> None:
        self._closed = True
        await asyncio.to_thread(self._stop_and_close)

    def _stop_and_close(self) -> None:
        self.client.stop()
        self.client.close()

    def _await(self, result: Any) -> asyncio.Future[Any]:
        loop = self.loop
        future: asyncio.Future[Any] = loop.create_future()

        def settle(outcome: Any) -> None:
            if future.done():
                return
            if outcome.successful():
                future.set_result(outcome.value)
            else:
                future.set_exception(outcome.exception)

        result.rawlink(lambda outcome: loop.call_soon_threadsafe(settle, outcome))
        return future

    # -- reads ----------------------------------------------------------------------------

    async def get(self, path: str) -> Znode | None:
        try:
            data, stat = await self._await(self.client.get_async(path))
        except NoNodeError:
            return None
        return _znode(data, stat)

    async def children(self, path: str) -> list[str]:
        try:
            return sorted(await self._await(self.client.get_children_async(path)))
        except NoNodeError:
            return []

    # -- writes ---------------------------------------------------------------------------

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
                     makepath: bool = False, sequence: bool = False) -> None:
        """Raises kazoo's NodeExistsError when ``path`` exists."""
        await self._await(self.client.create_async(path, data, ephemeral=ephemeral, makepath=makepath,
                                                   sequence=sequence))

    async def ensure_path(self, path: str) -> None:
        with contextlib.suppress(NodeExistsError):
            await self.create(path, makepath=True)

    async def set(self, path: str, data: bytes, version: int) -> int:
        """Conditional set (``version`` -1: unconditional); the new version. Raises kazoo's
        BadVersionError when the znode moved on, NoNodeError when it is gone."""
        stat = await self._await(self.client.set_async(path, data, version))
        return int(stat.version)

    async def delete(self, path: str, version: int = -1) -> bool:
        """False when there was nothing to delete."""
        try:
            await self._await(self.client.delete_async(path, version))
        except NoNodeError:
            return False
        return True

    async def commit(self, ops: Sequence[Op]) -> list[Any]:
        """All of ``ops`` or none of them (a ZooKeeper multi). Raises TransactionFailed."""
        tx = self.client.transaction()
        for op in ops:
            if op.kind == "check":
                tx.check(op.path, op.version)
            elif op.kind == "create":
                tx.create(op.path, op.data, ephemeral=op.ephemeral)
            elif op.kind == "set":
                tx.set_data(op.path, op.data, op.version)
            elif op.kind == "delete":
                tx.delete(op.path, op.version)
            else:
                raise ValueError(f"unknown transaction operation {op.kind!r}")
        results: list[Any] = list(await self._await(tx.commit_async()))
        for index, result in enumerate(results):
            if isinstance(result, Exception) and not isinstance(result, RolledBackError):
                raise TransactionFailed(index, result)
        return results

    # -- watches --------------------------------------------------------------------------

    async def watch_data(self, path: str, callback: Callable[[str, Znode | None], None],
                         until: Callable[[], bool] | None = None) -> None:
        """``callback(path, znode or None)`` on the loop now and at every change, for as long
        as the session lives (kazoo sets the watch again after a new session) and ``until()``
        holds (it is asked on kazoo's thread). kazoo reads the znode in the constructor,
        retrying until it can: that runs off the loop."""
        def on_change(data: bytes | None, stat: Any) -> bool:
            if self._closed or (until is not None and not until()):
                return False  # kazoo drops the watch
            node = None if stat is None else _znode(data, stat)
            self.loop.call_soon_threadsafe(callback, path, node)
            return True

        await asyncio.to_thread(self.client.DataWatch, path, on_change)

    async def watch_children(self, path: str, callback: Callable[[str, list[str]], None]) -> None:
        """``callback(path, sorted children)`` on the loop now and at every change. ``path``
        must exist."""
        def on_change(children: list[str]) -> bool:
            if self._closed:
                return False
            self.loop.call_soon_threadsafe(callback, path, sorted(children))
            return True

        await asyncio.to_thread(self.client.ChildrenWatch, path, on_change)

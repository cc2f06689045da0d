"""One client connection: an asyncio.Protocol that frames requests and answers them in order.

Kafka answers the requests of one connection strictly in the order they arrived and
processes them one at a time; so does this. ``data_received`` only frames bytes into a
queue; one worker task per connection dispatches the queue. Reading pauses while too
many requests wait (back-pressure on a client that pipelines faster than we serve), and
the worker waits for the transport to drain when the peer reads slowly.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections import deque
from typing import cast

from eoslog.broker.dispatcher import CloseConnection, Dispatcher

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
MAX_QUEUED_REQUESTS = 16


class FlowControl:
    """Writer-side back-pressure, as in uvicorn: wait while the transport is paused."""

    def __init__(self) -> None:
        self._writable = asyncio.Event()
        self._writable.set()

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    async def drain(self) -> None:
        await self._writable.wait()


class KafkaProtocol(asyncio.Protocol):
    def __init__(self, dispatcher: Dispatcher, max_request_bytes: int,
                 connections: set[KafkaProtocol]) -> None:
        # Shared server state.
        self.dispatcher = dispatcher
        self.max_request_bytes = max_request_bytes
        self.connections = connections
        # Per-connection state.
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.principal = dispatcher.authorizer.authenticate("?")
        self.flow = FlowControl()
        self._buffer = bytearray()
        self._requests: deque[bytes] = deque()
        self._has_requests = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._reading_paused = False
        self._closed = False
        self.busy = False  # a request is being processed (used by graceful shutdown)

    # -- asyncio.Protocol callbacks ---------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCPTransport is not an asyncio.Transport subclass; it has the same API.
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.principal = self.dispatcher.authorizer.authenticate(self.peer)
        self.connections.add(self)
        self._worker = asyncio.get_running_loop().create_task(self._run())

    def data_received(self, data: bytes) -> None:
        buf = self._buffer
        buf += data
        pos = 0
        while len(buf) - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if size < 0 or size > self.max_request_bytes:
                log.warning(
                    "closing connection from %s: request size %d outside [0, socket.request.max.bytes=%d]",
                    self.peer, size, self.max_request_bytes,
                )
                self.close()
                return
            if len(buf) - pos - 4 < size:
                break
            self._requests.append(bytes(buf[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        if pos:
            del buf[:pos]
            self._has_requests.set()
            if len(self._requests) >= MAX_QUEUED_REQUESTS and not self._reading_paused:
                self._reading_paused = True
                assert self.transport is not None
                self.transport.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self.connections.discard(self)
        self.flow.resume_writing()
        if self._worker is not None and not self.busy:
            self._worker.cancel()
        self._has_requests.set()

    def pause_writing(self) -> None:
        self.flow.pause_writing()

    def resume_writing(self) -> None:
        self.flow.resume_writing()

    # -- request processing --------------------------------------------------------------

    async def _run(self) -> None:
        while not self._closed:
            await self._has_requests.wait()
            self._has_requests.clear()
            while self._requests and not self._closed:
                frame = self._requests.popleft()
                if self._reading_paused and len(self._requests) < MAX_QUEUED_REQUESTS // 2:
                    self._reading_paused = False
                    assert self.transport is not None
                    self.transport.resume_reading()
                self.busy = True
                try:
                    response = await self.dispatcher.handle(frame, self.principal, self.peer)
                except CloseConnection as e:
                    log.warning("closing connection from %s: %s", self.peer, e)
                    self.close()
                    return
                except Exception:
                    log.exception("error handling a request from %s; closing its connection", self.peer)
                    self.close()
                    return
                finally:
                    self.busy = False
                if response is not None and not self._closed:
                    assert self.transport is not None
                    self.transport.write(response)
                    await self.flow.drain()

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
        self._closed = True
        self._has_requests.set()

    @property
    def idle(self) -> bool:
        return not self.busy and not self._requests

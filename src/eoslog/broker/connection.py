"""One client connection: an asyncio.BufferedProtocol that frames requests and answers them in order.

Kafka answers the requests of one connection strictly in the order they arrived and
processes them one at a time; so does this. The read side only frames bytes into a
queue; one worker task per connection dispatches the queue. Reading pauses while too
many requests wait (back-pressure on a client that pipelines faster than we serve), and
the worker waits for the transport to drain when the peer reads slowly.

Reads avoid copies on the produce path: small frames collect in one receive buffer, and
a frame too large for it is read by the event loop straight into a buffer of its own
(``get_buffer``), which is then handed to the dispatcher as a read-only view. Responses
go out with ``writelines`` so fetched record sets are not copied into the response.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections import deque
from typing import cast

from eoslog.broker.dispatcher import Dispatcher
from eoslog.broker.handlers.base import CloseConnection
from eoslog.broker.listeners import Listener, SecurityProtocol
from eoslog.broker.security import Session
from eoslog.protocol.codec import Frame

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
MAX_QUEUED_REQUESTS = 16
RECEIVE_BUFFER_BYTES = 256 * 1024


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


class KafkaProtocol(asyncio.BufferedProtocol):
    def __init__(self, dispatcher: Dispatcher, max_request_bytes: int,
                 connections: set[KafkaProtocol], listener: Listener | None = None) -> None:
        # Shared server state.
        self.dispatcher = dispatcher
        self.listener = listener or Listener("PLAINTEXT", SecurityProtocol.PLAINTEXT, "", 0)
        self.max_request_bytes = max_request_bytes
        self.connections = connections
        # Per-connection state.
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.session: Session | None = None  # set once connected (after the TLS handshake)
        self.flow = FlowControl()
        self._recv = bytearray(RECEIVE_BUFFER_BYTES)  # small frames, compacted after parsing
        self._recv_len = 0
        self._frame: bytearray | None = None  # a large frame being read in place
        self._frame_filled = 0
        self._requests: deque[Frame] = deque()
        self._has_requests = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._reading_paused = False
        self._closed = False
        self.busy = False  # a request is being processed (used by graceful shutdown)
        self.last_active = time.monotonic()  # last bytes read or response written

    # -- asyncio.Protocol callbacks ---------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCPTransport is not an asyncio.Transport subclass; it has the same API.
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        ssl_object = transport.get_extra_info("ssl_object")
        self.session = self.dispatcher.state.security.new_session(
            self.listener, peer[0] if peer else "?", ssl_object)
        self.connections.add(self)
        self._worker = asyncio.get_running_loop().create_task(self._run())

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is not None:
            return memoryview(self._frame)[self._frame_filled :]
        return memoryview(self._recv)[self._recv_len :]

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active = time.monotonic()
        if self._frame is not None:
            self._frame_filled += nbytes
            if self._frame_filled == len(self._frame):
                self._enqueue(memoryview(self._frame).toreadonly())
                self._frame = None
            return
        self._recv_len += nbytes
        self._parse_received()

    def data_received(self, data: bytes) -> None:
        """The plain-Protocol entry point (used by tests): feeds ``data`` through the
        same buffers the event loop fills."""
        view = memoryview(data)
        while view:
            target = self.get_buffer(len(view))
            n = min(len(target), len(view))
            target[:n] = view[:n]
            view = view[n:]
            self.buffer_updated(n)
            if self._closed:
                return

    def _parse_received(self) -> None:
        buf, end, pos = self._recv, self._recv_len, 0
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if size < 0 or size > self.max_request_bytes:
                log.warning(
                    "closing connection from %s: request size %d outside [0, socket.request.max.bytes=%d]",
                    self.peer, size, self.max_request_bytes,
                )
                self.close()
                return
            available = end - pos - 4
            if available >= size:
                self._enqueue(bytes(memoryview(buf)[pos + 4 : pos + 4 + size]))
                pos += 4 + size
                continue
            if size + 4 > len(buf):
                # Too large for the receive buffer: read the rest straight into its own.
                frame = bytearray(size)
                frame[:available] = buf[pos + 4 : end]
                self._frame, self._frame_filled = frame, available
                pos = end
            break
        if pos:
            remaining = end - pos
            buf[:remaining] = buf[pos:end]
            self._recv_len = remaining

    def _enqueue(self, frame: Frame) -> None:
        self._requests.append(frame)
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
                    assert self.session is not None
                    response = await self.dispatcher.handle(frame, self.session, self.peer)
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
                    self.transport.writelines(response)
                    await self.flow.drain()
                self.last_active = time.monotonic()
                if self.session is not None and self.session.close_after_response:
                    self.close()  # a failed authentication: answered, then disconnected
                    return

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
        self._closed = True
        self._has_requests.set()

    @property
    def idle(self) -> bool:
        return not self.busy and not self._requests

    def close_if_idle(self, now: float, max_idle_s: float) -> bool:
        """Kafka's connections.max.idle.ms: close a connection that has neither read nor
        written for longer than that. Unlike Kafka, a connection whose request is still
        being answered (a JoinGroup waiting for its rebalance) is never idle."""
        if self._closed or not self.idle or now - self.last_active <= max_idle_s:
            return False
        log.debug("closing connection from %s: idle for more than connections.max.idle.ms", self.peer)
        self.close()
        return True

"""One client connection: an asyncio.BufferedProtocol that frames requests and answers them in order.

Kafka answers the requests of one connection strictly in the order they arrived; so does
this. The read side only frames bytes into a queue; one worker task per connection
processes the queue one request at a time. Reading pauses while too many requests wait
(back-pressure on a client that pipelines faster than we serve), and the worker waits for
the transport to drain when the peer reads slowly.

One exception to one-at-a-time, unlike Kafka (which mutes a channel until its response is
sent): a Produce whose appends are done and that only waits for its acks (the group-commit
fsync round, the in-sync replicas) detaches (``RequestContext.detach``). The worker goes on
with the next requests while it waits; its response, and every later one, is written once
it is ready, in request order (``_unanswered``). The next Produce's appends still happen
after the earlier ones', so the log's order and every sequence check are unchanged, and a
client's up to 5 in-flight requests share one fsync round or replication round-trip instead
of paying one each. Any other request waits until every earlier one is answered, as before;
at most ``MAX_AWAITING_ACKS`` produces wait per connection (then the worker, and soon the
reading, pause).

Reads avoid copies on the produce path: small frames collect in one receive buffer, and
a frame too large for it is read by the event loop straight into a buffer of its own
(``get_buffer``), which is then handed to the dispatcher as a read-only view. Responses
go out with ``writelines``; a Fetch's records, slices of segment files, go from the page
cache to a plaintext socket with ``sendfile`` (``_write``), as Kafka sends them. On a TLS
connection a response goes to the transport in pieces of at most ``TLS_WRITE_BYTES``
(``_tls_pieces``), its small buffers joined: the TLS transport encrypts all it is handed into
one memory buffer before sending any of it, which for a whole Fetch response of megabytes is
grown by copying, again and again (bench/README.md, "Security": the encrypting side's CPU per
GB halved), and a record per tiny buffer costs a cipher set-up each.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
import threading
import time
import types
from collections import deque
from collections.abc import Callable, Coroutine, Generator
from typing import Any, cast

from eoslog.broker.connection_quotas import ConnectionQuotas
from eoslog.broker.dispatcher import Dispatcher
from eoslog.broker.handlers.base import CloseConnection
from eoslog.protocol.codec import Buffer, Chunk, Frame, read_chunks
from eoslog.security.listeners import Listener, SecurityProtocol
from eoslog.security.session import Session

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
MAX_QUEUED_REQUESTS = 16
MAX_AWAITING_ACKS = 16  # detached produces of one connection not answered yet
RECEIVE_BUFFER_BYTES = 256 * 1024  # one per thread, shared by its connections (_receive_buffer)
TLS_WRITE_BYTES = 256 * 1024  # most handed to a TLS transport at once (_tls_pieces)
TLS_JOIN_BYTES = 16 * 1024  # buffers smaller than a TLS record's payload are joined into one record
_BYTES = (bytes, bytearray, memoryview)


_local = threading.local()


def _receive_buffer() -> bytearray:
    """The buffer the event loop of this thread reads every connection's small frames into.
    A read fills it and is parsed at once (``get_buffer`` → ``buffer_updated``, nothing in
    between), and parsing copies each frame out: so one buffer serves every connection, and an
    idle connection holds none (5,000 idle connections once held 256 KiB each)."""
    buf: bytearray | None = getattr(_local, "buffer", None)
    if buf is None:
        buf = _local.buffer = bytearray(RECEIVE_BUFFER_BYTES)
    return buf


class _Due:
    """A response due, in request order: ready (``frames``; None: nothing to write; ``closes``:
    the connection closes in its place) or still waiting (a detached produce's ``task``)."""

    __slots__ = ("closes", "frames", "ready", "task")

    def __init__(self, frames: list[Buffer] | None = None, *, ready: bool = True) -> None:
        self.frames = frames
        self.ready = ready
        self.closes = False
        self.task: asyncio.Task[None] | None = None


_NOT_STARTED = object()


def _never() -> bool:
    return False


def _send_now(fd: int, chunks: list[Chunk]) -> list[Buffer]:
    """Write ``chunks`` to the non-blocking socket ``fd`` in order, bytes with ``writev`` and
    file regions with ``sendfile``, until the socket takes no more: the rest, read."""
    i, n = 0, len(chunks)
    while i < n:
        chunk = chunks[i]
        if isinstance(chunk, _BYTES):
            j = i + 1
            while j < n and isinstance(chunks[j], _BYTES):
                j += 1
            run = cast("list[Buffer]", chunks[i:j])
            try:
                sent = os.writev(fd, run)
            except BlockingIOError:
                sent = 0
            for k, buf in enumerate(run):
                if sent < len(buf):
                    return [memoryview(buf)[sent:], *run[k + 1 :], *read_chunks(chunks[j:])]
                sent -= len(buf)
            i = j
            continue
        sent = 0
        while sent < chunk.size:
            try:
                count = os.sendfile(fd, chunk.fd, chunk.position + sent, chunk.size - sent)
            except BlockingIOError:
                break
            if count == 0:  # the file is shorter than the frame says: never send a short frame
                raise OSError(f"segment file ended {chunk.size - sent} bytes early")
            sent += count
        if sent < chunk.size:
            return [chunk.read(sent), *read_chunks(chunks[i + 1 :])]
        i += 1
    return []


@types.coroutine
def _run_until(coro: Coroutine[Any, Any, Any], stop: Callable[[], bool],
               awaiting: object = _NOT_STARTED) -> Generator[Any, Any, tuple[bool, Any]]:
    """``await coro``, stepped by hand as ``yield from`` would (each future it awaits goes to the
    running task, each outcome is sent or thrown back in), until it returns: (True, its result);
    or, at a suspension once ``stop()`` holds, leave it suspended there: (False, what it awaits).
    Such a coroutine is resumed by passing that as ``awaiting`` (it is waited for first)."""
    sent: Any = None
    thrown: BaseException | None = None
    while True:
        if awaiting is not _NOT_STARTED:
            try:
                sent = yield awaiting
            except BaseException as e:  # cancelled, or closed: the coroutine is told
                thrown = e
        try:
            awaiting = coro.send(sent) if thrown is None else coro.throw(thrown)
        except StopIteration as returned:
            return True, returned.value
        sent = thrown = None
        if stop():
            return False, awaiting


def _tls_pieces(chunks: list[Chunk]) -> Generator[Buffer, None, None]:
    """A response's bytes for a TLS transport, in order: runs of small buffers joined (up to a
    TLS record's payload), large ones and file regions in slices of at most TLS_WRITE_BYTES,
    each region read as its slices are asked for."""
    small: list[Buffer] = []
    small_bytes = 0
    for chunk in chunks:
        size = len(chunk)
        if isinstance(chunk, _BYTES) and size < TLS_JOIN_BYTES:
            small.append(chunk)
            small_bytes += size
            if small_bytes >= TLS_JOIN_BYTES:
                yield b"".join(small)
                small, small_bytes = [], 0
            continue
        if small:
            yield b"".join(small)
            small, small_bytes = [], 0
        if isinstance(chunk, _BYTES):
            view = memoryview(chunk).cast("B")
            for start in range(0, len(view), TLS_WRITE_BYTES):
                yield view[start : start + TLS_WRITE_BYTES]
            continue
        for start in range(0, size, TLS_WRITE_BYTES):
            yield chunk.read(start, min(TLS_WRITE_BYTES, size - start))
    if small:
        yield b"".join(small)


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
                 connections: set[KafkaProtocol], listener: Listener | None = None,
                 quotas: ConnectionQuotas | None = None) -> None:
        # Shared server state.
        self.dispatcher = dispatcher
        self.listener = listener or Listener("PLAINTEXT", SecurityProtocol.PLAINTEXT, "", 0)
        self.max_request_bytes = max_request_bytes
        self.connections = connections
        self.quotas = quotas  # counts this connection from its accept (acceptor.py); None: not counted
        self.listener_name = self.listener.name
        # Per-connection state.
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.peer_host = "?"  # the address connection quotas count it under (set by the acceptor)
        self.session: Session | None = None  # set once connected (after the TLS handshake)
        self.flow = FlowControl()
        self._partial = b""  # the start of a frame the last read ended in (waits for the rest)
        self._frame: bytearray | None = None  # a large frame being read in place
        self._frame_filled = 0
        self._requests: deque[Frame] = deque()
        self._has_requests = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._reading_paused = False
        self._muted_until = 0.0  # time.monotonic(): a quota throttle mutes the connection until then
        self._closed = False
        self._closed_by_peer = False
        self._unanswered: deque[_Due] = deque()  # behind a detached produce, in request order
        self._answered = asyncio.Event()  # set when a response left _unanswered, or on close
        self.busy = False  # a request is being processed (used by graceful shutdown)
        self.last_active = time.monotonic()  # last bytes read or response written
        self._socket_fd: int | None = None  # plaintext: responses' file regions go out with sendfile
        self._tls = False  # responses go out in pieces (_tls_pieces)

    # -- asyncio.Protocol callbacks ---------------------------------------------------

    @property
    def established(self) -> bool:
        """Connected (past a TLS handshake) and not closed."""
        return self.transport is not None and not self._closed

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCPTransport is not an asyncio.Transport subclass; it has the same API.
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.peer_host = peer[0] if peer else self.peer_host
        ssl_object = transport.get_extra_info("ssl_object")
        self.session = self.dispatcher.state.security.new_session(self.listener, self.peer_host, ssl_object)
        sock = transport.get_extra_info("socket")
        if sock is not None and ssl_object is None and not self.listener.protocol.uses_tls:
            self._socket_fd = sock.fileno()
        self._tls = ssl_object is not None
        self.connections.add(self)
        self.last_active = time.monotonic()
        self._worker = asyncio.get_running_loop().create_task(self._run())

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is not None:
            return memoryview(self._frame)[self._frame_filled :]
        # The thread's shared buffer, after the partial frame this connection holds: the event
        # loop reads into it and calls buffer_updated before it reads for anyone else.
        buf = _receive_buffer()
        held = len(self._partial)
        if held:
            buf[:held] = self._partial
        return memoryview(buf)[held:]

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active = time.monotonic()
        if self._frame is not None:
            self._frame_filled += nbytes
            if self._frame_filled == len(self._frame):
                self._enqueue(memoryview(self._frame).toreadonly())
                self._frame = None
            return
        self._parse_received(len(self._partial) + nbytes)

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

    def _parse_received(self, end: int) -> None:
        """Frame the ``end`` bytes at the start of the shared buffer; keep what is left of an
        unfinished frame (``_partial``), or start reading a large one into its own buffer."""
        buf, pos = _receive_buffer(), 0
        self._partial = b""
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
                frame[:available] = memoryview(buf)[pos + 4 : end]
                self._frame, self._frame_filled = frame, available
                pos = end
            break
        if pos < end:
            self._partial = bytes(memoryview(buf)[pos:end])

    def _enqueue(self, frame: Frame) -> None:
        self._requests.append(frame)
        self._has_requests.set()
        if len(self._requests) >= MAX_QUEUED_REQUESTS and not self._reading_paused:
            self._reading_paused = True
            assert self.transport is not None
            self.transport.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed_by_peer = not self._closed  # not after our own close()
        if not self._closed_by_peer:
            self._requests.clear()
        self._closed = True
        self.connections.discard(self)
        if self.quotas is not None:
            self.quotas.release(self)
        if self.session is not None:
            # Share sessions end with the connection that opened them (their records are released).
            self.dispatcher.state.share_partitions.disconnected(self.session)
        self.flow.resume_writing()
        if self._worker is not None and not self.busy and not self._requests:
            self._worker.cancel()
        self._has_requests.set()
        self._answered.set()
        for due in self._unanswered:
            if due.task is not None:
                due.task.cancel()  # detached: only a wait is left, nothing half done

    def pause_writing(self) -> None:
        self.flow.pause_writing()

    def resume_writing(self) -> None:
        self.flow.resume_writing()

    # -- request processing --------------------------------------------------------------

    async def _run(self) -> None:
        await self._serve_until_closed()
        await self._handle_sent_before_close()

    async def _serve_until_closed(self) -> None:
        while not self._closed:
            await self._has_requests.wait()
            self._has_requests.clear()
            while self._requests and not self._closed:
                await self._while_muted()
                frame = self._requests.popleft()
                if self._reading_paused and len(self._requests) < MAX_QUEUED_REQUESTS // 2:
                    self._reading_paused = False
                    assert self.transport is not None
                    self.transport.resume_reading()
                if not await self._serve(frame):
                    return

    async def _handle_sent_before_close(self) -> None:
        """The client closed its side after sending these: Kafka still processes every request it
        reads from a closed peer's socket (its answer goes nowhere), and an acks=0 producer that
        flushes and closes relies on it, as nothing else tells it whether its records arrived."""
        while self._requests and self._closed_by_peer:
            frame = self._requests.popleft()
            self.busy = True
            try:
                await self._handle(frame)
            except Exception as e:  # nobody is left to answer; the next one still runs
                log.debug("a request from %s, which has disconnected, failed: %r", self.peer, e)
            finally:
                self.busy = False

    async def _serve(self, frame: Frame) -> bool:
        """Process one request, up to its response or its detaching; False: the connection closes."""
        pipelined = self.dispatcher.pipelined(frame)
        if not pipelined:
            await self._until_due(0)  # after every earlier request is answered, as without pipelining
            if self._closed:
                return False
        self.busy = True
        try:
            due = await (self._detachable(frame) if pipelined else self._handle(frame))
        except CloseConnection as e:
            log.warning("closing connection from %s: %s", self.peer, e)
            return await self._close_when_answered()
        except Exception:
            log.exception("error handling a request from %s; closing its connection", self.peer)
            return await self._close_when_answered()
        finally:
            self.busy = False
        if isinstance(due, _Due):
            self._unanswered.append(due)
            if self._closed and due.task is not None:
                due.task.cancel()
            await self._until_due(MAX_AWAITING_ACKS - 1)
            return not self._closed
        if self._unanswered:
            if due is not None:
                self._unanswered.append(_Due(read_chunks(due)))  # ready, but behind a detached produce
                self._write_answered()
        elif due is not None and not self._closed:
            self._write(due)
            await self.flow.drain()
        self.last_active = time.monotonic()
        if self.session is not None and self.session.close_after_response:
            self.close()  # a failed authentication: answered, then disconnected
            return False
        return not self._closed

    async def _handle(self, frame: Frame, detach: Callable[[], None] | None = None) -> list[Chunk] | None:
        assert self.session is not None
        return await self.dispatcher.handle(frame, self.session, self.peer, detach, self._mute)

    def _mute(self, ms: int) -> None:
        """A quota's throttle (KIP-219): read and process nothing more for ``ms``, as Kafka
        mutes the channel once the response is sent."""
        self._muted_until = max(self._muted_until, time.monotonic() + ms / 1000)

    async def _while_muted(self) -> None:
        wait = self._muted_until - time.monotonic()
        if wait <= 0 or self._closed:
            return
        assert self.transport is not None
        self.transport.pause_reading()
        try:
            await asyncio.sleep(wait)
        finally:
            if not self._reading_paused and not self._closed:
                self.transport.resume_reading()

    async def _detachable(self, frame: Frame) -> _Due | list[Chunk] | None:
        """Run a Produce in the worker like any request until it is answered (its response) or
        suspends after detaching (its ``_Due``): only then does the rest of it become a task of
        its own, which writes the response once it and every earlier one are ready. Most
        produces never detach (acks=0/1; librdkafka's idempotent producer keeps one request per
        partition out), and a task per request cost ~15 % of a small produce's CPU."""
        detached = False

        def detach() -> None:
            nonlocal detached
            detached = True

        handler = self._handle(frame, detach)
        answered, outcome = await _run_until(handler, lambda: detached)
        if answered:
            return cast("list[Chunk] | None", outcome)
        due = _Due(ready=False)
        started = False

        async def answer() -> None:
            nonlocal started
            started = True
            _, frames = await _run_until(handler, _never, outcome)
            due.frames = None if frames is None else read_chunks(frames)
            due.ready = True
            self._write_answered()  # now, not a loop iteration later as from a done callback

        due.task = task = asyncio.get_running_loop().create_task(answer())
        task.add_done_callback(lambda t: self._detached_done(t, due))
        while not started:  # a task cancelled before its first step would leave the handler suspended
            await asyncio.sleep(0)
        return due

    def _write(self, chunks: list[Chunk]) -> None:
        """Write a response now. Its file regions (a Fetch's records) go from the page cache to
        the socket with ``sendfile`` when the connection is plaintext and the transport holds
        nothing unsent (so these bytes cannot overtake earlier ones); what the socket does not
        take at once, and every region on a TLS connection, is read and left to the transport.
        Either way the regions are read or sent before this returns, as they must be."""
        assert self.transport is not None
        if self._tls:
            try:
                for piece in _tls_pieces(chunks):
                    self.transport.write(piece)
            except OSError as e:  # a segment could not be read whole: the frame is cut, so is the connection
                log.warning("closing connection from %s: %s", self.peer, e)
                self.close()
            return
        if all(isinstance(c, _BYTES) for c in chunks):
            self.transport.writelines(cast("list[Buffer]", chunks))
            return
        fd = self._socket_fd
        if fd is None or self.transport.get_write_buffer_size() or self.transport.is_closing():
            self.transport.writelines(read_chunks(chunks))
            return
        try:
            rest = _send_now(fd, chunks)
        except OSError as e:  # the peer is gone: the transport will see it too
            log.debug("closing connection from %s: %s", self.peer, e)
            self.close()
            return
        if rest:
            self.transport.writelines(rest)

    def _write_answered(self) -> None:
        """Write the ready responses at the head of ``_unanswered``, in request order."""
        while self._unanswered and self._unanswered[0].ready:
            due = self._unanswered.popleft()
            self._answered.set()
            if due.closes:
                self.close()
            if due.frames is not None and not self._closed:
                self._write(cast("list[Chunk]", due.frames))
                self.last_active = time.monotonic()

    def _detached_done(self, task: asyncio.Task[None], due: _Due) -> None:
        """A detached produce's task ended: if it failed or was cancelled, nothing is written in
        its place, and a failure closes the connection there (after the earlier answers)."""
        error = None if task.cancelled() else task.exception()
        if due.ready and error is None:
            return
        due.ready = True
        if error is not None and not self._closed:
            if isinstance(error, CloseConnection):
                log.warning("closing connection from %s: %s", self.peer, error)
            else:
                log.error("error handling a request from %s; closing its connection", self.peer, exc_info=error)
            due.closes = True
        self._write_answered()

    async def _until_due(self, most: int) -> None:
        """Until at most ``most`` responses are still due (or the connection closed)."""
        while len(self._unanswered) > most and not self._closed:
            self._answered.clear()
            await self._answered.wait()

    async def _close_when_answered(self) -> bool:
        """Close after the responses due before the failed request (as Kafka, whose earlier
        responses have left before it reads the next request)."""
        await self._until_due(0)
        self.close()
        return False

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
        self._closed = True
        self._has_requests.set()
        self._answered.set()

    @property
    def idle(self) -> bool:
        return not self.busy and not self._requests and not self._unanswered

    def close_if_idle(self, now: float, max_idle_s: float) -> bool:
        """Kafka's connections.max.idle.ms: close a connection that has neither read nor
        written for longer than that. Unlike Kafka, a connection whose request is still
        being answered (a JoinGroup waiting for its rebalance, a produce waiting for its
        acks) is never idle."""
        if self._closed or now - self.last_active <= max_idle_s or not self.idle:
            return False
        log.debug("closing connection from %s: idle for more than connections.max.idle.ms", self.peer)
        self.close()
        return True

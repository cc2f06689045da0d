"""A pipelined asyncio connection to one broker.

What it owns: the transport, framing, correlation ids, the table of requests in flight
(correlation id → response handler), their ``request.timeout.ms`` deadline, and the
version negotiation done once when the connection opens (``eoslog.client.versions``, the
same logic the blocking ``BrokerConnection`` runs). Several requests may be in flight;
Kafka answers them in order, but the table is keyed by correlation id all the same.

What it must never do: retry, interpret error codes, or limit how many requests are in
flight — the caller (``AioClient``, the producer's sender) decides all that. When the
connection breaks or a request times out, every request in flight fails with
KafkaConnectionError / KafkaTimeoutError and the connection is closed, as Java's
NetworkClient does (a late answer could no longer be matched safely).

Two ways to send: ``request(kio_request)`` → a future of the decoded response, for
everything but the hot path; ``send_frame(chunks, ...)`` with a handler that receives the
raw response frame, for Produce, which the producer encodes and decodes by hand.

KIP-219: a response's ``throttle_time_ms`` (``throttle``; the producer reports its Produce
answers' own) holds the requests sent after it here until the throttle has passed, as Kafka's
clients do — the broker would not read them before then — and their timeouts count from then.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import struct
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, cast

from eoslog.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from eoslog.client.security import ClientSecurity
from eoslog.client.versions import ApiVersionTable, api_name, negotiation
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.codec import decode_response, encode_request

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_GATHER_BYTES = 256 * 1024  # a response at least this large is gathered in pieces (data_received)
MAX_RESPONSE_BYTES = 512 * 1024 * 1024

Buffer = bytes | bytearray | memoryview
# Receives the response frame (without its size prefix), or the error that ended the request.
ResponseHandler = Callable[[Buffer | None, KafkaError | None], None]


class _InFlight:
    __slots__ = ("api_key", "deadline", "handler")

    def __init__(self, api_key: int, deadline: float, handler: ResponseHandler) -> None:
        self.api_key = api_key
        self.deadline = deadline
        self.handler = handler


class AioConnection(asyncio.Protocol):
    """One TCP connection; ``open()`` connects and negotiates versions."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        node_id: int = -1,
        client_id: str = "eoslog",
        request_timeout_s: float = 30.0,
        on_close: Callable[[AioConnection], None] | None = None,
        security: ClientSecurity | None = None,
    ) -> None:
        self.host = host
        self.security = security or ClientSecurity()
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self.on_close = on_close
        self.versions = ApiVersionTable({}, f"broker {host}:{port}")
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._connected = False
        self._closed = False
        self._close_error: KafkaError | None = None
        self._correlation_id = 0
        self._in_flight: dict[int, _InFlight] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._buf = bytearray()
        self._pos = 0
        # A large response (a Fetch's records) arriving in pieces: the pieces, joined once
        # when the last arrives, instead of appended to _buf and copied out again.
        self._pieces: list[bytes | memoryview] | None = None
        self._missing = 0
        # KIP-219: until when the broker throttles this client, and the requests held till then.
        self._throttled_until = 0.0
        self._held: deque[Sequence[Buffer]] = deque()
        self._release_timer: asyncio.TimerHandle | None = None

    def __repr__(self) -> str:
        return f"AioConnection(node {self.node_id} at {self.host}:{self.port})"

    # -- lifecycle ---------------------------------------------------------------------

    async def open(self, timeout_s: float = 10.0) -> AioConnection:
        """Connect and negotiate API versions; raises KafkaConnectionError on failure."""
        try:
            await asyncio.wait_for(
                self._loop.create_connection(
                    lambda: self, self.host, self.port, ssl=self.security.ssl_context,
                    server_hostname=self.host if self.security.ssl_context is not None else None),
                timeout_s,
            )
        except (OSError, TimeoutError, ssl.SSLError) as e:
            self._closed = True
            raise KafkaConnectionError(
                f"cannot connect to broker {self.host}:{self.port}: {getattr(e, 'strerror', None) or e!r}"
            ) from None
        try:
            gen = negotiation(f"broker {self.host}:{self.port}")
            request = next(gen)
            while True:
                frame = await self._raw_request(request)
                try:
                    request = gen.send(bytes(frame))
                except StopIteration as done:
                    self.versions = done.value
                    break
            if self.security.uses_sasl:
                await self.security.authenticate(
                    self.request, self.versions.pick(ApiKey.SASL_AUTHENTICATE, 2), f"broker {self.host}:{self.port}")
        except BaseException as e:
            self.close(e if isinstance(e, KafkaError) else None)
            raise
        return self

    @property
    def connected(self) -> bool:
        return self._connected and not self._closed

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def close(self, error: KafkaError | None = None) -> None:
        """Close the connection; every request in flight fails with ``error``."""
        if self._closed:
            return
        self._closed = True
        self._close_error = error or KafkaConnectionError(f"connection to {self.host}:{self.port} closed")
        if self._transport is not None:
            self._transport.close()
        self._fail_all()

    # -- sending -----------------------------------------------------------------------

    def next_correlation_id(self) -> int:
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        return self._correlation_id

    def send_frame(
        self,
        chunks: Sequence[Buffer],
        correlation_id: int,
        api_key: int,
        handler: ResponseHandler | None,
        timeout_s: float | None = None,
    ) -> None:
        """Write an encoded request (size prefix included); ``handler`` gets its response.

        ``handler`` None means no response is expected (Produce with acks=0).
        """
        transport = self._transport
        if self._closed or transport is None:
            raise self._close_error or KafkaConnectionError(f"not connected to {self.host}:{self.port}")
        now = self._loop.time()
        held = now < self._throttled_until or bool(self._held)
        if handler is not None:
            # A request held back by a throttle is timed from when it goes out (Java's NetworkClient
            # does not send it before then either).
            start = max(now, self._throttled_until) if held else now
            deadline = start + (self.request_timeout_s if timeout_s is None else timeout_s)
            self._in_flight[correlation_id] = _InFlight(api_key, deadline, handler)
            timer = self._timer
            if timer is None or deadline < timer.when():
                if timer is not None:
                    timer.cancel()
                self._timer = self._loop.call_at(deadline, self._check_timeouts)
        if held:
            self._held.append(chunks)
            self._release_later()
        else:
            transport.writelines(chunks)

    def throttle(self, ms: int) -> None:
        """KIP-219: a response said the broker throttles this client for ``ms`` (it reads nothing
        more from this connection meanwhile): requests are held here until then, in order."""
        if ms > 0:
            self._throttled_until = max(self._throttled_until, self._loop.time() + ms / 1000)

    def _release_later(self) -> None:
        if self._release_timer is None:
            self._release_timer = self._loop.call_at(self._throttled_until, self._release)

    def _release(self) -> None:
        self._release_timer = None
        if self._closed or self._transport is None:
            self._held.clear()
            return
        if self._loop.time() < self._throttled_until:  # throttled again meanwhile
            self._release_later()
            return
        while self._held:
            self._transport.writelines(self._held.popleft())

    def request(self, request: Any, *, timeout_s: float | None = None) -> asyncio.Future[Any]:
        """Send a kio request; the future resolves to the decoded kio response."""
        api_key = int(request.__api_key__)
        version = int(request.__version__)
        future: asyncio.Future[Any] = self._loop.create_future()

        def on_response(frame: Buffer | None, error: KafkaError | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
                return
            try:
                _, response = decode_response(cast(bytes, frame), api_key, version)
            except Exception as e:  # kio raises several types on malformed input
                future.set_exception(KafkaError(
                    f"cannot decode {api_name(api_key)} v{version} response: {type(e).__name__}: {e}"
                ))
                self.close()
                return
            throttle = getattr(response, "throttle_time", None)
            if throttle is not None:
                self.throttle(int(throttle.total_seconds() * 1000))
            future.set_result(response)

        correlation_id = self.next_correlation_id()
        frame = encode_request(correlation_id, request, self.client_id)
        self.send_frame((frame,), correlation_id, api_key, on_response, timeout_s)
        return future

    def _raw_request(self, request: Any) -> asyncio.Future[Buffer]:
        future: asyncio.Future[Buffer] = self._loop.create_future()

        def on_response(frame: Buffer | None, error: KafkaError | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(cast(Buffer, frame))

        correlation_id = self.next_correlation_id()
        self.send_frame((encode_request(correlation_id, request, self.client_id),),
                        correlation_id, int(request.__api_key__), on_response)
        return future

    # -- asyncio.Protocol --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._connected = True

    def data_received(self, data: bytes) -> None:
        received: bytes | memoryview = data
        pieces = self._pieces
        if pieces is not None:
            missing = self._missing
            if len(data) < missing:
                pieces.append(data)
                self._missing = missing - len(data)
                return
            view = memoryview(data)
            pieces.append(view[:missing])
            self._pieces = None
            if not self._deliver(b"".join(pieces)):
                return
            received = view[missing:]
        buf = self._buf
        buf += received
        pos = self._pos
        end = len(buf)
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if not 4 <= size <= MAX_RESPONSE_BYTES:
                self.close(KafkaConnectionError(f"invalid response size {size} from {self.host}:{self.port}"))
                return
            if end - pos - 4 < size:
                if size >= _GATHER_BYTES:
                    self._pieces = [bytes(memoryview(buf)[pos + 4 : end])]
                    self._missing = size - (end - pos - 4)
                    pos = end
                break
            frame = bytes(memoryview(buf)[pos + 4 : pos + 4 + size])
            pos += 4 + size
            if not self._deliver(frame):
                self._pos = pos
                return
        if pos == end:
            buf.clear()
            self._pos = 0
        elif pos > 65536:
            del buf[:pos]
            self._pos = 0
        else:
            self._pos = pos

    def _deliver(self, frame: bytes) -> bool:
        """Hand one response frame to its request; False once the connection is closed."""
        (correlation_id,) = _SIZE.unpack_from(frame, 0)
        entry = self._in_flight.pop(correlation_id, None)
        if entry is None:
            self.close(KafkaConnectionError(
                f"response with unknown correlation id {correlation_id} from {self.host}:{self.port}"
            ))
            return False
        try:
            entry.handler(frame, None)
        except Exception:
            log.exception("error handling a %s response from %s", api_name(entry.api_key), self)
        return not self._closed

    def connection_lost(self, exc: Exception | None) -> None:
        self._connected = False
        if not self._closed:
            self._closed = True
            reason = f": {exc}" if exc else ""
            self._close_error = KafkaConnectionError(
                f"broker {self.host}:{self.port} closed the connection{reason}"
            )
        self._fail_all()

    # -- failure -----------------------------------------------------------------------

    def _fail_all(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._release_timer is not None:
            self._release_timer.cancel()
            self._release_timer = None
        self._held.clear()
        pending, self._in_flight = self._in_flight, {}
        error = self._close_error or KafkaConnectionError(f"connection to {self.host}:{self.port} closed")
        for entry in pending.values():
            try:
                entry.handler(None, error)
            except Exception:
                log.exception("error failing a %s request to %s", api_name(entry.api_key), self)
        if self.on_close is not None:
            callback, self.on_close = self.on_close, None
            callback(self)

    def _check_timeouts(self) -> None:
        """One timer, armed for the earliest deadline of the requests in flight."""
        self._timer = None
        if not self._in_flight:
            return
        now = self._loop.time()
        oldest = min(entry.deadline for entry in self._in_flight.values())
        if oldest <= now:
            expired = [api_name(e.api_key) for e in self._in_flight.values() if e.deadline <= now]
            log.warning("%s: %s request timed out; closing the connection", self, expired[0])
            self.close(KafkaTimeoutError(
                f"{expired[0]} request to {self.host}:{self.port} timed out "
                f"after {self.request_timeout_s:.1f}s"
            ))
            return
        self._timer = self._loop.call_at(oldest, self._check_timeouts)


async def open_connection(
    host: str, port: int, *, node_id: int = -1, client_id: str = "eoslog",
    request_timeout_s: float = 30.0, connect_timeout_s: float = 10.0,
    on_close: Callable[[AioConnection], None] | None = None, security: ClientSecurity | None = None,
) -> AioConnection:
    conn = AioConnection(host, port, node_id=node_id, client_id=client_id,
                         request_timeout_s=request_timeout_s, on_close=on_close, security=security)
    return await conn.open(connect_timeout_s)


__all__ = ["AioConnection", "ApiKey", "ResponseHandler", "open_connection"]

"""Kafka's Acceptor: the listening sockets of a listener and the task accepting on each.

It accepts only while the connection quotas give its listener a slot (``max.connections``), so
a connection beyond the limit waits in the kernel's listen backlog, unread and unanswered, as
with Kafka; a connection from an address at its ``max.connections.per.ip``, or one that would
take a descriptor kept for storage, is closed as soon as it is accepted. Each accepted socket
becomes a ``KafkaProtocol`` in a task of its own (a TLS handshake must not hold up the next
accept); the quotas count it from the accept on, and the connection gives its slot back when it
ends (or here, when it never got going).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Callable

from eoslog.broker.connection import KafkaProtocol
from eoslog.broker.connection_quotas import ConnectionQuotas

log = logging.getLogger(__name__)

ACCEPT_ERROR_BACKOFF_S = 0.1  # after accept() fails (out of file descriptors): let connections close


def bind(host: str, port: int, backlog: int) -> list[socket.socket]:
    """Listening sockets for ``host`` (every interface when empty) as ``loop.create_server``
    binds them: each address the host names, SO_REUSEADDR, IPv6 sockets IPv6-only."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(backlog)
            sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


class Acceptor:
    def __init__(self, sock: socket.socket, listener_name: str, make_protocol: Callable[[], KafkaProtocol],
                 quotas: ConnectionQuotas, ssl_context: ssl.SSLContext | None) -> None:
        self.sock = sock
        self.listener_name = listener_name
        self.make_protocol = make_protocol
        self.quotas = quotas
        self.ssl_context = ssl_context
        self._starting: set[asyncio.Task[None]] = set()
        self._task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"acceptor-{self.listener_name}")

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        for task in self._starting:
            task.cancel()
        self.sock.close()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self.quotas.wait_for_slot(self.listener_name)
            try:
                conn, address = await loop.sock_accept(self.sock)
            except OSError as e:
                log.warning("accepting a connection on %s failed: %s", self.listener_name, e)
                await asyncio.sleep(ACCEPT_ERROR_BACKOFF_S)
                continue
            if not self.quotas.within_descriptors(conn.fileno(), str(address[0])):
                conn.close()  # storage's reserve: taking it could halt the broker (connection_quotas)
                await asyncio.sleep(ACCEPT_ERROR_BACKOFF_S)
                continue
            protocol = self.make_protocol()
            protocol.peer_host = str(address[0])
            if not self.quotas.accept(protocol):
                conn.close()
                continue
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = loop.create_task(self._start(conn, protocol))
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)

    async def _start(self, conn: socket.socket, protocol: KafkaProtocol) -> None:
        try:
            await asyncio.get_running_loop().connect_accepted_socket(lambda: protocol, conn, ssl=self.ssl_context)
        except BaseException as e:  # the TLS handshake failed, the peer left, or the broker stops
            if not isinstance(e, asyncio.CancelledError):
                log.debug("connection from %s on %s not started: %r", protocol.peer_host, self.listener_name, e)
            self.quotas.release(protocol)
            conn.close()
            if isinstance(e, asyncio.CancelledError):
                raise

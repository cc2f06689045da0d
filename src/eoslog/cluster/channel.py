"""Requests from this broker to the others (Kafka's inter-broker NetworkClient): followers'
Fetch and OffsetForLeaderEpoch to leaders, a coordinator's WriteTxnMarkers to partition
leaders.

One pipelined connection per destination broker (``eoslog.client``'s AioConnection, which
negotiates versions when it opens), addressed from the metadata cache and opened on demand.
A broken connection fails its requests and is replaced by the next request; retrying is the
caller's decision (a fetcher backs off, the marker sender waits for a new leader).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from eoslog.client.aio_connection import AioConnection
from eoslog.client.errors import KafkaConnectionError
from eoslog.client.security import ClientSecurity
from eoslog.client.versions import ApiVersionTable
from eoslog.cluster.metadata import ClusterMetadata

log = logging.getLogger(__name__)

MakeRequest = Callable[[ApiVersionTable], Any]


def inter_broker_client_id(broker_id: int) -> str:
    """The client.id of a broker's requests to the others (the audit log leaves them out)."""
    return f"broker-{broker_id}"


class BrokerChannel:
    def __init__(self, metadata: ClusterMetadata, broker_id: int, request_timeout_ms: int,
                 listener: str | None = None, security: ClientSecurity | None = None) -> None:
        """``listener``: the inter-broker listener's name (None: each broker's first one),
        reached with ``security`` (the broker's own login)."""
        self.metadata = metadata
        self.listener = listener
        self.security = security
        self.client_id = inter_broker_client_id(broker_id)
        self.request_timeout_s = request_timeout_ms / 1000
        self._connections: dict[int, AioConnection] = {}
        self._opening: dict[int, asyncio.Lock] = {}
        self._closed = False

    async def connection(self, broker_id: int) -> AioConnection:
        """The open connection to ``broker_id``, opened if needed; KafkaConnectionError when
        the broker is not registered or cannot be reached."""
        lock = self._opening.setdefault(broker_id, asyncio.Lock())
        async with lock:
            conn = self._connections.get(broker_id)
            registration = self.metadata.brokers.get(broker_id)
            if registration is None:
                raise KafkaConnectionError(f"broker {broker_id} is not registered")
            host, port = registration.address(self.listener)
            if conn is not None and conn.connected and (conn.host, conn.port) == (host, port):
                return conn
            if conn is not None:
                conn.close()  # broken, or the broker came back at another address
            if self._closed:
                raise KafkaConnectionError("the broker is shutting down")
            conn = AioConnection(host, port, node_id=broker_id, client_id=self.client_id,
                                 request_timeout_s=self.request_timeout_s, security=self.security)
            await conn.open(timeout_s=self.request_timeout_s)
            self._connections[broker_id] = conn
            return conn

    async def send(self, broker_id: int, make: MakeRequest) -> Any:
        """``make(versions)`` sent to ``broker_id``; its decoded response."""
        conn = await self.connection(broker_id)
        return await conn.request(make(conn.versions))

    def close(self) -> None:
        self._closed = True
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()

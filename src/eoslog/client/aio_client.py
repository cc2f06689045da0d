"""Connections to the cluster's brokers and the metadata refresh, for asyncio clients.

What it owns: one ``AioConnection`` per broker node (opened on demand, reconnected with
``reconnect.backoff.ms`` growing to ``reconnect.backoff.max.ms``), the metadata cache
(``ClusterMetadata``) and the task that refreshes it — when something asked for an update
(an invalid-metadata error, an unknown leader, a topic nobody has seen yet) or when it is
older than ``metadata.max.age.ms`` — and "send this request to that node, or to the least
loaded one". What it must never do: retry a request or interpret its errors; the caller
(the producer's sender and transaction manager) decides.

Listeners registered with ``add_listener`` are called, in the event loop, whenever
metadata changes or a connection opens or closes: the sender uses that to wake up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from eoslog.client.aio_connection import AioConnection
from eoslog.client.cluster import ClusterMetadata, TopicMetadata
from eoslog.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError, error_for
from eoslog.client.security import ClientSecurity
from eoslog.client.settings import parse_bootstrap
from eoslog.client.versions import ApiVersionTable
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.messages import build, request_types

log = logging.getLogger(__name__)

METADATA_MAX_VERSION = 12


class AioClient:
    def __init__(
        self,
        bootstrap_servers: str,
        *,
        client_id: str = "eoslog",
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1000,
        metadata_max_age_ms: int = 300000,
        connection_setup_timeout_ms: int = 10000,
        allow_auto_topic_creation: bool = True,
        security: ClientSecurity | None = None,
    ) -> None:
        self.cluster = ClusterMetadata(parse_bootstrap(bootstrap_servers))
        self.client_id = client_id
        self.request_timeout_s = request_timeout_ms / 1000
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.reconnect_backoff_s = reconnect_backoff_ms / 1000
        self.reconnect_backoff_max_s = reconnect_backoff_max_ms / 1000
        self.metadata_max_age_s = metadata_max_age_ms / 1000
        self.connection_setup_timeout_s = connection_setup_timeout_ms / 1000
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.security = security or ClientSecurity()
        # Topics whose metadata the client keeps (Java's producer metadata: topics in use).
        self.topics: set[str] = set()
        self._conns: dict[int, AioConnection] = {}
        self._connecting: dict[int, asyncio.Task[AioConnection]] = {}
        self._failures: dict[int, int] = {}
        self._backoff_until: dict[int, float] = {}
        self._listeners: list[Callable[[], None]] = []
        self._metadata_task: asyncio.Task[None] | None = None
        self._metadata_wakeup: asyncio.Event | None = None
        self._metadata_waiters: list[asyncio.Future[None]] = []
        self.last_metadata_error: KafkaError | None = None
        self._features: tuple[int, dict[str, int]] = (-1, {})
        self._closed = False

    @classmethod
    def from_config(cls, c: Any, **overrides: Any) -> AioClient:
        """A client with the connection settings every client configuration has (the
        producer's, the consumer's, the admin's: Kafka's CommonClientConfigs)."""
        return cls(
            c.bootstrap_servers, client_id=c.client_id, request_timeout_ms=c.request_timeout_ms,
            retry_backoff_ms=c.retry_backoff_ms, reconnect_backoff_ms=c.reconnect_backoff_ms,
            reconnect_backoff_max_ms=c.reconnect_backoff_max_ms, metadata_max_age_ms=c.metadata_max_age_ms,
            connection_setup_timeout_ms=c.socket_connection_setup_timeout_ms, security=c.security, **overrides,
        )

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the metadata refresh task (in the running loop)."""
        if self._metadata_task is None:
            self._metadata_wakeup = asyncio.Event()
            self._metadata_task = asyncio.get_running_loop().create_task(
                self._metadata_loop(), name="eoslog-metadata"
            )

    async def close(self) -> None:
        self._closed = True
        if self._metadata_task is not None:
            self._metadata_task.cancel()
            await asyncio.gather(self._metadata_task, return_exceptions=True)
        for task in list(self._connecting.values()):
            task.cancel()
        for conn in list(self._conns.values()):
            conn.close()
        self._conns.clear()
        for waiter in self._metadata_waiters:
            if not waiter.done():
                waiter.cancel()

    def finalized_features(self) -> tuple[int, dict[str, int]]:
        """The finalized features (KIP-584) with the highest epoch any connection was told
        (Java's ApiVersions.getFinalizedFeaturesInfo): (epoch, levels); (-1, {}) when none was."""
        epoch, features = self._features
        for conn in self._conns.values():
            if conn.versions.finalized_features_epoch > epoch:
                epoch, features = conn.versions.finalized_features_epoch, conn.versions.finalized_features
        self._features = (epoch, features)
        return epoch, dict(features)

    def add_listener(self, callback: Callable[[], None]) -> None:
        self._listeners.append(callback)

    def _notify(self) -> None:
        for callback in self._listeners:
            callback()

    # -- connections -------------------------------------------------------------------

    def ready(self, node_id: int) -> AioConnection | None:
        """The node's open connection, or None after starting to open one (unless backing off)."""
        conn = self._conns.get(node_id)
        if conn is not None and conn.connected:
            return conn
        self.maybe_connect(node_id)
        return None

    def unreachable(self, node_id: int) -> bool:
        """Did the last attempt to connect to ``node_id`` fail (it may be dead, or have moved)?"""
        return node_id in self._failures

    def backoff_remaining(self, node_id: int) -> float:
        return max(0.0, self._backoff_until.get(node_id, 0.0) - time.monotonic())

    def maybe_connect(self, node_id: int) -> None:
        if self._closed or node_id in self._connecting or self.backoff_remaining(node_id) > 0:
            return
        task = asyncio.get_running_loop().create_task(self._connect(node_id))
        self._connecting[node_id] = task
        # Errors are recorded in _connect; this only keeps "exception never retrieved" quiet.
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def connection(self, node_id: int) -> AioConnection:
        """An open connection to ``node_id``, opening it if needed (waits out a backoff)."""
        conn = self._conns.get(node_id)
        if conn is not None and conn.connected:
            return conn
        task = self._connecting.get(node_id)
        if task is None:
            # A loop's timers may fire a little early: sleep until the backoff is really over.
            while (wait := self.backoff_remaining(node_id)) > 0:
                await asyncio.sleep(wait)
            conn = self._conns.get(node_id)
            if conn is not None and conn.connected:
                return conn
            task = self._connecting.get(node_id)
            if task is None:
                self.maybe_connect(node_id)
                task = self._connecting[node_id]
        return await asyncio.shield(task)

    async def _connect(self, node_id: int) -> AioConnection:
        try:
            address = self.cluster.broker(node_id)
            if address is None:
                raise KafkaConnectionError(f"no address known for broker {node_id}")
            conn = AioConnection(
                address.host, address.port, node_id=node_id, client_id=self.client_id,
                request_timeout_s=self.request_timeout_s, on_close=self._on_close, security=self.security,
            )
            await conn.open(self.connection_setup_timeout_s)
        except KafkaError as e:
            failures = self._failures.get(node_id, 0) + 1
            self._failures[node_id] = failures
            backoff = min(self.reconnect_backoff_s * 2 ** (failures - 1), self.reconnect_backoff_max_s)
            self._backoff_until[node_id] = time.monotonic() + backoff
            log.info("broker %d: %s (retrying in %.0f ms)", node_id, e, backoff * 1000)
            self.request_update()  # it may have moved
            raise
        finally:
            self._connecting.pop(node_id, None)
            self._notify()
        self._failures.pop(node_id, None)
        self._backoff_until.pop(node_id, None)
        old = self._conns.get(node_id)
        if old is not None and old is not conn:
            old.close()
        self._conns[node_id] = conn
        if self._closed:
            conn.close()
        return conn

    def _on_close(self, conn: AioConnection) -> None:
        if self._conns.get(conn.node_id) is conn:
            del self._conns[conn.node_id]
            # Java's NetworkClient backs off before reconnecting to a node that dropped.
            self._backoff_until[conn.node_id] = time.monotonic() + self.reconnect_backoff_s
        self._notify()

    def least_loaded_node(self) -> int | None:
        """A connected node with the fewest requests in flight, else one we may connect to."""
        best: tuple[int, int] | None = None
        for node_id, conn in self._conns.items():
            if conn.connected and (best is None or conn.in_flight < best[1]):
                best = (node_id, conn.in_flight)
        if best is not None:
            return best[0]
        # Nodes whose last connection attempts failed come last (a stable sort: otherwise in
        # metadata order): a dead broker first in the list would be picked again each time its
        # backoff ends, and a call retried at that same pace would never reach a live one.
        candidates = sorted((b.node_id for b in self.cluster.known_nodes()), key=lambda n: self._failures.get(n, 0))
        for node_id in candidates:
            if node_id in self._connecting or self.backoff_remaining(node_id) == 0:
                return node_id
        return min(candidates, key=self.backoff_remaining) if candidates else None

    async def send(self, make_request: Callable[[ApiVersionTable], Any], node_id: int | None = None) -> Any:
        """Build a request for the node's versions, send it and return the kio response."""
        if node_id is None:
            node_id = self.least_loaded_node()
            if node_id is None:
                raise KafkaConnectionError("no broker known")
        conn = await self.connection(node_id)
        return await conn.request(make_request(conn.versions))

    # -- metadata ----------------------------------------------------------------------

    def request_update(self) -> None:
        self.cluster.request_update()
        if self._metadata_wakeup is not None:
            self._metadata_wakeup.set()

    async def wait_for_update(self, timeout_s: float) -> None:
        """Wait for the next metadata update (raises KafkaTimeoutError)."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._metadata_waiters.append(waiter)
        self.request_update()
        try:
            await asyncio.wait_for(waiter, timeout_s)
        except TimeoutError:
            raise KafkaTimeoutError(f"no metadata update within {timeout_s * 1000:.0f} ms") from None
        finally:
            if waiter in self._metadata_waiters:
                self._metadata_waiters.remove(waiter)

    async def wait_for_topic(self, topic: str, timeout_s: float) -> TopicMetadata:
        """The topic's metadata, fetching it if needed; raises the topic's error when it is
        not retriable (invalid name, not authorized), KafkaTimeoutError after ``timeout_s``."""
        self.topics.add(topic)
        deadline = time.monotonic() + timeout_s
        while True:
            t = self.cluster.topics.get(topic)
            if t is not None and t.num_partitions > 0:
                return t
            code = self.cluster.topic_errors.get(topic)
            if code is not None:
                error = error_for(code, f"topic {topic}")
                if not error.retriable:
                    raise error
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KafkaTimeoutError(
                    f"topic {topic} not present in metadata after {timeout_s * 1000:.0f} ms"
                )
            try:
                await self.wait_for_update(remaining)
            except KafkaTimeoutError:
                continue

    async def _metadata_loop(self) -> None:
        assert self._metadata_wakeup is not None
        last_attempt = 0.0
        while not self._closed:
            cluster = self.cluster
            now = time.monotonic()
            due_in = 0.0 if cluster.need_update else cluster.last_update + self.metadata_max_age_s - now
            if due_in > 0:
                self._metadata_wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._metadata_wakeup.wait(), due_in)
                continue
            backoff = last_attempt + self.retry_backoff_s - now
            if backoff > 0:
                await asyncio.sleep(backoff)
            last_attempt = time.monotonic()
            try:
                await self.refresh_metadata()
            except KafkaError as e:
                self.last_metadata_error = e
                log.debug("metadata refresh failed: %s", e)
            except Exception:
                log.exception("metadata refresh failed")

    async def refresh_metadata(self) -> None:
        topics = set(self.topics)
        names = sorted(topics)

        def make(versions: ApiVersionTable) -> Any:
            version = versions.pick(ApiKey.METADATA, METADATA_MAX_VERSION, 1)
            m = request_types(ApiKey.METADATA, version)
            return build(
                m.MetadataRequest,
                topics=tuple(build(m.MetadataRequestTopic, name=n, topic_id=None) for n in names),
                allow_auto_topic_creation=self.allow_auto_topic_creation,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            )

        response = await self.send(make)
        self.cluster.update(response, topics)
        if self.topics - topics:
            self.cluster.request_update()  # topics added while this request was in flight
        self.last_metadata_error = None
        waiters, self._metadata_waiters = self._metadata_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._notify()

"""The admin client's machinery: connecting, routing a request to the broker that must
answer it, and retrying.

What it owns: the ``AioClient`` (connections, version negotiation, broker addresses);
where a request goes — any broker, the controller, a partition's leader (from a Metadata
request made for the call), or a key's coordinator (FindCoordinator, cached until it
answers NOT_COORDINATOR); and the retry loop every call runs in: a retriable error
(a lost connection, a coordinator still loading, a leader that moved) is tried again with
``retry.backoff.ms`` growing to ``retry.backoff.max.ms`` until the call's timeout
(``default.api.timeout.ms`` unless the call gives ``timeout_ms``), then KafkaTimeoutError
naming the last error. A non-retriable error is raised at once as the exception class of
its Kafka error code (``eoslog.client.errors``).

What it must never do: decide what a response means — the API modules (``topics``,
``groups``, ``transactions``) translate responses and raise their errors.

Calls about several keys (groups, transactional ids) are made one request per key,
concurrently, each with its own retries; the first failure in the caller's order is
raised once all have finished, so no request is left running behind the exception.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from eoslog.client.admin.config import AdminConfig, admin_config
from eoslog.client.admin.types import Node
from eoslog.client.aio_client import AioClient
from eoslog.client.errors import (
    BrokerNotAvailableError,
    CoordinatorNotAvailableError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    NotControllerError,
    NotCoordinatorError,
    UnknownTopicOrPartitionError,
    error_for,
)
from eoslog.client.types import TopicPartition
from eoslog.client.versions import ApiVersionTable
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.messages import build, request_types

if TYPE_CHECKING:
    from eoslog.protocol.requests import FindCoordinatorRequest, MetadataRequest
    from eoslog.protocol.responses import FindCoordinatorResponse, MetadataResponse

log = logging.getLogger(__name__)

K = TypeVar("K")
T = TypeVar("T")
R = TypeVar("R")  # a kio response class (a union over the versions a call sends)

METADATA_MAX_VERSION = 12
FIND_COORDINATOR_MAX_VERSION = 4
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1

# Builds the kio request for a broker's versions; each call's ``make`` names its request union.
MakeRequest = Callable[[ApiVersionTable], object]


def raise_for(code: int, message: str | None) -> None:
    """Raise the typed exception of a non-zero error code."""
    if int(code) != 0:
        raise error_for(int(code), message)


def raise_first(errors: Mapping[K, tuple[int, str | None]], order: Iterable[K]) -> None:
    """Raise the error of the first key of ``order`` that has one (a call about several
    items reports the first failure in the caller's order, once all were handled)."""
    for key in order:
        if key in errors:
            raise_for(*errors[key])


class AdminCore:
    """Lifecycle, routing and retries shared by every admin call (see the module doc)."""

    def __init__(self, settings: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.config: AdminConfig = admin_config(settings, **kwargs)
        self._client: AioClient | None = None
        self._coordinators: dict[tuple[int, str], int] = {}
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect: the first Metadata answer (the brokers) within ``default.api.timeout.ms``."""
        if self._client is not None:
            return
        if self._closed:
            raise IllegalStateError("the admin client is closed")
        c = self.config
        client = AioClient.from_config(c, allow_auto_topic_creation=False)
        try:
            await self._retrying("bootstrap", client.refresh_metadata, None)
        except BaseException:
            await client.close()
            raise
        self._client = client

    async def close(self) -> None:
        self._closed = True
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    @property
    def client(self) -> AioClient:
        if self._client is None:
            raise IllegalStateError("the admin client is " + ("closed" if self._closed else
                                                              "not started: await start() first"))
        return self._client

    # -- retries -------------------------------------------------------------------------------

    async def _retrying(self, what: str, attempt: Callable[[], Awaitable[T]], timeout_ms: int | None) -> T:
        """Run ``attempt`` until it succeeds, fails for good, or the call's time is up."""
        c = self.config
        budget_ms = c.default_api_timeout_ms if timeout_ms is None else timeout_ms
        deadline = time.monotonic() + budget_ms / 1000
        backoff = c.retry_backoff_ms / 1000
        last: KafkaError | None = None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KafkaTimeoutError(f"{what} timed out after {budget_ms} ms"
                                        + (f"; last error: {last}" if last else ""))
            try:
                async with asyncio.timeout(remaining):
                    return await attempt()
            except KafkaError as e:
                if not e.retriable or isinstance(e, UnknownTopicOrPartitionError):
                    raise
                last = e
                log.debug("%s: %s (retrying)", what, e)
                if isinstance(e, (NotCoordinatorError, CoordinatorNotAvailableError, KafkaConnectionError)):
                    self._coordinators.clear()  # a coordinator that is gone is looked up again, as Java's
                if (isinstance(e, NotControllerError) or e.invalid_metadata) and self._client is not None:
                    self._client.cluster.request_update()
            except TimeoutError:
                raise KafkaTimeoutError(f"{what} timed out after {budget_ms} ms"
                                        + (f"; last error: {last}" if last else "")) from None
            await asyncio.sleep(min(backoff, max(0.0, deadline - time.monotonic())))
            backoff = min(backoff * 2, c.retry_backoff_max_ms / 1000)

    async def _each(self, keys: Iterable[K], call: Callable[[K], Awaitable[T]]) -> dict[K, T]:
        """``call`` for every distinct key, concurrently; raises the first failure in key order."""
        unique = list(dict.fromkeys(keys))
        results = await asyncio.gather(*(call(k) for k in unique), return_exceptions=True)
        out: dict[K, T] = {}
        for key, result in zip(unique, results, strict=True):
            if isinstance(result, BaseException):
                raise result
            out[key] = result
        return out

    # -- routing --------------------------------------------------------------------------------

    async def _call(self, what: str, make: MakeRequest, handle: Callable[[int | None, R], T], *,
                    node: Callable[[], Awaitable[int | None]] | None = None, timeout_ms: int | None = None) -> T:
        """Send a request to ``node()`` (None: the least loaded broker) and ``handle(node_id,
        response)``, which raises the response's errors; retried as the module doc says."""

        async def attempt() -> T:
            node_id = None if node is None else await node()
            return handle(node_id, await self.client.send(make, node_id))

        return await self._retrying(what, attempt, timeout_ms)

    async def _on_every_broker(self, what: str, make: MakeRequest, handle: Callable[[int | None, R], list[T]],
                               timeout_ms: int | None) -> list[T]:
        """The same request to every broker (ListGroups, ListTransactions), results joined."""

        async def on(node_id: int) -> list[T]:
            return await self._call(what, make, handle, node=self._fixed(node_id), timeout_ms=timeout_ms)

        listed = await self._each(await self._retrying(what, self._broker_ids, timeout_ms), on)
        return [x for part in listed.values() for x in part]

    @staticmethod
    def _fixed(node_id: int | None) -> Callable[[], Awaitable[int | None]]:
        async def node() -> int | None:
            return node_id

        return node

    def _broker(self, node_id: int | None, *, or_any: bool) -> Callable[[], Awaitable[int | None]]:
        """A named broker, looked up in fresh metadata when not known yet; one no broker has
        is "any broker" with ``or_any`` (which then refuses the request), else an error."""
        async def node() -> int | None:
            if node_id is not None and node_id not in self.client.cluster.brokers:
                await self._metadata(())  # replaces the brokers' dict: look in the new one
            if node_id is None or node_id in self.client.cluster.brokers:
                return node_id
            if or_any:
                return None
            raise BrokerNotAvailableError(f"broker {node_id} is not in the cluster")

        return node

    async def _metadata(self, topics: Iterable[str] | None) -> MetadataResponse:
        """A Metadata response for ``topics`` (None: every topic); also refreshes the
        client's broker addresses and controller."""
        names = None if topics is None else sorted(set(topics))

        def make(versions: ApiVersionTable) -> MetadataRequest:
            m = request_types(ApiKey.METADATA, versions.pick(ApiKey.METADATA, METADATA_MAX_VERSION, 1))
            return cast("MetadataRequest", build(
                m.MetadataRequest,
                topics=None if names is None else tuple(
                    build(m.MetadataRequestTopic, name=n, topic_id=None) for n in names),
                allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            ))

        response: MetadataResponse = await self.client.send(make)
        self.client.cluster.update(response)
        return response

    async def _controller(self) -> int | None:
        """The controller's node id (a KRaft broker names some live broker), or None for
        "any broker" when the metadata names none."""
        cluster = self.client.cluster
        if cluster.need_update:
            await self._metadata(())
        controller = cluster.controller_id
        return controller if controller in cluster.brokers else None

    def node(self, node_id: int | None) -> Node | None:
        address = None if node_id is None else self.client.cluster.brokers.get(node_id)
        return None if address is None else Node(address.node_id, address.host, address.port)

    async def _broker_ids(self) -> list[int]:
        """Every broker of the cluster, from a fresh Metadata answer."""
        await self._metadata(())
        return sorted(self.client.cluster.brokers)

    async def _leaders(self, partitions: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
        """Partitions grouped by their leader, from a Metadata request for their topics.

        A topic or partition that does not exist raises UnknownTopicOrPartitionError (the
        answer is fresh, so waiting would not help); no leader yet is retriable."""
        wanted = list(dict.fromkeys(TopicPartition(str(t), int(p)) for t, p in partitions))
        response = await self._metadata({tp.topic for tp in wanted})
        leaders: dict[TopicPartition, int] = {}
        errors: dict[str, int] = {}
        for t in response.topics:
            name = str(t.name)
            if int(t.error_code) != 0:
                errors[name] = int(t.error_code)
            for p in t.partitions:
                leaders[TopicPartition(name, int(p.partition_index))] = int(p.leader_id)
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in wanted:
            if tp.topic in errors:
                raise_for(errors[tp.topic], f"topic {tp.topic}")
            leader = leaders.get(tp)
            if leader is None:
                raise UnknownTopicOrPartitionError(f"partition {tp.topic}-{tp.partition} does not exist")
            if leader < 0:
                raise LeaderNotAvailableError(f"partition {tp.topic}-{tp.partition} has no leader")
            by_leader.setdefault(leader, []).append(tp)
        return by_leader

    async def _per_leader(self, what: str, partitions: Iterable[TopicPartition],
                          make: Callable[[list[TopicPartition]], MakeRequest],
                          handle: Callable[[int, R], dict[TopicPartition, T]],
                          timeout_ms: int | None) -> dict[TopicPartition, T]:
        """One request per leader for its partitions; the whole look-up is retried when a
        leader moved or is not known yet."""
        wanted = list(dict.fromkeys(TopicPartition(str(t), int(p)) for t, p in partitions))

        async def attempt() -> dict[TopicPartition, T]:
            by_leader = await self._leaders(wanted)
            nodes = list(by_leader)
            responses = await asyncio.gather(*(self.client.send(make(by_leader[n]), n) for n in nodes))
            found: dict[TopicPartition, T] = {}
            for node_id, response in zip(nodes, responses, strict=True):
                found.update(handle(node_id, response))
            return {tp: found[tp] for tp in wanted}

        return await self._retrying(what, attempt, timeout_ms) if wanted else {}

    async def _coordinator(self, key_type: int, key: str) -> int:
        """The node coordinating a group (key type 0) or a transactional id (1), cached
        until a request to it fails with NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE, or its
        connection fails."""
        cached = self._coordinators.get((key_type, key))
        if cached is not None:
            return cached

        def make(versions: ApiVersionTable) -> FindCoordinatorRequest:
            # key_type arrived in v1; transaction coordinators need it.
            version = versions.pick(ApiKey.FIND_COORDINATOR, FIND_COORDINATOR_MAX_VERSION,
                                    1 if key_type != GROUP_KEY_TYPE else 0)
            m = request_types(ApiKey.FIND_COORDINATOR, version)
            return cast("FindCoordinatorRequest",
                        build(m.FindCoordinatorRequest, key=key, key_type=key_type, coordinator_keys=(key,)))

        response: FindCoordinatorResponse = await self.client.send(make)
        found = response.coordinators[0] if hasattr(response, "coordinators") else response
        # v0 has no error_message (a broker answering only v0 would otherwise raise AttributeError).
        raise_for(found.error_code, getattr(found, "error_message", None) or f"no coordinator for {key!r}")
        node_id = int(found.node_id)
        self.client.cluster.add_broker(node_id, str(found.host), int(found.port))
        self._coordinators[(key_type, key)] = node_id
        return node_id

    def _coordinator_of(self, key_type: int, key: str) -> Callable[[], Awaitable[int | None]]:
        async def node() -> int | None:
            return await self._coordinator(key_type, key)

        return node

"""Membership of a classic group (Kafka's AbstractCoordinator): finding the coordinator,
joining (JoinGroup, the leader's assignment through a hook, SyncGroup), heartbeats, and
leaving. What the membership is *for* — the protocols a member offers, the assignment the
leader computes, what happens to partitions around a join, offsets — is the subclass's
(``ConsumerCoordinator``), through the hooks at the end of this class.

What it owns: the coordinator connection (found with FindCoordinator and kept apart from the
fetch connection, as Java does, so that group requests never wait behind a long-poll Fetch);
the member's generation, member id and state; the join — JoinGroup (a second round after
MEMBER_ID_REQUIRED; none for a static member, which sends its ``group.instance.id``), then
SyncGroup — which runs as a background task so that ``poll()`` keeps serving data meanwhile;
heartbeats in a task of their own; LeaveGroup for a dynamic member. Error codes are acted on
through one table per request (``_JOIN_ERRORS``, ``_HEARTBEAT_ERRORS``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum, auto
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from eoslog.client.aio_client import AioClient
from eoslog.client.aio_connection import AioConnection, open_connection
from eoslog.client.consumer.config import ConsumerConfig
from eoslog.client.consumer.metrics import ConsumerMetrics
from eoslog.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError, error_for
from eoslog.client.types import ConsumerGroupMetadata
from eoslog.client.versions import ApiVersionTable
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import build, request_types

if TYPE_CHECKING:
    from eoslog.protocol.requests import (
        FindCoordinatorRequest,
        HeartbeatRequest,
        JoinGroupRequest,
        LeaveGroupRequest,
        SyncGroupRequest,
    )
    from eoslog.protocol.responses import (
        FindCoordinatorResponse,
        HeartbeatResponse,
        JoinGroupResponse,
        SyncGroupResponse,
    )

log = logging.getLogger(__name__)
E = ErrorCode

GROUP_KEY_TYPE = 0
JOIN_GROUP = ApiKey.JOIN_GROUP
HEARTBEAT = ApiKey.HEARTBEAT
LEAVE_GROUP = ApiKey.LEAVE_GROUP
SYNC_GROUP = ApiKey.SYNC_GROUP
# Java's AbstractCoordinator.JOIN_GROUP_TIMEOUT_LAPSE: a JoinGroup may wait a whole rebalance.
JOIN_GROUP_TIMEOUT_LAPSE_S = 5.0
MAX_VERSIONS = {ApiKey.FIND_COORDINATOR: 4, JOIN_GROUP: 9, HEARTBEAT: 4, LEAVE_GROUP: 5, SYNC_GROUP: 5,
                ApiKey.OFFSET_COMMIT: 9, ApiKey.OFFSET_FETCH: 9, ApiKey.CONSUMER_GROUP_HEARTBEAT: 1}
COORDINATOR_MOVED = frozenset({E.not_coordinator, E.coordinator_not_available})


class _Join(Enum):
    RESET_MEMBER = auto()  # join again as a new member (after a back-off)
    RESET_GENERATION = auto()  # keep the member id, drop the generation
    FIND_COORDINATOR = auto()
    REJOIN_NOW = auto()
    RETRY = auto()
    FENCED = auto()  # fatal: another member took our group.instance.id
    RAISE = auto()


# JoinGroup / SyncGroup error codes (Java's JoinGroupResponseHandler, SyncGroupResponseHandler);
# any other code is retried when retriable, raised otherwise.
_JOIN_ERRORS: dict[int, _Join] = {
    E.unknown_member_id: _Join.RESET_MEMBER,
    E.illegal_generation: _Join.RESET_GENERATION,
    E.not_coordinator: _Join.FIND_COORDINATOR,
    E.coordinator_not_available: _Join.FIND_COORDINATOR,
    E.rebalance_in_progress: _Join.REJOIN_NOW,
    E.coordinator_load_in_progress: _Join.RETRY,
    E.fenced_instance_id: _Join.FENCED,
}


class _Heartbeat(Enum):
    OK = auto()
    REJOIN = auto()  # the group is rebalancing: join again, still a member
    LOST = auto()  # the generation is over
    UNKNOWN_MEMBER = auto()  # ... and the member id too
    FENCED = auto()
    FIND_COORDINATOR = auto()
    RAISE = auto()


# Heartbeat error codes (Java's HeartbeatResponseHandler); any other code is raised.
_HEARTBEAT_ERRORS: dict[int, _Heartbeat] = {
    E.none: _Heartbeat.OK,
    E.rebalance_in_progress: _Heartbeat.REJOIN,
    E.illegal_generation: _Heartbeat.LOST,
    E.unknown_member_id: _Heartbeat.UNKNOWN_MEMBER,
    E.fenced_instance_id: _Heartbeat.FENCED,
    E.not_coordinator: _Heartbeat.FIND_COORDINATOR,
    E.coordinator_not_available: _Heartbeat.FIND_COORDINATOR,
}


class MemberState(Enum):
    UNJOINED = auto()
    PREPARING_REBALANCE = auto()
    COMPLETING_REBALANCE = auto()
    STABLE = auto()


@dataclass(frozen=True)
class Generation:
    generation_id: int = -1
    member_id: str = ""
    protocol_name: str | None = None

    @property
    def valid(self) -> bool:
        return self.generation_id >= 0 and bool(self.member_id)


NO_GENERATION = Generation()


class GroupMembership:
    def __init__(self, config: ConsumerConfig, client: AioClient, metrics: ConsumerMetrics,
                 wakeup: Callable[[], None]) -> None:
        assert config.group_id is not None
        self.config = config
        self.group_id: str = config.group_id
        self.group_instance_id = config.group_instance_id
        self.client = client
        self.metrics = metrics
        self.wakeup = wakeup
        self.generation = NO_GENERATION
        self.member_id = ""
        self.state = MemberState.UNJOINED
        self.rejoin_needed = True
        self._needs_join_prepare = True
        self._join_task: asyncio.Task[tuple[Generation, bytes]] | None = None
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._heartbeat_wakeup = asyncio.Event()
        self._conn: AioConnection | None = None
        self._lookup: asyncio.Task[AioConnection] | None = None
        self._fatal: KafkaError | None = None
        self._closed = False
        self._last_poll = time.monotonic()
        self._last_heartbeat_ok = time.monotonic()
        self._retry_s = config.retry_backoff_ms / 1000
        self._request_timeout_s = config.request_timeout_ms / 1000

    # -- the coordinator connection ---------------------------------------------------------

    def mark_coordinator_unknown(self, why: str) -> None:
        if self._conn is not None:
            log.info("group %s: coordinator %s unknown: %s", self.group_id, self._conn, why)
            self._conn.close()
            self._conn = None

    async def coordinator(self) -> AioConnection:
        """The open coordinator connection, finding the coordinator first when needed."""
        conn = self._conn
        if conn is not None and conn.connected:
            return conn
        if self._lookup is None or self._lookup.done():
            self._lookup = asyncio.get_running_loop().create_task(self._find_coordinator())
        return await asyncio.shield(self._lookup)

    async def _find_coordinator(self) -> AioConnection:
        def make(versions: ApiVersionTable) -> FindCoordinatorRequest:
            version = versions.pick(ApiKey.FIND_COORDINATOR, MAX_VERSIONS[ApiKey.FIND_COORDINATOR])
            m = request_types(ApiKey.FIND_COORDINATOR, version)
            return cast("FindCoordinatorRequest", build(
                m.FindCoordinatorRequest, key=self.group_id, key_type=GROUP_KEY_TYPE,
                         coordinator_keys=(self.group_id,)))

        response: FindCoordinatorResponse = await self.client.send(make)
        found = response.coordinators[0] if hasattr(response, "coordinators") else response
        code = int(found.error_code)
        if code != E.none:
            message = getattr(found, "error_message", None) or ""  # v0 has none
            raise error_for(code, f"FindCoordinator for group {self.group_id}: {message}")
        node_id = int(found.node_id)
        # A connection of its own (Java: node id Integer.MAX_VALUE - id), apart from fetches.
        conn = await open_connection(
            str(found.host), int(found.port), node_id=2**31 - 1 - node_id, client_id=self.config.client_id,
            request_timeout_s=self._request_timeout_s,
            connect_timeout_s=self.config.socket_connection_setup_timeout_ms / 1000,
            security=self.client.security,
        )
        if self._closed:
            conn.close()
            raise KafkaConnectionError("the consumer is closed")
        self._conn = conn
        log.debug("group %s: coordinator is node %d at %s:%s", self.group_id, node_id, found.host, found.port)
        return conn

    async def _request(self, api_key: ApiKey, fill: Callable[[ModuleType, int], object],
                       timeout_s: float | None = None) -> Any:
        """Send a request built by ``fill(module, version)`` to the coordinator; connection
        failures forget the coordinator and are raised (the caller decides to retry). The
        answer is kio's response to ``api_key``: each caller names its union."""
        conn = await self.coordinator()
        version = conn.versions.pick(api_key, MAX_VERSIONS[api_key])
        request = fill(request_types(api_key, version), version)
        try:
            return await conn.request(request, timeout_s=timeout_s)
        except KafkaError as e:
            self.mark_coordinator_unknown(str(e))
            raise

    async def _retriable_request(self, api_key: ApiKey, fill: Callable[[ModuleType, int], object],
                                 timeout_s: float | None = None,
                                 deadline: float | None = None) -> Any:
        """``_request``, or None after a back-off when it failed with a retriable error."""
        try:
            return await self._request(api_key, fill, timeout_s)
        except KafkaError as e:
            if not e.retriable:
                raise
            await self._backoff(deadline)
            return None

    async def _backoff(self, deadline: float | None,
                       waiting_for: str = "the group coordinator did not answer in time") -> None:
        """Sleep ``retry.backoff.ms``, or raise KafkaTimeoutError saying what was waited for
        when that would pass ``deadline``."""
        if deadline is not None and time.monotonic() + self._retry_s > deadline:
            raise KafkaTimeoutError(waiting_for)
        await asyncio.sleep(self._retry_s)

    # -- membership -------------------------------------------------------------------------

    def group_metadata(self) -> ConsumerGroupMetadata:
        g = self.generation
        return ConsumerGroupMetadata(self.group_id, g.generation_id, g.member_id, self.group_instance_id)

    def request_rejoin(self, why: str) -> None:
        if not self.rejoin_needed:
            log.info("group %s: member %s rejoins: %s", self.group_id, self.member_id or "(new)", why)
        self.rejoin_needed = True
        self.wakeup()

    def lose_membership(self, why: str, *, forget_member_id: bool) -> None:
        """The coordinator no longer knows this generation (or this member): join again."""
        self.generation = NO_GENERATION
        if forget_member_id:
            self.member_id = ""
        self.state = MemberState.UNJOINED
        self.request_rejoin(why)

    @property
    def rebalancing(self) -> bool:
        return self._join_task is not None

    async def ensure_active_group(self) -> None:
        """At each poll(): finish a join that is done (running ``on_join_complete``), start
        one when needed (after ``on_join_prepare``), keep the heartbeats going. Never waits
        for the join itself."""
        task = self._join_task
        if task is not None and task.done():
            self._join_task = None
            await self._finish_join(task)
        if self._join_task is None and self.rejoin_needed and not self._closed:
            if self._needs_join_prepare:
                self._needs_join_prepare = False
                await self.on_join_prepare()
            self.state = MemberState.PREPARING_REBALANCE
            self._join_task = asyncio.get_running_loop().create_task(self._join_and_sync())
            self._join_task.add_done_callback(lambda _: self.wakeup())
        self._ensure_heartbeat()

    async def _finish_join(self, task: asyncio.Task[tuple[Generation, bytes]]) -> None:
        try:
            generation, data = task.result()
        except asyncio.CancelledError:
            return
        except KafkaError as e:
            self.state = MemberState.UNJOINED
            self.metrics.failed_rebalance_total += 1
            if not e.retriable:
                raise
            log.info("group %s: join failed, retrying: %s", self.group_id, e)
            return
        self.generation = generation
        self.state = MemberState.STABLE
        self.metrics.rebalance_total += 1
        self._last_heartbeat_ok = time.monotonic()
        self._heartbeat_wakeup.set()
        await self.on_join_complete(generation, data)
        self._needs_join_prepare = True

    # -- join ---------------------------------------------------------------------------------

    async def _join_and_sync(self) -> tuple[Generation, bytes]:
        """JoinGroup and SyncGroup until a generation's assignment arrives; retriable errors
        are retried here, others end the task (poll raises them)."""
        rebalance_timeout_ms = self.config.max_poll_interval_ms
        join_timeout_s = max(self._request_timeout_s, rebalance_timeout_ms / 1000 + JOIN_GROUP_TIMEOUT_LAPSE_S)
        while True:
            protocols = self.join_protocols()

            def join_request(m: ModuleType, version: int,
                             protocols: list[tuple[str, bytes]] = protocols) -> JoinGroupRequest:
                return cast("JoinGroupRequest", build(
                    m.JoinGroupRequest, group_id=self.group_id,
                    session_timeout=datetime.timedelta(milliseconds=self.config.session_timeout_ms),
                    rebalance_timeout=datetime.timedelta(milliseconds=rebalance_timeout_ms),
                    member_id=self.member_id, group_instance_id=self.group_instance_id,
                    protocol_type=CONSUMER_PROTOCOL_TYPE,
                    protocols=tuple(build(m.JoinGroupRequestProtocol, name=n, metadata=md) for n, md in protocols),
                    reason=None,
                ))

            response: JoinGroupResponse | None = await self._retriable_request(JOIN_GROUP, join_request, join_timeout_s)
            if response is None:
                continue
            code = int(response.error_code)
            if code == E.member_id_required:
                self.member_id = str(response.member_id)
                continue
            if code != E.none:
                await self._join_error(code, "JoinGroup")
                continue
            self.member_id = str(response.member_id)
            self.rejoin_needed = False
            generation = Generation(int(response.generation_id), self.member_id, response.protocol_name)
            self.state = MemberState.COMPLETING_REBALANCE
            assignments: dict[str, bytes] = {}
            if response.leader == response.member_id:
                assignments = await self.perform_assignment(str(response.protocol_name), response.members)

            def sync_request(m: ModuleType, version: int, g: Generation = generation,
                             assignments: dict[str, bytes] = assignments) -> SyncGroupRequest:
                return cast("SyncGroupRequest", build(
                    m.SyncGroupRequest, group_id=self.group_id, generation_id=g.generation_id,
                    member_id=g.member_id, group_instance_id=self.group_instance_id,
                    protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=g.protocol_name,
                    assignments=tuple(build(m.SyncGroupRequestAssignment, member_id=mid, assignment=a)
                                      for mid, a in assignments.items()),
                ))

            sync: SyncGroupResponse | None = await self._retriable_request(SYNC_GROUP, sync_request, join_timeout_s)
            if sync is None:
                continue
            code = int(sync.error_code)
            if code == E.none:
                return generation, bytes(sync.assignment)
            await self._join_error(code, "SyncGroup")

    async def _join_error(self, code: int, what: str) -> None:
        """React to a JoinGroup/SyncGroup error code as ``_JOIN_ERRORS`` says: retry after a
        back-off, join again at once, or raise."""
        action = _JOIN_ERRORS.get(code)
        if action is None:
            action = _Join.RETRY if error_for(code).retriable else _Join.RAISE
        if action is _Join.REJOIN_NOW:
            return
        if action is _Join.RESET_MEMBER:
            self.member_id = ""
            self.generation = NO_GENERATION
        elif action is _Join.RESET_GENERATION:
            self.generation = Generation(-1, self.member_id)
        elif action is _Join.FIND_COORDINATOR:
            self.mark_coordinator_unknown(f"{what}: {error_for(code).name}")
        elif action in (_Join.RAISE, _Join.FENCED):
            error = error_for(code, f"{what} for group {self.group_id}")
            if action is _Join.FENCED:
                self._fatal = error  # another member took our group.instance.id: nothing left to do
            raise error
        await self._backoff(None)

    # -- heartbeats ----------------------------------------------------------------------------

    def _ensure_heartbeat(self) -> None:
        if self._heartbeat_task is None and not self._closed:
            self._heartbeat_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())

    async def _heartbeat_loop(self) -> None:
        interval = self.config.heartbeat_interval_ms / 1000
        next_at = time.monotonic()
        while not self._closed:
            wait = next_at - time.monotonic()
            if wait > 0:
                self._heartbeat_wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._heartbeat_wakeup.wait(), wait)
                continue
            next_at = time.monotonic() + interval
            if self.state is not MemberState.STABLE or not self.generation.valid:
                continue
            if time.monotonic() - self._last_poll > self.config.max_poll_interval_ms / 1000:
                log.warning("group %s: no poll() within max.poll.interval.ms=%d; leaving the group so that its "
                            "partitions go to others", self.group_id, self.config.max_poll_interval_ms)
                await self.maybe_leave_group("consumer poll timeout has expired")
                continue
            try:
                await self._heartbeat()
            except KafkaError as e:
                log.debug("group %s: heartbeat failed: %s", self.group_id, e)
                next_at = time.monotonic() + self._retry_s
                if time.monotonic() - self._last_heartbeat_ok > self.config.session_timeout_ms / 1000:
                    self.mark_coordinator_unknown("no heartbeat answered within session.timeout.ms")
            except Exception:
                log.exception("group %s: heartbeat", self.group_id)

    async def _heartbeat(self) -> None:
        g = self.generation

        def fill(m: ModuleType, version: int) -> HeartbeatRequest:
            return cast("HeartbeatRequest", build(
                m.HeartbeatRequest, group_id=self.group_id, generation_id=g.generation_id,
                         member_id=g.member_id, group_instance_id=self.group_instance_id))

        response: HeartbeatResponse = await self._request(HEARTBEAT, fill)
        self.metrics.heartbeat_total += 1
        code = int(response.error_code)
        if self.generation is not g or self.state is not MemberState.STABLE:
            return  # a rebalance started meanwhile; this answer is about the old generation
        action = _HEARTBEAT_ERRORS.get(code, _Heartbeat.RAISE)
        if action in (_Heartbeat.OK, _Heartbeat.REJOIN):
            self._last_heartbeat_ok = time.monotonic()
            if action is _Heartbeat.REJOIN:
                self.request_rejoin("the group is rebalancing")
        elif action is _Heartbeat.FIND_COORDINATOR:
            self.mark_coordinator_unknown(error_for(code).name)
        elif action is _Heartbeat.RAISE:
            raise error_for(code, "Heartbeat")
        else:  # the membership is gone: this member joins as new (or, fenced, stops)
            if action is _Heartbeat.FENCED:
                self._fatal = error_for(code, f"group.instance.id {self.group_instance_id} was taken by another "
                                              "member")
            self.lose_membership(f"heartbeat answered {error_for(code).name}",
                                 forget_member_id=action is _Heartbeat.UNKNOWN_MEMBER)


    # -- leaving ---------------------------------------------------------------------------------

    async def maybe_leave_group(self, reason: str) -> None:
        """LeaveGroup for a dynamic member (a static one keeps its place until its session
        times out, KIP-345), then forget the generation."""
        g = self.generation
        if self.group_instance_id is None and self.member_id and self.state is not MemberState.UNJOINED:
            member_id = self.member_id

            def fill(m: ModuleType, version: int) -> LeaveGroupRequest:
                return cast("LeaveGroupRequest", build(m.LeaveGroupRequest, group_id=self.group_id, member_id=member_id,
                             members=(build(m.MemberIdentity, member_id=member_id, group_instance_id=None,
                                            reason=reason),)))

            try:
                await asyncio.wait_for(self._request(LEAVE_GROUP, fill), self._request_timeout_s)
                log.info("group %s: member %s left (%s)", self.group_id, member_id, reason)
            except (KafkaError, TimeoutError) as e:
                log.info("group %s: LeaveGroup failed: %s", self.group_id, e)
        if self._join_task is not None:
            self._join_task.cancel()
            self._join_task = None
        if self.generation is g:
            self.generation = NO_GENERATION
        self.member_id = ""
        self.state = MemberState.UNJOINED
        self.rejoin_needed = True
        self._needs_join_prepare = True
        self.on_left()

    async def close_membership(self) -> None:
        """Stop the join, the heartbeats and the coordinator connection (after leaving)."""
        self._closed = True
        self._heartbeat_wakeup.set()
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
            with contextlib.suppress(BaseException):
                await self._heartbeat_task
        if self._lookup is not None and not self._lookup.done():
            self._lookup.cancel()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def cancel_join(self) -> None:
        if self._join_task is not None:
            self._join_task.cancel()
            with contextlib.suppress(BaseException):
                await self._join_task
            self._join_task = None

    # -- hooks (Java's AbstractCoordinator abstract methods) --------------------------------------

    def join_protocols(self) -> list[tuple[str, bytes]]:
        """(protocol name, member metadata) of each protocol this member offers, preferred first."""
        raise NotImplementedError

    async def perform_assignment(self, protocol_name: str, members: Iterable[Any]) -> dict[str, bytes]:
        """The leader's assignment: member id → assignment bytes."""
        raise NotImplementedError

    async def on_join_prepare(self) -> None:
        """Before a join (Java's onJoinPrepare)."""

    async def on_join_complete(self, generation: Generation, assignment: bytes) -> None:
        """After a sync: the generation and this member's assignment."""

    def on_left(self) -> None:
        """After leaving the group (or giving the generation up)."""

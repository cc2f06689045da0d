"""Group membership and committed offsets (Kafka's ConsumerCoordinator, classic protocol).

What it owns: the coordinator connection (found with FindCoordinator and kept apart from
the fetch connection, as Java does, so that group requests never wait behind a long-poll
Fetch); the member's generation, member id and state; the join — JoinGroup (a second
round after MEMBER_ID_REQUIRED; none for a static member, which sends its
``group.instance.id``), the leader's assignment (every member's subscription decoded, the
selected assignor run over the topics' partition counts), SyncGroup — which runs as a
background task so that ``poll()`` keeps serving data meanwhile; heartbeats in a task of
their own; the rebalance callbacks around a join; OffsetCommit (sync, async, auto) with
the generation and member id; OffsetFetch (``require_stable`` under read_committed,
KIP-447); LeaveGroup when a dynamic member closes or unsubscribes.

Rebalance protocols, as Java's: EAGER (``range``, ``roundrobin``, or a mix) revokes every
partition before joining; COOPERATIVE (every configured assignor is
``cooperative-sticky``) keeps its partitions through the join, sends them as
``owned_partitions``, and after the sync revokes only those now assigned elsewhere — then
rejoins, so that the next round hands them to their new owner.

What it must never do: fetch records or touch positions other than through the
subscription state.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum, auto
from typing import Any

from eoslog.client.aio_client import AioClient
from eoslog.client.aio_connection import AioConnection, open_connection
from eoslog.client.consumer.assignors import (
    Assignor,
    Member,
    RebalanceProtocol,
    make_assignors,
    rebalance_protocol,
)
from eoslog.client.consumer.config import ConsumerConfig
from eoslog.client.consumer.errors import CommitFailedError
from eoslog.client.consumer.metrics import ConsumerMetrics
from eoslog.client.consumer.protocol import (
    CONSUMER_PROTOCOL_TYPE,
    Assignment,
    ProtocolError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from eoslog.client.consumer.subscription_state import SubscriptionState, SubscriptionType
from eoslog.client.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    RebalanceInProgressError,
    error_for,
)
from eoslog.client.types import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition
from eoslog.client.versions import ApiVersionTable
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import build, request_types

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
                ApiKey.OFFSET_COMMIT: 9, ApiKey.OFFSET_FETCH: 9}
_COORDINATOR_MOVED = frozenset({E.not_coordinator, E.coordinator_not_available})


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


class RebalanceListener:
    """The consumer's rebalance callbacks; each gets the partitions, sorted."""

    async def revoked(self, partitions: list[TopicPartition]) -> None: ...

    async def assigned(self, partitions: list[TopicPartition]) -> None: ...

    async def lost(self, partitions: list[TopicPartition]) -> None: ...


class ConsumerCoordinator:
    def __init__(self, config: ConsumerConfig, client: AioClient, subscriptions: SubscriptionState,
                 metrics: ConsumerMetrics, wakeup: Callable[[], None],
                 on_assignment_change: Callable[[Iterable[TopicPartition]], None]) -> None:
        assert config.group_id is not None
        self.config = config
        self.group_id: str = config.group_id
        self.group_instance_id = config.group_instance_id
        self.client = client
        self.subscriptions = subscriptions
        self.metrics = metrics
        self.wakeup = wakeup
        self.on_assignment_change = on_assignment_change
        self.listener = RebalanceListener()
        self.assignors: list[Assignor] = make_assignors(config.partition_assignment_strategy)
        self.protocol = rebalance_protocol(self.assignors)
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
        self._next_auto_commit = time.monotonic() + config.auto_commit_interval_ms / 1000
        self._auto_commit_task: asyncio.Task[None] | None = None
        self._metadata_snapshot: dict[str, int] = {}
        self._next_pattern_refresh = 0.0

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
        def make(versions: ApiVersionTable) -> Any:
            version = versions.pick(ApiKey.FIND_COORDINATOR, MAX_VERSIONS[ApiKey.FIND_COORDINATOR])
            m = request_types(ApiKey.FIND_COORDINATOR, version)
            return build(m.FindCoordinatorRequest, key=self.group_id, key_type=GROUP_KEY_TYPE,
                         coordinator_keys=(self.group_id,))

        response = await self.client.send(make)
        found = response.coordinators[0] if hasattr(response, "coordinators") else response
        code = int(found.error_code)
        if code != E.none:
            raise error_for(code, f"FindCoordinator for group {self.group_id}: {found.error_message or ''}")
        node_id = int(found.node_id)
        # A connection of its own (Java: node id Integer.MAX_VALUE - id), apart from fetches.
        conn = await open_connection(
            str(found.host), int(found.port), node_id=2**31 - 1 - node_id, client_id=self.config.client_id,
            request_timeout_s=self._request_timeout_s,
            connect_timeout_s=self.config.socket_connection_setup_timeout_ms / 1000,
        )
        if self._closed:
            conn.close()
            raise KafkaConnectionError("the consumer is closed")
        self._conn = conn
        log.debug("group %s: coordinator is node %d at %s:%s", self.group_id, node_id, found.host, found.port)
        return conn

    async def _request(self, api_key: ApiKey, fill: Callable[[Any, int], Any], timeout_s: float | None = None) -> Any:
        """Send a request built by ``fill(module, version)`` to the coordinator; connection
        failures forget the coordinator and are raised (the caller decides to retry)."""
        conn = await self.coordinator()
        version = conn.versions.pick(api_key, MAX_VERSIONS[api_key])
        request = fill(request_types(api_key, version), version)
        try:
            return await conn.request(request, timeout_s=timeout_s)
        except KafkaError as e:
            self.mark_coordinator_unknown(str(e))
            raise

    async def _retriable_request(self, api_key: ApiKey, fill: Callable[[Any, int], Any], timeout_s: float | None = None,
                                 deadline: float | None = None) -> Any:
        """``_request``, or None after a back-off when it failed with a retriable error."""
        try:
            return await self._request(api_key, fill, timeout_s)
        except KafkaError as e:
            if not e.retriable:
                raise
            await self._backoff(deadline)
            return None

    async def _backoff(self, deadline: float | None) -> None:
        if deadline is not None and time.monotonic() + self._retry_s > deadline:
            raise KafkaTimeoutError("the group coordinator did not answer in time")
        await asyncio.sleep(self._retry_s)

    # -- poll: drive the membership --------------------------------------------------------

    def group_metadata(self) -> ConsumerGroupMetadata:
        g = self.generation
        return ConsumerGroupMetadata(self.group_id, g.generation_id, g.member_id, self.group_instance_id)

    def request_rejoin(self, why: str) -> None:
        if not self.rejoin_needed:
            log.info("group %s: member %s rejoins: %s", self.group_id, self.member_id or "(new)", why)
        self.rejoin_needed = True
        self.wakeup()

    @property
    def rebalancing(self) -> bool:
        return self._join_task is not None

    async def poll(self) -> None:
        """Called at each poll(): start a join when one is needed, finish one that is done
        (running the rebalance callbacks), commit when auto-commit is due. Never waits
        for the join itself."""
        self._last_poll = time.monotonic()
        if self._fatal is not None:
            raise self._fatal
        subs = self.subscriptions
        if subs.auto_assigned:
            if subs.type is SubscriptionType.AUTO_PATTERN:
                await self._maybe_refresh_pattern()
            self._check_metadata()
            task = self._join_task
            if task is not None and task.done():
                self._join_task = None
                await self._finish_join(task)
            if self._join_task is None and self.rejoin_needed and not self._closed:
                if self._needs_join_prepare:
                    self._needs_join_prepare = False
                    await self._on_join_prepare()
                self.state = MemberState.PREPARING_REBALANCE
                self._join_task = asyncio.get_running_loop().create_task(self._join_and_sync())
                self._join_task.add_done_callback(lambda _: self.wakeup())
            self._ensure_heartbeat()
        self._maybe_auto_commit()

    def time_to_next_poll(self) -> float:
        """How long poll() may wait for data before the coordinator needs it again."""
        if not self.config.enable_auto_commit:
            return float("inf")
        return max(0.0, self._next_auto_commit - time.monotonic())

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
        await self._on_join_complete(generation, data)
        self._needs_join_prepare = True

    # -- join ---------------------------------------------------------------------------------

    def _subscription_for(self, assignor: Assignor) -> bytes:
        owned = tuple(self.subscriptions.assigned()) if self.protocol is RebalanceProtocol.COOPERATIVE else ()
        generation = self.generation.generation_id
        return encode_subscription(Subscription(
            topics=tuple(sorted(self.subscriptions.topics)), user_data=assignor.user_data(generation),
            owned_partitions=owned, generation_id=generation, rack_id=self.config.client_rack or None,
        ))

    async def _join_and_sync(self) -> tuple[Generation, bytes]:
        """JoinGroup and SyncGroup until a generation's assignment arrives; retriable errors
        are retried here, others end the task (poll raises them)."""
        rebalance_timeout_ms = self.config.max_poll_interval_ms
        join_timeout_s = max(self._request_timeout_s, rebalance_timeout_ms / 1000 + JOIN_GROUP_TIMEOUT_LAPSE_S)
        while True:
            protocols = [(a.name, self._subscription_for(a)) for a in self.assignors]

            def join_request(m: Any, version: int, protocols: list[tuple[str, bytes]] = protocols) -> Any:
                return build(
                    m.JoinGroupRequest, group_id=self.group_id,
                    session_timeout=datetime.timedelta(milliseconds=self.config.session_timeout_ms),
                    rebalance_timeout=datetime.timedelta(milliseconds=rebalance_timeout_ms),
                    member_id=self.member_id, group_instance_id=self.group_instance_id,
                    protocol_type=CONSUMER_PROTOCOL_TYPE,
                    protocols=tuple(build(m.JoinGroupRequestProtocol, name=n, metadata=md) for n, md in protocols),
                    reason=None,
                )

            response = await self._retriable_request(JOIN_GROUP, join_request, join_timeout_s)
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
                assignments = await self._assign_as_leader(str(response.protocol_name), response.members)

            def sync_request(m: Any, version: int, g: Generation = generation,
                             assignments: dict[str, bytes] = assignments) -> Any:
                return build(
                    m.SyncGroupRequest, group_id=self.group_id, generation_id=g.generation_id,
                    member_id=g.member_id, group_instance_id=self.group_instance_id,
                    protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=g.protocol_name,
                    assignments=tuple(build(m.SyncGroupRequestAssignment, member_id=mid, assignment=a)
                                      for mid, a in assignments.items()),
                )

            sync = await self._retriable_request(SYNC_GROUP, sync_request, join_timeout_s)
            if sync is None:
                continue
            code = int(sync.error_code)
            if code == E.none:
                return generation, bytes(sync.assignment)
            await self._join_error(code, "SyncGroup")

    async def _join_error(self, code: int, what: str) -> None:
        """React to a JoinGroup/SyncGroup error code: retry (after a back-off) or raise."""
        if code == E.unknown_member_id:
            self.member_id = ""
            self.generation = NO_GENERATION
        elif code == E.illegal_generation:
            self.generation = Generation(-1, self.member_id)
        elif code in _COORDINATOR_MOVED:
            self.mark_coordinator_unknown(f"{what}: {error_for(code).name}")
        elif code == E.rebalance_in_progress:
            return  # join again at once
        elif not (code == E.coordinator_load_in_progress or error_for(code).retriable):
            error = error_for(code, f"{what} for group {self.group_id}")
            if code == E.fenced_instance_id:
                self._fatal = error  # another member took our group.instance.id: nothing left to do
            raise error
        await self._backoff(None)

    async def _assign_as_leader(self, protocol_name: str, raw_members: Iterable[Any]) -> dict[str, bytes]:
        assignor = next((a for a in self.assignors if a.name == protocol_name), None)
        if assignor is None:
            raise error_for(E.inconsistent_group_protocol, f"the group chose assignor {protocol_name!r}, "
                                                             "which this member does not have")
        members: dict[str, Member] = {}
        for m in raw_members:
            try:
                subscription = decode_subscription(bytes(m.metadata))
            except ProtocolError as e:
                log.warning("group %s: member %s sent a subscription eoslog cannot read (%s); it gets nothing",
                            self.group_id, m.member_id, e)
                subscription = Subscription(())
            members[str(m.member_id)] = Member(str(m.member_id), m.group_instance_id, subscription)
        topics = {t for m in members.values() for t in m.subscription.topics}
        partitions = await self._partition_counts(topics)
        protocol = self.protocol if self.protocol in assignor.protocols else RebalanceProtocol.EAGER
        assignment = assignor.assign(partitions, members, protocol)
        log.info("group %s: leader %s assigned with %s: %s", self.group_id, self.member_id, assignor.name,
                 {mid: [f"{tp.topic}-{tp.partition}" for tp in tps] for mid, tps in assignment.items()})
        return {mid: encode_assignment(Assignment(tuple(tps))) for mid, tps in assignment.items()}

    async def _partition_counts(self, topics: set[str]) -> dict[str, int]:
        """Partition counts of the group's topics, from fresh metadata (the leader also
        watches them for changes, as Java's leader does)."""
        client = self.client
        client.topics.update(topics)
        try:
            await client.refresh_metadata()
        except KafkaError as e:
            log.info("group %s: metadata refresh for the assignment failed: %s", self.group_id, e)
        counts = {t: client.cluster.topics[t].num_partitions for t in topics if t in client.cluster.topics}
        self._metadata_snapshot = dict(counts)
        return counts

    def _check_metadata(self) -> None:
        """A subscribed topic whose partition count changed triggers a rebalance."""
        snapshot = self._metadata_snapshot
        if not snapshot or self._join_task is not None:
            return
        for topic, count in snapshot.items():
            meta = self.client.cluster.topics.get(topic)
            if meta is not None and meta.num_partitions != count:
                self._metadata_snapshot = {}
                self.request_rejoin(f"topic {topic} now has {meta.num_partitions} partitions, not {count}")
                return

    async def _maybe_refresh_pattern(self) -> None:
        now = time.monotonic()
        if now < self._next_pattern_refresh:
            return
        self._next_pattern_refresh = now + self.config.metadata_max_age_ms / 1000

        def make(versions: ApiVersionTable) -> Any:
            version = versions.pick(ApiKey.METADATA, 12, 1)
            m = request_types(ApiKey.METADATA, version)
            return build(m.MetadataRequest, topics=None, allow_auto_topic_creation=False,
                         include_cluster_authorized_operations=False, include_topic_authorized_operations=False)

        try:
            response = await self.client.send(make)
        except KafkaError as e:
            log.info("group %s: cannot list topics for the pattern: %s", self.group_id, e)
            self._next_pattern_refresh = now + self._retry_s
            return
        names = [
            str(t.name) for t in response.topics
            if int(t.error_code) == E.none
            and not (self.config.exclude_internal_topics and (getattr(t, "is_internal", False)
                                                              or str(t.name).startswith("__")))
        ]
        if self.subscriptions.match_pattern(names):
            self.client.topics.update(self.subscriptions.topics)
            self.client.request_update()
            self.request_rejoin(f"the pattern now matches {sorted(self.subscriptions.topics)}")

    def subscription_changed(self) -> None:
        self._next_pattern_refresh = 0.0
        self.request_rejoin("the subscription changed")

    # -- rebalance callbacks ----------------------------------------------------------------------

    async def _on_join_prepare(self) -> None:
        subs = self.subscriptions
        if self.generation.valid:
            await self._commit_on_rebalance(subs.consumed_offsets())
        owned = sorted(subs.assigned())
        if not self.generation.valid:
            if owned:
                log.info("group %s: partitions lost (the generation is over): %s", self.group_id, owned)
                self.metrics.partitions_lost_total += len(owned)
                await self.listener.lost(owned)
                self._set_assignment([])
        elif self.protocol is RebalanceProtocol.EAGER:
            if owned:
                self.metrics.partitions_revoked_total += len(owned)
                await self.listener.revoked(owned)
            self._set_assignment([])
        else:
            gone = [tp for tp in owned if tp.topic not in subs.topics]
            if gone:
                self.metrics.partitions_revoked_total += len(gone)
                await self.listener.revoked(gone)
                self._set_assignment([tp for tp in owned if tp.topic in subs.topics])

    async def _on_join_complete(self, generation: Generation, data: bytes) -> None:
        subs = self.subscriptions
        try:
            assignment = decode_assignment(data)
        except ProtocolError as e:
            log.warning("group %s: undecodable assignment (%s); rejoining", self.group_id, e)
            self.request_rejoin("undecodable assignment")
            return
        assigned = set(assignment.partitions)
        unsubscribed = {tp.topic for tp in assigned} - subs.topics
        if unsubscribed and subs.type is SubscriptionType.AUTO_TOPICS:
            log.warning("group %s: assigned topics %s this member does not subscribe to", self.group_id,
                        sorted(unsubscribed))
        owned = set(subs.assigned())
        if self.protocol is RebalanceProtocol.COOPERATIVE:
            revoked = sorted(owned - assigned)
            if revoked:
                await self._commit_on_rebalance({tp: o for tp, o in subs.consumed_offsets().items() if tp in revoked})
                self.metrics.partitions_revoked_total += len(revoked)
                await self.listener.revoked(revoked)
                self.request_rejoin(f"partitions {revoked} were revoked")
        self._next_auto_commit = time.monotonic() + self.config.auto_commit_interval_ms / 1000
        self._set_assignment(sorted(assigned, key=lambda tp: (tp.topic, tp.partition)))
        self.client.topics.update(tp.topic for tp in assigned)
        if not self._metadata_snapshot:
            self._metadata_snapshot = {
                t: self.client.cluster.topics[t].num_partitions for t in subs.topics if t in self.client.cluster.topics
            }
        added = sorted(assigned - owned)
        self.metrics.partitions_assigned_total += len(added)
        log.info("group %s: member %s generation %d: assigned %s (added %s)", self.group_id, generation.member_id,
                 generation.generation_id, sorted(assigned), added)
        await self.listener.assigned(added)

    def _set_assignment(self, partitions: list[TopicPartition]) -> None:
        self.subscriptions.assign_from_subscribed(partitions)
        self.on_assignment_change(partitions)

    async def _commit_on_rebalance(self, positions: Mapping[TopicPartition, int]) -> None:
        if not self.config.enable_auto_commit or not positions:
            return
        try:
            await self.commit({tp: OffsetAndMetadata(o) for tp, o in positions.items()},
                              self.config.default_api_timeout_ms / 1000)
        except KafkaError as e:
            log.warning("group %s: auto-commit before the rebalance failed: %s", self.group_id, e)

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

        def fill(m: Any, version: int) -> Any:
            return build(m.HeartbeatRequest, group_id=self.group_id, generation_id=g.generation_id,
                         member_id=g.member_id, group_instance_id=self.group_instance_id)

        response = await self._request(HEARTBEAT, fill)
        self.metrics.heartbeat_total += 1
        code = int(response.error_code)
        if self.generation is not g or self.state is not MemberState.STABLE:
            return  # a rebalance started meanwhile; this answer is about the old generation
        if code == E.none:
            self._last_heartbeat_ok = time.monotonic()
        elif code == E.rebalance_in_progress:
            self._last_heartbeat_ok = time.monotonic()
            self.request_rejoin("the group is rebalancing")
        elif code in (E.illegal_generation, E.unknown_member_id, E.fenced_instance_id):
            name = error_for(code).name
            if code == E.fenced_instance_id:
                self._fatal = error_for(code, f"group.instance.id {self.group_instance_id} was taken by another "
                                              "member")
            self.generation = NO_GENERATION
            if code == E.unknown_member_id:
                self.member_id = ""
            self.state = MemberState.UNJOINED
            self.request_rejoin(f"heartbeat answered {name}")
        elif code in _COORDINATOR_MOVED:
            self.mark_coordinator_unknown(error_for(code).name)
        else:
            raise error_for(code, "Heartbeat")

    # -- leaving ---------------------------------------------------------------------------------

    async def maybe_leave_group(self, reason: str) -> None:
        """LeaveGroup for a dynamic member (a static one keeps its place until its session
        times out, KIP-345), then forget the generation."""
        g = self.generation
        if self.group_instance_id is None and self.member_id and self.state is not MemberState.UNJOINED:
            member_id = self.member_id

            def fill(m: Any, version: int) -> Any:
                return build(m.LeaveGroupRequest, group_id=self.group_id, member_id=member_id,
                             members=(build(m.MemberIdentity, member_id=member_id, group_instance_id=None,
                                            reason=reason),))

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
        self._metadata_snapshot = {}

    async def on_leave_prepare(self) -> None:
        """Before leaving (close, unsubscribe): the owned partitions are revoked, or lost when
        the generation is already over."""
        owned = sorted(self.subscriptions.assigned())
        if owned and self.subscriptions.auto_assigned:
            if self.generation.valid:
                self.metrics.partitions_revoked_total += len(owned)
                await self.listener.revoked(owned)
            else:
                self.metrics.partitions_lost_total += len(owned)
                await self.listener.lost(owned)

    async def close(self, timeout_s: float) -> None:
        if self._closed:
            return
        if self._join_task is not None:
            self._join_task.cancel()
            with contextlib.suppress(BaseException):
                await self._join_task
            self._join_task = None
        subs = self.subscriptions
        if self.config.enable_auto_commit and (self.generation.valid or not subs.auto_assigned):
            positions = subs.consumed_offsets()
            if positions:
                try:
                    await self.commit({tp: OffsetAndMetadata(o) for tp, o in positions.items()}, timeout_s)
                except KafkaError as e:
                    log.warning("group %s: auto-commit on close failed: %s", self.group_id, e)
        if self._auto_commit_task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self._auto_commit_task, timeout_s)
        await self.on_leave_prepare()
        if subs.auto_assigned:
            await self.maybe_leave_group("the consumer is being closed")
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

    # -- offsets --------------------------------------------------------------------------------

    def _maybe_auto_commit(self) -> None:
        if not self.config.enable_auto_commit or time.monotonic() < self._next_auto_commit:
            return
        self._next_auto_commit = time.monotonic() + self.config.auto_commit_interval_ms / 1000
        if self._auto_commit_task is not None and not self._auto_commit_task.done():
            return
        if self.subscriptions.auto_assigned and self.state is not MemberState.STABLE:
            return
        positions = self.subscriptions.consumed_offsets()
        if positions:
            self._auto_commit_task = self.commit_async({tp: OffsetAndMetadata(o) for tp, o in positions.items()})

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                     callback: Callable[[Mapping[TopicPartition, OffsetAndMetadata], KafkaError | None],
                                        Awaitable[None] | None] | None = None) -> asyncio.Task[None]:
        async def run() -> None:
            try:
                await self.commit(offsets, self.config.default_api_timeout_ms / 1000)
            except KafkaError as e:
                log.warning("group %s: asynchronous commit failed: %s", self.group_id, e)
                if callback is not None:
                    result = callback(offsets, e)
                    if result is not None:
                        await result
                raise
            if callback is not None:
                result = callback(offsets, None)
                if result is not None:
                    await result

        task = asyncio.get_running_loop().create_task(run())
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return task

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout_s: float) -> None:
        """OffsetCommit, retried through coordinator moves until ``timeout_s``."""
        if not offsets:
            return
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                await self._commit_once(offsets)
                return
            except KafkaError as e:
                if not e.retriable or isinstance(e, RebalanceInProgressError):
                    raise
                log.debug("group %s: commit retried: %s", self.group_id, e)
                await self._backoff(deadline)

    def _commit_generation(self) -> Generation:
        if not self.subscriptions.auto_assigned:
            return NO_GENERATION  # a "simple" group: offsets only, no membership
        if self.state is not MemberState.STABLE:
            raise RebalanceInProgressError(
                "Offset commit cannot be completed since the consumer is undergoing a rebalance for auto "
                "partition assignment. You can try completing the rebalance by calling poll() and then retry "
                "the operation.")
        return self.generation

    async def _commit_once(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        g = self._commit_generation()
        by_topic: dict[str, list[tuple[int, OffsetAndMetadata]]] = {}
        for tp, om in offsets.items():
            by_topic.setdefault(tp.topic, []).append((tp.partition, om))

        def fill(m: Any, version: int) -> Any:
            return build(
                m.OffsetCommitRequest, group_id=self.group_id, generation_id_or_member_epoch=g.generation_id,
                member_id=g.member_id, group_instance_id=self.group_instance_id,
                retention_time=datetime.timedelta(milliseconds=-1),
                topics=tuple(
                    build(m.OffsetCommitRequestTopic, name=topic, partitions=tuple(
                        build(m.OffsetCommitRequestPartition, partition_index=p, committed_offset=om.offset,
                              committed_leader_epoch=om.leader_epoch, committed_metadata=om.metadata or "",
                              commit_timestamp=-1)
                        for p, om in parts
                    ))
                    for topic, parts in by_topic.items()
                ),
            )

        started = time.monotonic()
        response = await self._request(ApiKey.OFFSET_COMMIT, fill)
        self.metrics.commit_latency(time.monotonic() - started)
        first_error: KafkaError | None = None
        for t in response.topics:
            for p in t.partitions:
                code = int(p.error_code)
                if code != E.none and first_error is None:
                    first_error = self._commit_error(code, f"{t.name}-{p.partition_index}")
        if first_error is not None:
            raise first_error

    def _commit_error(self, code: int, where: str) -> KafkaError:
        if code in _COORDINATOR_MOVED or code == E.request_timed_out:
            self.mark_coordinator_unknown(error_for(code).name)
            return error_for(code, f"OffsetCommit {where}")
        if code in (E.unknown_member_id, E.illegal_generation):
            if code == E.unknown_member_id:
                self.member_id = ""
            self.generation = NO_GENERATION
            self.state = MemberState.UNJOINED
            self.request_rejoin(f"OffsetCommit answered {error_for(code).name}")
            return CommitFailedError(
                "Commit cannot be completed since the group has already rebalanced and assigned the partitions to "
                f"another member ({error_for(code).name} for {where}). The consumer rejoins on its next poll().")
        if code == E.rebalance_in_progress:
            self.request_rejoin("OffsetCommit answered REBALANCE_IN_PROGRESS")
            return RebalanceInProgressError(f"OffsetCommit {where}: the group is rebalancing; poll() and retry")
        if code == E.fenced_instance_id:
            error = error_for(code, f"OffsetCommit {where}")
            self._fatal = error
            return error
        return error_for(code, f"OffsetCommit {where}")

    async def fetch_committed(self, tps: Iterable[TopicPartition], timeout_s: float,
                              require_stable: bool) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """OffsetFetch; retried while the coordinator moves, loads, or (KIP-447) while a
        transaction holding offsets of these partitions is still open."""
        wanted = sorted(set(tps))
        if not wanted:
            return {}
        deadline = time.monotonic() + timeout_s
        by_topic: dict[str, list[int]] = {}
        for tp in wanted:
            by_topic.setdefault(tp.topic, []).append(tp.partition)

        def fill(m: Any, version: int) -> Any:
            if version >= 8:
                topics = tuple(build(m.OffsetFetchRequestTopics, name=t, partition_indexes=tuple(ps))
                               for t, ps in by_topic.items())
                return build(m.OffsetFetchRequest, require_stable=require_stable, groups=(
                    build(m.OffsetFetchRequestGroup, group_id=self.group_id, member_id=None, member_epoch=-1,
                          topics=topics),))
            topics = tuple(build(m.OffsetFetchRequestTopic, name=t, partition_indexes=tuple(ps))
                           for t, ps in by_topic.items())
            return build(m.OffsetFetchRequest, group_id=self.group_id, topics=topics, require_stable=require_stable)

        while True:
            response = await self._retriable_request(ApiKey.OFFSET_FETCH, fill, deadline=deadline)
            if response is None:
                continue
            if hasattr(response, "groups"):
                group = response.groups[0]
                code, topics = int(group.error_code), group.topics
            else:
                code, topics = int(getattr(response, "error_code", 0)), response.topics
            if code != E.none:
                if code in _COORDINATOR_MOVED:
                    self.mark_coordinator_unknown(error_for(code).name)
                if code in _COORDINATOR_MOVED or code == E.coordinator_load_in_progress:
                    await self._backoff(deadline)
                    continue
                raise error_for(code, f"OffsetFetch for group {self.group_id}")
            result: dict[TopicPartition, OffsetAndMetadata | None] = dict.fromkeys(wanted)
            unstable = False
            for t in topics:
                for p in t.partitions:
                    tp = TopicPartition(str(t.name), int(p.partition_index))
                    pcode = int(p.error_code)
                    if pcode == E.unstable_offset_commit:
                        unstable = True
                    elif pcode == E.unknown_topic_or_partition:
                        log.debug("OffsetFetch: %s does not exist", tp)
                    elif pcode != E.none:
                        raise error_for(pcode, f"OffsetFetch {tp.topic}-{tp.partition}")
                    elif int(p.committed_offset) >= 0:
                        result[tp] = OffsetAndMetadata(int(p.committed_offset), p.metadata,
                                                       int(getattr(p, "committed_leader_epoch", -1)))
            if unstable:
                log.debug("group %s: offsets pending in an open transaction; retrying", self.group_id)
                await self._backoff(deadline)
                continue
            return result

"""What a consumer's group membership is for (Kafka's ConsumerCoordinator, classic
protocol), over ``membership.GroupMembership`` (Java's AbstractCoordinator), which joins,
syncs, heartbeats and leaves.

What it owns: the protocols this member offers (its subscription per assignor), the
leader's assignment (every member's subscription decoded, the selected assignor run over
the topics' partition counts), the rebalance callbacks around a join, watching the
subscribed topics' partition counts and the pattern's matches, and committed offsets:
OffsetCommit (sync, async, auto) with the generation and member id, its error codes acted
on through ``_COMMIT_ERRORS``; OffsetFetch (``require_stable`` under read_committed, KIP-447).

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
from enum import Enum, auto
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from eoslog.client.aio_client import AioClient
from eoslog.client.consumer.assignors import (
    Assignor,
    Member,
    RebalanceProtocol,
    make_assignors,
    rebalance_protocol,
)
from eoslog.client.consumer.config import ConsumerConfig
from eoslog.client.consumer.errors import CommitFailedError
from eoslog.client.consumer.membership import (
    COORDINATOR_MOVED,
    NO_GENERATION,
    Generation,
    GroupMembership,
    MemberState,
)
from eoslog.client.consumer.metrics import ConsumerMetrics
from eoslog.client.consumer.subscription_state import SubscriptionState, SubscriptionType
from eoslog.client.errors import (
    KafkaError,
    RebalanceInProgressError,
    error_for,
)
from eoslog.client.types import OffsetAndMetadata, TopicPartition
from eoslog.client.versions import ApiVersionTable
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.consumer_protocol import (
    Assignment,
    ProtocolError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import build, request_types

if TYPE_CHECKING:
    from eoslog.protocol.requests import MetadataRequest, OffsetCommitRequest, OffsetFetchRequest
    from eoslog.protocol.responses import MetadataResponse, OffsetCommitResponse, OffsetFetchResponse

log = logging.getLogger(__name__)
E = ErrorCode


class _Commit(Enum):
    FIND_COORDINATOR = auto()
    REJOIN = auto()  # the generation is over: CommitFailedError
    REBALANCING = auto()
    FENCED = auto()


# OffsetCommit error codes (Java's OffsetCommitResponseHandler); any other code is raised as it is.
_COMMIT_ERRORS: dict[int, _Commit] = {
    E.not_coordinator: _Commit.FIND_COORDINATOR,
    E.coordinator_not_available: _Commit.FIND_COORDINATOR,
    E.request_timed_out: _Commit.FIND_COORDINATOR,
    E.unknown_member_id: _Commit.REJOIN,
    E.illegal_generation: _Commit.REJOIN,
    E.rebalance_in_progress: _Commit.REBALANCING,
    E.fenced_instance_id: _Commit.FENCED,
}


class RebalanceListener:
    """The consumer's rebalance callbacks; each gets the partitions, sorted."""

    async def revoked(self, partitions: list[TopicPartition]) -> None: ...

    async def assigned(self, partitions: list[TopicPartition]) -> None: ...

    async def lost(self, partitions: list[TopicPartition]) -> None: ...


class ConsumerCoordinator(GroupMembership):
    def __init__(self, config: ConsumerConfig, client: AioClient, subscriptions: SubscriptionState,
                 metrics: ConsumerMetrics, wakeup: Callable[[], None],
                 on_assignment_change: Callable[[Iterable[TopicPartition]], None]) -> None:
        super().__init__(config, client, metrics, wakeup)
        self.subscriptions = subscriptions
        self.on_assignment_change = on_assignment_change
        self.listener = RebalanceListener()
        self.assignors: list[Assignor] = make_assignors(config.partition_assignment_strategy)
        self.protocol = rebalance_protocol(self.assignors)
        self._next_auto_commit = time.monotonic() + config.auto_commit_interval_ms / 1000
        self._auto_commit_task: asyncio.Task[None] | None = None
        self._metadata_snapshot: dict[str, int] = {}
        self._next_pattern_refresh = 0.0

    # -- poll: drive the membership --------------------------------------------------------

    async def poll(self) -> None:
        """Called at each poll(): keep the membership going (a join started or finished, the
        rebalance callbacks run), commit when auto-commit is due."""
        self._last_poll = time.monotonic()
        if self._fatal is not None:
            raise self._fatal
        subs = self.subscriptions
        if subs.auto_assigned:
            if subs.type is SubscriptionType.AUTO_PATTERN:
                await self._maybe_refresh_pattern()
            self._check_metadata()
            await self.ensure_active_group()
        self._maybe_auto_commit()

    def time_to_next_poll(self) -> float:
        """How long poll() may wait for data before the coordinator needs it again."""
        if not self.config.enable_auto_commit:
            return float("inf")
        return max(0.0, self._next_auto_commit - time.monotonic())

    # -- join ---------------------------------------------------------------------------------

    def _subscription_for(self, assignor: Assignor) -> bytes:
        owned = tuple(self.subscriptions.assigned()) if self.protocol is RebalanceProtocol.COOPERATIVE else ()
        generation = self.generation.generation_id
        return encode_subscription(Subscription(
            topics=tuple(sorted(self.subscriptions.topics)), user_data=assignor.user_data(generation),
            owned_partitions=owned, generation_id=generation, rack_id=self.config.client_rack or None,
        ))

    def join_protocols(self) -> list[tuple[str, bytes]]:
        return [(a.name, self._subscription_for(a)) for a in self.assignors]

    async def perform_assignment(self, protocol_name: str, raw_members: Iterable[Any]) -> dict[str, bytes]:
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

        def make(versions: ApiVersionTable) -> MetadataRequest:
            version = versions.pick(ApiKey.METADATA, 12, 1)
            m = request_types(ApiKey.METADATA, version)
            return cast("MetadataRequest", build(m.MetadataRequest, topics=None, allow_auto_topic_creation=False,
                         include_cluster_authorized_operations=False, include_topic_authorized_operations=False))

        try:
            response: MetadataResponse = await self.client.send(make)
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

    async def on_join_prepare(self) -> None:
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

    async def on_join_complete(self, generation: Generation, data: bytes) -> None:
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

    def on_left(self) -> None:
        self._metadata_snapshot = {}

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

    # -- leaving ---------------------------------------------------------------------------------

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
        await self.cancel_join()
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
        await self.close_membership()

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

        def fill(m: ModuleType, version: int) -> OffsetCommitRequest:
            return cast("OffsetCommitRequest", build(
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
            ))

        started = time.monotonic()
        response: OffsetCommitResponse = await self._request(ApiKey.OFFSET_COMMIT, fill)
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
        """The error to raise for an OffsetCommit partition code, acting on it first as
        ``_COMMIT_ERRORS`` says."""
        action = _COMMIT_ERRORS.get(code)
        name = error_for(code).name
        if action is _Commit.FIND_COORDINATOR:
            self.mark_coordinator_unknown(name)
        elif action is _Commit.REJOIN:
            self.lose_membership(f"OffsetCommit answered {name}", forget_member_id=code == E.unknown_member_id)
            return CommitFailedError(
                "Commit cannot be completed since the group has already rebalanced and assigned the partitions to "
                f"another member ({name} for {where}). The consumer rejoins on its next poll().")
        elif action is _Commit.REBALANCING:
            self.request_rejoin("OffsetCommit answered REBALANCE_IN_PROGRESS")
            return RebalanceInProgressError(f"OffsetCommit {where}: the group is rebalancing; poll() and retry")
        error = error_for(code, f"OffsetCommit {where}")
        if action is _Commit.FENCED:
            self._fatal = error
        return error

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

        def fill(m: ModuleType, version: int) -> OffsetFetchRequest:
            if version >= 8:
                topics = tuple(build(m.OffsetFetchRequestTopics, name=t, partition_indexes=tuple(ps))
                               for t, ps in by_topic.items())
                return cast("OffsetFetchRequest", build(m.OffsetFetchRequest, require_stable=require_stable, groups=(
                    build(m.OffsetFetchRequestGroup, group_id=self.group_id, member_id=None, member_epoch=-1,
                          topics=topics),)))
            topics = tuple(build(m.OffsetFetchRequestTopic, name=t, partition_indexes=tuple(ps))
                           for t, ps in by_topic.items())
            return cast("OffsetFetchRequest", build(
                m.OffsetFetchRequest, group_id=self.group_id, topics=topics, require_stable=require_stable))

        while True:
            response: OffsetFetchResponse | None = await self._retriable_request(ApiKey.OFFSET_FETCH, fill,
                                                                                 deadline=deadline)
            if response is None:
                continue
            if hasattr(response, "groups"):
                group = response.groups[0]
                code, topics = int(group.error_code), group.topics
            else:
                code, topics = int(getattr(response, "error_code", 0)), response.topics
            if code != E.none:
                if code in COORDINATOR_MOVED:
                    self.mark_coordinator_unknown(error_for(code).name)
                if code in COORDINATOR_MOVED or code == E.coordinator_load_in_progress:
                    await self._backoff(deadline)
                    continue
                raise error_for(code, f"OffsetFetch for group {self.group_id}")
            result: dict[TopicPartition, OffsetAndMetadata | None] = dict.fromkeys(wanted)
            unstable: list[TopicPartition] = []
            for t in topics:
                for p in t.partitions:
                    tp = TopicPartition(str(t.name), int(p.partition_index))
                    pcode = int(p.error_code)
                    if pcode == E.unstable_offset_commit:
                        unstable.append(tp)
                    elif pcode == E.unknown_topic_or_partition:
                        log.debug("OffsetFetch: %s does not exist", tp)
                    elif pcode != E.none:
                        raise error_for(pcode, f"OffsetFetch {tp.topic}-{tp.partition}")
                    elif int(p.committed_offset) >= 0:
                        result[tp] = OffsetAndMetadata(int(p.committed_offset), p.metadata,
                                                       int(getattr(p, "committed_leader_epoch", -1)))
            if unstable:
                # The coordinator answered: it is a transaction's commit or abort (its marker in
                # __consumer_offsets) that has not come, and the timeout must say so.
                log.debug("group %s: offsets pending in an open transaction; retrying", self.group_id)
                names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in unstable)
                await self._backoff(deadline, f"OffsetFetch for group {self.group_id}: the committed offsets of "
                                              f"{names} were still pending in an open transaction "
                                              f"(UNSTABLE_OFFSET_COMMIT) after {timeout_s:g} s")
                continue
            return result

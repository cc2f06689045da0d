"""Membership of a consumer group through the consumer protocol (KIP-848,
``group.protocol=consumer``): Java's ConsumerMembershipManager over AbstractMembershipManager,
with its heartbeat request manager. The classic counterpart is ``coordinator.ConsumerCoordinator``
over ``membership.GroupMembership``; this class takes the coordinator connection, the commits,
the offsets lookups and the rebalance callbacks' plumbing from it and replaces the membership.

What it owns: the member id (made here, KIP-1082) and member epoch; the ConsumerGroupHeartbeat
loop — the subscription (topic names, or a regular expression the coordinator matches in RE2/J
syntax), the owned partitions, ``group.remote.assignor``, ``group.instance.id`` — at the interval
the coordinator gives; the target assignment it answers (topic ids, resolved to names through
Metadata) and its reconciliation, run by ``poll()`` as Java runs it in the application thread:

1. partitions owned but not in the target are revoked first: their positions committed
   (with auto-commit), ``on_revoke`` called, and only then are they dropped from the
   assignment, which is what the next heartbeat reports as owned — so the coordinator hands
   them to another member only after this one has stopped reading and committing them;
2. then the new ones are added and ``on_assign`` called with them;
3. then a heartbeat acknowledges the new assignment at once.

The member epoch is the generation of commits: OffsetCommit and a transaction's offsets
(``group_metadata()``) carry it, and the coordinator refuses them once it is stale
(STALE_MEMBER_EPOCH), which fences a zombie of an exactly-once application (KIP-447).

Errors, as Java's AbstractHeartbeatRequestManager: FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID
fence the member — its partitions are *lost* (``on_lost``, nothing committed), and it joins
again with epoch 0 and the same member id; a moved coordinator is found again; anything
unexpected is fatal, raised by the next ``poll()``. Leaving sends epoch -1, or -2 for a static
member, whose partitions wait for its return until its session times out.

What it must never do: fetch records, or report as owned a partition it is still revoking.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum, auto
from types import ModuleType
from typing import TYPE_CHECKING, cast

from eoslog.client.aio_client import AioClient
from eoslog.client.consumer.config import ConsumerConfig
from eoslog.client.consumer.coordinator import ConsumerCoordinator
from eoslog.client.consumer.errors import CommitFailedError
from eoslog.client.consumer.membership import NO_GENERATION, Generation, MemberState
from eoslog.client.consumer.metrics import ConsumerMetrics
from eoslog.client.consumer.subscription_state import SubscriptionState, SubscriptionType
from eoslog.client.errors import KafkaError, error_for
from eoslog.client.types import OffsetAndMetadata, TopicPartition
from eoslog.client.versions import ApiVersionTable
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import build, request_types

if TYPE_CHECKING:
    from eoslog.protocol.requests import ConsumerGroupHeartbeatRequest, MetadataRequest
    from eoslog.protocol.responses import ConsumerGroupHeartbeatResponse, MetadataResponse

log = logging.getLogger(__name__)
E = ErrorCode

HEARTBEAT_VERSION = 1  # v1: the member makes its own id (KIP-1082)
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class Phase(Enum):
    """Java's MemberState, as far as this member has them."""

    UNSUBSCRIBED = auto()  # not in the group (yet, or any more)
    JOINING = auto()  # epoch 0 sent, no answer yet
    STABLE = auto()  # in the group, its assignment reconciled and acknowledged
    RECONCILING = auto()  # a target to reach; poll() runs the revocation and assignment
    ACKNOWLEDGING = auto()  # reconciled: the next heartbeat (sent at once) reports it
    RELEASING = auto()  # fenced, or gone past max.poll.interval.ms: poll() gives the partitions up as lost
    FATAL = auto()


class _Answer(Enum):
    OK = auto()
    FIND_COORDINATOR = auto()  # and heartbeat again as soon as it is found
    RETRY = auto()  # after the back-off
    FENCED = auto()
    FATAL = auto()


# ConsumerGroupHeartbeat error codes (Java's AbstractHeartbeatRequestManager.onErrorResponse);
# any code not here is fatal, as Java's default branch makes it.
_HEARTBEAT_ERRORS: dict[int, _Answer] = {
    E.none: _Answer.OK,
    E.not_coordinator: _Answer.FIND_COORDINATOR,
    E.coordinator_not_available: _Answer.FIND_COORDINATOR,
    E.coordinator_load_in_progress: _Answer.RETRY,
    E.fenced_member_epoch: _Answer.FENCED,
    E.unknown_member_id: _Answer.FENCED,
}


@dataclass(frozen=True)
class Target:
    """An assignment the coordinator answered, by topic id, and the epoch it came with."""

    epoch: int
    partitions: Mapping[uuid.UUID, tuple[int, ...]]


def new_member_id() -> str:
    """A random id as Java's ``Uuid.randomUuid().toString()`` writes one (URL-safe base64)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ConsumerGroupMembership(ConsumerCoordinator):
    def __init__(self, config: ConsumerConfig, client: AioClient, subscriptions: SubscriptionState,
                 metrics: ConsumerMetrics, wakeup: Callable[[], None],
                 on_assignment_change: Callable[[Iterable[TopicPartition]], None]) -> None:
        super().__init__(config, client, subscriptions, metrics, wakeup, on_assignment_change)
        self.member_id = new_member_id()
        self.member_epoch = 0
        self.phase = Phase.UNSUBSCRIBED
        self.target: Target | None = None
        self._reconciled: Target | None = None
        self._ids: dict[str, uuid.UUID] = {}  # topic name → id, from targets and Metadata
        self._interval_s = config.heartbeat_interval_ms / 1000  # until the coordinator says
        self._urgent = False
        # What the coordinator has from this member (Java's HeartbeatState.SentFields): a heartbeat
        # carries only what changed, and everything (a full request) after a join or a failure. A full
        # request is answered with the whole assignment each time; a partial one only when it changed.
        self._sent: dict[str, object] | None = None

    # -- the member epoch is the generation of commits -------------------------------------------

    def _set_epoch(self, epoch: int) -> None:
        self.member_epoch = epoch
        if epoch > 0:
            self.generation = Generation(epoch, self.member_id)
            self.state = MemberState.STABLE  # commits may go (the epoch fences them, not a rebalance)
        else:
            self.generation = NO_GENERATION
            self.state = MemberState.UNJOINED

    def request_rejoin(self, why: str) -> None:
        """The subscription changed (or a client-side pattern matched more): say so now."""
        log.info("group %s: member %s heartbeats at once: %s", self.group_id, self.member_id, why)
        self._heartbeat_now()

    def _heartbeat_now(self) -> None:
        self._urgent = True
        self._heartbeat_wakeup.set()
        self.wakeup()

    # -- poll: join, release, reconcile ------------------------------------------------------------

    async def poll(self) -> None:
        self._last_poll = time.monotonic()
        if self._fatal is not None:
            raise self._fatal
        subs = self.subscriptions
        if subs.auto_assigned and not self._closed:
            if subs.type is SubscriptionType.AUTO_PATTERN:
                await self._maybe_refresh_pattern()
            if self.phase is Phase.RELEASING:
                await self._release_as_lost()
            if self.phase is Phase.UNSUBSCRIBED:
                self.phase = Phase.JOINING
                self._set_epoch(0)
                self._heartbeat_now()
            elif self.target is not None and self.target != self._reconciled:
                await self._reconcile(self.target)
            self._ensure_heartbeat()
        self._maybe_auto_commit()

    async def _release_as_lost(self) -> None:
        """Fenced (or past max.poll.interval.ms): the partitions are another member's now — no
        commit, ``on_lost`` — and the member joins again with epoch 0 (Java's transitionToFenced)."""
        owned = sorted(self.subscriptions.assigned())
        self.target = self._reconciled = None
        if owned:
            log.info("group %s: member %s lost %s", self.group_id, self.member_id, owned)
            self.metrics.partitions_lost_total += len(owned)
            await self.listener.lost(owned)
        self._set_assignment([])
        self.phase = Phase.UNSUBSCRIBED

    async def _reconcile(self, target: Target) -> None:
        names = await self._topic_names(target.partitions)
        if names is None:
            return  # a topic id not in the metadata yet: the next poll tries again
        subs = self.subscriptions
        assigned = {TopicPartition(names[tid], p) for tid, ps in target.partitions.items() for p in ps}
        owned = set(subs.assigned())
        revoked = sorted(owned - assigned)
        added = sorted(assigned - owned)
        if revoked:
            # Revoke before assigning, and commit before revoking: the partitions stay owned (and
            # reported so by the heartbeats) until the callback is done.
            await self._commit_on_rebalance({tp: o for tp, o in subs.consumed_offsets().items() if tp in revoked})
            self.metrics.partitions_revoked_total += len(revoked)
            await self.listener.revoked(revoked)
        if self.phase in (Phase.RELEASING, Phase.UNSUBSCRIBED, Phase.FATAL):
            return  # fenced or left during the callbacks: the release or the leave decides
        if subs.type is SubscriptionType.AUTO_REGEX:
            subs.topics = frozenset(tp.topic for tp in assigned)
        self.client.topics.update(tp.topic for tp in assigned)
        self._set_assignment(sorted(assigned))
        self._reconciled = target
        self.metrics.partitions_assigned_total += len(added)
        self.metrics.rebalance_total += 1
        log.info("group %s: member %s epoch %d: assigned %s (added %s, revoked %s)", self.group_id, self.member_id,
                 target.epoch, sorted(assigned), added, revoked)
        await self.listener.assigned(added)
        if self.phase is Phase.RECONCILING and self.target == target:
            self.phase = Phase.ACKNOWLEDGING  # (a newer target waits for the next poll)
        self._heartbeat_now()

    async def _topic_names(self, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str] | None:
        """The names of ``ids`` from the metadata the client has, else from Metadata for every
        topic; None when one is still unknown (created a moment ago, say)."""
        known = {tid: name for name, tid in self._ids.items()}
        known.update(self.client.cluster.topic_names_by_id())
        wanted = set(ids)
        if wanted - known.keys():
            def make(versions: ApiVersionTable) -> MetadataRequest:
                version = versions.pick(ApiKey.METADATA, 12, 10)
                m = request_types(ApiKey.METADATA, version)
                return cast("MetadataRequest", build(
                    m.MetadataRequest, topics=None, allow_auto_topic_creation=False,
                    include_cluster_authorized_operations=False, include_topic_authorized_operations=False))

            try:
                response: MetadataResponse = await self.client.send(make)
            except KafkaError as e:
                log.info("group %s: cannot resolve the assigned topic ids: %s", self.group_id, e)
                return None
            for t in response.topics:
                tid = getattr(t, "topic_id", None)  # Metadata v10+
                if int(t.error_code) == E.none and t.name is not None and tid is not None:
                    known[tid] = str(t.name)
        if wanted - known.keys():
            log.info("group %s: assigned topic ids %s not in the metadata yet", self.group_id,
                     sorted(str(i) for i in wanted - known.keys()))
            return None
        self._ids.update({known[tid]: tid for tid in wanted})
        return {tid: known[tid] for tid in wanted}

    # -- heartbeats ----------------------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        next_at = time.monotonic()
        while not self._closed:
            now = time.monotonic()
            sending = self.phase in (Phase.JOINING, Phase.STABLE, Phase.RECONCILING, Phase.ACKNOWLEDGING)
            if not sending or (now < next_at and not self._urgent):
                self._heartbeat_wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._heartbeat_wakeup.wait(), next_at - now if sending else None)
                continue
            if now - self._last_poll > self.config.max_poll_interval_ms / 1000:
                log.warning("group %s: no poll() within max.poll.interval.ms=%d; leaving the group so that its "
                            "partitions go to others", self.group_id, self.config.max_poll_interval_ms)
                await self._send_leave()
                self.phase = Phase.RELEASING  # the next poll() gives them up and joins again
                continue
            self._urgent = False
            next_at = now + self._interval_s
            try:
                await self._heartbeat()
            except KafkaError as e:
                if getattr(e, "code", None) == E.unsupported_version:
                    self.phase = Phase.FATAL  # the broker does not serve the consumer protocol
                    self._fatal = error_for(E.unsupported_version, "The cluster doesn't support the consumer group "
                                            "protocol (ConsumerGroupHeartbeat): set group.protocol=classic")
                    self.wakeup()
                    continue
                log.debug("group %s: heartbeat failed: %s", self.group_id, e)
                next_at = time.monotonic() + self._retry_s
            except Exception:
                log.exception("group %s: heartbeat", self.group_id)
                next_at = time.monotonic() + self._retry_s

    def _owned_by_id(self) -> dict[uuid.UUID, list[int]] | None:
        """What this member owns now, by topic id — None when a topic's id is unknown (the
        coordinator then keeps what it knew)."""
        out: dict[uuid.UUID, list[int]] = {}
        for tp in sorted(self.subscriptions.assigned()):
            tid = self._ids.get(tp.topic)
            if tid is None:
                return None
            out.setdefault(tid, []).append(tp.partition)
        return out

    def _fields(self) -> dict[str, object]:
        """Every field a full heartbeat carries, as it is now."""
        subs = self.subscriptions
        regex = subs.regex if subs.type is SubscriptionType.AUTO_REGEX else None
        owned = {} if self.phase is Phase.JOINING else self._owned_by_id()
        return {
            "rebalance_timeout_ms": self.config.max_poll_interval_ms,
            "names": None if regex is not None else tuple(sorted(subs.topics)),
            "regex": regex,
            "rack": self.config.client_rack or None,
            "assignor": self.config.group_remote_assignor,
            "owned": None if owned is None else tuple((tid, tuple(ps)) for tid, ps in owned.items()),
        }

    async def _heartbeat(self) -> None:
        epoch, phase = self.member_epoch, self.phase
        now = self._fields()
        sent = None if epoch == 0 else self._sent

        def changed(name: str) -> object:
            return now[name] if sent is None or sent.get(name) != now[name] else None

        owned = cast("tuple[tuple[uuid.UUID, tuple[int, ...]], ...] | None", changed("owned"))

        def fill(m: ModuleType, version: int) -> ConsumerGroupHeartbeatRequest:
            return cast("ConsumerGroupHeartbeatRequest", build(
                m.ConsumerGroupHeartbeatRequest, group_id=self.group_id, member_id=self.member_id, member_epoch=epoch,
                instance_id=self.group_instance_id, rack_id=changed("rack"),
                rebalance_timeout=datetime.timedelta(milliseconds=cast("int | None", changed("rebalance_timeout_ms"))
                                                     or -1),
                subscribed_topic_names=changed("names"), subscribed_topic_regex=changed("regex"),
                server_assignor=changed("assignor"),
                topic_partitions=None if owned is None else tuple(
                    build(m.TopicPartitions, topic_id=tid, partitions=ps) for tid, ps in owned),
            ))

        self._sent = None  # until the answer says the coordinator has it
        response: ConsumerGroupHeartbeatResponse = await self._request(ApiKey.CONSUMER_GROUP_HEARTBEAT, fill)
        self.metrics.heartbeat_total += 1
        if self.phase is not phase or self.member_epoch != epoch:
            return  # fenced, left or answered meanwhile: this answer is about what was
        code = int(response.error_code)
        if code == E.none:
            self._sent = dict(now)
            if now["owned"] is None and sent is not None:  # not sent (a topic id unknown): what it had
                self._sent["owned"] = sent.get("owned")
        action = _HEARTBEAT_ERRORS.get(code, _Answer.FATAL)
        if action is _Answer.OK:
            self._on_answer(response)
        elif action is _Answer.FIND_COORDINATOR:
            self.mark_coordinator_unknown(error_for(code).name)
            self._urgent = True
        elif action is _Answer.FENCED:
            log.info("group %s: member %s epoch %d fenced (%s); it rejoins", self.group_id, self.member_id, epoch,
                     error_for(code).name)
            self._set_epoch(0)
            self.phase = Phase.RELEASING
            self.wakeup()
        elif action is _Answer.FATAL:
            self.phase = Phase.FATAL
            self._fatal = error_for(code, f"ConsumerGroupHeartbeat for group {self.group_id}: "
                                          f"{response.error_message or ''}")
            self.wakeup()
        else:
            raise error_for(code, "ConsumerGroupHeartbeat")  # retried after the back-off

    def _on_answer(self, response: ConsumerGroupHeartbeatResponse) -> None:
        self._last_heartbeat_ok = time.monotonic()
        if response.member_id:
            self.member_id = str(response.member_id)
        self._set_epoch(int(response.member_epoch))
        interval_ms = int(response.heartbeat_interval.total_seconds() * 1000)
        if interval_ms > 0:
            self._interval_s = interval_ms / 1000
        if response.assignment is not None:
            self.target = Target(self.member_epoch, {
                t.topic_id: tuple(sorted(int(p) for p in t.partitions))
                for t in response.assignment.topic_partitions if t.topic_id is not None})
            self.phase = Phase.RECONCILING
            self.wakeup()
        elif self.phase in (Phase.JOINING, Phase.ACKNOWLEDGING):
            self.phase = Phase.STABLE if self.target == self._reconciled else Phase.RECONCILING

    # -- leaving -------------------------------------------------------------------------------------

    async def _send_leave(self) -> None:
        """ConsumerGroupHeartbeat with epoch -1 (-2 for a static member: its partitions wait
        for it until its session times out)."""
        if self.phase in (Phase.UNSUBSCRIBED, Phase.FATAL, Phase.RELEASING) and self.member_epoch <= 0:
            return
        epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH if self.group_instance_id else LEAVE_GROUP_MEMBER_EPOCH

        def fill(m: ModuleType, version: int) -> ConsumerGroupHeartbeatRequest:
            return cast("ConsumerGroupHeartbeatRequest", build(
                m.ConsumerGroupHeartbeatRequest, group_id=self.group_id, member_id=self.member_id, member_epoch=epoch,
                instance_id=self.group_instance_id, topic_partitions=None))

        self.phase = Phase.UNSUBSCRIBED
        self._set_epoch(0)
        try:
            response: ConsumerGroupHeartbeatResponse = await asyncio.wait_for(
                self._request(ApiKey.CONSUMER_GROUP_HEARTBEAT, fill), self._request_timeout_s)
            log.info("group %s: member %s left with epoch %d (%s)", self.group_id, self.member_id, epoch,
                     error_for(int(response.error_code)).name)
        except (KafkaError, TimeoutError) as e:
            log.info("group %s: leaving failed: %s", self.group_id, e)

    async def maybe_leave_group(self, reason: str) -> None:
        log.info("group %s: member %s leaves: %s", self.group_id, self.member_id, reason)
        await self._send_leave()
        self.target = self._reconciled = None
        self.on_left()

    # -- commits ---------------------------------------------------------------------------------------

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout_s: float) -> None:
        """OffsetCommit with the member epoch; refused as stale (the epoch moved on while it was
        in flight) it is sent again with the new one, as Java's CommitRequestManager does."""
        deadline = time.monotonic() + timeout_s
        while True:
            epoch = self.member_epoch
            try:
                await super().commit(offsets, max(0.0, deadline - time.monotonic()))
                return
            except CommitFailedError:
                if self.member_epoch == epoch or self.member_epoch <= 0 or time.monotonic() >= deadline:
                    raise

    def _commit_error(self, code: int, where: str) -> KafkaError:
        if code in (E.stale_member_epoch, E.unknown_member_id):
            # The heartbeats decide about the membership; the commit only failed.
            return CommitFailedError(f"OffsetCommit {where} refused: {error_for(code).name} (member "
                                     f"{self.member_id}, epoch {self.member_epoch})")
        return super()._commit_error(code, where)


"""A share consumer's membership of its share group (Java's ShareMembershipManager and
ShareHeartbeatRequestManager): ShareGroupHeartbeat to the group's coordinator.

What it owns: the member id (a random Kafka Uuid, as Java's consumer makes it: the broker never
assigns one), the member epoch, the subscription (sent when it changed, and with every join), the
assignment the coordinator gives (topic ids, turned into names with the metadata), the heartbeat
loop at the interval the coordinator asks for, and leaving (epoch -1). Errors, as Java's
manager acts on them: the coordinator gone or loading → find it again; FENCED_MEMBER_EPOCH or
UNKNOWN_MEMBER_ID → join again with epoch 0 (the assignment is dropped); anything else (group
authorization, the group full, share groups not enabled) is fatal and raised by the next poll.

What it must never do: fetch or acknowledge records (the fetcher does).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import logging
import uuid
from collections.abc import Callable
from typing import Any

from eoslog.client.aio_client import AioClient
from eoslog.client.aio_connection import AioConnection, open_connection
from eoslog.client.errors import KafkaConnectionError, KafkaError, error_for
from eoslog.client.share.config import ShareConsumerConfig
from eoslog.client.types import TopicPartition
from eoslog.client.versions import ApiVersionTable
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import ErrorCode as E
from eoslog.protocol.messages import build, request_types

log = logging.getLogger(__name__)

GROUP_KEY_TYPE = 0
LEAVE_EPOCH = -1
_FIND_AGAIN = frozenset({E.not_coordinator, E.coordinator_not_available, E.coordinator_load_in_progress})
_JOIN_AGAIN = frozenset({E.fenced_member_epoch, E.unknown_member_id})


def new_member_id() -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: 22 characters of base64url."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class ShareMembership:
    def __init__(self, config: ShareConsumerConfig, client: AioClient, on_change: Callable[[], None]) -> None:
        self.config = config
        self.client = client
        self.group_id = config.group_id
        self.member_id = new_member_id()
        self.epoch = 0
        self.topics: tuple[str, ...] = ()
        self._topics_sent: tuple[str, ...] | None = None
        self.assignment: frozenset[TopicPartition] = frozenset()
        self._assigned_ids: dict[uuid.UUID, frozenset[int]] = {}
        self.fatal: KafkaError | None = None
        self._on_change = on_change
        self._conn: AioConnection | None = None
        self._task: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()
        self._interval_s = 1.0
        self._retry_s = config.retry_backoff_ms / 1000
        self._closed = False

    # -- subscription ---------------------------------------------------------------------------

    def subscribe(self, topics: tuple[str, ...]) -> None:
        self.topics = topics
        self.client.topics.update(topics)
        self.client.request_update()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"share-heartbeat-{self.group_id}")
        self._wakeup.set()

    def resolve(self) -> None:
        """Topic ids of the assignment that the metadata names now (a new topic learnt late)."""
        names = self.client.cluster.topic_names_by_id()
        assigned = frozenset(TopicPartition(names[t], p) for t, ps in self._assigned_ids.items() if t in names
                             for p in ps)
        if assigned != self.assignment:
            self.assignment = assigned
            log.info("share group %s: member %s assigned %s", self.group_id, self.member_id, sorted(assigned))
            self._on_change()
        if len(assigned) < sum(len(ps) for ps in self._assigned_ids.values()):
            self.client.request_update()

    # -- the coordinator ------------------------------------------------------------------------

    async def _coordinator(self) -> AioConnection:
        conn = self._conn
        if conn is not None and conn.connected:
            return conn

        def make(versions: ApiVersionTable) -> Any:
            version = versions.pick(ApiKey.FIND_COORDINATOR, 4)
            m = request_types(ApiKey.FIND_COORDINATOR, version)
            return build(m.FindCoordinatorRequest, key=self.group_id, key_type=GROUP_KEY_TYPE,
                         coordinator_keys=(self.group_id,))

        response = await self.client.send(make)
        found = response.coordinators[0] if hasattr(response, "coordinators") else response
        if int(found.error_code) != E.none:
            raise error_for(int(found.error_code), f"FindCoordinator for share group {self.group_id}")
        conn = await open_connection(
            str(found.host), int(found.port), node_id=2**31 - 1 - int(found.node_id),
            client_id=self.config.client_id, request_timeout_s=self.config.request_timeout_ms / 1000,
            connect_timeout_s=self.config.socket_connection_setup_timeout_ms / 1000, security=self.client.security)
        if self._closed:
            conn.close()
            raise KafkaConnectionError("the share consumer is closed")
        self._conn = conn
        return conn

    def _forget_coordinator(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- heartbeats -----------------------------------------------------------------------------

    async def _heartbeat(self, epoch: int) -> Any:
        conn = await self._coordinator()
        topics = self.topics if epoch == 0 or self.topics != self._topics_sent else None
        m = request_types(ApiKey.SHARE_GROUP_HEARTBEAT, conn.versions.pick(ApiKey.SHARE_GROUP_HEARTBEAT, 1, 1))
        response = await conn.request(build(
            m.ShareGroupHeartbeatRequest, group_id=self.group_id, member_id=self.member_id, member_epoch=epoch,
            rack_id=self.config.client_rack or None, subscribed_topic_names=topics))
        if int(response.error_code) == E.none and topics is not None:
            self._topics_sent = topics
        return response

    async def _run(self) -> None:
        while not self._closed:
            try:
                response = await self._heartbeat(self.epoch)
                self._handle(response)
            except (KafkaConnectionError, TimeoutError) as e:
                log.debug("share group %s: heartbeat failed: %s", self.group_id, e)
                self._forget_coordinator()
                await self._sleep(self._retry_s)
                continue
            except KafkaError as e:
                if e.retriable or int(getattr(e, "error_code", -1)) in _FIND_AGAIN:
                    self._forget_coordinator()
                    await self._sleep(self._retry_s)
                    continue
                self.fatal = e
                self._on_change()
                return
            if self.fatal is not None:
                return
            await self._sleep(self._interval_s if self.epoch > 0 else self._retry_s)

    async def _sleep(self, seconds: float) -> None:
        self._wakeup.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wakeup.wait(), seconds)

    def _handle(self, response: Any) -> None:
        code = int(response.error_code)
        if code in _FIND_AGAIN:
            self._forget_coordinator()
            return
        if code in _JOIN_AGAIN:
            log.info("share group %s: member %s %s: joining again", self.group_id, self.member_id, E(code).name)
            self.epoch = 0
            self._topics_sent = None
            self._assigned_ids = {}
            self.resolve()
            return
        if code != E.none:
            self.fatal = error_for(code, response.error_message or f"ShareGroupHeartbeat of {self.group_id}")
            self._on_change()
            return
        self.epoch = int(response.member_epoch)
        self._interval_s = max(0.05, response.heartbeat_interval / datetime.timedelta(seconds=1))
        if response.assignment is not None:
            self._assigned_ids = {t.topic_id: frozenset(int(p) for p in t.partitions)
                                  for t in response.assignment.topic_partitions if t.topic_id is not None}
            self.resolve()

    async def leave(self, timeout_s: float) -> None:
        """Leave the group (epoch -1); best effort within ``timeout_s``."""
        self._closed = True
        self._wakeup.set()
        if self._task is not None:
            self._task.cancel()
        if self.epoch > 0 or self.topics:
            try:
                await asyncio.wait_for(self._heartbeat(LEAVE_EPOCH), timeout_s)
            except (KafkaError, TimeoutError, OSError) as e:
                log.debug("share group %s: leaving failed: %s", self.group_id, e)
        self._forget_coordinator()

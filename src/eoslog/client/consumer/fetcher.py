"""Fetch and ListOffsets for the consumer (Kafka's Fetcher and OffsetFetcher).

What it owns: its own connection to each broker and one Fetch in flight on it at a time, for the assigned, non-paused
partitions with a position and no data still buffered — so while poll()'s caller works
on one batch of records the next is already on its way (Java's pipelining), except that
partitions already read to their end are not fetched alone while another partition of
the same broker is being drained (the broker would hold that fetch for fetch.max.wait.ms,
and the drained partition's next fetch behind it: they go together); the buffered
``CompletedFetch``es, handed out by ``collect`` up to ``max.poll.records``; the reaction
to a partition's error (OFFSET_OUT_OF_RANGE → ``auto.offset.reset``, or an error for poll
to raise when it is ``none``; NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION and the
other invalid-metadata codes → a metadata refresh, the partition is fetched again once the
leader is known); and ListOffsets: beginning/end offsets (the end is the last stable
offset under read_committed), offsets for times and position resets.

A response is used only for partitions whose position is still the offset fetched from:
a seek, pause or reassignment in between makes it stale and it is dropped, as in Kafka.
What it must never do: talk to the group coordinator.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import logging
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

from eoslog.client.aio_client import AioClient
from eoslog.client.aio_connection import AioConnection, open_connection
from eoslog.client.consumer.completed_fetch import CompletedFetch
from eoslog.client.consumer.config import ConsumerConfig
from eoslog.client.consumer.errors import OffsetOutOfRangeNoResetError
from eoslog.client.consumer.metrics import ConsumerMetrics
from eoslog.client.consumer.subscription_state import EARLIEST, NO_RESET, SubscriptionState
from eoslog.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError, error_for
from eoslog.client.types import ConsumerRecord, TopicPartition
from eoslog.client.versions import ApiVersionTable
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import build, request_types

if TYPE_CHECKING:
    from eoslog.protocol.requests import FetchRequest, ListOffsetsRequest
    from eoslog.protocol.responses import FetchResponse, ListOffsetsResponse

log = logging.getLogger(__name__)

FETCH_MAX_VERSION = 12  # v13+ names topics by id
FETCH_MIN_VERSION = 4  # record batch v2
LIST_OFFSETS_MAX_VERSION = 7
LIST_OFFSETS_MIN_VERSION = 2  # isolation_level
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
NO_SESSION_ID = 0
FINAL_EPOCH = -1  # with session id 0: a full fetch that creates no session (KIP-227)


class Fetcher:
    def __init__(self, client: AioClient, subscriptions: SubscriptionState, config: ConsumerConfig,
                 metrics: ConsumerMetrics, wakeup: Callable[[], None]) -> None:
        self.client = client
        self.subscriptions = subscriptions
        self.config = config
        self.metrics = metrics
        self.wakeup = wakeup
        self.isolation_level = config.isolation_level_code
        self._completed: deque[CompletedFetch] = deque()
        self._in_flight: dict[int, tuple[asyncio.Future[FetchResponse], dict[TopicPartition, int]]] = {}
        self._conns = FetchConnections(client, config, wakeup)
        self._errors: deque[KafkaError] = deque()
        self.blocked = False
        self._max_wait = datetime.timedelta(milliseconds=config.fetch_max_wait_ms)

    # -- fetching ------------------------------------------------------------------------------

    def buffered_partitions(self) -> set[TopicPartition]:
        return {c.tp for c in self._completed if not c.drained}

    def has_buffered(self) -> bool:
        subs = self.subscriptions
        return bool(self._errors) or any(not c.drained and subs.is_fetchable(c.tp) for c in self._completed)

    def send_fetches(self) -> int:
        """Send a Fetch to every leader of fetchable partitions that has none in flight;
        ``blocked`` tells whether some could not be sent (no leader, not connected yet)."""
        self.blocked = False
        buffered = self.buffered_partitions()
        cluster = self.client.cluster
        by_node: dict[int, list[tuple[TopicPartition, int]]] = defaultdict(list)
        draining: set[int] = set()  # nodes with a fetchable partition's data still buffered
        for tp in self.subscriptions.fetchable():
            if tp in buffered:
                draining.add(cluster.leader(tp))
                continue
            leader = cluster.leader(tp)
            if leader < 0:
                self.client.request_update()
                self.blocked = True
                continue
            if leader in self._in_flight:
                if not self._stale(leader):
                    continue
                # Its long poll would hold the connection for up to fetch.max.wait.ms:
                # drop it with its connection and fetch what is wanted now.
                log.debug("dropping a stale fetch to node %d", leader)
                del self._in_flight[leader]
                self._conns.abort(leader)
            position = self.subscriptions.assignment[tp].position
            assert position is not None
            by_node[leader].append((tp, position))
        sent = 0
        for node_id, partitions in by_node.items():
            if node_id in draining and all(self._caught_up(tp) for tp, _ in partitions):
                # The broker would hold this fetch for fetch.max.wait.ms, and with it the
                # node's next fetch of the partitions being drained: ask for these with them.
                continue
            conn = self._conns.ready(node_id)
            if conn is None:
                self.blocked = True
                continue  # connecting (which wakes poll) or backing off
            try:
                future = conn.request(self._fetch_request(conn.versions, partitions),
                                      timeout_s=self.client.request_timeout_s + self.config.fetch_max_wait_ms / 1000)
            except KafkaError as e:
                log.debug("fetch to node %d not sent: %s", node_id, e)
                continue
            offsets = dict(partitions)
            self._in_flight[node_id] = (future, offsets)
            future.add_done_callback(functools.partial(self._on_response, node_id, offsets, time.monotonic()))
            self.metrics.fetch_total += 1
            sent += 1
        return sent

    def _caught_up(self, tp: TopicPartition) -> bool:
        """Whether the last fetch of ``tp`` found nothing after its position."""
        state = self.subscriptions.assignment[tp]
        end = state.last_stable_offset if self.config.read_committed else state.high_watermark
        return state.position is not None and end >= 0 and state.position >= end

    def _stale(self, node_id: int) -> bool:
        """Whether the Fetch in flight to ``node_id`` asks only for partitions no longer
        fetched from those offsets (reassigned, sought, paused)."""
        _, offsets = self._in_flight[node_id]
        assignment = self.subscriptions.assignment
        for tp, offset in offsets.items():
            state = assignment.get(tp)
            if state is not None and state.position == offset and state.reset is None and not state.paused:
                return False
        return True

    def _fetch_request(self, versions: ApiVersionTable, partitions: list[tuple[TopicPartition, int]]) -> FetchRequest:
        version = versions.pick(ApiKey.FETCH, FETCH_MAX_VERSION, FETCH_MIN_VERSION)
        m = request_types(ApiKey.FETCH, version)
        by_topic: dict[str, list[object]] = defaultdict(list)
        for tp, offset in partitions:
            by_topic[tp.topic].append(build(
                m.FetchPartition, partition=tp.partition, current_leader_epoch=-1, fetch_offset=offset,
                last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=self.config.max_partition_fetch_bytes,
            ))
        return cast("FetchRequest", build(
            m.FetchRequest, cluster_id=None, replica_id=-1, max_wait=self._max_wait,
            min_bytes=self.config.fetch_min_bytes, max_bytes=self.config.fetch_max_bytes,
            isolation_level=self.isolation_level, session_id=NO_SESSION_ID, session_epoch=FINAL_EPOCH,
            topics=tuple(build(m.FetchTopic, topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
            forgotten_topics_data=(), rack_id=self.config.client_rack,
        ))

    def _on_response(self, node_id: int, offsets: dict[TopicPartition, int], sent_at: float,
                     future: asyncio.Future[FetchResponse]) -> None:
        if self._in_flight.get(node_id, (None,))[0] is future:
            del self._in_flight[node_id]
        self.wakeup()
        if future.cancelled():
            return
        error = future.exception()
        if error is not None:
            log.debug("fetch from node %d failed: %s", node_id, error)
            if isinstance(error, KafkaError) and error.invalid_metadata:
                self.client.request_update()
            return
        self.metrics.fetch_latency(time.monotonic() - sent_at)
        response = future.result()
        top = int(getattr(response, "error_code", 0))
        if top != ErrorCode.none:
            log.warning("fetch from node %d: %s", node_id, error_for(top).name)
            return
        for t in response.responses:
            for p in t.partitions:
                tp = TopicPartition(str(t.topic), int(p.partition_index))
                fetch_offset = offsets.get(tp)
                if fetch_offset is not None:
                    self._partition_response(tp, fetch_offset, p)

    def _partition_response(self, tp: TopicPartition, fetch_offset: int,
                            p: Any) -> None:  # a FetchResponse partition of any version
        subs = self.subscriptions
        state = subs.assignment.get(tp)
        if state is None or state.position != fetch_offset or state.reset is not None:
            return  # reassigned, sought or being reset meanwhile: stale
        code = int(p.error_code)
        if code == ErrorCode.none:
            state.high_watermark = int(p.high_watermark)
            state.last_stable_offset = int(p.last_stable_offset)
            state.log_start_offset = int(p.log_start_offset)
            records = p.records
            if records:
                aborted = p.aborted_transactions
                self._completed.append(CompletedFetch(
                    tp, fetch_offset, records,
                    aborted_transactions=[(int(a.producer_id), int(a.first_offset)) for a in aborted or ()],
                    read_committed=self.config.read_committed, check_crcs=self.config.check_crcs,
                    high_watermark=state.high_watermark, last_stable_offset=state.last_stable_offset,
                    log_start_offset=state.log_start_offset, key_deserializer=self.config.key_deserializer,
                    value_deserializer=self.config.value_deserializer,
                ))
                self.metrics.bytes_consumed_total += len(records)
            return
        if code == ErrorCode.offset_out_of_range:
            if subs.default_reset == NO_RESET:
                self._errors.append(OffsetOutOfRangeNoResetError(
                    f"Fetch position {fetch_offset} is out of range for partition {tp.topic}-{tp.partition} "
                    "and auto.offset.reset is none"
                ))
            else:
                log.info("fetch offset %d is out of range for %s-%d, resetting to %s", fetch_offset, tp.topic,
                         tp.partition, subs.default_reset)
                subs.request_reset([tp])
            return
        error = error_for(code, f"fetch {tp.topic}-{tp.partition} at offset {fetch_offset}")
        if error.invalid_metadata or code in (ErrorCode.unknown_topic_or_partition, ErrorCode.offset_not_available):
            self.client.request_update()
        elif error.retriable:
            log.debug("%s", error)
        else:
            self._errors.append(error)

    def collect(self, max_records: int) -> list[ConsumerRecord]:
        """Records from the buffered fetches, at most ``max_records``; raises a partition's
        error (OffsetOutOfRange with reset none, corrupt data, authorization) once."""
        if self._errors:
            raise self._errors.popleft()
        subs = self.subscriptions
        out: list[ConsumerRecord] = []
        kept: list[CompletedFetch] = []
        while self._completed and len(out) < max_records:
            completed = self._completed[0]
            state = subs.assignment.get(completed.tp)
            if completed.drained or state is None or state.position != completed.next_fetch_offset \
                    or state.reset is not None:
                self._completed.popleft()
                continue
            if state.paused:
                # Kept for when the partition is resumed (Java's pausedCompletedFetches).
                kept.append(self._completed.popleft())
                continue
            records = completed.take(max_records - len(out))
            if completed.next_fetch_offset > state.position:
                state.position = completed.next_fetch_offset
            out.extend(records)
            if completed.drained:
                self._completed.popleft()
        self._completed.extendleft(reversed(kept))
        self.metrics.records_consumed_total += len(out)
        return out

    def clear_buffered(self, keep: Iterable[TopicPartition] = ()) -> None:
        """Drop buffered data of partitions not in ``keep``."""
        keep = set(keep)
        self._completed = deque(c for c in self._completed if c.tp in keep)

    def lag_max(self) -> int:
        lags = [
            (s.last_stable_offset if self.config.read_committed else s.high_watermark) - s.position
            for s in self.subscriptions.assignment.values()
            if s.position is not None and s.high_watermark >= 0
        ]
        return max(lags, default=0)

    # -- ListOffsets ---------------------------------------------------------------------------

    async def list_offsets(self, targets: Mapping[TopicPartition, int], timeout_s: float,
                           isolation_level: int | None = None) -> dict[TopicPartition, tuple[int, int]]:
        """(offset, timestamp) per partition for each target timestamp (-1 latest, -2
        earliest); offset -1 when no record has that timestamp or a later one."""
        deadline = time.monotonic() + timeout_s
        level = self.isolation_level if isolation_level is None else isolation_level
        remaining = dict(targets)
        result: dict[TopicPartition, tuple[int, int]] = {}
        client = self.client
        while True:
            client.topics.update(tp.topic for tp in remaining)
            by_node: dict[int, dict[TopicPartition, int]] = defaultdict(dict)
            for tp, ts in remaining.items():
                leader = client.cluster.leader(tp)
                if leader >= 0:
                    by_node[leader][tp] = ts
            if by_node:
                answers = await asyncio.gather(
                    *(self._list_offsets_from(node, parts, level) for node, parts in by_node.items()),
                    return_exceptions=True,
                )
                for answer in answers:
                    if isinstance(answer, BaseException):
                        if not isinstance(answer, KafkaError) or not answer.retriable:
                            raise answer
                        client.request_update()
                        continue
                    for tp, outcome in answer.items():
                        if isinstance(outcome, KafkaError):
                            if not (outcome.retriable or outcome.invalid_metadata):
                                raise outcome
                            client.request_update()
                        else:
                            result[tp] = outcome
                            del remaining[tp]
            if not remaining:
                return result
            left = deadline - time.monotonic()
            if left <= 0:
                raise KafkaTimeoutError(
                    f"Failed to get offsets by times in {timeout_s * 1000:.0f}ms for "
                    f"{', '.join(f'{tp.topic}-{tp.partition}' for tp in sorted(remaining))}"
                )
            if any(client.cluster.leader(tp) < 0 for tp in remaining):
                with contextlib.suppress(KafkaTimeoutError):
                    await client.wait_for_update(min(left, self.config.request_timeout_ms / 1000))
            else:
                await asyncio.sleep(min(left, client.retry_backoff_s))

    async def _list_offsets_from(self, node_id: int, parts: Mapping[TopicPartition, int],
                                 level: int) -> dict[TopicPartition, tuple[int, int] | KafkaError]:
        def make(versions: ApiVersionTable) -> ListOffsetsRequest:
            version = versions.pick(ApiKey.LIST_OFFSETS, LIST_OFFSETS_MAX_VERSION, LIST_OFFSETS_MIN_VERSION)
            m = request_types(ApiKey.LIST_OFFSETS, version)
            by_topic: dict[str, list[object]] = defaultdict(list)
            for tp, ts in parts.items():
                by_topic[tp.topic].append(build(m.ListOffsetsPartition, partition_index=tp.partition,
                                                current_leader_epoch=-1, timestamp=ts))
            return cast("ListOffsetsRequest", build(
                m.ListOffsetsRequest, replica_id=-1, isolation_level=level, topics=tuple(
                build(m.ListOffsetsTopic, name=t, partitions=tuple(ps)) for t, ps in by_topic.items()
            )))

        response: ListOffsetsResponse = await self.client.send(make, node_id)
        out: dict[TopicPartition, tuple[int, int] | KafkaError] = {}
        for t in response.topics:
            for p in t.partitions:
                tp = TopicPartition(str(t.name), int(p.partition_index))
                if tp not in parts:
                    continue
                code = int(p.error_code)
                out[tp] = (int(p.offset), int(p.timestamp)) if code == ErrorCode.none else error_for(
                    code, f"ListOffsets {tp.topic}-{tp.partition}")
        for tp in parts:
            out.setdefault(tp, KafkaTimeoutError(f"no ListOffsets answer for {tp.topic}-{tp.partition}"))
        return out

    async def reset_positions(self, timeout_s: float) -> None:
        """Seek the partitions awaiting an offset reset to the earliest or latest offset."""
        subs = self.subscriptions
        pending = {tp: subs.assignment[tp].reset for tp in subs.awaiting_reset()}
        if not pending:
            return
        targets = {tp: EARLIEST_TIMESTAMP if strategy == EARLIEST else LATEST_TIMESTAMP
                   for tp, strategy in pending.items()}
        found = await self.list_offsets(targets, timeout_s)
        for tp, (offset, _) in found.items():
            state = subs.assignment.get(tp)
            if state is not None and state.reset == pending[tp] and offset >= 0:
                log.debug("reset %s-%d to %s offset %d", tp.topic, tp.partition, pending[tp], offset)
                subs.seek(tp, offset)

    async def close(self) -> None:
        for future, _ in self._in_flight.values():
            future.cancel()
        self._in_flight.clear()
        self._completed.clear()
        self._conns.close()


class FetchConnections:
    """One connection per broker for Fetch alone, apart from the client's. A long-poll
    Fetch holds its connection (a broker answers one request per connection at a time), so
    ListOffsets and metadata never wait behind it here, and a Fetch made stale by a seek or
    an assignment is dropped by closing its connection instead of being waited out."""

    def __init__(self, client: AioClient, config: ConsumerConfig, wakeup: Callable[[], None]) -> None:
        self.client = client
        self.config = config
        self.wakeup = wakeup
        self._conns: dict[int, AioConnection] = {}
        self._opening: dict[int, asyncio.Task[None]] = {}
        self._failures: dict[int, int] = {}
        self._retry_at: dict[int, float] = {}

    def ready(self, node_id: int) -> AioConnection | None:
        """The node's fetch connection, or None after starting to open it."""
        conn = self._conns.get(node_id)
        if conn is not None and conn.connected:
            return conn
        if node_id not in self._opening and time.monotonic() >= self._retry_at.get(node_id, 0.0):
            task = asyncio.get_running_loop().create_task(self._open(node_id))
            self._opening[node_id] = task
        return None

    async def _open(self, node_id: int) -> None:
        try:
            address = self.client.cluster.broker(node_id)
            if address is None:
                raise KafkaConnectionError(f"no address known for broker {node_id}")
            conn = await open_connection(
                address.host, address.port, node_id=node_id, client_id=self.config.client_id,
                request_timeout_s=self.client.request_timeout_s,
                connect_timeout_s=self.config.socket_connection_setup_timeout_ms / 1000,
                security=self.client.security,
            )
        except KafkaError as e:
            failures = self._failures[node_id] = self._failures.get(node_id, 0) + 1
            backoff = min(self.client.reconnect_backoff_s * 2 ** (failures - 1), self.client.reconnect_backoff_max_s)
            self._retry_at[node_id] = time.monotonic() + backoff
            log.info("fetch connection to broker %d: %s (retrying in %.0f ms)", node_id, e, backoff * 1000)
            self.client.request_update()  # it may have moved
            return
        finally:
            self._opening.pop(node_id, None)
            self.wakeup()
        self._failures.pop(node_id, None)
        self._conns[node_id] = conn

    def abort(self, node_id: int) -> None:
        conn = self._conns.pop(node_id, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        for task in self._opening.values():
            task.cancel()
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

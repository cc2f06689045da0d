"""The consumer's public API: ``AIOConsumer`` (asyncio) and ``Consumer`` (threads).

What it owns: the API — ``assign``/``subscribe`` (mutually exclusive, as in Kafka),
``poll``, positions and seeks, offsets lookups, commits, ``group_metadata`` for a
transactional producer, pause/resume, ``metrics``, ``close`` — and poll()'s loop: drive
the group membership (never waiting on a rebalance: a join runs in the background),
give partitions without a position one (committed offset, else ``auto.offset.reset``),
hand out buffered records, keep one Fetch per broker in flight, and wait for data up to
the timeout. What it must never do: I/O of its own (the fetcher's and the coordinator's).

``Consumer`` runs an ``AIOConsumer`` on an event loop in a thread of its own, which also
heartbeats; rebalance callbacks still run in the thread that called ``poll``, ``close``
or ``unsubscribe`` (as Java's do), so they may call the consumer (commit, say).

Example::

    from eoslog.client.consumer import Consumer

    c = Consumer({"bootstrap.servers": "127.0.0.1:9092", "group.id": "readers",
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    c.subscribe(["events"])
    while True:
        for record in c.poll(1.0):
            print(record.partition, record.offset, record.value)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import queue
import re
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from types import TracebackType
from typing import Any, Self, TypeVar

from eoslog.client.aio_client import AioClient
from eoslog.client.consumer.config import ConsumerConfig, consumer_config
from eoslog.client.consumer.consumer_membership import ConsumerGroupMembership
from eoslog.client.consumer.coordinator import ConsumerCoordinator, RebalanceListener
from eoslog.client.consumer.errors import NoOffsetForPartitionError
from eoslog.client.consumer.fetcher import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Fetcher
from eoslog.client.consumer.metrics import ConsumerMetrics
from eoslog.client.consumer.subscription_state import (
    EARLIEST,
    LATEST,
    NO_RESET,
    SubscriptionState,
    SubscriptionType,
)
from eoslog.client.errors import IllegalStateError, InvalidGroupIdError, KafkaError, KafkaTimeoutError
from eoslog.client.sync import BlockingFacade
from eoslog.client.types import (
    ConsumerGroupMetadata,
    ConsumerRecord,
    OffsetAndMetadata,
    P,
    PartitionLike,
    TopicPartition,
)

T = TypeVar("T")
# on_assign / on_revoke / on_lost: (consumer, partitions) → None, or an awaitable in AIOConsumer.
# The first argument is the user's Consumer or AIOConsumer (Any: a callback may name either).
RebalanceCallback = Callable[[Any, list[TopicPartition]], object]


def _tp(tp: PartitionLike) -> TopicPartition:
    """Accept TopicPartition, (topic, partition) tuples and confluent-kafka's TopicPartition."""
    if isinstance(tp, TopicPartition):
        return tp
    if isinstance(tp, tuple):
        return TopicPartition(str(tp[0]), int(tp[1]))
    return TopicPartition(str(tp.topic), int(tp.partition))


class _Listener(RebalanceListener):
    """Calls the user's callbacks with the consumer they were registered on; an exception
    is kept and raised by poll() once the rebalance step is done (Java does the same)."""

    def __init__(self) -> None:
        self.target: object = None
        self.on_assign: RebalanceCallback | None = None
        self.on_revoke: RebalanceCallback | None = None
        self.on_lost: RebalanceCallback | None = None
        self.error: BaseException | None = None

    async def _call(self, callback: RebalanceCallback | None, partitions: list[TopicPartition]) -> None:
        if callback is None:
            return
        try:
            result = callback(self.target, partitions)
            if inspect.isawaitable(result):
                await result
        except Exception as e:
            if self.error is None:
                self.error = e

    async def revoked(self, partitions: list[TopicPartition]) -> None:
        await self._call(self.on_revoke, partitions)

    async def assigned(self, partitions: list[TopicPartition]) -> None:
        await self._call(self.on_assign, partitions)

    async def lost(self, partitions: list[TopicPartition]) -> None:
        # Java's default onPartitionsLost is onPartitionsRevoked.
        await self._call(self.on_lost or self.on_revoke, partitions)

    def raise_pending(self) -> None:
        error, self.error = self.error, None
        if error is not None:
            raise error


class AIOConsumer:
    """An asyncio Kafka consumer. ``settings`` take Kafka's names (``{"group.id": "g"}``);
    keyword arguments the same with underscores (``group_id="g"``). ``await start()`` (or
    ``async with``) before use."""

    def __init__(self, settings: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.config: ConsumerConfig = consumer_config(settings, **kwargs)
        self._subscriptions = SubscriptionState(self.config.auto_offset_reset)
        self._metrics = ConsumerMetrics()
        self._listener = _Listener()
        self._listener.target = self
        self._client: AioClient | None = None
        self._fetcher: Fetcher | None = None
        self._coordinator: ConsumerCoordinator | None = None
        self._wakeup: asyncio.Event | None = None
        self._positions_task: asyncio.Task[None] | None = None
        self._positions_retry_at = 0.0
        self._closed = False
        self._closing = False
        self._api_timeout_s = self.config.default_api_timeout_ms / 1000

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the metadata refresh and (with a group.id) the group coordinator's machinery.
        Nothing blocks here: the cluster is first contacted when something needs it."""
        if self._client is not None:
            return
        c = self.config
        client = self._client = AioClient.from_config(c, allow_auto_topic_creation=c.allow_auto_create_topics)
        self._wakeup = asyncio.Event()
        client.add_listener(self._wake)
        client.start()
        self._fetcher = Fetcher(client, self._subscriptions, c, self._metrics, self._wake)
        if c.group_id is not None:
            membership = ConsumerGroupMembership if c.group_protocol == "consumer" else ConsumerCoordinator
            self._coordinator = membership(
                c, client, self._subscriptions, self._metrics, self._wake,
                on_assignment_change=self._fetcher.clear_buffered,
            )
            self._coordinator.listener = self._listener

    def _wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    async def close(self, timeout: float | None = None) -> None:
        """Commit (with auto-commit), revoke, leave the group (dynamic members), disconnect."""
        if self._closing or self._client is None:
            self._closed = True
            return
        self._closing = True  # callbacks run by the close may still use the consumer
        timeout_s = self._api_timeout_s if timeout is None else timeout
        try:
            if self._coordinator is not None:
                await self._coordinator.close(timeout_s)
        finally:
            self._closed = True
            if self._positions_task is not None:
                self._positions_task.cancel()
            assert self._fetcher is not None
            await self._fetcher.close()
            await self._client.close()
        self._listener.raise_pending()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    def _parts(self) -> tuple[AioClient, Fetcher]:
        if self._closed:
            raise IllegalStateError("This consumer has already been closed.")
        if self._client is None or self._fetcher is None:
            raise IllegalStateError("the consumer is not started: await start() first")
        return self._client, self._fetcher

    def _group(self) -> ConsumerCoordinator:
        self._parts()
        if self._coordinator is None:
            raise InvalidGroupIdError("To use the group management or offset commit APIs, you must provide a "
                                      "valid group.id in the consumer configuration.")
        return self._coordinator

    # -- assignment ----------------------------------------------------------------------------

    def assign(self, partitions: Iterable[PartitionLike]) -> None:
        """Read exactly these partitions (no group membership; commits still use group.id)."""
        client, fetcher = self._parts()
        tps = list(dict.fromkeys(_tp(tp) for tp in partitions))
        if self._coordinator is not None and self.config.enable_auto_commit \
                and self._subscriptions.type is SubscriptionType.USER_ASSIGNED:
            positions = self._subscriptions.consumed_offsets()
            if positions:
                self._coordinator.commit_async({tp: OffsetAndMetadata(o) for tp, o in positions.items()})
        self._subscriptions.assign_from_user(tps)
        fetcher.clear_buffered(tps)
        if tps:
            client.topics.update(tp.topic for tp in tps)
            client.request_update()
        self._wake()

    def assignment(self) -> set[TopicPartition]:
        return set(self._subscriptions.assigned())

    def subscribe(self, topics: str | Iterable[str] = (), *, pattern: str | None = None,
                  on_assign: RebalanceCallback | None = None, on_revoke: RebalanceCallback | None = None,
                  on_lost: RebalanceCallback | None = None) -> None:
        """Join the group for ``topics`` (a list, or one regular expression starting with '^',
        matched here), or, with ``group.protocol=consumer``, for the topics the coordinator
        matches with ``pattern`` (RE2/J syntax, Java's ``subscribe(SubscriptionPattern)``).
        Callbacks get ``(consumer, partitions)``: on_revoke before partitions are taken
        away, on_assign after the new ones are given (only the added ones, under the
        cooperative and consumer protocols), on_lost when they were taken without a
        revocation (the member fell out of the group; defaults to on_revoke)."""
        client, _ = self._parts()
        coordinator = self._group()
        names = [topics] if isinstance(topics, str) else list(topics)
        if pattern is not None:
            if names:
                raise ValueError("subscribe() takes topics or a pattern, not both")
            if self.config.group_protocol != "consumer":
                raise IllegalStateError("subscribe(pattern=...) is matched by the coordinator: it needs "
                                        "group.protocol=consumer")
            if not pattern:
                raise ValueError("subscribe() with an empty pattern")
        elif not names:
            raise IllegalStateError("subscribe() with no topics: call unsubscribe() instead")
        listener = self._listener
        listener.on_assign, listener.on_revoke, listener.on_lost = on_assign, on_revoke, on_lost
        subs = self._subscriptions
        if pattern is not None:
            subs.subscribe_regex(pattern)
        elif len(names) == 1 and names[0].startswith("^"):
            try:
                compiled = re.compile(names[0])
            except re.error as e:
                raise ValueError(f"invalid subscription pattern {names[0]!r}: {e}") from None
            subs.subscribe_pattern(compiled)
        else:
            for name in names:
                if not isinstance(name, str) or not name.strip() or name.startswith("^"):
                    raise ValueError(f"invalid topic in subscription: {name!r} (a pattern must be the only entry)")
            subs.subscribe(names)
            client.topics.update(names)
            client.request_update()
        coordinator.subscription_changed()

    def subscription(self) -> set[str]:
        return set(self._subscriptions.topics) if self._subscriptions.auto_assigned else set()

    async def unsubscribe(self) -> None:
        """Give up the partitions (on_revoke), leave the group, forget the subscription."""
        _, fetcher = self._parts()
        if self._coordinator is not None and self._subscriptions.auto_assigned:
            await self._coordinator.on_leave_prepare()
            await self._coordinator.maybe_leave_group("the consumer unsubscribed from all topics")
        self._subscriptions.unsubscribe()
        fetcher.clear_buffered()
        self._listener.raise_pending()

    # -- positions -----------------------------------------------------------------------------

    def seek(self, partition: PartitionLike, offset: int) -> None:
        """The next poll() returns records of ``partition`` from ``offset`` on."""
        self._parts()
        if offset < 0:
            raise ValueError("seek offset must not be a negative number")
        self._subscriptions.seek(_tp(partition), offset)
        self._wake()

    def seek_to_beginning(self, partitions: Iterable[PartitionLike] | None = None) -> None:
        """Evaluated lazily, on the next poll() or position() (as Kafka does); all assigned
        partitions when ``partitions`` is empty or None."""
        self._seek_to(partitions, EARLIEST)

    def seek_to_end(self, partitions: Iterable[PartitionLike] | None = None) -> None:
        """As seek_to_beginning, to the end: the last stable offset under read_committed."""
        self._seek_to(partitions, LATEST)

    def _seek_to(self, partitions: Iterable[PartitionLike] | None, strategy: str) -> None:
        self._parts()
        tps = [_tp(tp) for tp in partitions or ()] or self._subscriptions.assigned()
        self._subscriptions.request_reset(tps, strategy)
        self._wake()

    async def position(self, partition: PartitionLike, timeout: float | None = None) -> int:
        """The offset of the next record poll() will return for ``partition`` (looked up
        from the committed offset or the reset policy when it has none yet)."""
        self._parts()
        tp = _tp(partition)
        state = self._subscriptions.state(tp)
        deadline = time.monotonic() + (self._api_timeout_s if timeout is None else timeout)
        while not state.has_valid_position:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KafkaTimeoutError(f"Timeout to determine the position of {tp.topic}-{tp.partition}")
            await self._update_positions(remaining)
            state = self._subscriptions.state(tp)
        assert state.position is not None
        return state.position

    async def _update_positions(self, timeout_s: float) -> None:
        """Committed offsets for initializing partitions (the reset policy where there is
        none), then the pending resets through ListOffsets."""
        _, fetcher = self._parts()
        subs = self._subscriptions
        init = subs.initializing()
        if init:
            committed = {}
            if self._coordinator is not None:
                committed = await self._coordinator.fetch_committed(init, timeout_s, self.config.read_committed)
            missing = []
            for tp in init:
                state = subs.assignment.get(tp)
                if state is None or state.position is not None or state.reset is not None:
                    continue
                found = committed.get(tp)
                if found is not None:
                    subs.seek(tp, found.offset)
                else:
                    missing.append(tp)
            if missing:
                if subs.default_reset == NO_RESET:
                    raise NoOffsetForPartitionError(
                        "Undefined offset with no reset policy for partitions: "
                        + ", ".join(f"{tp.topic}-{tp.partition}" for tp in missing))
                subs.request_reset(missing)
        await fetcher.reset_positions(timeout_s)

    def _maybe_update_positions(self) -> None:
        """Positions are looked up in the background; poll() raises what that ran into."""
        task = self._positions_task
        if task is not None and task.done():
            self._positions_task = None
            try:
                task.result()
            except KafkaError as e:
                self._positions_retry_at = time.monotonic() + self.config.retry_backoff_ms / 1000
                if not e.retriable:
                    raise
        if self._positions_task is None and not self._subscriptions.has_all_positions() \
                and time.monotonic() >= self._positions_retry_at:
            self._positions_task = asyncio.get_running_loop().create_task(self._update_positions(self._api_timeout_s))
            self._positions_task.add_done_callback(lambda _: self._wake())

    # -- poll ----------------------------------------------------------------------------------

    async def poll(self, timeout: float = 0.0) -> list[ConsumerRecord]:
        """Records from the assigned partitions, at most ``max.poll.records``; waits up to
        ``timeout`` seconds for some. Also where rebalances complete and callbacks run."""
        _, fetcher = self._parts()
        assert self._wakeup is not None
        subs = self._subscriptions
        if subs.type is SubscriptionType.NONE:
            raise IllegalStateError("Consumer is not subscribed to any topics or assigned any partitions")
        self._metrics.poll_total += 1
        deadline = time.monotonic() + max(0.0, timeout)
        max_records = self.config.max_poll_records
        coordinator = self._coordinator
        while True:
            self._wakeup.clear()
            if coordinator is not None:
                await coordinator.poll()
                self._listener.raise_pending()
            self._maybe_update_positions()
            records = fetcher.collect(max_records)
            fetcher.send_fetches()
            if records:
                return records
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            wait = remaining
            if coordinator is not None:
                wait = min(wait, coordinator.time_to_next_poll())
            if fetcher.blocked:
                wait = min(wait, self.config.retry_backoff_ms / 1000)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), max(wait, 0.001))

    # -- offsets lookups -------------------------------------------------------------------------

    async def beginning_offsets(self, partitions: Iterable[PartitionLike], timeout: float | None = None
                                ) -> dict[TopicPartition, int]:
        return await self._offsets({_tp(tp): EARLIEST_TIMESTAMP for tp in partitions}, timeout)

    async def end_offsets(self, partitions: Iterable[PartitionLike],
                          timeout: float | None = None) -> dict[TopicPartition, int]:
        """The high watermark, or the last stable offset under read_committed."""
        return await self._offsets({_tp(tp): LATEST_TIMESTAMP for tp in partitions}, timeout)

    async def _offsets(self, targets: dict[TopicPartition, int], timeout: float | None) -> dict[TopicPartition, int]:
        _, fetcher = self._parts()
        found = await fetcher.list_offsets(targets, self._api_timeout_s if timeout is None else timeout)
        return {tp: offset for tp, (offset, _) in found.items()}

    async def offsets_for_times(self, timestamps: Mapping[P, int], timeout: float | None = None
                                ) -> dict[TopicPartition, int | None]:
        """The earliest offset whose timestamp is at least the given one (ms), per partition;
        None when there is none."""
        _, fetcher = self._parts()
        targets = {}
        for tp, ts in timestamps.items():
            if ts < 0:
                raise ValueError(f"The target time for partition {tp} is {ts}. The target time cannot be negative.")
            targets[_tp(tp)] = int(ts)
        found = await fetcher.list_offsets(targets, self._api_timeout_s if timeout is None else timeout)
        return {tp: (offset if offset >= 0 else None) for tp, (offset, _) in found.items()}

    # -- commits -------------------------------------------------------------------------------

    def _commit_offsets(self, offsets: Mapping[P, OffsetAndMetadata | int] | None
                        ) -> dict[TopicPartition, OffsetAndMetadata]:
        if offsets is None:
            return {tp: OffsetAndMetadata(o) for tp, o in self._subscriptions.consumed_offsets().items()}
        out = {}
        for tp, om in offsets.items():
            value = om if isinstance(om, OffsetAndMetadata) else OffsetAndMetadata(int(om))
            if value.offset < 0:
                raise ValueError(f"Invalid negative offset {value.offset} for {tp}")
            out[_tp(tp)] = value
        return out

    async def commit(self, offsets: Mapping[P, OffsetAndMetadata | int] | None = None,
                     asynchronous: bool = False, timeout: float | None = None) -> asyncio.Task[None] | None:
        """Commit ``offsets`` (the positions of every assigned partition when None). With
        ``asynchronous`` the commit runs in the background; the returned task completes
        with it."""
        coordinator = self._group()
        values = self._commit_offsets(offsets)
        if asynchronous:
            return coordinator.commit_async(values)
        await coordinator.commit(values, self._api_timeout_s if timeout is None else timeout)
        return None

    async def committed(self, partitions: Iterable[PartitionLike], timeout: float | None = None
                        ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets; under read_committed it waits for offsets that an
        open transaction is committing (require_stable, KIP-447)."""
        coordinator = self._group()
        return await coordinator.fetch_committed(
            [_tp(tp) for tp in partitions], self._api_timeout_s if timeout is None else timeout,
            self.config.read_committed,
        )

    def group_metadata(self) -> ConsumerGroupMetadata:
        """For ``producer.send_offsets_to_transaction``: the group, generation and member id,
        so that the broker fences a zombie's commit after a rebalance (KIP-447)."""
        return self._group().group_metadata()

    # -- flow control, metrics ---------------------------------------------------------------------

    def pause(self, partitions: Iterable[PartitionLike]) -> None:
        """Stop fetching these partitions (buffered data is kept for resume)."""
        self._subscriptions.pause(_tp(tp) for tp in partitions)

    def resume(self, partitions: Iterable[PartitionLike]) -> None:
        self._subscriptions.resume(_tp(tp) for tp in partitions)
        self._wake()

    def paused(self) -> set[TopicPartition]:
        return self._subscriptions.paused()

    def metrics(self) -> dict[str, float]:
        lag = self._fetcher.lag_max() if self._fetcher is not None else 0
        return self._metrics.as_dict(lag, len(self._subscriptions.assignment))


def _complete(done: asyncio.Future[None], error: BaseException | None) -> None:
    if done.done():
        return
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)


class Consumer(BlockingFacade):
    """The synchronous facade: an AIOConsumer on an event loop in a background thread.

    Not for use by several threads at once (as Kafka's consumer); callbacks run in the
    thread that called poll()/close()/unsubscribe() and may call the consumer."""

    def __init__(self, settings: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self._aio = AIOConsumer(settings, **kwargs)
        self.config = self._aio.config
        self._aio._listener.target = self
        # (callback, partitions, done) to run in the caller's thread; None: the call finished.
        self._callbacks: queue.SimpleQueue[
            tuple[RebalanceCallback, list[TopicPartition], asyncio.Future[None]] | None] = queue.SimpleQueue()
        self._start_loop(f"eoslog-consumer-heartbeat-thread | {self.config.client_id}",
                         "a blocking consumer call from the consumer's own thread would deadlock",
                         self._aio.start())

    def _serving_callbacks(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop while running the rebalance callbacks it asks for here,
        in the calling thread."""
        future = self._loop_thread.submit(coro)
        callbacks = self._callbacks
        future.add_done_callback(lambda _: callbacks.put(None))
        loop = self._loop_thread.loop
        while True:
            item = callbacks.get()
            if item is None:
                break
            fn, partitions, done = item
            error: BaseException | None = None
            try:
                fn(self, partitions)
            except BaseException as e:
                error = e
            loop.call_soon_threadsafe(_complete, done, error)
        result: T = future.result()
        return result

    def _in_caller_thread(self, callback: RebalanceCallback | None) -> RebalanceCallback | None:
        if callback is None:
            return None

        async def hop(_: object, partitions: list[TopicPartition]) -> None:
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._callbacks.put((callback, partitions, done))
            await done

        return hop

    def close(self, timeout: float | None = None) -> None:
        self._close_once(lambda: self._serving_callbacks(self._aio.close(timeout)))

    def assign(self, partitions: Iterable[PartitionLike]) -> None:
        tps = list(partitions)
        self._run(lambda: self._aio.assign(tps))

    def assignment(self) -> set[TopicPartition]:
        return self._run(self._aio.assignment)

    def subscribe(self, topics: str | Iterable[str] = (), *, pattern: str | None = None,
                  on_assign: RebalanceCallback | None = None, on_revoke: RebalanceCallback | None = None,
                  on_lost: RebalanceCallback | None = None) -> None:
        names = topics if isinstance(topics, str) else list(topics)
        self._run(lambda: self._aio.subscribe(
            names, pattern=pattern, on_assign=self._in_caller_thread(on_assign),
            on_revoke=self._in_caller_thread(on_revoke), on_lost=self._in_caller_thread(on_lost)))

    def subscription(self) -> set[str]:
        return self._run(self._aio.subscription)

    def unsubscribe(self) -> None:
        self._serving_callbacks(self._aio.unsubscribe())

    def seek(self, partition: PartitionLike, offset: int) -> None:
        self._run(lambda: self._aio.seek(partition, offset))

    def seek_to_beginning(self, partitions: Iterable[PartitionLike] | None = None) -> None:
        tps = None if partitions is None else list(partitions)
        self._run(lambda: self._aio.seek_to_beginning(tps))

    def seek_to_end(self, partitions: Iterable[PartitionLike] | None = None) -> None:
        tps = None if partitions is None else list(partitions)
        self._run(lambda: self._aio.seek_to_end(tps))

    def position(self, partition: PartitionLike, timeout: float | None = None) -> int:
        return self._call(self._aio.position(partition, timeout))

    def poll(self, timeout: float = 0.0) -> list[ConsumerRecord]:
        return self._serving_callbacks(self._aio.poll(timeout))

    def beginning_offsets(self, partitions: Iterable[PartitionLike],
                          timeout: float | None = None) -> dict[TopicPartition, int]:
        return self._call(self._aio.beginning_offsets(list(partitions), timeout))

    def end_offsets(self, partitions: Iterable[PartitionLike],
                    timeout: float | None = None) -> dict[TopicPartition, int]:
        return self._call(self._aio.end_offsets(list(partitions), timeout))

    def offsets_for_times(self, timestamps: Mapping[P, int], timeout: float | None = None
                          ) -> dict[TopicPartition, int | None]:
        return self._call(self._aio.offsets_for_times(dict(timestamps), timeout))

    def commit(self, offsets: Mapping[P, OffsetAndMetadata | int] | None = None, asynchronous: bool = False,
               timeout: float | None = None) -> concurrent.futures.Future[None] | None:
        """Synchronous by default; with ``asynchronous`` a concurrent.futures.Future."""
        values = None if offsets is None else dict(offsets)
        if not asynchronous:
            self._call(self._aio.commit(values, timeout=timeout))
            return None

        async def commit_async() -> None:
            task = await self._aio.commit(values, asynchronous=True)
            assert task is not None
            await task

        return self._loop_thread.submit(commit_async())

    def committed(self, partitions: Iterable[PartitionLike], timeout: float | None = None
                  ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return self._call(self._aio.committed(list(partitions), timeout))

    def group_metadata(self) -> ConsumerGroupMetadata:
        return self._run(self._aio.group_metadata)

    def pause(self, partitions: Iterable[PartitionLike]) -> None:
        tps = list(partitions)
        self._run(lambda: self._aio.pause(tps))

    def resume(self, partitions: Iterable[PartitionLike]) -> None:
        tps = list(partitions)
        self._run(lambda: self._aio.resume(tps))

    def paused(self) -> set[TopicPartition]:
        return self._run(self._aio.paused)

    def metrics(self) -> dict[str, float]:
        return self._run(self._aio.metrics)


__all__ = ["AIOConsumer", "Consumer", "ConsumerRecord"]

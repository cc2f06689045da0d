"""The producer's public API: ``AIOProducer`` (asyncio) and ``Producer`` (threads).

What it owns: the API — ``send`` → a future of RecordMetadata, ``flush``, ``close`` (drain;
``close(timeout=0)`` fails what is left), the transactional methods, ``metrics`` — and the
choice of partition: the one given; for a key, murmur2 as Java's and librdkafka's default
partitioners; without a key, sticky partitioning (KIP-480): one partition until its batch
is full, then another at random. ``send`` encodes the record into its partition's batch
in the calling thread; waiting for metadata or ``buffer.memory`` (up to ``max.block.ms``)
is the only time it blocks.

``Producer`` runs an ``AIOProducer`` on an event loop in a thread of its own (Java's
``kafka-producer-network-thread``): ``send`` still appends in the caller's thread, and
the transactional calls and ``close`` hop onto the loop. Delivery callbacks run on that
thread. What it must never do: I/O or retries (the sender's), state transitions (the
transaction manager's).

Example::

    from eoslog.client.producer import Producer

    with Producer({"bootstrap.servers": "127.0.0.1:9092", "transactional.id": "copier-1"}) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("out", b"value", key=b"k")
        p.commit_transaction()
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar

from eoslog.client.aio_client import AioClient
from eoslog.client.errors import (
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    MessageTooLargeError,
    ProducerClosedError,
)
from eoslog.client.partitioner import StickyPartitioner, murmur2
from eoslog.client.producer.accumulator import NEED_MEMORY, NEW_BATCH, RecordAccumulator
from eoslog.client.producer.batch import encode_headers, record_size_upper_bound
from eoslog.client.producer.config import ProducerConfig, producer_config
from eoslog.client.producer.futures import DeliveryCallback, RecordFuture, RecordMetadata
from eoslog.client.producer.metrics import ProducerMetrics
from eoslog.client.producer.sender import Sender
from eoslog.client.producer.transaction_manager import TransactionManager, TxnResult
from eoslog.client.sync import BlockingFacade
from eoslog.client.types import ConsumerGroupMetadata, OffsetAndMetadata, PreparedTxnState

if TYPE_CHECKING:
    from eoslog.client.share import AIOShareConsumer, ShareConsumer

T = TypeVar("T")
Header = tuple[str, bytes | None]
_NO_HEADERS = encode_headers(())


class _NeedMetadata:
    __slots__ = ()


NEED_METADATA = _NeedMetadata()


def _to_bytes(data: Any) -> bytes | None:
    if data is None or data.__class__ is bytes:
        return data
    if isinstance(data, str):
        return data.encode()
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"a record's key and value must be bytes (or str), not {type(data).__name__}; "
                    "set key.serializer / value.serializer")


class AIOProducer:
    """An asyncio Kafka producer, idempotent by default, transactional with ``transactional.id``.

    ``settings`` take Kafka's names (``{"linger.ms": 5}``); keyword arguments the same with
    underscores (``linger_ms=5``)."""

    def __init__(self, settings: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.config: ProducerConfig = producer_config(settings, **kwargs)
        c = self.config
        self._tm = (
            TransactionManager(transactional_id=c.transactional_id, transaction_timeout_ms=c.transaction_timeout_ms,
                               enable_2pc=c.transaction_two_phase_commit_enable,
                               finalized_features=self._finalized_features)
            if c.enable_idempotence else None
        )
        self._accumulator = RecordAccumulator(
            batch_size=c.batch_size, buffer_memory=c.buffer_memory, linger_ms=c.linger_ms,
            retry_backoff_ms=c.retry_backoff_ms, delivery_timeout_ms=c.delivery_timeout_ms,
            compression=c.compression_type, transaction_manager=self._tm,
        )
        self._metrics = ProducerMetrics()
        self._client: AioClient | None = None
        self._sender: Sender | None = None
        self._sticky = StickyPartitioner()
        self._closed = False
        self._max_block_s = c.max_block_ms / 1000
        self._ignore_keys = c.partitioner_ignore_keys
        self._key_serializer = c.key_serializer
        self._value_serializer = c.value_serializer
        self._max_plain_size = min(c.max_request_size, c.buffer_memory)
        self._plain = c.key_serializer is None and c.value_serializer is None

    def _finalized_features(self) -> tuple[int, dict[str, int]]:
        client = self._client
        return client.finalized_features() if client is not None else (-1, {})

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect to the cluster (first metadata within ``max.block.ms``) and start sending."""
        if self._sender is not None:
            return
        c = self.config
        client = self._client = AioClient.from_config(c)
        deadline = time.monotonic() + self._max_block_s
        while True:
            try:
                await client.refresh_metadata()
                break
            except KafkaError as e:
                if time.monotonic() + c.retry_backoff_ms / 1000 > deadline:
                    await client.close()
                    raise KafkaTimeoutError(f"cannot bootstrap from {c.bootstrap_servers}: {e}") from e
                await asyncio.sleep(c.retry_backoff_ms / 1000)
        client.start()
        sender = self._sender = Sender(c, client, self._accumulator, self._tm, self._metrics)
        self._accumulator.wakeup = sender.wakeup_threadsafe
        sender.start()

    async def close(self, timeout: float | None = None) -> None:
        """Send everything queued, then stop. With ``timeout`` (seconds) what is still not
        delivered then fails with ProducerClosedError; ``timeout=0`` fails it at once."""
        if self._closed:
            return
        self._closed = True
        if self._sender is not None:
            await self._sender.close(timeout)
        if self._client is not None:
            await self._client.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    # -- sending ---------------------------------------------------------------------------------

    def _append(self, topic: str, key: bytes | None, value: bytes | None, partition: int | None,
                timestamp: int, headers: bytes, size_bound: int) -> RecordFuture | object:
        """Append in the calling thread; returns the future, or what must be waited for first."""
        if self._closed:
            raise ProducerClosedError("Cannot perform operation after producer has been closed")
        tm = self._tm
        if tm is not None and tm.state is not tm.send_state:
            tm.fail_if_not_ready_for_send()
        client = self._client
        if client is None:
            raise IllegalStateError("the producer is not started: await start() first")
        meta = client.cluster.topics.get(topic)
        if meta is None or not meta.leaders:
            return NEED_METADATA
        sticky = False
        if partition is None:
            if key is not None and not self._ignore_keys:
                partition = (murmur2(key) & 0x7FFFFFFF) % len(meta.leaders)
            else:
                partition = self._sticky.partition(topic, meta.available, len(meta.leaders))
                sticky = True
        elif not 0 <= partition < len(meta.leaders):
            raise KafkaError(f"Invalid partition given with record: {partition} is not in the range "
                             f"[0...{len(meta.leaders)}).")
        acc = self._accumulator
        result = acc.append(topic, partition, timestamp, key, value, headers, size_bound, sticky)
        if result is NEW_BATCH:
            # KIP-480: the sticky partition's batch is full; start a batch on another partition.
            partition = self._sticky.next_partition(topic, meta.available, len(meta.leaders), partition)
            result = acc.append(topic, partition, timestamp, key, value, headers, size_bound)
        if tm is not None and tm.transactional and result.__class__ is RecordFuture:
            tm.maybe_add_partition((topic, partition))
        return result

    def _prepare(self, key: Any, value: Any, headers: Sequence[Header] | None) -> tuple[
            bytes | None, bytes | None, bytes, int]:
        if value.__class__ is bytes and headers is None and self._plain:
            # The common case, checked in one go.
            if key is None:
                bound = len(value) + 21
                if bound + 61 <= self._max_plain_size:
                    return None, value, _NO_HEADERS, bound
            elif key.__class__ is bytes:
                bound = len(value) + len(key) + 21
                if bound + 61 <= self._max_plain_size:
                    return key, value, _NO_HEADERS, bound
        if self._key_serializer is not None:
            key = self._key_serializer(key)
        if self._value_serializer is not None:
            value = self._value_serializer(value)
        key = _to_bytes(key)
        value = _to_bytes(value)
        header_bytes = encode_headers(headers) if headers else _NO_HEADERS
        size_bound = record_size_upper_bound(key, value, header_bytes)
        if size_bound + 61 > self.config.max_request_size:
            raise MessageTooLargeError(
                f"The message is {size_bound + 61} bytes when serialized which is larger than "
                f"{self.config.max_request_size}, which is the value of the max.request.size configuration."
            )
        if size_bound + 61 > self.config.buffer_memory:
            raise MessageTooLargeError(
                f"The message is {size_bound + 61} bytes when serialized which is larger than the total memory "
                f"buffer you have configured with the buffer.memory configuration."
            )
        return key, value, header_bytes, size_bound

    async def send(
        self, topic: str, value: Any = None, key: Any = None, *, partition: int | None = None,
        timestamp_ms: int | None = None, headers: Sequence[Header] | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> RecordFuture:
        """Queue a record; the returned future resolves to its RecordMetadata (``await fut``)."""
        key, value, header_bytes, size_bound = self._prepare(key, value, headers)
        timestamp = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)
        result = self._append(topic, key, value, partition, timestamp, header_bytes, size_bound)
        if result.__class__ is not RecordFuture:
            result = await self._wait_and_append(topic, key, value, partition, timestamp, header_bytes, size_bound,
                                                 result)
        assert isinstance(result, RecordFuture)
        if on_delivery is not None:
            result.add_done_callback(on_delivery)
        return result

    async def _wait_and_append(self, topic: str, key: bytes | None, value: bytes | None, partition: int | None,
                               timestamp: int, headers: bytes, size_bound: int, need: object) -> RecordFuture:
        deadline = time.monotonic() + self._max_block_s
        assert self._client is not None
        while need.__class__ is not RecordFuture:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KafkaTimeoutError(f"send to {topic} blocked for max.block.ms={self.config.max_block_ms}")
            if need is NEED_METADATA:
                await self._client.wait_for_topic(topic, remaining)
            elif need is NEED_MEMORY:
                await self._wait_for_memory(size_bound, remaining)
            need = self._append(topic, key, value, partition, timestamp, headers, size_bound)
        assert isinstance(need, RecordFuture)
        return need

    async def _wait_for_memory(self, size_bound: int, timeout_s: float) -> None:
        acc = self._accumulator
        loop = asyncio.get_running_loop()
        event = asyncio.Event()

        def on_release() -> None:
            loop.call_soon_threadsafe(event.set)

        acc.add_memory_listener(on_release)
        if self._sender is not None:
            self._sender.wakeup()
        try:
            deadline = time.monotonic() + timeout_s
            while not acc.has_room(size_bound):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise KafkaTimeoutError(
                        f"Failed to allocate memory within the configured max blocking time "
                        f"{self.config.max_block_ms} ms (buffer.memory={self.config.buffer_memory})"
                    )
                event.clear()
                try:
                    await asyncio.wait_for(event.wait(), remaining)
                except TimeoutError:
                    continue
        finally:
            acc.remove_memory_listener(on_release)

    async def send_and_wait(self, topic: str, value: Any = None, key: Any = None, **kwargs: Any) -> RecordMetadata:
        return await (await self.send(topic, value, key, **kwargs))

    async def flush(self, timeout: float | None = None) -> None:
        """Make every queued record sendable now and wait until all have completed."""
        acc = self._accumulator
        acc.begin_flush()
        try:
            await asyncio.wait_for(self._await_incomplete(), timeout)
        except TimeoutError:
            raise KafkaTimeoutError(f"flush did not complete within {timeout}s") from None
        finally:
            acc.end_flush()

    async def _await_incomplete(self) -> None:
        pending = [b.result for b in self._accumulator.incomplete()]
        while pending:
            result = pending.pop()
            if not result.done:
                await result.aio_wait()
            if result.split:
                pending.extend(part for _, part in result.split)

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partitions, from the cached metadata (empty when unknown)."""
        if self._client is None:
            return []
        meta = self._client.cluster.topics.get(topic)
        return list(range(meta.num_partitions)) if meta is not None else []

    def metrics(self) -> dict[str, float]:
        return self._metrics.as_dict()

    # -- transactions ------------------------------------------------------------------------

    def _txn(self) -> TransactionManager:
        if self._tm is None or not self._tm.transactional:
            raise IllegalStateError("Cannot use transactional methods without enabling transactions by setting "
                                    "the transactional.id configuration property")
        if self._closed:
            raise ProducerClosedError("Cannot perform operation after producer has been closed")
        return self._tm

    async def _await(self, result: TxnResult, timeout: float | None) -> None:
        if self._sender is not None:
            self._sender.wakeup()
        await result.wait(self._max_block_s if timeout is None else timeout)

    async def init_transactions(self, timeout: float | None = None, *, keep_prepared_txn: bool = False) -> None:
        """Get the producer id and epoch of ``transactional.id``, fencing older instances and
        finishing their open transaction. Call once, before the first transaction.

        ``keep_prepared_txn`` (needs ``transaction.two.phase.commit.enable``, KIP-939): a
        transaction an older instance left open is kept, not aborted; if there is one the
        producer starts in the prepared state with it (``prepared_transaction_state()``),
        for ``complete_transaction``, ``commit_transaction`` or ``abort_transaction``."""
        _check_timeout(timeout)
        await self._await(self._txn().initialize_transactions(keep_prepared_txn), timeout)

    def begin_transaction(self) -> None:
        self._txn().begin_transaction()

    async def send_offsets_to_transaction(
        self, offsets: Mapping[tuple[str, int], int | OffsetAndMetadata],
        group_metadata: ConsumerGroupMetadata | str, timeout: float | None = None,
    ) -> None:
        """Commit a consumer group's positions as part of the transaction (KIP-98, KIP-447)."""
        group = ConsumerGroupMetadata(group_metadata) if isinstance(group_metadata, str) else group_metadata
        normalized = {
            (str(tp[0]), int(tp[1])): (o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(int(o)))
            for tp, o in offsets.items()
        }
        await self._await(self._txn().send_offsets_to_transaction(normalized, group), timeout)

    async def send_acknowledgements_to_transaction(self, consumer: AIOShareConsumer,
                                                   timeout: float | None = None) -> None:
        """eoslog's extension (docs/consumer.md): ACCEPT the share consumer's records (its
        ``share.acknowledgement.mode`` is ``transactional``) inside this transaction — the commit
        makes the records acknowledged as it makes the output visible, an abort hands them out
        again. A failure leaves the transaction to abort."""
        tm = self._txn()
        transaction = tm.share_transaction()
        try:
            await consumer.acknowledge_in_transaction(transaction, timeout)
        except KafkaError as e:
            tm.share_acknowledged(e)
            raise
        tm.share_acknowledged(None)

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush the transaction's records, then commit it (EndTxn)."""
        await self._await(self._txn().begin_commit(), timeout)

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Drop the records not sent yet, wait for those in flight, then abort (EndTxn)."""
        await self._await(self._txn().begin_abort(), timeout)

    async def prepare_transaction(self, timeout: float | None = None) -> PreparedTxnState:
        """Two-phase commit, phase one (KIP-939): flush every record of the transaction and
        return its state (store it with the external decision). No EndTxn is sent; the
        broker never aborts the transaction on a timeout. Afterwards only
        ``commit_transaction``, ``abort_transaction`` or ``complete_transaction`` are allowed."""
        tm = self._txn()
        tm.check_can_prepare()
        await self.flush(self._max_block_s if timeout is None else timeout)
        return tm.prepare_transaction()

    def prepared_transaction_state(self) -> PreparedTxnState | None:
        """The prepared transaction (after ``prepare_transaction``, or found open by
        ``init_transactions(keep_prepared_txn=True)``); None when there is none."""
        return self._txn().prepared_transaction_state()

    async def complete_transaction(self, state: PreparedTxnState, timeout: float | None = None) -> None:
        """Two-phase commit, phase two: commit the prepared transaction if it is the one
        ``state`` names (the external coordinator decided to commit it), else abort it."""
        await self._await(self._txn().complete_prepared(state), timeout)


class Producer(BlockingFacade):
    """The synchronous facade: an AIOProducer on an event loop in a background thread."""

    def __init__(self, settings: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self._aio = AIOProducer(settings, **kwargs)
        self.config = self._aio.config
        self._start_loop(f"eoslog-producer-network-thread | {self.config.client_id}",
                         "a blocking producer call from the producer's own thread (a delivery callback) "
                         "would deadlock",
                         self._aio.start())

    def send(
        self, topic: str, value: Any = None, key: Any = None, *, partition: int | None = None,
        timestamp_ms: int | None = None, headers: Sequence[Header] | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> RecordFuture:
        """Queue a record; ``.result(timeout)`` of the returned future gives its RecordMetadata."""
        aio = self._aio
        key, value, header_bytes, size_bound = aio._prepare(key, value, headers)
        timestamp = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)
        result = aio._append(topic, key, value, partition, timestamp, header_bytes, size_bound)
        if result.__class__ is not RecordFuture:  # metadata or memory to wait for: as AIOProducer.send does
            result = self._call(aio._wait_and_append(topic, key, value, partition, timestamp, header_bytes,
                                                     size_bound, result))
        assert isinstance(result, RecordFuture)
        if on_delivery is not None:
            result.add_done_callback(on_delivery)
        return result

    def flush(self, timeout: float | None = None) -> None:
        """Make every queued record sendable now and wait until all have completed."""
        if self._loop_thread.in_loop_thread():
            raise IllegalStateError("flush() from a delivery callback would deadlock")
        acc = self._aio._accumulator
        acc.begin_flush()
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            pending = [b.result for b in acc.incomplete()]
            while pending:
                result = pending.pop()
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not result.wait(remaining):
                    raise KafkaTimeoutError(f"flush did not complete within {timeout}s")
                if result.split:
                    pending.extend(part for _, part in result.split)
        finally:
            acc.end_flush()

    def close(self, timeout: float | None = None) -> None:
        """Send what is queued and stop; ``timeout=0`` fails what is left at once."""
        self._close_once(lambda: self._call(self._aio.close(timeout)))

    def partitions_for(self, topic: str) -> list[int]:
        if not self._aio.partitions_for(topic):
            client = self._aio._client
            assert client is not None
            self._call(client.wait_for_topic(topic, self._aio._max_block_s))
        return self._aio.partitions_for(topic)

    def metrics(self) -> dict[str, float]:
        return self._aio.metrics()

    def init_transactions(self, timeout: float | None = None, *, keep_prepared_txn: bool = False) -> None:
        self._call(self._aio.init_transactions(timeout, keep_prepared_txn=keep_prepared_txn))

    def begin_transaction(self) -> None:
        self._run(self._aio.begin_transaction)

    def send_offsets_to_transaction(
        self, offsets: Mapping[tuple[str, int], int | OffsetAndMetadata],
        group_metadata: ConsumerGroupMetadata | str, timeout: float | None = None,
    ) -> None:
        self._call(self._aio.send_offsets_to_transaction(offsets, group_metadata, timeout))

    def send_acknowledgements_to_transaction(self, consumer: ShareConsumer, timeout: float | None = None) -> None:
        """As ``AIOProducer.send_acknowledgements_to_transaction``, with the blocking share consumer."""
        tm = self._aio._txn()
        transaction = self._run(tm.share_transaction)
        try:
            consumer.acknowledge_in_transaction(transaction, timeout)
        except KafkaError as e:
            error = e
            self._run(lambda: tm.share_acknowledged(error))
            raise
        self._run(lambda: tm.share_acknowledged(None))

    def commit_transaction(self, timeout: float | None = None) -> None:
        self._call(self._aio.commit_transaction(timeout))

    def abort_transaction(self, timeout: float | None = None) -> None:
        self._call(self._aio.abort_transaction(timeout))

    def prepare_transaction(self, timeout: float | None = None) -> PreparedTxnState:
        return self._call(self._aio.prepare_transaction(timeout))

    def prepared_transaction_state(self) -> PreparedTxnState | None:
        return self._run(self._aio.prepared_transaction_state)

    def complete_transaction(self, state: PreparedTxnState, timeout: float | None = None) -> None:
        self._call(self._aio.complete_transaction(state, timeout))


def _check_timeout(timeout: float | None) -> None:
    if isinstance(timeout, bool):
        raise TypeError("init_transactions(timeout) takes seconds; use keep_prepared_txn=True to keep a "
                        "prepared transaction")


__all__ = ["AIOProducer", "Producer", "RecordFuture", "RecordMetadata"]

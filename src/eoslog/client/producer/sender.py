"""Sender: the producer's background task, and the only code that does the producer's I/O.

Each pass (``_run_once``, Java's Sender.runOnce):

1. asks the transaction manager what comes first — resolve sequences, bump the epoch,
   get a producer id, or the next coordinator request (run as its own task, one at a time);
2. asks the accumulator which brokers have sendable batches, drains them — one Produce
   request per broker, at most ``max.in.flight.requests.per.connection`` in flight per
   connection — and fails the batches older than ``delivery.timeout.ms``;
3. sleeps until the next batch may become sendable, or until woken: by an append that
   filled a batch, a response, a connection or metadata change, a finished coordinator
   request.

Each Produce response completes, retries or fails its batches (``_complete_batch``, Java's
completeBatch): MESSAGE_TOO_LARGE splits the batch; a retriable error (or one the
transaction manager allows, Java's TransactionManager.canRetry) re-enqueues it in sequence order; DUPLICATE_SEQUENCE_
NUMBER completes it; anything else fails it, and with idempotence the partition's epoch
is bumped (or, transactional, the transaction must abort). In-flight batches whose
delivery timeout passes are failed when their request ends, which ``request.timeout.ms``
bounds.

What it must never do: touch batch contents or decide state transitions itself — batches
belong to the accumulator, state to the transaction manager.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import threading
import time

from eoslog.client.aio_client import AioClient
from eoslog.client.aio_connection import AioConnection, Buffer
from eoslog.client.errors import (
    IllegalStateError,
    InvalidRecordError,
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
    ProducerClosedError,
    TransactionAbortedError,
    error_for,
)
from eoslog.client.producer.accumulator import RecordAccumulator
from eoslog.client.producer.batch import ProducerBatch
from eoslog.client.producer.config import ProducerConfig
from eoslog.client.producer.metrics import ProducerMetrics
from eoslog.client.producer.transaction_manager import State, TransactionManager
from eoslog.client.producer.txn_requests import FindCoordinatorHandler, Outcome, TxnRequestHandler
from eoslog.client.producer.wire import (
    MAX_TRANSACTION_V1_VERSION,
    MAX_VERSION,
    MIN_VERSION,
    decode_produce_response,
    encode_produce,
)
from eoslog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

_NETWORK_EXCEPTION = int(ErrorCode.network_exception)
_REQUEST_TIMED_OUT = int(ErrorCode.request_timed_out)
_MESSAGE_TOO_LARGE = int(ErrorCode.message_too_large)
_DUPLICATE_SEQUENCE = int(ErrorCode.duplicate_sequence_number)
# The longest the sender sleeps without a reason: a safety net, not a mechanism.
_MAX_SLEEP_S = 1.0


class Sender:
    def __init__(
        self,
        config: ProducerConfig,
        client: AioClient,
        accumulator: RecordAccumulator,
        transaction_manager: TransactionManager | None,
        metrics: ProducerMetrics,
    ) -> None:
        self.config = config
        self.client = client
        self.accumulator = accumulator
        self.tm = transaction_manager
        self.metrics = metrics
        self.loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._waiter: asyncio.Future[None] | None = None
        self._wake_scheduled = False
        self._running = True
        self._force_close = False
        self._task: asyncio.Task[None] | None = None
        self._txn_task: asyncio.Task[None] | None = None
        self._guarantee_order = config.max_in_flight_requests_per_connection == 1
        self._retry_backoff_s = config.retry_backoff_ms / 1000
        self._delivery_timeout_s = config.delivery_timeout_ms / 1000
        self._transactional_id = config.transactional_id if transaction_manager is not None else None
        client.add_listener(self.wakeup)

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        self._task = self.loop.create_task(self._run(), name="eoslog-producer-sender")

    async def close(self, timeout_s: float | None) -> None:
        """Send what is left (up to ``timeout_s``), then fail the rest with ProducerClosedError."""
        self._running = False
        self.accumulator.closing = True
        tm = self.tm
        if tm is not None and tm.transactional and tm.state in (State.IN_TRANSACTION, State.ABORTABLE_ERROR) \
                and timeout_s != 0:
            # Java aborts an open transaction on a graceful close.
            try:
                tm.begin_abort()
            except KafkaError as e:
                log.info("not aborting the open transaction on close: %s", e)
        if timeout_s == 0:
            self._force_close = True
        self.wakeup()
        task = self._task
        if task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout_s)
        except TimeoutError:
            self._force_close = True
            self.wakeup()
            await task

    def wakeup(self) -> None:
        """Wake the sender (from its own event loop)."""
        self._wake_scheduled = False
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def wakeup_threadsafe(self) -> None:
        """Wake the sender from any thread (appends from application threads)."""
        if threading.get_ident() == self._loop_thread:
            self.wakeup()
        elif not self._wake_scheduled:
            self._wake_scheduled = True
            self.loop.call_soon_threadsafe(self.wakeup)

    async def _sleep(self, delay: float) -> None:
        if delay <= 0:
            self.accumulator.wake_pending = False
            await asyncio.sleep(0)
            return
        if not self.accumulator.sender_sleeps_until(time.monotonic() + delay):
            await asyncio.sleep(0)
            return
        waiter = self._waiter = self.loop.create_future()
        handle = self.loop.call_later(min(delay, _MAX_SLEEP_S), _wake, waiter)
        try:
            await waiter
        finally:
            handle.cancel()
            self._waiter = None
            self.accumulator.sender_deadline = 0.0

    async def _run(self) -> None:
        while self._running:
            await self._sleep(self._pass())
        # Graceful close: finish what is queued and in flight (and the open transaction's end).
        while not self._force_close and self._has_work():
            await self._sleep(self._pass())
        if self._force_close:
            self._abort_everything(ProducerClosedError("Producer is closed forcefully."))
        if self._txn_task is not None and not self._txn_task.done():
            self._txn_task.cancel()

    def _has_work(self) -> bool:
        tm = self.tm
        return self.accumulator.has_incomplete() or (
            tm is not None and (tm.is_completing or (self._txn_task is not None and not self._txn_task.done()))
            and not tm.has_fatal_error
        )

    def _pass(self) -> float:
        try:
            return self._run_once()
        except Exception:
            log.exception("producer sender pass failed")
            return self._retry_backoff_s

    # -- one pass ------------------------------------------------------------------------------

    def _run_once(self) -> float:
        now = time.monotonic()
        acc = self.accumulator
        tm = self.tm
        if tm is not None:
            tm.maybe_resolve_sequences()
            if tm.has_fatal_error:
                # Nothing more goes out: what is queued fails with the fatal error.
                error = tm.last_error or KafkaError("fatal error")
                for batch in acc.abort_undrained(keep_sequenced=False):
                    self._fail_batch(batch, error, adjust_sequences=False)
                return _MAX_SLEEP_S
            tm.bump_idempotent_epoch_if_needed()
            tm.maybe_restart_sequences()
            # As Java's Sender: once the transaction must abort, what was never sent fails at
            # once (with the error that doomed it), so a commit waiting on it can fail too.
            aborting = tm.is_completing and tm.state is State.ABORTING_TRANSACTION
            if acc.has_incomplete() and (aborting or tm.state is State.ABORTABLE_ERROR):
                aborted = tm.last_error if tm.state is State.ABORTABLE_ERROR and tm.last_error is not None \
                    else TransactionAbortedError("Failing batch since transaction was aborted")
                for batch in acc.abort_undrained(keep_sequenced=True):
                    self._fail_batch(batch, aborted, adjust_sequences=False)
            acc.completing_transaction = tm.is_completing
            self._maybe_start_txn_request()
        cluster = self.client.cluster
        nodes, next_check, unknown_leader = acc.ready(cluster, now)
        if unknown_leader:
            self.client.request_update()
        sendable: set[int] = set()
        max_in_flight = self.config.max_in_flight_requests_per_connection
        for node in nodes:
            conn = self.client.ready(node)
            if conn is not None and conn.in_flight < max_in_flight:
                sendable.add(node)
            elif conn is None and self.client.unreachable(node):
                # A leader we cannot reach has likely died: ask who leads now every
                # retry.backoff.ms, not only at each reconnect attempt (whose backoff grows
                # to reconnect.backoff.max.ms), so a failover is seen once the new leader is.
                self.client.request_update()
        drained: dict[int, list[ProducerBatch]] = {}
        if sendable:
            drained = acc.drain(cluster, sendable, self.config.max_request_size, now)
            for node, batches in drained.items():
                self._send_produce(node, batches, now)
        for batch in acc.expired(now):
            self._expire(batch, now)
        if drained:
            # A drain takes one batch per partition: look again at once while requests may
            # still be added in flight (Java polls with timeout 0 then too).
            return 0.0
        delay = min(next_check, acc.oldest_deadline() - now)
        return max(0.0, min(delay, _MAX_SLEEP_S))

    def _expire(self, batch: ProducerBatch, now: float) -> None:
        error = KafkaTimeoutError(
            f"Expiring {batch.count} record(s) for {batch.topic}-{batch.partition}: "
            f"{(now - batch.created) * 1000:.0f} ms has passed since batch creation "
            f"(delivery.timeout.ms={self.config.delivery_timeout_ms})"
        )
        if self.tm is not None and batch.has_sequence:
            # It was sent at least once: the broker may or may not have it (Java's
            # TransactionManager.markSequenceUnresolved).
            self.tm.mark_sequence_unresolved(batch)
        self._fail_batch(batch, error, adjust_sequences=False)

    # -- Produce ---------------------------------------------------------------------------------

    def _produce_version(self, conn: AioConnection) -> int:
        # A transactional producer on version 1 stays below v12, which would have the
        # leader add its partitions (Java's ProduceRequest.builder(useTransactionV1Version)).
        tm = self.tm
        v1 = tm is not None and tm.transactional and not tm.transaction_v2
        return conn.versions.pick(0, MAX_TRANSACTION_V1_VERSION if v1 else MAX_VERSION, MIN_VERSION)

    def _send_produce(self, node: int, batches: list[ProducerBatch], now: float) -> None:
        tm = self.tm
        if tm is not None:
            for batch in batches:
                tm.sent(batch)  # from here on every path ends in _complete_batch
        conn = self.client.ready(node)
        acks = self.config.acks
        if conn is None:
            for batch in batches:
                self._complete_batch(batch, _NETWORK_EXCEPTION, error=KafkaConnectionError(f"node {node} not ready"))
            return
        if self._guarantee_order:
            for batch in batches:
                self.accumulator.muted.add((batch.topic, batch.partition))
        try:
            version = self._produce_version(conn)
        except KafkaProtocolError as e:
            for batch in batches:
                self._complete_batch(batch, int(e.error_code), error=e)
            return
        correlation_id = conn.next_correlation_id()
        chunks = encode_produce(version, correlation_id, self.config.client_id, self._transactional_id, acks,
                                self.config.request_timeout_ms, batches)
        metrics = self.metrics
        metrics.request_total += 1
        for batch in batches:
            metrics.batch_sent(batch.size)
        metrics.byte_total += sum(len(c) for c in chunks)
        if acks == 0:
            try:
                conn.send_frame(chunks, correlation_id, 0, None)
            except KafkaError as e:
                for batch in batches:
                    self._complete_batch(batch, _NETWORK_EXCEPTION, error=e)
                return
            for batch in batches:
                self._succeed_batch(batch, -1, -1)
            return

        def on_response(frame: Buffer | None, error: KafkaError | None) -> None:
            self._on_produce_response(batches, version, now, frame, error, conn)

        try:
            conn.send_frame(chunks, correlation_id, 0, on_response)
        except KafkaError as e:
            on_response(None, e)

    def _on_produce_response(self, batches: list[ProducerBatch], version: int, sent: float,
                             frame: Buffer | None, error: KafkaError | None, conn: AioConnection) -> None:
        now = time.monotonic()
        self.metrics.response(now - sent)
        if self._guarantee_order:
            for batch in batches:
                self.accumulator.muted.discard((batch.topic, batch.partition))
        try:
            if error is not None or frame is None:
                code = _REQUEST_TIMED_OUT if isinstance(error, KafkaTimeoutError) else _NETWORK_EXCEPTION
                log.debug("produce request failed: %s", error)
                for batch in batches:
                    self._complete_batch(batch, code, error=error, now=now)
                self.client.request_update()
                return
            try:
                answer = decode_produce_response(frame, version)
            except (ValueError, struct.error, UnicodeDecodeError) as e:
                # An unreadable answer leaves no batch pending forever (a transaction's commit
                # would wait for it): they fail as after a broken connection, and are retried
                # (the broker drops an idempotent batch it already has as a duplicate).
                log.warning("unreadable Produce v%d response (%s): %s", version, e, bytes(frame).hex())
                for batch in batches:
                    self._complete_batch(batch, _NETWORK_EXCEPTION, error=KafkaConnectionError(
                        f"unreadable Produce response: {e}"), now=now)
                return
            conn.throttle(answer.throttle_ms)
            by_partition = {(b.topic, b.partition): b for b in batches}
            for r in answer.partitions:
                answered = by_partition.pop((r.topic, r.partition), None)
                if answered is not None:
                    self._complete_batch(answered, r.error_code, r.base_offset, r.log_append_time,
                                         r.log_start_offset, r.error_message, now=now, record_errors=r.record_errors)
            for batch in by_partition.values():
                self._complete_batch(batch, _NETWORK_EXCEPTION, error=KafkaConnectionError(
                    f"the Produce response has no result for {batch.topic}-{batch.partition}"), now=now)
        finally:
            self.wakeup()

    def _complete_batch(
        self, batch: ProducerBatch, code: int, base_offset: int = -1, log_append_time: int = -1,
        log_start_offset: int = -1, message: str | None = None, *, error: BaseException | None = None,
        now: float | None = None, record_errors: tuple[tuple[int, str | None], ...] = (),
    ) -> None:
        tm = self.tm
        if tm is not None:
            tm.returned(batch)
        if batch.result.done:
            return  # failed already (a forced close)
        if code == 0:
            self._succeed_batch(batch, base_offset, log_append_time)
            return
        now = time.monotonic() if now is None else now
        if code == _MESSAGE_TOO_LARGE and batch.count > 1:
            log.info("%s is too large for the broker; splitting it", batch)
            if tm is not None:
                tm.remove_in_flight(batch)
            parts = batch.split(self.config.batch_size, now)
            if tm is not None and batch.has_sequence:
                for part in parts:
                    tm.add_in_flight(part)
            self.accumulator.insert_split(parts)
            self.accumulator.deallocate(batch)
            self.metrics.batch_split_total += 1
            return
        exc = error if error is not None else error_for(code, message)
        retriable = bool(getattr(exc, "retriable", False))
        if self._can_retry(batch, code, exc, retriable, log_start_offset, now):
            if tm is not None and batch.has_sequence and batch.producer_id != tm.producer.producer_id:
                # Resending under another producer id could duplicate it (Java fails it too).
                self._fail_batch(batch, exc, adjust_sequences=False)
            else:
                log.debug("retrying %s after %s", batch, exc)
                self.accumulator.reenqueue(batch, now)
                self.metrics.record_retry_total += batch.count
        elif code == _DUPLICATE_SEQUENCE:
            # An older broker's answer to a batch it already has: delivered (KIP-98's
            # DuplicateSequenceNumber: the messages are duplicates, go on with the next).
            self._succeed_batch(batch, -1, log_append_time)
        else:
            log.info("failing %s: %s", batch, exc)
            self._fail_batch(batch, exc, adjust_sequences=True,
                             record_errors=_record_exceptions(code, message, record_errors))
        if getattr(exc, "invalid_metadata", False):
            self.client.request_update()

    def _can_retry(self, batch: ProducerBatch, code: int, error: BaseException, retriable: bool,
                   log_start_offset: int, now: float) -> bool:
        if batch.attempts >= self.config.retries or now - batch.created >= self._delivery_timeout_s:
            return False
        if self.tm is None:
            return retriable
        return self.tm.can_retry(code, batch, log_start_offset, retriable)

    def _succeed_batch(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        if self.tm is not None:
            self.tm.handle_completed_batch(batch, base_offset)
        batch.result.complete(base_offset, log_append_time)
        self.accumulator.deallocate(batch)
        self.metrics.record_send_total += batch.count

    def _fail_batch(self, batch: ProducerBatch, error: BaseException, *, adjust_sequences: bool,
                    record_errors: dict[int, BaseException] | None = None) -> None:
        if self.tm is not None:
            self.tm.handle_failed_batch(batch, error, adjust_sequences)
        if record_errors:
            # KIP-467, as Java's Sender.failBatch: the named records fail with their own error, the
            # others as members of a batch the broker refused because of them.
            error = KafkaError("Failed to append record because it was part of a batch which had one or more "
                               "invalid records")
        batch.result.complete(-1, error=error, record_errors=record_errors or None)
        self.accumulator.deallocate(batch)
        self.metrics.record_error_total += batch.count

    def _abort_everything(self, error: BaseException) -> None:
        acc = self.accumulator
        acc.abort_undrained(keep_sequenced=False)
        for batch in acc.incomplete():
            batch.result.complete(-1, error=error)
            acc.deallocate(batch)
            self.metrics.record_error_total += batch.count

    # -- coordinator requests ------------------------------------------------------------------

    def _maybe_start_txn_request(self) -> None:
        if self._txn_task is not None and not self._txn_task.done():
            return
        assert self.tm is not None
        handler = self.tm.next_request_handler(self.accumulator.has_incomplete())
        if handler is not None:
            self._txn_task = self.loop.create_task(self._run_txn_request(handler), name=f"eoslog-{handler!r}")

    async def _run_txn_request(self, handler: TxnRequestHandler) -> None:
        try:
            await self._run_request(handler)
        except Exception as e:
            log.exception("%r failed", handler)
            handler.result.fail(e)
        finally:
            self.wakeup()

    async def _run_request(self, handler: TxnRequestHandler) -> None:
        """Send ``handler``'s request until it is done: back off on retriable errors, find the
        coordinator again when it moved."""
        tm = self.tm
        assert tm is not None
        kind = handler.coordinator_type
        while True:
            node: int | None = None
            if kind is not None:
                key = handler.coordinator_key()
                node = tm.coordinator(kind, key)
                if node is None:
                    finder = FindCoordinatorHandler(tm, handler.result, kind, key, self.client.cluster.add_broker)
                    await self._run_request(finder)
                    if handler.result.done:
                        return  # the lookup failed for good
                    continue
            try:
                response = await self.client.send(handler.build, node)
            except KafkaProtocolError as e:  # no version both sides speak
                handler.fatal(e)
                return
            except KafkaError as e:
                log.debug("%r: %s; retrying", handler, e)
                if kind is not None:
                    tm.invalidate_coordinator(kind, handler.coordinator_key())
                await asyncio.sleep(self._retry_backoff_s)
                continue
            if tm.has_fatal_error and not isinstance(handler, FindCoordinatorHandler):
                handler.result.fail(tm.last_error or KafkaError("fatal error"))
                return
            try:
                outcome = handler.handle_response(response)
            except IllegalStateError as e:
                handler.result.fail(e)
                return
            if outcome is Outcome.DONE:
                if handler.follow_up is not None:
                    tm.enqueue(handler.follow_up)
                return
            if outcome is Outcome.LOOKUP and kind is not None:
                tm.invalidate_coordinator(kind, handler.coordinator_key())
            await asyncio.sleep(handler.backoff_s if handler.backoff_s is not None else self._retry_backoff_s)
            handler.backoff_s = None


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _record_exceptions(code: int, message: str | None,
                       record_errors: tuple[tuple[int, str | None], ...]) -> dict[int, BaseException]:
    """Each named record's exception, as Java's Sender builds them: the partition's error when the
    broker named one record, InvalidRecordError otherwise (the code cannot tell which record had
    which error); the record's message, else the partition's."""
    out: dict[int, BaseException] = {}
    for index, why in record_errors:
        text = why if why is not None else message
        out[index] = error_for(code, text) if len(record_errors) == 1 else InvalidRecordError(text)
    return out

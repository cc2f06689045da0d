"""RecordAccumulator: per-partition queues of batches between ``send()`` and the sender.

What it owns, as Java's RecordAccumulator: a deque of ProducerBatch per partition. ``append`` (any thread)
encodes a record into the last batch of its partition's deque or opens a new one, within
``buffer.memory``; ``ready`` tells the sender which brokers have something sendable
(a full batch, ``linger.ms`` elapsed, a flush, a close, memory exhausted) and when to look
again; ``drain`` takes, per broker, at most one batch per partition up to
``max.request.size``, rotating the starting partition so none starves; ``reenqueue`` puts a
batch being retried back at the front of its deque, in sequence order; ``expired`` removes
batches older than ``delivery.timeout.ms``. The memory a batch holds is returned when the
batch completes (``deallocate``), which wakes producers blocked on ``buffer.memory``.

Threads: producer threads append; the sender's event loop does everything else. One lock
guards the deques and the memory count; batches leave the deques before they are closed,
so closing (compression, CRC) happens outside it. What it must never do: I/O, or decide
retries — the sender and the transaction manager do.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from eoslog.client.cluster import ClusterMetadata
from eoslog.client.producer.batch import ProducerBatch
from eoslog.client.producer.futures import RecordFuture
from eoslog.records.compression import CompressionType

if TYPE_CHECKING:
    from eoslog.client.producer.transaction_manager import TransactionManager


class _Signal:
    """What ``append`` returns instead of a future when it did not append."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


NEED_MEMORY = _Signal("NEED_MEMORY")  # buffer.memory is used up: wait, then append again
NEW_BATCH = _Signal("NEW_BATCH")  # abort_on_new_batch: the sticky partitioner should move on


class RecordAccumulator:
    def __init__(
        self,
        *,
        batch_size: int,
        buffer_memory: int,
        linger_ms: int,
        retry_backoff_ms: int,
        delivery_timeout_ms: int,
        compression: CompressionType = CompressionType.NONE,
        transaction_manager: TransactionManager | None = None,
        wakeup: Callable[[], None] = lambda: None,
    ) -> None:
        self.batch_size = max(batch_size, 1)
        self.buffer_memory = buffer_memory
        self.linger_s = linger_ms / 1000
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.delivery_timeout_s = delivery_timeout_ms / 1000
        self.compression = compression
        self.tm = transaction_manager
        # Called (from whichever thread appends) when a batch becomes sendable before the
        # sender's next planned look at the queues.
        self.wakeup = wakeup
        # time.monotonic() at which the sender will look again anyway; 0 while it runs, and
        # then an append that would have woken it sets ``wake_pending`` instead (under the lock).
        self.sender_deadline = 0.0
        self.wake_pending = False
        self.lock = threading.Lock()
        self._free = buffer_memory
        self._memory_waiters = 0
        self._memory_listeners: list[Callable[[], None]] = []
        self._topics: dict[str, dict[int, deque[ProducerBatch]]] = {}
        self._incomplete: set[ProducerBatch] = set()
        self._drain_index: dict[int, int] = {}
        self.muted: set[tuple[str, int]] = set()
        self.flushes_in_progress = 0
        self.closing = False
        self.completing_transaction = False  # commit/abort: every batch is sendable now

    # -- appending (any thread) -------------------------------------------------------------

    def append(
        self, topic: str, partition: int, timestamp: int, key: bytes | None, value: bytes | None,
        headers: bytes, size_bound: int, abort_on_new_batch: bool = False,
    ) -> RecordFuture | _Signal:
        with self.lock:
            parts = self._topics.get(topic)
            if parts is None:
                parts = self._topics[topic] = {}
            dq = parts.get(partition)
            if dq is None:
                dq = parts[partition] = deque()
            elif dq:
                last = dq[-1]
                if last.wire is None:
                    future = last.try_append(timestamp, key, value, headers)
                    if future is not None:
                        if last.full:
                            self._wake(0.0)
                        return future
            if abort_on_new_batch and dq:
                return NEW_BATCH
            size = max(self.batch_size, size_bound + 61)
            if self._free < size:
                return NEED_MEMORY
            self._free -= size
            now = time.monotonic()
            batch = ProducerBatch(topic, partition, now, self.batch_size, self.compression, size)
            future = batch.try_append(timestamp, key, value, headers)
            assert future is not None
            dq.append(batch)
            self._incomplete.add(batch)
            self._wake(0.0 if len(dq) > 1 or batch.full else now + self.linger_s)
            return future

    def _wake(self, ready_at: float) -> None:
        """A batch becomes sendable at ``ready_at``: wake the sender if it sleeps past that.
        Called under the lock."""
        deadline = self.sender_deadline
        if not deadline:
            self.wake_pending = True
        elif ready_at < deadline:
            self.sender_deadline = 0.0
            self.wakeup()

    def sender_sleeps_until(self, deadline: float) -> bool:
        """The sender is about to sleep until ``deadline``; False if it must look again first."""
        with self.lock:
            if self.wake_pending:
                self.wake_pending = False
                return False
            self.sender_deadline = deadline
            return True

    def add_memory_listener(self, callback: Callable[[], None]) -> None:
        """``callback`` runs (in the sender's thread) each time memory is returned; while any is
        registered, a producer waits for memory and every batch is sendable at once."""
        with self.lock:
            self._memory_waiters += 1
            self._memory_listeners.append(callback)

    def remove_memory_listener(self, callback: Callable[[], None]) -> None:
        with self.lock:
            if callback in self._memory_listeners:
                self._memory_listeners.remove(callback)
                self._memory_waiters -= 1

    def has_room(self, size_bound: int) -> bool:
        return self._free >= max(self.batch_size, size_bound + 61)

    def begin_flush(self) -> None:
        with self.lock:
            self.flushes_in_progress += 1
            self._wake(0.0)

    def end_flush(self) -> None:
        with self.lock:
            self.flushes_in_progress -= 1

    # -- the sender's side ----------------------------------------------------------------------

    def deallocate(self, batch: ProducerBatch) -> None:
        """The batch completed (or was split): return its memory."""
        with self.lock:
            self._incomplete.discard(batch)
            self._free += batch.reserved
            batch.reserved = 0
            listeners = list(self._memory_listeners) if self._memory_waiters else []
        for callback in listeners:
            callback()

    def has_incomplete(self) -> bool:
        return bool(self._incomplete)

    def incomplete(self) -> list[ProducerBatch]:
        with self.lock:
            return list(self._incomplete)

    def has_undrained(self) -> bool:
        with self.lock:
            return any(dq for parts in self._topics.values() for dq in parts.values())

    def ready(self, cluster: ClusterMetadata, now: float) -> tuple[set[int], float, bool]:
        """(nodes with a sendable batch, seconds until the next batch may be, a leader unknown)."""
        nodes: set[int] = set()
        next_check = float("inf")
        unknown_leader = False
        send_all = (self.closing or self.completing_transaction or self.flushes_in_progress > 0
                    or self._memory_waiters > 0)
        linger = self.linger_s
        backoff = self.retry_backoff_s
        muted = self.muted
        with self.lock:
            for topic, parts in self._topics.items():
                meta = cluster.topics.get(topic)
                leaders = meta.leaders if meta is not None else ()
                for partition, dq in parts.items():
                    if not dq:
                        continue
                    leader = leaders[partition] if partition < len(leaders) else -1
                    if leader < 0:
                        unknown_leader = True
                        continue
                    if leader in nodes or (muted and (topic, partition) in muted):
                        continue
                    first = dq[0]
                    if first.attempts:
                        waited = now - first.last_attempt
                        if waited < backoff:
                            next_check = min(next_check, backoff - waited)
                            continue
                        nodes.add(leader)
                        continue
                    if send_all or first.full or len(dq) > 1:
                        nodes.add(leader)
                        continue
                    waited = now - first.created
                    if waited >= linger:
                        nodes.add(leader)
                    else:
                        next_check = min(next_check, linger - waited)
        return nodes, next_check, unknown_leader

    def drain(self, cluster: ClusterMetadata, nodes: set[int], max_request_size: int,
              now: float) -> dict[int, list[ProducerBatch]]:
        """Per node, at most one batch per partition it leads, up to ``max_request_size`` bytes.

        With a transaction manager, a partition is skipped when the manager says so (no
        producer id yet, partition not in the transaction, a retried batch that is not the
        first in flight, ...); new batches get their producer id and sequence here.
        """
        tm = self.tm
        out: dict[int, list[ProducerBatch]] = {}
        backoff = self.retry_backoff_s
        with self.lock:
            for node in nodes:
                parts = cluster.partitions_for_node(node)
                if not parts:
                    continue
                start = self._drain_index.get(node, 0) % len(parts)
                size = 0
                batches: list[ProducerBatch] = []
                for i in range(len(parts)):
                    topic, partition = parts[(start + i) % len(parts)]
                    dq = self._topics.get(topic, {}).get(partition)
                    if not dq or (self.muted and (topic, partition) in self.muted):
                        continue
                    first = dq[0]
                    if first.attempts and now - first.last_attempt < backoff:
                        continue
                    if batches and size + first.size > max_request_size:
                        # A batch larger than the limit (compression can do that) still
                        # goes, alone, in a request of its own.
                        self._drain_index[node] = (start + i) % len(parts)
                        break
                    if tm is not None and tm.should_stop_drain(first):
                        continue
                    dq.popleft()
                    batches.append(first)
                    size += first.size
                else:
                    self._drain_index[node] = start + 1
                if batches:
                    out[node] = batches
        for batches in out.values():
            for batch in batches:
                if tm is not None and not batch.has_sequence:
                    tm.assign_sequence(batch)
                batch.close()
                batch.drained = now
        return out

    def reenqueue(self, batch: ProducerBatch, now: float) -> None:
        """Put a batch being retried back at the front, in sequence order (Java's
        ``RecordAccumulator.insertInSequenceOrder``)."""
        batch.attempts += 1
        batch.last_attempt = now
        with self.lock:
            dq = self._topics.setdefault(batch.topic, {}).setdefault(batch.partition, deque())
            if self.tm is None or not batch.has_sequence:
                dq.appendleft(batch)
                return
            # Batches with sequences (retries) sit at the front in order; new ones follow.
            ahead: list[ProducerBatch] = []
            while dq and dq[0].has_sequence and dq[0].base_sequence < batch.base_sequence:
                ahead.append(dq.popleft())
            dq.appendleft(batch)
            for b in reversed(ahead):
                dq.appendleft(b)

    def insert_split(self, batches: list[ProducerBatch]) -> None:
        """Batches split from one that was too large: to the front, in order."""
        with self.lock:
            for b in batches:
                self._incomplete.add(b)
            dq = self._topics.setdefault(batches[0].topic, {}).setdefault(batches[0].partition, deque())
            ahead: list[ProducerBatch] = []
            if batches[0].has_sequence:
                while dq and dq[0].has_sequence and dq[0].base_sequence < batches[0].base_sequence:
                    ahead.append(dq.popleft())
            for b in reversed(batches):
                dq.appendleft(b)
            for b in reversed(ahead):
                dq.appendleft(b)

    def expired(self, now: float) -> list[ProducerBatch]:
        """Remove and return the queued batches older than delivery.timeout.ms."""
        limit = self.delivery_timeout_s
        out: list[ProducerBatch] = []
        with self.lock:
            for parts in self._topics.values():
                for dq in parts.values():
                    while dq and now - dq[0].created >= limit:
                        out.append(dq.popleft())
        return out

    def oldest_deadline(self) -> float:
        """time.monotonic() at which the oldest queued batch expires (inf when none)."""
        with self.lock:
            firsts = [dq[0].created for parts in self._topics.values() for dq in parts.values() if dq]
        return min(firsts) + self.delivery_timeout_s if firsts else float("inf")

    def abort_undrained(self, keep_sequenced: bool) -> list[ProducerBatch]:
        """Remove and return the batches still queued (with ``keep_sequenced``, those being
        retried stay: their fate on the broker is not known yet)."""
        out: list[ProducerBatch] = []
        with self.lock:
            for parts in self._topics.values():
                for dq in parts.values():
                    kept = [b for b in dq if keep_sequenced and b.has_sequence]
                    out.extend(b for b in dq if not (keep_sequenced and b.has_sequence))
                    dq.clear()
                    dq.extend(kept)
        return out

"""Delivering COMMIT/ABORT markers to the leaders of a transaction's partitions.

As Kafka's ``TransactionMarkerChannelManager``: a transaction whose PREPARE_* record is
in the log waits here (``PendingCompleteTxn``) until every partition has acknowledged its
marker; then the coordinator writes COMPLETE_*. Markers queued for the same leader leave
in one WriteTxnMarkers request. A partition that no longer exists is dropped from the
transaction (its topic was deleted); a retriable error keeps it for the next round after
``retry_backoff_ms``; a stale producer or coordinator epoch means another coordinator (or
a later epoch) owns the outcome, and sending for that transaction stops.

This module speaks in domain values (``TxnMarker``): the ``MarkerSender`` the broker
provides turns them into WriteTxnMarkers requests — delivered to the local handler on a
single node, over the wire to another broker in a cluster — and the responses back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from eoslog.coordinator.transaction.metadata import TransactionMetadata, TxnTransitMetadata
from eoslog.coordinator.transaction.state import TxnState
from eoslog.errors import Errors
from eoslog.types import TopicPartition

log = logging.getLogger(__name__)

# The outcome is someone else's now: stop sending for this transaction (Kafka does too).
_STOP = frozenset({Errors.INVALID_PRODUCER_EPOCH, Errors.TRANSACTION_COORDINATOR_FENCED})
# The partition cannot take markers at all: nothing to wait for.
_SKIP = frozenset({Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT, Errors.UNSUPPORTED_VERSION})


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One entry of a WriteTxnMarkers request."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartition, ...]
    # The transaction's protocol (WriteTxnMarkers v2): from 2 on a partition takes the marker only
    # with an epoch above its producer's (KIP-890 part 2).
    transaction_version: int = 0


# (node id, markers) → one {partition: error} per marker, in order.
MarkerSender = Callable[[int, Sequence[TxnMarker]], Awaitable[list[dict[TopicPartition, Errors]]]]
# The partition's leader; NO_LEADER while it has none (the marker waits); None when the
# partition does not exist (its topic was deleted: the marker is dropped).
LeaderLookup = Callable[[TopicPartition], int | None]
NO_LEADER = -1


@dataclass(eq=False)
class PendingCompleteTxn:
    transactional_id: str
    coordinator_epoch: int
    metadata: TransactionMetadata
    transit: TxnTransitMetadata  # the COMPLETE_* transition, pending since PREPARE_* was written
    remaining: set[TopicPartition] = field(default_factory=set)
    stopped: bool = False
    # The markers' (producer id, epoch) when not the COMPLETE_* pair: a kept KIP-939
    # transaction ends under its own producer id while its client may have moved on.
    marker_producer: tuple[int, int] | None = None
    # (state partition, offset): no marker leaves before the PREPARE_* record below that
    # offset is replicated — a coordinator that lost it on a leader change must not have
    # decided anything (None: it is, e.g. loaded from the log by a new coordinator).
    durable_at: tuple[int, int] | None = None
    # time.perf_counter() when PREPARE_* was appended (None: not prepared by this process):
    # the coordinator's end_phases histograms time the markers from it.
    prepared_at: float | None = None

    @property
    def commit(self) -> bool:
        return self.transit.state is TxnState.COMPLETE_COMMIT

    def marker(self, partitions: Sequence[TopicPartition]) -> TxnMarker:
        producer_id, epoch = self.marker_producer or (self.transit.producer_id, self.transit.producer_epoch)
        return TxnMarker(producer_id, epoch, self.commit, self.coordinator_epoch, tuple(partitions),
                         self.metadata.client_transaction_version)


class TxnMarkerChannel:
    def __init__(
        self, sender: MarkerSender, leader_for: LeaderLookup,
        on_markers_written: Callable[[PendingCompleteTxn], bool], retry_backoff_ms: int = 100,
        is_replicated: Callable[[int, int], bool] | None = None,
        wait_replicated: Callable[[int, int], Awaitable[object]] | None = None,
    ) -> None:
        """``on_markers_written`` writes COMPLETE_*; it returns True to be called again
        after the back-off (its append failed with a retriable error). ``wait_replicated``
        (state partition, offset) waits, bounded, until ``is_replicated`` may hold, so a
        transaction whose PREPARE_* is being replicated or fsynced does not wait a back-off."""
        self._sender = sender
        self._is_replicated = is_replicated or (lambda _partition, _offset: True)
        self._wait_replicated = wait_replicated
        self._leader_for = leader_for
        self._on_markers_written = on_markers_written
        self._retry_backoff_s = retry_backoff_ms / 1000
        self._queue: list[PendingCompleteTxn] = []
        self._wakeup = asyncio.Event()
        self._draining = False

    def add(self, pending: PendingCompleteTxn) -> None:
        self._queue.append(pending)
        self._wakeup.set()

    @property
    def pending(self) -> int:
        return len(self._queue)

    def remove_for(self, predicate: Callable[[PendingCompleteTxn], bool]) -> None:
        """Forget queued transactions (their coordinator partition was given up)."""
        self._queue = [p for p in self._queue if not predicate(p)]

    async def run(self) -> None:
        """The broker's sender task: deliver whatever is queued, forever."""
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            try:
                await self.drain()
            except Exception:
                # A bug must not stop every later transaction from completing: what is
                # still queued is tried again after the back-off.
                log.exception("delivering transaction markers failed")
                await asyncio.sleep(self._retry_backoff_s)
                self._wakeup.set()

    async def drain(self) -> None:
        """Deliver until nothing is queued (retrying after the back-off)."""
        if self._draining:
            return
        self._draining = True
        try:
            while self._queue:
                retry = await self._round()
                if retry:
                    await asyncio.sleep(self._retry_backoff_s)
        finally:
            self._draining = False

    async def _round(self) -> bool:
        """One request per leader for everything queued; True if something must wait."""
        batch, self._queue = self._queue, []
        waiting = [p for p in batch if p.durable_at is not None and not self._is_replicated(*p.durable_at)]
        if waiting and self._wait_replicated is not None:
            await asyncio.gather(*(self._wait_replicated(*p.durable_at) for p in waiting if p.durable_at))
            waiting = [p for p in waiting if p.durable_at is not None and not self._is_replicated(*p.durable_at)]
        if waiting:
            batch = [p for p in batch if p not in waiting]
            self._queue.extend(waiting)
        by_node: dict[int, list[tuple[PendingCompleteTxn, TxnMarker]]] = {}
        for p in batch:
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in sorted(p.remaining):
                leader = self._leader_for(tp)
                if leader is None:
                    log.info("%s: %s no longer exists; no marker for it", p.transactional_id, tp)
                    p.remaining.discard(tp)
                elif leader != NO_LEADER:
                    by_leader.setdefault(leader, []).append(tp)
                # else: no leader now (an election is under way): the marker waits for one
            for node, tps in by_leader.items():
                by_node.setdefault(node, []).append((p, p.marker(tps)))
        for node, entries in by_node.items():
            try:
                results = await self._sender(node, [m for _, m in entries])
            except Exception:
                log.exception("WriteTxnMarkers to node %d failed; retrying", node)
                continue
            for (p, _), result in zip(entries, results, strict=True):
                self._handle(p, result)
        retry = False
        for p in batch:
            if p.stopped:
                continue
            try:
                again = bool(p.remaining) or self._on_markers_written(p)
            except Exception:
                log.exception("%s: completing the transaction failed; it stays prepared until "
                              "the coordinator loads it again", p.transactional_id)
                continue
            if again:
                self._queue.append(p)
                retry = True
        return retry or bool(waiting)

    def _handle(self, p: PendingCompleteTxn, result: dict[TopicPartition, Errors]) -> None:
        for tp, error in result.items():
            if error == Errors.NONE or error in _SKIP:
                p.remaining.discard(tp)
            elif error in _STOP:
                log.warning("%s: marker for %s refused with %s; another coordinator or epoch owns "
                            "this transaction now, stop sending", p.transactional_id, tp, error)
                p.stopped = True
            else:
                log.info("%s: marker for %s failed with %s; will retry", p.transactional_id, tp, error)

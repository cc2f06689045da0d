"""Group commit: acknowledged writes survive a power cut at the cost of one fsync round.

With ``log.flush.policy=group-commit`` a leader's own log end offset counts towards the high
watermark only once it is fsynced (``Partition.durable``), so every acks=all produce, every
coordinator write waiting for replication and every consumer read stays below what a power
cut could take away. Appends mark their partition here; one task runs rounds one after the
other: each round takes every partition written since the last, fdatasyncs their segments
in one worker thread (the event loop keeps appending meanwhile, for the next round), then
moves their recovery points and high watermarks, which answers the waiting requests. Under
load a round covers many requests and partitions; an idle broker pays one fsync per write.

Internal topics (``__consumer_offsets``, ``__transaction_state``) are synced last in a
round: a coordinator's decision never reaches the disk before the data it decides about.
Every write that depends on another is issued only after the first is acknowledged (data
before EndTxn, PrepareCommit before the markers, markers before CompleteCommit), so this
ordering is a second line, not the only one.

A follower (cluster mode) appends what it fetched and then awaits ``synced``: its next Fetch's
offset tells the leader how far it has the data, which moves the high watermark, so it must
not pass what is fsynced on the follower too. One round covers all the partitions of a fetch
(and whatever else was written meanwhile).

A round that cannot take a descriptor for a partition (the process is out of them: clients'
sockets can use them all up) leaves that partition and the ones after it (internal topics
among them) for a round shortly after and answers none of its ``synced`` callers yet; nothing
was synced or failed, so no directory goes offline.

A failed fdatasync is never retried: Linux drops the dirty pages a write-back could not write,
so a second fdatasync would succeed without them and acknowledge records a power cut then
takes (fsyncgate). The file's log directory goes offline instead (``storage.log_dir_failure``):
no recovery point or high watermark of its logs moves again, and the replica layer answers
what waits on them with KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from eoslog.replica.partition import Partition
from eoslog.running_loop import LoopRef
from eoslog.storage.fileio import DescriptorsExhausted, report_failed_syncs, sync_files
from eoslog.storage.log import SyncPlan
from eoslog.storage.log_dir_failure import KafkaStorageError
from eoslog.types import TopicPartition

log = logging.getLogger(__name__)

RETRY_WITHOUT_DESCRIPTORS_S = 0.05  # a round short of descriptors: the next one after this


@dataclass
class GroupCommitStats:
    rounds: int = 0
    files_synced: int = 0
    offsets_synced: int = 0  # records and markers made durable


class GroupCommit:
    def __init__(self, on_durable: Callable[[Partition], None]) -> None:
        """``on_durable(partition)``: its recovery point moved (the high watermark may follow)."""
        self._on_durable = on_durable
        self._dirty: dict[TopicPartition, Partition] = {}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._waiters: list[asyncio.Future[None]] = []  # ``synced`` callers, answered by the next round
        self._loop = LoopRef()
        self.stats = GroupCommitStats()
        self._short_of_descriptors = False  # the last round left partitions behind (logged once)

    def written(self, partition: Partition) -> None:
        """``partition`` was appended to: the next round syncs it. Outside an event loop (start-up,
        unit tests) the log is flushed at once."""
        try:
            loop = self._loop.get()
        except RuntimeError:
            partition.log.flush()
            self._on_durable(partition)
            return
        if partition.log.offline:
            return  # nothing of it is made durable any more
        self._dirty[partition.tp] = partition
        if self._task is None or self._task.done():
            # (A new event with a new task: an asyncio.Event belongs to the loop it first waited in.)
            self._wakeup = asyncio.Event()
            self._task = loop.create_task(self._run())
        self._wakeup.set()

    async def synced(self, partitions: Iterable[Partition]) -> None:
        """Return once a round begun after this call has synced ``partitions`` (a follower's
        appends, before its next fetch reports them to the leader); KafkaStorageError when the
        log directory of one of them is offline (its fsync failed: nothing to report)."""
        waiter: asyncio.Future[None] = self._loop.get().create_future()
        self._waiters.append(waiter)
        partitions = list(partitions)
        for partition in partitions:
            self.written(partition)
        await waiter
        offline = [str(p.tp) for p in partitions if p.log.offline]
        if offline:
            raise KafkaStorageError(f"not synced, their log directory is offline: {', '.join(offline)}")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        for waiter in self._waiters:
            waiter.cancel()
        self._waiters = []

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            await self.sync_round()

    async def sync_round(self) -> None:
        """fsync everything written so far (one round); its partitions' high watermarks move."""
        dirty, self._dirty = self._dirty, {}
        waiters, self._waiters = self._waiters, []
        order = sorted(dirty.values(), key=lambda p: p.tp.topic.startswith("__"))  # internal topics last
        plans: list[tuple[Partition, SyncPlan]] = []
        left: list[Partition] = []
        for i, p in enumerate(order):
            try:
                plan = _begin_sync(p)
            except DescriptorsExhausted as e:
                left = order[i:]  # the rest too: internal topics stay after the data they decide about
                if not self._short_of_descriptors:
                    log.warning("group commit: %s; the partitions left are synced by a later round", e)
                break
            if plan is not None:
                plans.append((p, plan))
        if left:  # their followers' ``synced`` must wait for them too
            self._short_of_descriptors = True
            self._dirty.update((p.tp, p) for p in left)
            self._waiters[:0] = waiters
            waiters = []
            self._loop.get().call_later(RETRY_WITHOUT_DESCRIPTORS_S, self._wakeup.set)
        elif self._short_of_descriptors:
            self._short_of_descriptors = False
            log.info("group commit: descriptors available again, every partition synced")
        if not plans:
            _answer(waiters)
            return
        files = [file for _, plan in plans for file in plan.files]
        # Never retried (module docstring): the failures' directories go offline before the
        # plans below are looked at, so no log of theirs moves its recovery point.
        report_failed_syncs(await asyncio.to_thread(sync_files, files))
        self.stats.rounds += 1
        self.stats.files_synced += len(files)
        for p, plan in plans:
            if p.log.offline:
                continue
            before = p.log.recovery_point
            p.log.end_sync(plan)
            self.stats.offsets_synced += max(0, p.log.recovery_point - before)
            self._on_durable(p)
        _answer(waiters)


def _begin_sync(partition: Partition) -> SyncPlan | None:
    """The partition's part of a round; None when it has nothing to sync or its directory is offline."""
    if partition.log.offline:
        return None
    try:
        return partition.log.begin_sync()
    except KafkaStorageError:  # (its directory went offline just now)
        return None


def _answer(waiters: list[asyncio.Future[None]]) -> None:
    for waiter in waiters:
        if not waiter.done():  # (cancelled: its fetcher stopped)
            waiter.set_result(None)

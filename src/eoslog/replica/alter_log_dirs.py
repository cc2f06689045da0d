"""Moving a replica to another log directory of this broker while it is served (AlterReplicaLogDirs,
KIP-113; Kafka's ReplicaManager.alterReplicaLogDirs and ReplicaAlterLogDirsThread).

A move creates a future log in the target directory (``LogManager.create_future_log``) and one
task per moving partition copies the current log into it as a follower copies its leader: the
future log truncates where it diverged from the current one (leader epochs, the same rule as a
follower's: ``follower_truncation``, so a current log truncated by its own leader change is
followed), starts at the current log's start, takes its batches with ``append_as_follower`` —
offsets kept, producer state, open transactions and the aborted-transaction index rebuilt from
them as on a follower — and its high watermark and log start offset. Each step runs in one turn of
the event loop, so no append interleaves with it. When the future log has every offset of the
current one, the same turn swaps them (``LogManager.replace_current_with_future``) and points the
partition at the moved log: nothing is appended in between, so no record is lost or doubled.

The copy is throttled by ``replica.alter.log.dirs.io.max.bytes.per.second`` (Kafka's
ReplicaAlterLogDirs quota) and fsynced off the event loop as it goes, so that the swap's own flush
is short. Compaction of a moving partition waits until it has moved (Kafka's
abortAndPauseCleaning). A future log left by a restart resumes here (``resume``); in a cluster the
copy waits until the cluster layer has made the partition leader or follower.

Never speaks the wire protocol: the handler translates.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from eoslog.errors import Errors
from eoslog.quotas.replication import ReplicationQuota
from eoslog.replica.partition import Partition
from eoslog.storage import LogManager, PartitionLog
from eoslog.storage.fileio import report_failed_syncs, sync_files
from eoslog.storage.leader_epoch import follower_truncation
from eoslog.storage.log_dir_failure import KafkaStorageError
from eoslog.types import TopicPartition

log = logging.getLogger(__name__)

# What one step copies at most before the event loop serves others (Kafka's replica.fetch.max.bytes).
STEP_BYTES = 1 << 20
# Unsynced bytes of a future log after which the copy fsyncs it (off the event loop).
SYNC_EVERY_BYTES = 8 << 20
# How long a move waits for its partition to be served here again (a cluster's leadership), or
# for a new append when caught up but for what is in flight.
BACKOFF_S = 0.2
# Kafka's UnifiedLog.logFutureDirName must fit a file name (KAFKA-4893).
MAX_DIR_NAME = 255
_FUTURE_SUFFIX_LEN = len(".00000000000000000000000000000000-future")


class LogDirMover:
    """The moves of this broker's replicas between its log directories."""

    def __init__(self, logs: LogManager, partition: Callable[[TopicPartition], Partition | None],
                 moved: Callable[[Partition, PartitionLog], None], quota: ReplicationQuota,
                 wait_for_append: Callable[[TopicPartition, float], Awaitable[float | None]] | None = None
                 ) -> None:
        """``partition(tp)``: the partition as the replica layer serves it (None: not yet, or no
        more); ``moved(partition, log)``: the swap happened, the partition now reads and writes
        ``log``; ``wait_for_append(tp, timeout)``: a wait woken by the next append to ``tp``."""
        self.logs = logs
        self._partition = partition
        self._moved = moved
        self.quota = quota
        self._wait_for_append = wait_for_append
        self._tasks: dict[TopicPartition, asyncio.Task[None]] = {}
        self.bytes_copied = 0
        # Whether the cluster has the topic (the broker sets its metadata's answer): a partition of
        # a topic this broker holds no replica of yet is REPLICA_NOT_AVAILABLE, not unknown.
        self.topic_exists: Callable[[str], bool] = lambda topic: topic in logs.topics

    # -- AlterReplicaLogDirs -------------------------------------------------------------------

    def alter_replica_log_dirs(self, targets: Mapping[TopicPartition, str]) -> dict[TopicPartition, Errors]:
        """Each partition's answer, as Kafka's ReplicaManager.alterReplicaLogDirs: LOG_DIR_NOT_FOUND
        for a path not in log.dirs, KAFKA_STORAGE_ERROR for an offline directory or partition,
        UNKNOWN_TOPIC_OR_PARTITION for a topic this broker does not know, REPLICA_NOT_AVAILABLE
        for a partition it does not hold yet (the directory is remembered for when it comes: the
        reassignment tool retries until the replica is there), INVALID_TOPIC_EXCEPTION for a name
        too long for a future directory, KAFKA_STORAGE_ERROR while any log directory is offline
        (Kafka makes no future log then); NONE once the move is under way (or done: the replica is
        in that directory already, and a move elsewhere is cancelled)."""
        return {tp: self._alter(tp, path) for tp, path in targets.items()}

    def _alter(self, tp: TopicPartition, path: str) -> Errors:
        key = (tp.topic, tp.partition)
        if len(f"{tp.topic}-{tp.partition}") + _FUTURE_SUFFIX_LEN > MAX_DIR_NAME:
            log.warning("cannot move %s: the topic name is too long", tp)
            return Errors.INVALID_TOPIC_EXCEPTION
        target = self._log_dir(path)
        if target is None:
            log.warning("cannot move %s to %s: not one of log.dirs", tp, path)
            return Errors.LOG_DIR_NOT_FOUND
        if self.logs.dir_states[target].offline is not None:
            return Errors.KAFKA_STORAGE_ERROR
        current = self.logs.logs.get(key)
        if current is None:
            if not self.topic_exists(tp.topic):
                return Errors.UNKNOWN_TOPIC_OR_PARTITION
            self.logs.preferred_log_dirs[key] = target
            return Errors.REPLICA_NOT_AVAILABLE
        if current.offline:
            return Errors.KAFKA_STORAGE_ERROR
        future = self.logs.futures.get(key)
        if future is not None and future.log_dir.path != target:
            log.info("%s: the move to %s is cancelled for a move to %s", tp, future.log_dir.path, target)
            self.cancel(tp)
        if current.log_dir.path == target or key in self.logs.futures:
            return Errors.NONE
        if self.logs.offline_log_dirs:
            # Kafka makes no future log while any log directory is offline (getOrCreateLog).
            log.warning("cannot move %s: log directories %s are offline", tp, self.logs.offline_log_dirs)
            return Errors.KAFKA_STORAGE_ERROR
        try:
            self.logs.create_future_log(tp.topic, tp.partition, target)
        except KafkaStorageError:
            return Errors.KAFKA_STORAGE_ERROR
        except OSError as e:
            self.logs.dir_states[target].fail(f"creating the future log of {tp}", e)
            return Errors.KAFKA_STORAGE_ERROR
        self._start(tp)
        return Errors.NONE

    def _log_dir(self, path: str) -> Path | None:
        wanted = Path(path).resolve()
        return next((d for d in self.logs.log_dirs if d.resolve() == wanted), None)

    # -- the copies ----------------------------------------------------------------------------

    def resume(self) -> None:
        """Copy into the future logs a start found (a move a restart interrupted)."""
        for topic, partition in list(self.logs.futures):
            self._start(TopicPartition(topic, partition))

    def cancel(self, tp: TopicPartition) -> None:
        task = self._tasks.pop(tp, None)
        if task is not None:
            task.cancel()
        self.logs.remove_future_log(tp.topic, tp.partition)

    def shutdown(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        self._tasks.clear()

    def moving(self) -> dict[TopicPartition, Path]:
        """The partitions being moved and their target directories."""
        return {TopicPartition(*tp): f.log_dir.path for tp, f in self.logs.futures.items()}

    def _start(self, tp: TopicPartition) -> None:
        task = self._tasks.get(tp)
        if task is None or task.done():
            self._tasks[tp] = asyncio.get_running_loop().create_task(self._copy(tp), name=f"move {tp}")

    async def _copy(self, tp: TopicPartition) -> None:
        key = (tp.topic, tp.partition)
        unsynced = 0
        try:
            while True:
                future = self.logs.futures.get(key)
                if future is None or future.offline:
                    return  # cancelled, or its directory (or the current one's) failed
                partition = self._partition(tp)
                if partition is None or partition.log.offline or partition.log is future:
                    await asyncio.sleep(BACKOFF_S)  # not served here (yet): a cluster's leadership
                    continue
                if self.quota.is_exceeded():
                    await asyncio.sleep(BACKOFF_S / 2)
                    continue
                copied = self._step(tp, partition, future)
                if copied is None:
                    return  # moved
                unsynced += copied
                if unsynced >= SYNC_EVERY_BYTES:
                    await self._sync(future)
                    unsynced = 0
                elif copied == 0:
                    await self._wait(tp)
                else:
                    await asyncio.sleep(0)
        except KafkaStorageError as e:
            log.warning("the move of %s stopped: %s", tp, e)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("the move of %s failed; the future log stays for the next start", tp)
        finally:
            if self._tasks.get(tp) is asyncio.current_task():
                del self._tasks[tp]

    async def _wait(self, tp: TopicPartition) -> None:
        if self._wait_for_append is None:
            await asyncio.sleep(BACKOFF_S)
        else:
            await self._wait_for_append(tp, BACKOFF_S)

    async def _sync(self, future: PartitionLog) -> None:
        """fsync what the future log has (off the event loop), so that the swap's flush is short."""
        plan = future.begin_sync()
        if plan is None:
            return
        report_failed_syncs(await asyncio.to_thread(sync_files, plan.files))
        future.end_sync(plan)

    def _step(self, tp: TopicPartition, partition: Partition, future: PartitionLog) -> int | None:
        """One turn: truncate, copy up to ``STEP_BYTES``, follow the high watermark and log start
        offset, and swap when nothing is left to copy. The bytes copied; None once moved."""
        source = partition.log
        self._truncate(source, future)
        if source.log_start_offset > future.log_end_offset:
            future.truncate_fully_and_start_at(source.log_start_offset)
        budget = STEP_BYTES
        while budget > 0 and future.log_end_offset < source.log_end_offset:
            records = source.read(future.log_end_offset, budget, upper_bound=source.log_end_offset).records
            if not records:
                break
            first = int.from_bytes(records[:8], "big", signed=True)
            if first < future.log_end_offset == future.log_start_offset:
                # The log start offset is inside that batch (DeleteRecords): the future log starts at
                # the batch, as Kafka's follower does on its UnexpectedAppendOffsetException.
                future.truncate_fully_and_start_at(first)
            future.append_as_follower(records)
            self.quota.record(len(records))
            self.bytes_copied += len(records)
            budget -= len(records)
        future.update_high_watermark(source.high_watermark)
        start = source.log_start_offset
        if future.log_start_offset < start <= future.high_watermark and future.advance_log_start_offset(start):
            future.delete_segments_below_log_start()
        if future.log_end_offset != source.log_end_offset:
            return STEP_BYTES - budget
        moved = self.logs.replace_current_with_future(tp.topic, tp.partition)
        self._moved(partition, moved)
        return None

    @staticmethod
    def _truncate(source: PartitionLog, future: PartitionLog) -> None:
        """The future log follows the current one as a follower its leader (Kafka's
        ReplicaAlterLogDirsThread.truncate): cut where their leader epochs part."""
        for _ in range(64):  # each round cuts at an earlier epoch
            epoch, end = source.epochs.end_offset_for(future.epochs.latest_epoch, source.log_end_offset)
            cut = follower_truncation(future.epochs, future.log_end_offset, future.high_watermark, epoch, end)
            if cut.offset < future.log_end_offset:
                future.truncate_to(cut.offset)
            if cut.complete:
                return
        raise KafkaStorageError(f"the future log of {source.topic}-{source.partition} does not converge")

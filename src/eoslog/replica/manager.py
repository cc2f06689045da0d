"""The one door to this broker's partitions (Kafka's ``ReplicaManager``).

Produce, Fetch, ListOffsets, DeleteRecords, DescribeProducers, the transaction markers
and the coordinators' own appends all go through here, so a partition's role (leader or
follower), its ISR and its high watermark are checked and moved in one place:

- ``append_records``: a client's produce: acks checked, a transactional batch verified
  against its transaction (KIP-890, ``verification``), appended as leader with the checks
  of its ``AppendOrigin``, then, for acks=all, held in the produce purgatory until the ISR
  has it (at once on a single node, where the ISR is this broker);
- ``append_coordinator_records`` / ``write_txn_marker``: a coordinator's batches and the
  COMMIT/ABORT markers (origin COORDINATOR, acks=all); a marker in a topic with a listener
  (the group coordinator's ``__consumer_offsets``) is reported to it;
- ``fetch_messages``: consumers read up to the high watermark (or the last stable offset),
  followers (replica id >= 0) up to the log end, and a fetch with too little to return
  waits in the fetch purgatory, woken by appends;
- ``fetch_offset_for_timestamp``, ``delete_records``, ``active_producers``.

Nothing here speaks the wire protocol: handlers translate requests into these calls and
the results (``Errors`` members and domain values) into responses.

Single node: every local log is a partition led here (leader epoch 0, ISR and replicas
{this broker}), created on first use. In a cluster the cluster layer creates partitions
and moves them between leader and follower (``Partition.make_leader`` / ``make_follower``)
instead (``leads_every_local_log=False``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from eoslog.errors import Errors, KafkaError
from eoslog.features import TRANSACTION_VERSION_2
from eoslog.quotas.replication import LEADER_REPLICAS, UNLIMITED, ReplicationQuota
from eoslog.records import ControlRecordType, RecordValidationError, build_control_batch
from eoslog.replica.alter_log_dirs import LogDirMover
from eoslog.replica.group_commit import GroupCommit
from eoslog.replica.log_dirs import LogDirDescription, describe_log_dir
from eoslog.replica.partition import (
    ACKS_ALL,
    FetchedRecords,
    IsolationLevel,
    OffsetAndTimestamp,
    Partition,
)
from eoslog.replica.purgatory import Purgatory
from eoslog.replica.selector import ReplicaSelector, ReplicaView
from eoslog.replica.stats import FetchWaitStats, TopicStats
from eoslog.replica.verification import (
    TransactionSupportedOperation,
    TransactionVerifier,
    Verified,
    verify_transactional_batch,
)
from eoslog.storage import AppendInfo, AppendOrigin, LogManager, PartitionLog
from eoslog.storage.producer_state import ProducerStateEntry
from eoslog.types import INTERNAL_TOPICS, TopicPartition

log = logging.getLogger(__name__)

VALID_ACKS = (0, 1, ACKS_ALL)
# How long a reader waits for acknowledged writes to become durable (``acknowledged_visible``):
# Kafka's request.timeout.ms default; a round takes milliseconds unless the disk stalls.
ACKNOWLEDGED_VISIBLE_TIMEOUT_MS = 30_000
_REFUSED_BEFORE_THE_LOG = frozenset({
    Errors.MESSAGE_TOO_LARGE, Errors.RECORD_LIST_TOO_LARGE, Errors.CORRUPT_MESSAGE, Errors.NOT_LEADER_OR_FOLLOWER,
    Errors.KAFKA_STORAGE_ERROR,
})
# (partition, producer id, committed) of a marker written to a topic with a listener.
MarkerListener = Callable[[int, int, bool], None]


class ProduceResult(NamedTuple):  # tuples: built per partition of every request
    """One partition's answer to a produce (Kafka's PartitionResponse)."""

    error: Errors
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    record_errors: tuple[tuple[int, str], ...] = ()  # (record index in its batch, why)


class TxnMarkerWrite(NamedTuple):
    """One partition's COMMIT/ABORT marker of a WriteTxnMarkers request."""

    tp: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    transaction_version: int = 0  # 2+: the marker's epoch must be above the producer's (KIP-890 part 2)


class FetchParams(NamedTuple):
    replica_id: int  # -1 for a consumer, the follower's broker id for a replica
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation: IsolationLevel
    # KIP-392 (Fetch v11+): the consumer's rack ("" if it names none). None: an older client,
    # which must read from the leader and cannot be redirected.
    client_rack: str | None = None


class FetchPartition(NamedTuple):
    tp: TopicPartition
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1  # KIP-320: the epoch the fetcher believes in (-1: not said)


class ReplicaManager:
    def __init__(self, node_id: int, logs: LogManager, clock_ms: Callable[[], int], *,
                 leads_every_local_log: bool = True, group_commit: bool = False,
                 quota_windows: tuple[int, int] = (11, 1000)) -> None:
        """``group_commit`` (log.flush.policy=group-commit): writes are acknowledged and shown
        once fsynced (``replica.group_commit``). ``quota_windows``: the replication throttles'
        (replication.quota.window.num, its size in ms)."""
        self.node_id = node_id
        self.logs = logs
        self.clock_ms = clock_ms
        self.leads_every_local_log = leads_every_local_log
        self._partitions: dict[TopicPartition, Partition] = {}
        self.fetch_purgatory = Purgatory()
        self.produce_purgatory = Purgatory()
        # Set by the broker once its transaction coordinator exists (it appends through
        # here, so it is built after this): a transactional produce before that is a bug
        # and fails loudly, never skipping its check.
        self.verifier: TransactionVerifier | None = None
        self._marker_listeners: dict[str, MarkerListener] = {}
        # Cluster mode: told of each follower fetch, to add a caught-up follower to the ISR
        # (Kafka's maybeExpandIsr runs in that path too).
        self.follower_fetch_listener: Callable[[Partition, int], None] | None = None
        self.stats = TopicStats()
        self.fetch_waits = FetchWaitStats()
        self.group_commit = GroupCommit(self._synced) if group_commit else None
        logs.log_dir_failure_listeners.append(self.handle_log_dir_failure)
        # Replication throttles (KIP-73): what this broker sends as leader to followers not in
        # the ISR, and what its fetchers take as follower (``cluster.fetcher``).
        self.leader_quota = ReplicationQuota(node_id, UNLIMITED, clock_ms, *quota_windows)
        self.follower_quota = ReplicationQuota(node_id, UNLIMITED, clock_ms, *quota_windows)
        # replica.alter.log.dirs.io.max.bytes.per.second: what moves between log directories copy.
        self.alter_log_dirs_quota = ReplicationQuota(node_id, UNLIMITED, clock_ms, *quota_windows)
        self.log_dir_mover = LogDirMover(logs, self.get_partition, self._log_moved, self.alter_log_dirs_quota,
                                         lambda tp, timeout_s: self.fetch_purgatory.wait((tp,), timeout_s))
        # KIP-392: replica.selector.class (None: consumers always read from the leader) and each
        # live broker's rack (the cluster's metadata).
        self.replica_selector: ReplicaSelector | None = None
        self.broker_racks: Callable[[], Mapping[int, str | None]] = dict

    def on_txn_marker(self, topic: str, listener: MarkerListener) -> None:
        """Call ``listener`` after each marker written to ``topic`` (Kafka tells its group
        coordinator about markers in ``__consumer_offsets``: pending offsets commit or go)."""
        self._marker_listeners[topic] = listener

    # -- this broker's partitions -------------------------------------------------------------

    def get_partition(self, tp: TopicPartition) -> Partition | None:
        plog = self.logs.logs.get(tp)
        partition = self._partitions.get(tp)
        if partition is not None and partition.log is plog:
            return partition
        if plog is None:
            self._partitions.pop(tp, None)  # its topic was deleted
            return None
        if not self.leads_every_local_log:
            return None
        # A new log (or a recreated topic's): on a single node, led here.
        partition = self.create_partition(tp)
        partition.make_leader(0, (self.node_id,), (self.node_id,))
        return partition

    def create_partition(self, tp: TopicPartition) -> Partition:
        """The partition object of a local log, not yet leader or follower (the cluster
        layer then calls ``make_leader`` or ``make_follower``)."""
        plog = self.logs.get_log(tp.topic, tp.partition)
        if plog is None:
            raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"no local log for {tp.topic}-{tp.partition}")
        partition = self._partitions[tp] = Partition(tp, plog, self.node_id, self.clock_ms,
                                                     durable=self.group_commit is not None)
        return partition

    def partition_or_error(self, tp: TopicPartition) -> Partition:
        partition = self.get_partition(tp)
        if partition is None:
            raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"this server does not host {tp.topic}-{tp.partition}")
        return partition

    def delete_topic(self, name: str) -> None:
        """Stop serving ``name`` and delete its logs (Kafka's stopReplicas with delete);
        raises TopicError. Fetches parked on it answer UNKNOWN_TOPIC_OR_PARTITION now, not at
        their max_wait."""
        info = self.logs.topics.get(name)
        self.logs.delete_topic(name)
        for p in info.local_partitions() if info is not None else ():
            tp = TopicPartition(name, p)
            self._partitions.pop(tp, None)
            self._appended(tp)
        self.stats.forget(name)

    def _appended(self, tp: TopicPartition, high_watermark_moved: bool = True) -> None:
        """Records were appended to ``tp`` (or its state changed): waiting fetches (followers read
        up to the log end, consumers up to the high watermark it may have moved) look again, and
        acks=all produces and coordinator writes when ``high_watermark_moved`` (the only thing
        an append changes that they wait for: under group commit or with followers, an append
        leaves the high watermark where it was, and waking each waiter of the partition at every
        append cost a check and a new future and timer per waiter — quadratic under load)."""
        self.fetch_purgatory.notify(tp)
        if high_watermark_moved:
            self.produce_purgatory.notify(tp)

    def _written(self, partition: Partition) -> None:
        """A leader appended to ``partition``: the next group-commit round syncs it."""
        if self.group_commit is not None:
            self.group_commit.written(partition)

    def _synced(self, partition: Partition) -> None:
        """A group-commit round made ``partition``'s records durable: its high watermark may move."""
        if partition.maybe_increment_high_watermark():
            self._appended(partition.tp)

    def handle_log_dir_failure(self, log_dir: Path) -> None:
        """Kafka's ReplicaManager.handleLogDirFailure: the partitions in ``log_dir`` are offline
        (every request on them is answered KAFKA_STORAGE_ERROR, ``Partition``); the produces,
        coordinator writes, markers and fetches waiting on them answer now rather than at their
        timeout, and clients retry elsewhere (in a cluster, on the replicas the leadership moves to)."""
        offline = [TopicPartition(*tp) for tp, plog in self.logs.logs.items() if plog.log_dir.path == log_dir]
        log.warning("broker %d stopped serving %d partition(s) in the failed log directory %s", self.node_id,
                    len(offline), log_dir)
        for tp in offline:
            self._appended(tp)

    def offline_partitions(self) -> int:
        """Kafka's OfflineReplicaCount: partitions of this broker whose log directory is offline."""
        return sum(1 for plog in self.logs.logs.values() if plog.offline)

    def high_watermark_moved(self, tp: TopicPartition) -> None:
        """The cluster layer moved a high watermark (a follower fetched, the ISR changed)."""
        self._appended(tp)

    # -- produce --------------------------------------------------------------------------------

    async def append_records(
        self, entries: Mapping[TopicPartition, bytes], *, required_acks: int, timeout_ms: int,
        transactional_id: str | None = None, origin: AppendOrigin = AppendOrigin.CLIENT,
        operation: TransactionSupportedOperation = TransactionSupportedOperation.DEFAULT_ERROR,
        internal_topics_allowed: bool = False, on_appended: Callable[[], None] | None = None,
    ) -> dict[TopicPartition, ProduceResult]:
        """Append each partition's records as leader; with acks=all, answer once the ISR has
        them or after ``timeout_ms`` (REQUEST_TIMED_OUT). Internal topics are refused
        (INVALID_TOPIC_EXCEPTION) unless ``internal_topics_allowed``: only their coordinators
        write them, as in Kafka's appendToLocalLog. ``on_appended()`` is called when every
        append is done and only that wait is left (the connection then goes on with its next
        requests: ``broker.connection``)."""
        if required_acks not in VALID_ACKS:
            return dict.fromkeys(entries, ProduceResult(Errors.INVALID_REQUIRED_ACKS))
        results: dict[TopicPartition, ProduceResult] = {}
        waiting: dict[TopicPartition, int] = {}
        # A transaction whose coordinator makes its writes durable before its PrepareCommit: its
        # acks=all writes are answered once appended (the transaction's fsync rounds are its
        # commit's, docs/architecture.md).
        durable_at_commit = (transactional_id is not None and self.verifier is not None
                             and self.verifier.commit_makes_durable(transactional_id))
        for tp, records in entries.items():
            partition = self.get_partition(tp)
            if partition is None:
                results[tp] = ProduceResult(Errors.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            added = False
            if transactional_id is not None:
                if self.verifier is None:
                    raise RuntimeError("a transactional produce reached a broker without a transaction verifier")
                verified = await verify_transactional_batch(self.verifier, transactional_id, partition, records,
                                                            operation)
                if not isinstance(verified, Verified):
                    results[tp] = ProduceResult(verified[0], message=verified[1])
                    continue
                added = verified is Verified.ADDED
            if tp.topic in INTERNAL_TOPICS and not internal_topics_allowed:
                results[tp] = ProduceResult(Errors.INVALID_TOPIC_EXCEPTION,
                                            message=f"Cannot append to internal topic {tp.topic}")
                continue
            result, info = self._append_to_leader(partition, records, origin, required_acks,
                                                  TRANSACTION_VERSION_2 if added else 0)
            results[tp] = result
            if info is None or required_acks != ACKS_ALL:
                continue
            if durable_at_commit:
                partition.acknowledged_end = max(partition.acknowledged_end, info.last_offset + 1)
            elif not self._replicated(tp, partition, info.last_offset + 1, results):
                waiting[tp] = info.last_offset + 1
        if waiting:
            if on_appended is not None:
                on_appended()
            await self._wait_for_isr(waiting, results, timeout_ms)
        return results

    def _append_to_leader(self, partition: Partition, records: bytes, origin: AppendOrigin,
                          required_acks: int, transaction_version: int = 0) -> tuple[ProduceResult, AppendInfo | None]:
        """``transaction_version`` 2: a v2 producer's partition was just added to its transaction."""
        high_watermark = partition.log.high_watermark
        try:
            # An empty record set is INVALID_RECORD (ProduceRequest.validateRecords).
            info = partition.append_records_to_leader(records, origin, required_acks, transaction_version)
        except KafkaError as e:
            # Kafka answers append errors with the partition's log start offset: on
            # UNKNOWN_PRODUCER_ID clients compare it with their last acked offset to tell
            # retention (retry after an epoch bump) from data loss. Batches refused before
            # they reach the log (empty, too large, corrupt, or no leader here) get -1, as
            # from Kafka's ReplicaManager.appendToLocalLog.
            early = e.error in _REFUSED_BEFORE_THE_LOG or not records
            self.stats.failed_produce[partition.tp.topic] += 1
            return ProduceResult(
                e.error, log_start_offset=-1 if early else partition.log.log_start_offset, message=str(e),
                record_errors=tuple(e.record_errors) if isinstance(e, RecordValidationError) else (),
            ), None
        if not info.duplicate:
            self._appended(partition.tp, partition.log.high_watermark != high_watermark)
            self.stats.appended(partition.tp.topic, len(records), info.records)
            self._written(partition)
        return ProduceResult(Errors.NONE, info.first_offset, info.log_append_time, info.log_start_offset), info

    def _replicated(self, tp: TopicPartition, partition: Partition | None, required_offset: int,
                    results: dict[TopicPartition, ProduceResult]) -> bool:
        """Is an acks=all append below ``required_offset`` done (Kafka's DelayedProduce
        check for one partition)? An error completes it and replaces the partition's result."""
        done, error = (partition.check_enough_replicas_reach_offset(required_offset) if partition is not None
                       else (True, Errors.UNKNOWN_TOPIC_OR_PARTITION))
        if error is not Errors.NONE:
            results[tp] = ProduceResult(error, message=f"{error} while waiting for the ISR")
            return True
        return done

    async def _wait_for_isr(self, waiting: dict[TopicPartition, int], results: dict[TopicPartition, ProduceResult],
                            timeout_ms: int) -> None:
        """Kafka's DelayedProduce: wait, woken by high watermark moves, until each partition's
        high watermark reaches the end of what was appended, or REQUEST_TIMED_OUT."""
        deadline = time.monotonic() + timeout_ms / 1000
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            await self.produce_purgatory.wait(waiting, left)
            for tp, required in list(waiting.items()):
                if self._replicated(tp, self.get_partition(tp), required, results):
                    del waiting[tp]
        for tp in waiting:
            results[tp] = ProduceResult(Errors.REQUEST_TIMED_OUT, message="the ISR did not reach the appended offset "
                                        f"within {timeout_ms} ms")

    async def wait_for_replication(self, tp: TopicPartition, required_offset: int, timeout_ms: int) -> Errors:
        """Until the ISR has everything below ``required_offset`` of ``tp`` (a coordinator's
        appends are acks=all: answered only once replicated); NONE, or why not
        (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT)."""
        results: dict[TopicPartition, ProduceResult] = {}
        if not self._replicated(tp, self.get_partition(tp), required_offset, results):
            await self._wait_for_isr({tp: required_offset}, results, timeout_ms)
        return results[tp].error if tp in results else Errors.NONE

    async def acknowledged_visible(self, tps: Iterable[TopicPartition],
                                   timeout_ms: int = ACKNOWLEDGED_VISIBLE_TIMEOUT_MS) -> None:
        """Until each partition's high watermark has reached the writes it answered before they
        were durable (``Partition.acknowledged_end``): a Fetch or ListOffsets that comes after
        an acknowledgement sees the acknowledged records, as after Kafka's acks=all, though the
        producer did not wait for their fsync round (the reader waits for the rest of it, if
        it is still running). Returns at ``timeout_ms`` whatever the high watermarks (the
        reader is then answered with what is durable)."""
        waiting = self._acknowledged_unsynced(tps)
        if waiting:
            await self._wait_for_isr(waiting, {}, timeout_ms)

    def _acknowledged_unsynced(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        waiting: dict[TopicPartition, int] = {}
        for tp in tps:
            partition = self.get_partition(tp)
            if partition is not None and partition.acknowledged_end > partition.high_watermark:
                waiting[tp] = partition.acknowledged_end
        return waiting

    async def wait_producer_durable(self, producer_id: int, partitions: Collection[TopicPartition],
                                    timeout_ms: int) -> Errors:
        """Until everything ``producer_id`` appended to ``partitions`` is below their high
        watermarks — under group commit on one node, fsynced (a transaction's writes before its
        PrepareCommit: ``TransactionCoordinator.make_durable_before_commit``). NONE, or why not."""
        results: dict[TopicPartition, ProduceResult] = {}
        waiting: dict[TopicPartition, int] = {}
        for tp in partitions:
            partition = self.get_partition(tp)
            entry = None if partition is None else partition.log.producer_state.producers.get(producer_id)
            if partition is not None and entry is not None and entry.batches:
                required = entry.last_offset + 1
                if not self._replicated(tp, partition, required, results):
                    waiting[tp] = required
        if waiting:
            await self._wait_for_isr(waiting, results, timeout_ms)
        return next((r.error for r in results.values() if r.error is not Errors.NONE), Errors.NONE)

    def append_coordinator_records(self, tp: TopicPartition, records: bytes,
                                   transaction_version: int = 0) -> AppendInfo:
        """A coordinator's batch (origin COORDINATOR, acks=all; a marker's ``transaction_version``).
        Raises KafkaError; OSError as KAFKA_STORAGE_ERROR. Does not wait for followers: on a
        single node the ISR is this broker, and the append is complete when this returns."""
        partition = self.partition_or_error(tp)
        high_watermark = partition.log.high_watermark
        try:
            info = partition.append_records_to_leader(records, AppendOrigin.COORDINATOR, ACKS_ALL,
                                                      transaction_version)
        except OSError as e:
            raise KafkaError(Errors.KAFKA_STORAGE_ERROR, f"{tp.topic}-{tp.partition}: {e}") from e
        self._appended(tp, partition.log.high_watermark != high_watermark)
        self._written(partition)
        return info

    def write_txn_marker(self, tp: TopicPartition, producer_id: int, producer_epoch: int,
                         coordinator_epoch: int, commit: bool, transaction_version: int = 0) -> Errors:
        """Write a transaction's COMMIT or ABORT marker (WriteTxnMarkers): the producer's
        transaction in ``tp`` ends and the last stable offset moves."""
        marker = TxnMarkerWrite(tp, producer_id, producer_epoch, coordinator_epoch, commit, transaction_version)
        try:
            self.append_coordinator_records(tp, self._control_batch(marker), transaction_version)
        except KafkaError as e:
            if e.error is Errors.KAFKA_STORAGE_ERROR:
                log.error("marker for %s-%d not written: %s", tp.topic, tp.partition, e)
            else:
                log.warning("marker for %s-%d refused: %s", tp.topic, tp.partition, e)
            return e.error
        self._marker_written(marker)
        return Errors.NONE

    def _control_batch(self, m: TxnMarkerWrite) -> bytes:
        return build_control_batch(ControlRecordType.COMMIT if m.commit else ControlRecordType.ABORT,
                                   producer_id=m.producer_id, producer_epoch=m.producer_epoch,
                                   coordinator_epoch=m.coordinator_epoch, timestamp=self.clock_ms())

    def _marker_written(self, m: TxnMarkerWrite) -> None:
        listener = self._marker_listeners.get(m.tp.topic)
        if listener is not None:
            listener(m.tp.partition, m.producer_id, m.commit)

    def _write_txn_markers_together(self, markers: Sequence[TxnMarkerWrite]) -> bool:
        """Several transactions' markers for one partition (and one transaction version) in one
        append: one write and one pass over the producers' state instead of one each. True if
        written; False if the append refused them (nothing is written then: each is written
        alone after, to get its own answer)."""
        try:
            self.append_coordinator_records(markers[0].tp, b"".join(self._control_batch(m) for m in markers),
                                            markers[0].transaction_version)
        except KafkaError:
            return False
        for m in markers:
            self._marker_written(m)
        return True

    async def write_txn_markers(self, markers: Sequence[TxnMarkerWrite], timeout_ms: int) -> list[Errors]:
        """WriteTxnMarkers as Kafka answers it (acks=all): every marker appended
        (``write_txn_marker``; the markers of one partition in one append when they can be),
        then each written one acknowledged once its partition's ISR has it (with group commit,
        once fsynced). The coordinator writes COMPLETE_* only after every marker it counts as
        written; one acknowledged on append alone could be truncated away by a new leader that
        never had it, and its transaction's records end up in the next one."""
        errors: list[Errors] = [Errors.NONE] * len(markers)
        by_append: dict[tuple[TopicPartition, int], list[int]] = {}
        for i, m in enumerate(markers):
            by_append.setdefault((m.tp, m.transaction_version), []).append(i)
        ends: dict[TopicPartition, int] = {}  # each partition's end after its written markers
        for (tp, _), indexes in by_append.items():
            if len(indexes) == 1 or not self._write_txn_markers_together([markers[i] for i in indexes]):
                for i in indexes:
                    errors[i] = self.write_txn_marker(*markers[i])
            if any(errors[i] is Errors.NONE for i in indexes):
                ends[tp] = self.partition_or_error(tp).log.log_end_offset
        waits = [self.wait_for_replication(tp, end, timeout_ms) for tp, end in ends.items()]
        replicated = dict(zip(ends, await asyncio.gather(*waits), strict=True))
        return [replicated[m.tp] if error is Errors.NONE else error for m, error in zip(markers, errors, strict=True)]

    # -- fetch ------------------------------------------------------------------------------------

    async def fetch_messages(self, params: FetchParams, partitions: Sequence[FetchPartition]) -> list[FetchedRecords]:
        """Read each partition; with fewer than ``min_bytes`` and no error, wait (woken by
        appends) up to ``max_wait_ms`` and read again. ``max_bytes`` caps the answer, but the
        first batch of the first partition with data is returned whole, so consumers progress.
        The records are slices of segment files (``FileRecords``), returned without an await
        after the read: the caller sends or reads them before the event loop moves on."""
        deadline = time.monotonic() + params.max_wait_ms / 1000
        min_bytes = max(1, params.min_bytes)
        wanted = [p.tp for p in partitions]
        follower = params.replica_id >= 0
        if self._acknowledged_unsynced(wanted):  # (a check first: this is every fetch's path)
            await self.acknowledged_visible(wanted)
        parked = False
        woken_at: float | None = None  # when the append that ended the last wait notified
        while True:
            results, total, answer_now = self._read_all(params, partitions)
            left = deadline - time.monotonic()
            readable = total >= min_bytes or answer_now
            if readable or left <= 0 or not wanted:
                for p, result in zip(partitions, results, strict=True):
                    self.stats.fetched(p.tp.topic, len(result.records), follower)
                if parked and not follower:
                    if readable and woken_at is not None:
                        self.fetch_waits.woken(params.isolation, time.perf_counter() - woken_at)
                    else:
                        self.fetch_waits.ended(params.isolation, "expired")
                return results
            if woken_at is not None and not follower:
                self.fetch_waits.ended(params.isolation, "not_readable")
            parked = True
            woken_at = await self.fetch_purgatory.wait(wanted, left)

    def _read_all(self, params: FetchParams,
                  partitions: Sequence[FetchPartition]) -> tuple[list[FetchedRecords], int, bool]:
        """(each partition's result, the bytes read, whether to answer without waiting: an error
        or a redirection to another replica)."""
        remaining = params.max_bytes
        total = 0
        errors = False
        results = []
        for p in partitions:
            partition = self.get_partition(p.tp)
            if partition is None:
                result = FetchedRecords(Errors.UNKNOWN_TOPIC_OR_PARTITION)
            elif (preferred := self._preferred_read_replica(partition, params, p.fetch_offset)) is not None:
                plog = partition.log  # KIP-392: nothing read here, the client is sent to that replica
                result = FetchedRecords(Errors.NONE, plog.high_watermark, plog.last_stable_offset,
                                        plog.log_start_offset, preferred_read_replica=preferred)
                errors = True
            elif (fenced := partition.check_leader_epoch(p.current_leader_epoch)) is not Errors.NONE:
                result = FetchedRecords(fenced)
            elif params.replica_id >= 0 and (refused := self._follower_fetched(partition, params.replica_id,
                                                                               p.fetch_offset)) is not None:
                result = FetchedRecords(refused)
            elif params.replica_id >= 0 and self._leader_throttled(partition, params.replica_id):
                if self.leader_quota.is_exceeded():  # held back: positions only, no records
                    plog = partition.log
                    result = FetchedRecords(Errors.NONE, plog.high_watermark, plog.last_stable_offset,
                                            plog.log_start_offset)
                else:
                    result = partition.read_records(p.fetch_offset, min(p.max_bytes, remaining),
                                                    replica_id=params.replica_id, min_one=total == 0)
                    self.leader_quota.record(len(result.records))
            else:
                result = partition.read_records(
                    p.fetch_offset, min(p.max_bytes, remaining), replica_id=params.replica_id,
                    isolation=params.isolation, min_one=total == 0, in_file=True,
                    from_follower=params.client_rack is not None,
                )
            if result.error != Errors.NONE:
                errors = True
            size = len(result.records)
            total += size
            remaining = max(0, remaining - size)
            results.append(result)
        return results, total, errors

    def _preferred_read_replica(self, partition: Partition, params: FetchParams, fetch_offset: int) -> int | None:
        """Kafka's findPreferredReadReplica: for a consumer fetch the leader may redirect, the
        replica ``replica.selector.class`` picks among those holding ``fetch_offset``, if not
        this leader; None to read here."""
        if (self.replica_selector is None or params.replica_id >= 0 or params.client_rack is None
                or not partition.is_leader):
            return None
        racks = self.broker_racks()
        now = self.clock_ms()
        plog = partition.log
        leader = ReplicaView(self.node_id, racks.get(self.node_id), plog.log_end_offset, 0)
        candidates = [leader, *(
            ReplicaView(r.broker_id, racks.get(r.broker_id), r.log_end_offset, now - r.last_caught_up_ms)
            for r in partition.remote_replicas.values()
            if r.broker_id in racks and r.log_end_offset >= fetch_offset >= plog.log_start_offset)]
        chosen = self.replica_selector(params.client_rack, leader, candidates)
        return None if chosen.broker_id == self.node_id else chosen.broker_id

    def follower_appended(self, tp: TopicPartition) -> None:
        """This broker's fetcher appended to ``tp`` as follower (and may have moved its high
        watermark): consumers fetching from this follower (KIP-392) look again."""
        self.fetch_purgatory.notify(tp)

    def _leader_throttled(self, partition: Partition, replica_id: int) -> bool:
        """Kafka's shouldLeaderThrottle without the rate: a follower outside the ISR of a
        partition whose leader.replication.throttled.replicas names this broker."""
        return (replica_id not in partition.isr
                and self.leader_quota.is_throttled(str(partition.log.config[LEADER_REPLICAS]), partition.tp.partition))

    def _follower_fetched(self, partition: Partition, replica_id: int, fetch_offset: int) -> Errors | None:
        """A follower's fetch offset is its log end offset: the leader learns it, which may
        move the high watermark and complete acks=all produces (Kafka's
        updateFollowerFetchState). None, or why the fetch is refused."""
        if not partition.is_leader:
            return Errors.NOT_LEADER_OR_FOLLOWER
        try:
            moved = partition.update_follower_fetch_state(replica_id, fetch_offset)
        except KafkaError as e:
            return e.error
        if moved:
            self._appended(partition.tp)
        if self.follower_fetch_listener is not None:
            self.follower_fetch_listener(partition, replica_id)
        return None

    # -- offsets, deletion, producers ------------------------------------------------------------------

    def fetch_offset_for_timestamp(self, tp: TopicPartition, timestamp: int,
                                   isolation: IsolationLevel) -> OffsetAndTimestamp:
        """ListOffsets for one partition; raises KafkaError."""
        return self.partition_or_error(tp).fetch_offset_for_timestamp(timestamp, isolation)

    def delete_records(self, tp: TopicPartition, offset: int, *, allow_internal: bool = False) -> int:
        """DeleteRecords on the leader: the new log start offset (Kafka's low watermark on
        one replica). Raises KafkaError; OSError is the caller's KAFKA_STORAGE_ERROR.
        ``allow_internal``: a coordinator pruning its own internal topic."""
        partition = self.partition_or_error(tp)
        if not partition.is_leader:
            raise KafkaError(Errors.NOT_LEADER_OR_FOLLOWER, f"{tp.topic}-{tp.partition} is not led here")
        low_watermark = self.logs.delete_records(tp.topic, tp.partition, offset, allow_internal=allow_internal)
        self._appended(tp)  # fetches below the new log start offset answer OFFSET_OUT_OF_RANGE now
        return low_watermark

    def describe_log_dirs(self, wanted: Collection[TopicPartition] | None) -> list[LogDirDescription]:
        """DescribeLogDirs: this broker's log directories and the replicas in each (of
        ``wanted``; None: all)."""
        offline = set(self.logs.offline_log_dirs)
        return [describe_log_dir(d, {tp: lg for tp, lg in self.logs.logs.items() if lg.log_dir.path == d}, wanted,
                                 Errors.KAFKA_STORAGE_ERROR if d in offline else Errors.NONE,
                                 {tp: (f, self.logs.logs[tp].log_end_offset) for tp, f in self.logs.futures.items()
                                  if f.log_dir.path == d})
                for d in self.logs.log_dirs]

    def alter_replica_log_dirs(self, targets: Mapping[TopicPartition, str]) -> dict[TopicPartition, Errors]:
        """AlterReplicaLogDirs: move each partition's replica to that log directory (``alter_log_dirs``)."""
        return self.log_dir_mover.alter_replica_log_dirs(targets)

    def _log_moved(self, partition: Partition, moved: PartitionLog) -> None:
        """A move swapped ``partition``'s log: it reads and writes the moved one from now on; waiting
        fetches and produces look again (the moved log is fsynced: a durable leader's high
        watermark may move at once)."""
        partition.log = moved
        partition.maybe_increment_high_watermark()
        self._appended(partition.tp)

    def active_producers(self, tp: TopicPartition) -> list[ProducerStateEntry]:
        """DescribeProducers: the producers the partition's leader keeps state for."""
        partition = self.partition_or_error(tp)
        if not partition.is_leader:
            raise KafkaError(Errors.NOT_LEADER_OR_FOLLOWER, f"{tp.topic}-{tp.partition} is not led here")
        return list(partition.log.producer_state.producers.values())

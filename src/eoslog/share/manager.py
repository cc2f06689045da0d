"""The share-partitions this broker leads and the share sessions of the members fetching them
(Kafka's ``SharePartitionManager`` and ``DelayedShareFetch``).

Jobs:

- ShareFetch: check the share session (``session``), apply the acknowledgements carried along,
  then acquire records for the member from the session's partitions, reading each from where
  its share-partition says (``SharePartition.next_fetch_offset``), up to the request's byte and
  record limits; with nothing to hand out, wait (the fetch purgatory: woken by appends and by
  records released) until ``max_wait_ms``;
- ShareAcknowledge: the acknowledgements alone;
- create each share-partition on first use and read its state from the share coordinator (the
  ``Persister``); drop it when it is fenced (read again on next use) or when the last share
  session of its group on this broker ends (Kafka's onGroupEmpty: a later reset of the group's
  offsets is then read afresh);
- release a member's acquired records when its share session ends (epoch -1, its connection
  closed) or its group coordinator removes it.

Handlers translate topic ids and kio types to and from these calls; nothing here speaks the wire.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from eoslog.coordinator.share.coordinator import TransactionalWrite
from eoslog.coordinator.share.persister import Persister
from eoslog.coordinator.share.state import SharePartitionKey
from eoslog.coordinator.timers import Scheduler
from eoslog.errors import Errors
from eoslog.records.batch import iter_batch_headers
from eoslog.replica import ReplicaManager
from eoslog.replica.partition import IsolationLevel
from eoslog.share.partition import (
    AcknowledgementBatch,
    AcquiredRecords,
    LogBounds,
    PartitionState,
    SharePartition,
    ShareSettings,
)
from eoslog.share.session import FINAL_EPOCH, INITIAL_EPOCH, ShareSession, ShareSessionCache
from eoslog.types import TopicPartition

log = logging.getLogger(__name__)

# How often leaders ask the share coordinators about records held by transactions (a safety net
# on one node, where the coordinator tells them at once; the way in a cluster).
HELD_CHECK_INTERVAL_S = 0.5


@dataclass(frozen=True, slots=True)
class PartitionRequest:
    tp: TopicPartition
    acknowledgements: tuple[AcknowledgementBatch, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareFetchParams:
    group_id: str
    member_id: str
    session_epoch: int
    connection: object
    partitions: tuple[PartitionRequest, ...]  # added to the session (with their acknowledgements)
    forgotten: tuple[TopicPartition, ...] = ()
    max_wait_ms: int = 0
    min_bytes: int = 1
    max_bytes: int = 2**31 - 1
    max_records: int = 500
    fetching: bool = True  # False: ShareAcknowledge, or a fetch only to acknowledge


@dataclass
class PartitionResult:
    tp: TopicPartition
    error: Errors = Errors.NONE
    acknowledge_error: Errors | None = None  # None: no acknowledgements for this partition
    records: bytes = b""
    acquired: list[AcquiredRecords] = field(default_factory=list)


@dataclass
class ShareFetchResult:
    error: Errors
    partitions: list[PartitionResult] = field(default_factory=list)
    lock_duration_ms: int = 0


class SharePartitionManager:
    def __init__(self, replicas: ReplicaManager, persister: Persister, settings: Callable[[str], ShareSettings],
                 topic_id: Callable[[str], uuid.UUID | None], scheduler: Scheduler, max_sessions: int) -> None:
        self.replicas = replicas
        self.persister = persister
        self.settings = settings
        self.topic_id = topic_id
        self.scheduler = scheduler
        self.sessions = ShareSessionCache(max_sessions)
        self.partitions: dict[tuple[str, TopicPartition], SharePartition] = {}
        self._rotation = 0
        self._checking: asyncio.Task[None] | None = None

    # -- share-partitions -----------------------------------------------------------------------

    def share_partition(self, group_id: str, tp: TopicPartition) -> tuple[Errors, SharePartition | None]:
        """The group's share-partition of ``tp`` (made on first use, not yet initialized)."""
        sp = self.partitions.get((group_id, tp))
        if sp is not None and sp.state is PartitionState.FENCED:
            sp.close()
            del self.partitions[(group_id, tp)]
            sp = None
        if sp is None:
            topic_id = self.topic_id(tp.topic)
            if topic_id is None:
                return Errors.UNKNOWN_TOPIC_OR_PARTITION, None
            sp = SharePartition(SharePartitionKey(group_id, topic_id, tp.partition), tp,
                                lambda: self.settings(group_id), self.persister, self.scheduler,
                                lambda: self.replicas.fetch_purgatory.notify(tp))
            self.partitions[(group_id, tp)] = sp
        return Errors.NONE, sp

    async def _ready(self, group_id: str, tp: TopicPartition) -> tuple[Errors, SharePartition | None]:
        """The share-partition, initialized; or why not (the partition not led here, its state
        not readable yet)."""
        partition = self.replicas.get_partition(tp)
        if partition is None:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION, None
        if not partition.is_leader:
            return Errors.NOT_LEADER_OR_FOLLOWER, None
        error, sp = self.share_partition(group_id, tp)
        if sp is None:
            return error, None
        plog = partition.log
        error = await sp.initialize(partition.leader_epoch, lambda: LogBounds(
            plog.log_start_offset, partition.high_watermark, plog.last_stable_offset))
        if error == Errors.NONE:
            return Errors.NONE, sp
        if error in (Errors.FENCED_LEADER_EPOCH, Errors.FENCED_STATE_EPOCH):
            return Errors.NOT_LEADER_OR_FOLLOWER, None
        # The share coordinator is not there yet (loading, moving): the client retries.
        return Errors.COORDINATOR_NOT_AVAILABLE, None

    # -- ShareFetch and ShareAcknowledge --------------------------------------------------------

    def _session(self, params: ShareFetchParams) -> tuple[Errors, ShareSession | None]:
        if params.session_epoch == INITIAL_EPOCH:
            if not params.fetching:
                return Errors.INVALID_SHARE_SESSION_EPOCH, None  # ShareAcknowledge cannot open one
            if any(p.acknowledgements for p in params.partitions):
                return Errors.INVALID_REQUEST, None  # nothing can be acquired before a session
            return self.sessions.open(params.group_id, params.member_id, params.connection)
        if params.session_epoch == FINAL_EPOCH and params.fetching and params.partitions and any(
                not p.acknowledgements for p in params.partitions):
            return Errors.INVALID_REQUEST, None  # the last request only acknowledges
        return self.sessions.resume(params.group_id, params.member_id, params.session_epoch)

    async def fetch(self, params: ShareFetchParams, txn: TransactionalWrite | None = None) -> ShareFetchResult:
        error, session = self._session(params)
        if session is None:
            return ShareFetchResult(error)
        if params.fetching:  # ShareAcknowledge names partitions only to acknowledge them
            for tp in params.forgotten:
                session.partitions.pop((tp.topic, tp.partition), None)
            for p in params.partitions:
                session.partitions[(p.tp.topic, p.tp.partition)] = None
        results: dict[TopicPartition, PartitionResult] = {}
        acks = [p for p in params.partitions if p.acknowledgements]
        if acks:
            outcomes = await asyncio.gather(*(self._acknowledge(params, p, txn) for p in acks))
            for p, outcome in zip(acks, outcomes, strict=True):
                results[p.tp] = PartitionResult(p.tp, acknowledge_error=outcome)
        if params.session_epoch == FINAL_EPOCH:
            self._end_session(session)
        elif params.fetching:
            await self._fetch(params, session, results)
        lock_ms = self.settings(params.group_id).record_lock_duration_ms
        return ShareFetchResult(Errors.NONE, list(results.values()), lock_ms)

    async def _acknowledge(self, params: ShareFetchParams, p: PartitionRequest,
                           txn: TransactionalWrite | None) -> Errors:
        error, sp = await self._ready(params.group_id, p.tp)
        if sp is None:
            return error
        return await sp.acknowledge(params.member_id, p.acknowledgements, txn)

    async def _fetch(self, params: ShareFetchParams, session: ShareSession,
                     results: dict[TopicPartition, PartitionResult]) -> None:
        deadline = time.monotonic() + params.max_wait_ms / 1000
        tps = [TopicPartition(t, p) for t, p in session.partitions]
        if not tps:
            return
        read_committed = self.settings(params.group_id).read_committed
        while True:
            acquired_any = False
            bytes_left, records_left = params.max_bytes, params.max_records
            self._rotation += 1
            start = self._rotation % len(tps)
            for tp in tps[start:] + tps[:start]:
                error, sp = await self._ready(params.group_id, tp)
                if sp is None:
                    results.setdefault(tp, PartitionResult(tp)).error = error
                    continue
                if bytes_left <= 0 or records_left <= 0 or not sp.can_acquire:
                    continue
                got = self._acquire(params.member_id, sp, tp, bytes_left, records_left, read_committed)
                if got is not None:
                    data, acquired = got
                    result = results.setdefault(tp, PartitionResult(tp))
                    result.records, result.acquired = data, acquired
                    bytes_left -= len(data)
                    records_left -= sum(a.last_offset - a.first_offset + 1 for a in acquired)
                    acquired_any = True
            left = deadline - time.monotonic()
            if acquired_any or left <= 0 or any(r.error != Errors.NONE for r in results.values()):
                return
            await self.replicas.fetch_purgatory.wait(tps, left)

    def _acquire(self, member_id: str, sp: SharePartition, tp: TopicPartition, max_bytes: int, max_records: int,
                 read_committed: bool) -> tuple[bytes, list[AcquiredRecords]] | None:
        partition = self.replicas.get_partition(tp)
        if partition is None or not partition.is_leader:
            return None
        sp.move_to_log_start(partition.log.log_start_offset)
        offset = sp.next_fetch_offset()
        isolation = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
        fetched = partition.read_records(offset, max_bytes, isolation=isolation)
        if fetched.error != Errors.NONE or not fetched.records:
            return None
        records = fetched.data
        acquired = sp.acquire(member_id, records, fetched.aborted if read_committed else None,
                              max_records)
        if not acquired:
            return None
        return _covering(records, acquired[0].first_offset, acquired[-1].last_offset), acquired

    # -- members leaving ----------------------------------------------------------------------

    def _end_session(self, session: ShareSession) -> None:
        self.sessions.close(session)
        for topic, partition in session.partitions:
            sp = self.partitions.get((session.group_id, TopicPartition(topic, partition)))
            if sp is not None:
                sp.release_member(session.member_id)
        self._maybe_group_empty(session.group_id)

    def disconnected(self, connection: object) -> None:
        """A client connection closed: its share sessions end, their records are released."""
        for session in self.sessions.disconnected(connection):
            log.info("share session of member %s of group %s ended with its connection", session.member_id,
                     session.group_id)
            self._end_session(session)

    def release_member(self, group_id: str, member_id: str) -> int:
        """The group coordinator removed the member (it left, or its session timed out)."""
        released = 0
        for (group, _), sp in list(self.partitions.items()):
            if group == group_id:
                released += sp.release_member(member_id)
        session = self.sessions.sessions.get((group_id, member_id))
        if session is not None:
            self.sessions.close(session)
            self._maybe_group_empty(group_id)
        return released

    def _maybe_group_empty(self, group_id: str) -> None:
        """No member of the group fetches from this broker any more: its share-partitions are
        dropped (read again on next use) unless a transaction or a write still holds them."""
        if self.sessions.members(group_id):
            return
        for key, sp in list(self.partitions.items()):
            if key[0] == group_id and not sp.held_by_transactions and not sp.busy:
                sp.close()
                del self.partitions[key]

    # -- transactions (eoslog's extension) ------------------------------------------------------

    def transaction_decided(self, key: SharePartitionKey, producer_id: int, committed: bool,
                            offsets: list[int]) -> None:
        """This broker's share coordinator applied a COMMIT or ABORT marker to ``key``'s state:
        the records the transaction held (``offsets``) move on its leader, if it is here."""
        for sp in self.partitions.values():
            if sp.key == key and sp.state is PartitionState.ACTIVE:
                sp.transaction_decided(producer_id, committed, offsets)

    def check_held(self) -> None:
        """Ask the share coordinators again about records held by transactions (a periodic job,
        ``HELD_CHECK_INTERVAL_S``): outcomes decided by another broker's share coordinator, or
        while this leader was loading, are learnt from the state."""
        if self._checking is not None and not self._checking.done():
            return
        self._checking = asyncio.get_running_loop().create_task(self._check_held())

    async def _check_held(self) -> None:
        for sp in list(self.partitions.values()):
            if sp.state is not PartitionState.ACTIVE:
                continue
            before = sp.held()
            if not before:
                continue
            error, stored = await self.persister.read_state(sp.key, sp.leader_epoch)
            if error == Errors.NONE and stored is not None and sp.state is PartitionState.ACTIVE:
                sp.reconcile_held(stored, before)
            elif error in (Errors.FENCED_LEADER_EPOCH, Errors.FENCED_STATE_EPOCH):
                sp.state = PartitionState.FENCED  # read again on next use

    def group_partitions(self, group_id: str) -> list[SharePartition]:
        return [sp for (g, _), sp in self.partitions.items() if g == group_id]

    def shutdown(self) -> None:
        """Forget every share-partition and session (the broker stops, or share.version went to
        0: a share group read later starts from its durable state)."""
        for sp in self.partitions.values():
            sp.close()
        self.partitions.clear()
        self.sessions.sessions.clear()


def _covering(data: bytes, first: int, last: int) -> bytes:
    """The whole batches of ``data`` that hold offsets ``first`` to ``last``."""
    begin = end = None
    for pos, h in iter_batch_headers(data):
        if h.last_offset < first:
            continue
        if h.base_offset > last:
            break
        if begin is None:
            begin = pos
        end = pos + h.size
    return data[begin:end] if begin is not None and end is not None else b""

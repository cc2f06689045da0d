"""One share-partition on its partition's leader: a share group's in-flight records of one topic
partition (Kafka's ``SharePartition``).

What it owns:

- the share-partition start offset (every record below it is done with) and its next offset
  (the first offset never handed out; Kafka's end offset + 1), and between them one
  ``InFlight`` entry per offset with its state (``record_state``), delivery count, and the
  member and acquisition holding it;
- acquiring records for a member from what a fetch read (``acquire``): offsets of a gap
  (compaction) or a control batch, and under read_committed the records of aborted
  transactions, are archived at once and never handed out; at most
  ``share.partition.max.record.locks`` offsets are in flight;
- the acquisition locks: each acquisition has a timer of ``share.record.lock.duration.ms``;
  when it fires, its records still acquired are released;
- acknowledgements (ACCEPT, RELEASE, REJECT, GAP, RENEW), releases of a member's records
  (its share session ended or it left the group), the delivery count limit (a record released
  once it was delivered ``share.delivery.count.limit`` times is archived);
- writing every change to the share coordinator (``Persister``) before it takes effect: an
  acknowledgement is answered, and a released record handed out again, only once the state
  is durable. Writes go one at a time (each carries the start offset they lead to); changes
  queued meanwhile are written together in the next one.

Everything runs on the event loop: no locks. A record whose change is being written is
marked ``pending``: no timer, release or second acknowledgement touches it until the write
is answered; a failed write puts it back as it was (and a lock that ran out meanwhile is
released then).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum, IntEnum

from eoslog.coordinator.share.coordinator import StateWrite, TransactionalWrite
from eoslog.coordinator.share.persister import Persister
from eoslog.coordinator.share.state import NO_OFFSET, DeliveryState, ShareGroupOffset, SharePartitionKey, StateBatch
from eoslog.coordinator.timers import Scheduler
from eoslog.errors import Errors
from eoslog.records.aborted import AbortedTransactions
from eoslog.records.batch import BatchHeader, decode_record_fields, iter_batch_headers
from eoslog.share.record_state import RecordState, from_stored, transition
from eoslog.storage.txn_index import AbortedTxn
from eoslog.types import TopicPartition

log = logging.getLogger(__name__)


class AcknowledgeType(IntEnum):
    """ShareFetch/ShareAcknowledge's acknowledge types."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


_ACK_TYPES = frozenset(int(t) for t in AcknowledgeType)


class PartitionState(Enum):
    """The share-partition's own life (Kafka's SharePartitionState)."""

    EMPTY = "Empty"  # not read from the share coordinator yet
    INITIALIZING = "Initializing"
    ACTIVE = "Active"
    FAILED = "Failed"  # the read failed: retried by the next fetch
    FENCED = "Fenced"  # a newer leader or state epoch exists: dropped by the manager


@dataclass(frozen=True, slots=True)
class ShareSettings:
    """The group's share settings (group configs over the broker's), read at each use."""

    record_lock_duration_ms: int
    delivery_count_limit: int
    max_record_locks: int
    read_committed: bool
    auto_offset_reset: str  # "earliest" | "latest"


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    first_offset: int
    last_offset: int
    types: tuple[int, ...]  # one for the whole range, or one per offset


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class LogBounds:
    """What the leader's log offers a share-partition: where it starts and where a fetch of the
    group's isolation level may read up to."""

    log_start_offset: int
    high_watermark: int
    last_stable_offset: int


class InFlight:
    __slots__ = ("acquisition", "delivery_count", "hold", "member_id", "pending", "producer_id", "state")

    def __init__(self, state: RecordState, delivery_count: int) -> None:
        self.state = state
        self.delivery_count = delivery_count
        self.member_id: str | None = None
        self.acquisition = 0
        self.pending: RecordState | None = None  # the state a write under way moves it to
        self.producer_id = -1  # HELD_BY_TRANSACTION: whose transaction (-1: loaded, not known)
        self.hold = 0  # HELD_BY_TRANSACTION: which hold (a new one each time it is held)


@dataclass
class _Acquisition:
    member_id: str
    offsets: list[int]


@dataclass
class _Change:
    """Records moving to new states, written together; answered through ``done``."""

    targets: dict[int, RecordState]
    done: asyncio.Future[Errors] | None
    txn: TransactionalWrite | None = None
    counts: dict[int, int] = field(default_factory=dict)  # delivery counts to write, where not the record's


class SharePartition:
    def __init__(self, key: SharePartitionKey, tp: TopicPartition, settings: Callable[[], ShareSettings],
                 persister: Persister, scheduler: Scheduler, on_available: Callable[[], None]) -> None:
        self.key = key
        self.tp = tp
        self._settings = settings
        self.persister = persister
        self.scheduler = scheduler
        self._on_available = on_available  # wakes fetches waiting for records
        self.state = PartitionState.EMPTY
        self.start_offset = 0
        self.next_offset = 0
        self.state_epoch = 0
        self.leader_epoch = -1
        self.records: dict[int, InFlight] = {}  # in offset order: entries are only added at next_offset
        self._acquisitions: dict[int, _Acquisition] = {}
        self._ids = itertools.count(1)
        self._queue: list[_Change] = []
        self._writing = False
        self._initializing: asyncio.Future[Errors] | None = None
        self._held_by: dict[int, set[int]] = {}  # producer id → offsets held by its transaction

    # -- initialization -----------------------------------------------------------------------

    async def initialize(self, leader_epoch: int, bounds: Callable[[], LogBounds]) -> Errors:
        """Read the state from the share coordinator (once; concurrent callers wait for the same
        read). A state never initialized, or initialized without a start offset, starts where
        share.auto.offset.reset says, and that start is written before anything is handed out."""
        if self.state is PartitionState.ACTIVE:
            return Errors.NONE
        if self.state is PartitionState.FENCED:
            return Errors.NOT_LEADER_OR_FOLLOWER
        if self._initializing is not None:
            return await asyncio.shield(self._initializing)
        self._initializing = asyncio.get_running_loop().create_future()
        self.state = PartitionState.INITIALIZING
        try:
            error = await self._initialize(leader_epoch, bounds)
        except Exception:
            log.exception("share-partition %s of %s failed to initialize", self.tp, self.key.group_id)
            error = Errors.UNKNOWN_SERVER_ERROR
        if error == Errors.NONE:
            self.state = PartitionState.ACTIVE
        elif error in (Errors.FENCED_LEADER_EPOCH, Errors.FENCED_STATE_EPOCH):
            self.state = PartitionState.FENCED
        else:
            self.state = PartitionState.FAILED
        self._initializing.set_result(error)
        self._initializing = None
        return error

    async def _initialize(self, leader_epoch: int, bounds: Callable[[], LogBounds]) -> Errors:
        self.leader_epoch = leader_epoch
        error, stored = await self.persister.read_state(self.key, leader_epoch)
        if error != Errors.NONE:
            return error
        if stored is not None and stored.start_offset != NO_OFFSET:
            self._load(stored)
            return Errors.NONE
        b = bounds()
        reset = self._settings().auto_offset_reset
        start = b.log_start_offset if reset == "earliest" else b.high_watermark
        self.state_epoch = 0 if stored is None else stored.state_epoch
        self.start_offset = self.next_offset = start
        log.info("share-partition %s of group %s starts at %d (share.auto.offset.reset=%s)", self.tp,
                 self.key.group_id, start, reset)
        return await self.persister.write_state(self.key, StateWrite(self.state_epoch, leader_epoch, start, ()))

    def _load(self, stored: ShareGroupOffset) -> None:
        self.state_epoch = stored.state_epoch
        self.start_offset = stored.start_offset
        self.next_offset = stored.start_offset
        for b in stored.state_batches:
            if b.last_offset < self.next_offset:
                continue
            for offset in range(max(b.first_offset, self.next_offset), b.last_offset + 1):
                if offset > self.next_offset:  # a hole between stored batches: never handed out
                    for missing in range(self.next_offset, offset):
                        self.records[missing] = InFlight(RecordState.AVAILABLE, 0)
                entry = InFlight(from_stored(b.delivery_state), b.delivery_count)
                self.records[offset] = entry
                self.next_offset = offset + 1
        for offset, entry in self.records.items():
            if entry.state is RecordState.HELD_BY_TRANSACTION:
                entry.hold = next(self._ids)
                self._held_by.setdefault(-1, set()).add(offset)  # whose is learnt from the outcome
        self._advance_start()
        log.info("share-partition %s of group %s loaded: start %d, %d in flight, state epoch %d", self.tp,
                 self.key.group_id, self.start_offset, len(self.records), self.state_epoch)

    # -- fetching -----------------------------------------------------------------------------

    def next_fetch_offset(self) -> int:
        """Where a fetch should read from: the first available in-flight record, else the next
        offset never handed out."""
        for offset, entry in self.records.items():
            if entry.state is RecordState.AVAILABLE:
                return offset
        return self.next_offset

    @property
    def can_acquire(self) -> bool:
        """Anything to hand out is possible: an available in-flight record, or room for new ones."""
        if self.state is not PartitionState.ACTIVE:
            return False
        if any(e.state is RecordState.AVAILABLE for e in self.records.values()):
            return True
        return self.next_offset - self.start_offset < self._settings().max_record_locks

    def acquire(self, member_id: str, data: bytes, aborted: Iterable[AbortedTxn] | None,
                max_records: int) -> list[AcquiredRecords]:
        """Acquire for ``member_id`` what is available in ``data`` (whole batches as the log
        returned them, from ``next_fetch_offset``), at most ``max_records``; ``aborted`` (under
        read_committed) the fetch's aborted transactions."""
        settings = self._settings()
        filt = AbortedTransactions((a.producer_id, a.first_offset) for a in aborted) if aborted is not None else None
        acquisition = next(self._ids)
        acquired: list[int] = []
        full = False  # no more room, or max_records reached: the rest is read again next time
        for pos, h in iter_batch_headers(data):
            if full or len(acquired) >= max_records:
                break
            skip = filt is not None and filt.skips(h, data, pos)
            if h.is_control or skip:
                self._archive_unread(h.base_offset, h.last_offset)
                continue
            for offset in _record_offsets(h, data, pos):
                if len(acquired) >= max_records:
                    full = True
                    break
                if offset < self.start_offset:
                    continue
                if offset >= self.next_offset:
                    if offset - self.start_offset >= settings.max_record_locks:
                        full = True
                        break
                    self._archive_unread(self.next_offset, offset - 1)
                    self.records[offset] = InFlight(RecordState.AVAILABLE, 0)
                    self.next_offset = offset + 1
                entry = self.records[offset]
                if entry.state is not RecordState.AVAILABLE or entry.pending is not None:
                    continue
                if entry.delivery_count >= settings.delivery_count_limit:
                    entry.state = transition(offset, entry.state, RecordState.ARCHIVED)
                    continue
                entry.state = transition(offset, entry.state, RecordState.ACQUIRED)
                entry.delivery_count += 1
                entry.member_id = member_id
                entry.acquisition = acquisition
                acquired.append(offset)
            if not full and h.next_offset > self.next_offset:
                # The batch's tail has no records (compacted away): nothing to hand out there.
                self._archive_unread(self.next_offset, h.last_offset)
        if acquired:
            self._acquisitions[acquisition] = _Acquisition(member_id, acquired)
            self.scheduler.schedule(self._timer_key(acquisition), settings.record_lock_duration_ms,
                                    lambda: self._lock_expired(acquisition))
        self._advance_start()
        if log.isEnabledFor(logging.DEBUG):
            log.debug("share-partition %s of %s: %s acquired %s from a read of %s (start %d, next %d)", self.tp,
                      self.key.group_id, member_id, acquired, [(h.base_offset, h.last_offset, h.is_control)
                                                               for _, h in iter_batch_headers(data)],
                      self.start_offset, self.next_offset)
        return _ranges(acquired, self.records)

    def _archive_unread(self, first: int, last: int) -> None:
        """Offsets ``first`` to ``last`` hold nothing to hand out (a marker, a gap, an aborted
        transaction's records): done with from the start. Offsets from ``next_offset`` up to
        ``first`` are a gap between batches (compaction): the same."""
        for offset in range(self.next_offset, last + 1):
            self.records[offset] = InFlight(RecordState.ARCHIVED, 0)
            self.next_offset = offset + 1
        for offset in range(max(first, self.start_offset), min(last + 1, self.next_offset)):
            entry = self.records.get(offset)
            if entry is not None and entry.state is RecordState.AVAILABLE and entry.pending is None:
                entry.state = transition(offset, entry.state, RecordState.ARCHIVED)

    def move_to_log_start(self, log_start_offset: int) -> None:
        """Records below the log start offset are gone (retention, DeleteRecords): skip them."""
        if log_start_offset <= self.start_offset:
            return
        for offset in [o for o in self.records if o < log_start_offset]:
            entry = self.records.pop(offset)
            if entry.acquisition:
                self._forget_acquired(entry.acquisition, offset)
        self.start_offset = log_start_offset
        self.next_offset = max(self.next_offset, log_start_offset)
        self._queue_write(_Change({}, None))

    # -- acknowledgements ---------------------------------------------------------------------

    def _validate(self, member_id: str, batches: Iterable[AcknowledgementBatch],
                  txn: bool) -> tuple[Errors, dict[int, RecordState], list[int]]:
        """(error, target state per offset, offsets to renew) — all or nothing, as Kafka."""
        targets: dict[int, RecordState] = {}
        renew: list[int] = []
        limit = self._settings().delivery_count_limit
        for b in batches:
            size = b.last_offset - b.first_offset + 1
            if size <= 0 or not b.types or (len(b.types) != 1 and len(b.types) != size):
                return Errors.INVALID_REQUEST, {}, []
            for i, offset in enumerate(range(b.first_offset, b.last_offset + 1)):
                kind = b.types[0] if len(b.types) == 1 else b.types[i]
                if kind not in _ACK_TYPES or (txn and kind != AcknowledgeType.ACCEPT):
                    return Errors.INVALID_REQUEST, {}, []
                if offset < self.start_offset and not txn:
                    continue  # already done with (inside a transaction: not by this member, refused below)
                entry = self.records.get(offset)
                if entry is None:  # never handed out (Kafka: "batch record not found"), or done with
                    return (Errors.INVALID_RECORD_STATE if offset < self.start_offset else Errors.INVALID_REQUEST,
                            {}, [])
                if kind == AcknowledgeType.GAP and entry.state is RecordState.ARCHIVED and entry.pending is None:
                    continue  # nothing was there to deliver
                if (entry.state is not RecordState.ACQUIRED or entry.member_id != member_id
                        or entry.pending is not None or offset in targets):
                    return Errors.INVALID_RECORD_STATE, {}, []
                if kind == AcknowledgeType.RENEW:
                    renew.append(offset)
                elif kind == AcknowledgeType.ACCEPT:
                    targets[offset] = RecordState.HELD_BY_TRANSACTION if txn else RecordState.ACKNOWLEDGED
                elif kind == AcknowledgeType.RELEASE:
                    targets[offset] = (RecordState.ARCHIVED if entry.delivery_count >= limit
                                       else RecordState.AVAILABLE)
                else:  # REJECT, GAP
                    targets[offset] = RecordState.ARCHIVED
        return Errors.NONE, targets, renew

    async def acknowledge(self, member_id: str, batches: Iterable[AcknowledgementBatch],
                          txn: TransactionalWrite | None = None) -> Errors:
        """Apply a member's acknowledgements once they are durable; INVALID_RECORD_STATE (and
        nothing applied) when one names a record the member does not hold. With ``txn``
        (eoslog's extension) accepted records are held until the transaction's outcome."""
        if self.state is not PartitionState.ACTIVE:
            return Errors.NOT_LEADER_OR_FOLLOWER
        error, targets, renew = self._validate(member_id, list(batches), txn is not None)
        if error != Errors.NONE:
            return error
        if renew:
            self._renew(member_id, renew)
        if not targets:
            return Errors.NONE
        for offset, target in targets.items():
            self.records[offset].pending = target
        done: asyncio.Future[Errors] = asyncio.get_running_loop().create_future()
        self._queue_write(_Change(targets, done, txn))
        return await done

    def _renew(self, member_id: str, offsets: list[int]) -> None:
        """RENEW: the records' lock starts again (they move to an acquisition of their own)."""
        acquisition = next(self._ids)
        for offset in offsets:
            entry = self.records[offset]
            self._forget_acquired(entry.acquisition, offset)
            entry.acquisition = acquisition
        self._acquisitions[acquisition] = _Acquisition(member_id, offsets)
        self.scheduler.schedule(self._timer_key(acquisition), self._settings().record_lock_duration_ms,
                                lambda: self._lock_expired(acquisition))

    def release_member(self, member_id: str) -> int:
        """The member's share session ended or it left the group: its acquired records go back
        (archived at the delivery count limit). Returns how many."""
        offsets = [o for o, e in self.records.items()
                   if e.state is RecordState.ACQUIRED and e.member_id == member_id and e.pending is None]
        self._release(offsets)
        return len(offsets)

    def _lock_expired(self, acquisition: int) -> None:
        held = self._acquisitions.pop(acquisition, None)
        if held is None:
            return
        offsets = [o for o in held.offsets if (e := self.records.get(o)) is not None
                   and e.state is RecordState.ACQUIRED and e.acquisition == acquisition]
        for o in offsets:
            if self.records[o].pending is not None:
                # A write about it is under way: its lock is gone; decided when it is answered.
                self.records[o].acquisition = 0
        ready = [o for o in offsets if self.records[o].pending is None]
        if ready:
            log.info("share-partition %s of group %s: acquisition lock of %d records of member %s ran out",
                     self.tp, self.key.group_id, len(ready), held.member_id)
            self._release(ready)

    def _release(self, offsets: list[int]) -> None:
        """Acquired records back to available now (archived at the delivery count limit); the
        new states are written (their delivery counts, and the archives) in the background."""
        if not offsets:
            return
        limit = self._settings().delivery_count_limit
        targets: dict[int, RecordState] = {}
        for offset in offsets:
            entry = self.records[offset]
            target = RecordState.ARCHIVED if entry.delivery_count >= limit else RecordState.AVAILABLE
            self._forget_acquired(entry.acquisition, offset)
            entry.state = transition(offset, entry.state, target)
            entry.member_id = None
            entry.acquisition = 0
            targets[offset] = target
        self._advance_start()
        self._queue_write(_Change({o: t for o, t in targets.items() if o in self.records}, None))
        self._on_available()

    def _forget_acquired(self, acquisition: int, offset: int) -> None:
        held = self._acquisitions.get(acquisition)
        if held is None:
            return
        if offset in held.offsets:
            held.offsets.remove(offset)
        if not held.offsets:
            del self._acquisitions[acquisition]
            self.scheduler.cancel(self._timer_key(acquisition))

    def _timer_key(self, acquisition: int) -> tuple[str, str, str, int, int]:
        return ("share-lock", self.key.group_id, self.tp.topic, self.tp.partition, acquisition)

    # -- transactions (eoslog's extension) ----------------------------------------------------

    def transaction_decided(self, producer_id: int, committed: bool, offsets: Iterable[int] | None = None) -> int:
        """The transaction that accepted records of this share-partition committed (they are
        acknowledged) or aborted (they are available again, delivery counts kept; archived at
        the limit). ``offsets``: the records it held, as the share coordinator's state names
        them (a leader that loaded them does not know whose they are). Returns how many moved."""
        held = set(offsets) if offsets is not None else set()
        held |= self._held_by.pop(producer_id, set())
        return self._decide({o: committed for o in held})

    def held(self) -> dict[int, int]:
        """The records held by transactions now: offset → the hold (``reconcile_held``)."""
        return {o: e.hold for o, e in self.records.items() if e.state is RecordState.HELD_BY_TRANSACTION}

    def reconcile_held(self, stored: ShareGroupOffset, before: dict[int, int]) -> int:
        """The share coordinator's state, read after ``held()`` returned ``before``: records held
        then (and still, by the same hold) whose transaction it has decided (it no longer reports
        them held) move as it decided — ACKNOWLEDGED committed, anything else aborted. How a
        leader learns outcomes its share coordinator could not tell it (another broker's, one
        that moved). Returns how many moved."""
        held = {o for o, hold in before.items()
                if (e := self.records.get(o)) is not None and e.state is RecordState.HELD_BY_TRANSACTION
                and e.hold == hold}
        decided: dict[int, bool] = {}
        for b in stored.state_batches:
            for offset in range(max(b.first_offset, stored.start_offset), b.last_offset + 1):
                if offset in held and b.delivery_state is not DeliveryState.ACQUIRED:
                    decided[offset] = b.delivery_state is DeliveryState.ACKNOWLEDGED
        covered = {o for b in stored.state_batches for o in range(b.first_offset, b.last_offset + 1)}
        for offset in held:
            if offset < stored.start_offset:
                decided[offset] = True  # done with: only a commit moves the start past a held record
            elif offset not in covered:
                decided[offset] = False  # the state never had it held: its transaction aborted
        return self._decide(decided)

    def _decide(self, decided: dict[int, bool]) -> int:
        start = self.start_offset
        limit = self._settings().delivery_count_limit
        released: dict[int, RecordState] = {}
        moved = 0
        for offset, committed in sorted(decided.items()):
            entry = self.records.get(offset)
            if entry is None or entry.state is not RecordState.HELD_BY_TRANSACTION:
                continue
            if committed:
                target = RecordState.ACKNOWLEDGED
            else:
                target = RecordState.ARCHIVED if entry.delivery_count >= limit else RecordState.AVAILABLE
                released[offset] = target
            entry.state = transition(offset, entry.state, target)
            entry.producer_id = -1
            moved += 1
        for offsets_of in self._held_by.values():
            offsets_of.difference_update(decided)
        self._advance_start()
        if released or self.start_offset != start:
            # An abort dropped the transaction's update: the delivery counts are written now; a
            # commit moved the start offset (its update could not: it knew only its records).
            self._queue_write(_Change(released, None))
        if released:
            self._on_available()
        if moved:
            log.info("share-partition %s of group %s: %d records held by transactions decided (%d released)",
                     self.tp, self.key.group_id, moved, len(released))
        return moved

    @property
    def busy(self) -> bool:
        """A write is under way or queued."""
        return self._writing or bool(self._queue)

    @property
    def held_by_transactions(self) -> int:
        return sum(1 for e in self.records.values() if e.state is RecordState.HELD_BY_TRANSACTION)

    # -- writes -------------------------------------------------------------------------------

    def _queue_write(self, change: _Change) -> None:
        self._queue.append(change)
        if not self._writing:
            self._writing = True
            asyncio.get_running_loop().create_task(self._write_loop())

    async def _write_loop(self) -> None:
        try:
            while self._queue:
                changes, self._queue = self._queue, []
                # A transactional change is written on its own (it is a different record).
                txn = [c for c in changes if c.txn is not None]
                plain = [c for c in changes if c.txn is None]
                if plain:
                    await self._write(plain, None)
                for c in txn:
                    await self._write([c], c.txn)
        finally:
            self._writing = False

    async def _write(self, changes: list[_Change], txn: TransactionalWrite | None) -> None:
        targets: dict[int, RecordState] = {}
        for c in changes:
            targets.update(c.targets)
        start = self.start_offset if txn is not None else self._start_after(targets)
        # A transactional update holds what its commit makes of the records (its abort drops it).
        batches = tuple(_state_batches((o, RecordState.ACKNOWLEDGED if txn is not None else t,
                                        self.records[o].delivery_count) for o, t in sorted(targets.items())
                                       if o in self.records))
        write = StateWrite(self.state_epoch, self.leader_epoch, start, batches)
        try:
            error = await self.persister.write_state(self.key, write, txn)
        except Exception:
            log.exception("writing the state of share-partition %s of %s failed", self.tp, self.key.group_id)
            error = Errors.UNKNOWN_SERVER_ERROR
        if error in (Errors.FENCED_STATE_EPOCH, Errors.FENCED_LEADER_EPOCH):
            log.warning("share-partition %s of group %s fenced (%s): it is read again", self.tp, self.key.group_id,
                        error.name)
            self.state = PartitionState.FENCED
        for c in changes:
            self._complete(c, error, txn)

    def _start_after(self, targets: dict[int, RecordState]) -> int:
        """The start offset once ``targets`` are applied: past every final record at the front."""
        offset = self.start_offset
        while offset < self.next_offset:
            entry = self.records.get(offset)
            state = targets.get(offset, entry.state if entry is not None else RecordState.ARCHIVED)
            if entry is not None and entry.pending is not None and offset not in targets:
                break
            if not state.final:
                break
            offset += 1
        return offset

    def _complete(self, change: _Change, error: Errors, txn: TransactionalWrite | None) -> None:
        if change.done is None:
            if error != Errors.NONE:
                log.warning("share-partition %s of group %s: writing released records failed (%s); they are "
                            "handed out again anyway, their delivery counts may be lost in a crash", self.tp,
                            self.key.group_id, error.name)
            return
        expired: list[int] = []
        for offset, target in change.targets.items():
            entry = self.records.get(offset)
            if entry is None or entry.pending is not target:
                continue
            entry.pending = None
            if error != Errors.NONE:
                if entry.acquisition == 0:
                    expired.append(offset)  # its lock ran out while the write was under way
                continue
            self._forget_acquired(entry.acquisition, offset)
            entry.state = transition(offset, entry.state, target)
            entry.member_id = None
            entry.acquisition = 0
            if target is RecordState.HELD_BY_TRANSACTION and txn is not None:
                entry.producer_id = txn.producer_id
                entry.hold = next(self._ids)
                self._held_by.setdefault(txn.producer_id, set()).add(offset)
        if error == Errors.NONE:
            self._advance_start()
            if any(t is RecordState.AVAILABLE for t in change.targets.values()):
                self._on_available()
        else:
            self._release(expired)
        change.done.set_result(error)

    def _advance_start(self) -> None:
        while self.start_offset < self.next_offset:
            entry = self.records.get(self.start_offset)
            if entry is not None and (not entry.state.final or entry.pending is not None):
                break
            self.records.pop(self.start_offset, None)
            self.start_offset += 1

    # -- observing ----------------------------------------------------------------------------

    def in_flight(self) -> dict[RecordState, int]:
        counts: dict[RecordState, int] = {}
        for entry in self.records.values():
            counts[entry.state] = counts.get(entry.state, 0) + 1
        return counts

    def delivery_counts(self) -> dict[int, int]:
        """Delivery count → how many in-flight records were delivered that often."""
        counts: dict[int, int] = {}
        for entry in self.records.values():
            if not entry.state.final:
                counts[entry.delivery_count] = counts.get(entry.delivery_count, 0) + 1
        return counts

    def close(self) -> None:
        for acquisition in list(self._acquisitions):
            self.scheduler.cancel(self._timer_key(acquisition))
        self._acquisitions.clear()
        self.state = PartitionState.FENCED


def _record_offsets(h: BatchHeader, data: bytes, pos: int) -> Iterator[int]:
    """The offsets of a data batch's records: all of base..last unless compaction removed some."""
    if h.records_count == h.last_offset_delta + 1:
        return iter(range(h.base_offset, h.next_offset))
    _, fields = decode_record_fields(data, pos)
    return iter(f[0] for f in fields)


def _ranges(offsets: list[int], records: dict[int, InFlight]) -> list[AcquiredRecords]:
    out: list[AcquiredRecords] = []
    for offset in offsets:
        count = records[offset].delivery_count
        last = out[-1] if out else None
        if last is not None and last.last_offset + 1 == offset and last.delivery_count == count:
            out[-1] = AcquiredRecords(last.first_offset, offset, count)
        else:
            out.append(AcquiredRecords(offset, offset, count))
    return out


def _state_batches(changes: Iterable[tuple[int, RecordState, int]]) -> list[StateBatch]:
    out: list[StateBatch] = []
    for offset, target, count in changes:
        stored = target.stored
        last = out[-1] if out else None
        if (last is not None and last.last_offset + 1 == offset and last.delivery_state == stored
                and last.delivery_count == count):
            out[-1] = StateBatch(last.first_offset, offset, stored, count)
        else:
            out.append(StateBatch(offset, offset, stored, count))
    return out

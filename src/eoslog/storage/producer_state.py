"""Per-partition producer state: what makes an idempotent producer's retries harmless.

For every producer id that wrote to the partition we keep its epoch and the metadata of
its last ``NUM_BATCHES_TO_RETAIN`` (5) batches — as Kafka's ProducerStateManager does,
and why clients may have at most 5 requests in flight. An append is first *validated*
against a copy of the producer's entry (``ProducerAppendInfo``); the copy replaces the
entry only after the log write succeeded, so a failed write leaves no trace.

Rules (KIP-98, Kafka's ProducerAppendInfo):
- a batch whose epoch is below the producer's → INVALID_PRODUCER_EPOCH;
- a batch with a new (higher) epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER;
- a producer we know nothing of (never seen, its state expired, or its batches deleted by
  retention or DeleteRecords) may start at any sequence (Kafka since KIP-360 answers no
  UNKNOWN_PRODUCER_ID here);
- same epoch: a batch equal in sequence range to one of the 5 cached ones is a duplicate and
  is answered with the original offsets, appending nothing; otherwise its first sequence
  must follow the last one (Int.MaxValue wraps to 0), else OUT_OF_ORDER_SEQUENCE_NUMBER.
  A transactional batch is a duplicate only of a batch of the producer's open transaction
  (eoslog's difference: Kafka 4.4 also matches batches of ended transactions, so a client
  that reuses an aborted batch's sequences in the same epoch loses its new batch).

Durability: a snapshot ``<offset:020d>.snapshot`` holds the state as of that offset (all 5
batches per producer, unlike Kafka's last-batch-only snapshot, so duplicates stay detectable
across a restart). Snapshots are taken when a segment rolls and at clean shutdown; at load the
newest usable snapshot is read and the log after it is replayed. A torn or corrupt snapshot is
deleted and an older one (or a replay from the log start) used instead.
"""

from __future__ import annotations

import logging
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from eoslog.errors import Errors, KafkaError
from eoslog.features import TRANSACTION_VERSION_2
from eoslog.records.batch import NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchHeader
from eoslog.storage.fileio import atomic_write

log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
EPOCH_MAX = 2**15 - 1  # Short.MaxValue: never handed out, so a coordinator can always fence
INT32_MAX = 2**31 - 1
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1

_SNAP_HEADER = struct.Struct(">hIi")  # version, crc32c of the rest, producer count
_SNAP_ENTRY = struct.Struct(">qhiqqb")  # pid, epoch, coordinator epoch, txn first offset, last ts, n batches
_SNAP_BATCH = struct.Struct(">iiqiq")  # first seq, last seq, last offset, offset delta, timestamp


class ProducerStateError(KafkaError):
    """A batch refused by the sequence/epoch rules; ``error`` is the Kafka error."""


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction ended in this partition by a COMMIT or ABORT marker."""

    producer_id: int
    first_offset: int  # the transaction's first offset here
    last_offset: int  # the marker's offset
    is_aborted: bool


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1  # set by the transactions issue
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, h: BatchHeader) -> BatchMetadata | None:
        if h.producer_epoch != self.producer_epoch:
            return None
        last_seq = h.last_sequence
        for b in self.batches:
            if b.first_seq == h.base_sequence and b.last_seq == last_seq:
                if h.is_transactional and not (0 <= self.current_txn_first_offset <= b.first_offset):
                    # A retry belongs to the open transaction: a client ends one only once its
                    # batches are answered. This is a new batch reusing an ended transaction's
                    # sequences (librdkafka after aborting with a batch in flight); taking it for
                    # a retry would answer it unwritten, as Kafka 4.4 does.
                    return None
                return b
        return None

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id, self.producer_epoch,
            deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN), self.coordinator_epoch,
            self.current_txn_first_offset, self.last_timestamp,
        )


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerAppendInfo:
    """Validates the batches of one append against copies of the producers' entries."""

    def __init__(self, manager: ProducerStateManager) -> None:
        self._manager = manager
        self.updated: dict[int, ProducerStateEntry] = {}
        self.completed: list[CompletedTxn] = []

    def _entry(self, producer_id: int) -> tuple[ProducerStateEntry | None, ProducerStateEntry]:
        current = self._manager.producers.get(producer_id)
        updated = self.updated.get(producer_id)
        if updated is None:
            updated = current.copy() if current else ProducerStateEntry(producer_id)
            self.updated[producer_id] = updated
        return current, updated

    def find_duplicate(self, h: BatchHeader) -> BatchMetadata | None:
        if h.producer_id < 0 or h.base_sequence == NO_SEQUENCE:
            return None
        entry = self.updated.get(h.producer_id) or self._manager.producers.get(h.producer_id)
        return entry.find_duplicate(h) if entry else None

    def validate_epoch(self, h: BatchHeader, offset: int) -> ProducerStateEntry:
        """A batch from an older epoch than the producer's is fenced."""
        _, entry = self._entry(h.producer_id)
        if h.producer_epoch < entry.producer_epoch:
            raise ProducerStateError(
                Errors.INVALID_PRODUCER_EPOCH,
                f"epoch of producer {h.producer_id} at offset {offset} in {self._manager.partition_name} "
                f"is {h.producer_epoch}, smaller than the last seen epoch {entry.producer_epoch}",
            )
        return entry

    def validate(self, h: BatchHeader, offset: int, transaction_version: int = 0) -> None:
        """Check one (non-duplicate) batch; raises ProducerStateError. ``transaction_version`` 2:
        the batch's v2 transaction was just added to this partition (Kafka's VerificationGuard
        with supportsEpochBump): every v2 transaction starts a partition at sequence 0."""
        pid, epoch, first_seq = h.producer_id, h.producer_epoch, h.base_sequence
        entry = self.validate_epoch(h, offset)
        where = f"producer {pid} at offset {offset} in {self._manager.partition_name}"
        current = self._manager.producers.get(pid)
        if transaction_version >= TRANSACTION_VERSION_2 and first_seq not in (0, NO_SEQUENCE) and (
                current is None or not current.batches):
            raise ProducerStateError(
                Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"Invalid sequence number for {where}: {first_seq} (incoming seq. number). Expected sequence 0 "
                "for transactions v2 idempotent producer with no existing state.",
            )
        if not h.is_transactional and entry.current_txn_first_offset >= 0:
            raise ProducerStateError(
                Errors.INVALID_TXN_STATE,
                f"expected a transactional write from {where}: its transaction that began at "
                f"offset {entry.current_txn_first_offset} is still open",
            )
        if first_seq == NO_SEQUENCE:
            return  # non-idempotent batches carry no sequence
        if epoch != entry.producer_epoch:
            # A producer this partition has no state for (never seen, expired, or its batches
            # removed by retention or DeleteRecords) may start at any sequence, as in Kafka's
            # ProducerAppendInfo.checkSequence; a known producer's new epoch starts at 0.
            if first_seq != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                raise ProducerStateError(
                    Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"invalid sequence number for new epoch of {where}: {epoch} (request epoch), "
                    f"{first_seq} (seq. number), {entry.producer_epoch} (current producer epoch)",
                )
        elif entry.last_seq == NO_SEQUENCE:
            if first_seq != 0:
                raise ProducerStateError(
                    Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"out of order sequence number for {where}: found {first_seq} (incoming seq. "
                    "number), but expected 0",
                )
        elif not in_sequence(entry.last_seq, first_seq):
            raise ProducerStateError(
                Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"out of order sequence number for {where}: {first_seq} (incoming seq. number), "
                f"{entry.last_seq} (current end sequence number)",
            )

    def append(self, h: BatchHeader) -> None:
        """Record an appended batch (offsets assigned) in the updated entry."""
        if h.producer_id < 0:
            return
        _, entry = self._entry(h.producer_id)
        if h.producer_epoch > entry.producer_epoch:
            entry.producer_epoch = h.producer_epoch
            entry.batches.clear()
        entry.last_timestamp = max(entry.last_timestamp, h.max_timestamp)
        if h.is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = h.base_offset
        if h.base_sequence != NO_SEQUENCE:
            entry.batches.append(
                BatchMetadata(h.base_sequence, h.last_sequence, h.last_offset,
                              h.last_offset_delta, h.max_timestamp)
            )


    def validate_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                        offset: int, transaction_version: int = 0) -> None:
        """Kafka's checks for a COMMIT/ABORT marker written by a transaction coordinator. From
        transaction version 2 the coordinator bumps the epoch at every end, so the marker must
        carry an epoch above the producer's (Kafka's ProducerAppendInfo.checkProducerEpoch) —
        except the same epoch again once that transaction has ended (a marker written twice)."""
        _, entry = self._entry(producer_id)
        where = f"producer {producer_id} at offset {offset} in {self._manager.partition_name}"
        current = entry.producer_epoch
        if transaction_version >= TRANSACTION_VERSION_2:
            if producer_epoch <= current and not (
                    producer_epoch == current and (entry.current_txn_first_offset < 0 or producer_epoch == EPOCH_MAX)):
                raise ProducerStateError(
                    Errors.INVALID_PRODUCER_EPOCH,
                    f"Epoch of producer {producer_id} at offset {offset} in {self._manager.partition_name} is "
                    f"{producer_epoch}, which is <= the last seen epoch {current} (TV{transaction_version})",
                )
        elif producer_epoch < current:
            raise ProducerStateError(
                Errors.INVALID_PRODUCER_EPOCH,
                f"transaction marker for {where} has epoch {producer_epoch}, smaller than the "
                f"last seen epoch {current}",
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise ProducerStateError(
                Errors.TRANSACTION_COORDINATOR_FENCED,
                f"transaction marker for {where} comes from coordinator epoch {coordinator_epoch}, "
                f"older than the last seen {entry.coordinator_epoch}",
            )

    def append_marker(self, h: BatchHeader, coordinator_epoch: int, is_commit: bool) -> CompletedTxn | None:
        """Record an appended COMMIT/ABORT control batch: the producer's transaction ends. A
        marker of a transaction that wrote nothing here completes none (Kafka's
        appendEndTxnMarker): nothing to index as aborted, nothing pins the LSO."""
        _, entry = self._entry(h.producer_id)
        if h.producer_epoch > entry.producer_epoch:
            entry.producer_epoch = h.producer_epoch
            entry.batches.clear()
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = max(entry.last_timestamp, h.max_timestamp)
        first, entry.current_txn_first_offset = entry.current_txn_first_offset, -1
        if first < 0:
            return None
        completed = CompletedTxn(h.producer_id, first, h.base_offset, not is_commit)
        self.completed.append(completed)
        return completed


class ProducerStateManager:
    def __init__(self, directory: Path, partition_name: str, expiration_ms: int) -> None:
        self.dir = directory
        self.partition_name = partition_name
        self.expiration_ms = expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0  # the state reflects the log below this offset
        # Open transactions: producer id -> first offset (the first unstable offset is their min).
        self.ongoing: dict[int, int] = {}
        # Ended transactions, first offset -> marker offset, until the high watermark passes the
        # marker (Kafka's unreplicatedTxns): a marker not yet replicated (or, under group commit,
        # fsynced) can still be lost, so the LSO stays at the transaction's first offset.
        self.unreplicated: dict[int, int] = {}
        self.latest_snapshot: int | None = None  # the offset of the newest snapshot on disk

    # -- the append path -------------------------------------------------------------

    def prepare(self) -> ProducerAppendInfo:
        return ProducerAppendInfo(self)

    def commit(self, info: ProducerAppendInfo, end_offset: int) -> None:
        self.producers.update(info.updated)
        for pid, entry in info.updated.items():
            if entry.current_txn_first_offset >= 0:
                self.ongoing[pid] = entry.current_txn_first_offset
            else:
                self.ongoing.pop(pid, None)
        for txn in info.completed:
            self.unreplicated[txn.first_offset] = txn.last_offset
        self.map_end_offset = end_offset

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, if any."""
        return min(self.ongoing.values()) if self.ongoing else None

    def first_unstable_offset_at(self, high_watermark: int) -> int | None:
        """The first offset of the oldest transaction that is open or whose marker is not
        below ``high_watermark`` (Kafka's firstUnstableOffset)."""
        firsts = [*self.ongoing.values(), *(f for f, marker in self.unreplicated.items() if marker >= high_watermark)]
        return min(firsts) if firsts else None

    def on_high_watermark(self, high_watermark: int) -> None:
        """Forget the ended transactions whose marker is below ``high_watermark``."""
        for first in [f for f, marker in self.unreplicated.items() if marker < high_watermark]:
            del self.unreplicated[first]

    def _reset_ongoing(self) -> None:
        self.ongoing = {
            pid: e.current_txn_first_offset
            for pid, e in self.producers.items() if e.current_txn_first_offset >= 0
        }

    def replay(self, batches: Iterable[tuple[BatchHeader, tuple[bool, int] | None]]) -> list[CompletedTxn]:
        """Rebuild state from batches already in the log (no validation, as Kafka's
        log-recovery origin). Control batches come with (is_commit, coordinator epoch).
        Returns the transactions the replayed markers completed."""
        info = ProducerAppendInfo(self)
        end = self.map_end_offset
        for h, marker in batches:
            if h.next_offset <= self.map_end_offset:
                continue
            if marker is not None:
                info.append_marker(h, marker[1], marker[0])
            else:
                info.append(h)
            end = h.next_offset
        self.commit(info, end)
        return info.completed

    # -- expiry -----------------------------------------------------------------

    def remove_expired(self, now_ms: int) -> list[int]:
        expired = [
            pid for pid, e in self.producers.items()
            if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= self.expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
        return expired

    def on_log_start_offset(self, log_start_offset: int) -> list[int]:
        """Forget producers whose last batch retention deleted (Kafka's truncateHead)."""
        gone = [
            pid for pid, e in self.producers.items()
            if e.last_offset < log_start_offset and e.current_txn_first_offset < 0
        ]
        for pid in gone:
            del self.producers[pid]
        for offset, path in self._snapshots():
            if offset < log_start_offset:
                path.unlink(missing_ok=True)
                if offset == self.latest_snapshot:
                    self.latest_snapshot = None
        return gone

    # -- snapshots -------------------------------------------------------------

    def _snapshots(self) -> list[tuple[int, Path]]:
        out = []
        for p in self.dir.glob("*" + SNAPSHOT_SUFFIX):
            try:
                out.append((int(p.stem), p))
            except ValueError:
                continue
        return sorted(out)

    def take_snapshot(self) -> Path:
        body = bytearray()
        for e in self.producers.values():
            body += _SNAP_ENTRY.pack(e.producer_id, e.producer_epoch, e.coordinator_epoch,
                                     e.current_txn_first_offset, e.last_timestamp, len(e.batches))
            for b in e.batches:
                body += _SNAP_BATCH.pack(b.first_seq, b.last_seq, b.last_offset, b.offset_delta, b.timestamp)
        count = struct.pack(">i", len(self.producers))
        crc = crc32c.crc32c(count + bytes(body))
        data = _SNAP_HEADER.pack(SNAPSHOT_VERSION, crc, len(self.producers)) + bytes(body)
        path = self.dir / f"{self.map_end_offset:020d}{SNAPSHOT_SUFFIX}"
        atomic_write(path, data)
        self.latest_snapshot = self.map_end_offset
        return path

    @staticmethod
    def read_snapshot(path: Path) -> dict[int, ProducerStateEntry]:
        data = path.read_bytes()
        if len(data) < _SNAP_HEADER.size:
            raise ValueError(f"{path}: {len(data)} bytes is shorter than a snapshot header")
        version, crc, count = _SNAP_HEADER.unpack_from(data, 0)
        if version != SNAPSHOT_VERSION:
            raise ValueError(f"{path}: unknown snapshot version {version}")
        if crc32c.crc32c(data[6:]) != crc:
            raise ValueError(f"{path}: snapshot CRC mismatch (torn or corrupt)")
        pos = _SNAP_HEADER.size
        producers: dict[int, ProducerStateEntry] = {}
        for _ in range(count):
            pid, epoch, coord_epoch, txn_first, last_ts, n = _SNAP_ENTRY.unpack_from(data, pos)
            pos += _SNAP_ENTRY.size
            entry = ProducerStateEntry(pid, epoch, coordinator_epoch=coord_epoch,
                                       current_txn_first_offset=txn_first, last_timestamp=last_ts)
            for _ in range(n):
                entry.batches.append(BatchMetadata(*_SNAP_BATCH.unpack_from(data, pos)))
                pos += _SNAP_BATCH.size
            producers[pid] = entry
        if pos != len(data):
            raise ValueError(f"{path}: {len(data) - pos} trailing bytes")
        return producers

    def reset(self, offset: int) -> None:
        """Forget everything: the state will be rebuilt by replaying the log from ``offset``."""
        self.producers = {}
        self.ongoing = {}
        self.unreplicated = {}
        self.map_end_offset = offset

    def load(self, log_start_offset: int, log_end_offset: int) -> int:
        """Load the newest usable snapshot at or below the log end; returns its offset.

        The caller replays the log from the returned offset. Snapshots beyond the log end
        (the log was truncated in recovery) and unreadable ones are deleted.
        """
        self.producers = {}
        self.unreplicated = {}  # the log is at or below the high watermark here (as Kafka's truncateAndReload)
        self.map_end_offset = log_start_offset
        for offset, path in reversed(self._snapshots()):
            if offset > log_end_offset:
                log.warning("deleting %s: beyond the log end offset %d", path, log_end_offset)
                path.unlink(missing_ok=True)
                continue
            if offset < log_start_offset:
                break
            try:
                self.producers = self.read_snapshot(path)
            except (ValueError, struct.error) as e:
                log.warning("ignoring producer state snapshot: %s", e)
                path.unlink(missing_ok=True)
                continue
            self.map_end_offset = offset
            break
        self._reset_ongoing()
        self.latest_snapshot = max((offset for offset, _ in self._snapshots()), default=None)
        return self.map_end_offset

    def delete_snapshots_except_latest(self, keep: int = 2) -> None:
        snaps = self._snapshots()
        for _, path in snaps[:-keep]:
            path.unlink(missing_ok=True)

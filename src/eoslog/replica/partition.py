"""One partition as this broker holds it: its log, its role and, when leading, what it
knows of the other replicas (Kafka's ``cluster.Partition``).

The leader tracks every follower's log end offset (learnt from the follower's fetches);
the high watermark is the smallest log end offset of the in-sync replicas, so consumers
only read what every ISR member has. ``append_records_to_leader`` refuses an acks=all write
while the ISR is smaller than ``min.insync.replicas`` (NOT_ENOUGH_REPLICAS), and
``check_enough_replicas_reach_offset`` says when an acks=all write is acknowledged. A
partition that does not lead answers NOT_LEADER_OR_FOLLOWER to clients.

On a single node every partition is led here with ISR = {this broker}: the high watermark
follows the log end offset at once and acks=all completes with the append.

A partition whose log directory went offline (a failed fsync or I/O error,
``storage.log_dir_failure``) answers KAFKA_STORAGE_ERROR to everything, as Kafka's offline
partitions do, and its high watermark never moves again: nothing written since its log's last
successful fsync is acknowledged. (The hot paths read ``log.log_dir.offline`` directly: a plain
attribute, a third of the ``PartitionLog.offline`` property's cost.)

The partition decides when its ISR changes, as Kafka's Partition does: ``maybe_shrink_isr``
(followers behind for ``replica.lag.time.max.ms`` leave) and ``maybe_expand_isr`` (a
follower that has caught up joins) propose the new ISR; the cluster layer persists it with a
conditional ZooKeeper write (Kafka's AlterPartition path) and only once ZooKeeper accepted it
does ``update_isr`` apply it here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import NamedTuple

from eoslog.errors import Errors, KafkaError
from eoslog.records.file_records import FileRecords
from eoslog.storage import AppendInfo, AppendOrigin, OffsetOutOfRange, PartitionLog
from eoslog.storage.log_dir_failure import KafkaStorageError
from eoslog.storage.txn_index import AbortedTxn
from eoslog.types import TopicPartition

log = logging.getLogger(__name__)

ACKS_ALL = -1
CONSUMER_REPLICA_ID = -1  # Fetch's replica id when a client, not a follower, fetches


class IsolationLevel(IntEnum):
    """What a consumer may read (the values are the protocol's)."""

    READ_UNCOMMITTED = 0  # up to the high watermark
    READ_COMMITTED = 1  # up to the last stable offset


class Role(Enum):
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass(slots=True)
class ReplicaState:
    """What the leader knows of one follower (Kafka's ``Replica``)."""

    broker_id: int
    log_end_offset: int = -1  # unknown until its first fetch
    last_caught_up_ms: int = 0  # the last time it had everything the leader had
    last_fetch_ms: int = 0


class FetchedRecords(NamedTuple):  # a tuple: one is built per partition of every fetch
    """One partition's part of a fetch answer. ``aborted`` is None unless read_committed."""

    error: Errors
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes | FileRecords = b""  # FileRecords only when read with in_file
    aborted: tuple[AbortedTxn, ...] | None = None
    preferred_read_replica: int = -1  # KIP-392: the replica the consumer is to fetch from instead

    @property
    def data(self) -> bytes:
        """The records' bytes (a file slice read now)."""
        return self.records if isinstance(self.records, bytes) else self.records.read()


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int
    leader_epoch: int


@dataclass
class Partition:
    tp: TopicPartition
    log: PartitionLog
    local_broker_id: int
    clock_ms: Callable[[], int]
    role: Role = Role.FOLLOWER
    leader_id: int | None = None
    leader_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: frozenset[int] = frozenset()
    remote_replicas: dict[int, ReplicaState] = field(default_factory=dict)
    # log.flush.policy=group-commit: this replica's own records count towards the high
    # watermark once fsynced (its recovery point), not once written (``group_commit``).
    durable: bool = False
    # The end of the writes answered before they were durable (a transaction's, durable at its
    # commit: ``ReplicaManager.append_records``); a reader waits for the high watermark to reach
    # it, so that what was acknowledged is seen by whoever asks after (``acknowledged_visible``).
    acknowledged_end: int = 0

    # -- leadership ----------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    def make_leader(self, leader_epoch: int, isr: Iterable[int], replicas: Iterable[int]) -> None:
        """Lead from ``leader_epoch`` on (stamped on every batch appended from now). Followers'
        positions are unknown until they fetch."""
        self.role, self.leader_id, self.leader_epoch = Role.LEADER, self.local_broker_id, leader_epoch
        self.log.leader_epoch = leader_epoch
        # The new epoch starts at the log end even before a batch of it is written, so that
        # OffsetForLeaderEpoch tells a follower where its older epochs ended (Kafka's makeLeader).
        self.log.epochs.assign(leader_epoch, self.log.log_end_offset)
        self.replicas = tuple(replicas)
        self.isr = frozenset(isr)
        now = self.clock_ms()
        self.remote_replicas = {
            r: ReplicaState(r, last_caught_up_ms=now) for r in self.replicas if r != self.local_broker_id
        }
        self.maybe_increment_high_watermark()

    def make_follower(self, leader_id: int | None, leader_epoch: int, isr: Iterable[int],
                      replicas: Iterable[int]) -> None:
        self.role, self.leader_id, self.leader_epoch = Role.FOLLOWER, leader_id, leader_epoch
        self.log.leader_epoch = leader_epoch
        self.replicas = tuple(replicas)
        self.isr = frozenset(isr)
        self.remote_replicas = {}

    def update_replicas(self, replicas: Iterable[int]) -> None:
        """A reassignment changed the replicas while this broker leads: an added one is tracked
        from its first fetch; a removed one is forgotten once it is out of the ISR (its log end
        offset still counts for the high watermark while it is in)."""
        self.replicas = tuple(replicas)
        now = self.clock_ms()
        for r in self.replicas:
            if r != self.local_broker_id and r not in self.remote_replicas:
                self.remote_replicas[r] = ReplicaState(r, last_caught_up_ms=now)
        for r in [r for r in self.remote_replicas if r not in self.replicas and r not in self.isr]:
            del self.remote_replicas[r]

    def update_isr(self, isr: Iterable[int]) -> bool:
        """Apply an ISR the cluster accepted; True if the high watermark moved."""
        self.isr = frozenset(isr)
        return self.maybe_increment_high_watermark()

    def maybe_shrink_isr(self, now_ms: int, lag_time_max_ms: int) -> tuple[int, ...] | None:
        """Kafka's maybeShrinkIsr: as leader, the ISR without the followers that have not
        caught up for more than ``lag_time_max_ms`` (getOutOfSyncReplicas), in replica order;
        None when every member is in sync. Proposed, not applied (``update_isr`` applies it)."""
        if not self.is_leader:
            return None
        lagging = {r for r in self.isr if r != self.local_broker_id
                   and (st := self.remote_replicas.get(r)) is not None
                   and now_ms - st.last_caught_up_ms > lag_time_max_ms}
        if not lagging:
            return None
        log.info("%s: shrinking the ISR %s: %s behind for more than %d ms", self.tp, sorted(self.isr),
                 sorted(lagging), lag_time_max_ms)
        return tuple(r for r in self.replicas if r in self.isr and r not in lagging)

    def maybe_expand_isr(self, replica_id: int, eligible: Callable[[int], bool]) -> tuple[int, ...] | None:
        """Kafka's maybeExpandIsr, after a follower's fetch: the ISR with ``replica_id`` added
        once it has everything up to the high watermark and has reached this leader's epoch
        (isFollowerInSync), if it is ``eligible`` (KIP-841: registered and not shutting down —
        a fetch the follower sent before it stopped fetching for its controlled shutdown is
        answered after the controller took it out of the ISR, and must not put it back). None
        when it does not join. Proposed, not applied (``update_isr`` applies it)."""
        if replica_id in self.isr or not self.is_leader or not eligible(replica_id):
            return None
        follower = self.remote_replicas.get(replica_id)
        if follower is None:
            return None
        epoch_start = self.log.epochs.entries[-1].start_offset if self.log.epochs.entries else 0
        if follower.log_end_offset < self.high_watermark or follower.log_end_offset < epoch_start:
            return None
        log.info("%s: follower %d caught up (offset %d): joins the ISR", self.tp, replica_id, follower.log_end_offset)
        return tuple(r for r in self.replicas if r in self.isr or r == replica_id)

    def check_leader_epoch(self, current_leader_epoch: int) -> Errors:
        """KIP-320: a request naming the leader epoch it expects. Older than ours: the
        sender's metadata is stale (FENCED_LEADER_EPOCH); newer: ours is (UNKNOWN_LEADER_EPOCH).
        -1: the sender does not say (older clients)."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return Errors.NONE
        return Errors.FENCED_LEADER_EPOCH if current_leader_epoch < self.leader_epoch else Errors.UNKNOWN_LEADER_EPOCH

    def last_offset_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int) -> tuple[Errors, int, int]:
        """OffsetForLeaderEpoch on the leader: (error, the largest epoch ≤ ``leader_epoch``,
        where it ended here) — a follower truncates to that (KIP-101/KIP-279)."""
        if self.log.log_dir.offline is not None:
            return Errors.KAFKA_STORAGE_ERROR, -1, -1
        if self.role is not Role.LEADER:
            return Errors.NOT_LEADER_OR_FOLLOWER, -1, -1
        error = self.check_leader_epoch(current_leader_epoch)
        if error is not Errors.NONE:
            return error, -1, -1
        epoch, end = self.log.epochs.end_offset_for(leader_epoch, self.log.log_end_offset)
        return Errors.NONE, epoch, end

    def _require_leader(self) -> None:
        if self.log.log_dir.offline is not None:
            raise KafkaStorageError(f"{self.log.topic}-{self.log.partition} is offline: its log directory "
                                    f"{self.log.log_dir.path} failed")
        if self.role is not Role.LEADER:
            raise KafkaError(Errors.NOT_LEADER_OR_FOLLOWER,
                             f"broker {self.local_broker_id} is not the leader of {self.log.topic}-"
                             f"{self.log.partition} (leader: {self.leader_id}, epoch {self.leader_epoch})")

    # -- the high watermark -----------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def maybe_increment_high_watermark(self) -> bool:
        """The smallest log end offset of the ISR (the leader's own included: its fsynced end
        when ``durable``), if larger than the current high watermark (Kafka's
        maybeIncrementLeaderHW). Never once the log is offline."""
        if self.role is not Role.LEADER or self.log.log_dir.offline is not None:
            return False
        new = self.log.recovery_point if self.durable else self.log.log_end_offset
        for broker_id in self.isr:
            if broker_id != self.local_broker_id:
                follower = self.remote_replicas.get(broker_id)
                new = min(new, follower.log_end_offset if follower is not None else -1)
        if new <= self.log.high_watermark:
            return False
        self.log.update_high_watermark(new)
        return True

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, Errors]:
        """(done, error) for an acks=all write ending below ``required_offset``: done once
        the high watermark reached it; then NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR
        shrank below min.insync.replicas meanwhile (Kafka's checkEnoughReplicasReachOffset).
        An offline log answers KAFKA_STORAGE_ERROR at once, whatever was synced before."""
        if self.log.log_dir.offline is not None:
            return True, Errors.KAFKA_STORAGE_ERROR
        if self.role is not Role.LEADER:
            return False, Errors.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark < required_offset:
            return False, Errors.NONE
        if len(self.isr) < self.log.config.min_insync_replicas:
            return True, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return True, Errors.NONE

    # -- appends --------------------------------------------------------------------------

    def append_records_to_leader(self, records: bytes, origin: AppendOrigin, required_acks: int,
                                 transaction_version: int = 0) -> AppendInfo:
        """Append as leader; raises KafkaError (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS,
        or storage's refusal) with nothing written. ``transaction_version``: a coordinator's
        marker's (its epoch checks)."""
        self._require_leader()
        min_isr = self.log.config.min_insync_replicas
        if required_acks == ACKS_ALL and len(self.isr) < min_isr:
            raise KafkaError(
                Errors.NOT_ENOUGH_REPLICAS,
                f"the size of the current ISR {sorted(self.isr)} is insufficient to satisfy the min.isr "
                f"requirement of {min_isr} for partition {self.log.topic}-{self.log.partition}",
            )
        info = self.log.append_as_leader(records, origin, transaction_version)
        self.maybe_increment_high_watermark()
        return info

    def append_records_to_follower(self, records: bytes, leader_high_watermark: int) -> AppendInfo:
        """A follower appends what it fetched from its leader, offsets kept, and takes the
        leader's high watermark (bounded by its own log end)."""
        if self.role is not Role.FOLLOWER:
            raise KafkaError(Errors.NOT_LEADER_OR_FOLLOWER,
                             f"{self.log.topic}-{self.log.partition} is led here: no replicated appends")
        info = self.log.append_as_follower(records)
        if leader_high_watermark > self.log.high_watermark:
            self.log.update_high_watermark(leader_high_watermark)
        return info

    # -- reads ------------------------------------------------------------------------------

    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int) -> bool:
        """A follower fetching from ``fetch_offset`` has everything below it; True if the
        high watermark moved."""
        follower = self.remote_replicas.get(replica_id)
        if follower is None:
            raise KafkaError(Errors.NOT_LEADER_OR_FOLLOWER,
                             f"broker {replica_id} is not a replica of {self.log.topic}-{self.log.partition}")
        now = self.clock_ms()
        follower.log_end_offset = fetch_offset
        follower.last_fetch_ms = now
        if fetch_offset >= self.log.log_end_offset:
            follower.last_caught_up_ms = now
        return self.maybe_increment_high_watermark()

    def read_records(self, fetch_offset: int, max_bytes: int, *, replica_id: int = CONSUMER_REPLICA_ID,
                     isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
                     min_one: bool = True, in_file: bool = False, from_follower: bool = False) -> FetchedRecords:
        """Records from ``fetch_offset``: up to the high watermark for a consumer (the last
        stable offset for read_committed), up to the log end for a follower (whose fetch
        state the caller updated first). ``in_file``: the records as their slice of the
        segment file (``FileRecords``), for a Fetch to send without reading them.
        ``from_follower``: a consumer that may read from a follower (KIP-392, Fetch v11+): a
        follower answers it from its own log, below its own high watermark (the leader's, as
        far as this replica has it) and last stable offset, with its own aborted-transaction
        index — what the leader would answer, once this replica has the records."""
        if self.log.log_dir.offline is not None:
            return FetchedRecords(Errors.KAFKA_STORAGE_ERROR)
        if self.role is not Role.LEADER and not (from_follower and replica_id < 0 and self.role is Role.FOLLOWER):
            return FetchedRecords(Errors.NOT_LEADER_OR_FOLLOWER)
        plog = self.log
        hw, log_start = plog.high_watermark, plog.log_start_offset
        lso = plog.last_stable_offset
        read_committed = isolation is IsolationLevel.READ_COMMITTED
        # A follower copies everything; a consumer reads what the ISR has (and is decided).
        bound = plog.log_end_offset if replica_id >= 0 else lso if read_committed else hw
        try:
            found, next_offset = plog.read_file_records(fetch_offset, max_bytes, upper_bound=bound, min_one=min_one)
            records: bytes | FileRecords = (b"" if found is None else found.read()
                                            if isinstance(found, FileRecords) and not in_file else found)
        except OffsetOutOfRange:
            return FetchedRecords(Errors.OFFSET_OUT_OF_RANGE)
        except KafkaStorageError:
            return FetchedRecords(Errors.KAFKA_STORAGE_ERROR)
        except OSError as e:  # reading the slice
            plog.io_failed("reading", e)
            return FetchedRecords(Errors.KAFKA_STORAGE_ERROR)
        aborted: tuple[AbortedTxn, ...] | None = None
        if read_committed and replica_id < 0:
            # Each aborted transaction overlapping the range read, for the consumer to filter.
            aborted = tuple(plog.aborted_transactions(fetch_offset, next_offset)) if found is not None else ()
        return FetchedRecords(Errors.NONE, hw, lso, log_start, records, aborted)

    # -- offsets ------------------------------------------------------------------------------

    def fetch_offset_for_timestamp(self, timestamp: int, isolation: IsolationLevel) -> OffsetAndTimestamp:
        """ListOffsets: -1 latest (the high watermark, or the LSO for read_committed), -2
        earliest (the log start offset), -3 the record with the largest timestamp, else the
        first record at or after ``timestamp`` below that bound (offset and timestamp -1 when
        there is none). Raises KafkaError NOT_LEADER_OR_FOLLOWER, or INVALID_REQUEST for another negative."""
        self._require_leader()
        plog = self.log
        bound = plog.last_stable_offset if isolation is IsolationLevel.READ_COMMITTED else plog.high_watermark
        if timestamp == LATEST_TIMESTAMP:
            return OffsetAndTimestamp(bound, -1, self.leader_epoch)
        if timestamp == EARLIEST_TIMESTAMP:
            return OffsetAndTimestamp(plog.log_start_offset, -1, self.leader_epoch)
        if timestamp == MAX_TIMESTAMP:
            ts, offset = self._max_timestamp()
            return OffsetAndTimestamp(offset, ts, self.leader_epoch)
        if timestamp < 0:
            raise KafkaError(Errors.INVALID_REQUEST, f"timestamp {timestamp} is not a ListOffsets target")
        found = plog.offset_for_timestamp(timestamp)
        if found is None or found[0] >= bound:
            return OffsetAndTimestamp(-1, -1, self.leader_epoch)
        return OffsetAndTimestamp(found[0], found[1], self.leader_epoch)

    def _max_timestamp(self) -> tuple[int, int]:
        """(timestamp, offset) of the first record carrying the log's largest timestamp.

        The log tracks the maximum per batch (its last offset, as Kafka's batch header
        does); since KAFKA-16310 Kafka answers with the record's own offset, so the batch
        is searched for the first record at that timestamp.
        """
        ts, offset = self.log.max_timestamp()
        if ts < 0:
            return -1, -1
        found = self.log.offset_for_timestamp(ts)
        return (ts, found[0]) if found is not None else (ts, offset)


LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3

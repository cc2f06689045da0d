"""What ``eoslog transactions`` and the console share, over the admin client: listing and
describing transactions, the partitions' producers, finding hanging transactions, writing
an ABORT marker (Kafka's TransactionsCommand logic, which its CLI and Admin hold).

A *hanging* transaction is open in a partition (its producer has a
``CurrentTransactionStartOffset``) while no transaction coordinator will ever finish it, so the
partition's last stable offset stays pinned. ``candidate_open_transactions`` finds the open
transactions whose producer wrote nothing for longer than a timeout; ``hanging_transactions``
keeps those that no coordinator lists with their producer id *and* still counts in that
partition, and sets apart an open two-phase-commit transaction (KIP-939: finished by its
external coordinator, never to be aborted here). ``write_abort_marker`` is Kafka's
Admin.abortTransaction: WriteTxnMarkers to the partition's leader.

What it must never do: decide a transaction hangs without having asked the coordinators, or
abort anything it was not pointed at. Failures a person must read are ``ToolError``s.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from eoslog.client.admin import AbortTransactionSpec, Admin
from eoslog.client.admin import TransactionDescription as AdminTransactionDescription
from eoslog.client.errors import KafkaProtocolError, UnknownTopicOrPartitionError
from eoslog.client.types import TopicPartition
from eoslog.protocol.errors import ErrorCode
from eoslog.tools import ToolError

MAX_BATCH_SIZE = 500  # partitions per DescribeProducers, as Kafka's tool
DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN = 15
TWO_PHASE_COMMIT_TIMEOUT_MS = 2**31 - 1  # Kafka's mark of a 2PC transactional id (KIP-939)
OPEN_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort"})

T = TypeVar("T")


# -- what the requests return ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProducerState:
    """One active producer of a partition (DescribeProducers)."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int  # -1: no marker written yet
    last_sequence: int
    last_timestamp: int
    current_txn_start_offset: int | None  # None: no open transaction here


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    coordinator_id: int
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    coordinator_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_time_ms: int | None  # None: no transaction in progress
    partitions: tuple[tuple[str, int], ...]

    @property
    def two_phase_commit(self) -> bool:
        """A transactional id of an external two-phase commit (KIP-939): timeout Integer.MAX_VALUE."""
        return self.timeout_ms == TWO_PHASE_COMMIT_TIMEOUT_MS


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    """A transaction open in one partition, as the partition's leader sees it."""

    topic: str
    partition: int
    producer: ProducerState


# -- the cluster, through the admin client ----------------------------------------------------------


class Cluster:
    """The admin client (``eoslog.client.Admin``) plus the look-ups the commands share:
    the brokers, partition leaders."""

    def __init__(self, admin: Admin) -> None:
        self.admin = admin
        self._brokers: dict[int, tuple[str, int]] | None = None

    @property
    def brokers(self) -> dict[int, tuple[str, int]]:
        """node id → (host, port)."""
        if self._brokers is None:
            self._brokers = {n.id: (n.host, n.port) for n in self.admin.describe_cluster().nodes}
        return self._brokers

    def leaders(self, topics: list[str] | None, broker_id: int | None = None) -> dict[tuple[str, int], int]:
        """(topic, partition) → leader of the given topics (None: every topic but the internal
        ones, as Kafka's tool), limited to partitions with a replica on ``broker_id``."""
        names = sorted(self.admin.list_topics()) if topics is None else topics
        described = {}
        for name in names:
            try:
                described.update(self.admin.describe_topics([name]))
            except UnknownTopicOrPartitionError:
                raise ToolError(f"Topic '{name}' does not exist") from None
        return {
            (t.name, p.partition): p.leader for t in described.values() for p in t.partitions
            if broker_id is None or broker_id in p.replicas
        }

    def leader(self, topic: str, partition: int) -> int:
        found = self.leaders([topic])
        if (topic, partition) not in found:
            raise ToolError(f"Partition {topic}-{partition} does not exist")
        leader = found[(topic, partition)]
        if leader < 0:
            raise ToolError(f"Partition {topic}-{partition} has no leader")
        return leader


# -- requests -----------------------------------------------------------------------------------


def describe_producers(cluster: Cluster, tps: Sequence[tuple[str, int]], broker_id: int | None = None
                       ) -> dict[tuple[str, int], list[ProducerState]]:
    """DescribeProducers for ``tps`` at their leaders (or at ``broker_id``); a partition
    error raises ToolError."""
    if broker_id is not None and broker_id not in cluster.brokers:
        raise ToolError(f"broker {broker_id} is not in the cluster (brokers: "
                           f"{', '.join(str(n) for n in sorted(cluster.brokers)) or 'none'})")
    try:
        found = cluster.admin.describe_producers([TopicPartition(t, p) for t, p in tps], broker_id=broker_id)
    except KafkaProtocolError as e:
        where = "" if broker_id is None else f" on broker {broker_id}"
        raise ToolError(f"Failed to describe producers{where}: {e}") from None
    return {
        (tp.topic, tp.partition): [
            ProducerState(s.producer_id, s.producer_epoch, -1 if s.coordinator_epoch is None else s.coordinator_epoch,
                          s.last_sequence, s.last_timestamp, s.current_transaction_start_offset)
            for s in states
        ]
        for tp, states in found.items()
    }


def list_transactions(
    cluster: Cluster, states: Sequence[str] = (), producer_ids: Iterable[int] = (),
    duration_ms: int = -1, pattern: str | None = None,
) -> list[TransactionListing]:
    """ListTransactions on every broker (each coordinates its own transactional ids); a
    state filter no broker knows is reported on stderr by the admin client."""
    listed = cluster.admin.list_transactions(states or None, producer_ids or None,
                                            min_duration_ms=duration_ms if duration_ms >= 0 else None,
                                            transactional_id_pattern=pattern)
    return [TransactionListing(x.transactional_id, x.coordinator_id, x.producer_id, x.state) for x in listed]


def describe_transactions(cluster: Cluster, transactional_ids: Sequence[str]
                          ) -> dict[str, TransactionDescription | KafkaProtocolError]:
    """DescribeTransactions, each id asked of its coordinator; per-id errors are values."""
    ids = list(dict.fromkeys(transactional_ids))
    try:
        found: dict[str, AdminTransactionDescription | KafkaProtocolError] = {
            **cluster.admin.describe_transactions(ids)}
    except KafkaProtocolError:  # one id failed: ask again one by one to tell which
        found = {}
        for txn_id in ids:
            try:
                found.update(cluster.admin.describe_transactions([txn_id]))
            except KafkaProtocolError as e:
                found[txn_id] = e
    return {
        txn_id: d if isinstance(d, KafkaProtocolError) else TransactionDescription(
            d.coordinator_id, d.transactional_id, d.producer_id, d.producer_epoch, d.state,
            d.transaction_timeout_ms, d.transaction_start_time_ms, d.topic_partitions,
        )
        for txn_id, d in found.items()
    }


def write_abort_marker(cluster: Cluster, topic: str, partition: int, producer_id: int,
                       producer_epoch: int, coordinator_epoch: int) -> None:
    """WriteTxnMarkers with one ABORT marker at the partition's leader (the admin client's
    abort_transaction); an error raises ToolError."""
    try:
        cluster.admin.abort_transaction(AbortTransactionSpec(TopicPartition(topic, partition), producer_id,
                                                             producer_epoch, coordinator_epoch))
    except KafkaProtocolError as e:
        raise ToolError(
            f"Failed to abort transaction of producer {producer_id} (epoch {producer_epoch}, coordinator "
            f"epoch {coordinator_epoch}) on {topic}-{partition}: {e}"
        ) from None


# -- find-hanging -----------------------------------------------------------------------------------


def _batches(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def candidate_open_transactions(cluster: Cluster, partitions: dict[tuple[str, int], int],
                                broker_id: int | None, max_timeout_ms: int, now_ms: int) -> list[OpenTransaction]:
    """Open transactions whose producer wrote nothing for longer than ``max_timeout_ms``:
    no coordinator lets a transaction run that long, so it should have ended by now."""
    by_node: dict[int, list[tuple[str, int]]] = {}
    for tp, leader in sorted(partitions.items()):
        node = broker_id if broker_id is not None else leader
        if node < 0:
            raise ToolError(f"Partition {tp[0]}-{tp[1]} has no leader")
        by_node.setdefault(node, []).append(tp)
    out: list[OpenTransaction] = []
    for node, tps in sorted(by_node.items()):
        for batch in _batches(tps, MAX_BATCH_SIZE):
            for (topic, partition), producers in describe_producers(cluster, batch, node).items():
                out.extend(
                    OpenTransaction(topic, partition, p) for p in producers
                    if p.current_txn_start_offset is not None and now_ms - p.last_timestamp > max_timeout_ms
                )
    return out


def hanging_transactions(cluster: Cluster, candidates: list[OpenTransaction]
                         ) -> tuple[list[OpenTransaction], list[tuple[OpenTransaction, TransactionDescription]]]:
    """The candidates no coordinator will finish: no transactional id has their producer
    id, the id is gone, or its transaction no longer counts that partition; and, apart,
    those that are an open two-phase-commit transaction (not hanging: its external
    coordinator will finish it)."""
    if not candidates:
        return [], []
    producer_ids = sorted({c.producer.producer_id for c in candidates})
    listings = list_transactions(cluster, producer_ids=producer_ids)
    txn_ids = {x.producer_id: x.transactional_id for x in listings if x.producer_id in producer_ids}
    descriptions = describe_transactions(cluster, sorted(set(txn_ids.values()))) if txn_ids else {}
    for described_id, result in descriptions.items():
        if isinstance(result, KafkaProtocolError) and result.error_code != ErrorCode.transactional_id_not_found:
            raise ToolError(f"Failed to describe transaction state of transactional-id `{described_id}`: "
                               f"{result}")
    hanging = []
    prepared: list[tuple[OpenTransaction, TransactionDescription]] = []
    for c in candidates:
        txn_id = txn_ids.get(c.producer.producer_id)
        d = descriptions.get(txn_id) if txn_id is not None else None
        if isinstance(d, TransactionDescription) and d.two_phase_commit and d.state in OPEN_STATES:
            prepared.append((c, d))
        elif not isinstance(d, TransactionDescription) or (c.topic, c.partition) not in d.partitions:
            hanging.append(c)
    return sorted(hanging, key=lambda c: (c.topic, c.partition, c.producer.current_txn_start_offset or 0)), prepared

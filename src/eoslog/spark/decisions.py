"""The sink's commit decisions: their record format, the compacted topic that keeps them,
reading a query's latest decision, and recording one.

A *decision* says "batch B of query Q is committed, and these prepared transactions
(transactional id, producer id, epoch) are its output". The driver records it before it
completes any of the transactions; from then on the batch is decided and every later
step — a retried ``commit``, an ``abort``, a replay after a crash — finishes it instead of
writing it again. Without a decision nothing of the batch is ever committed.

Records: key = the query id (or ``batch-<uuid>`` for a batch write) in UTF-8, value = one
JSON object::

    {"version": 1, "batch": 7, "run": "<run id>", "decidedAt": 1700000000000,
     "transactions": [["eoslog-spark-<query>.<run>.0.0", "4001:3"], ...]}

(the state is ``PreparedTxnState.to_string()``, Kafka's ``"producerId:epoch"``). The topic
(``__eoslog_spark_commits`` by default) is compacted, so it keeps each query's latest
decision, which is all a query ever needs: Spark replays at most its last batch.

Recording is fenced. The driver writes the decision inside a transaction of its own
transactional id ``<prefix><query>.decider`` (an ordinary, not two-phase, transaction), and
opens that producer — ``init_transactions``, which aborts whatever an older driver left
open and fences it — before it reads the latest decision. A decision a dead driver was
still sending can therefore never become visible after the new driver looked.

Reading is read_committed and waits until the last stable offset reaches the high
watermark seen when the read began, so a decision that is committed, but whose marker
sits behind another query's open decision transaction, is not missed.

What it must never do: complete or abort the sink's data transactions (``commit``'s job).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Self

from eoslog.client.admin import AIOAdmin, IsolationLevel, NewTopic, OffsetSpec
from eoslog.client.consumer import AIOConsumer
from eoslog.client.errors import TopicAlreadyExistsError
from eoslog.client.partitioner import murmur2
from eoslog.client.producer import AIOProducer
from eoslog.client.types import PreparedTxnState, TopicPartition
from eoslog.spark.sink_options import SinkOptions

FORMAT_VERSION = 1
DECISIONS_PARTITIONS = 1
# Compacted, and rolled often enough that compaction can keep the topic small: only the
# latest decision per query is ever read.
DECISIONS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": str(1024 * 1024)}
# A decider transaction lives for milliseconds; a driver that dies inside one leaves it to
# this timeout (or to the next driver's fence), and readers wait for it.
DECIDER_TRANSACTION_TIMEOUT_MS = 10_000
READ_WAIT_S = 3 * DECIDER_TRANSACTION_TIMEOUT_MS / 1000
_FIRST_WINDOW = 64

READ_COMMITTED = IsolationLevel.READ_COMMITTED


class DecisionFormatError(ValueError):
    """A record of the decisions topic is not a decision this version understands."""


class DecisionLogUnavailable(RuntimeError):
    """The decisions topic cannot be read to the end (an open transaction that never ends)."""


@dataclass(frozen=True)
class Decision:
    key: str  # the query id, or batch-<uuid> for a batch write
    batch_id: int
    run_id: str
    # (transactional id, prepared state) of every transaction that is the batch's output
    transactions: tuple[tuple[str, PreparedTxnState], ...]
    decided_at_ms: int = 0

    def states(self) -> dict[str, PreparedTxnState]:
        return dict(self.transactions)

    def encode(self) -> tuple[bytes, bytes]:
        """(record key, record value)."""
        value = {
            "version": FORMAT_VERSION, "batch": self.batch_id, "run": self.run_id, "decidedAt": self.decided_at_ms,
            "transactions": [[tid, state.to_string()] for tid, state in self.transactions],
        }
        return self.key.encode(), json.dumps(value, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> Decision:
        if key is None or value is None:
            raise DecisionFormatError("a decision record needs a key and a value")
        try:
            v = json.loads(value)
            if not isinstance(v, dict) or v.get("version") != FORMAT_VERSION:
                raise DecisionFormatError(f"unknown decision format: {value[:80]!r}")
            transactions = []
            for item in v["transactions"]:
                tid, state_text = item
                state = PreparedTxnState.from_string(state_text)
                if not isinstance(tid, str) or not tid or not state.has_transaction:
                    raise DecisionFormatError(f"bad transaction {item!r} in decision")
                transactions.append((tid, state))
            batch = v["batch"]
            run = v["run"]
            decided = v.get("decidedAt", 0)
            if not isinstance(batch, int) or batch < 0 or not isinstance(run, str) or not isinstance(decided, int):
                raise DecisionFormatError(f"bad batch or run in decision: {value[:80]!r}")
            return cls(key.decode(), batch, run, tuple(transactions), decided)
        except DecisionFormatError:
            raise
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
            raise DecisionFormatError(f"malformed decision record: {e}") from None


def decider_transactional_id(options: SinkOptions, key: str) -> str:
    return f"{options.transactional_id_prefix}{key}.decider"


def partition_for(key: str, partitions: int) -> int:
    """The partition of a query's decisions: murmur2 of its key, as the default partitioner."""
    return (murmur2(key.encode()) & 0x7FFFFFFF) % partitions


_known_partitions: dict[tuple[str, str], int] = {}
TOPIC_VISIBLE_S = 30.0


def admin_client(options: SinkOptions) -> AIOAdmin:
    """The admin client the sink's driver calls share (``async with``)."""
    return AIOAdmin(options.connection_settings())


async def _partition_count(admin: AIOAdmin, options: SinkOptions) -> int | None:
    """The decisions topic's partition count (remembered for the life of this process:
    Spark reuses its Python workers); None while the topic does not exist."""
    cache_key = (options.bootstrap_servers, options.decisions_topic)
    if cache_key not in _known_partitions:
        if options.decisions_topic not in await admin.list_topics(internal=True):
            return None
        described = await admin.describe_topics([options.decisions_topic])
        _known_partitions[cache_key] = len(described[options.decisions_topic].partitions)
    return _known_partitions[cache_key]


async def ensure_decisions_topic(options: SinkOptions, admin: AIOAdmin) -> int:
    """Create the decisions topic if it does not exist; its partition count."""
    partitions = await _partition_count(admin, options)
    if partitions is None:
        with contextlib.suppress(TopicAlreadyExistsError):  # another driver created it meanwhile
            await admin.create_topics([NewTopic(options.decisions_topic, DECISIONS_PARTITIONS,
                                                configs=DECISIONS_TOPIC_CONFIGS)])
        # In a cluster the broker asked next may learn of the new topic a moment later
        # (each broker from its own ZooKeeper watch): wait until it is seen.
        deadline = time.monotonic() + TOPIC_VISIBLE_S
        while (partitions := await _partition_count(admin, options)) is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the decisions topic {options.decisions_topic} was created but is not "
                                   f"in the metadata after {TOPIC_VISIBLE_S:.0f} s")
            await asyncio.sleep(0.05)
    return partitions


async def read_latest_decision_async(options: SinkOptions, key: str, admin: AIOAdmin, *,
                                     wait_s: float = READ_WAIT_S) -> Decision | None:
    """The latest committed decision of ``key``, or None if it has none (or the decisions
    topic does not exist yet)."""
    latest, earliest = OffsetSpec.latest(), OffsetSpec.earliest()
    partitions = await _partition_count(admin, options)
    if partitions is None:
        return None
    tp = TopicPartition(options.decisions_topic, partition_for(key, partitions))
    high_watermark = (await admin.list_offsets({tp: latest}))[tp].offset
    deadline = time.monotonic() + wait_s
    while (stable := (await admin.list_offsets({tp: latest}, isolation_level=READ_COMMITTED))[tp].offset) \
            < high_watermark:
        if time.monotonic() > deadline:
            raise DecisionLogUnavailable(
                f"{tp.topic}-{tp.partition}: an open transaction keeps the last stable offset at {stable} "
                f"below {high_watermark} for more than {wait_s:.0f} s"
            )
        await asyncio.sleep(0.02)
    begin = (await admin.list_offsets({tp: earliest}))[tp].offset
    if stable <= begin:
        return None
    wanted = key.encode()
    consumer = AIOConsumer(options.connection_settings(**{"isolation.level": "read_committed",
                                                          "enable.auto.commit": False, "auto.offset.reset": "none"}))
    async with consumer:
        consumer.assign([tp])
        end, window = stable, _FIRST_WINDOW
        while end > begin:
            start = max(begin, end - window)
            consumer.seek(tp, start)
            found = None
            deadline = time.monotonic() + wait_s
            while await consumer.position(tp) < end:
                if time.monotonic() > deadline:
                    raise DecisionLogUnavailable(f"cannot read {tp.topic}-{tp.partition} from {start} to {end}")
                for record in await consumer.poll(0.5):
                    if record.offset < end and record.key == wanted:
                        found = record
            if found is not None:
                return Decision.decode(found.key, found.value)
            end, window = start, window * 4
    return None


def read_latest_decision(options: SinkOptions, key: str, *, wait_s: float = READ_WAIT_S) -> Decision | None:
    """``read_latest_decision_async`` for callers without an event loop (write tasks, tests)."""

    async def read() -> Decision | None:
        async with admin_client(options) as admin:
            return await read_latest_decision_async(options, key, admin, wait_s=wait_s)

    return asyncio.run(read())


class Decider:
    """The driver's fenced writer of one key's decisions (an async context manager)."""

    def __init__(self, options: SinkOptions, key: str, partitions: int) -> None:
        self.options = options
        self.key = key
        self.partition = partition_for(key, partitions)
        self._producer = AIOProducer(options.producer_settings(**{
            "transactional.id": decider_transactional_id(options, key),
            "transaction.timeout.ms": DECIDER_TRANSACTION_TIMEOUT_MS,
            "client.id": f"{options.client_id}-decider",
        }))

    async def __aenter__(self) -> Self:
        """Fence every older decider of this key: its open transaction is aborted."""
        await self._producer.start()
        try:
            await self._producer.init_transactions()
        except BaseException:
            await self._producer.close(0)
            raise
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self._producer.close()

    async def record(self, decision: Decision) -> None:
        """Write ``decision`` and commit it; when this returns the batch is decided. If it
        raises, the outcome is unknown until the next decider fences this one."""
        key, value = decision.encode()
        p = self._producer
        p.begin_transaction()
        await p.send(self.options.decisions_topic, value, key, partition=self.partition)
        await p.commit_transaction()

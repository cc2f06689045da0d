"""Exactly-once writes as a two-phase commit: write tasks prepare, the driver decides.

What it owns: the sink's transactional ids; a write task's side (``prepare_task``: write
the task's rows in one KIP-939 transaction and only *prepare* it); the driver's side
(``finish_batch`` for Spark's ``commit``, ``abort_batch`` for its ``abort``, ``recover``
for an abandoned query); and the one rule that ends transactions (``_settle``): an open
transaction is committed if and only if it is the one a recorded decision names, and
aborted otherwise.

Transactional ids are ``<prefix><key>.<run>.<partition>.<attempt>``: key is the query id
(stable across restarts), run is Spark's run id (new at each start of the query),
partition and attempt are the task's. So

- two attempts of one partition (a retry, a speculative copy) never share an id and never
  fence each other; only the attempt whose message reaches ``commit`` is committed, the
  driver aborts the others;
- a task never ends a transaction it finds open under its own id (that can only be a
  zombie's of this run, or garbage the next commit removes): it fails, and Spark retries
  it under the next attempt number;
- after a restart, the old run's transactions keep their ids: nothing of the new run
  touches them until the driver has settled the replayed batch against its decision.

The ids are bounded per run by partitions times attempts (``spark.task.maxFailures``, plus
speculative copies); each restart starts a new set, and the broker expires ids unused for
``transactional.id.expiration.ms``.

Since the broker never times out a two-phase transaction, the driver also collects
garbage: at every commit and abort it lists (ListTransactions, filtered by this key's id
pattern) the open transactions of the query and settles each against the decision.

What it must never do: commit a transaction no decision names, or abort one a decision
names; assume that driver and executors share anything but the brokers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pyspark.sql.datasource import WriterCommitMessage

from eoslog.client.admin import AIOAdmin
from eoslog.client.errors import KafkaError, KafkaProtocolError, UnsupportedVersionError
from eoslog.client.producer import AIOProducer, Producer
from eoslog.client.types import PreparedTxnState
from eoslog.faults import pause_until_released
from eoslog.spark.decisions import (
    Decider,
    Decision,
    admin_client,
    ensure_decisions_topic,
    read_latest_decision,
    read_latest_decision_async,
)
from eoslog.spark.sink_options import SinkOptions

log = logging.getLogger(__name__)

# Producers the driver opens at once to complete or abort transactions.
DRIVER_CONCURRENCY = 16
COMMITTED, ABORTED, NOTHING_OPEN = "committed", "aborted", "nothing open"
MARKER_WAIT_S = 30.0


class LingeringTransactionError(RuntimeError):
    """A write task found a transaction open under its own transactional id."""


class PreparedTransactionLostError(RuntimeError):
    """A task's prepared transaction is no longer open as its commit message says; the batch
    cannot be committed (it was decided nothing, so a retry or a replay writes it again)."""


class TwoPhaseCommitUnsupportedError(RuntimeError):
    """The broker does not offer KIP-939 two-phase commit as the exactly-once sink needs it."""


@contextlib.contextmanager
def two_phase_commit_required(options: SinkOptions) -> Iterator[None]:
    """Around InitProducerId with keepPreparedTxn: a broker without it answers UNSUPPORTED_VERSION
    (no InitProducerId v6 advertised, or v6 without keepPreparedTxn, as Apache Kafka 4.4 with
    unstable.api.versions.enable does); say so in one error instead of a protocol code."""
    try:
        yield
    except KafkaProtocolError as e:
        # The broker's UnsupportedVersionError, or the client finding the version not advertised.
        if e.error_code != UnsupportedVersionError.code:
            raise
        raise TwoPhaseCommitUnsupportedError(
            f"the exactly-once sink needs KIP-939 two-phase commit (InitProducerId v6 with keepPreparedTxn) "
            f"and the broker at {options.bootstrap_servers} does not offer it ({e}). eoslog brokers do, with "
            "transaction.two.phase.commit.enable=true; Apache Kafka up to 4.4 does not (docs/spark.md). "
            "Use an eoslog broker, or option eoslog.sink.mode=at-least-once") from None


class InconsistentCommitError(RuntimeError):
    """The commit messages contradict the decisions topic (e.g. a task saw a decision that
    is no longer there)."""


@dataclass(frozen=True)
class TaskIdentity:
    """Who a write task is. ``key`` is the query id (or ``batch-<uuid>``), ``run_id`` Spark's
    run id; ``replayable`` batches (streaming) first look for a decision of their batch."""

    key: str
    run_id: str
    batch_id: int
    partition: int
    attempt: int
    replayable: bool = True


def transactional_id(options: SinkOptions, task: TaskIdentity) -> str:
    return f"{options.transactional_id_prefix}{task.key}.{task.run_id}.{task.partition}.{task.attempt}"


def transactional_id_pattern(options: SinkOptions, key: str | None = None) -> str:
    """A regular expression (full match) for the sink's task transactional ids: those of
    ``key``, or of every key (``recover`` without a key)."""
    head = re.escape(options.transactional_id_prefix) + (re.escape(key) if key is not None else r"[^.]+")
    return head + r"\.[^.]+\.\d+\.\d+"


def key_of_transactional_id(options: SinkOptions, tid: str) -> str:
    return tid[len(options.transactional_id_prefix):].rsplit(".", 3)[0]


@dataclass(frozen=True)
class TaskCommitMessage(WriterCommitMessage):
    """What a write task hands the driver (pickled): enough to finish or undo its part."""

    key: str
    run_id: str
    batch_id: int
    partition: int
    attempt: int
    records: int
    transactional_id: str | None = None  # None: at-least-once, or a replayed task that wrote nothing
    prepared: str = ""  # PreparedTxnState.to_string() of the prepared transaction
    decided_batch: int | None = None  # a replayed task found this decision (>= its batch) and wrote nothing

    @property
    def prepared_state(self) -> PreparedTxnState:
        return PreparedTxnState.from_string(self.prepared)


@dataclass
class Outcome:
    """What a driver call did (for logs and tests)."""

    decided_now: bool = False
    decision: Decision | None = None
    settled: dict[str, str] = field(default_factory=dict)  # transactional id → COMMITTED / ABORTED / NOTHING_OPEN

    def count(self, what: str) -> int:
        return sum(1 for v in self.settled.values() if v == what)


# -- the write task's side -----------------------------------------------------------------------

class Rows(Protocol):
    """A write task's input, as the task sends it."""

    def is_empty(self) -> bool:
        """True if there is no row at all (may read ahead; nothing read is lost)."""
        ...

    def send_all(self, producer: Producer) -> int:
        """Send every row; how many."""
        ...

    def drain(self) -> None:
        """Read the input to its end without sending (a task that writes nothing)."""
        ...


def _task_producer_settings(options: SinkOptions, task: TaskIdentity, tid: str | None) -> dict[str, object]:
    client_id = f"{options.client_id}-{task.partition}-{task.attempt}"
    if tid is None:
        return options.producer_settings(**{"client.id": client_id})
    return options.producer_settings(**{
        "transactional.id": tid, "transaction.two.phase.commit.enable": True, "client.id": client_id,
    })


# The first batch each run (query key, run id) was seen to write in this process. Only the
# first batch a run executes can be one an earlier run decided (Spark replays at most the
# last batch of the previous run, and starts a batch only once the one before is committed),
# so a Python worker that has seen an earlier batch of the run skips the decision lookup.
_first_batch_of_run: dict[tuple[str, str], int] = {}


def _may_be_replayed(task: TaskIdentity) -> bool:
    first = _first_batch_of_run.get((task.key, task.run_id))
    return first is None or task.batch_id <= first


def prepare_task(options: SinkOptions, task: TaskIdentity, rows: Rows) -> TaskCommitMessage:
    """Write the task's rows in one transaction and prepare it — or, in a replayed batch
    that is already decided, write nothing. A task without rows starts no transaction."""
    if task.replayable and _may_be_replayed(task):
        decision = read_latest_decision(options, task.key)
        run = (task.key, task.run_id)
        _first_batch_of_run[run] = min(_first_batch_of_run.get(run, task.batch_id), task.batch_id)
        if decision is not None and decision.batch_id >= task.batch_id:
            rows.drain()
            log.info("batch %d of %s is already decided (latest decision: batch %d): task %d writes nothing",
                     task.batch_id, task.key, decision.batch_id, task.partition)
            return TaskCommitMessage(task.key, task.run_id, task.batch_id, task.partition, task.attempt, 0,
                                     decided_batch=decision.batch_id)
    if rows.is_empty():
        return TaskCommitMessage(task.key, task.run_id, task.batch_id, task.partition, task.attempt, 0)
    tid = transactional_id(options, task)
    producer = Producer(_task_producer_settings(options, task, tid))
    try:
        with two_phase_commit_required(options):
            producer.init_transactions(keep_prepared_txn=True)
        lingering = producer.prepared_transaction_state()
        if lingering is not None:
            raise LingeringTransactionError(
                f"transactional id {tid} has an open transaction ({lingering.to_string()}) this task did not "
                "start; only the driver may end it, so this attempt fails and Spark retries the task under "
                "another transactional id"
            )
        producer.begin_transaction()
        records = rows.send_all(producer)
        state = producer.prepare_transaction()
    finally:
        # A prepared transaction survives close(); one still in progress is aborted by it.
        producer.close()
    return TaskCommitMessage(task.key, task.run_id, task.batch_id, task.partition, task.attempt, records,
                             transactional_id=tid, prepared=state.to_string())


def write_task_at_least_once(options: SinkOptions, task: TaskIdentity, rows: Rows) -> TaskCommitMessage:
    """Write the task's rows with an idempotent producer, no transaction: a retried task or
    a replayed batch writes its rows again."""
    records = 0
    if not rows.is_empty():
        producer = Producer(_task_producer_settings(options, task, None))
        try:
            records = rows.send_all(producer)
            producer.flush()
            failed = int(producer.metrics()["record-error-total"])
            if failed:
                raise KafkaError(f"{failed} of {records} records of task {task.partition} could not be delivered")
        finally:
            producer.close()
    return TaskCommitMessage(task.key, task.run_id, task.batch_id, task.partition, task.attempt, records)


# -- the driver's side ----------------------------------------------------------------------------


def _key_of(messages: Sequence[TaskCommitMessage]) -> str:
    keys = {m.key for m in messages}
    if len(keys) != 1:
        raise InconsistentCommitError(f"commit messages of several queries: {sorted(keys)}")
    return keys.pop()


async def _open_two_phase(options: SinkOptions, tid: str) -> AIOProducer:
    """A producer of ``tid`` that keeps (does not abort) the transaction open under it."""
    p = AIOProducer(options.producer_settings(**{
        "transactional.id": tid, "transaction.two.phase.commit.enable": True,
        "client.id": f"{options.client_id}-driver",
    }))
    await p.start()
    try:
        with two_phase_commit_required(options):
            await p.init_transactions(keep_prepared_txn=True)
    except BaseException:
        await p.close(0)
        raise
    return p


async def _settle_open(p: AIOProducer, decided: PreparedTxnState | None) -> str:
    """The rule: commit the open transaction iff it is the decided one; abort any other."""
    open_state = p.prepared_transaction_state()
    if open_state is None:
        return NOTHING_OPEN
    if decided is not None and open_state == decided:
        await p.complete_transaction(decided)
        return COMMITTED
    await p.abort_transaction()
    return ABORTED


async def _settle(options: SinkOptions, tid: str, decided: PreparedTxnState | None) -> str:
    p = await _open_two_phase(options, tid)
    try:
        return await _settle_open(p, decided)
    finally:
        await p.close()


async def _settle_all(options: SinkOptions, tids: Collection[str],
                      decided: Mapping[str, PreparedTxnState]) -> dict[str, str]:
    """Settle every id in ``tids`` (at most DRIVER_CONCURRENCY at once); the first error is
    raised once all have finished."""
    gate = asyncio.Semaphore(DRIVER_CONCURRENCY)

    async def one(tid: str) -> str:
        async with gate:
            return await _settle(options, tid, decided.get(tid))

    ordered = sorted(tids)
    results = await asyncio.gather(*(one(t) for t in ordered), return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return dict(zip(ordered, (str(r) for r in results), strict=True))


async def await_markers(admin: AIOAdmin, tids: Collection[str], timeout_s: float = MARKER_WAIT_S) -> bool:
    """Wait until the coordinator has written the markers of every transaction just ended
    under ``tids`` (no longer PrepareCommit/PrepareAbort): EndTxn is answered as soon as the
    decision to commit is in the transaction log, the markers follow. So when ``commit``
    returns, the whole batch is visible — before Spark starts the next one. False (and a
    warning) if that takes longer than ``timeout_s``; exactly-once does not depend on it."""
    if not tids:
        return True
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            described = await admin.describe_transactions(sorted(tids), timeout_ms=int(timeout_s * 1000))
            pending = sorted(t for t, d in described.items() if d.state in ("PrepareCommit", "PrepareAbort"))
            if not pending:
                return True
            if time.monotonic() > deadline:
                log.warning("markers of %d transactions still not written after %.0f s, e.g. %s",
                            len(pending), timeout_s, pending[0])
                return False
            await asyncio.sleep(0.005)
    except KafkaError as e:
        log.warning("cannot tell whether the markers of %d transactions are written: %s", len(tids), e)
        return False


async def list_open_transactions(options: SinkOptions, key: str | None, admin: AIOAdmin) -> list[str]:
    """Transactional ids of the sink (of ``key``, or all) with a transaction open."""
    listed = await admin.list_transactions(
        states=["Ongoing"], transactional_id_pattern=transactional_id_pattern(options, key))
    return sorted({t.transactional_id for t in listed})


async def _open_all(options: SinkOptions, tids: Sequence[str]) -> dict[str, AIOProducer]:
    """A keeping producer per id (at most DRIVER_CONCURRENCY opening at once); if one cannot
    be opened, the others are closed and the first error is raised."""
    held: dict[str, AIOProducer] = {}
    gate = asyncio.Semaphore(DRIVER_CONCURRENCY)

    async def hold(tid: str) -> None:
        async with gate:
            held[tid] = await _open_two_phase(options, tid)

    results = await asyncio.gather(*(hold(tid) for tid in tids), return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            await asyncio.gather(*(p.close() for p in held.values()), return_exceptions=True)
            raise r
    return held


async def _close_opened(opening: asyncio.Future[dict[str, AIOProducer]]) -> None:
    """Close what ``_open_all`` opened (nothing if it failed: it closed its own)."""
    with contextlib.suppress(Exception):
        held = await opening
        await asyncio.gather(*(p.close() for p in held.values()), return_exceptions=True)


async def _decide(options: SinkOptions, decider: Decider, key: str, batch_id: int,
                  messages: Sequence[TaskCommitMessage], held: Mapping[str, AIOProducer]
                  ) -> tuple[Decision, dict[str, str]]:
    """Check that every prepared transaction is still open as its message says (``held``:
    the producers opened on them), record the decision, then commit them; (the decision,
    what was settled)."""
    chosen = [(m.transactional_id, m.prepared_state) for m in messages if m.transactional_id is not None]
    for tid, state in chosen:
        found = held[tid].prepared_transaction_state()
        if found != state:
            raise PreparedTransactionLostError(
                f"batch {batch_id} of {key}: the transaction of {tid} is "
                f"{'gone' if found is None else found.to_string()}, not {state.to_string()} as its task "
                "prepared it; nothing of the batch is committed")
    run_id = messages[0].run_id if messages else ""
    decision = Decision(key, batch_id, run_id, tuple(chosen), int(time.time() * 1000))
    faults = options.faults
    if batch_id in faults.raise_before_decision:
        raise RuntimeError(f"test fault: commit of batch {batch_id} fails before its decision")
    for pause_batch, path in faults.pause_before_decision:
        if pause_batch == batch_id:
            pause_until_released(path)
    await decider.record(decision)
    log.info("batch %d of %s decided: %d transactions", batch_id, key, len(chosen))
    for pause_batch, path in faults.pause_after_decision:
        if pause_batch == batch_id:
            pause_until_released(path)
    if batch_id in faults.raise_after_decision:
        raise RuntimeError(f"test fault: commit of batch {batch_id} fails after its decision")
    settled: dict[str, str] = {}
    gate = asyncio.Semaphore(DRIVER_CONCURRENCY)

    async def complete(tid: str, state: PreparedTxnState) -> None:
        async with gate:
            try:
                settled[tid] = await _settle_open(held[tid], state)
            except KafkaError as e:
                # e.g. fenced by a zombie task's init: settle again with a fresh producer.
                log.warning("completing %s failed (%s); settling it again", tid, e)
                settled[tid] = await _settle(options, tid, state)

    results = await asyncio.gather(*(complete(tid, s) for tid, s in chosen), return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return decision, settled


async def finish_batch_async(options: SinkOptions, batch_id: int,
                             messages: Sequence[TaskCommitMessage | None]) -> Outcome:
    """Spark's ``commit``: decide the batch (unless it is decided already), commit its
    transactions, abort every other open transaction of the query. Idempotent."""
    msgs = [m for m in messages if m is not None]
    if not msgs:
        return Outcome()
    key = _key_of(msgs)
    fresh = [m.transactional_id for m in msgs if m.transactional_id is not None]
    outcome = Outcome()
    async with admin_client(options) as admin:
        partitions = await ensure_decisions_topic(options, admin)
        # Opening the prepared transactions and listing the query's open ones need neither
        # the fence nor the decision: they run meanwhile.
        opening = asyncio.ensure_future(_open_all(options, fresh))
        listing = asyncio.ensure_future(list_open_transactions(options, key, admin))
        try:
            async with Decider(options, key, partitions) as decider:
                decision = await read_latest_decision_async(options, key, admin)
                if decision is None or decision.batch_id < batch_id:
                    if any(m.decided_batch is not None for m in msgs):
                        raise InconsistentCommitError(
                            f"batch {batch_id} of {key}: tasks found a decision of batch "
                            f"{max(m.decided_batch or 0 for m in msgs)} that the driver no longer finds")
                    decision, outcome.settled = await _decide(options, decider, key, batch_id, msgs,
                                                              await opening)
                    outcome.decided_now = True
                elif decision.batch_id > batch_id:
                    log.warning("commit of batch %d of %s: the sink has already decided batch %d (is the "
                                "checkpoint older than the output?); nothing of batch %d is written", batch_id, key,
                                decision.batch_id, batch_id)
                outcome.decision = decision
                # Roll the decision forward (a replay or a second commit) and abort everything else.
                rest = set(await listing)
                rest.update(t for t, _ in decision.transactions)
                rest.update(fresh)
                rest.difference_update(outcome.settled)
                await _close_opened(opening)  # before other producers open the same ids
                outcome.settled.update(await _settle_all(options, rest, decision.states()))
        finally:
            listing.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await listing
            await _close_opened(opening)
        await await_markers(admin, [t for t, what in outcome.settled.items() if what != NOTHING_OPEN])
    return outcome


async def abort_batch_async(options: SinkOptions, batch_id: int, messages: Sequence[TaskCommitMessage | None],
                            key: str | None = None) -> Outcome:
    """Spark's ``abort``: never undoes a decided batch — it finishes it — and otherwise
    aborts every open transaction of the query (the batch will be written again). ``key``
    when the caller knows it (a batch write); else it comes from the messages."""
    msgs = [m for m in messages if m is not None]
    if key is None and not msgs:
        # Which query is unknown; its next commit or a replay cleans up.
        return Outcome()
    return await _resolve(options, key if key is not None else _key_of(msgs), batch_id,
                          [m.transactional_id for m in msgs if m.transactional_id is not None])


async def _resolve(options: SinkOptions, key: str, batch_id: int | None, extra: Iterable[str]) -> Outcome:
    """Fence the decider, then settle every open transaction of ``key`` against its latest
    decision if that decision is of ``batch_id`` or later (None: any), else abort them all."""
    async with admin_client(options) as admin:
        partitions = await ensure_decisions_topic(options, admin)
        async with Decider(options, key, partitions):
            decision = await read_latest_decision_async(options, key, admin)
            rolls_forward = decision is not None and (batch_id is None or decision.batch_id >= batch_id)
            tids = set(await list_open_transactions(options, key, admin))
            tids.update(extra)
            decided: dict[str, PreparedTxnState] = {}
            if decision is not None and rolls_forward:
                tids.update(t for t, _ in decision.transactions)
                decided = decision.states()
            settled = await _settle_all(options, tids, decided)
        await await_markers(admin, [t for t, what in settled.items() if what != NOTHING_OPEN])
    return Outcome(decision=decision if rolls_forward else None, settled=settled)


async def recover_async(options: SinkOptions, key: str | None = None) -> dict[str, Outcome]:
    """Settle the open transactions of a query that will not run again (or of a batch write
    whose driver died): each key's latest decision is finished, everything else aborted.
    Without ``key``, every key with open sink transactions. Never run it for a query that
    is running: it would abort the batch in flight (whose commit then fails)."""
    if key is not None:
        keys = {key}
    else:
        async with admin_client(options) as admin:
            keys = {key_of_transactional_id(options, t) for t in await list_open_transactions(options, None, admin)}
    return {k: await _resolve(options, k, None, ()) for k in sorted(keys)}


def finish_batch(options: SinkOptions, batch_id: int, messages: Sequence[TaskCommitMessage | None]) -> Outcome:
    return asyncio.run(finish_batch_async(options, batch_id, messages))


def abort_batch(options: SinkOptions, batch_id: int, messages: Sequence[TaskCommitMessage | None],
                key: str | None = None) -> Outcome:
    return asyncio.run(abort_batch_async(options, batch_id, messages, key))


def recover(options: SinkOptions, key: str | None = None) -> dict[str, Outcome]:
    return asyncio.run(recover_async(options, key))

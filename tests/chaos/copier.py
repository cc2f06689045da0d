"""Transactional copier: the consume-transform-produce program of the copy test.

Modelled on Apache Kafka's TransactionalMessageCopier. One process copies one input
partition into the output topic, transaction by transaction: it reads a random number of
records (``--min-txn``..``--max-txn``) with a read_committed consumer, sends each to the
output topic with headers saying where it came from and whether its transaction is meant
to commit, adds the consumer's position to the transaction and commits - or, for about one
transaction in three, aborts on purpose and seeks back to the committed offset.

It handles errors the way a correct application does:

- retriable errors: the same call again;
- abortable errors (the transaction cannot commit): abort, seek back to the committed
  offset, carry on;
- fatal errors (fenced, ...): exit with ``EXIT_FATAL``; the harness starts a new instance,
  whose init_transactions fences this one and aborts its open transaction;
- anything else: exit with ``EXIT_UNEXPECTED`` - the test reports it.

The same loop drives four clients (``--client``): confluent-kafka, kafka-python, aiokafka
and eoslog.client, each behind a small adapter. The first three assign the input partition
(with a group.id for the offsets), as Kafka's copier does; eoslog's copiers are members of
one consumer group (subscribe, static membership, range assignment), commit with the
member's group_metadata (KIP-447), and abort the transaction when a rebalance takes the
partition away. Progress goes to stdout as one JSON object per line
(``ev``: started, txn, error, note, done) for the harness to follow; nothing else is
printed there. Run ``python copier.py --help`` for the options.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, NoReturn, Protocol, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, when run as a program
from support.kafka_python_drops import DropWatch, request_dropped

CONFLUENT = "confluent"
CONFLUENT_848 = "confluent-848"  # librdkafka's consumer in a KIP-848 consumer group (group.protocol=consumer)
KAFKA_PYTHON = "kafka-python"
AIOKAFKA = "aiokafka"
EOSLOG = "eoslog"
CLIENTS = (CONFLUENT, CONFLUENT_848, KAFKA_PYTHON, AIOKAFKA, EOSLOG)

EXIT_DONE = 0
EXIT_FATAL = 3
EXIT_UNEXPECTED = 4
EXIT_STUCK = 5  # one client call did not return within --stuck-after-s, or its request was dropped

# Header names written on every copied record (read by eos_verify).
H_INTENT = "txn-intent"  # b"commit" | b"abort": what the copier meant to do with the transaction
H_TXN = "txn"  # "<transactional id>/<instance>/<sequence>": which transaction wrote it
H_SRC = "src"  # "<input partition>/<input offset>"

# Retriable errors are retried this often per call before the copier gives up; the
# harness restarts it (a hang guard: a broker restart takes seconds, not minutes).
MAX_RETRIES = 60
CALL_TIMEOUT_S = 30.0

RETRIABLE, ABORTABLE, FATAL, OTHER = "retriable", "abortable", "fatal", "other"
# Errors Kafka's clients retry that librdkafka reports without its retriable flag from some calls:
# a coordinator moving (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS),
# librdkafka's _TIMED_OUT and _TIMED_OUT_QUEUE (committed()'s OffsetFetch queued for a killed group
# coordinator; Java's consumer throws TimeoutException there, a RetriableException), and a
# partition's leader moving (query_watermark_offsets answered by a former leader after a kill -9:
# NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, and
# librdkafka's own _UNKNOWN_PARTITION, which query_watermark_offsets reported right after a
# Metadata answer naming both partitions, the one queried leaderless: its leader just killed) —
# Kafka's consumer retries these in endOffsets.
_RETRIABLE_UNFLAGGED = frozenset({16, 15, 14, -185, -166, 6, 5, 74, 75, -190})

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class InputRecord:
    offset: int
    key: bytes | None
    value: bytes | None


class Reporter:
    """One JSON object per line on stdout, flushed at once: the harness may kill us any time.

    A watchdog thread reports where the copier is (``waiting``: the call it is in, the
    transaction, records sent so far) whenever nothing was reported for ``quiet_s``, so
    a stalled run shows what it stalled on. A single client call that has not returned
    after ``stuck_s`` ends the process with ``EXIT_STUCK``: the application's last resort
    against a client that wedged (kafka-python's send_offsets_to_transaction and commit
    have no timeout at all). ``dropped``, when set, says whether the client dropped the
    request its call waits for: lasting DROPPED_FOR_S, that call is as stuck and ends the
    same way, without waiting out ``stuck_s`` (kafka_python_drops)."""

    def __init__(self, transactional_id: str, instance: int, stuck_s: float, quiet_s: float = 10.0) -> None:
        self.base = {"tid": transactional_id, "instance": instance}
        self.where: dict[str, Any] = {"stage": "starting"}
        self.quiet_s, self.stuck_s = quiet_s, stuck_s
        self.call_started: float | None = None  # monotonic start of the client call in progress
        self.dropped: Callable[[], bool] | None = None
        self._last = time.monotonic()
        self._lock = threading.Lock()
        threading.Thread(target=self._watch, name="watchdog", daemon=True).start()

    def emit(self, ev: str, **fields: Any) -> None:
        line = json.dumps({"ev": ev, **self.base, "t": round(time.time(), 3), **fields})
        with self._lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
            self._last = time.monotonic()

    def _watch(self) -> None:
        drops = DropWatch()
        while True:
            time.sleep(0.2)
            now = time.monotonic()
            started = self.call_started
            if started is not None and now - started > self.stuck_s:
                self.emit("exit", code=EXIT_STUCK, kind="stuck", seconds=round(now - started, 1), **self.where)
                os._exit(EXIT_STUCK)
            if drops.lasting(started is not None and self.dropped is not None and self.dropped()):
                self.emit("exit", code=EXIT_STUCK, kind="dropped request", seconds=round(now - (started or now), 1),
                          **self.where)
                os._exit(EXIT_STUCK)
            if now - self._last > self.quiet_s:
                self.emit("waiting", **self.where)


class CopierClient(Protocol):
    """What the copy loop needs of a client library; each method may raise its native errors."""

    def classify(self, exc: BaseException) -> str: ...
    def init_transactions(self) -> None: ...
    def committed(self) -> int | None: ...
    def stable_committed_reads(self) -> bool: ...
    def end_offset(self) -> int: ...
    def seek(self, offset: int) -> None: ...
    def begin_transaction(self) -> None: ...
    def poll(self, max_records: int) -> list[InputRecord]: ...
    def send(self, record: InputRecord, headers: list[tuple[str, bytes]]) -> None: ...
    def send_offsets_to_transaction(self, position: int) -> None: ...
    def commit_transaction(self) -> None: ...
    def abort_transaction(self) -> None: ...
    def close(self) -> None: ...


class TransactionFailed(Exception):
    """The current transaction must be aborted (an abortable error, or an abort on purpose)."""


def fail(rep: Reporter, code: int, stage: str, exc: BaseException | None, kind: str) -> NoReturn:
    rep.emit("exit", code=code, stage=stage, kind=kind, error=repr(exc))
    os._exit(code)  # no clean close: like a crash, and no client thread can hold us up


def call(client: CopierClient, rep: Reporter, stage: str, fn: Callable[[], T]) -> T:
    """``fn()`` with retries on retriable errors. An abortable error becomes
    ``TransactionFailed``; a fatal or unknown one ends the process."""
    rep.where["stage"] = stage
    for attempt in range(MAX_RETRIES):
        rep.call_started = time.monotonic()
        try:
            return fn()
        except Exception as exc:
            kind = client.classify(exc)
            rep.emit("error", stage=stage, kind=kind, attempt=attempt, error=repr(exc))
            if kind == RETRIABLE:
                time.sleep(min(0.1 * (attempt + 1), 1.0))
                continue
            if kind == ABORTABLE:
                raise TransactionFailed(f"{stage}: {exc!r}") from exc
            fail(rep, EXIT_FATAL if kind == FATAL else EXIT_UNEXPECTED, stage, exc, kind)
        finally:
            rep.call_started = None
    fail(rep, EXIT_UNEXPECTED, stage, None, f"still retriable after {MAX_RETRIES} attempts")


def wait_at_gate(client: CopierClient, rep: Reporter, gate_dir: Path, transactional_id: str) -> None:
    """While ``gate_dir/gate`` exists: the records sent so far acknowledged (a client with
    ``flush_sends``; the others skip the gate), ``at-gate-<id>`` there, wait."""
    gate, flush = gate_dir / "gate", getattr(client, "flush_sends", None)
    if flush is None or not gate.exists():
        return
    call(client, rep, "flush_sends", flush)
    at = gate_dir / f"at-gate-{transactional_id}"
    at.touch()
    rep.emit("gate", **rep.where)
    while gate.exists():
        time.sleep(0.01)
    at.unlink()


def copy(client: CopierClient, args: argparse.Namespace, rep: Reporter) -> NoReturn:
    rng = random.Random(f"{args.seed}/{args.transactional_id}/{args.instance}")

    def outside_txn(stage: str, fn: Callable[[], T]) -> T:
        try:
            return call(client, rep, stage, fn)
        except TransactionFailed as exc:  # no transaction to abort: nothing sensible left to do
            fail(rep, EXIT_UNEXPECTED, stage, exc, ABORTABLE)

    outside_txn("init_transactions", client.init_transactions)
    committed = outside_txn("committed", client.committed) or 0
    end = outside_txn("end_offset", client.end_offset)
    client.seek(committed)
    rep.emit("started", position=committed, end=end, pid=os.getpid())

    position = committed
    seq = 0
    while committed < end:
        seq += 1
        size = rng.randint(args.min_txn, args.max_txn)
        intent = "abort" if rng.random() < args.abort_probability else "commit"
        txn = f"{args.transactional_id}/{args.instance}/{seq}"
        outside_txn("begin_transaction", client.begin_transaction)
        count = 0
        rep.where.update(txn=txn, position=position)
        try:
            while count < size and position < end:
                for rec in call(client, rep, "poll", partial(client.poll, size - count)):
                    headers = [(H_INTENT, intent.encode()), (H_TXN, txn.encode()),
                               (H_SRC, f"{args.input_partition}/{rec.offset}".encode())]
                    call(client, rep, "send", partial(client.send, rec, headers))
                    count += 1
                    rep.where["sent"] = count
                    position = rec.offset + 1
                    if args.gate_dir is not None and intent == "commit" and count == size // 2:
                        wait_at_gate(client, rep, args.gate_dir, args.transactional_id)
            committing = time.monotonic()  # the commit's latency: offsets, flush and EndTxn
            call(client, rep, "send_offsets_to_transaction",
                 partial(client.send_offsets_to_transaction, position))
            if intent == "abort":
                raise TransactionFailed("aborted on purpose")
            call(client, rep, "commit_transaction", client.commit_transaction)
        except TransactionFailed as exc:
            try:
                call(client, rep, "abort_transaction", client.abort_transaction)
            except TransactionFailed as again:
                fail(rep, EXIT_FATAL, "abort_transaction", again, ABORTABLE)
            # Back to the committed offset. A client that can read it stably (require_stable)
            # asks the broker - which must agree with what we last committed.
            if client.stable_committed_reads():
                on_broker = outside_txn("committed", client.committed) or 0
                if on_broker != committed:
                    rep.emit("note", what="committed offset after abort differs from the last commit",
                             broker=on_broker, expected=committed, txn=txn)
                    committed = on_broker
            client.seek(committed)
            rep.emit("txn", txn=txn, intent=intent, result="aborted", records=count,
                     reached=position, position=committed, reason=str(exc))
            position = committed
            continue
        committed = position
        rep.emit("txn", txn=txn, intent=intent, result="committed", records=count, position=committed,
                 commit_ms=round((time.monotonic() - committing) * 1000, 2))
    rep.emit("done", position=committed, transactions=seq)
    client.close()
    os._exit(EXIT_DONE)


# -- confluent-kafka (librdkafka) --------------------------------------------------------


def producer_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The transactional producer's settings, by Kafka's names (librdkafka's and eoslog's)."""
    return {
        "bootstrap.servers": args.bootstrap, "transactional.id": args.transactional_id,
        "transaction.timeout.ms": args.transaction_timeout_ms, "acks": "all",
        # small batches and several in flight: a transaction spans many Produce requests
        "batch.size": args.batch_size, "linger.ms": 5, "max.in.flight.requests.per.connection": 5,
        "retry.backoff.ms": args.retry_backoff_ms, "reconnect.backoff.max.ms": 1000,
    }


def consumer_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The read_committed consumer's settings, by Kafka's names."""
    return {
        "bootstrap.servers": args.bootstrap, "group.id": args.group_id,
        "isolation.level": "read_committed", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "reconnect.backoff.max.ms": 1000,
    }


class TimedTransactionCalls:
    """commit/abort with CALL_TIMEOUT_S, for producers whose calls take a timeout in seconds."""

    producer: Any

    def commit_transaction(self) -> None:
        self.producer.commit_transaction(CALL_TIMEOUT_S)

    def abort_transaction(self) -> None:
        self.producer.abort_transaction(CALL_TIMEOUT_S)


class ConfluentCopier(TimedTransactionCalls):
    def __init__(self, args: argparse.Namespace) -> None:
        from confluent_kafka import Consumer, Producer, TopicPartition

        self.tp = TopicPartition(args.input_topic, args.input_partition)
        self.output_topic = args.output_topic
        # With one broker, every kill -9 takes "all brokers" down, which makes librdkafka
        # (2.10+) re-bootstrap and decommission the broker it caches as group coordinator;
        # send_offsets_to_transaction then hangs past its timeout (librdkafka issue #5511).
        # A fixed single-broker address gains nothing from re-bootstrapping.
        no_rebootstrap = {"metadata.recovery.strategy": "none"}
        # In a cluster the killed group coordinator is left out of Metadata until it registers
        # again (Kafka's too), and librdkafka decommissions it but keeps it cached: the lookup
        # waits until another connection goes up or down (#5511). Closing idle connections
        # makes that happen within seconds, as an application working around #5511 would.
        churn = {"connections.max.idle.ms": 5000}
        debug = {"debug": args.debug} if args.debug else {}
        self.producer = Producer({**no_rebootstrap, **churn, **producer_settings(args), **debug})
        self.consumer = Consumer({**no_rebootstrap, **consumer_settings(args), **debug})
        self.delivery_errors = 0

    def classify(self, exc: BaseException) -> str:
        from confluent_kafka import KafkaError, KafkaException

        if isinstance(exc, KafkaException) and exc.args:
            err = exc.args[0]
            # produce() after a fatal error raises _FATAL without the fatal flag
            if err.fatal() or err.code() == KafkaError._FATAL:
                return FATAL
            if err.txn_requires_abort():
                return ABORTABLE
            if err.retriable() or err.code() in _RETRIABLE_UNFLAGGED:
                return RETRIABLE
        return OTHER

    def init_transactions(self) -> None:
        self.producer.init_transactions(CALL_TIMEOUT_S)

    def committed(self) -> int | None:
        from confluent_kafka import TopicPartition

        (tp,) = self.consumer.committed([TopicPartition(self.tp.topic, self.tp.partition)],
                                        timeout=CALL_TIMEOUT_S)
        if tp.error is not None:
            raise RuntimeError(f"committed offset of {tp.topic}-{tp.partition}: {tp.error}")
        return int(tp.offset) if tp.offset >= 0 else None

    def stable_committed_reads(self) -> bool:
        return True  # librdkafka sets require_stable with read_committed (KIP-447)

    def end_offset(self) -> int:
        _, high = self.consumer.get_watermark_offsets(self.tp, timeout=CALL_TIMEOUT_S)
        return int(high)

    def seek(self, offset: int) -> None:
        from confluent_kafka import TopicPartition

        # (Re)assigning at an offset is a seek that works before the first fetch as well.
        self.consumer.assign([TopicPartition(self.tp.topic, self.tp.partition, offset)])

    def begin_transaction(self) -> None:
        self.producer.begin_transaction()

    def poll(self, max_records: int) -> list[InputRecord]:
        from confluent_kafka import KafkaException

        out = []
        for m in self.consumer.consume(min(max_records, 500), 0.5):
            if m.error() is not None:
                raise KafkaException(m.error())
            out.append(InputRecord(int(m.offset() or 0), m.key(), m.value()))
        self.producer.poll(0)
        return out

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.delivery_errors += 1  # the commit fails with an abortable error

    def send(self, record: InputRecord, headers: list[tuple[str, bytes]]) -> None:
        while True:
            try:
                self.producer.produce(self.output_topic, record.value, record.key, headers=list(headers),
                                      on_delivery=self._on_delivery)
                return
            except BufferError:
                self.producer.poll(0.05)

    def send_offsets_to_transaction(self, position: int) -> None:
        from confluent_kafka import TopicPartition

        positions = self.consumer.position([TopicPartition(self.tp.topic, self.tp.partition)])
        if positions[0].offset != position:  # the copy loop and the consumer must agree
            raise RuntimeError(f"consumer position {positions[0].offset} != copied up to {position}")
        self.producer.send_offsets_to_transaction(positions, self.consumer.consumer_group_metadata(),
                                                  CALL_TIMEOUT_S)

    def flush_sends(self) -> None:
        """Until every record sent so far is acknowledged (or failed: the commit then fails)."""
        self.producer.flush(CALL_TIMEOUT_S)

    def close(self) -> None:
        self.consumer.close()
        self.producer.flush(CALL_TIMEOUT_S)


class ConsumerProtocolCopier(ConfluentCopier):
    """librdkafka's consumer as a member of a KIP-848 consumer group (group.protocol=consumer): the
    copiers subscribe as static members (group.instance.id = their transactional id) with the
    broker's range assignor, which orders static members by instance id, so copier-<p> is given
    partition p once all have joined. A member given another's partition pauses it and never commits
    it; a revocation breaks the transaction in progress. The transaction carries the member's group
    metadata — its member epoch — so a copier that lost its partition cannot commit its offset
    (STALE_MEMBER_EPOCH); a SIGKILLed one is replaced, after its session, by its restart."""

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.consumer.close()
        self.args = args
        self.consumer = self._consumer()
        self.input_topic = args.input_topic
        self.subscribed = False
        self.owned = False
        self.broken = False
        self.buffer: list[InputRecord] = []

    def _consumer(self) -> Any:
        from confluent_kafka import Consumer

        args = self.args
        return Consumer({
            "metadata.recovery.strategy": "none", **consumer_settings(args),
            "group.protocol": "consumer", "group.remote.assignor": "range",
            "group.instance.id": args.transactional_id, **({"debug": args.debug} if args.debug else {}),
        })

    def classify(self, exc: BaseException) -> str:
        if isinstance(exc, PartitionRevoked):
            return ABORTABLE
        return super().classify(exc)

    def _rejoin_after_unreleased(self) -> None:
        """A restart of a SIGKILLed copier joins while its predecessor's session still runs: the
        broker answers UNRELEASED_INSTANCE_ID, fatal to librdkafka's consumer. As an application
        of static members must, it tries again with a new consumer (the old session ends)."""
        self.consumer.close()
        time.sleep(0.5)
        self.consumer = self._consumer()
        self.consumer.subscribe([self.input_topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_revoke)

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        mine = [p for p in partitions if p.partition == self.tp.partition]
        others = [p for p in partitions if p.partition != self.tp.partition]
        consumer.incremental_assign(partitions)
        if others:
            consumer.pause(others)
        if mine:
            self.owned = True

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        consumer.incremental_unassign(partitions)
        if any(p.partition == self.tp.partition for p in partitions):
            self.owned = False
            self.broken = True
            self.buffer.clear()

    def init_transactions(self) -> None:
        super().init_transactions()
        if not self.subscribed:
            self.consumer.subscribe([self.input_topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                    on_lost=self._on_revoke)
            self.subscribed = True

    def seek(self, offset: int) -> None:
        from confluent_kafka import TopicPartition

        # Not yet assigned: the position comes from the committed offset at assignment, which is
        # ``offset`` (the copy loop seeks only to the committed offset).
        self.buffer.clear()
        self.broken = False
        if self.owned:
            self.consumer.seek(TopicPartition(self.tp.topic, self.tp.partition, offset))

    def poll(self, max_records: int) -> list[InputRecord]:
        from confluent_kafka import KafkaException

        if not self.buffer:
            for m in self.consumer.consume(500, 0.5):  # also where the group's callbacks run
                if m.error() is not None:
                    if "instance ID is still used" in m.error().str() and not self.owned:
                        self._rejoin_after_unreleased()
                        return []
                    raise KafkaException(m.error())
                if m.partition() == self.tp.partition:
                    self.buffer.append(InputRecord(int(m.offset() or 0), m.key(), m.value()))
            self.producer.poll(0)
        if self.broken:
            raise PartitionRevoked(f"{self.tp.topic}-{self.tp.partition} was revoked during the transaction")
        out, self.buffer = self.buffer[:max_records], self.buffer[max_records:]
        return out

    def send_offsets_to_transaction(self, position: int) -> None:
        from confluent_kafka import TopicPartition

        if self.broken:
            raise PartitionRevoked(f"{self.tp.topic}-{self.tp.partition} was revoked during the transaction")
        consumed = self.buffer[0].offset if self.buffer else self.consumer.position(
            [TopicPartition(self.tp.topic, self.tp.partition)])[0].offset
        if consumed != position:  # the copy loop and the consumer must agree
            raise RuntimeError(f"consumer position {consumed} != copied up to {position}")
        self.producer.send_offsets_to_transaction([TopicPartition(self.tp.topic, self.tp.partition, position)],
                                                  self.consumer.consumer_group_metadata(), CALL_TIMEOUT_S)


# -- kafka-python ------------------------------------------------------------------------


class KafkaPythonCopier:
    def __init__(self, args: argparse.Namespace) -> None:
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition

        self.tp = TopicPartition(args.input_topic, args.input_partition)
        self.output_topic = args.output_topic
        self.producer = KafkaProducer(
            bootstrap_servers=args.bootstrap, transactional_id=args.transactional_id,
            transaction_timeout_ms=args.transaction_timeout_ms, acks="all", enable_idempotence=True,
            batch_size=args.batch_size, linger_ms=5, max_in_flight_requests_per_connection=5,
            retry_backoff_ms=args.retry_backoff_ms, reconnect_backoff_max_ms=1000,
            max_block_ms=int(CALL_TIMEOUT_S * 1000),
        )
        self.consumer = KafkaConsumer(
            bootstrap_servers=args.bootstrap, group_id=args.group_id, isolation_level="read_committed",
            enable_auto_commit=False, auto_offset_reset="earliest", reconnect_backoff_max_ms=1000,
        )
        self.consumer.assign([self.tp])
        self.futures: list[Any] = []
        self.awaiting = False  # in a producer call that waits for a transactional request

    def request_dropped(self) -> bool:
        """Only within a call that waits for the coordinator: a transaction that will abort
        completes without the partitions a dropped AddPartitionsToTxn left pending."""
        return self.awaiting and request_dropped(self.producer, True)

    def _awaiting(self, fn: Callable[[], T]) -> T:
        self.awaiting = True
        try:
            return fn()
        finally:
            self.awaiting = False

    def classify(self, exc: BaseException) -> str:
        import kafka.errors as e

        fatal = (e.ProducerFencedError, e.TransactionalIdAuthorizationFailedError,
                 e.UnsupportedVersionError, e.InvalidProducerEpochError, e.IllegalStateError)
        tm = self.producer._transaction_manager
        if isinstance(exc, fatal) or (tm is not None and tm.has_fatal_error()):
            return FATAL
        if tm is not None and tm.has_abortable_error():
            return ABORTABLE
        if isinstance(exc, e.KafkaError) and exc.retriable:
            return RETRIABLE
        if isinstance(exc, e.KafkaError):
            return ABORTABLE  # kafka-python's advice: abort on any other KafkaError
        return OTHER

    def init_transactions(self) -> None:
        self._awaiting(self.producer.init_transactions)

    def committed(self) -> int | None:
        offset = self.consumer.committed(self.tp)  # require_stable with read_committed
        return None if offset is None else int(offset)

    def stable_committed_reads(self) -> bool:
        return True

    def end_offset(self) -> int:
        return int(self.consumer.end_offsets([self.tp])[self.tp])

    def seek(self, offset: int) -> None:
        self.consumer.seek(self.tp, offset)

    def begin_transaction(self) -> None:
        self.producer.begin_transaction()
        self.futures = []

    def poll(self, max_records: int) -> list[InputRecord]:
        batches = self.consumer.poll(timeout_ms=500, max_records=min(max_records, 500))
        return [InputRecord(m.offset, m.key, m.value) for m in batches.get(self.tp, [])]

    def send(self, record: InputRecord, headers: list[tuple[str, bytes]]) -> None:
        self.futures.append(self.producer.send(self.output_topic, value=record.value, key=record.key,
                                               headers=headers))

    def send_offsets_to_transaction(self, position: int) -> None:
        from kafka import OffsetAndMetadata

        if self.consumer.position(self.tp) != position:
            raise RuntimeError(f"consumer position {self.consumer.position(self.tp)} != copied up to {position}")
        offsets, group = {self.tp: OffsetAndMetadata(position, "", -1)}, self.consumer.group_metadata()
        self._awaiting(lambda: self.producer.send_offsets_to_transaction(offsets, group))

    def commit_transaction(self) -> None:
        self._awaiting(self.producer.commit_transaction)

    def abort_transaction(self) -> None:
        self._awaiting(self.producer.abort_transaction)

    def close(self) -> None:
        self.consumer.close()
        self.producer.close(CALL_TIMEOUT_S)


# -- aiokafka, driven from this synchronous loop through one event loop -----------------------


class AioKafkaCopier:
    def __init__(self, args: argparse.Namespace) -> None:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self.tp = TopicPartition(args.input_topic, args.input_partition)
        self.group_id = args.group_id
        self.output_topic = args.output_topic

        async def create() -> tuple[AIOKafkaProducer, AIOKafkaConsumer]:  # aiokafka binds the running loop
            return AIOKafkaProducer(
                bootstrap_servers=args.bootstrap, transactional_id=args.transactional_id,
                transaction_timeout_ms=args.transaction_timeout_ms, acks="all", enable_idempotence=True,
                max_batch_size=args.batch_size, linger_ms=5, retry_backoff_ms=args.retry_backoff_ms,
            ), AIOKafkaConsumer(
                bootstrap_servers=args.bootstrap, group_id=args.group_id, isolation_level="read_committed",
                enable_auto_commit=False, auto_offset_reset="earliest",
            )

        self.producer, self.consumer = self.loop.run_until_complete(create())
        self.consumer_started = False
        self.start_task: asyncio.Task[None] | None = None

    def run(self, coro: Coroutine[Any, Any, T] | asyncio.Future[T], timeout: float | None = CALL_TIMEOUT_S) -> T:
        return self.loop.run_until_complete(asyncio.wait_for(coro, timeout))

    def in_loop(self, fn: Callable[[], T]) -> T:
        """A synchronous aiokafka call that wants the running loop (assign, seek)."""
        async def call() -> T:
            return fn()
        return self.run(call())

    def classify(self, exc: BaseException) -> str:
        import aiokafka.errors as e

        fatal = (e.ProducerFenced, e.TransactionalIdAuthorizationFailed, e.UnsupportedVersionError,
                 e.IllegalOperation)
        if isinstance(exc, fatal) or self.producer._txn_manager.is_fatal_error():
            return FATAL  # the check aiokafka's own transaction() context manager makes
        if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
            return RETRIABLE
        if isinstance(exc, e.KafkaError):
            return RETRIABLE if exc.retriable else ABORTABLE
        return OTHER

    def init_transactions(self) -> None:
        # AIOKafkaProducer.start() runs InitProducerId with the transactional id. A retry
        # after a timeout waits for the same start, as kafka-python's init_transactions does.
        if self.start_task is None:
            self.start_task = self.loop.create_task(self.producer.start())
        try:
            self.run(asyncio.shield(self.start_task))
        except TimeoutError:
            raise
        except Exception:
            self.start_task = None
            raise
        if not self.consumer_started:
            self.run(self.consumer.start())
            self.in_loop(lambda: self.consumer.assign([self.tp]))
            self.consumer_started = True

    def committed(self) -> int | None:
        offset = self.run(self.consumer.committed(self.tp))
        return None if offset is None else int(offset)

    def stable_committed_reads(self) -> bool:
        # aiokafka's OffsetFetch has no require_stable: right after an abort it could return
        # an offset still pending elsewhere; the copy loop keeps its own committed offset.
        return False

    def end_offset(self) -> int:
        return int(self.run(self.consumer.end_offsets([self.tp]))[self.tp])

    def seek(self, offset: int) -> None:
        self.in_loop(lambda: self.consumer.seek(self.tp, offset))

    def begin_transaction(self) -> None:
        self.run(self.producer.begin_transaction())

    def poll(self, max_records: int) -> list[InputRecord]:
        batches = self.run(self.consumer.getmany(self.tp, timeout_ms=500, max_records=min(max_records, 500)))
        return [InputRecord(m.offset, m.key, m.value) for m in batches.get(self.tp, [])]

    def send(self, record: InputRecord, headers: list[tuple[str, bytes]]) -> None:
        self.run(self.producer.send(self.output_topic, value=record.value, key=record.key, headers=headers))

    def send_offsets_to_transaction(self, position: int) -> None:
        self.run(self.producer.send_offsets_to_transaction({self.tp: position}, self.group_id), timeout=None)

    def commit_transaction(self) -> None:
        self.run(self.producer.commit_transaction(), timeout=None)

    def abort_transaction(self) -> None:
        self.run(self.producer.abort_transaction(), timeout=None)

    def close(self) -> None:
        self.run(self.consumer.stop())
        self.run(self.producer.stop())


# -- eoslog.client: a consumer group member ---------------------------------------------------


class PartitionRevoked(Exception):
    """A rebalance took the input partition away during the transaction: its records may be
    copied by the next owner, so this transaction must abort."""


class EoslogCopier(TimedTransactionCalls):
    """The copiers share one group: each subscribes to the input topic as a static member
    (group.instance.id = its transactional id), so range assignment gives copier-<p>
    partition p once all have joined (static members are ordered by instance id). A member
    given someone else's partition while the group fills up pauses it and never commits it.
    The input partition's position comes from the group's committed offset (require_stable)
    when it is assigned; a revocation or loss breaks the transaction in progress."""

    def __init__(self, args: argparse.Namespace) -> None:
        from eoslog.client.consumer import Consumer, TopicPartition
        from eoslog.client.producer import Producer

        self.tp = TopicPartition(args.input_topic, args.input_partition)
        self.output_topic = args.output_topic
        self.producer = Producer(producer_settings(args))
        self.consumer = Consumer({
            **consumer_settings(args),
            "group.instance.id": args.transactional_id, "partition.assignment.strategy": "range",
            # a SIGKILLed static member is replaced by its restart; a long session keeps the
            # group from rebalancing meanwhile
            "session.timeout.ms": 20000, "heartbeat.interval.ms": 1000,
            "max.poll.interval.ms": 120000,  # a transaction spanning a broker restart polls late
            "fetch.max.wait.ms": 100, "max.poll.records": 500,
        })
        self.input_topic = args.input_topic
        self.subscribed = False
        self.owned = False
        self.broken = False  # the partition was revoked or lost since the last seek
        self.buffer: list[InputRecord] = []  # polled, not yet handed to the copy loop

    def classify(self, exc: BaseException) -> str:
        from eoslog.client.errors import KafkaError

        if isinstance(exc, PartitionRevoked):
            return ABORTABLE
        if isinstance(exc, KafkaError):
            if exc.fatal:
                return FATAL
            if exc.txn_requires_abort:
                return ABORTABLE
            if exc.retriable:
                return RETRIABLE
        return OTHER

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        others = [tp for tp in partitions if tp != self.tp]
        consumer.pause(others)
        if self.tp in partitions:
            self.owned = True

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        if self.tp in partitions:
            self.owned = False
            self.broken = True
            self.buffer.clear()

    def init_transactions(self) -> None:
        self.producer.init_transactions(CALL_TIMEOUT_S)
        if not self.subscribed:
            self.consumer.subscribe([self.input_topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
            self.subscribed = True

    def committed(self) -> int | None:
        found = self.consumer.committed([self.tp], timeout=CALL_TIMEOUT_S)[self.tp]
        return None if found is None else found.offset

    def stable_committed_reads(self) -> bool:
        return True  # OffsetFetch with require_stable under read_committed

    def end_offset(self) -> int:
        return self.consumer.end_offsets([self.tp], timeout=CALL_TIMEOUT_S)[self.tp]

    def seek(self, offset: int) -> None:
        # Unassigned: the position comes from the committed offset when the partition is
        # assigned, which is ``offset`` (the copy loop seeks only to the committed offset).
        self.buffer.clear()
        self.broken = False
        if self.owned:
            self.consumer.seek(self.tp, offset)

    def begin_transaction(self) -> None:
        self.producer.begin_transaction()

    def poll(self, max_records: int) -> list[InputRecord]:
        if not self.buffer:
            records = self.consumer.poll(0.5)  # also where rebalances happen
            self.buffer = [InputRecord(r.offset, r.key, r.value) for r in records if r.partition == self.tp.partition]
        if self.broken:
            raise PartitionRevoked(f"{self.tp.topic}-{self.tp.partition} was revoked during the transaction")
        out, self.buffer = self.buffer[:max_records], self.buffer[max_records:]
        return out

    def send(self, record: InputRecord, headers: list[tuple[str, bytes]]) -> None:
        self.producer.send(self.output_topic, record.value, key=record.key, headers=headers)

    def send_offsets_to_transaction(self, position: int) -> None:
        if self.broken:
            raise PartitionRevoked(f"{self.tp.topic}-{self.tp.partition} was revoked during the transaction")
        consumed = self.buffer[0].offset if self.buffer else self.consumer.position(self.tp, timeout=CALL_TIMEOUT_S)
        if consumed != position:  # the copy loop and the consumer must agree
            raise RuntimeError(f"consumer position {consumed} != copied up to {position}")
        self.producer.send_offsets_to_transaction({self.tp: position}, self.consumer.group_metadata(),
                                                  CALL_TIMEOUT_S)

    def close(self) -> None:
        self.consumer.close()
        self.producer.close(CALL_TIMEOUT_S)


ADAPTERS: dict[str, Callable[[argparse.Namespace], CopierClient]] = {
    CONFLUENT: ConfluentCopier, CONFLUENT_848: ConsumerProtocolCopier, KAFKA_PYTHON: KafkaPythonCopier,
    AIOKAFKA: AioKafkaCopier, EOSLOG: EoslogCopier,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--client", choices=CLIENTS, default=CONFLUENT)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--input-topic", required=True)
    p.add_argument("--input-partition", type=int, required=True)
    p.add_argument("--output-topic", required=True)
    p.add_argument("--transactional-id", required=True)
    p.add_argument("--group-id", required=True)
    p.add_argument("--instance", type=int, default=0, help="restart count, for the txn header")
    p.add_argument("--min-txn", type=int, default=200)
    p.add_argument("--max-txn", type=int, default=750)
    p.add_argument("--abort-probability", type=float, default=1 / 3)
    p.add_argument("--batch-size", type=int, default=4096)
    p.add_argument("--retry-backoff-ms", type=int, default=100,
                   help="retry.backoff.ms (also after CONCURRENT_TRANSACTIONS) of the clients that take it")
    p.add_argument("--transaction-timeout-ms", type=int, default=60000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stuck-after-s", type=float, default=60.0,
                   help="exit with EXIT_STUCK when one client call takes longer than this")
    p.add_argument("--gate-dir", type=Path, default=None,
                   help="tests' gate: while GATE_DIR/gate exists, a transaction meant to commit stops halfway, "
                        "its records so far acknowledged (the clients that can flush), and says so with "
                        "GATE_DIR/at-gate-<transactional id>")
    p.add_argument("--debug", default="", help="librdkafka debug contexts (to stderr), e.g. eos,protocol; "
                                                "any value turns on kafka-python's/aiokafka's debug log")
    return p.parse_args(argv)


# How long a copier started while its broker restarts keeps trying to reach it. librdkafka's,
# kafka-python's and aiokafka's clients connect lazily and retry for ever; eoslog's Producer
# bootstraps in its constructor and gives up after max.block.ms (60 s, as Java's initTransactions
# does), which an Apache Kafka broker restarting on a loaded machine can outlast.
CREATE_CLIENTS_S = 300.0


def create_clients(rep: Reporter, args: argparse.Namespace) -> CopierClient:
    deadline = time.monotonic() + CREATE_CLIENTS_S
    attempt = 0
    while True:
        try:
            return ADAPTERS[args.client](args)
        except Exception as exc:
            if args.client == EOSLOG and _bootstrap_timed_out(exc) and time.monotonic() < deadline:
                rep.emit("error", stage="create clients", kind=RETRIABLE, attempt=attempt, error=repr(exc))
                attempt += 1
                continue
            fail(rep, EXIT_UNEXPECTED, "create clients", exc, OTHER)


def _bootstrap_timed_out(exc: BaseException) -> bool:
    from eoslog.client.errors import KafkaTimeoutError

    return isinstance(exc, KafkaTimeoutError)


def main(argv: list[str] | None = None) -> NoReturn:
    args = parse_args(argv)
    if args.client != CONFLUENT and (args.debug or args.client == EOSLOG):
        # the client's own log, to stderr (the copier log): kafka-python's and aiokafka's
        # with --debug; eoslog's group membership at INFO always (it is quiet otherwise)
        logging.basicConfig(level=logging.DEBUG if args.debug else logging.INFO, stream=sys.stderr,
                            format="%(asctime)s %(name)s %(levelname)s %(message)s")
    rep = Reporter(args.transactional_id, args.instance, args.stuck_after_s)
    client = create_clients(rep, args)
    if isinstance(client, KafkaPythonCopier):
        rep.dropped = client.request_dropped
    try:
        copy(client, args, rep)
    except Exception as exc:
        fail(rep, EXIT_UNEXPECTED, "copy loop", exc, OTHER)


if __name__ == "__main__":
    main()

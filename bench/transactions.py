"""Transactional produce against idempotent produce: what committing every 10, 100 and
1000 ms costs, measured in one run (issue 5's benchmark; goal ≥ 0.95 of the idempotent
throughput at 100 ms, reported, never asserted).

    python bench/transactions.py [--quick]     # from the repo root, inside .venv
    python bench/transactions.py --profile --intervals 10   # py-spy on the broker
    python bench/transactions.py --client java --quick --against kafka   # TV2 and TV1, eoslog / Kafka

One broker subprocess (3 partitions per topic, Kafka's defaults otherwise); each case
writes to its own topic, ``--rounds`` times over, interleaved, each round starting one
case later; the best round counts (other processes only slow a run down), and every
round's ratio is reported too:

- ``idempotent``: core.py's idempotent case, same settings (``load.PRODUCER_BASE``,
  acks=all, enable.idempotence=true), producing for ``--seconds``, then flush(); timed
  from the first produce call to flush() returning.
- ``txn-N`` (N ms = 10, 100, 1000): the same settings plus a ``transactional.id``. For
  ``--seconds``: begin_transaction() → enqueue records for N ms → flush() →
  commit_transaction(). N is the time spent producing in a transaction, from begin to
  the commit, as ``--transaction-duration-ms`` of Kafka's ProducerPerformance; what is
  still queued then is delivered by the flush, so a cycle lasts N ms + the drain + the
  commit. Only records of committed transactions count; timed from the first produce
  to the last commit_transaction() returning. The flush is called explicitly so that
  commit latency (commit_transaction(): EndTxn, PREPARE_COMMIT in the transaction log)
  and the drain are reported apart; commit_transaction() would flush the same records.
- ``flush-N`` (control, ``--controls``, default at 100 ms): the idempotent producer doing
  the same cycle without a transaction (enqueue for N ms → flush()). It pays the same
  drain of the pipeline at every cycle, so transactional / control is the cost of the
  transaction itself (AddPartitionsToTxn, EndTxn, markers) and control / idempotent the
  cost of committing often at all, whatever the broker.

After each case, outside the clock, a verification that a broken coordinator cannot pass
with a good-looking number: a transactional case first runs one more transaction of
``ABORT_PROBE`` records per partition with a different value and aborts it; then the
last stable offsets must reach the high watermarks (no transaction left open), the high
watermarks must sum to exactly records + one offset per marker (one per partition of
every committed transaction, plus the abort's), and a read_committed consumer reading
every partition from offset 0 to its end must see exactly the committed records per
partition, each with the value sent, and none of the aborted ones. A case that fails is
shown as FAILED, left out of the ratios, and the exit status is 1.

The client (``--client``): confluent-kafka (librdkafka, the default), which speaks transaction
version 1 only; Kafka 4.4's Java producer (``java``, java_client.py: one JVM per case running
bench/java/TransactionalProduce.java, the same cycle, warm-up and abort probe); or eoslog.client's
blocking producer (``eoslog``, in this process, with the Java driver's settings). The last two speak
transaction version 2 (KIP-890 part 2: an epoch bump at every commit and abort, partitions added by
their leader on the first Produce) whenever the broker finalizes it. With it the transactional
cases run at ``transaction.version=2`` (``txn-N``) and, for each interval in ``--tv1``, once more
after a downgrade to 1 (``txn-N-tv1``; UpdateFeatures before the case, on the same broker, in the
same interleaved rounds). The verification then also checks which version the producer used: the
epochs DescribeProducers reports must have advanced past the committed transactions under
version 2, and stayed 0 under version 1 (librdkafka's cases are checked for version 1). Under
``--against kafka`` every run's table is shown, and the results keep each run's cases
(``side_runs``) and the TV2 / TV1 ratios per broker (``transaction_versions``).

Each case's topic is deleted once verified (``--keep`` keeps them): its dirty pages go
with it instead of being written back to disk while later cases run.

Results: a table, ``bench/results/transactions-<timestamp>.json`` and
``transactions-latest.json``, and ``transactions-latest.png`` (``transactions-java-…`` with
``--client java``, ``…-kafka-…`` with ``--against kafka``).
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import math
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]
from rich.console import Console
from rich.table import Table

import against
import java_client
from baselines import recycle_pages
from common import (
    MB,
    RESULTS_DIR,
    BrokerProcess,
    Measurement,
    RssSampler,
    best,
    machine_facts,
    prepare_run,
    use_broker_src,
)
from eoslog.client.errors import KafkaError as EoslogKafkaError
from load import (
    CONSUMER_BASE,
    ENQUEUE_CHUNK,
    PARTITIONS,
    PRODUCE_CASES,
    RECORD_SIZE,
    ChunkSender,
    Errors,
    client_cpu_seconds,
    create_topic,
    open_producer,
)

SCHEMA_VERSION = 1
INTERVALS_MS = (10, 100, 1000)
GOAL_INTERVAL_MS = 100
GOAL = 0.95
DEFAULT_SECONDS = 4.0
QUICK_SECONDS = 2.5
DEFAULT_ROUNDS = 3
QUICK_ROUNDS = 2
# Freshly freed pages before each case (see baselines.py): as many bytes as the previous
# case wrote, within these bounds.
RECYCLE_MIN_MB = 512
RECYCLE_MAX_MB = 2048
ABORT_PROBE = 100  # records per partition in the aborted transaction after a case
ABORT_VALUE = (b"aborted-probe;" * (RECORD_SIZE // 14 + 1))[:RECORD_SIZE]
TXN_TIMEOUT_S = 60.0
RSS_INTERVAL_S = 0.5
# The producers a case can run on: confluent-kafka (librdkafka: transaction version 1 only) and
# Kafka 4.4's Java producer (java_client.py: version 2 when the broker finalizes it).
CLIENTS = ("librdkafka", "java", "eoslog")
CLIENTS_TV2 = ("java", "eoslog")
CLIENT_LABELS = {"librdkafka": "confluent-kafka (librdkafka)", "java": "Kafka 4.4 Java producer (KafkaProducer)",
                 "eoslog": "eoslog.client (pure Python)"}

_FATAL = (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError.UNKNOWN_TOPIC_OR_PART)

IDEMPOTENT = next(c for c in PRODUCE_CASES if c.name == "idempotent")

console = Console(width=max(shutil.get_terminal_size((190, 24)).columns, 190))


@dataclass(frozen=True)
class Case:
    name: str
    label: str
    interval_ms: int | None = None  # None: produce throughout, one flush at the end
    transactional: bool = False
    # The transaction.version finalized before the case (UpdateFeatures) and the one its producer
    # must be seen to use; None: the broker's level is left alone and the client speaks version 1
    # (librdkafka knows no other).
    transaction_version: int | None = None

    @property
    def config(self) -> dict[str, Any]:
        return dict(IDEMPOTENT.config)


def cases_for(intervals: tuple[int, ...], controls: tuple[int, ...] = (), tv1: tuple[int, ...] = (),
              client: str = "librdkafka") -> list[Case]:
    """The baseline, a transactional case per interval, and a control per interval in
    ``controls``: the idempotent producer flushing every N ms without transactions,
    which separates the cost of draining the pipeline from that of the transaction.

    A client that speaks transaction version 2 (``CLIENTS_TV2``) runs the transactional cases
    at ``transaction.version=2`` and, per interval in ``tv1``, once more after a downgrade to 1
    (``txn-N-tv1``), on the same broker, interleaved."""
    tv2 = client in CLIENTS_TV2
    return [Case("idempotent", "idempotent (baseline)"),
            *(Case(f"txn-{ms}", f"transactional, {ms} ms" + (", TV2" if tv2 else ""), ms, transactional=True,
                   transaction_version=2 if tv2 else None) for ms in intervals),
            *(Case(f"txn-{ms}-tv1", f"transactional, {ms} ms, TV1", ms, transactional=True, transaction_version=1)
              for ms in (tv1 if tv2 else ())),
            *(Case(f"flush-{ms}", f"idempotent, flush every {ms} ms (control)", ms) for ms in controls)]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help=f"{QUICK_SECONDS:g} s per case and {QUICK_ROUNDS} rounds instead of {DEFAULT_SECONDS:g} s "
                        f"and {DEFAULT_ROUNDS}")
    p.add_argument("--seconds", type=float, help="seconds of producing per case (overrides --quick)")
    p.add_argument("--rounds", type=int,
                   help=f"times each case runs, interleaved, the order rotated each round; the best counts "
                        f"(default {DEFAULT_ROUNDS})")
    p.add_argument("--intervals", default=",".join(map(str, INTERVALS_MS)),
                   help="commit intervals in ms, comma-separated")
    p.add_argument("--controls", default=str(GOAL_INTERVAL_MS),
                   help="intervals (ms, comma-separated, or 'none') at which to also run the control: the "
                        "idempotent producer flushing every N ms without transactions")
    p.add_argument("--client", choices=CLIENTS, default="librdkafka",
                   help="the producer: confluent-kafka (librdkafka, transaction version 1), Kafka 4.4's Java "
                        "producer (reference jars) or eoslog.client; the last two use transaction version 2 when "
                        "it is finalized, as on both brokers by default")
    p.add_argument("--tv1", default=None,
                   help="with --client java or eoslog: intervals (ms, comma-separated, or 'none') at which the "
                        "transactional case also runs after transaction.version is downgraded to 1 "
                        "(default: every interval)")
    p.add_argument("--profile", action="store_true",
                   help="instead: py-spy on the broker during the idempotent case and each interval, once "
                        "(busy samples, with line numbers); saves transactions-hotspots-latest.json")
    p.add_argument("--work-dir", type=Path, default=None, help="where the broker's data dir goes")
    p.add_argument("--keep", action="store_true",
                   help="keep the work directory (data and broker log) and every case's topic")
    p.add_argument("--broker-src", type=Path, default=None,
                   help="run the broker from this eoslog src/ directory (see README)")
    p.add_argument("--no-save", action="store_true", help="print only; write no JSON/PNG")
    against.add_flag(p)
    args = p.parse_args(argv)
    args.seconds = args.seconds or (QUICK_SECONDS if args.quick else DEFAULT_SECONDS)
    args.rounds = args.rounds or (QUICK_ROUNDS if args.quick else DEFAULT_ROUNDS)
    args.intervals = tuple(sorted(int(x) for x in args.intervals.split(",")))
    args.controls = () if args.controls == "none" else tuple(sorted(int(x) for x in args.controls.split(",")))
    args.tv1 = (args.intervals if args.tv1 is None else
                () if args.tv1 == "none" else tuple(sorted(int(x) for x in args.tv1.split(","))))
    return args


# -- producing ------------------------------------------------------------------------------


@dataclass
class Sent:
    """What a case wrote to its topic, for the verification."""

    committed: list[int] = field(default_factory=lambda: [0] * PARTITIONS)  # records per partition
    aborted: int = 0  # records of aborted transactions
    markers: int = 0  # control records: one per partition per completed transaction
    exact: bool = True  # False when a failed transaction left an unknown number of records
    value: bytes = b""
    transactions: int = 0  # committed in the timed loop


def percentile(values: list[float], q: float) -> float | None:
    """Nearest rank; None without values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _ms(v: float | None) -> float | None:
    return None if v is None else round(v * 1000, 2)


def _commit(producer: Producer) -> str | None:
    """commit_transaction(); None when committed, else why it was aborted."""
    for _ in range(5):
        try:
            producer.commit_transaction(TXN_TIMEOUT_S)
            return None
        except KafkaException as e:
            err: KafkaError = e.args[0]
            if err.retriable():
                continue
            if err.txn_requires_abort():
                producer.abort_transaction(TXN_TIMEOUT_S)
                return str(err)
            raise
    raise RuntimeError("commit_transaction() still retriable after 5 attempts")


class CaseProducer(Protocol):
    """What ``run_case`` drives: a producer ready to be timed (warm-up done), sending
    ENQUEUE_CHUNK records of ``value`` to each partition in turn."""

    value: bytes
    warmup_s: float
    config: dict[str, Any]

    def send(self) -> int:
        """Enqueue ENQUEUE_CHUNK records to the next partition; returns the partition."""

    def flush(self) -> str | None:
        """Deliver what is queued; why some records were not delivered, or None."""

    def begin(self) -> None: ...

    def commit(self) -> str | None:
        """Commit; None when committed, else why the transaction was aborted instead."""

    def abort_probe(self) -> None:
        """One transaction of ABORT_PROBE records of ABORT_VALUE per partition, aborted."""

    def close(self) -> None: ...

    def client_errors(self) -> list[str]: ...


class LibrdkafkaCase:
    """confluent-kafka, through load.py's ``open_producer`` and ``ChunkSender``."""

    def __init__(self, bootstrap: str, topic: str, config: dict[str, Any]) -> None:
        self.errors = Errors()
        self.config = config
        self.producer, self.warmup_s = open_producer(bootstrap, topic, config, self.errors)
        self.sender = ChunkSender(self.producer, topic)
        self.value = self.sender.value
        self.topic = topic

    def send(self) -> int:
        return self.sender.send()

    def flush(self) -> str | None:
        left = self.producer.flush(TXN_TIMEOUT_S)
        if left or self.errors.delivery:
            return f"{left} records undelivered; errors: {self.errors.delivery[:5]}"
        return None

    def begin(self) -> None:
        self.producer.begin_transaction()

    def commit(self) -> str | None:
        return _commit(self.producer)

    def abort_probe(self) -> None:
        probe = ChunkSender(self.producer, self.topic, value=ABORT_VALUE)
        self.producer.begin_transaction()
        for _ in range(PARTITIONS):
            probe.send(ABORT_PROBE)
        self.producer.flush(TXN_TIMEOUT_S)
        self.producer.abort_transaction(TXN_TIMEOUT_S)

    def close(self) -> None:
        self.producer.flush(TXN_TIMEOUT_S)
        del self.producer

    def client_errors(self) -> list[str]:
        return self.errors.client


class EoslogCase:
    """eoslog.client's blocking producer (pure Python; transaction version 2 when the broker
    finalizes it, as Kafka's Java producer), with the Java driver's settings: the same names."""

    def __init__(self, bootstrap: str, topic: str, config: dict[str, Any]) -> None:
        from eoslog.client import Producer as EoslogProducer

        create_topic(bootstrap, topic)
        create_topic(bootstrap, f"{topic}-warmup")
        self.config = {**java_client.PRODUCER_SETTINGS,
                       **{k: v for k, v in config.items() if k == "transactional.id"}}
        self.producer = EoslogProducer({"bootstrap.servers": bootstrap, **self.config})
        self.topic = topic
        self.value = os.urandom(RECORD_SIZE)
        self.failed: list[str] = []
        self.next_partition = 0
        warm = time.perf_counter()
        transactional = "transactional.id" in config
        if transactional:
            self.producer.init_transactions(30)
            self.producer.begin_transaction()
        self.producer.send(f"{topic}-warmup", b"warm-up", partition=0).result(30)
        if transactional:
            self.producer.commit_transaction(30)
        self.warmup_s = time.perf_counter() - warm

    def _on_delivery(self, _md: Any, error: BaseException | None) -> None:
        if error is not None and len(self.failed) < 20:
            self.failed.append(repr(error))

    def send(self) -> int:
        partition = self.next_partition
        send, topic, value, cb = self.producer.send, self.topic, self.value, self._on_delivery
        for _ in range(ENQUEUE_CHUNK):
            send(topic, value, partition=partition, on_delivery=cb)
        self.next_partition = (partition + 1) % PARTITIONS
        return partition

    def flush(self) -> str | None:
        self.producer.flush(TXN_TIMEOUT_S)
        return f"records failed: {self.failed[:5]}" if self.failed else None

    def begin(self) -> None:
        self.producer.begin_transaction()

    def commit(self) -> str | None:
        try:
            self.producer.commit_transaction(TXN_TIMEOUT_S)
            return None
        except EoslogKafkaError as e:  # a failed record or an abortable error: the transaction is aborted
            self.producer.abort_transaction(TXN_TIMEOUT_S)
            return repr(e)

    def abort_probe(self) -> None:
        self.producer.begin_transaction()
        for partition in range(PARTITIONS):
            for _ in range(ABORT_PROBE):
                self.producer.send(self.topic, ABORT_VALUE, partition=partition)
        self.producer.flush(TXN_TIMEOUT_S)
        self.producer.abort_transaction(TXN_TIMEOUT_S)

    def close(self) -> None:
        self.producer.close(TXN_TIMEOUT_S)

    def client_errors(self) -> list[str]:
        return self.failed


def run_case(bootstrap: str, topic: str, case: Case, seconds: float,
             sampler: RssSampler | None = None, client: str = "librdkafka") -> tuple[Measurement, Sent]:
    """Produce to ``topic`` for ``seconds`` as ``case`` says, with the in-process ``client``
    (librdkafka or eoslog); the broker's CPU (from ``sampler``) and the client's are counted
    while the clock runs, warm-up excluded."""
    config = case.config
    if case.transactional:
        config["transactional.id"] = f"bench-{topic}"
    producer: CaseProducer = (EoslogCase if client == "eoslog" else LibrdkafkaCase)(bootstrap, topic, config)
    sent = Sent(value=producer.value)
    extra: dict[str, Any] = {"topic": topic, "config": producer.config, "warmup_s": round(producer.warmup_s, 3)}
    broker_cpu0 = sampler.set_phase(f"produce {case.name}") if sampler else 0.0
    cpu0 = client_cpu_seconds()
    start = time.perf_counter()
    deadline = start + seconds
    if case.interval_ms is None:
        while time.perf_counter() < deadline:
            sent.committed[producer.send()] += ENQUEUE_CHUNK
        undelivered = producer.flush()
        end = time.perf_counter()
        if undelivered:
            raise RuntimeError(f"{case.name}: {undelivered}")
    else:
        interval = case.interval_ms / 1000
        flushes: list[float] = []
        commits: list[float] = []
        failed: list[str] = []
        end = start
        while end < deadline:
            if case.transactional:
                producer.begin()
            begun = time.perf_counter()
            in_txn = [0] * PARTITIONS
            while True:
                in_txn[producer.send()] += ENQUEUE_CHUNK
                if time.perf_counter() - begun >= interval:
                    break
            flushing = time.perf_counter()
            producer.flush()
            committing = time.perf_counter()
            error = producer.commit() if case.transactional else None
            end = time.perf_counter()
            if case.transactional:
                sent.markers += sum(1 for n in in_txn if n)
            if error is None:
                for p, n in enumerate(in_txn):
                    sent.committed[p] += n
                flushes.append(committing - flushing)
                if case.transactional:
                    commits.append(end - committing)
                    sent.transactions += 1
            else:
                sent.exact = False  # some of its records may have failed before reaching the log
                sent.aborted += sum(in_txn)
                if len(failed) < 20:
                    failed.append(error)
        extra.update(cycles=len(flushes), failed_transactions=len(failed), failures=failed,
                     commit_s=[round(x, 5) for x in commits], flush_s=[round(x, 5) for x in flushes])
    client_cpu = client_cpu_seconds() - cpu0
    if sampler:
        extra["broker_cpu_s"] = round(sampler.set_phase("between") - broker_cpu0, 2)
    if case.transactional:
        producer.abort_probe()
        sent.aborted += ABORT_PROBE * PARTITIONS
        sent.markers += PARTITIONS
    producer.close()
    records = sum(sent.committed)
    extra.update(client_cpu_s=round(client_cpu, 2), client_errors=producer.client_errors(),
                 committed_per_partition=list(sent.committed))
    return Measurement(case.label, records * RECORD_SIZE, end - start, records, extra=extra), sent


def run_case_java(classes: Path, bootstrap: str, topic: str, case: Case, seconds: float,
                  sampler: RssSampler | None = None) -> tuple[Measurement, Sent]:
    """``run_case`` with Kafka's Java producer (java_client.py), in a JVM of its own: the same
    cycle, records, warm-up outside the clock and abort probe after it."""
    create_topic(bootstrap, topic)
    create_topic(bootstrap, f"{topic}-warmup")
    mode = "txn" if case.transactional else "idempotent" if case.interval_ms is None else "flush"
    value = os.urandom(RECORD_SIZE)
    broker_cpu: list[float] = []

    def on_clock(edge: str) -> None:
        if sampler:
            broker_cpu.append(sampler.set_phase(f"produce {case.name}" if edge == "start" else "between"))

    r = java_client.run_producer(classes, bootstrap, topic, mode, case.interval_ms, seconds, partitions=PARTITIONS,
                                 chunk=ENQUEUE_CHUNK, value=value, abort_value=ABORT_VALUE, abort_probe=ABORT_PROBE,
                                 on_clock=on_clock)
    sent = Sent(committed=list(r["committed"]), aborted=r["aborted"], markers=r["markers"], exact=r["exact"],
                value=value, transactions=r["cycles"] if case.transactional else 0)
    extra: dict[str, Any] = {"topic": topic, "config": {"client": "Kafka Java producer", "mode": mode,
                                                        **java_client.PRODUCER_SETTINGS},
                             "warmup_s": r["warmup_s"], "client_cpu_s": r["client_cpu_s"],
                             "client_errors": r["client_errors"], "committed_per_partition": list(sent.committed)}
    if case.interval_ms is not None:
        extra.update(cycles=r["cycles"], failed_transactions=r["failed_transactions"], failures=r["failures"],
                     commit_s=r["commit_s"], flush_s=r["flush_s"])
    if len(broker_cpu) == 2:
        extra["broker_cpu_s"] = round(broker_cpu[1] - broker_cpu[0], 2)
    records = sum(sent.committed)
    return Measurement(case.label, records * RECORD_SIZE, r["seconds"], records, extra=extra), sent


def prime_coordinator(bootstrap: str) -> None:
    """One committed transaction before any case: the broker creates __transaction_state
    (50 partitions) on the first FindCoordinator, which no case should pay for."""
    errors = Errors()
    producer, _ = open_producer(bootstrap, "bench-prime", {**IDEMPOTENT.config, "transactional.id": "bench-prime"},
                                errors)
    producer.flush(TXN_TIMEOUT_S)
    del producer


# -- verification -----------------------------------------------------------------------------


def _offsets(admin: AdminClient, topic: str, level: Any) -> list[int]:
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    futures = admin.list_offsets({tp: latest for tp in tps}, isolation_level=level, request_timeout=30)
    by_partition = {tp.partition: f.result().offset for tp, f in futures.items()}
    return [by_partition[p] for p in range(PARTITIONS)]


def verify(bootstrap: str, topic: str, sent: Sent, timeout_s: float = 300.0,
           transaction_version: int | None = None) -> dict[str, Any]:
    """Check the log against what was sent (see the module docstring); returns the
    findings, with ``problems`` empty when everything matched. With ``transaction_version``
    (a transactional case), also that the producer used that version (``_version_seen``)."""
    problems: list[str] = []
    version: dict[str, Any] = {}
    if transaction_version is not None:
        version = _version_seen(bootstrap, topic, sent)
        if version["transaction_version_seen"] != transaction_version:
            problems.append(f"the producer used transaction version {version['transaction_version_seen']}, "
                            f"not {transaction_version}: producer epochs {version['producer_epochs']} after "
                            f"{sent.transactions} committed transactions")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # Markers are written after EndTxn is answered (and, with group commit, count towards the
    # high watermark once fsynced): give the offsets a moment.
    expected_offsets = sum(sent.committed) + sent.aborted + sent.markers
    least = expected_offsets if sent.exact else sum(sent.committed) + sent.markers
    t0 = time.perf_counter()
    while True:
        hws = _offsets(admin, topic, IsolationLevel.READ_UNCOMMITTED)
        lsos = _offsets(admin, topic, IsolationLevel.READ_COMMITTED)
        if (lsos == hws and sum(hws) >= least) or time.perf_counter() - t0 > 30:
            break
        time.sleep(0.05)
    lso_wait = time.perf_counter() - t0
    if lsos != hws:
        problems.append(f"last stable offsets {lsos} below the high watermarks {hws} after 30 s: "
                        "a transaction was left open")
    # After a failed transaction only a lower bound is known.
    wrong = sum(hws) != expected_offsets if sent.exact else sum(hws) < sum(sent.committed) + sent.markers
    if wrong:
        problems.append(f"high watermarks {hws} sum to {sum(hws)}; expected {expected_offsets} "
                        f"({sum(sent.committed)} committed + {sent.aborted} aborted records + {sent.markers} markers)")
    client_errors: list[str] = []

    def on_error(err: KafkaError) -> None:
        if len(client_errors) < 20:
            client_errors.append(str(err))

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"verify-{topic}", **CONSUMER_BASE,
                         "isolation.level": "read_committed", "enable.partition.eof": True,
                         "error_cb": on_error})
    seen = [0] * PARTITIONS
    aborted_seen = 0
    other_values = 0
    at_end: set[int] = set()
    t1 = time.perf_counter()
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        while len(at_end) < PARTITIONS:
            if time.perf_counter() - t1 > timeout_s:
                missing = sorted(set(range(PARTITIONS)) - at_end)
                problems.append(f"read_committed consumer did not reach the end of partitions {missing} "
                                f"in {timeout_s:.0f} s")
                break
            for m in consumer.consume(num_messages=10_000, timeout=0.5):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        at_end.add(m.partition() or 0)
                    elif err.fatal() or err.code() in _FATAL:
                        raise KafkaException(err)
                    elif len(client_errors) < 20:
                        client_errors.append(str(err))
                    continue
                p = m.partition() or 0
                at_end.discard(p)
                seen[p] += 1
                v = m.value()
                if v != sent.value:
                    if v == ABORT_VALUE:
                        aborted_seen += 1
                    else:
                        other_values += 1
    finally:
        consumer.close()
    if seen != sent.committed:
        problems.append(f"read_committed consumer saw {seen} records per partition; {sent.committed} were committed")
    if aborted_seen:
        problems.append(f"read_committed consumer saw {aborted_seen} records of an aborted transaction")
    if other_values:
        problems.append(f"{other_values} records carry a value that was never sent")
    return {"ok": not problems, "problems": problems, "high_watermarks": hws, "last_stable_offsets": lsos,
            "lso_wait_s": round(lso_wait, 3), "read_committed_seen": seen, "aborted_records_seen": aborted_seen,
            "expected_offsets": expected_offsets, "exact": sent.exact, "read_s": round(time.perf_counter() - t1, 2),
            "client_errors": client_errors, **version}


def _version_seen(bootstrap: str, topic: str, sent: Sent) -> dict[str, Any]:
    """Which transaction version the producer used, from the epochs DescribeProducers shows:
    under version 2 every commit and abort bumps the epoch (the warm-up's commit and each of the
    case's), so the case's partitions end at an epoch above its committed transactions; under
    version 1 the epoch of a fresh transactional id stays 0 (a bump only follows an error)."""
    epochs = java_client.producer_epochs(bootstrap, topic, PARTITIONS)
    return {"producer_epochs": epochs, "transaction_version_seen": 2 if max(epochs) >= sent.transactions + 1 else 1}


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    """Deleting a verified case's topic drops its dirty pages from the page cache: else
    they pile up over a run (GBs), and the kernel's write-back to disk competes with
    the later cases for the two CPUs."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.delete_topics(topics, operation_timeout=30).values():
        f.result()


# -- the run -----------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    cases = cases_for(args.intervals, args.controls, args.tv1, args.client)
    work, data_dir, facts = prepare_run(args.work_dir, "eoslog-bench-txn-", args.broker_src)
    facts["load_avg_at_start"] = [round(x, 2) for x in os.getloadavg()]
    classes: Path | None = None
    if args.client == "java":
        against.require_kafka()
        classes = java_client.compile_producer(work / "classes")
        facts["java_client"] = f"{against.kafka_label()} Java producer"
    started = datetime.datetime.now().astimezone()
    console.print(f"[bold]eoslog transactions benchmark[/] on {getattr(args, 'side', 'eoslog')}: "
                  f"{args.seconds:g} s per case, {args.rounds} round(s), "
                  f"{RECORD_SIZE} B records, {PARTITIONS} partitions, client {args.client}, commit intervals "
                  f"{', '.join(f'{ms} ms' for ms in args.intervals)}; work dir {work}")
    console.print(f"machine: {facts['cpu_count']} CPUs, load {facts['load_avg_at_start']}, Python {facts['python']}, "
                  f"librdkafka {facts['librdkafka']}; broker from {facts['broker_src']} ({facts['eoslog_commit']})")
    runs: dict[str, list[Measurement]] = {c.name: [] for c in cases}
    failures: list[dict[str, Any]] = []
    broker = against.broker_for(args, data_dir, {"num.partitions": str(PARTITIONS)})
    sampler: RssSampler | None = None
    try:
        broker.start()
        assert broker.proc is not None
        sampler = RssSampler(broker.proc.pid, RSS_INTERVAL_S).start()
        prime_coordinator(broker.bootstrap)
        time.sleep(1.0)
        # Each round starts one case later, so no case always runs first or right after the baseline.
        order = [(r, cases[(r + i) % len(cases)]) for r in range(args.rounds) for i in range(len(cases))]
        recycle = RECYCLE_MIN_MB * MB
        for rnd, case in order:
            topic = f"bench-{case.name}-r{rnd}"
            sampler.set_phase("between")
            recycle_s = recycle_pages(work, recycle)
            console.print(f"{case.label} (round {rnd + 1} of {args.rounds}) …")
            try:
                if case.transaction_version is not None:
                    java_client.set_transaction_version(broker.bootstrap, case.transaction_version)
                if classes is not None:
                    m, sent = run_case_java(classes, broker.bootstrap, topic, case, args.seconds, sampler)
                else:
                    m, sent = run_case(broker.bootstrap, topic, case, args.seconds, sampler, args.client)
                sampler.set_phase("verify")
                m.extra["verification"] = verify(
                    broker.bootstrap, topic, sent,
                    transaction_version=(case.transaction_version or 1) if case.transactional else None)
                if not args.keep:
                    delete_topics(broker.bootstrap, [topic, f"{topic}-warmup"])
            except Exception as e:  # one broken case must not hide the others' figures
                console.print(f"[red]{case.name} round {rnd + 1} failed: {e!r}[/]")
                failures.append({"case": case.name, "round": rnd, "error": repr(e)})
                if not broker.alive():
                    raise
                continue
            m.extra.update(round=rnd, recycle_pages_s=round(recycle_s, 3), recycle_pages_mb=recycle // MB)
            recycle = min(max(m.bytes, RECYCLE_MIN_MB * MB), RECYCLE_MAX_MB * MB)
            if not m.extra["verification"]["ok"]:
                console.print(f"[red]{case.name} round {rnd + 1}: verification FAILED: "
                              f"{m.extra['verification']['problems']}[/]")
            runs[case.name].append(m)
        sampler.set_phase("idle after")
        time.sleep(1.0)
        sampler.stop()
        broker.stop()
    except BaseException:
        console.print(f"[red]benchmark failed; broker log {broker.log_path}:[/]\n{broker.log_text()[-3000:]}")
        args.keep = True
        raise
    finally:
        if sampler is not None:
            sampler.stop()
        if broker.alive():
            broker.stop()
        log_text = broker.log_text()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            console.print(f"kept {work}")
    assert sampler is not None
    return assemble(started, facts, args, cases, runs, failures, sampler, log_text)


def _summary(case: Case, runs: list[Measurement]) -> dict[str, Any] | None:
    """The best verified round, with latencies pooled over every verified round."""
    good = [m for m in runs if m.extra["verification"]["ok"]]
    if not good:
        return None
    top = best(good)
    out = top.to_json()
    cpu = top.extra.get("broker_cpu_s")
    out["mb_per_broker_cpu_s"] = round(top.bytes / MB / cpu, 1) if cpu else None
    out["rounds_mb_s"] = [round(m.mb_s, 1) for m in runs]
    out["interval_ms"] = case.interval_ms
    out["transactional"] = case.transactional
    if case.interval_ms is not None:
        # A cycle: one transaction (begin … commit), or for a control one flush interval.
        cycles = top.extra["cycles"]
        out["cycles_s"] = round(cycles / top.seconds, 2) if top.seconds else 0.0
        out["mb_per_cycle"] = round(top.bytes / MB / cycles, 2) if cycles else None
        out["cycle_ms"] = round(top.seconds / cycles * 1000, 1) if cycles else None
        commits = [x for m in good for x in m.extra["commit_s"]]
        flushes = [x for m in good for x in m.extra["flush_s"]]
        out["latency_ms"] = {
            "samples": len(flushes),
            "commit_p50": _ms(percentile(commits, 0.5)), "commit_p99": _ms(percentile(commits, 0.99)),
            "commit_max": _ms(max(commits, default=None)),
            "flush_p50": _ms(percentile(flushes, 0.5)), "flush_p99": _ms(percentile(flushes, 0.99)),
        }
    return out


def _ratio(label: str, num: str, den: str, goal: float | None, summaries: dict[str, Any],
           runs: dict[str, list[Measurement]]) -> dict[str, Any]:
    """Best over best, per broker CPU second, and each round's pair (a sense of the noise)."""
    entry: dict[str, Any] = {"label": label, "numerator": num, "denominator": den, "goal": goal}
    a, b = summaries.get(num), summaries.get(den)
    if a is None or b is None:
        entry.update(value=None, why="a case has no verified round")
        return entry
    value = a["mb_s"] / b["mb_s"]
    per_cpu = (a["mb_per_broker_cpu_s"] / b["mb_per_broker_cpu_s"]
               if a["mb_per_broker_cpu_s"] and b["mb_per_broker_cpu_s"] else None)
    by_round = {m.extra["round"]: m.mb_s for m in runs[den] if m.extra["verification"]["ok"]}
    rounds = [round(m.mb_s / by_round[m.extra["round"]], 3) for m in runs[num]
              if m.extra["verification"]["ok"] and m.extra["round"] in by_round]
    entry.update(value=round(value, 3), per_broker_cpu_s=None if per_cpu is None else round(per_cpu, 3),
                 rounds=rounds, rounds_median=round(statistics.median(rounds), 3) if rounds else None,
                 met=None if goal is None else value >= goal)
    return entry


def assemble(started: datetime.datetime, facts: dict[str, Any], args: argparse.Namespace, cases: list[Case],
             runs: dict[str, list[Measurement]], failures: list[dict[str, Any]], sampler: RssSampler,
             broker_log: str) -> dict[str, Any]:
    summaries = {c.name: _summary(c, runs[c.name]) for c in cases}
    ratios: dict[str, Any] = {}
    for c in cases:
        if c.interval_ms is None:
            continue
        ms = c.interval_ms
        if c.transactional:
            goal = GOAL if ms == GOAL_INTERVAL_MS else None
            version = ", TV1" if c.transaction_version == 1 else ", TV2" if c.transaction_version == 2 else ""
            ratios[c.name] = _ratio(f"transactional {ms} ms{version} / idempotent", c.name, "idempotent", goal,
                                    summaries, runs)
            if f"flush-{ms}" in summaries:
                ratios[f"{c.name}-vs-flush"] = _ratio(
                    f"transactional {ms} ms{version} / idempotent flushing every {ms} ms (the transactions' own cost)",
                    c.name, f"flush-{ms}", None, summaries, runs)
            if c.transaction_version == 2 and f"{c.name}-tv1" in summaries:
                tv = _ratio(f"transactional {ms} ms: transaction.version 2 / 1", c.name, f"{c.name}-tv1", None,
                            summaries, runs)
                p99 = [((summaries[n] or {}).get("latency_ms") or {}).get("commit_p99")
                       for n in (c.name, f"{c.name}-tv1")]
                tv["commit_p99_ms"] = p99
                tv["commit_p99_ratio"] = round(p99[0] / p99[1], 3) if p99[0] and p99[1] else None
                ratios[f"{c.name}-tv2-vs-tv1"] = tv
        else:
            ratios[c.name] = _ratio(f"idempotent flushing every {ms} ms / idempotent (control)", c.name,
                                    "idempotent", None, summaries, runs)
    load_phases = {f"produce {c.name}" for c in cases}
    return {
        "schema": SCHEMA_VERSION,
        "benchmark": "transactions" if args.client == "librdkafka" else f"transactions-{args.client}",
        "timestamp": started.isoformat(timespec="seconds"),
        "load_avg_at_end": [round(x, 2) for x in os.getloadavg()],
        "machine": facts,
        "workload": {
            "seconds_per_case": args.seconds, "rounds": args.rounds, "record_bytes": RECORD_SIZE,
            "partitions": PARTITIONS, "intervals_ms": list(args.intervals), "controls_ms": list(args.controls),
            "enqueue_chunk": ENQUEUE_CHUNK,
            "client": CLIENT_LABELS[args.client], "mb": "2^20 bytes of record values",
            "tv1_intervals_ms": [c.interval_ms for c in cases if c.transaction_version == 1],
            "abort_probe_records_per_partition": ABORT_PROBE,
        },
        "cases": summaries,
        "runs": {k: [m.to_json() for m in v] for k, v in runs.items()},
        "ratios": ratios,
        "failures": failures,
        "verified": not failures and all(m.extra["verification"]["ok"] for v in runs.values() for m in v),
        "rss": {"interval_s": sampler.interval, "summary": sampler.summary(load_phases),
                "series_columns": ["t_s", "rss_mb", "broker_cpu_s", "phase"], "series": sampler.series()},
        "broker_log": {"warnings": broker_log.count(" WARNING "), "errors": broker_log.count(" ERROR ")},
    }


def _fmt(v: float | None, spec: str = ",.1f") -> str:
    return "" if v is None else format(v, spec)


def render(results: dict[str, Any]) -> None:
    w = results["workload"]
    table = Table(title=f"eoslog transactions benchmark — {w['seconds_per_case']:g} s per case, "
                  f"{w['record_bytes']} B records, {w['partitions']} partitions, best of {w['rounds']} round(s); "
                  "a cycle is one transaction (or, for a control, one flush interval)")
    for col in ("case", "MB/s", "each round", "records/s", "cycles/s", "MB/cycle", "cycle ms",
                "flush p50/p99 ms", "commit p50/p99 ms", "broker CPU s", "MB/broker CPU s", "client CPU s",
                "verified"):
        table.add_column(col, justify="left" if col == "case" else "right", no_wrap=True)
    for name, runs in results["runs"].items():
        s = results["cases"].get(name)
        if s is None:
            table.add_row(name, *[""] * 11, "[red]FAILED[/]")
            continue
        lat = s.get("latency_ms", {})
        table.add_row(
            name, f"[bold]{_fmt(s['mb_s'])}[/]", ", ".join(f"{r:.0f}" for r in s["rounds_mb_s"]),
            _fmt(s["records_s"], ",.0f"), _fmt(s.get("cycles_s")), _fmt(s.get("mb_per_cycle")),
            _fmt(s.get("cycle_ms"), ",.0f"),
            f"{_fmt(lat.get('flush_p50'))}/{_fmt(lat.get('flush_p99'))}" if lat else "",
            f"{_fmt(lat.get('commit_p50'), '.2f')}/{_fmt(lat.get('commit_p99'), '.2f')}"
            if lat.get("commit_p50") is not None else "",
            str(s["extra"].get("broker_cpu_s", "")), _fmt(s.get("mb_per_broker_cpu_s"), ",.0f"),
            str(s["extra"].get("client_cpu_s", "")),
            "[green]yes[/]" if all(r["extra"]["verification"]["ok"] for r in runs) else "[red]FAILED[/]",
        )
    console.print(table)
    console.print("; ".join(f"{name}: {runs[0]['name']}" for name, runs in results["runs"].items() if runs))
    ratios = Table(title="ratios of MB/s (same run; the goal is reported, not asserted)")
    for col in ("ratio", "best / best", "each round (median)", "per broker CPU s", "goal", ""):
        ratios.add_column(col, justify="left" if col == "ratio" else "right", no_wrap=col != "ratio")
    for r in results["ratios"].values():
        if r["value"] is None:
            ratios.add_row(r["label"], "[red]n/a[/]", "", "", "", r.get("why", ""))
            continue
        goal = "" if r["goal"] is None else f"≥ {r['goal']}"
        mark = "" if r["met"] is None else ("[green]met[/]" if r["met"] else "[red]below goal[/]")
        per_round = ", ".join(f"{x:.2f}" for x in r["rounds"])
        if r["rounds_median"] is not None:
            per_round += f" ({r['rounds_median']:.2f})"
        ratios.add_row(r["label"], f"[bold]{r['value']:.3f}[/]", per_round,
                       _fmt(r["per_broker_cpu_s"], ".3f"), goal, mark)
    console.print(ratios)
    for name, runs in results["runs"].items():
        for r in runs:
            v = r["extra"]["verification"]
            if not v["ok"]:
                console.print(f"[red]{name} round {r['extra']['round'] + 1}: {v['problems']}[/]")
            if r["extra"].get("failed_transactions"):
                console.print(f"[yellow]{name} round {r['extra']['round'] + 1}: {r['extra']['failed_transactions']} "
                              f"transactions aborted: {r['extra']['failures'][:3]}[/]")
            if r["extra"].get("client_errors"):
                console.print(f"[yellow]{name}: client errors: {r['extra']['client_errors'][:3]}[/]")
    for f in results["failures"]:
        console.print(f"[red]{f['case']} round {f['round'] + 1} failed: {f['error']}[/]")
    if results["broker_log"]["errors"] or results["broker_log"]["warnings"]:
        console.print(f"[yellow]the broker logged {results['broker_log']['errors']} ERROR and "
                      f"{results['broker_log']['warnings']} WARNING lines[/]")
    s = results["rss"]["summary"]
    console.print(f"broker RSS under load: start {s.get('start_mb')} MB, peak {s.get('peak_mb')} MB, "
                  f"end {s.get('end_mb')} MB; slope {s.get('slope_mb_per_min')} MB/min")


def save(results: dict[str, Any]) -> list[Path]:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = results["timestamp"].replace(":", "").replace("-", "")[:15]
    name = results["benchmark"]
    paths = [RESULTS_DIR / f"{name}-{stamp}.json", RESULTS_DIR / f"{name}-latest.json"]
    text = json.dumps(results, indent=1) + "\n"
    for p in paths:
        tmp = p.with_suffix(".json.tmp")
        tmp.write_text(text)
        tmp.replace(p)
    from plot import plot_transactions

    png = RESULTS_DIR / f"{name}-latest.png"
    plot_transactions(results, png)
    return [*paths, png]


# -- profile ---------------------------------------------------------------------------------


# Frames of the transaction machinery: coordinator, its handlers, markers in the log.
TXN_CODE = re.compile(r"coordinator/transaction/|handlers/transactions\.py|write_txn_marker|verify_transactional_batch")


def _share_of(raw: Path, frames: re.Pattern[str]) -> dict[str, Any]:
    """Share of a py-spy raw profile's samples with a frame matching ``frames``, and how
    it splits by the outermost matching frame (which request or task it serves)."""
    total = hit = 0
    by_entry: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        total += int(count)
        entry = next((f for f in stack.split(";") if frames.search(f)), None)
        if entry is not None:
            hit += int(count)
            by_entry[re.sub(r":\d+\)$", ")", entry)] += int(count)
    return {"share": round(hit / total, 4) if total else 0.0,
            "by_entry": [{"function": f, "share": round(n / total, 4)} for f, n in by_entry.most_common(10)]}


def profile(args: argparse.Namespace) -> int:
    """py-spy (busy samples, line numbers) on the broker during the idempotent case and
    each interval, one after the other on one broker."""
    from hotspots import analyse, py_spy, record

    if py_spy() is None:
        raise SystemExit("py-spy not found: pip install py-spy")
    if args.client != "librdkafka":
        raise SystemExit("--profile drives the broker with librdkafka only")
    broker_src = use_broker_src(args.broker_src)
    cases = cases_for(args.intervals, args.controls)
    work = Path(tempfile.mkdtemp(prefix="eoslog-txn-hotspots-", dir=args.work_dir))
    broker = BrokerProcess(work / "data", overrides={"num.partitions": str(PARTITIONS)})
    phases: dict[str, Any] = {}
    try:
        broker.start()
        assert broker.proc is not None
        prime_coordinator(broker.bootstrap)
        for case in cases:
            raw = work / f"{case.name}.txt"
            recycle_pages(work, RECYCLE_MAX_MB * MB // 2)
            holder: dict[str, Sent] = {}

            def load(case: Case = case, holder: dict[str, Sent] = holder) -> Measurement:
                m, holder["sent"] = run_case(broker.bootstrap, f"hotspots-{case.name}", case, args.seconds)
                return m

            m, cpu = record(broker.proc.pid, raw, 200, load, idle=False, lineno=True)
            check = verify(broker.bootstrap, f"hotspots-{case.name}", holder["sent"])
            phases[case.name] = {
                "mb_s": round(m.mb_s, 1), "seconds": round(m.seconds, 2), "broker_cpu_s": round(cpu, 2),
                "busy": round(cpu / m.seconds, 3) if m.seconds else None, "verified": check["ok"],
                "cycles": m.extra.get("cycles"), "transaction_code": _share_of(raw, TXN_CODE),
                **analyse(raw, 25),
            }
    finally:
        if broker.alive():
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    for name, ph in phases.items():
        console.print(f"[bold]{name}[/]: {ph['mb_s']} MB/s over {ph['seconds']} s, broker CPU {ph['broker_cpu_s']} s "
                      f"({ph['busy']:.0%} of one core), {ph['cycles']} cycles, verified {ph['verified']}; "
                      f"samples in the transaction machinery (coordinator, its handlers, markers): "
                      f"{ph['transaction_code']['share']:.1%}")
        for r in ph["transaction_code"]["by_entry"]:
            console.print(f"  {r['share']:6.1%}  {r['function']}")
        for kind in ("self", "total", "lines"):
            t = Table(title=f"{name}: top by {kind} samples (share of {ph['samples']} busy samples)")
            t.add_column("function" if kind != "lines" else "line")
            t.add_column("share", justify="right")
            for r in ph.get(kind, [])[:15]:
                t.add_row(r["function"], f"{r['share']:.1%}")
            console.print(t)
    if not args.no_save:
        out = RESULTS_DIR / "transactions-hotspots-latest.json"
        out.write_text(json.dumps({
            "timestamp": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "seconds": args.seconds, "rate": 200, "samples": "busy only (py-spy without --idle), line numbers",
            "machine": machine_facts(RESULTS_DIR, broker_src), "phases": phases,
        }, indent=1) + "\n")
        console.print(f"wrote {out}")
    return 0


def figures(results: dict[str, Any]) -> against.Figures:
    """What ``--against kafka`` compares, per case with a verified round: MB/s, MB per broker CPU
    second, and the p99 commit (transactions) or flush (controls) time."""
    out: against.Figures = {}
    for name, c in results["cases"].items():
        if c is None:
            continue
        out[f"{name} MB/s"] = (c["mb_s"], True)
        if c["mb_per_broker_cpu_s"]:
            out[f"{name} MB per broker CPU s"] = (c["mb_per_broker_cpu_s"], True)
        p99 = c.get("latency_ms", {}).get("commit_p99" if c["transactional"] else "flush_p99")
        if p99:
            out[f"{name} p99 {'commit' if c['transactional'] else 'flush'} ms"] = (p99, False)
    return out


def main_against(args: argparse.Namespace) -> int:
    """``--against kafka``: every case on both brokers (against.py), each run's table shown as it
    ends; besides against.py's eoslog / Kafka ratios, the results keep each run's cases and ratios
    (``side_runs``) and, with a client that speaks both, TV2 / TV1 per broker (``transaction_versions``)."""
    sides: list[dict[str, Any]] = []

    def run_side(a: argparse.Namespace) -> dict[str, Any]:
        results = run(a)
        results["side"] = a.side
        render(results)
        sides.append(results)
        return results

    def annotate(results: dict[str, Any]) -> None:
        results["client"] = CLIENT_LABELS[args.client]
        results["side_runs"] = [_compact(r) for r in sides]
        results["transaction_versions"] = tv_summary(sides)
        render_versions(results["transaction_versions"])

    from plot import plot_transactions_against

    name = "transactions" if args.client == "librdkafka" else f"transactions-{args.client}"
    return against.main(name, args, run_side, figures, console.print, annotate=annotate,
                        plot_=plot_transactions_against)


def _compact(results: dict[str, Any]) -> dict[str, Any]:
    """One run's results without the per-cycle durations and the RSS series."""
    cases = {}
    for name, c in results["cases"].items():
        if c is not None:
            c = {**c, "extra": {k: v for k, v in c["extra"].items() if k not in ("commit_s", "flush_s")}}
        cases[name] = c
    return {"side": results["side"], "timestamp": results["timestamp"],
            "load_avg_at_start": results["machine"]["load_avg_at_start"], "load_avg_at_end": results["load_avg_at_end"],
            "eoslog_commit": results["machine"]["eoslog_commit"], "verified": results["verified"],
            "failures": results["failures"], "cases": cases, "ratios": results["ratios"],
            "rss": results["rss"]["summary"], "broker_log": results["broker_log"]}


def tv_summary(sides: list[dict[str, Any]]) -> dict[str, Any]:
    """TV2 / TV1 per broker and interval, from each run's interleaved rounds: each run's best over
    best, every round's own ratio (the median of those is the figure to quote) and the p99
    commit times' ratio."""
    out: dict[str, Any] = {}
    for r in sides:
        for key, ratio in r["ratios"].items():
            if not key.endswith("-tv2-vs-tv1"):
                continue
            entry = out.setdefault(r["side"], {}).setdefault(key.removesuffix("-tv2-vs-tv1"), {
                "mb_s_best_over_best": [], "mb_s_rounds": [], "commit_p99_ms_tv2_tv1": [], "commit_p99_ratio": []})
            entry["mb_s_best_over_best"].append(ratio["value"])
            entry["mb_s_rounds"].extend(ratio.get("rounds", []))
            entry["commit_p99_ms_tv2_tv1"].append(ratio.get("commit_p99_ms"))
            entry["commit_p99_ratio"].append(ratio.get("commit_p99_ratio"))
    for per_side in out.values():
        for entry in per_side.values():
            rounds = entry["mb_s_rounds"]
            entry["mb_s_rounds_median"] = round(statistics.median(rounds), 3) if rounds else None
            p99 = [x for x in entry["commit_p99_ratio"] if x is not None]
            entry["commit_p99_ratio_median"] = round(statistics.median(p99), 3) if p99 else None
    return out


def render_versions(summary: dict[str, Any]) -> None:
    for side, per_case in summary.items():
        console.print(f"transaction.version 2 / 1 on {side} (same broker, interleaved rounds):")
        for case, e in per_case.items():
            console.print(f"  {case}: MB/s median of the rounds' ratios {_fmt(e['mb_s_rounds_median'], '.3f')} "
                          f"(rounds {e['mb_s_rounds']}; best/best per run {e['mb_s_best_over_best']}); "
                          f"p99 commit ms TV2/TV1 per run {e['commit_p99_ms_tv2_tv1']}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.profile:
        return profile(args)
    if args.against:
        return main_against(args)
    results = run(args)
    render(results)
    if not args.no_save:
        for p in save(results):
            console.print(f"wrote {p.relative_to(Path.cwd()) if p.is_relative_to(Path.cwd()) else p}")
    return 0 if results["verified"] else 1


if __name__ == "__main__":
    sys.exit(main())

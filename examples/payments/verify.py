"""The verifier: recompute what the job should have written, read what it wrote, compare.

It reads with librdkafka (confluent-kafka), ``isolation.level=read_committed`` — a client
independent of eoslog's — so a reader bug in eoslog cannot hide itself. From the committed
input in ``payments`` it recomputes, with ``events.classify``, every balance (account,
currency, window) and every dead letter (source partition and offset, reason); then it
reads ``balances`` and ``payments-dlq`` and checks that each expected record was written
exactly once with the expected content, and that nothing else was written.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from rich.console import Console
from rich.table import Table

from payments import events as ev

BalanceKey = tuple[str, str, datetime]  # account, currency, window start
Balance = tuple[Decimal, int]  # total, payments


@dataclass
class Record:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass
class Verdict:
    expected: dict[BalanceKey, Balance] = field(default_factory=dict)
    written: dict[BalanceKey, list[Balance]] = field(default_factory=dict)
    expected_dlq: dict[tuple[int, int], str] = field(default_factory=dict)
    written_dlq: dict[tuple[int, int], list[str]] = field(default_factory=dict)
    input_records: int = 0
    payments: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def read_committed(bootstrap: str, topic: str, timeout_s: float = 60.0) -> list[Record]:
    """Every record a read_committed consumer sees in ``topic``, from the beginning to the end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "payments-verifier",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "log.connection.close": False})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        records: list[Record] = []
        # The last offsets may be transaction markers, which are never delivered: a partition
        # is done once the consumer's position (past markers) or a delivered record reaches its end.
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + timeout_s
        while len(done) < len(ends):
            if time.monotonic() > deadline:
                raise RuntimeError(f"verifier: could not read {topic} to its end within {timeout_s:.0f} s")
            for msg in consumer.consume(num_messages=2000, timeout=0.5):
                if msg.error() is not None:
                    raise RuntimeError(f"verifier: reading {topic}: {msg.error().str()}")
                records.append(Record(msg.partition(), msg.offset(), msg.key(), msg.value()))
                if msg.offset() + 1 >= ends[msg.partition()]:
                    done.add(msg.partition())
            for tp in consumer.position([TopicPartition(topic, p) for p in ends if p not in done]):
                if tp.offset >= ends[tp.partition]:
                    done.add(tp.partition)
        return records
    finally:
        consumer.close()


def expected_from_input(verdict: Verdict, records: list[Record]) -> None:
    totals: dict[BalanceKey, list[Any]] = defaultdict(lambda: [Decimal(0), 0])
    for r in records:
        event = ev.classify(r.value)
        if isinstance(event, ev.Invalid):
            verdict.expected_dlq[(r.partition, r.offset)] = event.reason
        elif isinstance(event, ev.Payment):
            entry = totals[(event.account, event.currency, event.window_start)]
            entry[0] += event.amount
            entry[1] += 1
            verdict.payments += 1
    verdict.input_records = len(records)
    verdict.expected = {k: (v[0], v[1]) for k, v in totals.items()}


def written_balances(verdict: Verdict, records: list[Record]) -> None:
    for r in records:
        doc = json.loads(r.value or b"null", parse_float=Decimal)
        key = (doc["account"], doc["currency"], datetime.fromisoformat(doc["window_start"]))
        verdict.written.setdefault(key, []).append((Decimal(doc["total"]), int(doc["payments"])))


def written_dead_letters(verdict: Verdict, records: list[Record]) -> None:
    for r in records:
        doc = json.loads(r.value or b"null")
        verdict.written_dlq.setdefault((doc["source_partition"], doc["source_offset"]), []).append(doc["reason"])


def _balance(b: Balance | None) -> str:
    return "-" if b is None else f"{b[0]:,.2f} / {b[1]}"


def compare(verdict: Verdict) -> None:
    for key in sorted(verdict.expected.keys() | verdict.written.keys()):
        name = f"{key[0]} {key[1]} window {ev.format_time(key[2])}"
        want, got = verdict.expected.get(key), verdict.written.get(key, [])
        if want is None:
            verdict.problems.append(f"{name}: written ({', '.join(map(_balance, got))}) but not expected")
        elif not got:
            verdict.problems.append(f"{name}: expected {_balance(want)}, not written")
        elif len(got) > 1:
            verdict.problems.append(f"{name}: written {len(got)} times: {', '.join(map(_balance, got))}")
        elif got[0] != want:
            verdict.problems.append(f"{name}: expected {_balance(want)}, written {_balance(got[0])}")
    for where in sorted(verdict.expected_dlq.keys() | verdict.written_dlq.keys()):
        want_reason, got_reasons = verdict.expected_dlq.get(where), verdict.written_dlq.get(where, [])
        name = f"dead letter for payments-{where[0]}@{where[1]}"
        if want_reason is None:
            verdict.problems.append(f"{name}: written but the event is valid: {got_reasons}")
        elif got_reasons != [want_reason]:
            verdict.problems.append(f"{name}: expected [{want_reason!r}], written {got_reasons}")


def verify(bootstrap: str, source: str, balances_topic: str, dlq_topic: str) -> Verdict:
    verdict = Verdict()
    expected_from_input(verdict, read_committed(bootstrap, source))
    written_balances(verdict, read_committed(bootstrap, balances_topic))
    written_dead_letters(verdict, read_committed(bootstrap, dlq_topic))
    compare(verdict)
    return verdict


def _status(want: Balance | None, got: list[Balance]) -> str:
    if want is None:
        return "[red]unexpected"
    if not got:
        return "[red]missing"
    if len(got) > 1:
        return f"[red]written {len(got)} times"
    return "[green]✓" if got[0] == want else "[red]differs"


def report(console: Console, verdict: Verdict) -> None:
    table = Table(title="balances per account and 5-minute window (total / payments): expected, recomputed "
                        "from the committed input, vs written by the Spark job", title_justify="left")
    for name in ("account", "ccy", "window (UTC)", "expected", "written", ""):
        table.add_column(name, justify="right" if name in ("expected", "written") else "left")
    previous = None
    for key in sorted(verdict.expected.keys() | verdict.written.keys()):
        want, got = verdict.expected.get(key), verdict.written.get(key, [])
        if previous is not None and previous != key[0]:
            table.add_section()
        previous = key[0]
        written = _balance(got[0]) if len(got) == 1 else ("-" if not got else " + ".join(map(_balance, got)))
        table.add_row(key[0], key[1], f"{key[2]:%H:%M}-{key[2] + ev.WINDOW:%H:%M}", _balance(want), written,
                      _status(want, got))
    console.print(table)

    reasons = Table(title="dead letters by reason", title_justify="left")
    for name in ("reason", "expected", "written", ""):
        reasons.add_column(name, justify="left" if name == "reason" else "right")
    want_counts = Counter(verdict.expected_dlq.values())
    got_counts = Counter(r for rs in verdict.written_dlq.values() for r in rs)
    for reason in sorted(want_counts.keys() | got_counts.keys()):
        same = want_counts[reason] == got_counts[reason]
        reasons.add_row(reason, str(want_counts[reason]), str(got_counts[reason]), "[green]✓" if same else "[red]✗")
    console.print(reasons)

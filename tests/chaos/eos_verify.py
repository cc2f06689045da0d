"""Verification for the transactional copy test: read_committed readers and the diagnosis.

- ``CommittedReader``: a read_committed consumer of every partition of a topic, from the
  beginning, on a background thread (one runs throughout the copy, one at the end). It
  keeps each record with its partition and offset and the copier's headers.
- ``check_copy``: the exactly-once checks - no duplicate, output set == input set, no
  record of a transaction meant to abort, order kept (per input partition within each
  output partition; the whole sequence when both topics have one partition) - returning
  a list of precise findings (empty = pass).
- ``explain``: for the offending offsets, the batches and markers around them from
  ``python -m eoslog dump-log --deep-iteration``, with the marker that closed each
  offending record's transaction.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from copier import H_INTENT, H_SRC, H_TXN

MAX_LISTED = 10  # findings list at most this many examples each


@dataclass(frozen=True, slots=True)
class OutputRecord:
    partition: int
    offset: int
    value: bytes
    intent: str  # "commit" | "abort" | "?" (header missing)
    txn: str
    src: str  # "<input partition>/<input offset>"

    @property
    def where(self) -> str:
        return f"p{self.partition}@{self.offset} txn={self.txn} src={self.src}"


def _header(headers: Iterable[tuple[str, str | bytes | None]] | dict[str, str | bytes | None] | None,
            name: str) -> str:
    pairs = headers.items() if isinstance(headers, dict) else headers or ()
    for k, v in pairs:
        if k == name and v is not None:
            return v.decode() if isinstance(v, bytes) else v
    return "?"


class CommittedReader:
    """read_committed consumer over ``partitions`` of ``topic`` from offset 0, on a thread
    (librdkafka's; ``EoslogCommittedReader`` is the same with eoslog.client's)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, name: str) -> None:
        self.bootstrap, self.topic, self.partitions, self.name = bootstrap, topic, partitions, name
        self.records: list[OutputRecord] = []
        self.positions: dict[int, int] = {p: 0 for p in range(partitions)}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"reader-{name}", daemon=True)
        self._open()

    def _open(self) -> None:
        self._consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": f"verify-{self.name}", "enable.auto.commit": False,
            "isolation.level": "read_committed", "auto.offset.reset": "earliest",
            "reconnect.backoff.max.ms": 1000, "fetch.max.bytes": 8 << 20,
        })
        self._consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])

    def start(self) -> CommittedReader:
        self._thread.start()
        return self

    def _run(self) -> None:
        tps = [TopicPartition(self.topic, p) for p in range(self.partitions)]
        while not self._stop.is_set():
            for m in self._consumer.consume(2000, 0.2):
                err = m.error()
                if err is not None:
                    self.errors.append(str(err))  # transport errors through broker kills
                    continue
                self.records.append(OutputRecord(
                    int(m.partition() or 0), int(m.offset() or 0), m.value() or b"", _header(m.headers(), H_INTENT),
                    _header(m.headers(), H_TXN), _header(m.headers(), H_SRC)))
            for tp in self._consumer.position(tps):
                if tp.offset >= 0:
                    self.positions[tp.partition] = tp.offset
        self._consumer.close()

    def caught_up(self, ends: dict[int, int]) -> bool:
        return all(self.positions[p] >= end for p, end in ends.items())

    def wait_caught_up(self, ends: dict[int, int], timeout_s: float) -> bool:
        """Wait until the position of every partition reached ``ends`` (a hang guard)."""
        deadline = time.monotonic() + timeout_s
        while not self.caught_up(ends):
            if time.monotonic() > deadline or not self._thread.is_alive():
                return False
            time.sleep(0.2)
        return True

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


class EoslogCommittedReader(CommittedReader):
    """The read_committed reader on eoslog.client's Consumer: assign, seek to 0, poll; its
    position is where its aborted-transaction filter and the markers left it."""

    def _open(self) -> None:
        from eoslog.client.consumer import Consumer as EoslogConsumer
        from eoslog.client.consumer import TopicPartition as EoslogTopicPartition

        self._tps = [EoslogTopicPartition(self.topic, p) for p in range(self.partitions)]
        self._eoslog = EoslogConsumer({
            "bootstrap.servers": self.bootstrap, "isolation.level": "read_committed",
            "reconnect.backoff.max.ms": 1000, "fetch.max.bytes": 8 << 20, "max.poll.records": 2000,
        })
        self._eoslog.assign(self._tps)
        for tp in self._tps:
            self._eoslog.seek(tp, 0)

    def _run(self) -> None:
        from eoslog.client.errors import KafkaError

        c = self._eoslog
        while not self._stop.is_set():
            try:
                records = c.poll(0.2)
            except KafkaError as e:  # raised once from poll(); the consumer carries on
                self.errors.append(repr(e))
                continue
            for r in records:
                self.records.append(OutputRecord(r.partition, r.offset, r.value or b"", _header(r.headers, H_INTENT),
                                                 _header(r.headers, H_TXN), _header(r.headers, H_SRC)))
            for tp in self._tps:
                self.positions[tp.partition] = c.position(tp)
        c.close()


def end_offsets(bootstrap: str, topic: str, partitions: int) -> tuple[dict[int, int], dict[int, int]]:
    """(high watermarks, last stable offsets) of each partition, by ListOffsets with each
    isolation level."""
    out = []
    for isolation in ("read_uncommitted", "read_committed"):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify-ends",
                      "isolation.level": isolation})
        try:
            out.append({p: int(c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1])
                        for p in range(partitions)})
        finally:
            c.close()
    return out[0], out[1]


# -- checks ----------------------------------------------------------------------------------


@dataclass
class Findings:
    """What is wrong with one reader's view; ``offending`` are the (partition, offset)s to explain."""

    reader: str
    problems: list[str] = field(default_factory=list)
    offending: list[tuple[int, int]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.problems)


def _ranges(numbers: Iterable[int]) -> str:
    """1,2,3,7,9,10 -> '1-3, 7, 9-10' (at most MAX_LISTED ranges)."""
    out: list[str] = []
    start = prev = None
    for n in sorted(numbers):
        if prev is not None and n == prev + 1:
            prev = n
            continue
        if start is not None:
            out.append(f"{start}-{prev}" if start != prev else str(start))
        start = prev = n
    if start is not None:
        out.append(f"{start}-{prev}" if start != prev else str(start))
    more = f" ... ({len(out) - MAX_LISTED} more ranges)" if len(out) > MAX_LISTED else ""
    return ", ".join(out[:MAX_LISTED]) + more


def check_copy(reader: str, records: Sequence[OutputRecord], inputs: dict[int, list[bytes]],
               *, check_total_order: bool) -> Findings:
    """``inputs``: the values of each input partition in offset order. Values are the
    decimal record numbers, so findings can name numbers."""
    f = Findings(reader)
    number_of = {v: int(v) for vs in inputs.values() for v in vs}
    source_of = {v: (p, o) for p, vs in inputs.items() for o, v in enumerate(vs)}

    aborted = [r for r in records if r.intent != "commit"]
    if aborted:
        f.problems.append(
            f"{len(aborted)} records of transactions that were not meant to commit "
            f"(header {H_INTENT}) are visible to read_committed, e.g. "
            + "; ".join(r.where + f" intent={r.intent}" for r in aborted[:MAX_LISTED]))
        f.offending += [(r.partition, r.offset) for r in aborted[:3]]

    by_value: dict[bytes, list[OutputRecord]] = defaultdict(list)
    for r in records:
        by_value[r.value].append(r)
    dups = {v: rs for v, rs in by_value.items() if len(rs) > 1}
    if dups:
        lines = [f"  number {v.decode()}: " + " | ".join(r.where for r in rs)
                 for v, rs in list(dups.items())[:MAX_LISTED]]
        f.problems.append(f"{sum(len(rs) - 1 for rs in dups.values())} duplicates of {len(dups)} numbers:\n"
                          + "\n".join(lines))
        for rs in list(dups.values())[:2]:
            f.offending += [(r.partition, r.offset) for r in rs]

    missing = [v for v in number_of if v not in by_value]
    if missing:
        per_input: dict[int, list[int]] = defaultdict(list)
        for v in missing:
            per_input[source_of[v][0]].append(source_of[v][1])
        f.problems.append(f"{len(missing)} of {len(number_of)} input records never seen; input offsets: "
                          + "; ".join(f"partition {p}: {_ranges(os)}" for p, os in sorted(per_input.items())))
    extra = [v for v in by_value if v not in number_of]
    if extra:
        f.problems.append(f"{len(extra)} values that were never input, e.g. {extra[:MAX_LISTED]}")

    # Order: one copier per input partition produces in input order, and read_committed
    # returns a partition in offset order, so per (output, input) partition the input
    # offsets must rise.
    last: dict[tuple[int, int], OutputRecord] = {}
    disorders = []
    for r in records:
        if r.value not in source_of:
            continue
        ip, io = source_of[r.value]
        prev = last.get((r.partition, ip))
        if prev is not None and source_of[prev.value][1] >= io:
            disorders.append(f"p{r.partition}: input p{ip}@{io} ({r.where}) after "
                             f"input p{ip}@{source_of[prev.value][1]} ({prev.where})")
        last[(r.partition, ip)] = r
    if disorders:
        f.problems.append(f"{len(disorders)} records out of input order: " + "; ".join(disorders[:MAX_LISTED]))
    if check_total_order:
        expected = [v for p in sorted(inputs) for v in inputs[p]]
        got = [r.value for r in records]
        if got != expected:
            i = next((i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b),
                     min(len(got), len(expected)))
            at = records[i].where if i < len(records) else "end of output"
            f.problems.append(f"output order differs from input order first at index {i}: "
                              f"got {got[i:i + 3]!r}, expected {expected[i:i + 3]!r} ({at})")
    return f


# -- dump-log diagnosis -------------------------------------------------------------------------

_BATCH = re.compile(r"baseOffset: (\d+) lastOffset: (\d+) .*?producerId: (-?\d+) producerEpoch: (-?\d+) "
                    r".*?isTransactional: (\w+) isControl: (\w+)")
_MARKER = re.compile(r"endTxnMarker: (\w+) coordinatorEpoch: (-?\d+)")


@dataclass
class _Batch:
    base: int
    last: int
    producer_id: int
    epoch: int
    transactional: bool
    control: bool
    line: str
    segment: str = ""  # the .log file holding the batch
    marker: str = ""


def _batches(partition_dir: Path) -> list[_Batch]:
    segments = sorted(partition_dir.glob("*.log"))
    if not segments:
        return []
    out = subprocess.run([sys.executable, "-m", "eoslog", "dump-log", "--deep-iteration", *map(str, segments)],
                         capture_output=True, text=True, timeout=120).stdout
    batches: list[_Batch] = []
    segment = ""
    for line in out.splitlines():
        if line.startswith("Dumping "):
            segment = Path(line.split(maxsplit=1)[1]).name
            continue
        m = _BATCH.search(line)
        if m:
            batches.append(_Batch(int(m[1]), int(m[2]), int(m[3]), int(m[4]), m[5] == "true",
                                  m[6] == "true", line, segment))
            continue
        mm = _MARKER.search(line)
        if mm and batches:
            batches[-1].marker = f"{mm[1]} (coordinatorEpoch {mm[2]})"
    return batches


def explain(data_dir: Path, topic: str, offending: Sequence[tuple[int, int]], window: int = 4) -> str:
    """For each (partition, offset): the batch holding it, the marker that closed its
    transaction, and the batches around it, from dump-log."""
    out: list[str] = []
    cache: dict[int, list[_Batch]] = {}
    for partition, offset in list(dict.fromkeys(offending))[:6]:
        if partition not in cache:
            cache[partition] = _batches(data_dir / f"{topic}-{partition}")
        batches = cache[partition]
        idx = next((i for i, b in enumerate(batches) if b.base <= offset <= b.last), None)
        if idx is None:
            out.append(f"{topic}-{partition} offset {offset}: no batch holds it in dump-log")
            continue
        b = batches[idx]
        closing = next((c for c in batches[idx + 1:] if c.control and c.producer_id == b.producer_id), None)
        if not b.transactional:
            outcome = "not transactional"
        elif closing is None:
            outcome = "no marker of that producer after it (open transaction?)"
        else:
            outcome = (f"closed by {closing.marker} at offset {closing.base} epoch {closing.epoch}"
                       + ("" if closing.segment == b.segment else f" in a later segment, {closing.segment}"))
        out.append(f"{topic}-{partition} offset {offset}: batch {b.base}-{b.last} in {b.segment} "
                   f"producerId {b.producer_id} epoch {b.epoch}: {outcome}")
        for c in batches[max(0, idx - window): idx + window + 1]:
            mark = ">>" if c is b else "  "
            out.append(f"  {mark} {c.line}" + (f"  [{c.marker}]" if c.marker else ""))
    return "\n".join(out)

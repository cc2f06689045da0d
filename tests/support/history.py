"""A history checker in the spirit of Jepsen's Kafka workload (issue 13, test 6).

Clients of a fault test record what they did and saw into a ``History``: each send with its
outcome (``ok`` acknowledged, ``fail`` refused for sure, ``info`` unknown — a timeout or a
lost connection), the outcome of each transaction, each record a consumer polled (with the
consumer, partition and offset), reassignments, and at the end a complete read of every
partition. ``check`` then looks for Jepsen's anomalies and says what it checked:

- lost write: an acknowledged send (of a committed transaction, when transactional) missing
  from the final read;
- duplicate: one value at more than one offset;
- aborted read: a value of an aborted transaction read by a read_committed consumer or present
  in the final read_committed read;
- inconsistent offsets: one (partition, offset) seen holding different values;
- non-monotonic poll: a consumer's successive records of a partition not at increasing offsets
  (between two assignments of that partition).

Values must be unique per send (the writers number them).
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field

OK, FAIL, INFO = "ok", "fail", "info"
COMMIT, ABORT = "commit", "abort"
MAX_LISTED = 10


@dataclass(frozen=True, slots=True)
class Send:
    value: bytes
    outcome: str  # OK, FAIL or INFO
    txn: str | None = None


@dataclass(frozen=True, slots=True)
class Poll:
    consumer: str
    partition: int
    offset: int
    value: bytes


@dataclass
class History:
    sends: list[Send] = field(default_factory=list)
    txns: dict[str, str] = field(default_factory=dict)  # txn → COMMIT, ABORT or INFO
    polls: list[Poll | tuple[str, str, int]] = field(default_factory=list)  # ("assign", consumer, p)
    final: dict[int, list[tuple[int, bytes]]] = field(default_factory=dict)  # read_committed, whole log
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def send(self, value: bytes, outcome: str, txn: str | None = None) -> None:
        with self._lock:
            self.sends.append(Send(value, outcome, txn))

    def txn(self, txn: str, outcome: str) -> None:
        with self._lock:
            self.txns[txn] = outcome

    def poll(self, consumer: str, partition: int, offset: int, value: bytes) -> None:
        with self._lock:
            self.polls.append(Poll(consumer, partition, offset, value))

    def assign(self, consumer: str, partition: int) -> None:
        """The consumer (re)starts reading ``partition`` somewhere: monotony restarts."""
        with self._lock:
            self.polls.append(("assign", consumer, partition))

    def final_read(self, partition: int, records: list[tuple[int, bytes]]) -> None:
        with self._lock:
            self.final[partition] = list(records)


@dataclass
class Report:
    checked: list[str]
    anomalies: dict[str, list[str]]

    @property
    def ok(self) -> bool:
        return not any(self.anomalies.values())

    def summary(self) -> str:
        lines = ["history checker (Jepsen's Kafka anomalies):", *("  " + c for c in self.checked)]
        for kind, found in self.anomalies.items():
            lines.append(f"  {kind}: {len(found)}" + ("" if not found else " — " + "; ".join(found[:MAX_LISTED])))
        return "\n".join(lines)


def check(history: History) -> Report:
    polls = [p for p in history.polls if isinstance(p, Poll)]
    final = [(p, o, v) for p, records in history.final.items() for o, v in records]
    aborted = {t for t, outcome in history.txns.items() if outcome == ABORT}
    by_value = {s.value: s for s in history.sends}
    anomalies: dict[str, list[str]] = {k: [] for k in (
        "lost writes", "duplicates", "aborted reads", "inconsistent offsets", "non-monotonic polls")}

    final_values = {v for _, _, v in final}
    for s in history.sends:
        committed = s.txn is None or history.txns.get(s.txn) == COMMIT
        if s.outcome == OK and committed and s.value not in final_values:
            anomalies["lost writes"].append(f"{s.value!r} (txn {s.txn})")

    places: dict[bytes, set[tuple[int, int]]] = defaultdict(set)
    for p, o, v in final:
        places[v].add((p, o))
    for poll in polls:
        places[poll.value].add((poll.partition, poll.offset))
    anomalies["duplicates"] += [f"{v!r} at {sorted(where)}" for v, where in places.items() if len(where) > 1]

    for poll in polls:
        send = by_value.get(poll.value)
        if send is not None and send.txn in aborted:
            anomalies["aborted reads"].append(f"{poll.consumer} read {poll.value!r} of aborted {send.txn}")
    for p, o, v in final:
        send = by_value.get(v)
        if send is not None and send.txn in aborted:
            anomalies["aborted reads"].append(f"final read p{p}@{o}: {v!r} of aborted {send.txn}")

    at: dict[tuple[int, int], set[bytes]] = defaultdict(set)
    for p, o, v in final:
        at[(p, o)].add(v)
    for poll in polls:
        at[(poll.partition, poll.offset)].add(poll.value)
    anomalies["inconsistent offsets"] += [f"p{p}@{o} held {sorted(vs)}" for (p, o), vs in at.items() if len(vs) > 1]

    last: dict[tuple[str, int], int] = {}
    for event in history.polls:
        if isinstance(event, tuple):
            last.pop((event[1], event[2]), None)
            continue
        key = (event.consumer, event.partition)
        if key in last and event.offset <= last[key]:
            anomalies["non-monotonic polls"].append(
                f"{event.consumer} p{event.partition}: offset {event.offset} after {last[key]}")
        last[key] = event.offset

    outcomes = Counter(s.outcome for s in history.sends)
    txn_outcomes = Counter(history.txns.values())
    checked = [
        f"{len(history.sends)} sends ({outcomes[OK]} acknowledged, {outcomes[FAIL]} refused, "
        f"{outcomes[INFO]} indeterminate), {len(history.txns)} transactions ({txn_outcomes[COMMIT]} committed, "
        f"{txn_outcomes[ABORT]} aborted, {txn_outcomes[INFO]} indeterminate)",
        f"{len(polls)} records polled by {len({p.consumer for p in polls})} consumers; final read of "
        f"{len(history.final)} partitions, {len(final)} records",
        "lost writes: every acknowledged send of a committed (or no) transaction in the final read",
        "duplicates: each value at one offset; aborted reads: no value of an aborted transaction read",
        "inconsistent offsets: each offset one value; non-monotonic polls: offsets increase per consumer "
        "and partition between assignments",
    ]
    return Report(checked, anomalies)

"""Issue 26, acceptance test 6: exactly-once queue processing, eoslog's extension (docs/consumer.md).

Share-group workers (``share_worker.py``, processes of their own) copy one partition's records to
an output topic, one transaction per poll, and accept the records inside that transaction. They
are killed -9 at random points of a transaction — before producing, after producing (the copies
flushed, not committed), after accepting (held by the transaction, not committed), after
committing — and started again under the same transactional id; the broker is killed -9 too and
started again. In the end the output read with read_committed holds every input record exactly
once.

The same worker without the extension (commit the output, then acknowledge: Kafka's share
groups) killed after a commit shows duplicates, asserted: the check can catch them.

Mutants the exactly-once test caught (not committed): the share-partition taking an aborted
transaction for committed (``SharePartition._decide`` with ``committed`` forced True), and the
share coordinator writing the accepted records outside the transaction (``write_state``
ignoring ``txn``): each lost the records of the transactions a kill after accepting aborted
(60-170 records missing from the output).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from share_support import BROKER_OVERRIDES, create_topic, group_configs, produce, share_offsets, until

from eoslog.client import Consumer, TopicPartition
from support.harness import BrokerProcess

HERE = Path(__file__).parent
POINTS = ("before-produce", "after-produce", "after-ack", "after-commit")


@dataclass
class Worker:
    """One worker slot: its transactional id, the process now running it, what was planned and seen."""

    slot: int
    transactional_id: str
    proc: subprocess.Popen[str] | None = None
    plans: list[tuple[str, int]] = field(default_factory=list)
    exits: list[int] = field(default_factory=list)
    committed: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Workers:
    """Keeps ``slots`` workers running: a worker that died is started again, with the next
    crash of its plan (at most ``crashes`` per slot, then none), under the same transactional id."""

    def __init__(self, bootstrap: str, group: str, source: str, sink: str, mode: str, log_dir: Path,
                 rng: random.Random, slots: int, crashes: int, points: tuple[str, ...] = POINTS) -> None:
        self.args = ["--bootstrap", bootstrap, "--group", group, "--input", source, "--output", sink,
                     "--mode", mode]
        self.log_dir = log_dir
        self.rng = rng
        self.crashes = crashes
        self.points = points
        tag = uuid.uuid4().hex[:6]
        self.workers = [Worker(i, f"worker-{tag}-{i}") for i in range(slots)]

    def _start(self, w: Worker, plan: tuple[str, int]) -> None:
        w.plans.append(plan)
        cmd = [sys.executable, str(HERE / "share_worker.py"), *self.args, "--transactional-id", w.transactional_id,
               "--crash-at", plan[0], "--crash-in", str(plan[1])]
        with open(self.log_dir / f"worker-{w.slot}.log", "a") as stderr:
            w.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr, text=True)
        proc = w.proc

        def follow() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                event = json.loads(line)
                if event.get("ev") == "txn":
                    with w.lock:
                        w.committed.extend(event["values"])
        threading.Thread(target=follow, daemon=True).start()

    def _plan(self, w: Worker) -> tuple[str, int]:
        """Each slot goes through the points in turn (every point is hit), in a random transaction."""
        if len(w.plans) >= self.crashes:
            return ("none", 0)
        return (self.points[(w.slot + len(w.plans)) % len(self.points)], self.rng.randint(1, 3))

    def start(self) -> None:
        for w in self.workers:
            self._start(w, self._plan(w))

    def supervise(self) -> None:
        """Start again each worker that died."""
        for w in self.workers:
            if w.proc is not None and w.proc.poll() is not None:
                w.exits.append(w.proc.returncode)
                self._start(w, self._plan(w))

    def kills(self) -> int:
        return sum(1 for w in self.workers for code in w.exits if code == -9)

    def stop(self) -> None:
        for w in self.workers:
            if w.proc is not None and w.proc.poll() is None:
                w.proc.kill()
                w.proc.wait(30)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of the test's own (it is killed)."""
    b = BrokerProcess(tmp_path / "data", overrides=BROKER_OVERRIDES).start()
    yield b
    if b.alive():
        b.stop()


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the tests that do not kill it."""
    b = BrokerProcess(tmp_path_factory.mktemp("queue") / "data", overrides=BROKER_OVERRIDES).start()
    yield b
    if b.alive():
        b.stop()


def read_committed(bootstrap: str, topic: str) -> list[str]:
    """Every value of the topic's partition 0 a read_committed consumer reads, once no
    transaction is open there (the killed workers' end by their timeout)."""
    tp = TopicPartition(topic, 0)
    with Consumer({"bootstrap.servers": bootstrap, "isolation.level": "read_uncommitted"}) as c:
        high_watermark = c.end_offsets([tp])[tp]
    with Consumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed",
                   "auto.offset.reset": "earliest", "enable.auto.commit": False}) as c:
        c.assign([tp])
        until(lambda: c.end_offsets([tp])[tp] >= high_watermark, "no transaction open in the output", timeout=120)
        end = c.end_offsets([tp])[tp]
        values: list[str] = []
        while c.position(tp) < end:
            values.extend(r.value.decode() for r in c.poll(1.0))
        return values


def setup_queue(bootstrap: str, total: int) -> tuple[str, str, str]:
    tag = uuid.uuid4().hex[:8]
    source, sink, group = f"in-{tag}", f"out-{tag}", f"g-{tag}"
    create_topic(bootstrap, source)
    create_topic(bootstrap, sink)
    group_configs(bootstrap, group, share_auto_offset_reset="earliest", share_record_lock_duration_ms=15000)
    produce(bootstrap, source, (f"r{i}" for i in range(total)))
    return source, sink, group


def run_until_done(workers: Workers, bootstrap: str, group: str, source: str, total: int, timeout: float,
                   on_progress: Any = None) -> None:
    def done() -> bool:
        workers.supervise()
        start = share_offsets(bootstrap, group, source).start_offset
        if on_progress is not None:
            on_progress(start)
        return start == total
    until(done, "every input record accepted", timeout=timeout,
          describe=lambda: (share_offsets(bootstrap, group, source), [(w.plans, w.exits) for w in workers.workers]))


def test_exactly_once_through_worker_and_broker_kills(broker: BrokerProcess, tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    print("seed", seed)
    total = 400
    source, sink, group = setup_queue(broker.bootstrap, total)
    workers = Workers(broker.bootstrap, group, source, sink, "transactional", tmp_path, random.Random(seed),
                      slots=3, crashes=4)
    killed_broker: list[int] = []

    def kill_broker_once(start: int) -> None:
        if not killed_broker and start >= total // 3:
            killed_broker.append(start)
            broker.kill()
            broker.start()

    workers.start()
    try:
        run_until_done(workers, broker.bootstrap, group, source, total, timeout=300, on_progress=kill_broker_once)
    finally:
        workers.stop()
    output = read_committed(broker.bootstrap, sink)
    counts = Counter(output)
    claimed = {v: w.slot for w in workers.workers for v in w.committed}
    missing = sorted({f"r{i}" for i in range(total)} - set(counts), key=lambda v: int(v[1:]))
    assert sorted(v for v, n in counts.items() if n > 1) == []  # nothing twice
    assert missing == [], [(v, claimed.get(v)) for v in missing]  # nothing lost
    assert killed_broker
    plans = [p for w in workers.workers for p in w.plans if p[0] != "none"]
    print(f"{workers.kills()} workers killed at {Counter(p for p, _ in plans)}; broker killed at start offset "
          f"{killed_broker[0]}")
    assert workers.kills() >= 3


@pytest.mark.parametrize("mode", ["at-least-once", "transactional"])
def test_a_worker_killed_after_its_commit(shared_broker: BrokerProcess, tmp_path: Path, mode: str) -> None:
    """Without the extension the records of the transaction killed after its commit come again
    and are copied twice; with it, never."""
    broker = shared_broker
    total = 60
    source, sink, group = setup_queue(broker.bootstrap, total)
    workers = Workers(broker.bootstrap, group, source, sink, mode, tmp_path, random.Random(0), slots=1, crashes=2,
                      points=("after-commit",))
    workers.start()
    try:
        run_until_done(workers, broker.bootstrap, group, source, total, timeout=120)
    finally:
        workers.stop()
    assert workers.kills() == 2
    counts = Counter(read_committed(broker.bootstrap, sink))
    assert set(counts) == {f"r{i}" for i in range(total)}
    twice = sorted(v for v, n in counts.items() if n > 1)
    if mode == "at-least-once":
        assert twice, "the worker without the extension copied nothing twice: the check cannot catch it"
    else:
        assert twice == []

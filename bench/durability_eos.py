"""The exactly-once cases of ``durability.py`` (issue 14): a transactional copy and the Spark
exactly-once sink, each with ``log.flush.policy=group-commit`` against ``kafka`` (no fsync).

Each case gets a pair of fresh brokers (transaction.two.phase.commit.enable=true, for the
sink), its input written beforehand; the group-commit broker is then restarted so that its
fsync count (logged at shutdown) covers the case alone — its warm-up included (Spark's: one
small query per broker, outside the clock). The rounds alternate which broker goes first.

- ``copy``: tests/chaos/copier.py, one process per input partition (consume read_committed,
  produce, offsets in the transaction, ``--copy-txn`` records per transaction, no aborts,
  batch.size ``--copy-batch-bytes``: Kafka's default 16384, where the copy test uses 4096);
  records/s = records / the time from the first copier's start of copying (after
  init_transactions) to the last one's end.
- ``spark-sink``: a pass-through query (eoslog source → eoslog sink, exactly-once, local[2]),
  ``bench/spark_sink.py``'s ``run_case``; records/s = records / the sum of the micro-batches'
  durations.

Every output is verified (``spark_sink.verify``: read_committed, every input record once, no
transaction left open); a case that fails raises.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from common import REPO_ROOT, BrokerProcess
from spark_sink import produce_input, run_case, verify

COPIER = REPO_ROOT / "tests" / "chaos" / "copier.py"
POLICIES = {"group-commit": "group-commit", "no-fsync": "kafka"}
PARTITIONS = 2
VALUE_BYTES = 100


@dataclass
class Side:
    policy: str
    broker: BrokerProcess
    records_s: list[float] = field(default_factory=list)
    loaded_s: float = 0.0


def create_topics(bootstrap: str, names: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in names]).values():
        f.result(60)


def start_pair(work: Path, case: str, topics: list[str], records: int) -> list[Side]:
    """Both brokers, topics made and input written, the group-commit one restarted (fresh count)."""
    sides = []
    for policy, value in POLICIES.items():
        (work / f"{case}-{policy}").mkdir(parents=True, exist_ok=True)
        broker = BrokerProcess(work / f"{case}-{policy}" / "data", overrides={
            "log.flush.policy": value, "transaction.two.phase.commit.enable": "true",
            "num.partitions": str(PARTITIONS)}).start()
        create_topics(broker.bootstrap, topics)
        produce_input(broker.bootstrap, "in", records, VALUE_BYTES)
        if policy == "group-commit":
            broker.restart()
        sides.append(Side(policy, broker))
    return sides


def copy_once(bootstrap: str, out: str, txn: int, batch_bytes: int, tag: str, source: str = "in",
              retry_backoff_ms: int = 100, commits_ms: list[float] | None = None) -> float:
    """One copier per partition of ``source`` into ``out``; seconds from the first one copying to
    the last done. ``commits_ms``: each committed transaction's commit latency is appended
    (send_offsets_to_transaction + commit_transaction, as the copier times it)."""
    marks: dict[str, list[float]] = {"started": [], "done": []}
    procs = [subprocess.Popen(
        [sys.executable, str(COPIER), "--client", "confluent", "--bootstrap", bootstrap, "--input-topic", source,
         "--input-partition", str(p), "--output-topic", out, "--transactional-id", f"{tag}-{p}",
         "--group-id", tag, "--min-txn", str(txn), "--max-txn", str(txn), "--abort-probability", "0",
         "--batch-size", str(batch_bytes), "--retry-backoff-ms", str(retry_backoff_ms)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) for p in range(PARTITIONS)]

    def follow(proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            event = json.loads(line)
            ev = event.get("ev")
            if ev in marks:
                marks[ev].append(time.monotonic())
            elif ev == "txn" and commits_ms is not None and "commit_ms" in event:
                commits_ms.append(float(event["commit_ms"]))  # list.append: safe across the threads

    threads = [threading.Thread(target=follow, args=(p,), daemon=True) for p in procs]
    for t in threads:
        t.start()
    codes = [p.wait(600) for p in procs]
    for t in threads:
        t.join(10)
    if any(codes) or len(marks["done"]) != PARTITIONS:
        raise RuntimeError(f"copy into {out}: copier exit codes {codes}")
    return max(marks["done"]) - min(marks["started"])


def run_pairs(work: Path, case: str, rounds: int, records: int, measure: Callable[[Side, int], float],
              warm_up: Callable[[Side], None] | None = None) -> list[Side]:
    """``measure(side, round)`` -> records/s, the brokers alternating; the pair stopped after."""
    sides = start_pair(work, case, ["in", *(f"out-{r}" for r in range(rounds)), "warmup-in", "warmup-out"],
                       records)
    try:
        for side in sides:
            if warm_up is not None:
                warm_up(side)
        for r in range(rounds):
            for side in sides if r % 2 == 0 else sides[::-1]:
                print(f"round {r + 1}: {case} on {side.policy} …", flush=True)
                t0 = time.perf_counter()
                side.records_s.append(measure(side, r))
                side.loaded_s += time.perf_counter() - t0
                problem = verify(side.broker.bootstrap, f"out-{r}", PARTITIONS, records)
                if problem:
                    raise RuntimeError(f"{case} on {side.policy}, round {r + 1}: {problem}")
    finally:
        for side in sides:
            side.broker.stop()
    return sides


def copy_case(work: Path, rounds: int, records: int, txn: int, batch_bytes: int) -> list[Side]:
    def measure(side: Side, r: int) -> float:
        return records / copy_once(side.broker.bootstrap, f"out-{r}", txn, batch_bytes, f"copy-{side.policy}-{r}")

    return run_pairs(work, "copy", rounds, records, measure)


def spark_case(work: Path, rounds: int, records: int, batches: int) -> list[Side]:
    from eoslog.spark.session import spark_session

    per_batch = -(-records // batches)
    spark: Any = spark_session("eoslog-bench-durability", master="local[2]", work_dir=work / "spark")

    def warm_up(side: Side) -> None:  # the Python workers and the decisions topic, outside the clock
        produce_input(side.broker.bootstrap, "warmup-in", 1000, VALUE_BYTES)
        run_case(spark, side.broker.bootstrap, "warmup-in", "warmup-out", "exactly-once", "arrow", 500,
                 work / side.policy)

    def measure(side: Side, r: int) -> float:
        res = run_case(spark, side.broker.bootstrap, "in", f"out-{r}", "exactly-once", "arrow", per_batch,
                       work / side.policy)
        return float(res["records_s"])

    try:
        return run_pairs(work, "spark-sink", rounds, records, measure, warm_up)
    finally:
        spark.stop()

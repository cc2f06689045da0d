"""Partition reassignment (issue 27's benchmark): how fast a reassignment moves data, with and
without a replication throttle, and what a running reassignment costs the exactly-once copier,
on eoslog's cluster (ZooKeeper + three brokers) and on Apache Kafka's three KRaft nodes, in one run.

    python bench/reassignment.py                 # both sides, ~6 min
    python bench/reassignment.py --sides eoslog  # eoslog alone
    python bench/reassignment.py --move-mb 24 --copy-records 10000 --moves 1   # smaller, ~3 min

Each side starts its three brokers afresh (bench/cluster.py's: ``Cluster`` of
tests/support/cluster_harness.py, ``cluster_against.KafkaSide``), the sides one after the other,
who goes first alternating per ``--rounds``. Both with ``replication.quota.window.num=2`` (one
second windows): Kafka's default 11 windows let some ten seconds' worth through at a throttle's
start (its rate is taken over at least ten windows), which would hide the throttle in a move of a
few seconds. eoslog's brokers with ``--flush-policy`` (default ``auto``: group commit, as
bench/cluster.py), Kafka's with its default flushing (no fsync per write).

- **move**: topic ``bulk`` (3 partitions, replicas [1, 2], ``--move-mb`` MB of 1 KB records) is
  reassigned to [3, 2] and back to [1, 2], ``--moves`` times each way: every move copies the
  whole topic from its leader to a broker that has none of it (the removed replica's log is
  deleted), and leadership moves with it. Timed from AlterPartitionReassignments to
  ListPartitionReassignments returning none; MB/s = the topic's MB / the median move's
  seconds (a move takes a second or two unthrottled, so the controller's reaction and the
  machine's load weigh in; every move's time is in the JSON). Then the same
  throttled: ``leader.`` / ``follower.replication.throttled.rate`` = ``--throttle-mb`` MB/s on
  every broker and both ``*.replication.throttled.replicas`` = ``*`` on ``bulk`` (what
  ``kafka-reassign-partitions.sh --throttle`` sets, for every replica). Both brokers move less
  than the throttle: a follower's fetch brings up to ``replica.fetch.max.bytes`` (1 MB) per
  partition at once, after which the partitions wait until the measured rate is back under it.
- **copy**: the copy test's program (tests/chaos/copier.py through durability_eos.copy_once, one
  librdkafka copier per input partition, ``--copy-txn`` records per transaction) copies
  ``--copy-records`` 100-byte records between topics of RF 3 / min.isr 2: alone, during
  unthrottled moves of ``bulk`` back and forth, during throttled ones (a mover thread starts the
  next move as soon as one completes, until the copy is done, then lets the last one finish).
  records/s, and each committed transaction's commit latency as the copier times it
  (send_offsets_to_transaction + commit_transaction): p50, p99. ``WARM_UP_RECORDS`` copied
  first, untimed. Every output verified: each input
  record exactly once, nothing left open.

Output: a table, bench/results/reassignment-<timestamp>.json, reassignment-latest.json and
reassignment-latest.png (bench/plot.py's plot_reassignment: one panel per figure, both sides).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

import against
import cluster_against
from cluster import ACKS_ALL, SESSION_TIMEOUT_MS, Brokers, create_replicated_topics
from common import RESULTS_DIR, machine_facts, percentile, prepare_run
from durability_eos import PARTITIONS, VALUE_BYTES, copy_once
from load import produce
from plot import plot_reassignment
from spark_sink import produce_input, verify

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from eoslog.client.admin import Admin, AlterConfigOp, AlterConfigOpType, ConfigResource, ConfigResourceType
from eoslog.client.types import TopicPartition
from support.cluster_harness import Cluster, create_topic
from support.harness import wait_until

BULK = "bulk"
BULK_PARTITIONS = 3
HOMES = ([1, 2], [3, 2])  # bulk's replicas: moved from one to the other and back
QUOTA_WINDOWS = {"replication.quota.window.num": "2"}
COPY_MODES = ("alone", "unthrottled", "throttled")
WARM_UP_RECORDS = 5000  # copied first, untimed: the internal topics, the copiers' connections, a JVM's JIT


def admin(cluster: Brokers) -> Admin:
    return Admin({"bootstrap.servers": cluster.bootstrap})


def throttle(cluster: Brokers, rate_bytes: int | None) -> None:
    """What kafka-reassign-partitions.sh --throttle sets (for every replica of ``bulk``), or
    (None) removes."""
    op = AlterConfigOpType.SET if rate_bytes is not None else AlterConfigOpType.DELETE
    rate = str(rate_bytes) if rate_bytes is not None else None
    changes = {ConfigResource(ConfigResourceType.BROKER, str(b)): [
        AlterConfigOp("leader.replication.throttled.rate", rate, op),
        AlterConfigOp("follower.replication.throttled.rate", rate, op)] for b in cluster.brokers}
    changes[ConfigResource(ConfigResourceType.TOPIC, BULK)] = [
        AlterConfigOp("leader.replication.throttled.replicas", "*" if rate else None, op),
        AlterConfigOp("follower.replication.throttled.replicas", "*" if rate else None, op)]
    with admin(cluster) as a:
        a.incremental_alter_configs(changes)  # raises if a change is refused


def move(cluster: Brokers, to: list[int]) -> float:
    """Seconds from AlterPartitionReassignments (every partition of ``bulk`` to ``to``) to none
    in progress; the new replicas then checked in Metadata."""
    targets = {TopicPartition(BULK, p): to for p in range(BULK_PARTITIONS)}
    with admin(cluster) as a:
        t0 = time.perf_counter()
        refused = {tp: e for tp, e in a.alter_partition_reassignments(targets).items() if e is not None}
        assert not refused, refused
        while a.list_partition_reassignments(list(targets)):
            time.sleep(0.05)
        seconds = time.perf_counter() - t0
    wait_until(lambda: all(m.replicas == tuple(to) for m in cluster.metadata([BULK]).topics[BULK].values()),
               f"{BULK} on {to} in Metadata", 60)
    return seconds


class Mover:
    """Moves ``bulk`` back and forth, one move after another, until stopped; the last move
    started runs to its end."""

    def __init__(self, cluster: Brokers, home: int) -> None:
        self.cluster, self.home, self.moves = cluster, home, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def __enter__(self) -> Mover:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(600)
        if self.error is not None:
            raise RuntimeError(f"a move of {BULK} failed: {self.error!r}") from self.error

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.home = 1 - self.home
                move(self.cluster, HOMES[self.home])
                self.moves += 1
        except BaseException as e:  # reported by __exit__
            self.error = e


def run_side(args: argparse.Namespace, side: str) -> dict[str, Any]:
    work, _, facts = prepare_run(args.work_dir, f"eoslog-bench-reassignment-{side}-", None)
    print(f"--- {side}: load {facts['load_avg_at_start']}", flush=True)
    cluster: Brokers = (
        cluster_against.KafkaSide(work / "kafka", SESSION_TIMEOUT_MS, overrides=QUOTA_WINDOWS) if side == "kafka"
        else Cluster(work / "cluster", overrides={"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                                                  "log.flush.policy": args.flush_policy, **QUOTA_WINDOWS}))
    out: dict[str, Any] = {"side": side, "load_avg_at_start": facts["load_avg_at_start"]}
    try:
        cluster.start()  # type: ignore[attr-defined]
        result = create_topic(cluster.any_alive().bootstrap, BULK,
                              assignment={p: HOMES[0] for p in range(BULK_PARTITIONS)})
        assert int(result.error_code) == 0, result
        create_topic(cluster.any_alive().bootstrap, f"{BULK}-warmup", partitions=1, replication_factor=1)
        produce(cluster.bootstrap, BULK, ACKS_ALL, args.move_mb * 1024)
        home = 0
        for case, rate in (("unthrottled", None), ("throttled", args.throttle_mb * 1_000_000)):
            if rate is not None:
                throttle(cluster, rate)
            seconds = []
            for _ in range(2 * args.moves):
                home = 1 - home
                seconds.append(move(cluster, HOMES[home]))
                print(f"{side}: {case} move of {args.move_mb} MB to {HOMES[home]}: {seconds[-1]:.2f} s "
                      f"({args.move_mb / seconds[-1]:.1f} MB/s)", flush=True)
            if rate is not None:
                throttle(cluster, None)
            out[f"move {case} s"] = [round(s, 3) for s in seconds]
        out["copy"] = copies(cluster, args, side, home)
    except BaseException:
        print(f"{side} failed; its logs are under {work}", flush=True)
        raise
    finally:
        cluster.stop()
    shutil.rmtree(work, ignore_errors=True)
    out["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return out


def copies(cluster: Brokers, args: argparse.Namespace, side: str, home: int) -> dict[str, Any]:
    """The copy alone, during unthrottled moves, during throttled ones: records/s, commit
    latencies, moves made meanwhile; each output verified."""
    outs = [f"out-{mode}" for mode in COPY_MODES]
    create_replicated_topics(cluster, ["in", "warmup-in", "warmup-out", *outs])
    bootstrap = cluster.bootstrap
    produce_input(bootstrap, "in", args.copy_records, VALUE_BYTES)
    produce_input(bootstrap, "warmup-in", WARM_UP_RECORDS, VALUE_BYTES)
    copy_once(bootstrap, "warmup-out", args.copy_txn, 16384, f"warmup-{side}", source="warmup-in")
    results: dict[str, Any] = {}
    for mode in COPY_MODES:
        commits: list[float] = []
        if mode == "throttled":
            throttle(cluster, args.throttle_mb * 1_000_000)
        mover = Mover(cluster, home) if mode != "alone" else None
        with mover or contextlib.nullcontext():
            seconds = copy_once(bootstrap, f"out-{mode}", args.copy_txn, 16384, f"copy-{side}-{mode}",
                                commits_ms=commits)
        if mover is not None:
            home = mover.home
        if mode == "throttled":
            throttle(cluster, None)
        problem = verify(bootstrap, f"out-{mode}", PARTITIONS, args.copy_records)
        if problem:
            raise RuntimeError(f"copy on {side} ({mode}): {problem}")
        results[mode] = {"records_s": round(args.copy_records / seconds, 1), "seconds": round(seconds, 2),
                         "commits": len(commits), "commit_p50_ms": round(statistics.median(commits), 1),
                         "commit_p99_ms": round(percentile(commits, 0.99), 1),
                         "commit_max_ms": round(max(commits), 1),
                         "moves_done": mover.moves if mover is not None else 0}
        print(f"{side}: copy {mode}: {results[mode]}", flush=True)
    return results


def summarise(run: dict[str, Any], move_mb: int) -> dict[str, float]:
    """One side's figures from one run: the median move's MB/s per case (a move of a few
    seconds varies a lot with the machine's load), the copy's per mode."""
    figures: dict[str, float] = {}
    for case in ("unthrottled", "throttled"):
        figures[f"move {case} MB/s"] = round(move_mb / statistics.median(run[f"move {case} s"]), 1)
    for mode, c in run["copy"].items():
        figures[f"copy {mode} records/s"] = c["records_s"]
        figures[f"copy {mode} commit p99 ms"] = c["commit_p99_ms"]
    return figures


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sides", default="eoslog,kafka", help="eoslog, kafka or both (comma-separated)")
    p.add_argument("--rounds", type=int, default=1, help="runs of each side (who goes first alternates)")
    p.add_argument("--move-mb", type=int, default=96, help="MB in the moved topic")
    p.add_argument("--moves", type=int, default=2, help="moves each way per case")
    p.add_argument("--throttle-mb", type=int, default=16, help="the throttle, MB/s (10^6 bytes)")
    p.add_argument("--copy-records", type=int, default=60000)
    p.add_argument("--copy-txn", type=int, default=200, help="records per copy transaction")
    p.add_argument("--flush-policy", default="auto", choices=["auto", "group-commit", "kafka"])
    p.add_argument("--work-dir", type=Path)
    p.add_argument("--no-save", action="store_true")
    args = p.parse_args()
    sides = [s for s in args.sides.split(",") if s]
    if "kafka" in sides:
        against.require_kafka()
    started = datetime.datetime.now().astimezone()
    facts = machine_facts(Path(args.work_dir or "/tmp"))
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in sides}
    for r in range(args.rounds):
        for side in sides if r % 2 == 0 else sides[::-1]:
            runs[side].append(run_side(args, side))
    best = {s: best_of([summarise(run, args.move_mb) for run in runs[s]]) for s in sides}
    results: dict[str, Any] = {
        "benchmark": "reassignment", "timestamp": started.isoformat(timespec="seconds"),
        "kafka": against.kafka_label() if "kafka" in sides else None, "machine": facts,
        "settings": {"move_mb": args.move_mb, "bulk_partitions": BULK_PARTITIONS, "moves_each_way": args.moves,
                     "throttle_mb_s": args.throttle_mb, "copy_records": args.copy_records,
                     "copy_txn": args.copy_txn, "copy_partitions": PARTITIONS, "record_bytes_moved": 1024,
                     "eoslog_flush_policy": args.flush_policy, **QUOTA_WINDOWS, "rounds": args.rounds},
        "best": best, "runs": runs, "load_avg_at_end": [round(x, 2) for x in os.getloadavg()]}
    if "kafka" in best and "eoslog" in best:
        results["ratios_eoslog_over_kafka"] = {k: round(v / best["kafka"][k], 3) for k, v in best["eoslog"].items()
                                               if best["kafka"].get(k)}
    render(results)
    if not args.no_save:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        stamp = results["timestamp"].replace(":", "").replace("-", "")[:15]
        text = json.dumps(results, indent=1) + "\n"
        for path in (RESULTS_DIR / f"reassignment-{stamp}.json", RESULTS_DIR / "reassignment-latest.json"):
            path.write_text(text)
            print(f"wrote {path}")
        plot_reassignment(results, RESULTS_DIR / "reassignment-latest.png")
        print(f"wrote {RESULTS_DIR / 'reassignment-latest.png'}")


def best_of(figures: list[dict[str, float]]) -> dict[str, float]:
    """Per figure the best run's: the highest MB/s and records/s, the lowest latency."""
    return {k: (min if "ms" in k.split()[-1] else max)(f[k] for f in figures) for k in figures[0]}


def render(results: dict[str, Any]) -> None:
    best = results["best"]
    sides = list(best)
    table = Table(title=f"reassignment, {' vs '.join(sides)} ({results['kafka'] or ''}), three brokers each, "
                        f"load {results['machine']['load_avg_at_start']} → {results['load_avg_at_end']}")
    table.add_column("figure")
    for s in sides:
        table.add_column(s)
    if "ratios_eoslog_over_kafka" in results:
        table.add_column("eoslog / Kafka")
    for name in best[sides[0]]:
        row = [name, *(f"{best[s][name]:,.1f}" for s in sides)]
        if "ratios_eoslog_over_kafka" in results:
            row.append(f"{results['ratios_eoslog_over_kafka'].get(name, float('nan')):.3f}")
        table.add_row(*row)
    Console().print(table)


if __name__ == "__main__":
    main()

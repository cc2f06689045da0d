"""What surviving a power cut costs (issue 14): the flush policies side by side in one run.

    python bench/durability.py [--mb 40] [--rounds 3] [--txn-seconds 6] [--latency-samples 300]
                               [--eos-rounds 2] [--copy-records 20000] [--spark-records 40000] [--no-spark]
                               [--before-src /tmp/eoslog-before/src]

Three brokers of this checkout run at once on fresh data directories on the same disk, only
one under load at a time, the order rotating per round so a slow stretch of the shared
machine hits each alike:

- ``group-commit``: ``log.flush.policy=group-commit`` (the single node's default): a write
  is acknowledged after the fsync round that covers it, one round for all waiting requests;
- ``no-fsync``: ``log.flush.policy=kafka`` (Kafka's default: nothing fsynced before the ack);
- ``fsync-per-write``: ``log.flush.policy=kafka`` with ``log.flush.interval.messages=1``
  (Kafka's way to fsync every append, inline, before answering);
- with ``--before-src``, ``group-commit@before``: group commit on another build (e.g. ``git
  archive <sha> src | tar -x -C /tmp/eoslog-before``), measured in the same rotation: a
  change's effect on the ratio to ``no-fsync`` in one run.

Cases: produce acks=all and idempotent (1 KB records, confluent-kafka, ``load.py``), a
transactional producer committing every 100 ms (``transactions.py``, verified afterwards),
and the latencies of one acks=all record at a time and of small transactions (10 records
and a commit) — p50/p99. Then, in the same run, the exactly-once pipelines on a pair of
brokers each (``group-commit`` vs ``no-fsync``, ``durability_eos.py``): a transactional copy
(tests/chaos/copier.py) and the Spark exactly-once sink (``spark_sink.py``'s query), records/s.
Fsync rounds and records per round come from the group-commit broker's own count (logged at
its shutdown): over the produce cases together, and per exactly-once case. Reported: best of
the rounds, ratios to ``no-fsync``; results JSON and a plot in bench/results/. Nothing is
asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from confluent_kafka import Producer
from rich.console import Console
from rich.table import Table

import durability_eos
from common import MB, REPO_ROOT, RESULTS_DIR, BrokerProcess, git_commit
from load import PARTITIONS, PRODUCE_CASES, RECORD_SIZE, produce
from transactions import Case, prime_coordinator, run_case, verify

console = Console(width=max(shutil.get_terminal_size((120, 24)).columns, 120))

POLICIES: dict[str, dict[str, str]] = {
    "group-commit": {"log.flush.policy": "group-commit"},
    "no-fsync": {"log.flush.policy": "kafka"},
    "fsync-per-write": {"log.flush.policy": "kafka", "log.flush.interval.messages": "1"},
}
BASELINE = "no-fsync"
BEFORE = "group-commit@before"
THROUGHPUT_CASES = ("acksall", "idempotent")
TXN = Case("txn-100", "transactional, 100 ms", 100, transactional=True)
_STATS = re.compile(r"group commit: (\d+) fsync rounds, (\d+) files synced, (\d+) offsets made durable")


@dataclass
class Node:
    policy: str
    broker: BrokerProcess
    mb_s: dict[str, list[float]] = field(default_factory=dict)
    latency_ms: dict[str, list[float]] = field(default_factory=dict)
    loaded_s: float = 0.0  # seconds under load, for fsync rounds per second


def ack_latencies(bootstrap: str, topic: str, samples: int) -> list[float]:
    """One 1 KB acks=all record at a time: send, wait for its acknowledgement."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 0})
    p.produce(topic, b"w" * RECORD_SIZE)
    p.flush(30)
    out = []
    for _ in range(samples):
        t0 = time.perf_counter()
        p.produce(topic, b"x" * RECORD_SIZE)
        if p.flush(30):
            raise RuntimeError(f"{topic}: a record was not acknowledged in 30 s")
        out.append((time.perf_counter() - t0) * 1000)
    return out


def commit_latencies(bootstrap: str, topic: str, samples: int) -> list[float]:
    """Transactions of 10 records: begin, send, commit; the time commit_transaction takes."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"latency-{topic}", "linger.ms": 0})
    p.init_transactions(60)
    out = []
    for _ in range(samples):
        p.begin_transaction()
        for _ in range(10):
            p.produce(topic, b"t" * RECORD_SIZE)
        p.flush(30)
        t0 = time.perf_counter()
        p.commit_transaction(30)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def measure(node: Node, case: str, rnd: int, args: argparse.Namespace) -> None:
    bootstrap = node.broker.bootstrap
    topic = f"d-{case}-r{rnd}"
    t0 = time.perf_counter()
    if case in THROUGHPUT_CASES:
        spec = next(c for c in PRODUCE_CASES if c.name == case)
        m = produce(bootstrap, topic, spec, args.mb * MB // RECORD_SIZE)
        node.mb_s.setdefault(case, []).append(m.mb_s)
    elif case == TXN.name:
        m, sent = run_case(bootstrap, topic, TXN, args.txn_seconds)
        problems = verify(bootstrap, topic, sent)["problems"]
        if problems:
            raise RuntimeError(f"{node.policy} {case}: {problems[:3]}")
        node.mb_s.setdefault(case, []).append(m.mb_s)
    elif case == "ack-latency":
        node.latency_ms.setdefault(case, []).extend(ack_latencies(bootstrap, topic, args.latency_samples))
    else:
        node.latency_ms.setdefault(case, []).extend(commit_latencies(bootstrap, topic, args.latency_samples // 3))
    node.loaded_s += time.perf_counter() - t0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def fsync_stats(broker: BrokerProcess, loaded_s: float) -> dict[str, float] | None:
    """The group-commit broker's count since its last start (logged at its stop)."""
    found = _STATS.findall(broker.log_text())
    if not found:
        return None
    rounds, files, offsets = map(int, found[-1])
    return {"fsync_rounds": rounds, "files_synced": files, "offsets_synced": offsets,
            "rounds_per_s": round(rounds / loaded_s, 1) if loaded_s else 0.0,
            "records_per_round": round(offsets / rounds, 1) if rounds else 0.0}


def eos_results(sides: list[durability_eos.Side]) -> dict[str, Any]:
    by = {s.policy: s for s in sides}
    base = max(by[BASELINE].records_s)
    out: dict[str, Any] = {s.policy: {"records_s": round(max(s.records_s)), "ratio": round(max(s.records_s) / base, 3),
                                      "runs": [round(x) for x in s.records_s]} for s in sides}
    per_round = [round(a / b, 3) for a, b in zip(by["group-commit"].records_s, by[BASELINE].records_s, strict=True)]
    out["ratio_per_round"] = per_round
    out["group_commit_fsyncs"] = fsync_stats(by["group-commit"].broker, by["group-commit"].loaded_s)
    return out


def plot(results: dict[str, Any], path: Path) -> None:
    policies = list(results["throughput"][THROUGHPUT_CASES[0]])
    colors = {"group-commit": "#1f77b4", "no-fsync": "#9e9e9e", "fsync-per-write": "#d62728", BEFORE: "#aec7e8"}
    fig, (thr, lat, eos) = plt.subplots(1, 3, figsize=(20, 5.5), width_ratios=[3, 2, 2])
    cases = [*THROUGHPUT_CASES, TXN.name]
    width = 0.8 / len(policies)
    for i, policy in enumerate(policies):
        values = [results["throughput"][c][policy]["mb_s"] for c in cases]
        bars = thr.bar([x + i * width for x in range(len(cases))], values, width, label=policy, color=colors[policy])
        for bar, c in zip(bars, cases, strict=True):
            ratio = results["throughput"][c][policy]["ratio"]
            thr.annotate(f"{ratio:.2f}", (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center",
                         va="bottom", fontsize=8)
    thr.set_xticks([x + width for x in range(len(cases))], cases)
    thr.set_ylabel("MB/s (best of the rounds); labels: ratio to no-fsync")
    thr.set_title("throughput, 1 KB records")
    thr.legend()
    lcases = ["ack-latency", "commit-latency"]
    for i, policy in enumerate(policies):
        for j, c in enumerate(lcases):
            r = results["latency"][c][policy]
            x = j + i * width
            lat.bar(x, r["p50_ms"], width, color=colors[policy], label=policy if j == 0 else None)
            lat.plot([x, x], [r["p50_ms"], r["p99_ms"]], color="black", linewidth=1)
            lat.annotate(f"{r['p50_ms']:.1f}/{r['p99_ms']:.1f}", (x, r["p99_ms"]), ha="center", va="bottom",
                         fontsize=8)
    lat.set_xticks([j + width for j in range(len(lcases))], ["acks=all record", "commit of 10 records"])
    lat.set_ylabel("ms (bar p50, line to p99)")
    lat.set_title("latency")
    lat.legend()
    ecases = list(results["exactly_once"])
    for i, policy in enumerate(("group-commit", BASELINE)):
        for j, c in enumerate(ecases):
            r = results["exactly_once"][c]
            bar = eos.bar(j + i * 0.4, r[policy]["records_s"], 0.4, color=colors[policy],
                          label=policy if j == 0 else None)[0]
            eos.scatter([bar.get_x() + 0.2] * len(r[policy]["runs"]), r[policy]["runs"], color="black", s=10, zorder=3)
            if policy == "group-commit":
                fs_c = r["group_commit_fsyncs"] or {}
                eos.annotate(f"{r[policy]['ratio']:.2f}\n{fs_c.get('rounds_per_s', '?')} fsyncs/s\n"
                             f"{fs_c.get('records_per_round', '?')} rec/fsync",
                             (bar.get_x() + 0.2, bar.get_height()), ha="center", va="bottom", fontsize=8)
    eos.set_xticks([j + 0.2 for j in range(len(ecases))], ecases)
    eos.set_ylabel("records/s (best round; dots: each round)")
    eos.set_title("exactly-once pipelines (label: ratio to no-fsync)")
    eos.legend()
    fs = results.get("group_commit_fsyncs") or {}
    fig.suptitle(f"eoslog flush policies, one run, load {results['load_start']:.1f}→{results['load_end']:.1f} on "
                 f"{os.cpu_count()} shared CPUs — {results['commit']} — group commit: "
                 f"{fs.get('rounds_per_s', '?')} fsync rounds/s, {fs.get('records_per_round', '?')} records/round",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=int, default=40, help="MB of record values per throughput case")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--txn-seconds", type=float, default=6.0)
    p.add_argument("--latency-samples", type=int, default=300)
    p.add_argument("--eos-rounds", type=int, default=2, help="rounds of the copy and Spark sink cases")
    p.add_argument("--copy-records", type=int, default=20000)
    p.add_argument("--copy-txn", type=int, default=500, help="records per copy transaction")
    p.add_argument("--copy-batch-bytes", type=int, default=16384, help="the copier's batch.size")
    p.add_argument("--spark-records", type=int, default=40000)
    p.add_argument("--spark-batches", type=int, default=4)
    p.add_argument("--no-spark", action="store_true")
    p.add_argument("--no-save", action="store_true")
    p.add_argument("--before-src", type=Path, help=f"src/ of another build, run with group commit as {BEFORE}")
    args = p.parse_args()
    policies = dict(POLICIES)
    if args.before_src is not None:
        policies[BEFORE] = POLICIES["group-commit"]
    work = Path(tempfile.mkdtemp(prefix="eoslog-durability-"))
    nodes: list[Node] = []
    cases = [*THROUGHPUT_CASES, TXN.name, "ack-latency", "commit-latency"]
    load_start = os.getloadavg()[0]
    try:
        for policy, overrides in policies.items():
            src = args.before_src.resolve() if policy == BEFORE else REPO_ROOT / "src"
            os.environ["PYTHONPATH"] = str(src)  # read by the broker subprocess at its start
            broker = BrokerProcess(work / f"data-{policy}", overrides={"num.partitions": str(PARTITIONS),
                                                                       **overrides}).start()
            prime_coordinator(broker.bootstrap)
            nodes.append(Node(policy, broker))
        os.environ["PYTHONPATH"] = str(REPO_ROOT / "src")  # the exactly-once cases' brokers
        for rnd in range(args.rounds):
            order = nodes[rnd % len(nodes):] + nodes[:rnd % len(nodes)]
            for case in cases:
                for node in order:
                    console.print(f"round {rnd + 1}: {case} on {node.policy} …")
                    measure(node, case, rnd, args)
    finally:
        for node in nodes:
            if node.broker.alive():
                node.broker.stop()
    by = {n.policy: n for n in nodes}
    produce_fsyncs = fsync_stats(by["group-commit"].broker, by["group-commit"].loaded_s)
    before_fsyncs = fsync_stats(by[BEFORE].broker, by[BEFORE].loaded_s) if BEFORE in by else None
    eos = {"copy": durability_eos.copy_case(work, args.eos_rounds, args.copy_records, args.copy_txn,
                                                args.copy_batch_bytes)}
    if not args.no_spark:
        eos["spark-sink"] = durability_eos.spark_case(work, args.eos_rounds, args.spark_records, args.spark_batches)
    load_end = os.getloadavg()[0]
    results: dict[str, Any] = {"commit": git_commit(REPO_ROOT / "src"), "mb": args.mb, "rounds": args.rounds,
                               "before_commit": args.before_src and git_commit(args.before_src.resolve()),
                               "load_start": load_start, "load_end": load_end, "throughput": {}, "latency": {},
                               "group_commit_fsyncs": produce_fsyncs, "group_commit_fsyncs_before": before_fsyncs,
                               "eos_settings": {"rounds": args.eos_rounds, "copy_records": args.copy_records,
                                                "copy_txn": args.copy_txn,
                                                "copy_batch_bytes": args.copy_batch_bytes,
                                                "spark_records": args.spark_records,
                                                "spark_batches": args.spark_batches},
                               "exactly_once": {case: eos_results(sides) for case, sides in eos.items()}}
    table = Table(title=f"flush policies, best of {args.rounds} rounds (ratio to {BASELINE})")
    for col in ("case", *policies):
        table.add_column(col, justify="right" if col != "case" else "left")
    for case in (*THROUGHPUT_CASES, TXN.name):
        base = max(by[BASELINE].mb_s[case])
        results["throughput"][case] = {
            n.policy: {"mb_s": round(max(n.mb_s[case]), 2), "ratio": round(max(n.mb_s[case]) / base, 3),
                       "runs": [round(x, 1) for x in n.mb_s[case]]} for n in nodes}
        table.add_row(f"{case} MB/s", *(f"{results['throughput'][case][pol]['mb_s']:.1f} "
                                         f"({results['throughput'][case][pol]['ratio']:.2f})" for pol in policies))
    for case in ("ack-latency", "commit-latency"):
        results["latency"][case] = {
            n.policy: {"p50_ms": round(statistics.median(n.latency_ms[case]), 2),
                       "p99_ms": round(percentile(n.latency_ms[case], 0.99), 2),
                       "samples": len(n.latency_ms[case])} for n in nodes}
        table.add_row(f"{case} p50/p99 ms", *(f"{results['latency'][case][pol]['p50_ms']:.1f} / "
                                               f"{results['latency'][case][pol]['p99_ms']:.1f}" for pol in policies))
    for case, r in results["exactly_once"].items():
        fs_c = r["group_commit_fsyncs"] or {}
        table.add_row(f"{case} records/s", f"{r['group-commit']['records_s']:,} ({r['group-commit']['ratio']:.2f})",
                      f"{r[BASELINE]['records_s']:,} (1.00)", *["—"] * (len(policies) - 2))
        table.add_row(f"{case} fsyncs/s, rec/fsync", f"{fs_c.get('rounds_per_s')}, {fs_c.get('records_per_round')}",
                      *[""] * (len(policies) - 1))
    console.print(table)
    console.print(f"group commit fsyncs: {results['group_commit_fsyncs']}; load {load_start:.2f} → {load_end:.2f}")
    if before_fsyncs is not None:
        console.print(f"{BEFORE} fsyncs: {before_fsyncs}")
    shutil.rmtree(work, ignore_errors=True)
    if not args.no_save:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = RESULTS_DIR / f"durability-{stamp}.json"
        path.write_text(json.dumps(results, indent=1))
        plot(results, path.with_suffix(".png"))
        console.print(f"saved {path} and {path.with_suffix('.png')}")


if __name__ == "__main__":
    main()

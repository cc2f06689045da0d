"""Two builds of the broker side by side in one run: does a change cost throughput?

    python bench/ab.py --a-src /tmp/eoslog-before/src [--b-src src] [--mb 60] [--rounds 3]

Two broker subprocesses, A (``--a-src``, e.g. an export of the commit before a change:
``git archive <sha> src | tar -x -C /tmp/eoslog-before && echo <sha> > /tmp/eoslog-before/COMMIT``)
and B (``--b-src``, this checkout's ``src`` by default), run at the same time on fresh data
directories; only one of them is under load at any moment. Each round runs every case on
both, A first in even rounds and B first in odd ones, so a slow stretch of the shared
machine hits both builds alike: acks=1, acks=all and idempotent produce (``load.py``'s cases),
a transactional produce committing every ``--txn-ms`` ms (``transactions.py``'s case, its
result verified by read_committed afterwards), and a fetch of the round's acks=1 topic.

With ``--b-metrics`` B also serves its Prometheus metrics (``metrics.listener``) and is scraped
every ``--scrape-s`` seconds while it is under load: with ``--a-src src`` (the same build) B/A is
what collecting metrics costs (issue 16).

Reported per case and build: the best MB/s over the rounds and the best MB per broker CPU
second (the broker's user+system time during the case, which other processes disturb much
less than wall time), and B/A of both. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from rich.console import Console
from rich.table import Table

from common import MB, REPO_ROOT, RESULTS_DIR, BrokerProcess, Measurement, git_commit
from harness import free_port
from load import PARTITIONS, PRODUCE_CASES, RECORD_SIZE, fetch, high_watermarks, produce
from transactions import Case, prime_coordinator, run_case, verify

console = Console(width=max(shutil.get_terminal_size((120, 24)).columns, 120))


@dataclass
class Build:
    name: str
    src: Path
    commit: str | None
    broker: BrokerProcess
    runs: dict[str, list[tuple[Measurement, float]]] = field(default_factory=dict)  # case → (m, broker cpu s)
    metrics_url: str | None = None
    scrapes: int = 0

    def cpu(self) -> float:
        assert self.broker.proc is not None
        t = psutil.Process(self.broker.proc.pid).cpu_times()
        return float(t.user + t.system)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--a-src", type=Path, required=True, help="src/ of build A (the one before)")
    p.add_argument("--b-src", type=Path, default=REPO_ROOT / "src", help="src/ of build B (default: this checkout)")
    p.add_argument("--mb", type=int, default=60, help="MB of record values per produce case")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--txn-ms", type=int, default=100, help="transaction length of the transactional case")
    p.add_argument("--txn-seconds", type=float, default=6.0, help="seconds of transactional producing per round")
    p.add_argument("--b-metrics", action="store_true",
                   help="B serves metrics.listener and is scraped while under load")
    p.add_argument("--scrape-s", type=float, default=5.0, help="seconds between scrapes of B's metrics")
    p.add_argument("--no-save", action="store_true")
    return p.parse_args()


def start(name: str, src: Path, work: Path, metrics: bool = False) -> Build:
    src = src.resolve()
    if not (src / "eoslog" / "__init__.py").exists():
        raise SystemExit(f"{src} has no eoslog package")
    os.environ["PYTHONPATH"] = str(src)  # read by the broker subprocess at its start
    overrides = {"num.partitions": str(PARTITIONS)}
    metrics_url = None
    if metrics:
        port = free_port()
        overrides["metrics.listener"] = f"http://127.0.0.1:{port}"
        metrics_url = f"http://127.0.0.1:{port}/metrics"
    broker = BrokerProcess(work / f"data-{name}", overrides=overrides).start()
    prime_coordinator(broker.bootstrap)
    return Build(name, src, git_commit(src), broker, metrics_url=metrics_url)


class Scraper(threading.Thread):
    """Prometheus' part: GET the build's metrics every ``every_s`` until stopped."""

    def __init__(self, build: Build, every_s: float) -> None:
        super().__init__(daemon=True)
        self.build, self.every_s, self.stopped = build, every_s, threading.Event()

    def run(self) -> None:
        assert self.build.metrics_url is not None
        while not self.stopped.wait(self.every_s):
            with urllib.request.urlopen(self.build.metrics_url, timeout=30) as r:
                r.read()
            self.build.scrapes += 1


def measure(build: Build, case: str, rnd: int, records: int, txn: Case, txn_seconds: float) -> None:
    bootstrap = build.broker.bootstrap
    cpu0 = build.cpu()
    if case == "fetch":
        m = fetch(bootstrap, f"ab-acks1-r{rnd}", records)
    elif case == txn.name:
        topic = f"ab-{case}-r{rnd}"
        m, sent = run_case(bootstrap, topic, txn, txn_seconds)
        cpu = build.cpu() - cpu0
        problems = verify(bootstrap, topic, sent)["problems"]
        if problems:
            raise RuntimeError(f"{build.name} {case}: {problems[:3]}")
        build.runs.setdefault(case, []).append((m, cpu))
        return
    else:
        spec = next(c for c in PRODUCE_CASES if c.name == case)
        topic = f"ab-{case}-r{rnd}"
        m = produce(bootstrap, topic, spec, records)
        if sum(high_watermarks(bootstrap, topic)) != records:
            raise RuntimeError(f"{build.name} {topic}: high watermarks do not add up to {records}")
    build.runs.setdefault(case, []).append((m, build.cpu() - cpu0))


def summary(build: Build, case: str) -> dict[str, Any]:
    runs = build.runs[case]
    per_cpu = [m.bytes / MB / cpu for m, cpu in runs if cpu > 0]
    return {"mb_s": max(m.mb_s for m, _ in runs), "mb_per_cpu_s": max(per_cpu),
            "median_mb_per_cpu_s": statistics.median(per_cpu),
            "runs_mb_s": [round(m.mb_s, 1) for m, _ in runs], "runs_mb_per_cpu_s": [round(x, 1) for x in per_cpu]}


def main() -> None:
    args = parse_args()
    records = args.mb * MB // RECORD_SIZE
    txn = Case(f"txn-{args.txn_ms}", f"transactional, {args.txn_ms} ms", args.txn_ms, transactional=True)
    cases = [c.name for c in PRODUCE_CASES] + [txn.name, "fetch"]
    work = Path(tempfile.mkdtemp(prefix="eoslog-ab-"))
    builds: list[Build] = []
    try:
        builds = [start("A", args.a_src, work), start("B", args.b_src, work, metrics=args.b_metrics)]
        console.print(f"A: {builds[0].src} ({builds[0].commit})\nB: {builds[1].src} ({builds[1].commit})\n"
                      f"{args.mb} MB per produce case, {args.rounds} rounds, load {os.getloadavg()[0]:.2f}")
        for rnd in range(args.rounds):
            order = builds if rnd % 2 == 0 else builds[::-1]
            for case in cases:
                for build in order:
                    console.print(f"round {rnd + 1}: {case} on {build.name} …")
                    scraper = Scraper(build, args.scrape_s) if build.metrics_url else None
                    if scraper is not None:
                        scraper.start()
                    try:
                        measure(build, case, rnd, records, txn, args.txn_seconds)
                    finally:
                        if scraper is not None:
                            scraper.stopped.set()
                            scraper.join()
        load_end = os.getloadavg()[0]
    finally:
        for b in builds:
            if b.broker.alive():
                b.broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    table = Table(title=f"A = {builds[0].commit}, B = {builds[1].commit}: best of {args.rounds} rounds")
    for col in ("case", "A MB/s", "B MB/s", "B/A", "A MB/cpu·s", "B MB/cpu·s", "B/A (cpu)", "B/A (cpu, median)"):
        table.add_column(col, justify="right" if col != "case" else "left")
    results: dict[str, Any] = {}
    for case in cases:
        a, b = summary(builds[0], case), summary(builds[1], case)
        results[case] = {"A": a, "B": b, "b_over_a": round(b["mb_s"] / a["mb_s"], 3),
                         "b_over_a_cpu": round(b["mb_per_cpu_s"] / a["mb_per_cpu_s"], 3),
                         "b_over_a_cpu_median": round(b["median_mb_per_cpu_s"] / a["median_mb_per_cpu_s"], 3)}
        r = results[case]
        table.add_row(case, f"{a['mb_s']:.1f}", f"{b['mb_s']:.1f}", f"{r['b_over_a']:.2f}", f"{a['mb_per_cpu_s']:.1f}",
                      f"{b['mb_per_cpu_s']:.1f}", f"{r['b_over_a_cpu']:.2f}", f"{r['b_over_a_cpu_median']:.2f}")
    console.print(table)
    console.print(f"load average at the end: {load_end:.2f}")
    if builds[1].metrics_url:
        console.print(f"B served metrics, scraped {builds[1].scrapes} times (every {args.scrape_s} s under load)")
    if not args.no_save:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = RESULTS_DIR / f"ab-{stamp}.json"
        path.write_text(json.dumps({"a": {"src": str(builds[0].src), "commit": builds[0].commit},
                                    "b": {"src": str(builds[1].src), "commit": builds[1].commit},
                                    "mb": args.mb, "rounds": args.rounds, "load_end": load_end,
                                    "b_metrics": bool(builds[1].metrics_url), "scrape_s": args.scrape_s,
                                    "b_scrapes": builds[1].scrapes,
                                    "results": results}, indent=1))
        console.print(f"saved {path}")


if __name__ == "__main__":
    main()

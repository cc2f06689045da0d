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

``--a-config`` / ``--b-config KEY=VALUE`` (repeatable) give one build broker configs of its own:
``--b-config log.flush.policy=kafka`` compares B without group commit's fsyncs against an A from
before it; the same ``src`` on both sides with the policy on one measures the policy alone.

With ``--b-metrics`` B also serves its Prometheus metrics (``metrics.listener``) and is scraped
every ``--scrape-s`` seconds while it is under load: with ``--a-src src`` (the same build) B/A is
what collecting metrics costs (issue 16).

Reported per case and build: the best MB/s over the rounds and the best MB per broker CPU
second (the broker's user+system time during the case, which other processes disturb much
less than wall time), and B/A of both. Nothing is asserted.

    python bench/ab.py --against kafka [--mb 30] [--rounds 2]

A is then Apache Kafka (``tests/support/kafka_harness.py``'s single KRaft node from the reference
jars, ``num.partitions=3``, its default flush settings — no fsync per write, as eoslog's),
B this checkout's eoslog, both on the same disk, the same client (librdkafka) with the same
settings. The cases grow to the issue-12 list: 1 KB and 100 B records at acks=1 and acks=all,
idempotent, transactional committing every 10, 100 and 1000 ms, fetch of 1 KB and of 100 B
records, and the end-to-end latency (``latency.py``: produce -> read_committed consume at a
fixed rate, p50/p99/p99.9); plus each broker's start-up time (launch to ready, and to the
first acknowledged produce) and resident memory (after start, peak after each case).
Ratios are eoslog / Kafka; results in ``bench/results/ab-kafka-<timestamp>.json``,
``ab-kafka-latest.json`` and ``ab-kafka-latest.png``.
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

import against
from baselines import recycle_pages
from common import MB, REPO_ROOT, RESULTS_DIR, BrokerProcess, Measurement, git_commit
from latency import end_to_end
from load import PARTITIONS, PRODUCE_CASES, RECORD_SIZE, create_topic, fetch, high_watermarks, produce
from support.harness import free_port
from support.kafka_harness import KafkaBroker
from transactions import Case, prime_coordinator, run_case, verify

SMALL = "-100B"  # a case name's suffix: the same case with 100-byte records
SMALL_SIZE = 100
LATENCY = "latency"

console = Console(width=max(shutil.get_terminal_size((120, 24)).columns, 120))


@dataclass
class Build:
    name: str
    src: Path
    commit: str | None
    broker: BrokerProcess | KafkaBroker
    runs: dict[str, list[tuple[Measurement, float]]] = field(default_factory=dict)  # case → (m, broker cpu s)
    metrics_url: str | None = None
    scrapes: int = 0
    latency: list[dict[str, Any]] = field(default_factory=list)
    startup: dict[str, float] = field(default_factory=dict)
    rss_mb: dict[str, float] = field(default_factory=dict)  # "after start", "peak"

    def cpu(self) -> float:
        assert self.broker.proc is not None
        t = psutil.Process(self.broker.proc.pid).cpu_times()
        return float(t.user + t.system)

    def sample_rss(self) -> None:
        assert self.broker.proc is not None
        rss = psutil.Process(self.broker.proc.pid).memory_info().rss / MB
        self.rss_mb.setdefault("after start", round(rss, 1))
        self.rss_mb["peak"] = round(max(rss, self.rss_mb.get("peak", 0.0)), 1)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--a-src", type=Path, help="src/ of build A (the one before)")
    p.add_argument("--against", choices=["kafka"], help="A is Apache Kafka (reference jars) instead of a build")
    p.add_argument("--latency-rate", type=int, default=2000, help="records/s of the latency case (--against)")
    p.add_argument("--latency-seconds", type=float, default=8.0)
    p.add_argument("--b-src", type=Path, default=REPO_ROOT / "src", help="src/ of build B (default: this checkout)")
    p.add_argument("--mb", type=int, default=60, help="MB of record values per produce case")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--txn-ms", type=int, default=100, help="transaction length of the transactional case")
    p.add_argument("--txn-seconds", type=float, default=6.0, help="seconds of transactional producing per round")
    p.add_argument("--b-metrics", action="store_true",
                   help="B serves metrics.listener and is scraped while under load")
    p.add_argument("--scrape-s", type=float, default=5.0, help="seconds between scrapes of B's metrics")
    for side in ("a", "b"):
        p.add_argument(f"--{side}-config", metavar="KEY=VALUE", action="append", default=[],
                       help=f"a broker config of build {side.upper()} (repeatable), e.g. log.flush.policy=kafka")
    p.add_argument("--cases", help="only these cases, comma-separated (e.g. acksall,acksall-100B)")
    p.add_argument("--no-save", action="store_true")
    args = p.parse_args()
    if (args.a_src is None) == (args.against is None):
        p.error("give --a-src (two eoslog builds) or --against kafka")
    return args


def start(name: str, src: Path | None, work: Path, metrics: bool = False, config: list[str] | None = None) -> Build:
    """Build ``name`` from ``src``, or Apache Kafka when ``src`` is None; times its start-up.
    ``config``: KEY=VALUE broker configs on top of ``num.partitions``."""
    overrides = {"num.partitions": str(PARTITIONS)}
    overrides.update(kv.partition("=")[::2] for kv in config or [])
    metrics_url = None
    t0 = time.perf_counter()
    broker: BrokerProcess | KafkaBroker
    if src is None:
        broker = against.kafka_broker(work / f"data-{name}", overrides).start()
        commit: str | None = against.kafka_label()
    else:
        src = src.resolve()
        if not (src / "eoslog" / "__init__.py").exists():
            raise SystemExit(f"{src} has no eoslog package")
        os.environ["PYTHONPATH"] = str(src)  # read by the broker subprocess at its start
        if metrics:
            port = free_port()
            overrides["metrics.listener"] = f"http://127.0.0.1:{port}"
            metrics_url = f"http://127.0.0.1:{port}/metrics"
        broker = BrokerProcess(work / f"data-{name}", overrides=overrides).start()
        commit = git_commit(src)
    ready = time.perf_counter() - t0
    create_topic(broker.bootstrap, "ab-first")
    p = produce(broker.bootstrap, "ab-first", PRODUCE_CASES[0], 1)  # the first acknowledged produce
    build = Build(name, src or work, commit, broker, metrics_url=metrics_url,
                  startup={"ready_s": round(ready, 2), "first_produce_s": round(time.perf_counter() - t0, 2),
                           "first_produce_warmup_s": p.extra["warmup_s"]})
    build.sample_rss()
    create_topic(broker.bootstrap, "bench-prime")
    prime_coordinator(broker.bootstrap)
    return build


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


def measure(build: Build, case: str, rnd: int, records: int, txns: dict[str, Case], txn_seconds: float,
            latency: tuple[int, float] = (0, 0.0), scratch: Path | None = None) -> None:
    """One case on one build. ``scratch``: a directory on the brokers' disk where a writing case
    first writes and deletes its bytes (``baselines.recycle_pages``: this VM's host faults on
    pages freed long ago would otherwise land on whichever build writes first)."""
    bootstrap = build.broker.bootstrap
    cpu0 = build.cpu()
    size = SMALL_SIZE if case.endswith(SMALL) else RECORD_SIZE
    n = records * RECORD_SIZE // size
    if not case.startswith("fetch"):
        create_topic(bootstrap, f"ab-{case}-r{rnd}")
        if scratch is not None and case != LATENCY:
            recycle_pages(scratch, records * RECORD_SIZE)
        cpu0 = build.cpu()
    if case == LATENCY:
        build.latency.append(end_to_end(bootstrap, f"ab-{case}-r{rnd}", *latency))
        return
    if case.startswith("fetch"):
        m = fetch(bootstrap, f"ab-acks1{case.removeprefix('fetch')}-r{rnd}", n, record_size=size)
    elif case in txns:
        topic = f"ab-{case}-r{rnd}"
        m, sent = run_case(bootstrap, topic, txns[case], txn_seconds)
        cpu = build.cpu() - cpu0
        problems = verify(bootstrap, topic, sent)["problems"]
        if problems:
            raise RuntimeError(f"{build.name} {case}: {problems[:3]}")
        build.runs.setdefault(case, []).append((m, cpu))
        return
    else:
        spec = next(c for c in PRODUCE_CASES if c.name == case.removesuffix(SMALL))
        topic = f"ab-{case}-r{rnd}"
        m = produce(bootstrap, topic, spec, n, record_size=size)
        # With group commit an acks=1 write is acknowledged before the fsync that lets the
        # high watermark past it (as a replicated Kafka topic's acks=1): wait for that round.
        deadline = time.monotonic() + 60
        while sum(high_watermarks(bootstrap, topic)) != n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{build.name} {topic}: high watermarks do not add up to {n}")
            time.sleep(0.2)
    build.runs.setdefault(case, []).append((m, build.cpu() - cpu0))
    build.sample_rss()


def summary(build: Build, case: str) -> dict[str, Any]:
    runs = build.runs[case]
    per_cpu = [m.bytes / MB / cpu for m, cpu in runs if cpu > 0] or [float("nan")]  # nan: no CPU time seen
    return {"mb_s": max(m.mb_s for m, _ in runs), "mb_per_cpu_s": max(per_cpu),
            "median_mb_per_cpu_s": statistics.median(per_cpu), "runs_cpu_s": [round(c, 2) for _, c in runs],
            "runs_mb_s": [round(m.mb_s, 1) for m, _ in runs], "runs_mb_per_cpu_s": [round(x, 1) for x in per_cpu]}


def main() -> None:
    args = parse_args()
    records = args.mb * MB // RECORD_SIZE
    intervals = (10, 100, 1000) if args.against else (args.txn_ms,)
    txns = {f"txn-{ms}": Case(f"txn-{ms}", f"transactional, {ms} ms", ms, transactional=True) for ms in intervals}
    produce_cases = [c.name for c in PRODUCE_CASES]
    cases = [*produce_cases, *txns, "fetch"]
    if args.against:
        cases = [*produce_cases, "acks1" + SMALL, "acksall" + SMALL, *txns, "fetch", "fetch" + SMALL, LATENCY]
    if args.cases:  # any case of either list, in its order (the 100 B ones for two builds too)
        known = [*produce_cases, "acks1" + SMALL, "acksall" + SMALL, *txns, "fetch", "fetch" + SMALL, LATENCY]
        wanted = args.cases.split(",")
        unknown = set(wanted) - set(known)
        if unknown:
            raise SystemExit(f"unknown cases {sorted(unknown)}; known: {', '.join(known)}")
        cases = [c for c in known if c in wanted]
    names = ("kafka", "eoslog") if args.against else ("A", "B")
    work = Path(tempfile.mkdtemp(prefix="eoslog-ab-"))
    builds: list[Build] = []
    try:
        builds = [start(names[0], args.a_src, work, config=args.a_config),
                  start(names[1], args.b_src, work, metrics=args.b_metrics, config=args.b_config)]
        console.print(f"A: {builds[0].name} {builds[0].commit} {' '.join(args.a_config)}\n"
                      f"B: {builds[1].name} {builds[1].commit} {' '.join(args.b_config)}\n"
                      f"{args.mb} MB per produce case, {args.rounds} rounds, load {os.getloadavg()[0]:.2f}")
        if args.against:
            # Untimed: the JVM compiles its hot paths in the first seconds of load; eoslog's
            # broker gets the same warm-up.
            for build in builds:
                console.print(f"warm-up on {build.name} …")
                create_topic(build.broker.bootstrap, "ab-warmup")
                produce(build.broker.bootstrap, "ab-warmup", PRODUCE_CASES[0], records)
                fetch(build.broker.bootstrap, "ab-warmup", records)
        for rnd in range(args.rounds):
            order = builds if rnd % 2 == 0 else builds[::-1]
            for case in cases:
                for build in order:
                    console.print(f"round {rnd + 1}: {case} on {build.name} …")
                    scraper = Scraper(build, args.scrape_s) if build.metrics_url else None
                    if scraper is not None:
                        scraper.start()
                    try:
                        measure(build, case, rnd, records, txns, args.txn_seconds,
                                (args.latency_rate, args.latency_seconds), scratch=work)
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
    a_name, b_name = names
    table = Table(title=f"A = {a_name} {builds[0].commit}, B = {b_name} {builds[1].commit}: "
                        f"best of {args.rounds} rounds")
    for col in ("case", "A MB/s", "B MB/s", "B/A", "A MB/cpu·s", "B MB/cpu·s", "B/A (cpu)", "B/A (cpu, median)"):
        table.add_column(col, justify="right" if col != "case" else "left")
    results: dict[str, Any] = {}
    for case in (c for c in cases if c != LATENCY):
        a, b = summary(builds[0], case), summary(builds[1], case)
        results[case] = {"A": a, "B": b, "b_over_a": round(b["mb_s"] / a["mb_s"], 3),
                         "b_over_a_cpu": round(b["mb_per_cpu_s"] / a["mb_per_cpu_s"], 3),
                         "b_over_a_cpu_median": round(b["median_mb_per_cpu_s"] / a["median_mb_per_cpu_s"], 3)}
        r = results[case]
        table.add_row(case, f"{a['mb_s']:.1f}", f"{b['mb_s']:.1f}", f"{r['b_over_a']:.2f}", f"{a['mb_per_cpu_s']:.1f}",
                      f"{b['mb_per_cpu_s']:.1f}", f"{r['b_over_a_cpu']:.2f}", f"{r['b_over_a_cpu_median']:.2f}")
    console.print(table)
    extras = side_facts(builds) if args.against and LATENCY in cases else {}
    if extras:
        render_side_facts(extras)
    console.print(f"load average at the end: {load_end:.2f}")
    if builds[1].metrics_url:
        console.print(f"B served metrics, scraped {builds[1].scrapes} times (every {args.scrape_s} s under load)")
    if not args.no_save:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        prefix = "ab-kafka" if args.against else "ab"
        doc = {"a": {"name": a_name, "src": str(builds[0].src), "commit": builds[0].commit, "config": args.a_config},
               "b": {"name": b_name, "src": str(builds[1].src), "commit": builds[1].commit, "config": args.b_config},
               "mb": args.mb, "rounds": args.rounds, "load_end": load_end,
               "b_metrics": bool(builds[1].metrics_url), "scrape_s": args.scrape_s, "b_scrapes": builds[1].scrapes,
               "results": results, **extras}
        path = RESULTS_DIR / f"{prefix}-{stamp}.json"
        path.write_text(json.dumps(doc, indent=1))
        console.print(f"saved {path}")
        if args.against and not args.cases:  # (a subset of the cases is not the latest run)
            (RESULTS_DIR / f"{prefix}-latest.json").write_text(json.dumps(doc, indent=1))
            plot_ratios(doc, RESULTS_DIR / f"{prefix}-latest.png")
            console.print(f"saved {RESULTS_DIR / f'{prefix}-latest.png'}")


def side_facts(builds: list[Build]) -> dict[str, Any]:
    """Latency (the best round per percentile), start-up and memory per broker, and their
    ratios B/A (for these, lower is better)."""
    out: dict[str, Any] = {"latency": {}, "startup": {}, "rss_mb": {}}
    for b in builds:
        out["latency"][b.name] = {q: min(r[q] for r in b.latency) for q in ("p50_ms", "p99_ms", "p999_ms")}
        out["latency"][b.name]["rounds"] = b.latency
        out["startup"][b.name] = b.startup
        out["rss_mb"][b.name] = b.rss_mb
    a, b = builds[0].name, builds[1].name

    def ratio(kind: str, key: str) -> float:
        return round(out[kind][b][key] / out[kind][a][key], 3)

    out["lower_is_better_b_over_a"] = {
        **{f"latency {q}": ratio("latency", q) for q in ("p50_ms", "p99_ms", "p999_ms")},
        "start-up (ready)": ratio("startup", "ready_s"),
        "start-up (first produce)": ratio("startup", "first_produce_s"),
        "RSS after start": ratio("rss_mb", "after start"),
        "RSS peak": ratio("rss_mb", "peak"),
    }
    return out


def render_side_facts(extras: dict[str, Any]) -> None:
    table = Table(title="latency, start-up, memory (lower is better)")
    names = list(extras["startup"])
    for col in ("measure", *names, "B/A"):
        table.add_column(col, justify="right" if col != "measure" else "left")
    ratios = extras["lower_is_better_b_over_a"]
    for q in ("p50_ms", "p99_ms", "p999_ms"):
        table.add_row(f"latency {q}", *(str(extras["latency"][n][q]) for n in names), f"{ratios[f'latency {q}']:.2f}")
    table.add_row("start-up to ready (s)", *(str(extras["startup"][n]["ready_s"]) for n in names),
                  f"{ratios['start-up (ready)']:.2f}")
    table.add_row("start-up to first produce (s)", *(str(extras["startup"][n]["first_produce_s"]) for n in names),
                  f"{ratios['start-up (first produce)']:.2f}")
    table.add_row("RSS after start (MB)", *(str(extras["rss_mb"][n]["after start"]) for n in names),
                  f"{ratios['RSS after start']:.2f}")
    table.add_row("RSS peak (MB)", *(str(extras["rss_mb"][n]["peak"]) for n in names), f"{ratios['RSS peak']:.2f}")
    console.print(table)


def plot_ratios(doc: dict[str, Any], path: Path) -> None:
    """Two panels: throughput ratios (higher is better) and latency/start-up/memory ratios
    (lower is better), each with the parity line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 8))
    cases = list(doc["results"])
    x = range(len(cases))
    top.bar([i - 0.2 for i in x], [doc["results"][c]["b_over_a"] for c in cases], 0.4, label="MB/s")
    top.bar([i + 0.2 for i in x], [doc["results"][c]["b_over_a_cpu"] for c in cases], 0.4,
            label="MB per broker CPU s")
    top.set_xticks(list(x), cases, rotation=30, ha="right")
    top.axhline(1.0, color="black", linewidth=0.8)
    top.set_ylabel(f"{doc['b']['name']} / {doc['a']['name']} (higher: {doc['b']['name']} faster)")
    top.legend()
    lower = doc["lower_is_better_b_over_a"]
    bottom.bar(range(len(lower)), list(lower.values()), 0.5, color="tab:orange")
    bottom.set_xticks(range(len(lower)), list(lower), rotation=30, ha="right")
    bottom.axhline(1.0, color="black", linewidth=0.8)
    bottom.set_ylabel(f"{doc['b']['name']} / {doc['a']['name']} (lower: {doc['b']['name']} better)")
    fig.suptitle(f"{doc['b']['name']} ({doc['b']['commit']}) vs {doc['a']['commit']}: {doc['mb']} MB per case, "
                 f"{doc['rounds']} rounds, one run")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


if __name__ == "__main__":
    main()

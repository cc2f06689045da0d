"""The core benchmark: eoslog's produce and fetch throughput next to this machine's own
limits, measured in one run, plus the broker's resident memory under sustained load.

    python bench/core.py [--quick]      # from the repo root, inside .venv

Steps: the machine's limits (plain sequential writer, loopback socket copy); a fresh
broker subprocess; one produce case per entry of ``load.PRODUCE_CASES`` (acks=1,
acks=all, idempotent), each to its own 3-partition topic, ``--rounds`` times over,
interleaved; one fetch per round of that round's acks=1 topic from offset 0; the
machine's limits again; then the ratios. Of repeated runs the best counts, for eoslog
and for the limits alike (other processes only ever slow a run down). The broker's
RSS and CPU time are sampled every 0.5 s throughout. Every measured write, the plain
writer's and each produce case, starts with a pool of recently freed pages
(``baselines.recycle_pages``; the reason is in baselines.py).

Results: a table on the terminal, ``bench/results/core-<timestamp>.json`` and
``core-latest.json``, and ``core-latest.png``. Goals are reported, never asserted:
the machine is shared and the figures are noisy; the ratios, taken in the same run,
are the numbers to compare.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

import against
from baselines import loopback_copy, plain_writer, recycle_pages
from common import (
    MB,
    RESULTS_DIR,
    Measurement,
    RssSampler,
    best,
    dir_bytes,
    prepare_run,
)
from load import PARTITIONS, PRODUCE_CASES, RECORD_SIZE, exact_count, fetch, produce

SCHEMA_VERSION = 1
QUICK_MB = 60
DEFAULT_MB = 300
RSS_INTERVAL_S = 0.5

# (key, label, numerator, denominator, goal); numerator/denominator name a produce
# case, "fetch", or a machine limit.
RATIOS: list[tuple[str, str, str, str, float]] = [
    ("produce_acks1_vs_plain_writer", "produce acks=1 / plain writer", "acks1", "plain_writer", 0.5),
    ("produce_acksall_vs_plain_writer", "produce acks=all / plain writer", "acksall", "plain_writer", 0.5),
    ("fetch_vs_loopback", "fetch / loopback copy", "fetch", "loopback", 0.5),
    ("idempotent_vs_plain", "idempotent / plain (acks=all)", "idempotent", "acksall", 0.95),
]

# Wide enough for the table even when the output is not a terminal.
console = Console(width=max(shutil.get_terminal_size((130, 24)).columns, 130))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help=f"{QUICK_MB} MB per case instead of {DEFAULT_MB}")
    p.add_argument("--mb", type=int, help="MB of record values per case (overrides --quick)")
    p.add_argument("--cases", help="comma-separated produce cases to run (default: all): "
                   + ",".join(c.name for c in PRODUCE_CASES))
    p.add_argument("--rounds", type=int, default=2,
                   help="times each produce case runs, interleaved (acks1, acksall, idempotent, acks1, …); "
                        "the best round counts, as for the machine limits")
    p.add_argument("--repeats", type=int, default=2,
                   help="runs of each machine limit before and after the broker (best counts)")
    p.add_argument("--work-dir", type=Path, default=None,
                   help="where the broker's data dir and the plain writer's file go (default: system temp)")
    p.add_argument("--keep", action="store_true", help="keep the work directory (data and broker log)")
    p.add_argument("--broker-src", type=Path, default=None,
                   help="run the broker from this eoslog src/ directory (e.g. an export of a fixed commit, "
                        "see README) instead of this checkout's")
    p.add_argument("--tag", help="save as core-TAG-<timestamp>.json and core-TAG-latest.{json,png}, "
                   "leaving core-latest alone (e.g. --tag sustained for a long memory run)")
    p.add_argument("--no-save", action="store_true", help="print only; write no JSON/PNG")
    against.add_flag(p)
    return p.parse_args(argv)


def measure_limits(work: Path, total: int, repeats: int, when: str) -> dict[str, list[Measurement]]:
    out: dict[str, list[Measurement]] = {
        "plain_writer": [], "plain_writer_fsync": [], "plain_writer_no_recycling": [], "loopback": [],
    }
    # Unrecycled first, while no page has been freed lately (see baselines.py).
    out["plain_writer_no_recycling"].append(plain_writer(work, total, recycle=False))
    for _ in range(repeats):
        out["plain_writer"].append(plain_writer(work, total))
        out["loopback"].append(loopback_copy(total))
    out["plain_writer_fsync"].append(plain_writer(work, total, fsync_at_end=True))
    for runs in out.values():
        for m in runs:
            m.extra["when"] = when
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    total_mb = args.mb or (QUICK_MB if args.quick else DEFAULT_MB)
    records = total_mb * MB // RECORD_SIZE
    total = records * RECORD_SIZE
    cases = PRODUCE_CASES
    if args.cases:
        wanted = set(args.cases.split(","))
        cases = [c for c in PRODUCE_CASES if c.name in wanted]
        if unknown := wanted - {c.name for c in cases}:
            raise SystemExit(f"unknown case(s): {', '.join(sorted(unknown))}")
    work, data_dir, facts = prepare_run(args.work_dir, "eoslog-bench-", args.broker_src)
    started = datetime.datetime.now().astimezone()
    side = getattr(args, "side", "eoslog")
    console.print(f"[bold]eoslog core benchmark[/] on {side}: {total_mb} MB per case ({records:,} records of "
                  f"{RECORD_SIZE} B), {PARTITIONS} partitions; work dir {work} "
                  f"({facts['disk'].get('device')}, {facts['disk'].get('fstype')})")
    console.print(f"machine: {facts['cpu_count']} CPUs, load {facts['load_avg_at_start']}, "
                  f"Python {facts['python']}, kernel {facts['kernel']}, librdkafka {facts['librdkafka']}; "
                  f"broker from {facts['broker_src']} ({facts['eoslog_commit']})")
    limits: dict[str, list[Measurement]] = {}
    produced: dict[str, list[Measurement]] = {c.name: [] for c in cases}
    fetch_runs: list[Measurement] = []
    broker = against.broker_for(args, data_dir, {"num.partitions": str(PARTITIONS)})
    sampler: RssSampler | None = None
    try:
        console.print("machine limits (before) …")
        for k, v in measure_limits(work, total, args.repeats, "before").items():
            limits.setdefault(k, []).extend(v)
        broker.start()
        assert broker.proc is not None
        sampler = RssSampler(broker.proc.pid, RSS_INTERVAL_S).start()
        time.sleep(1.0)  # a few idle samples: the broker's footprint before load
        for rnd, case in [(r, c) for r in range(args.rounds) for c in cases]:
            topic = f"bench-{case.name}-r{rnd}"
            # The broker writes into recently freed pages, as the plain writer does.
            sampler.set_phase("between")
            recycle_s = recycle_pages(work, total)
            cpu0 = sampler.set_phase(f"produce {case.name}")
            console.print(f"{case.label} (round {rnd + 1} of {args.rounds}) …")
            m = produce(broker.bootstrap, topic, case, records)
            m.extra["recycle_pages_s"] = round(recycle_s, 3)
            m.extra["broker_cpu_s"] = round(sampler.cpu_seconds() - cpu0, 2)
            sampler.set_phase("between")
            m.extra["high_watermarks"] = exact_count(broker.bootstrap, topic, records)
            m.extra["log_bytes"] = sum(dir_bytes(d) for d in data_dir.glob(f"{topic}-*"))
            m.extra["round"] = rnd
            produced[case.name].append(m)
        for rnd in range(args.rounds):
            fetch_topic = f"bench-{cases[0].name}-r{rnd}"
            console.print(f"fetch of {fetch_topic} (round {rnd + 1} of {args.rounds}) …")
            cpu0 = sampler.set_phase("fetch")
            m = fetch(broker.bootstrap, fetch_topic, records)
            m.extra["broker_cpu_s"] = round(sampler.cpu_seconds() - cpu0, 2)
            m.extra["round"] = rnd
            fetch_runs.append(m)
        sampler.set_phase("idle after")
        time.sleep(1.0)
        sampler.stop()
        broker.stop()
        console.print("machine limits (after) …")
        for k, v in measure_limits(work, total, args.repeats, "after").items():
            limits[k].extend(v)
    except BaseException:
        console.print(f"[red]benchmark failed; broker log {broker.log_path}:[/]\n{broker.log_text()[-3000:]}")
        args.keep = True
        raise
    finally:
        if sampler is not None:
            sampler.stop()
        if broker.alive():
            broker.stop()
        log_text = broker.log_text()  # it lives in the work dir
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            console.print(f"kept {work}")
    assert sampler is not None
    return assemble(started, facts, total_mb, records, cases, limits, produced, fetch_runs, sampler, log_text,
                    args.tag)


def assemble(started: datetime.datetime, facts: dict[str, Any], total_mb: int, records: int,
             cases: list[Any], limits: dict[str, list[Measurement]], produce_runs: dict[str, list[Measurement]],
             fetch_runs: list[Measurement], sampler: RssSampler, broker_log: str, tag: str | None) -> dict[str, Any]:
    best_limits = {k: best(v) for k, v in limits.items() if v}
    produced = {k: best(v) for k, v in produce_runs.items() if v}
    fetched = best(fetch_runs)
    rates: dict[str, float] = {k: m.mb_s for k, m in best_limits.items()}
    rates.update({k: m.mb_s for k, m in produced.items()})
    rates["fetch"] = fetched.mb_s
    ratios: dict[str, Any] = {}
    for key, label, num, den, goal in RATIOS:
        if num in rates and den in rates and rates[den] > 0:
            value = rates[num] / rates[den]
            ratios[key] = {"label": label, "value": round(value, 3), "goal": goal, "met": value >= goal}
    # Throughput per CPU second (the broker's, or the limit's own process): much less
    # sensitive than wall time to other processes competing for the two cores.
    efficiency: dict[str, float] = {}
    for k, runs in limits.items():
        per_cpu = [m.bytes / MB / m.extra["cpu_s"] for m in runs if m.extra.get("cpu_s")]
        if per_cpu:
            efficiency[k] = max(per_cpu)
    for k, runs in [*produce_runs.items(), ("fetch", fetch_runs)]:
        for m in runs:
            cpu = m.extra.get("broker_cpu_s")
            if cpu:
                m.extra["mb_per_broker_cpu_s"] = round(m.bytes / MB / cpu, 1)
                efficiency[k] = max(efficiency.get(k, 0.0), m.bytes / MB / cpu)
    cpu_ratios: dict[str, Any] = {}
    for key, label, num, den, _ in RATIOS:
        if num in efficiency and den in efficiency:
            cpu_ratios[key] = {"label": label, "value": round(efficiency[num] / efficiency[den], 3)}
    load_phases = {f"produce {c.name}" for c in cases} | {"fetch"}
    return {
        "schema": SCHEMA_VERSION,
        "benchmark": "core",
        "tag": tag,
        "timestamp": started.isoformat(timespec="seconds"),
        "machine": facts,
        "workload": {
            "total_mb": total_mb, "records": records, "record_bytes": RECORD_SIZE, "partitions": PARTITIONS,
            "client": "confluent-kafka (librdkafka)", "fetch_topic": fetched.extra["topic"],
            "rounds": max(len(v) for v in produce_runs.values()),
            "mb": "2^20 bytes of record values",
        },
        "limits": {k: m.to_json() for k, m in best_limits.items()},
        "limit_runs": {k: [m.to_json() for m in v] for k, v in limits.items()},
        "produce": {k: m.to_json() for k, m in produced.items()},
        "produce_runs": {k: [m.to_json() for m in v] for k, v in produce_runs.items()},
        "fetch": fetched.to_json(),
        "fetch_runs": [m.to_json() for m in fetch_runs],
        "ratios": ratios,
        "mb_per_cpu_s": {k: round(v, 1) for k, v in efficiency.items()},
        "cpu_ratios": cpu_ratios,
        "rss": {
            "interval_s": sampler.interval,
            "summary": sampler.summary(load_phases),
            "series_columns": ["t_s", "rss_mb", "broker_cpu_s", "phase"],
            "series": sampler.series(),
        },
        "broker_log": {
            "warnings": broker_log.count(" WARNING "),
            "errors": broker_log.count(" ERROR "),
        },
    }


def render(results: dict[str, Any]) -> None:
    table = Table(title=f"eoslog core benchmark — {results['workload']['total_mb']} MB per case, "
                  f"{results['workload']['record_bytes']} B records, {results['workload']['partitions']} partitions")
    table.add_column("measurement")
    table.add_column("MB/s", justify="right")
    table.add_column("records/s", justify="right")
    table.add_column("seconds", justify="right")
    table.add_column("broker CPU s (limit: own)", justify="right")
    table.add_column("MB per broker CPU s (best)", justify="right")
    table.add_column("client CPU s", justify="right")
    limits = results["limits"]
    names = {"plain_writer": "plain writer (limit)", "plain_writer_fsync": "plain writer + fsync at end",
             "plain_writer_no_recycling": "plain writer, no page recycling (info)",
             "loopback": "loopback copy (limit)"}
    for key in ("plain_writer", "plain_writer_fsync", "plain_writer_no_recycling"):
        if key in limits:
            m = limits[key]
            table.add_row(names[key], f"{m['mb_s']:,.1f}", "", f"{m['seconds']:.2f}",
                          f"({m['extra'].get('cpu_s')})", "", "", style="dim")
    for key, m in results["produce"].items():
        runs = results["produce_runs"][key]
        rates = ", ".join(f"{r['mb_s']:.0f}" for r in runs)
        label = m["name"] + (f" (best of {rates})" if len(runs) > 1 else "")
        table.add_row(label, f"{m['mb_s']:,.1f}", f"{m['records_s']:,.0f}", f"{m['seconds']:.2f}",
                      str(m["extra"].get("broker_cpu_s", "")), str(results["mb_per_cpu_s"].get(key, "")),
                      str(m["extra"].get("client_cpu_s", "")))
    m = limits["loopback"]
    table.add_row(names["loopback"], f"{m['mb_s']:,.1f}", "", f"{m['seconds']:.2f}",
                  f"({m['extra'].get('cpu_s')})", "", "", style="dim")
    f = results["fetch"]
    rates = ", ".join(f"{r['mb_s']:.0f}" for r in results["fetch_runs"])
    label = "fetch" + (f" (best of {rates})" if len(results["fetch_runs"]) > 1 else "")
    table.add_row(label, f"{f['mb_s']:,.1f}", f"{f['records_s']:,.0f}", f"{f['seconds']:.2f}",
                  str(f["extra"].get("broker_cpu_s", "")), str(results["mb_per_cpu_s"].get("fetch", "")),
                  str(f["extra"].get("client_cpu_s", "")))
    console.print(table)
    ratios = Table(title="ratios (same run; goals are reported, not asserted)")
    ratios.add_column("ratio")
    ratios.add_column("value", justify="right")
    ratios.add_column("goal", justify="right")
    ratios.add_column("")
    ratios.add_column("per CPU second", justify="right")
    for key, r in results["ratios"].items():
        mark = "[green]met[/]" if r["met"] else "[red]below goal[/]"
        per_cpu = results["cpu_ratios"].get(key, {}).get("value")
        ratios.add_row(r["label"], f"[bold]{r['value']:.3f}[/]", f"≥ {r['goal']}", mark,
                       "" if per_cpu is None else f"{per_cpu:.3f}")
    console.print(ratios)
    for name, m in [*results["produce"].items(), ("fetch", results["fetch"])]:
        if m["extra"].get("client_errors"):
            console.print(f"[yellow]{name}: the client reported errors (the figure may not be clean): "
                          f"{m['extra']['client_errors'][:3]}[/]")
    if results["broker_log"]["errors"]:
        console.print(f"[yellow]the broker logged {results['broker_log']['errors']} ERROR lines[/]")
    s = results["rss"]["summary"]
    console.print(f"broker RSS under load: start {s.get('start_mb')} MB, peak {s.get('peak_mb')} MB, "
                  f"end {s.get('end_mb')} MB; slope {s.get('slope_mb_per_min')} MB/min "
                  f"(after the first {s.get('slope_after_s')} s), peak of 2nd half - peak of 1st half "
                  f"{s.get('half_peak_growth_mb')} MB; {s.get('samples')} samples over {s.get('seconds')} s")


def save(results: dict[str, Any], tag: str | None) -> list[Path]:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = results["timestamp"].replace(":", "").replace("-", "")[:15]
    name = f"core-{tag}" if tag else "core"
    paths = [RESULTS_DIR / f"{name}-{stamp}.json", RESULTS_DIR / f"{name}-latest.json"]
    text = json.dumps(results, indent=1) + "\n"
    for p in paths:
        tmp = p.with_suffix(".json.tmp")
        tmp.write_text(text)
        tmp.replace(p)
    from plot import plot

    png = RESULTS_DIR / f"{name}-latest.png"
    plot(results, png)
    return [*paths, png]


def figures(results: dict[str, Any]) -> against.Figures:
    """What ``--against kafka`` compares: MB/s and MB per broker CPU second of each case, peak RSS."""
    out: against.Figures = {}
    for key, m in [*results["produce"].items(), ("fetch", results["fetch"])]:
        out[f"{key} MB/s"] = (m["mb_s"], True)
        if key in results["mb_per_cpu_s"]:
            out[f"{key} MB per broker CPU s"] = (results["mb_per_cpu_s"][key], True)
    out["peak RSS MB"] = (results["rss"]["summary"]["peak_mb"], False)
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.against:
        return against.main("core", args, run, figures, console.print)
    results = run(args)
    render(results)
    if not args.no_save:
        for p in save(results, args.tag):
            console.print(f"wrote {p.relative_to(Path.cwd()) if p.is_relative_to(Path.cwd()) else p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

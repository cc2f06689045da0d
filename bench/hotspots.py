"""Where the broker spends its time under the core benchmark's loads, sampled with
py-spy (``pip install py-spy``).

    python bench/hotspots.py [--mb 300] [--case acksall] [--stacks DIR] [--config KEY=VALUE ...]

Starts a fresh broker and records it with ``py-spy record --idle --nolineno --format
raw`` while one produce case runs, then again while the fetch of that topic runs. Per
phase it prints the broker's CPU use (psutil) and the functions with the most samples
on top of the stack ("self") and anywhere on it ("total"), as shares of all samples
(wall time). Samples whose innermost Python frame is the event loop's entry point are
time inside uvloop's C code: waiting in epoll, or reading and writing sockets. Saves
``bench/results/hotspots-latest.json``; ``--stacks DIR`` keeps the collapsed stacks
(input for flamegraph.pl or speedscope).
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
from rich.console import Console
from rich.table import Table

from common import MB, RESULTS_DIR, BrokerProcess, Measurement, machine_facts, use_broker_src
from load import PARTITIONS, PRODUCE_CASES, RECORD_SIZE, fetch, produce

console = Console(width=max(shutil.get_terminal_size((140, 24)).columns, 140))

# uvloop runs the loop in C; the innermost Python frame while it waits or does socket
# I/O is the frame that entered it.
LOOP_ENTRY = "Runner.run (asyncio/runners.py)"
IN_LOOP = "(uvloop C code: epoll wait, socket reads/writes)"


_LINE_NUMBER = re.compile(r":\d+\)$")


def analyse(raw: Path, top: int) -> dict[str, Any]:
    """Self and total shares per function; with a profile recorded with line numbers
    (``record(lineno=True)``) also the source lines with the most self samples."""
    self_counts: collections.Counter[str] = collections.Counter()
    total_counts: collections.Counter[str] = collections.Counter()
    line_counts: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in raw.read_text().splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_s)
        located = stack.split(";")
        frames = [_LINE_NUMBER.sub(")", f) for f in located]
        if LOOP_ENTRY in frames:
            cut = frames.index(LOOP_ENTRY) + 1
            frames, located = frames[cut:], located[cut:]
        samples += count
        if not frames:
            self_counts[IN_LOOP] += count
            continue
        self_counts[frames[-1]] += count
        if located[-1] != frames[-1]:
            line_counts[located[-1]] += count
        for f in set(frames):
            total_counts[f] += count

    def rows(counter: collections.Counter[str]) -> list[dict[str, Any]]:
        return [{"function": f, "samples": n, "share": round(n / samples, 4) if samples else 0}
                for f, n in counter.most_common(top)]

    out = {"samples": samples, "self": rows(self_counts), "total": rows(total_counts)}
    if line_counts:
        out["lines"] = rows(line_counts)
    return out


def py_spy() -> str | None:
    """py-spy on PATH, or next to this interpreter (a venv used without activating it)."""
    beside = Path(sys.executable).parent / "py-spy"
    return shutil.which("py-spy") or (str(beside) if beside.exists() else None)


def record(pid: int, raw: Path, rate: int, load: Callable[[], Measurement], *, idle: bool = True,
           lineno: bool = False) -> tuple[Measurement, float]:
    """Run ``load`` under py-spy; returns its measurement and the broker's CPU seconds.
    ``idle``: keep idle samples (shares of wall time) or not (shares of busy time)."""
    cmd = [py_spy() or "py-spy", "record", "--pid", str(pid), "--nonblocking",
           "--rate", str(rate), "--format", "raw", "--output", str(raw)]
    cmd += ["--idle"] if idle else []
    cmd += [] if lineno else ["--nolineno"]
    spy = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)  # attach before the load starts (the idle half second is in the samples)
    proc = psutil.Process(pid)
    try:
        c0 = proc.cpu_times()
        m = load()
        c1 = proc.cpu_times()
    finally:
        spy.send_signal(signal.SIGINT)
        _, err = spy.communicate(timeout=60)
    if not raw.exists():
        raise RuntimeError(f"py-spy wrote nothing: {err.strip()[-2000:]}")
    return m, c1.user + c1.system - c0.user - c0.system


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=int, default=300, help="MB of record values to produce and fetch")
    p.add_argument("--case", default="acksall", choices=[c.name for c in PRODUCE_CASES])
    p.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--stacks", type=Path, help="directory to keep each phase's collapsed stacks")
    p.add_argument("--broker-src", type=Path, default=None, help="eoslog src/ directory to run the broker from")
    p.add_argument("--config", metavar="KEY=VALUE", action="append", default=[],
                   help="a broker config (repeatable), e.g. log.flush.policy=kafka")
    p.add_argument("--no-save", action="store_true")
    args = p.parse_args(argv)
    if py_spy() is None:
        raise SystemExit("py-spy not found: pip install py-spy")
    broker_src = use_broker_src(args.broker_src)
    case = next(c for c in PRODUCE_CASES if c.name == args.case)
    records = args.mb * MB // RECORD_SIZE
    work = Path(tempfile.mkdtemp(prefix="eoslog-hotspots-"))
    overrides = {"num.partitions": str(PARTITIONS), **dict(kv.partition("=")[::2] for kv in args.config)}
    broker = BrokerProcess(work / "data", overrides=overrides)
    phases: dict[str, Any] = {}
    topic = f"hotspots-{case.name}"
    loads: list[tuple[str, Callable[[], Measurement]]] = [
        (f"produce {case.name}", lambda: produce(broker.bootstrap, topic, case, records)),
        ("fetch", lambda: fetch(broker.bootstrap, topic, records)),
    ]
    try:
        broker.start()
        assert broker.proc is not None
        if args.stacks:
            args.stacks.mkdir(parents=True, exist_ok=True)
        for name, load in loads:
            raw = work / f"{name.replace(' ', '-')}.txt"
            m, cpu = record(broker.proc.pid, raw, args.rate, load)
            if args.stacks:
                shutil.copy(raw, args.stacks / raw.name)
            phases[name] = {
                "mb_s": round(m.mb_s, 1), "seconds": round(m.seconds, 2), "broker_cpu_s": round(cpu, 2),
                "client_cpu_s": m.extra.get("client_cpu_s"), **analyse(raw, args.top),
            }
    finally:
        if broker.alive():
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    for name, ph in phases.items():
        console.print(f"[bold]{name}[/]: {ph['mb_s']} MB/s over {ph['seconds']} s; broker CPU {ph['broker_cpu_s']} s "
                      f"({ph['broker_cpu_s'] / ph['seconds']:.0%} of one core), client CPU {ph['client_cpu_s']} s")
        for kind in ("self", "total"):
            t = Table(title=f"{name}: top functions by {kind} samples ({ph['samples']} samples)")
            t.add_column("function")
            t.add_column("share of samples", justify="right")
            for r in ph[kind]:
                t.add_row(r["function"], f"{r['share']:.1%}")
            console.print(t)
    if not args.no_save:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        out = RESULTS_DIR / "hotspots-latest.json"
        out.write_text(json.dumps({
            "timestamp": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "mb": args.mb, "case": case.name, "rate": args.rate,
            "machine": machine_facts(RESULTS_DIR, broker_src), "phases": phases,
        }, indent=1) + "\n")
        console.print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

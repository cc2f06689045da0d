"""The benchmark's picture: throughput bars (eoslog next to the machine's limits) and
the broker's resident memory over the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter

LIMIT_COLOR = "#9e9e9e"
EOSLOG_COLOR = "#1f77b4"
PHASE_COLORS = ["#fde0c5", "#d4e8d4", "#d6e4f0", "#eadcf0", "#f5f0c8", "#f0d4d4"]


def plot(results: dict[str, Any], path: Path) -> None:
    fig, (write, read, rss) = plt.subplots(1, 3, figsize=(17, 5.5), gridspec_kw={"width_ratios": [1.2, 0.8, 1.2]})
    limits = results["limits"]
    write_rows = [("plain writer", limits["plain_writer"]["mb_s"], LIMIT_COLOR, "")]
    if "plain_writer_fsync" in limits:
        write_rows.append(("plain writer\n+ fsync at end", limits["plain_writer_fsync"]["mb_s"], LIMIT_COLOR, ""))
    write_rows += [(c["name"], c["mb_s"], EOSLOG_COLOR, "") for c in results["produce"].values()]
    _bars(write, write_rows, "write path: produce vs plain writer")
    read_rows = [("loopback copy", limits["loopback"]["mb_s"], LIMIT_COLOR, ""),
                 ("fetch", results["fetch"]["mb_s"], EOSLOG_COLOR, "")]
    _bars(read, read_rows, "read path: fetch vs loopback copy")
    _rss(rss, results)
    m = results["machine"]
    w = results["workload"]
    fig.suptitle(
        f"eoslog core benchmark — {w['total_mb']} MB of {w['record_bytes']} B records per case, "
        f"{w['partitions']} partitions — {m['cpu_count']} shared CPUs, Python {m['python']} — {results['timestamp']}"
        "\nblue: eoslog with confluent-kafka; grey: this machine's limits measured in the same run\nratios: "
        + ";  ".join(f"{r['label']} = {r['value']:.2f} (goal {r['goal']})" for r in results["ratios"].values()),
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _bars(ax: Any, rows: list[tuple[str, float, str, str]], title: str) -> None:
    y = list(range(len(rows)))[::-1]
    values = [r[1] for r in rows]
    ax.barh(y, values, color=[r[2] for r in rows])
    ax.set_yticks(y, [r[0] for r in rows], fontsize=9)
    ax.set_xlabel("MB/s (MB = 2^20 bytes)")
    for yi, v in zip(y, values, strict=True):
        ax.text(v, yi, f" {v:,.0f}", va="center", fontsize=8)
    ax.set_xlim(0, max(values) * 1.2)
    ax.set_title(title, fontsize=10)


def _rss(ax: Any, results: dict[str, Any]) -> None:
    series = results["rss"]["series"]
    if not series:
        return
    ts = [s[0] for s in series]
    mbs = [s[1] for s in series]
    # Shade each phase.
    spans: list[tuple[str, float, float]] = []
    for t, _, _, phase in series:
        if spans and spans[-1][0] == phase:
            spans[-1] = (phase, spans[-1][1], t)
        else:
            spans.append((phase, t, t))
    colors: dict[str, str] = {}
    for phase, t0, t1 in spans:
        color = colors.setdefault(phase, PHASE_COLORS[len(colors) % len(PHASE_COLORS)])
        ax.axvspan(t0, max(t1, t0 + 0.25), color=color, alpha=0.6, lw=0)
        ax.text((t0 + t1) / 2, 0.98, phase, transform=ax.get_xaxis_transform(), rotation=90,
                ha="center", va="top", fontsize=7)
    ax.plot(ts, mbs, color="#d62728", lw=1.5)
    ax.set_ylim(0, max(mbs) * 1.4)
    ax.set_xlabel("seconds")
    ax.set_ylabel("broker RSS (MB)")
    s = results["rss"]["summary"]
    ax.set_title(
        f"broker resident memory, sampled every {results['rss']['interval_s']} s\n"
        f"under load: start {s.get('start_mb')} / peak {s.get('peak_mb')} / end {s.get('end_mb')} MB\n"
        f"slope {s.get('slope_mb_per_min')} MB/min; 2nd-half peak - 1st-half peak {s.get('half_peak_growth_mb')} MB",
        fontsize=9,
    )


TXN_COLOR = "#1f77b4"
BASELINE_COLOR = "#555555"
CONTROL_COLOR = "#b0b0b0"


def plot_transactions(results: dict[str, Any], path: Path) -> None:
    """transactions.py's picture: throughput per case next to the idempotent baseline
    (with the goal line), and the end of a cycle (flush, commit) per interval."""
    fig, (tput, lat) = plt.subplots(1, 2, figsize=(16, 6), gridspec_kw={"width_ratios": [1.1, 1]})
    cases = results["cases"]
    names = list(results["runs"])
    y = list(range(len(names)))[::-1]
    values = [(cases[n] or {}).get("mb_s", 0.0) for n in names]

    def color(n: str) -> str:
        c = cases[n]
        if c is None or c.get("interval_ms") is None:
            return BASELINE_COLOR
        return TXN_COLOR if c["transactional"] else CONTROL_COLOR

    tput.barh(y, values, color=[color(n) for n in names])
    tput.set_yticks(y, [n if cases[n] is None else cases[n]["name"].replace(", ", ",\n", 1) for n in names],
                    fontsize=9)
    for n, yi, v in zip(names, y, values, strict=True):
        r = results["ratios"].get(n)
        note = ""
        if cases[n] is None:
            note = " FAILED"
        elif r and r.get("value") is not None:
            note = f"  ratio {r['value']:.2f}"
        tput.text(v, yi, f" {v:,.0f}{note}", va="center", fontsize=8)
        for run in results["runs"][n]:  # every round, to show the spread
            tput.plot(run["mb_s"], yi, "k.", ms=4)
    base = (cases.get("idempotent") or {}).get("mb_s")
    goal = next((r["goal"] for r in results["ratios"].values() if r.get("goal")), None)
    if base and goal:
        tput.axvline(base * goal, color="#d62728", ls="--", lw=1)
        tput.text(base * goal, y[0] + 0.45, f" goal: {goal:.2f} of idempotent", color="#d62728", fontsize=8)
    tput.set_xlim(0, max([*values, 1.0]) * 1.35)
    tput.set_xlabel("MB/s of committed record values (MB = 2^20 bytes); bar: best round, dots: each round")
    tput.set_title("throughput (ratio: to the idempotent baseline)", fontsize=10)

    timed = [n for n in names if cases[n] is not None and cases[n].get("interval_ms") is not None]
    x = list(range(len(timed)))
    series = [("flush() p50", "flush_p50", "#aec7e8"), ("flush() p99", "flush_p99", "#6baed6"),
              ("commit_transaction() p50", "commit_p50", "#fdae6b"),
              ("commit_transaction() p99", "commit_p99", "#e6550d")]
    width = 0.2
    for i, (label, key, col) in enumerate(series):
        pts = [(xi + (i - 1.5) * width, cases[n]["latency_ms"][key]) for xi, n in zip(x, timed, strict=True)]
        pts = [(xi, v) for xi, v in pts if v is not None]
        lat.bar([xi for xi, _ in pts], [v for _, v in pts], width, label=label, color=col)
        for xi, v in pts:
            lat.text(xi, v, f"{v:.1f}", ha="center", va="bottom", fontsize=7)
    lat.set_xticks(x, [("txn" if cases[n]["transactional"] else "flush only") + f" {cases[n]['interval_ms']} ms\n"
                       f"({cases[n]['latency_ms']['samples']} cycles)" for n in timed], fontsize=8)
    lat.set_yscale("log")
    lat.set_ylabel("ms (log scale)")
    lat.legend(fontsize=8)
    lat.set_title("end of each cycle: flush() drains the queue, then commit_transaction()", fontsize=10)
    m = results["machine"]
    w = results["workload"]
    fig.suptitle(
        f"eoslog transactions benchmark — {w['seconds_per_case']:g} s per case, best of {w['rounds']} round(s), "
        f"{w['record_bytes']} B records, {w['partitions']} partitions — {m['cpu_count']} shared CPUs, "
        f"Python {m['python']}, librdkafka {m['librdkafka']}, eoslog {m['eoslog_commit']} — {results['timestamp']}\n"
        "transactional: begin → produce for the interval → flush → commit, only committed records count; "
        "grey: idempotent flushing every N ms (control); every case checked by a read_committed consumer"
        + ("" if results["verified"] else " — VERIFICATION FAILED"),
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


KAFKA_COLOR = "#555555"


def plot_transactions_against(results: dict[str, Any], path: Path) -> None:
    """transactions.py ``--against kafka``: MB/s per case and p99 commit time per transactional
    case, eoslog next to Kafka (best of each side's runs), with eoslog / Kafka on each pair."""
    best, ratios = results["best"], results["ratios_eoslog_over_kafka"]
    cases = list(dict.fromkeys(k.removesuffix(" MB/s") for k in best["eoslog"] if k.endswith(" MB/s")))
    commits = [c for c in cases if f"{c} p99 commit ms" in best["eoslog"]]
    fig, (tput, lat) = plt.subplots(1, 2, figsize=(16, 6), gridspec_kw={"width_ratios": [1.2, 1]})
    for ax, names, key, unit in ((tput, cases, "MB/s", "MB/s of committed record values (best run)"),
                                 (lat, commits, "p99 commit ms", "commit p99, ms (best run)")):
        x = list(range(len(names)))
        for i, (side, col) in enumerate((("eoslog", EOSLOG_COLOR), ("kafka", KAFKA_COLOR))):
            values = [best[side].get(f"{n} {key}", 0.0) for n in names]
            ax.bar([xi + (i - 0.5) * 0.4 for xi in x], values, 0.4, color=col,
                   label="eoslog" if side == "eoslog" else results["kafka"])
        for xi, n in zip(x, names, strict=True):
            r = ratios.get(f"{n} {key}")
            top = max(best["eoslog"].get(f"{n} {key}", 0.0), best["kafka"].get(f"{n} {key}", 0.0))
            if r:
                ax.text(xi, top, f"{r['value']:.2f}", ha="center", va="bottom", fontsize=8)
        ax.set_xticks(x, [n.replace("-", "\n", 1) for n in names], fontsize=8)
        ax.set_ylabel(unit)
        ax.legend(fontsize=8)
    tput.set_title("throughput; label: eoslog / Kafka (higher is better)", fontsize=10)
    lat.set_title("commitTransaction() p99; label: eoslog / Kafka (lower is better)", fontsize=10)
    versions = "; ".join(
        f"{side} TV2/TV1 " + ", ".join(f"{c.removeprefix('txn-')} ms {e['mb_s_rounds_median']}" for c, e in per.items())
        for side, per in results.get("transaction_versions", {}).items())
    fig.suptitle(
        f"{results['benchmark']}: eoslog vs {results['kafka']}, client {results.get('client', 'librdkafka')}, "
        f"{results['rounds']} interleaved runs per broker, load {results['load_avg_at_start'][0]} at start, "
        f"{results.get('load_avg_at_end', ['?'])[0]} at end — {results['timestamp']}\n"
        + ("txn-N: transaction version 1 (the client speaks no other); "
           if "librdkafka" in results.get("client", "librdkafka") else
           "txn-N: transaction.version 2"
           + (", txn-N-tv1: after a downgrade to 1 (same broker, interleaved); " if versions else "; "))
        + "every case verified read_committed"
        + (f"\nMB/s TV2/TV1 (median of the rounds' ratios): {versions}" if versions else ""),
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


CLIENT_COLORS = {"eoslog": "#1f77b4", "eoslog-asyncio": "#4a98d3", "eoslog-pure": "#9cc3e6", "confluent": "#555555",
                 "aiokafka": "#ff7f0e", "kafka-python": "#2ca02c"}


def plot_clients(results: dict[str, Any], path: Path) -> None:
    """clients.py's picture: records/s per client, one panel per role and record size;
    solid bars with each client's defaults, hatched with the equal settings."""
    roles = [r for r in ("produce", "consume") if results["clients"][r]]
    sizes = results["workload"]["sizes"]
    fig, axes = plt.subplots(len(sizes), len(roles), figsize=(8 * len(roles), 5.2 * len(sizes)), squeeze=False)
    for col, role in enumerate(roles):
        for row, size in enumerate(sizes):
            ax = axes[row][col]
            labels, values, colors, hatches = [], [], [], []
            for client in results["clients"][role]:
                for settings in ("defaults", "equal"):
                    b = results["best"].get(f"{role}/{client}/{size}/{settings}")
                    labels.append(f"{client} ({settings})")
                    values.append(0.0 if b is None else b["records_s"])
                    colors.append(CLIENT_COLORS.get(client, "#999999"))
                    hatches.append("//" if settings == "equal" else "")
            y = list(range(len(labels)))[::-1]
            bars = ax.barh(y, values, color=colors)
            for bar, hatch in zip(bars, hatches, strict=True):
                bar.set_hatch(hatch)
                bar.set_edgecolor("white")
            ax.set_yticks(y, labels, fontsize=8)
            for yi, v in zip(y, values, strict=True):
                ax.text(v, yi, f" {v:,.0f}" if v else " (not run / failed)", va="center", fontsize=7)
            ax.set_xlim(0, max([*values, 1.0]) * 1.25)
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
            ax.set_xlabel("records/s (best round)")
            ratios = [r for r in results["ratios"] if r["role"] == role and r["size"] == size
                      and r["settings"] == "equal"]
            ax.set_title(f"{role}, {size} B records\n" + "\n".join(
                f"{r['label']} = {r['value']:.2f}" + (f" (goal {r['goal']})" if r["goal"] else "") for r in ratios),
                fontsize=9)
    m = results["machine"]
    load = m.get("load_avg_at_start")
    fig.suptitle(f"eoslog client benchmark — one eoslog broker, {results['workload']['partitions']} partitions, "
                 f"{results['workload'].get('isolation', 'read_uncommitted')}\n{m['cpu_count']} shared CPUs"
                 + (f" (load average {load})" if load else "")
                 + f", Python {m['python']} — {results['timestamp']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


EOS_PARTS = [("in", "#c7dcef"), ("wait", "#fdd0a2"), ("commit", "#e6550d"), ("visible", "#756bb1")]


def plot_eos_latency(results: dict[str, Any], path: Path) -> None:
    """eos_latency.py's picture: per input rate, p50 (bar) and p99 (tick) end-to-end latency
    of every client and mode; below, the p50 of each part of it, stacked."""
    w = results["workload"]
    rates, impls, modes = w["rates"], w["impls"], w["modes"]
    fig, axes = plt.subplots(2, len(rates), figsize=(6 * len(rates), 9), squeeze=False)
    labels = [f"{i}\n{m}" for i in impls for m in modes]
    fig.subplots_adjust(hspace=0.35)
    for col, rate in enumerate(rates):
        top, bottom = axes[0][col], axes[1][col]
        rows = [results["best"].get(f"{i}/{m}/{rate}") for i in impls for m in modes]
        x = list(range(len(rows)))
        p50 = [r["latency_ms"]["p50"] if r else 0.0 for r in rows]
        p99 = [r["latency_ms"]["p99"] if r else 0.0 for r in rows]
        colors = [CLIENT_COLORS.get("confluent" if i == "librdkafka" else i, "#999999") for i in impls for _ in modes]
        top.bar(x, p50, color=colors)
        top.scatter(x, p99, marker="_", s=300, color="black", label="p99")
        for xi, v in zip(x, p50, strict=True):
            top.text(xi, v, f"{v:.0f}", ha="center", va="bottom", fontsize=7)
        top.set_yscale("log")
        top.set_xticks(x, labels, fontsize=7)
        top.set_ylabel("end-to-end latency, ms (bar p50, tick p99)")
        lines = [f"{i}: " + ", ".join(f"{r['mode'][4:]} {r['p50']:.1f}x" for r in results["ratios"]
                                      if r["rate"] == rate and r["impl"] == i) for i in impls]
        top.set_title(f"{rate:,} records/s — p50 txn / alo\n" + "\n".join(lines), fontsize=8)
        base = [0.0] * len(rows)
        for part, color in EOS_PARTS:
            values = [max(0.0, r["parts_ms"][part]["p50"]) if r else 0.0 for r in rows]
            bottom.bar(x, values, bottom=base, color=color, label=part)
            base = [b + v for b, v in zip(base, values, strict=True)]
        bottom.set_xticks(x, labels, fontsize=7)
        bottom.set_ylabel("p50 of each part, ms")
        bottom.legend(fontsize=7)
    m = results["machine"]
    fig.suptitle(f"eoslog exactly-once latency — consume-transform-produce, one eoslog broker, "
                 f"{w['record_bytes']} B records — {m['cpu_count']} shared CPUs (load average "
                 f"{m.get('load_avg_at_start')}) — {results['timestamp']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_reassignment(results: dict[str, Any], path: Path) -> None:
    """Three panels, each side's best: move MB/s (unthrottled, throttled, the throttle as a line),
    the copy's records/s and its commit p99 per mode."""
    best = results["best"]
    colours = {"eoslog": "tab:blue", "kafka": "tab:orange"}
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    modes = ("alone", "unthrottled", "throttled")
    panels = ((["move unthrottled MB/s", "move throttled MB/s"], ["unthrottled", "throttled"], "MB/s moved"),
              ([f"copy {m} records/s" for m in modes], list(modes), "copy records/s"),
              ([f"copy {m} commit p99 ms" for m in modes], list(modes), "copy commit p99 (ms)"))
    for ax, (keys, ticks, label) in zip(axes, panels, strict=True):
        for i, side in enumerate(best):
            offset = -0.2 + 0.4 * i
            ax.bar([k + offset for k in range(len(keys))], [best[side][k] for k in keys], width=0.4,
                   color=colours.get(side), label=side)
        ax.set_xticks(range(len(keys)), ticks)
        ax.set_ylabel(label)
        ax.legend()
    axes[0].axhline(results["settings"]["throttle_mb_s"], color="grey", linestyle="--", label="throttle")
    axes[0].legend()
    s = results["settings"]
    fig.suptitle(f"bench/reassignment.py: {s['move_mb']} MB moved per reassignment, copy of {s['copy_records']} "
                 f"records during moves; {results['kafka'] or ''}; load {results['machine']['load_avg_at_start'][0]} "
                 "at start (shared machine)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)

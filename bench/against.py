"""``--against kafka`` (issue 12): a benchmark's workload on Apache Kafka too, in the same run.

The one place that starts the reference broker for bench/ (``tests/support/kafka_harness.py``'s single
KRaft node from the reference jars: its default flush settings, no fsync per write, as eoslog's)
and that runs a whole benchmark on both brokers in interleaved rounds: eoslog then Kafka in even
rounds, Kafka then eoslog in odd ones, so a slow stretch of the shared machine hits both. Each
bench names its figures (higher or lower is better); the best of each side's rounds counts and
the ratio reported is eoslog / Kafka. Results: ``<bench>-kafka-<timestamp>.json``,
``<bench>-kafka-latest.json`` and ``<bench>-kafka-latest.png``.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from common import RESULTS_DIR, BrokerProcess
from support.kafka_harness import KAFKA_LIB, SETUP_HINT, KafkaBroker, kafka_version

SIDES = ("eoslog", "kafka")

# name → (value, higher is better)
Figures = dict[str, tuple[float, bool]]


def add_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--against", choices=["kafka"],
                   help="also run the workload on Apache Kafka (reference jars), interleaved rounds; "
                        "saves eoslog/Kafka ratios")
    p.add_argument("--against-rounds", type=int, default=2,
                   help="with --against: whole-benchmark rounds per broker (order alternates)")


def kafka_label() -> str:
    return f"Apache Kafka {kafka_version()}"


def require_kafka() -> None:
    """A readable exit when Apache Kafka's jars are missing."""
    if not any(KAFKA_LIB.glob("kafka_*.jar")):
        raise SystemExit(f"--against kafka needs Apache Kafka's jars in {KAFKA_LIB}: {SETUP_HINT}")


def kafka_broker(data_dir: Path, overrides: Mapping[str, str] | None = None) -> KafkaBroker:
    """An unstarted single-node Apache Kafka; a readable exit when the jars are missing."""
    require_kafka()
    return KafkaBroker(data_dir, overrides)


def broker_for(args: argparse.Namespace, data_dir: Path,
               overrides: dict[str, str]) -> BrokerProcess | KafkaBroker:
    """The broker a bench's ``run(args)`` measures: eoslog's, or Kafka's on a ``--against`` kafka round."""
    if getattr(args, "side", "eoslog") == "kafka":
        return kafka_broker(data_dir, overrides)
    return BrokerProcess(data_dir, overrides=overrides)


def interleave(bench: str, args: argparse.Namespace, run: Callable[[argparse.Namespace], dict[str, Any]],
               figures: Callable[[dict[str, Any]], Figures]) -> dict[str, Any]:
    """Run ``run`` on both brokers ``args.against_rounds`` times, alternating which goes first."""
    started = datetime.datetime.now().astimezone()
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    per_side: dict[str, list[Figures]] = {s: [] for s in SIDES}
    for rnd in range(args.against_rounds):
        for side in SIDES if rnd % 2 == 0 else SIDES[::-1]:
            a = copy.copy(args)
            a.side = side
            per_side[side].append(figures(run(a)))
    best = {s: _best(per_side[s]) for s in SIDES}
    ratios = {name: {"value": round(value / best["kafka"][name][0], 3), "higher_is_better": higher}
              for name, (value, higher) in best["eoslog"].items()
              if name in best["kafka"] and best["kafka"][name][0]}
    return {
        "benchmark": f"{bench}-kafka",
        "timestamp": started.isoformat(timespec="seconds"),
        "load_avg_at_start": load_at_start,
        "kafka": kafka_label(),
        "rounds": args.against_rounds,
        "order": "eoslog first in even rounds, Kafka first in odd ones",
        "runs": {s: [{k: v for k, (v, _) in f.items()} for f in per_side[s]] for s in SIDES},
        "best": {s: {k: v for k, (v, _) in best[s].items()} for s in SIDES},
        "ratios_eoslog_over_kafka": ratios,
    }


def main(bench: str, args: argparse.Namespace, run: Callable[[argparse.Namespace], dict[str, Any]],
         figures: Callable[[dict[str, Any]], Figures], print_: Callable[[str], None], *,
         annotate: Callable[[dict[str, Any]], None] | None = None,
         plot_: Callable[[dict[str, Any], Path], None] | None = None) -> int:
    """A bench's ``main`` under ``--against kafka``: both brokers, the ratios printed and saved.
    ``annotate`` adds the bench's own findings to the results (and prints them) before they are
    saved; ``plot_`` draws them instead of the ratios' bars."""
    results = interleave(bench, args, run, figures)
    results["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    render(results, print_)
    if annotate is not None:
        annotate(results)
    if not args.no_save:
        for path in save(results, plot_):
            print_(f"wrote {path}")
    return 0


def _best(rounds: list[Figures]) -> Figures:
    out: Figures = {}
    for f in rounds:
        for name, (value, higher) in f.items():
            if name not in out or (value > out[name][0]) == higher:
                out[name] = (value, higher)
    return out


def save(results: dict[str, Any],
         plot_: Callable[[dict[str, Any], Path], None] | None = None) -> list[Path]:
    """The results as JSON (timestamped and latest) and a plot: ``plot_``, or the ratios' bars."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    name = results["benchmark"]
    stamp = results["timestamp"].replace(":", "").replace("-", "")[:15]
    paths = [RESULTS_DIR / f"{name}-{stamp}.json", RESULTS_DIR / f"{name}-latest.json"]
    text = json.dumps(results, indent=1) + "\n"
    for p in paths:
        p.write_text(text)
    png = RESULTS_DIR / f"{name}-latest.png"
    (plot_ or plot)(results, png)
    return [*paths, png]


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ratios = results["ratios_eoslog_over_kafka"]
    names = list(ratios)
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(names) + 1.8))
    y = list(range(len(names)))[::-1]
    values = [ratios[n]["value"] for n in names]
    good = ["#2a7" if (v >= 1) == ratios[n]["higher_is_better"] else "#c44" for n, v in zip(names, values, strict=True)]
    ax.barh(y, values, color=good)
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_yticks(y, [f"{n} ({'higher' if ratios[n]['higher_is_better'] else 'lower'} is better)"
                      for n in names])
    for yy, v in zip(y, values, strict=True):
        ax.text(v, yy, f" {v:.2f}", va="center")
    ax.set_xlabel("eoslog / Kafka (best of each side's rounds)")
    ax.set_title(f"{results['benchmark']}: eoslog vs {results['kafka']}\n{results['rounds']} interleaved "
                 f"rounds each, load {results['load_avg_at_start'][0]} at start")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render(results: dict[str, Any], print_: Callable[[str], None]) -> None:
    print_(f"eoslog / {results['kafka']} ({results['rounds']} rounds each, interleaved):")
    for name, r in results["ratios_eoslog_over_kafka"].items():
        e, k = results["best"]["eoslog"][name], results["best"]["kafka"][name]
        print_(f"  {name}: {r['value']:.3f}  (eoslog {e:,.4g}, Kafka {k:,.4g}; "
               f"{'higher' if r['higher_is_better'] else 'lower'} is better)")

"""Cluster mode (issue 13): replicated produce against unreplicated, and failover time.

    python bench/cluster.py            # 3 rounds of 100 MB per case + 10 failovers, ~4 min
    python bench/cluster.py --quick    # 1 round of 30 MB + 5 failovers
    python bench/cluster.py --failover-only --label after   # failovers alone, saved by label
    python bench/cluster.py --produce-only --flush-policy group-commit --label after   # issue 14 per replica

Two builds' failover times in one run: start the script twice at once, each with its own
PYTHONPATH (e.g. /work/main/src --label before and the branch's src --label after), so both
see the same machine load; the client's share (its metadata refresh) comes from that build too.

One ZooKeeper and three eoslog brokers on this machine (tests/cluster_harness.py). In one run,
interleaved round by round:

- **produce RF 1** and **produce RF 3**: librdkafka sends 1 KB records (load.produce: acks=all,
  idempotent, 3 partitions) to a topic of replication factor 1, then to one of replication
  factor 3 with min.insync.replicas 2; the ratio RF3/RF1 is the cost of replication (three
  brokers share two cores). Best round of each counts.
- **failover**: a partition of replication factor 3 / min.isr 2; its leader is killed with
  SIGKILL while a producer keeps sending one acks=all record at a time; the time from the kill
  to the first record acknowledged afterwards, for each kill (p50 / p99 / max). It is bounded
  below by zookeeper.session.timeout.ms (6000 here): the controller learns of the death when
  ZooKeeper expires the broker's session.

``--flush-policy group-commit`` runs the brokers with ``log.flush.policy=group-commit`` (a
cluster's default is Kafka's ``kafka``): leaders and followers fsync before an acks=all write
counts as replicated. ``--produce-only`` skips the failovers and saves the produce figures by
``--label`` (two builds side by side, as for failovers).

Output: a table, bench/results/cluster-<timestamp>.json and cluster-latest.json, and
cluster-latest.png.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from common import RESULTS_DIR, Measurement, best, machine_facts, prepare_run
from load import PRODUCE_CASES, produce

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from cluster_harness import Cluster, create_topic
from eoslog.client import Producer

SESSION_TIMEOUT_MS = 6000
IDEMPOTENT = next(c for c in PRODUCE_CASES if c.name == "idempotent")


def replicated_produce(cluster: Cluster, mb: int, rounds: int) -> dict[str, list[Measurement]]:
    records = mb * 1024
    runs: dict[str, list[Measurement]] = {"rf1": [], "rf3": []}
    for r in range(rounds):
        for name, factor in (("rf1", 1), ("rf3", 3)):
            topic = f"bench-{name}-{r}"
            configs = {"min.insync.replicas": "2"} if factor == 3 else {}
            result = create_topic(cluster.any_alive().bootstrap, topic, partitions=3,
                                  replication_factor=factor, configs=configs)
            assert int(result.error_code) == 0, result
            create_topic(cluster.any_alive().bootstrap, f"{topic}-warmup", partitions=1, replication_factor=factor)
            m = produce(cluster.bootstrap, topic, IDEMPOTENT, records)
            m.name = f"produce RF {factor}"
            runs[name].append(m)
            print(f"round {r + 1}: {m.name}: {m.mb_s:.1f} MB/s", flush=True)
    return runs


def failovers(cluster: Cluster, kills: int) -> list[float]:
    topic = "bench-failover"
    create_topic(cluster.any_alive().bootstrap, topic, partitions=1, replication_factor=3,
                 configs={"min.insync.replicas": "2"})
    seconds: list[float] = []
    with Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                   "request.timeout.ms": 2000, "delivery.timeout.ms": 60000, "retry.backoff.ms": 50,
                   "metadata.max.age.ms": 1000}) as producer:
        producer.send(topic, b"warm-up", partition=0).result(60)
        for k in range(kills):
            cluster.wait_for(lambda m: len(m.topics[topic][0].isr) == 3, "the ISR whole", 120)
            leader = cluster.metadata([topic]).topics[topic][0].leader
            killed_at = time.monotonic()
            cluster.brokers[leader].kill()
            while True:  # one record at a time: the first acknowledged after the kill
                try:
                    producer.send(topic, b"after-%d" % k, partition=0).result(60)
                    break
                except Exception:
                    continue
            seconds.append(time.monotonic() - killed_at)
            print(f"failover {k + 1}: broker {leader} killed, next acks=all record after {seconds[-1]:.2f} s",
                  flush=True)
            cluster.brokers[leader].start()
    return seconds


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--mb", type=int)
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--kills", type=int)
    parser.add_argument("--work-dir", type=Path)
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--failover-only", action="store_true")
    parser.add_argument("--label", default="")
    parser.add_argument("--produce-only", action="store_true")
    parser.add_argument("--flush-policy", default="auto", choices=["auto", "group-commit", "kafka"])
    args = parser.parse_args()
    mb = args.mb or (30 if args.quick else 100)
    rounds = args.rounds or (1 if args.quick else 3)
    kills = args.kills or (5 if args.quick else 10)
    work, data_dir, facts = prepare_run(args.work_dir, "eoslog-bench-cluster-", None)
    cluster = Cluster(work / "cluster", overrides={"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                                                   "log.flush.policy": args.flush_policy}).start()
    load_before = facts.get("load_average")
    if args.produce_only:
        try:
            produce_runs = replicated_produce(cluster, mb, rounds)
        finally:
            cluster.stop()
        save_produce(produce_runs, args, {**facts, "load_average_before": load_before})
        return
    if args.failover_only:
        try:
            failover_s = failovers(cluster, kills)
        finally:
            cluster.stop()
        save_failovers(failover_s, args.label, {**facts, "load_average_before": load_before}, args.no_save)
        return
    try:
        produce_runs = replicated_produce(cluster, mb, rounds)
        failover_s = failovers(cluster, kills)
    finally:
        cluster.stop()
    rf1, rf3 = best(produce_runs["rf1"]), best(produce_runs["rf3"])
    results: dict[str, Any] = {
        "machine": {**facts, **machine_facts(data_dir), "load_average_before": load_before},
        "settings": {"mb_per_case": mb, "rounds": rounds, "kills": kills, "record_bytes": 1024,
                     "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS},
        "produce": {name: [m.to_json() for m in runs] for name, runs in produce_runs.items()},
        "ratio_rf3_rf1": round(rf3.mb_s / rf1.mb_s, 3) if rf1.mb_s else None,
        "failover_s": [round(s, 3) for s in failover_s],
        "failover_p50_s": round(statistics.median(failover_s), 3),
        "failover_p99_s": round(percentile(failover_s, 0.99), 3),
    }
    table = Table(title="eoslog cluster: replicated produce and failover (one run)")
    for column in ("case", "MB/s", "records/s", "note"):
        table.add_column(column)
    table.add_row("produce RF 1 (acks=all, idempotent)", f"{rf1.mb_s:.1f}", f"{rf1.records_s:,.0f}", "best round")
    table.add_row("produce RF 3, min.isr 2", f"{rf3.mb_s:.1f}", f"{rf3.records_s:,.0f}", "best round")
    table.add_row("ratio RF3 / RF1", f"{results['ratio_rf3_rf1']}", "", "design goal ≥ 0.5")
    table.add_row("failover p50 / p99", f"{results['failover_p50_s']} s / {results['failover_p99_s']} s", "",
                  f"kill -9 → next acks=all ack; session timeout {SESSION_TIMEOUT_MS / 1000:.0f} s")
    Console().print(table)
    if not args.no_save:
        RESULTS_DIR.mkdir(exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for name in (f"cluster-{stamp}.json", "cluster-latest.json"):
            (RESULTS_DIR / name).write_text(json.dumps(results, indent=1))
        plot(results, RESULTS_DIR / "cluster-latest.png")
        print(f"saved {RESULTS_DIR / 'cluster-latest.json'} and cluster-latest.png")


def save_produce(runs: dict[str, list[Measurement]], args: argparse.Namespace, facts: dict[str, Any]) -> None:
    rf1, rf3 = best(runs["rf1"]), best(runs["rf3"])
    results = {"label": args.label, "flush_policy": args.flush_policy, "machine": facts,
               "load_average_after": [round(x, 2) for x in os.getloadavg()],
               "produce": {name: [m.to_json() for m in ms] for name, ms in runs.items()},
               "best_mb_s": {"rf1": round(rf1.mb_s, 1), "rf3": round(rf3.mb_s, 1)},
               "ratio_rf3_rf1": round(rf3.mb_s / rf1.mb_s, 3) if rf1.mb_s else None}
    print(f"produce {args.label} ({args.flush_policy}): RF1 {rf1.mb_s:.1f} MB/s, RF3 {rf3.mb_s:.1f} MB/s, "
          f"RF3/RF1 {results['ratio_rf3_rf1']} (rounds RF3: {[round(m.mb_s, 1) for m in runs['rf3']]})")
    if not args.no_save:
        RESULTS_DIR.mkdir(exist_ok=True)
        (RESULTS_DIR / f"cluster-produce-{args.label or 'run'}.json").write_text(json.dumps(results, indent=1))


def save_failovers(failover_s: list[float], label: str, facts: dict[str, Any], no_save: bool) -> None:
    results = {
        "label": label, "machine": facts, "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
        "failover_s": [round(s, 3) for s in failover_s], "failover_p50_s": round(statistics.median(failover_s), 3),
        "failover_p99_s": round(percentile(failover_s, 0.99), 3), "failover_max_s": round(max(failover_s), 3),
    }
    print(f"failover {label}: p50 {results['failover_p50_s']} s, p99 {results['failover_p99_s']} s "
          f"over {len(failover_s)} kills (session timeout {SESSION_TIMEOUT_MS / 1000:.0f} s)")
    if not no_save:
        RESULTS_DIR.mkdir(exist_ok=True)
        (RESULTS_DIR / f"cluster-failover-{label or 'run'}.json").write_text(json.dumps(results, indent=1))


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for i, name in enumerate(("rf1", "rf3")):
        values = [m["mb_s"] for m in results["produce"][name]]
        left.bar(i, max(values), color="tab:blue" if name == "rf1" else "tab:orange")
        left.scatter([i] * len(values), values, color="black", s=10, zorder=3)
    left.set_xticks([0, 1], ["RF 1", "RF 3 (min.isr 2)"])
    left.set_ylabel("MB/s (1 KB records, acks=all, idempotent)")
    left.set_title(f"replicated produce: ratio {results['ratio_rf3_rf1']}")
    failover = results["failover_s"]
    right.plot(range(1, len(failover) + 1), failover, "o-")
    right.axhline(results["settings"]["zookeeper.session.timeout.ms"] / 1000, color="grey", linestyle="--",
                  label="zookeeper.session.timeout.ms")
    right.set_xlabel("kill -9 of the leader")
    right.set_ylabel("seconds to the next acks=all acknowledgement")
    right.set_title(f"failover p50 {results['failover_p50_s']} s, p99 {results['failover_p99_s']} s")
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()

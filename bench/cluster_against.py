"""``bench/cluster.py --against kafka``: the cluster's produce and failover cases on Apache Kafka
too, in the same run (issue 13's reference beside eoslog's figures).

Kafka's side is three KRaft nodes in combined mode, each a controller and a broker in one JVM
(tests/support/kafka_harness.py's ``KafkaCluster``: serial GC, 512 MB heap cap), from the reference jars.
KRaft because their Kafka (4.x) has no ZooKeeper mode any more (removed in 4.0). Its settings are
eoslog's test cluster's where both have them (tests/support/cluster_harness.py: three partitions for the
internal topics, no automatic leader rebalance, Kafka's default flushing, i.e. no fsync per
write, as eoslog's cluster) and ``broker.session.timeout.ms`` = eoslog's
``zookeeper.session.timeout.ms``: a KRaft controller fences a broker whose heartbeats stop for
that long (and elects new leaders for its partitions) as eoslog's controller does when ZooKeeper
expires the broker's session. Both sides' controllers share processes with brokers (eoslog's is
one of the brokers; ZooKeeper is a fourth JVM Kafka does not have, left out of the CPU figures).

``against.interleave`` runs ``cluster.run_side`` for each side in turn (the order alternating
per round); each part starts its three brokers afresh. The best round's MB/s and the cheapest
round's CPU per MB are compared as against.py does; RF 3 / RF 1 is taken per side from its best
rounds, and failover p50/p99 over all of a side's kills together (``compare``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

import against
from common import percentile
from eoslog.protocol.messages import build
from support.cluster_harness import ClusterMeta, metadata
from support.kafka_harness import BROKER_HEAP, JVM_FLAGS, KafkaCluster, KafkaNode
from support.rawkafka import RawClient, request_module

CASES = (("rf1", "produce RF 1, idempotent (MB/s)"), ("rf3", "produce RF 3, min.isr 2, idempotent"),
         ("rf1-acksall", "produce RF 1, acks=all not idempotent"),
         ("rf3-acksall", "produce RF 3, min.isr 2, not idempotent"))
DESCRIBE_QUORUM = 55
TICKS = ("RF 1\nidempotent", "RF 3\nidempotent", "RF 1\nnot idemp.", "RF 3\nnot idemp.")


class KafkaSide(KafkaCluster):
    """Apache Kafka's three nodes, offering what the cluster cases use of eoslog's ``Cluster``:
    brokers by id, any live one, the cluster's metadata."""

    def __init__(self, root: Path, session_timeout_ms: int, overrides: Mapping[str, str] | None = None) -> None:
        super().__init__(root, overrides={
            "broker.session.timeout.ms": str(session_timeout_ms),  # eoslog: zookeeper.session.timeout.ms
            "offsets.topic.num.partitions": "3",
            "transaction.state.log.num.partitions": "3",
            "auto.leader.rebalance.enable": "false",
            **(overrides or {}),
        })

    @property
    def brokers(self) -> dict[int, KafkaNode]:
        return {n.node_id: n for n in self.nodes}

    def any_alive(self) -> KafkaNode:
        return next(n for n in self.nodes if n.alive())

    def metadata(self, topics: list[str] | None = None) -> ClusterMeta:
        """Metadata, with ``controller`` the active KRaft controller: a KRaft broker names a random
        live broker as the controller in Metadata (clients' admin requests are forwarded anyway)."""
        node = self.any_alive()
        return dataclasses.replace(metadata(node.bootstrap, topics), controller=quorum_leader(node.bootstrap))


def quorum_leader(bootstrap: str) -> int:
    """The leader of the metadata quorum (the active controller), by DescribeQuorum, which a
    broker forwards to the controllers."""
    m = request_module(DESCRIBE_QUORUM, 1)
    with RawClient(bootstrap, timeout_s=10) as client:
        resp = client.call(build(m.DescribeQuorumRequest, topics=(build(
            m.TopicData, topic_name="__cluster_metadata", partitions=(build(m.PartitionData, partition_index=0),)),)))
    return int(resp.topics[0].partitions[0].leader_id)


def main(args: argparse.Namespace, run_side: Callable[[argparse.Namespace], dict[str, Any]],
         figures: Callable[[dict[str, Any]], against.Figures], session_timeout_ms: int, warm_up_mb: int) -> None:
    """Both sides' parts interleaved (``run_side``, ``figures``: cluster.py's), then the
    comparison printed and saved as ``cluster-kafka-*.json`` and ``cluster-kafka-latest.png``."""
    side_runs: dict[str, list[dict[str, Any]]] = {s: [] for s in against.SIDES}

    def run(a: argparse.Namespace) -> dict[str, Any]:
        side_runs[a.side].append(out := run_side(a))
        return out

    against.require_kafka()
    results = against.interleave("cluster", args, run, figures)
    compare(results, side_runs)
    results["settings"] = {"mb_per_case": args.mb, "rounds_per_part": args.rounds, "record_bytes": 1024,
                           "kills_per_side": args.kills, "session_timeout_ms": session_timeout_ms,
                           "eoslog_flush_policy": args.flush_policy, "warm_up_mb_per_case": warm_up_mb,
                           "copy_records": args.copy_records, "copy_rounds_per_part": args.copy_rounds,
                           "copy_txn": args.copy_txn, "copy_batch_bytes": args.copy_batch_bytes,
                           "copy_retry_backoff_ms": args.copy_retry_backoff_ms,
                           "kafka_jvm": " ".join((*JVM_FLAGS, *BROKER_HEAP))}
    results["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    render(results)
    if not args.no_save:
        for path in against.save(results, plot):
            print(f"wrote {path}")


def compare(results: dict[str, Any], side_runs: dict[str, list[dict[str, Any]]]) -> None:
    """Per side: RF 3 / RF 1 of the best rounds and failover quantiles over all kills; their
    eoslog / Kafka ratios join against.py's."""
    best = results["best"]
    summary: dict[str, dict[str, Any]] = {}
    for side in against.SIDES:
        kills = [s for r in side_runs[side] for s in r["failover_s"]]
        with_controller = [c for r in side_runs[side] for c in r["failover_controller_killed"]]
        summary[side] = {
            "rf3_rf1": round(best[side]["rf3 MB/s"] / best[side]["rf1 MB/s"], 3),
            "rf3_rf1-acksall": round(best[side]["rf3-acksall MB/s"] / best[side]["rf1-acksall MB/s"], 3),
            "copy_cluster_single": round(best[side]["copy cluster records/s"] / best[side]["copy single records/s"], 3),
            "failover_s": kills, "failover_p50_s": round(statistics.median(kills), 3),
            "failover_p99_s": round(percentile(kills, 0.99), 3), "failover_max_s": max(kills),
            "failover_controller_killed": with_controller,
            **{f"failover_median_s_{name}": round(statistics.median(ks), 3) if ks else None
               for name, ks in (("controller_too", [k for k, c in zip(kills, with_controller, strict=True) if c]),
                                ("not_controller", [k for k, c in zip(kills, with_controller, strict=True) if not c]))},
            "idle_brokers_cpu_share": round(statistics.mean(r["idle_brokers_cpu_share"] for r in side_runs[side]), 3)}
    for name, higher in (("rf3_rf1", True), ("rf3_rf1-acksall", True), ("copy_cluster_single", True),
                         ("failover_p50_s", False), ("failover_p99_s", False)):
        results["ratios_eoslog_over_kafka"][name] = {
            "value": round(summary["eoslog"][name] / summary["kafka"][name], 3), "higher_is_better": higher}
    results["summary"] = summary
    results["side_runs"] = side_runs


def render(results: dict[str, Any]) -> None:
    best, summary, ratio = results["best"], results["summary"], results["ratios_eoslog_over_kafka"]
    table = Table(title=f"eoslog vs {results['kafka']}, three brokers on this machine each "
                        f"({results['rounds']} interleaved rounds; load {results['load_avg_at_start']} "
                        f"→ {results['load_avg_at_end']})")
    for column in ("figure", "eoslog", "Kafka", "eoslog / Kafka"):
        table.add_column(column)
    for name, label in CASES:
        key = f"{name} MB/s"
        table.add_row(label, f"{best['eoslog'][key]:.1f}", f"{best['kafka'][key]:.1f}", f"{ratio[key]['value']:.3f}")
        if name.startswith("rf3"):
            r = name.replace("rf3", "rf3_rf1")
            table.add_row("  RF 3 / RF 1", f"{summary['eoslog'][r]:.3f}", f"{summary['kafka'][r]:.3f}",
                          f"{ratio[r]['value']:.3f}")
    for name, label in CASES:
        for who in ("brokers", "client"):
            key = f"{name} {who} CPU ms/MB"
            table.add_row(f"{who} CPU ms per MB, {label.split(',')[0].removeprefix('produce ')} "
                          f"{'idempotent' if 'acksall' not in name else 'not idempotent'}",
                          f"{best['eoslog'][key]:.1f}", f"{best['kafka'][key]:.1f}", f"{ratio[key]['value']:.2f}")
    for who in ("single", "cluster"):
        key = f"copy {who} records/s"
        table.add_row(f"transactional copy, {'single broker' if who == 'single' else 'cluster RF 3, min.isr 2'} "
                      "(records/s)", f"{best['eoslog'][key]:,.0f}", f"{best['kafka'][key]:,.0f}",
                      f"{ratio[key]['value']:.3f}")
    table.add_row("  copy cluster / single", f"{summary['eoslog']['copy_cluster_single']:.3f}",
                  f"{summary['kafka']['copy_cluster_single']:.3f}", f"{ratio['copy_cluster_single']['value']:.3f}")
    for q in ("p50", "p99"):
        key = f"failover_{q}_s"
        table.add_row(f"failover {q}, kill -9 → next acks=all ack (s)", f"{summary['eoslog'][key]:.2f}",
                      f"{summary['kafka'][key]:.2f}", f"{ratio[key]['value']:.3f}")
    for key, label in (("failover_median_s_controller_too", "  median of kills that took the controller too"),
                       ("failover_median_s_not_controller", "  median of the other kills")):
        e, k = summary["eoslog"][key], summary["kafka"][key]
        table.add_row(label, "-" if e is None else f"{e:.2f}", "-" if k is None else f"{k:.2f}", "")
    table.add_row("brokers' CPU at idle (cores, all three)", f"{summary['eoslog']['idle_brokers_cpu_share']:.3f}",
                  f"{summary['kafka']['idle_brokers_cpu_share']:.3f}", "")
    Console().print(table)


def plot(results: dict[str, Any], path: Path) -> None:
    """Three panels, both sides in each: each produce case's MB/s and the copy's records/s (bar:
    best round; dots: every round), and every kill's failover time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = results["summary"]
    colours = {"eoslog": "tab:blue", "kafka": "tab:orange"}
    fig, (produce_ax, copy_ax, failover_ax) = plt.subplots(1, 3, figsize=(16, 4.5))
    for offset, side in ((-0.2, "eoslog"), (0.2, "kafka")):
        s = summary[side]
        for i, (name, _) in enumerate(CASES):
            rounds = [m["mb_s"] for r in results["side_runs"][side] for m in r["produce"][name]]
            produce_ax.bar(i + offset, max(rounds), width=0.4, color=colours[side],
                           label=side if i == 0 else None)
            produce_ax.scatter([i + offset] * len(rounds), rounds, color="black", s=8, zorder=3)
        for i, name in enumerate(("single", "cluster")):
            rounds = [x for r in results["side_runs"][side] for x in r["copy_records_s"][name]]
            copy_ax.bar(i + offset, max(rounds), width=0.4, color=colours[side], label=side if i == 0 else None)
            copy_ax.scatter([i + offset] * len(rounds), rounds, color="black", s=8, zorder=3)
        kills = s["failover_s"]
        failover_ax.plot(range(1, len(kills) + 1), kills, "o-", color=colours[side],
                         label=f"{side}: p50 {s['failover_p50_s']} s, p99 {s['failover_p99_s']} s")
        took = [(i + 1, k) for i, (k, c) in enumerate(zip(kills, s["failover_controller_killed"], strict=True)) if c]
        failover_ax.scatter([i for i, _ in took], [k for _, k in took], marker="x", s=60, color="black", zorder=3,
                            label="the leader was the controller too" if side == "eoslog" else None)
    produce_ax.set_xticks(range(len(CASES)), TICKS)
    produce_ax.set_ylabel("MB/s (1 KB records, acks=all; RF 3: min.isr 2)")
    e, k = summary["eoslog"], summary["kafka"]
    produce_ax.set_title(f"RF3/RF1 idempotent: eoslog {e['rf3_rf1']}, Kafka {k['rf3_rf1']}\n"
                         f"not idempotent: eoslog {e['rf3_rf1-acksall']}, Kafka {k['rf3_rf1-acksall']}", fontsize=9)
    produce_ax.legend()
    copy_ax.set_xticks(range(2), ["single broker", "cluster RF 3\n(min.isr 2)"])
    copy_ax.set_ylabel("records/s (transactional copy, librdkafka)")
    copy_ax.set_title(f"copy cluster / single: eoslog {e['copy_cluster_single']}, Kafka {k['copy_cluster_single']}",
                      fontsize=9)
    copy_ax.legend()
    failover_ax.axhline(results["settings"]["session_timeout_ms"] / 1000, color="grey", linestyle="--",
                        label="session timeout (ZooKeeper / KRaft broker)")
    failover_ax.set_xlabel("kill -9 of the leader")
    failover_ax.set_ylabel("seconds to the next acks=all acknowledgement")
    failover_ax.set_title(f"failover, eoslog vs {results['kafka']}", fontsize=9)
    failover_ax.legend(fontsize=8)
    fig.suptitle(f"bench/cluster.py --against kafka, load {results['load_avg_at_start'][0]} at start", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)

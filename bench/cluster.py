"""Cluster mode (issue 13): replicated produce against unreplicated, the transactional copy on
the cluster against one broker, and failover time.

    python bench/cluster.py            # 3 rounds of 100 MB per case, 3 copy rounds, 10 failovers, ~6 min
    python bench/cluster.py --quick    # 1 round of 30 MB, 1 copy round, 5 failovers
    python bench/cluster.py --copy-only --label X             # the copy case alone
    python bench/cluster.py --produce-only --profile DIR      # py-spy on each broker in the RF 3 rounds
    python bench/cluster.py --failover-only --label after   # failovers alone, saved by label
    python bench/cluster.py --produce-only --flush-policy group-commit --label after   # issue 14 per replica
    python bench/cluster.py --against kafka    # produce and failover on Apache Kafka too, ~15 min
    python bench/cluster.py --scale-out 1,2    # 1 and 2 broker processes, RF 1: MB/s per process
    python bench/cluster.py --flush-cost kafka,auto   # RF 3 produce and the copy per flush policy

Two builds' failover times in one run: start the script twice at once, each with its own
PYTHONPATH (e.g. /work/main/src --label before and the branch's src --label after), so both
see the same machine load; the client's share (its metadata refresh) comes from that build too.

One ZooKeeper and three eoslog brokers on this machine (tests/support/cluster_harness.py). In one run,
interleaved round by round:

- **produce RF 1** and **produce RF 3**: librdkafka sends 1 KB records (load.produce: acks=all,
  idempotent, 3 partitions) to a topic of replication factor 1, then to one of replication
  factor 3 with min.insync.replicas 2; the ratio RF3/RF1 is the cost of replication (three
  brokers share two cores). Then the same with a plain acks=all producer (not idempotent):
  librdkafka's idempotent producer sends one Produce at a time (librdkafka PR #4989, open) and
  its broker threads poll in a loop while they wait (perf: clock_gettime, poll, producer_serve),
  which takes CPU from the brokers on a 2-core machine the longer the acks take. Best round of each.
  Each round also records the brokers' CPU seconds (all three) and the client's, printed per
  MB: what a round costs, whatever the machine's load.
- **copy**: the copy test's program (tests/chaos/copier.py through durability_eos.copy_once: one
  librdkafka copier per input partition, read_committed, ``--copy-txn`` records per transaction,
  offsets in the transaction) copies ``--copy-records`` 100-byte records on the cluster (input,
  output and internal topics at RF 3, min.isr 2) and on a single broker (another process, the same
  flush policy), rounds interleaved, who goes first alternating; every output verified (each input
  record once, no transaction left open). records/s, best round of each.
- **failover**: a partition of replication factor 3 / min.isr 2; its leader is killed with
  SIGKILL while a producer keeps sending one acks=all record at a time; the time from the kill
  to the first record acknowledged afterwards, for each kill (p50 / p99 / max). It is bounded
  below by zookeeper.session.timeout.ms (6000 here): the controller learns of the death when
  ZooKeeper expires the broker's session.

``--flush-policy kafka`` runs the brokers with Kafka's ``log.flush.policy=kafka``; the default
(``auto``) is group commit since issue 28: leaders and followers fsync before an acks=all write
counts as replicated. ``--produce-only`` skips the failovers and saves the produce figures by
``--label`` (two builds side by side, as for failovers). ``--profile DIR`` writes py-spy's
collapsed stacks of each broker during the RF 3 rounds (py-spy next to the venv's python).

``--against kafka``: the produce and failover cases on three Apache Kafka KRaft nodes as well
(bench/cluster_against.py), in ``--against-rounds`` rounds (default 2) of both sides, the order
alternating (bench/against.py); each side's part starts its brokers afresh, produces one untimed
round of WARM_UP_MB per case, then ``--rounds`` (default 2) of ``--mb`` per case, then its share
of the ``--kills`` (default 10 per side). Every produced topic is checked (``check_topic``).

Output: a table, bench/results/cluster-<timestamp>.json and cluster-latest.json, and
cluster-latest.png (``--against kafka``: cluster-kafka-*.json, cluster-kafka-latest.png).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import psutil
from rich.console import Console
from rich.table import Table

import against
import cluster_against
from common import MB, RESULTS_DIR, BrokerProcess, Measurement, best, percentile, prepare_run
from durability_eos import PARTITIONS, VALUE_BYTES, copy_once, create_topics
from hotspots import py_spy
from load import PRODUCE_CASES, exact_count, fetch, produce
from spark_sink import produce_input, verify

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from eoslog.client import Producer
from support.cluster_harness import Cluster, ClusterMeta, create_topic
from support.harness import wait_until
from support.kafka_harness import KafkaNode

SESSION_TIMEOUT_MS = 6000
WARM_UP_MB = 100  # per case, before a --against part's timed rounds
IDLE_S = 5.0  # the brokers' CPU while nothing is sent (heartbeats, a KRaft quorum's fetches)
IDEMPOTENT = next(c for c in PRODUCE_CASES if c.name == "idempotent")
ACKS_ALL = next(c for c in PRODUCE_CASES if c.name == "acksall")


class Node(Protocol):
    proc: subprocess.Popen[str] | None

    @property
    def bootstrap(self) -> str: ...
    def kill(self) -> None: ...
    def start(self) -> object: ...
    def alive(self) -> bool: ...


class Brokers(Protocol):
    """Three brokers by id, as the produce and failover cases use them: eoslog's ``Cluster``
    (ZooKeeper + three eoslog brokers) or ``cluster_against.KafkaSide`` (three KRaft nodes)."""

    @property
    def brokers(self) -> Mapping[int, Node]: ...
    @property
    def bootstrap(self) -> str: ...
    def any_alive(self) -> Node: ...
    def metadata(self, topics: list[str] | None = None) -> ClusterMeta: ...
    def stop(self) -> object: ...


def replicated_produce(cluster: Brokers, mb: int, rounds: int, profile: Path | None = None,
                       prefix: str = "bench", factors: tuple[int, ...] = (1, 3)) -> dict[str, list[Measurement]]:
    """Each round: both producers (idempotent, then plain acks=all) to RF 1 then RF 3 (``factors``).
    Keys ``rf1``/``rf3`` (idempotent) and ``rf1-acksall``/``rf3-acksall``. Every topic is checked
    afterwards (``check_topic``). ``profile``: py-spy samples each broker during the
    idempotent RF 3 rounds into ``profile``."""
    records = mb * 1024
    runs: dict[str, list[Measurement]] = {}
    for r in range(rounds):
        for case, suffix in ((IDEMPOTENT, ""), (ACKS_ALL, "-acksall")):
            for factor in factors:
                name = f"rf{factor}{suffix}"
                topic = f"{prefix}-{name}-{r}"
                configs = {"min.insync.replicas": "2"} if factor == 3 else {}
                result = create_topic(cluster.any_alive().bootstrap, topic, partitions=3,
                                      replication_factor=factor, configs=configs)
                assert int(result.error_code) == 0, result
                create_topic(cluster.any_alive().bootstrap, f"{topic}-warmup", partitions=1,
                             replication_factor=factor)
                profiled = profile is not None and name == "rf3"
                spies = start_profilers(cluster, profile, f"{name}-{r}") if profile and profiled else []
                cpu0 = brokers_cpu_s(cluster)
                m = produce(cluster.bootstrap, topic, case, records)
                m.extra["brokers_cpu_s"] = round(brokers_cpu_s(cluster) - cpu0, 2)
                stop_profilers(spies)
                m.extra["check"] = check_topic(cluster, topic, records, factor)
                m.name = f"produce RF {factor} ({case.name})"
                runs.setdefault(name, []).append(m)
                print(f"{prefix} round {r + 1}: {m.name}: {m.mb_s:.1f} MB/s; CPU per MB: brokers "
                      f"{1000 * m.extra['brokers_cpu_s'] * MB / m.bytes:.1f} ms, "
                      f"client {1000 * m.extra['client_cpu_s'] * MB / m.bytes:.1f} ms", flush=True)
    return runs


def check_topic(cluster: Brokers, topic: str, records: int, factor: int) -> dict[str, Any]:
    """That the round did what it says: exactly ``records`` records (high watermarks, then every
    record read back), each partition on ``factor`` distinct brokers and (RF 3) min.insync.replicas 2
    as the cluster describes the topic. Raises when not; returns what it saw (with the ISR)."""
    hws = exact_count(cluster.bootstrap, topic, records)
    fetch(cluster.bootstrap, topic, records)  # raises unless all records' bytes came back
    parts = cluster.metadata([topic]).topics[topic]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    min_isr = admin.describe_configs([resource])[resource].result(30)["min.insync.replicas"].value
    seen = {"high_watermarks": hws, "read_back": records, "min.insync.replicas": min_isr,
            "replicas": {p: list(m.replicas) for p, m in parts.items()},
            "isr": {p: list(m.isr) for p, m in parts.items()}}
    if any(len(set(m.replicas)) != factor for m in parts.values()) or (factor == 3 and min_isr != "2"):
        raise RuntimeError(f"{topic} is not RF {factor} as asked: {seen}")
    return seen


def ratios(runs: dict[str, list[Measurement]]) -> dict[str, float]:
    """RF 3 / RF 1 of the best rounds, per producer."""
    return {f"ratio_rf3_rf1{suffix}": round(best(runs[f"rf3{suffix}"]).mb_s / best(runs[f"rf1{suffix}"]).mb_s, 3)
            for suffix in ("", "-acksall")}


def cpu_per_mb(runs: dict[str, list[Measurement]]) -> dict[str, dict[str, list[float]]]:
    """CPU milliseconds per MB sent, of the brokers and of the client, per round."""
    return {name: {who: [round(1000 * m.extra[f"{who}_cpu_s"] * MB / m.bytes, 2) for m in ms]
                   for who in ("brokers", "client")} for name, ms in runs.items()}


def brokers_cpu_s(cluster: Brokers) -> float:
    """CPU seconds (user + system) the live brokers have used so far."""
    total = 0.0
    for broker in cluster.brokers.values():
        if broker.proc is not None and broker.alive():
            times = psutil.Process(broker.proc.pid).cpu_times()
            total += times.user + times.system
    return total


def start_profilers(cluster: Brokers, out: Path, tag: str) -> list[subprocess.Popen[bytes]]:
    """py-spy on each broker: collapsed stacks with native frames (py-spy pauses the broker for
    each sample, 50 a second: the round is slower). Native frames show what uvloop's and the
    kernel's side costs (pwritev, writev, memcpy), which Python frames alone hide."""
    out.mkdir(parents=True, exist_ok=True)
    spies = []
    for broker_id, broker in cluster.brokers.items():
        assert broker.proc is not None
        spies.append(subprocess.Popen(
            [py_spy() or "py-spy", "record", "--pid", str(broker.proc.pid), "--native", "--nolineno", "--rate", "50",
             "--format", "raw", "--output", str(out / f"broker-{broker_id}-{tag}.txt")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    time.sleep(1.0)  # py-spy attaches
    return spies


def stop_profilers(spies: list[subprocess.Popen[bytes]]) -> None:
    for spy in spies:
        spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
    for spy in spies:
        spy.wait(60)


# Where a broker's main thread is, by the first of these frames found on the stack (leader and
# follower roles at once: each broker leads one partition and follows two).
PROFILE_PARTS = (
    ("follower: append what a fetch brought (pwritev, producer state, indexes)", "append_as_follower"),
    ("leader: append produced batches", "append_as_leader"),
    ("follower: kio decodes the fetch response (records copied into bytes)", "decode_response"),
    ("follower: receive the fetch response (buffer joins)", "AioConnection.data_received"),
    ("follower: build and send the next Fetch", "ReplicaFetcher._fetch"),
    ("leader: read for a follower's Fetch (pread, HW, purgatory)", "handle_fetch"),
    ("leader: the rest of Produce", "handle_produce"),
    ("leader: write responses to sockets (writev)", "KafkaProtocol._run"),
    ("receive and parse requests", "_parse_received"),
    ("uvloop's own C code (socket reads, callbacks)", "loop__"),
)


def summarise_profile(out: Path) -> dict[str, float]:
    """Shares of the brokers' main threads' busy samples (waits in epoll left out) per part, and
    the share of pwritev alone."""
    parts: collections.Counter[str] = collections.Counter()
    busy = 0
    for raw in out.glob("broker-*.txt"):
        for line in raw.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            frames = stack.split(";")
            if "_run_module_as_main" not in stack or any("epoll" in f for f in frames[-2:]):
                continue  # another thread (thread pools, kazoo), or the event loop waiting
            busy += int(count)
            part = next((name for name, frame in PROFILE_PARTS if frame in stack), "other")
            parts[part] += int(count)
            if frames[-1].startswith("pwritev"):
                parts["of all these: pwritev (the page-cache write)"] += int(count)
    shares = {name: round(n / busy, 3) for name, n in parts.most_common()} if busy else {}
    for name, share in shares.items():
        print(f"{share:6.1%}  {name}")
    return shares


def copy_throughput(cluster: Brokers, single: Node, records: int, rounds: int, txn: int,
                    batch_bytes: int, retry_backoff_ms: int) -> dict[str, list[float]]:
    """records/s of the transactional copy (durability_eos.copy_once: tests/chaos/copier.py, one
    librdkafka copier per input partition) on the cluster (input, output and internal topics at
    RF 3, min.isr 2) and on the single broker, interleaved round by round (who goes first
    alternates); each output verified exactly once. A small copy on each side first, untimed
    (the internal topics, the copiers' first connections)."""
    topics = copy_topics(rounds)
    create_replicated_topics(cluster, topics)
    create_topics(single.bootstrap, topics)
    return interleaved_copies({"cluster": cluster.bootstrap, "single": single.bootstrap}, records, rounds, txn,
                              batch_bytes, retry_backoff_ms)


def copy_topics(rounds: int) -> list[str]:
    return ["in", "warmup-in", "warmup-out", *(f"out-{r}" for r in range(rounds))]


def create_replicated_topics(cluster: Brokers, topics: list[str]) -> None:
    """The copy's topics at RF 3, min.isr 2."""
    for t in topics:
        result = create_topic(cluster.any_alive().bootstrap, t, partitions=PARTITIONS, replication_factor=3,
                              configs={"min.insync.replicas": "2"})
        assert int(result.error_code) == 0, result


def interleaved_copies(sides: dict[str, str], records: int, rounds: int, txn: int, batch_bytes: int,
                       retry_backoff_ms: int) -> dict[str, list[float]]:
    """The copy's rounds on each side (name → bootstrap, its topics made), who goes first
    alternating; each output verified exactly once; records/s per side and round."""
    for name, bootstrap in sides.items():
        produce_input(bootstrap, "in", records, VALUE_BYTES)
        produce_input(bootstrap, "warmup-in", 1000, VALUE_BYTES)
        copy_once(bootstrap, "warmup-out", txn, batch_bytes, f"warmup-{name}", source="warmup-in",
                  retry_backoff_ms=retry_backoff_ms)
    runs: dict[str, list[float]] = {name: [] for name in sides}
    for r in range(rounds):
        for name, bootstrap in list(sides.items())[:: 1 if r % 2 == 0 else -1]:
            records_s = records / copy_once(bootstrap, f"out-{r}", txn, batch_bytes, f"copy-{name}-{r}",
                                            retry_backoff_ms=retry_backoff_ms)
            problem = verify(bootstrap, f"out-{r}", PARTITIONS, records)
            if problem:
                raise RuntimeError(f"copy on the {name}, round {r + 1}: {problem}")
            runs[name].append(records_s)
            print(f"round {r + 1}: copy on the {name}: {records_s:,.0f} records/s", flush=True)
    return runs


def failovers(cluster: Brokers, kills: int) -> tuple[list[float], list[bool]]:
    """Seconds from each kill to the next acknowledged record, and whether the killed leader was
    also the controller (which then had to be replaced first)."""
    topic = "bench-failover"
    create_topic(cluster.any_alive().bootstrap, topic, partitions=1, replication_factor=3,
                 configs={"min.insync.replicas": "2"})
    seconds: list[float] = []
    controller_killed: list[bool] = []
    with Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                   "request.timeout.ms": 2000, "delivery.timeout.ms": 60000, "retry.backoff.ms": 50,
                   "metadata.max.age.ms": 1000}) as producer:
        producer.send(topic, b"warm-up", partition=0).result(60)
        for k in range(kills):
            wait_until(lambda: isr_size(cluster, topic) == 3, "the ISR whole", 120)
            meta = cluster.metadata([topic])
            leader = meta.topics[topic][0].leader
            controller_killed.append(leader == meta.controller)
            killed_at = time.monotonic()
            cluster.brokers[leader].kill()
            while True:  # one record at a time: the first acknowledged after the kill
                try:
                    producer.send(topic, b"after-%d" % k, partition=0).result(60)
                    break
                except Exception:
                    continue
            seconds.append(time.monotonic() - killed_at)
            print(f"failover {k + 1}: broker {leader}{' (the controller)' if controller_killed[-1] else ''} "
                  f"killed, next acks=all record after {seconds[-1]:.2f} s", flush=True)
            cluster.brokers[leader].start()
    return seconds, controller_killed


ACKS_1 = next(c for c in PRODUCE_CASES if c.name == "acks1")


def flush_cost(work: Path, policies: list[str], mb: int, rounds: int, copy_records: int, copy_rounds: int,
               txn: int, batch_bytes: int, retry_backoff_ms: int) -> dict[str, Any]:
    """What each flush policy costs a cluster, in one run: a cluster per policy (ZooKeeper + three
    brokers each, all up at once, one under load at a time), RF 3 / min.isr 2 produce of both
    producers and the transactional copy at RF 3, rounds interleaved (who goes first alternates).
    Per policy and case the rounds' figures, their best, and each case's best against the first
    policy's."""
    clusters = {p: Cluster(work / f"cluster-{p}", overrides={
        "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS), "log.flush.policy": p}) for p in policies}
    produce_runs: dict[str, dict[str, list[Measurement]]] = {p: {} for p in policies}
    try:
        for cluster in clusters.values():
            cluster.start()
        for r in range(rounds):
            for p in policies if r % 2 == 0 else policies[::-1]:
                for name, ms in replicated_produce(clusters[p], mb, 1, prefix=f"{p}-{r}", factors=(3,)).items():
                    produce_runs[p].setdefault(name, []).extend(ms)
        for cluster in clusters.values():
            create_replicated_topics(cluster, copy_topics(copy_rounds))
        copy_runs = interleaved_copies({p: c.bootstrap for p, c in clusters.items()}, copy_records, copy_rounds,
                                       txn, batch_bytes, retry_backoff_ms) if copy_rounds else {}
    finally:
        for cluster in clusters.values():
            cluster.stop()
    best_of = {p: {**{f"{name} MB/s": round(best(ms).mb_s, 1) for name, ms in produce_runs[p].items()},
                   **({"copy records/s": round(max(copy_runs[p]), 1)} if copy_runs else {})} for p in policies}
    first = policies[0]
    return {"policies": policies, "mb_per_case": mb, "rounds": rounds, "copy_records": copy_records,
            "copy_rounds": copy_rounds,
            "produce": {p: {name: [m.to_json() for m in ms] for name, ms in runs.items()}
                        for p, runs in produce_runs.items()},
            "cpu_ms_per_mb": {p: cpu_per_mb(runs) for p, runs in produce_runs.items()},
            "copy_records_s": {p: [round(x, 1) for x in xs] for p, xs in copy_runs.items()},
            "best": best_of,
            "ratio_to_first": {p: {case: round(v / best_of[first][case], 3) for case, v in best_of[p].items()}
                               for p in policies[1:]},
            "load_avg_at_end": [round(x, 2) for x in os.getloadavg()]}


def scale_out(work: Path, sizes: list[int], mb: int, rounds: int, flush_policy: str) -> dict[str, Any]:
    """What more broker processes on this machine give (issue 28: the broker is one event loop, so
    one process uses one core): clusters of each of ``sizes`` brokers (ZooKeeper + N eoslog
    brokers), RF 1, one topic per broker with its 3 partitions all led there, and one producer per
    broker sending ``mb`` MB of 1 KB records (acks=1 and acks=all, the client's threads at once), then
    one consumer per broker reading it back. Total and per-broker-process MB/s, and the brokers'
    CPU seconds; rounds interleaved (who goes first alternates), best round of each."""
    records = mb * 1024
    runs: dict[str, list[dict[str, float]]] = {}
    for r in range(rounds):
        for n in sizes if r % 2 == 0 else sizes[::-1]:
            cluster = Cluster(work / f"scale-out-{n}-{r}", size=n, overrides={
                "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS), "log.flush.policy": flush_policy}).start()
            try:
                for case in (ACKS_1, ACKS_ALL):
                    topics = [f"so-{case.name}-{b}" for b in cluster.brokers]
                    for b, topic in zip(cluster.brokers, topics, strict=True):
                        result = create_topic(cluster.any_alive().bootstrap, topic,
                                              assignment={p: [b] for p in range(3)})
                        assert int(result.error_code) == 0, result
                        create_topic(cluster.any_alive().bootstrap, f"{topic}-warmup", assignment={0: [b]})
                    bootstrap = cluster.bootstrap
                    phases = ((f"produce {case.name}", [partial(produce, bootstrap, t, case, records) for t in topics]),
                              (f"fetch {case.name}", [partial(fetch, bootstrap, t, records) for t in topics]))
                    for name, jobs in phases:
                        cpu0, t0 = brokers_cpu_s(cluster), time.perf_counter()
                        measured = _in_threads(jobs)
                        seconds = time.perf_counter() - t0
                        total = n * mb / seconds
                        figures = {"brokers": n, "MB/s": round(total, 1), "MB/s per broker": round(total / n, 1),
                                   "brokers CPU s": round(brokers_cpu_s(cluster) - cpu0, 2),
                                   "slowest producer or consumer s": round(max(m.seconds for m in measured), 2)}
                        runs.setdefault(f"{name}, {n} broker(s)", []).append(figures)
                        print(f"scale-out round {r + 1}: {n} broker(s), {name}: {total:.1f} MB/s "
                              f"({total / n:.1f} per broker)", flush=True)
            finally:
                cluster.stop()
    best_runs = {name: max(rs, key=lambda f: f["MB/s"]) for name, rs in runs.items()}
    return {"runs": runs, "best": best_runs, "load_avg_at_end": [round(x, 2) for x in os.getloadavg()]}


def _in_threads(jobs: list[Callable[[], Measurement]]) -> list[Measurement]:
    out: list[Measurement | None] = [None] * len(jobs)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            out[i] = jobs[i]()
        except BaseException as e:  # reported below, in the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return [m for m in out if m is not None]


def isr_size(cluster: Brokers, topic: str) -> int:
    try:
        return len(cluster.metadata([topic]).topics[topic][0].isr)
    except OSError:
        return 0


def single_broker(side: str, work: Path, flush_policy: str) -> BrokerProcess | KafkaNode:
    """The copy case's single broker (unstarted): eoslog's flushes as the cluster's (``auto``: group
    commit on both since issue 28); Kafka's with its defaults."""
    overrides = {"offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "3"}
    (work / "single").mkdir()
    if side == "kafka":
        return against.kafka_broker(work / "single" / "data", overrides)
    return BrokerProcess(work / "single" / "data", overrides={
        **overrides, "log.flush.policy": flush_policy})


def run_side(args: argparse.Namespace) -> dict[str, Any]:
    """One side's part of a ``--against kafka`` round (against.interleave calls it with
    ``args.side``): its three brokers started afresh, ``--rounds`` produce rounds (both producers,
    RF 1 and RF 3) after an untimed one of WARM_UP_MB, ``--copy-rounds`` of the copy on the cluster
    and on a single broker of that side, its share of the ``--kills``; the brokers stopped and their
    data removed."""
    side, kills = args.side, args.kills // args.against_rounds
    work, _, facts = prepare_run(args.work_dir, f"eoslog-bench-cluster-{side}-", None)
    print(f"--- {side}: {args.rounds} round(s) of {args.mb} MB per case, {kills} kills, "
          f"load {facts['load_avg_at_start']}", flush=True)
    cluster: Brokers = (cluster_against.KafkaSide(work / "kafka", SESSION_TIMEOUT_MS) if side == "kafka" else
                        Cluster(work / "cluster", overrides={"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                                                             "log.flush.policy": args.flush_policy}))
    single: BrokerProcess | KafkaNode | None = None
    try:
        cluster.start()  # type: ignore[attr-defined]
        # Untimed, every case once: a fresh JVM runs interpreted until its JIT has compiled the
        # produce and replication paths, which no long-running Kafka broker pays.
        replicated_produce(cluster, WARM_UP_MB, 1, prefix="warm-up")
        cpu0 = brokers_cpu_s(cluster)
        time.sleep(IDLE_S)
        idle_cpu = (brokers_cpu_s(cluster) - cpu0) / IDLE_S
        runs = replicated_produce(cluster, args.mb, args.rounds)
        single = single_broker(side, work, args.flush_policy).start()  # only while the copy runs
        copy_runs = copy_throughput(cluster, single, args.copy_records, args.copy_rounds, args.copy_txn,
                                    args.copy_batch_bytes, args.copy_retry_backoff_ms)
        single.stop()
        failover_s, controller_killed = failovers(cluster, kills)
    except BaseException:
        print(f"{side} failed; its logs are under {work}", flush=True)
        raise
    finally:
        if single is not None and single.alive():
            single.stop()
        cluster.stop()
    shutil.rmtree(work, ignore_errors=True)
    return {"side": side, "load_avg_at_start": facts["load_avg_at_start"],
            "load_avg_at_end": [round(x, 2) for x in os.getloadavg()],
            "produce": {name: [m.to_json() for m in ms] for name, ms in runs.items()},
            "cpu_ms_per_mb": cpu_per_mb(runs),
            "copy_records_s": {k: [round(x, 1) for x in v] for k, v in copy_runs.items()},
            "failover_s": [round(x, 3) for x in failover_s],
            "failover_controller_killed": controller_killed, "idle_brokers_cpu_share": round(idle_cpu, 3)}


def figures(side_run: dict[str, Any]) -> against.Figures:
    """What eoslog and Kafka are compared on, per case: the best round's MB/s, and the brokers'
    and the client's CPU per MB of the cheapest round (failovers are pooled over the rounds
    instead: cluster_against.compare)."""
    out: against.Figures = {}
    for name, ms in side_run["produce"].items():
        out[f"{name} MB/s"] = (max(m["mb_s"] for m in ms), True)
        for who in ("brokers", "client"):
            out[f"{name} {who} CPU ms/MB"] = (min(side_run["cpu_ms_per_mb"][name][who]), False)
    for name, records_s in side_run["copy_records_s"].items():
        out[f"copy {name} records/s"] = (max(records_s), True)
    return out


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
    parser.add_argument("--copy-only", action="store_true")
    parser.add_argument("--copy-records", type=int, default=100000)
    parser.add_argument("--copy-rounds", type=int, help="default 3 (--against kafka: 2 per part)")
    parser.add_argument("--copy-txn", type=int, default=500, help="records per copy transaction")
    parser.add_argument("--copy-batch-bytes", type=int, default=16384, help="the copiers' batch.size")
    parser.add_argument("--copy-retry-backoff-ms", type=int, default=100,
                        help="the copiers' retry.backoff.ms, which librdkafka waits after CONCURRENT_TRANSACTIONS")
    parser.add_argument("--profile", type=Path, help="py-spy each broker during RF 3 rounds into this dir")
    parser.add_argument("--flush-policy", default="auto", choices=["auto", "group-commit", "kafka"])
    parser.add_argument("--scale-out", metavar="SIZES", help="only the scale-out case, e.g. 1,2 (brokers, RF 1)")
    parser.add_argument("--flush-cost", metavar="POLICIES",
                        help="only RF 3 produce and the copy on a cluster per flush policy, e.g. kafka,auto")
    against.add_flag(parser)
    args = parser.parse_args()
    if args.flush_cost:
        run_flush_cost(args)
        return
    if args.scale_out:
        work, _, facts = prepare_run(args.work_dir, "eoslog-bench-scale-out-", None)
        sizes = [int(x) for x in args.scale_out.split(",")]
        result = {"machine": facts, "flush_policy": args.flush_policy, "mb_per_producer": args.mb or 100,
                  **scale_out(work, sizes, args.mb or 100, args.rounds or 2, args.flush_policy)}
        table = Table(title=f"scale-out: brokers on this machine, RF 1 (best of {args.rounds or 2} rounds; "
                            f"load {facts['load_avg_at_start']} → {result['load_avg_at_end']})")
        for column in ("case", "MB/s", "MB/s per broker", "brokers CPU s"):
            table.add_column(column)
        for name, f in result["best"].items():
            table.add_row(name, str(f["MB/s"]), str(f["MB/s per broker"]), str(f["brokers CPU s"]))
        Console().print(table)
        shutil.rmtree(work, ignore_errors=True)
        if not args.no_save:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            for name in (f"cluster-scale-out-{stamp}.json", "cluster-scale-out-latest.json"):
                (RESULTS_DIR / name).write_text(json.dumps(result, indent=1))
            print(f"saved {RESULTS_DIR / 'cluster-scale-out-latest.json'}")
        return
    if args.against:
        args.rounds = args.rounds or (1 if args.quick else 2)
        args.mb = args.mb or (30 if args.quick else 100)
        args.kills = args.kills or (4 if args.quick else 10)
        args.copy_rounds = args.copy_rounds or (1 if args.quick else 2)
        cluster_against.main(args, run_side, figures, SESSION_TIMEOUT_MS, WARM_UP_MB)
        return
    mb = args.mb or (30 if args.quick else 100)
    rounds = args.rounds or (1 if args.quick else 3)
    kills = args.kills or (5 if args.quick else 10)
    copy_rounds = 1 if args.quick else args.copy_rounds or 3
    work, _, facts = prepare_run(args.work_dir, "eoslog-bench-cluster-", None)
    cluster = Cluster(work / "cluster", overrides={"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                                                   "log.flush.policy": args.flush_policy}).start()
    if args.produce_only:
        try:
            produce_runs = replicated_produce(cluster, mb, rounds, args.profile)
        finally:
            cluster.stop()
        profile = summarise_profile(args.profile) if args.profile else None
        save_produce(produce_runs, args, facts, profile)
        return
    if args.failover_only:
        try:
            failover_s, _ = failovers(cluster, kills)
        finally:
            cluster.stop()
        save_failovers(failover_s, args.label, facts, args.no_save)
        return
    single = single_broker("eoslog", work, args.flush_policy).start()
    results: dict[str, Any] = {
        "machine": facts,  # load_avg_at_start: before the brokers started
        "settings": {"mb_per_case": mb, "rounds": rounds, "kills": kills, "record_bytes": 1024,
                     "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS, "flush_policy": args.flush_policy,
                     "copy_records": args.copy_records, "copy_rounds": copy_rounds, "copy_txn": args.copy_txn,
                     "copy_batch_bytes": args.copy_batch_bytes, "copy_partitions": PARTITIONS,
                     "copy_retry_backoff_ms": args.copy_retry_backoff_ms},
    }
    try:
        if not args.copy_only:
            produce_runs = replicated_produce(cluster, mb, rounds, args.profile)
            results["load_average_after_produce"] = [round(x, 2) for x in os.getloadavg()]
        copy_runs = copy_throughput(cluster, single, args.copy_records, copy_rounds, args.copy_txn,
                                    args.copy_batch_bytes, args.copy_retry_backoff_ms)
        results["load_average_after_copy"] = [round(x, 2) for x in os.getloadavg()]
        if not args.copy_only:
            failover_s, _ = failovers(cluster, kills)
    finally:
        single.stop()
        cluster.stop()
    results["copy_records_s"] = {name: [round(x, 1) for x in xs] for name, xs in copy_runs.items()}
    results["ratio_copy_cluster_single"] = round(max(copy_runs["cluster"]) / max(copy_runs["single"]), 3)
    table = Table(title="eoslog cluster: replicated produce, transactional copy and failover (one run)")
    for column in ("case", "MB/s", "records/s", "note"):
        table.add_column(column)
    if not args.copy_only:
        results.update({
            "produce": {name: [m.to_json() for m in runs] for name, runs in produce_runs.items()},
            **ratios(produce_runs), "cpu_ms_per_mb": cpu_per_mb(produce_runs),
            "failover_s": [round(s, 3) for s in failover_s],
            "failover_p50_s": round(statistics.median(failover_s), 3),
            "failover_p99_s": round(percentile(failover_s, 0.99), 3),
        })
        for suffix, producer in (("", "acks=all, idempotent"), ("-acksall", "acks=all, not idempotent")):
            rf1, rf3 = best(produce_runs[f"rf1{suffix}"]), best(produce_runs[f"rf3{suffix}"])
            table.add_row(f"produce RF 1 ({producer})", f"{rf1.mb_s:.1f}", f"{rf1.records_s:,.0f}", "best round")
            table.add_row("produce RF 3, min.isr 2", f"{rf3.mb_s:.1f}", f"{rf3.records_s:,.0f}", "best round")
            table.add_row("ratio RF3 / RF1", f"{results[f'ratio_rf3_rf1{suffix}']}", "", "design goal ≥ 0.5")
    table.add_row("copy, single broker", "", f"{max(copy_runs['single']):,.0f}", "best round")
    table.add_row("copy, cluster RF 3, min.isr 2", "", f"{max(copy_runs['cluster']):,.0f}", "best round")
    table.add_row("ratio copy cluster / single", f"{results['ratio_copy_cluster_single']}", "", "")
    if not args.copy_only:
        table.add_row("failover p50 / p99", f"{results['failover_p50_s']} s / {results['failover_p99_s']} s", "",
                      f"kill -9 → next acks=all ack; session timeout {SESSION_TIMEOUT_MS / 1000:.0f} s")
    Console().print(table)
    if not args.no_save:
        RESULTS_DIR.mkdir(exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        base = f"cluster-copy-{args.label or 'run'}" if args.copy_only else "cluster"
        names = [f"{base}.json"] if args.copy_only else [f"cluster-{stamp}.json", "cluster-latest.json"]
        for name in names:
            (RESULTS_DIR / name).write_text(json.dumps(results, indent=1))
        png = RESULTS_DIR / (f"{base}.png" if args.copy_only else "cluster-latest.png")
        plot(results, png)
        print(f"saved {RESULTS_DIR / names[-1]} and {png.name}")


def run_flush_cost(args: argparse.Namespace) -> None:
    work, _, facts = prepare_run(args.work_dir, "eoslog-bench-flush-cost-", None)
    policies = args.flush_cost.split(",")
    result = {"machine": facts, **flush_cost(
        work, policies, args.mb or 100, args.rounds or 3, args.copy_records,
        1 if args.quick else args.copy_rounds or 3, args.copy_txn, args.copy_batch_bytes,
        args.copy_retry_backoff_ms)}
    shutil.rmtree(work, ignore_errors=True)
    table = Table(title=f"flush policies on a 3-broker cluster, RF 3 / min.isr 2 (best rounds; load "
                        f"{facts['load_avg_at_start']} → {result['load_avg_at_end']})")
    table.add_column("case")
    for p in policies:
        table.add_column(p)
    for p in policies[1:]:
        table.add_column(f"{p} / {policies[0]}")
    for case in result["best"][policies[0]]:
        table.add_row(case, *(str(result["best"][p][case]) for p in policies),
                      *(str(result["ratio_to_first"][p][case]) for p in policies[1:]))
    Console().print(table)
    if not args.no_save:
        RESULTS_DIR.mkdir(exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for name in (f"cluster-flush-cost-{stamp}.json", "cluster-flush-cost-latest.json"):
            (RESULTS_DIR / name).write_text(json.dumps(result, indent=1))
        print(f"saved {RESULTS_DIR / 'cluster-flush-cost-latest.json'}")


def save_produce(runs: dict[str, list[Measurement]], args: argparse.Namespace, facts: dict[str, Any],
                 profile: dict[str, float] | None) -> None:
    results = {"label": args.label, "flush_policy": args.flush_policy, "machine": facts,
               "load_average_after": [round(x, 2) for x in os.getloadavg()],
               "produce": {name: [m.to_json() for m in ms] for name, ms in runs.items()},
               "best_mb_s": {name: round(best(ms).mb_s, 1) for name, ms in runs.items()},
               **ratios(runs), "cpu_ms_per_mb": cpu_per_mb(runs), "profile_rf3_main_thread_busy_shares": profile}
    print(f"produce {args.label} ({args.flush_policy}): best MB/s {results['best_mb_s']}, "
          f"RF3/RF1 idempotent {results['ratio_rf3_rf1']}, not idempotent {results['ratio_rf3_rf1-acksall']}")
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
    """One panel per case the run measured: produce, copy, failover."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [k for k in ("produce", "copy_records_s", "failover_s") if k in results]
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        if panel == "failover_s":
            failover = results["failover_s"]
            ax.plot(range(1, len(failover) + 1), failover, "o-")
            ax.axhline(results["settings"]["zookeeper.session.timeout.ms"] / 1000, color="grey", linestyle="--",
                       label="zookeeper.session.timeout.ms")
            ax.set_xlabel("kill -9 of the leader")
            ax.set_ylabel("seconds to the next acks=all acknowledgement")
            ax.set_title(f"failover p50 {results['failover_p50_s']} s, p99 {results['failover_p99_s']} s")
            ax.legend()
            continue
        if panel == "produce":
            bars = {label: [m["mb_s"] for m in results["produce"][name]] for name, label in (
                ("rf1", "RF 1\nidempotent"), ("rf3", "RF 3\nidempotent"),
                ("rf1-acksall", "RF 1\nnot idemp."), ("rf3-acksall", "RF 3\nnot idemp."))}
            ax.set_ylabel("MB/s (1 KB records, acks=all; RF 3: min.isr 2)")
            ax.set_title(f"produce RF3/RF1: idempotent {results['ratio_rf3_rf1']}, "
                         f"not {results['ratio_rf3_rf1-acksall']}", fontsize=9)
        else:
            bars = {"single broker": results["copy_records_s"]["single"],
                    "cluster RF 3 (min.isr 2)": results["copy_records_s"]["cluster"]}
            ax.set_ylabel("records/s (transactional copy, librdkafka)")
            ax.set_title(f"transactional copy: ratio {results['ratio_copy_cluster_single']}")
        for i, values in enumerate(bars.values()):
            ax.bar(i, max(values), color="tab:blue" if i % 2 == 0 else "tab:orange")
            ax.scatter([i] * len(values), values, color="black", s=10, zorder=3)
        ax.set_xticks(range(len(bars)), list(bars))
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()

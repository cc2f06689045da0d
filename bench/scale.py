"""Costs that grow with the work (issue 28): many partitions and many concurrent transactions on
one broker, eoslog beside Apache Kafka (and beside an earlier eoslog build) in one run.

    python bench/scale.py --against kafka [--partitions 1000,5000] [--rounds 2]
    python bench/scale.py --a-src /tmp/eoslog-before/src --against kafka     # + a build before a change
    python bench/scale.py --cases txns --against kafka [--producers 100 --rate 1000]
    python bench/scale.py --cases offset-commits --against kafka [--groups 200 --commit-rate 2000]

Each round starts every side's broker afresh (eoslog's on its default ``log.flush.policy``,
group commit; Kafka on its defaults, no fsync), one after the other, the order rotating from
round to round so that a slow stretch of the shared machine hits all sides; the best round of
each side counts and every round is in the JSON. Cases (``--cases``):

- ``create``: for each N of ``--partitions``, CreateTopics of one topic with N partitions (RF 1),
  timed from the request until a Metadata request shows a leader for every partition (Kafka
  answers CreateTopics before its partitions are led: the time until led is what a client
  waits); the broker's CPU seconds over that time; its open descriptors after, per partition
  (``fds per partition``: the descriptors it gained, over N). Meanwhile a **bystander**
  (librdkafka, acks=all, linger 0) produces one 100 B record every 2 ms to a topic of its own:
  its latency p50/p99 during the creation against the same producer's in the ``--idle-s``
  seconds before (goal: unchanged; one CreateTopics must not stall the broker's other clients).
  After each creation, ``--metadata-requests`` full Metadata requests (librdkafka's
  list_topics() without a topic: every topic the broker has so far, one after the other): the
  median latency and the broker's CPU per request.
- ``first-write``: one 100 B record to each partition of the topic ``create`` made last (so each
  partition's first write), acks=all, linger 5 ms; timed from the first produce() to flush()
  returning; the broker's CPU seconds; the descriptors the broker gained, per partition
  (with the process's soft descriptor limit beside: eoslog keeps segment files open up to half
  of it, ``storage/fd_cache.py``).
  And the leader-epoch-checkpoint files of the topic made or rewritten by those first writes
  (by inode and mtime; each side's files are counted before and after).
- ``txns``: ``--producers`` transactional producers (librdkafka, one thread each) offering
  ``--rate`` transactions per second together for ``--txn-s`` seconds (after a ``--warmup-s``
  start): each begins a transaction, sends one 100 B record to one of 10 partitions, commits
  (commit_transaction: the flush, EndTxn), at its own pace of rate/producers per second
  (falling behind, it runs back to back). Served transactions per second over the timed part,
  commit latency p50/p99, the broker's CPU seconds per 1,000 transactions.
- ``offset-commits``: ``--groups`` consumer groups (one librdkafka consumer each, one thread
  each, not subscribed: a standalone group's commit, generation -1) offering
  ``--commit-rate`` OffsetCommits per second together for ``--commit-s`` seconds (after the
  warm-up): each commits the next offset of one partition of a 10-partition topic,
  synchronously, at its own pace (falling behind, back to back). Served commits per second,
  commit latency p50/p99 (``commit()`` call to return), the broker's CPU seconds per 1,000.

- ``connections``: ``--connections`` idle client connections (plain sockets, each has sent one
  ApiVersions request and read its answer, then stays open sending nothing) opened to the broker
  while the bystander above produces; the broker's resident memory before and with them (per
  connection, and whole: goal ≤ 32 KiB each, 20,000 under 1 GB), and the bystander's latency in
  the ``--idle-s`` seconds before they were opened against the same seconds while they are held
  (goal: unchanged). The file-descriptor limit is raised for the run (the broker inherits it).

Ratios are eoslog / Kafka (and eoslog / before): higher is better for rates, lower for times,
latencies and descriptors. Output: a table, ``bench/results/scale-<timestamp>.json``,
``scale-latest.json`` and ``scale-latest.png``. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import shutil
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from rich.console import Console
from rich.table import Table

from common import REPO_ROOT, RESULTS_DIR, BrokerProcess, git_commit, machine_facts, percentile
from support.kafka_harness import KafkaBroker, kafka_version

console = Console(width=max(shutil.get_terminal_size((120, 24)).columns, 120))

BYSTANDER_TOPIC = "bystander"
BYSTANDER_INTERVAL_S = 0.002
TXN_TOPIC = "txns"
TXN_PARTITIONS = 10
COMMIT_TOPIC = "commits"
VALUE = b"v" * 100


@dataclass
class Side:
    name: str
    src: Path | None  # eoslog's src/, or None for Kafka
    overrides: dict[str, str]

    def start(self, data_dir: Path) -> BrokerProcess | KafkaBroker:
        if self.src is None:
            return KafkaBroker(data_dir, self.overrides).start()
        os.environ["PYTHONPATH"] = str(self.src)  # read by the broker subprocess at its start
        return BrokerProcess(data_dir, overrides=self.overrides).start()


def broker_pid(broker: BrokerProcess | KafkaBroker) -> int:
    assert broker.proc is not None
    return broker.proc.pid


def cpu_s(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system)


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(client: AdminClient, name: str, partitions: int, timeout_s: float = 600) -> None:
    client.create_topics([NewTopic(name, partitions, 1)], request_timeout=timeout_s)[name].result(timeout_s)


def wait_led(client: AdminClient, name: str, partitions: int, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            t = client.list_topics(name, timeout=60).topics[name]
        except KafkaException:
            t = None
        if (t is not None and t.error is None and len(t.partitions) == partitions
                and all(p.leader >= 0 for p in t.partitions.values())):
            return
        time.sleep(0.02)
    raise RuntimeError(f"{name}: not every partition led after {timeout_s}s")


class Bystander:
    """A producer of one record every 2 ms, acks=all, on a thread: its delivery latencies with
    the time each was sent."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                                  "enable.idempotence": False})
        self.samples: list[tuple[float, float]] = []  # (sent at, latency s)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Bystander:
        self._thread.start()
        return self

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_at:
                self.producer.produce(BYSTANDER_TOPIC, VALUE, on_delivery=self._delivered(now))
                next_at += BYSTANDER_INTERVAL_S
                if next_at < now:
                    next_at = now + BYSTANDER_INTERVAL_S
            self.producer.poll(max(0.0, min(0.0005, next_at - time.monotonic())))
        self.producer.flush(30)

    def _delivered(self, sent: float) -> Callable[[Any, Any], None]:
        def done(err: Any, _msg: Any) -> None:
            if err is None:
                self.samples.append((sent, time.monotonic() - sent))
        return done

    def latencies(self, start: float, end: float) -> list[float]:
        return [lat for sent, lat in list(self.samples) if start <= sent < end]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


def latency_figures(latencies: list[float]) -> dict[str, float]:
    if not latencies:
        return {"n": 0}
    ms = [x * 1000 for x in latencies]
    return {"n": len(ms), "p50_ms": round(percentile(ms, 0.5), 2), "p99_ms": round(percentile(ms, 0.99), 2),
            "max_ms": round(max(ms), 2)}


def full_metadata(client: AdminClient, pid: int, requests: int) -> dict[str, Any]:
    """A Metadata request for every topic (librdkafka's list_topics() without a topic), ``requests``
    times one after the other: the median and best latency, the broker's CPU per request."""
    client.list_topics(timeout=60)  # warm: connected, any per-topic work done once
    latencies: list[float] = []
    cpu0 = cpu_s(pid)
    for _ in range(requests):
        t0 = time.perf_counter()
        md = client.list_topics(timeout=60)
        latencies.append(time.perf_counter() - t0)
    cpu1 = cpu_s(pid)
    ms = [x * 1000 for x in latencies]
    return {"requests": requests, "partitions": sum(len(t.partitions) for t in md.topics.values()),
            "p50_ms": round(percentile(ms, 0.5), 2), "min_ms": round(min(ms), 2),
            "broker_cpu_ms_per_request": round((cpu1 - cpu0) / requests * 1000, 2)}


def case_create(broker: BrokerProcess | KafkaBroker, partitions: list[int], idle_s: float,
                metadata_requests: int) -> dict[str, Any]:
    pid = broker_pid(broker)
    client = admin(broker.bootstrap)
    create_topic(client, BYSTANDER_TOPIC, 1)
    wait_led(client, BYSTANDER_TOPIC, 1)
    bystander = Bystander(broker.bootstrap).start()
    out: dict[str, Any] = {}
    try:
        time.sleep(1.0)  # connected, warm
        for n in partitions:
            idle_start = time.monotonic()
            time.sleep(idle_s)
            fds_before = psutil.Process(pid).num_fds()
            cpu0, t0 = cpu_s(pid), time.monotonic()
            create_topic(client, f"scale-{n}", n)
            answered = time.monotonic() - t0
            wait_led(client, f"scale-{n}", n)
            t1 = time.monotonic()
            cpu1 = cpu_s(pid)
            time.sleep(0.2)  # the bystander's records sent during the creation are answered
            fds_after = psutil.Process(pid).num_fds()
            metadata = full_metadata(client, pid, metadata_requests)
            out[str(n)] = {
                "answered_s": round(answered, 3),
                "until_led_s": round(t1 - t0, 3),
                "broker_cpu_s": round(cpu1 - cpu0, 3),
                "fds_before": fds_before,
                "fds_after": fds_after,
                "fds_per_partition": round((fds_after - fds_before) / n, 3),
                "bystander_idle": latency_figures(bystander.latencies(idle_start, t0)),
                "bystander_during": latency_figures(bystander.latencies(t0, t1)),
                "metadata": metadata,
            }
    finally:
        bystander.stop()
    return out


def api_versions_frame(correlation_id: int) -> bytes:
    """An ApiVersions v0 request (header v1: api key 18, version 0, correlation id, client id)."""
    client_id = b"scale-idle"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


def open_idle_connections(bootstrap: str, n: int) -> list[socket.socket]:
    """``n`` connections, each answered one ApiVersions request, then left idle."""
    host, port = bootstrap.rsplit(":", 1)
    socks: list[socket.socket] = []
    try:
        for i in range(n):
            s = socket.create_connection((host, int(port)), timeout=30)
            s.sendall(api_versions_frame(i))
            size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
            if len(s.recv(size, socket.MSG_WAITALL)) != size:
                raise RuntimeError(f"connection {i}: short ApiVersions answer")
            socks.append(s)
    except BaseException:
        for s in socks:
            s.close()
        raise
    return socks


def raise_descriptor_limit(wanted: int) -> None:
    """Room for ``wanted`` more descriptors in this process and the brokers it starts (root may
    raise the hard limit too)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= wanted:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(wanted, hard), max(wanted, hard)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def case_connections(broker: BrokerProcess | KafkaBroker, n: int, idle_s: float) -> dict[str, Any]:
    pid = broker_pid(broker)
    topic_led(broker, BYSTANDER_TOPIC, 1)
    bystander = Bystander(broker.bootstrap).start()
    try:
        time.sleep(1.0)  # connected, warm
        before_start = time.monotonic()
        time.sleep(idle_s)
        before_end = time.monotonic()
        rss_before = psutil.Process(pid).memory_info().rss
        t0 = time.monotonic()
        socks = open_idle_connections(broker.bootstrap, n)
        opened_s = time.monotonic() - t0
        try:
            time.sleep(2.0)  # every connection's set-up done and settled
            held_start = time.monotonic()
            time.sleep(idle_s)
            held_end = time.monotonic()
            rss_held = psutil.Process(pid).memory_info().rss
        finally:
            for sock in socks:
                sock.close()
    finally:
        bystander.stop()
    return {
        "connections": n, "opened_s": round(opened_s, 2),
        "rss_before_mb": round(rss_before / 2**20, 1), "rss_held_mb": round(rss_held / 2**20, 1),
        "kib_per_connection": round((rss_held - rss_before) / n / 1024, 1),
        "bystander_before": latency_figures(bystander.latencies(before_start, before_end)),
        "bystander_held": latency_figures(bystander.latencies(held_start, held_end)),
    }


def case_first_write(broker: BrokerProcess | KafkaBroker, n: int) -> dict[str, Any]:
    pid = broker_pid(broker)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5,
                         "enable.idempotence": False, "queue.buffering.max.messages": max(100_000, 2 * n)})
    topic = f"scale-{n}"
    producer.list_topics(topic, timeout=60)
    errors: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    checkpoints_before = epoch_checkpoints(broker.data_dir, topic)
    fds_before = psutil.Process(pid).num_fds()
    cpu0, t0 = cpu_s(pid), time.monotonic()
    for p in range(n):
        producer.produce(topic, VALUE, partition=p, on_delivery=delivered)
        producer.poll(0)
    left = producer.flush(300)
    t1 = time.monotonic()
    if left or errors:
        raise RuntimeError(f"first writes: {left} undelivered, errors {errors[:3]}")
    fds_after = psutil.Process(pid).num_fds()
    return {"partitions": n, "seconds": round(t1 - t0, 3), "broker_cpu_s": round(cpu_s(pid) - cpu0, 3),
            "fds_before": fds_before, "fds_after": fds_after,
            "fds_per_partition": round((fds_after - fds_before) / n, 3),
            "fd_soft_limit": fd_soft_limit(pid),
            "epoch_checkpoints_before": len(checkpoints_before),
            "epoch_checkpoints_written": checkpoints_written(checkpoints_before,
                                                            epoch_checkpoints(broker.data_dir, topic))}


def epoch_checkpoints(data_dir: Path, topic: str) -> dict[str, tuple[int, int]]:
    """Each partition's leader-epoch-checkpoint file of ``topic``: (inode, mtime ns)."""
    out = {}
    for path in data_dir.glob(f"{topic}-*/leader-epoch-checkpoint"):
        st = path.stat()
        out[str(path)] = (st.st_ino, st.st_mtime_ns)
    return out


def checkpoints_written(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> int:
    """Checkpoint files made or rewritten (a new inode: replaced by rename; a new mtime: in place)."""
    return sum(1 for path, stamp in after.items() if before.get(path) != stamp)


def fd_soft_limit(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    return -1


def topic_led(broker: BrokerProcess | KafkaBroker, name: str, partitions: int) -> None:
    client = admin(broker.bootstrap)
    create_topic(client, name, partitions)
    wait_led(client, name, partitions)


# One client's session: (op(k) → the latency of its k-th operation in seconds, close()).
Session = tuple[Callable[[int], float], Callable[[], None]]


def paced(pid: int, clients: int, rate: float, seconds: float, warmup_s: float,
          session: Callable[[int], Session]) -> dict[str, Any]:
    """``clients`` threads, each opening ``session(i)`` and then running its operation at its own
    pace of rate/clients per second (falling behind, back to back) until the end: served per
    second, latency p50/p99 and the broker's CPU per 1,000 over the timed part (after the warm-up)."""
    per_client = rate / clients
    start = time.monotonic() + 5.0 + clients * 0.02  # after every client's set-up
    measure_from, end = start + warmup_s, start + warmup_s + seconds
    done_ops: list[tuple[float, float]] = []  # (done at, latency s)
    failures: list[str] = []
    lock = threading.Lock()

    def run(i: int) -> None:
        close: Callable[[], None] = lambda: None  # noqa: E731
        try:
            op, close = session(i)
            k = 0
            while True:
                due = start + (k + i / clients) / per_client
                now = time.monotonic()
                if now >= end:
                    break
                if due > now:
                    time.sleep(due - now)
                latency = op(k)
                with lock:
                    done_ops.append((time.monotonic(), latency))
                k += 1
        except KafkaException as e:
            failures.append(str(e))
        finally:
            close()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    while time.monotonic() < measure_from:
        time.sleep(0.05)
    cpu0 = cpu_s(pid)
    while time.monotonic() < end:
        time.sleep(0.05)
    cpu1 = cpu_s(pid)
    for t in threads:
        t.join(120)
    ms = [lat * 1000 for at, lat in done_ops if measure_from <= at < end]
    return {
        "offered_per_s": rate, "seconds": seconds,
        "served_per_s": round(len(ms) / seconds, 1),
        "commit_p50_ms": round(percentile(ms, 0.5), 2) if ms else None,
        "commit_p99_ms": round(percentile(ms, 0.99), 2) if ms else None,
        "broker_cpu_s_per_1000": round((cpu1 - cpu0) / max(len(ms), 1) * 1000, 3),
        "failures": failures[:5],
    }


def case_txns(broker: BrokerProcess | KafkaBroker, producers: int, rate: float, txn_s: float,
              warmup_s: float) -> dict[str, Any]:
    topic_led(broker, TXN_TOPIC, TXN_PARTITIONS)

    def session(i: int) -> Session:
        p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"scale-txn-{i}",
                      "linger.ms": 0, "enable.idempotence": True})
        p.init_transactions(60)

        def transaction(k: int) -> float:
            p.begin_transaction()
            p.produce(TXN_TOPIC, VALUE, partition=(i + k) % TXN_PARTITIONS)
            t = time.monotonic()
            p.commit_transaction(60)
            return time.monotonic() - t

        return transaction, lambda: None

    return {"producers": producers, **paced(broker_pid(broker), producers, rate, txn_s, warmup_s, session)}


def case_offset_commits(broker: BrokerProcess | KafkaBroker, groups: int, rate: float, commit_s: float,
                        warmup_s: float) -> dict[str, Any]:
    topic_led(broker, COMMIT_TOPIC, TXN_PARTITIONS)

    def session(i: int) -> Session:
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"scale-group-{i}",
                      "enable.auto.commit": False})

        def commit(k: int) -> float:
            t = time.monotonic()
            c.commit(offsets=[TopicPartition(COMMIT_TOPIC, i % TXN_PARTITIONS, k + 1)], asynchronous=False)
            return time.monotonic() - t

        return commit, c.close

    return {"groups": groups, **paced(broker_pid(broker), groups, rate, commit_s, warmup_s, session)}


def run_side(side: Side, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    data = Path(tempfile.mkdtemp(prefix=f"{side.name}-", dir=work)) / "data"
    broker = side.start(data)
    out: dict[str, Any] = {"load_avg": [round(x, 2) for x in os.getloadavg()]}
    try:
        if "create" in args.cases:
            out["create"] = case_create(broker, args.partitions, args.idle_s, args.metadata_requests)
            if "first-write" in args.cases:
                out["first_write"] = case_first_write(broker, args.partitions[-1])
        if "txns" in args.cases:
            out["txns"] = case_txns(broker, args.producers, args.rate, args.txn_s, args.warmup_s)
        if "offset-commits" in args.cases:
            out["offset_commits"] = case_offset_commits(broker, args.groups, args.commit_rate, args.commit_s,
                                                        args.warmup_s)
        if "connections" in args.cases:
            out["connections"] = case_connections(broker, args.connections, args.idle_s)
    finally:
        broker.stop(timeout=300)
        shutil.rmtree(data.parent, ignore_errors=True)
    return out


# name → (figure from a side's round, higher is better)
def figures(r: dict[str, Any]) -> dict[str, tuple[float, bool]]:
    out: dict[str, tuple[float, bool]] = {}
    for n, c in r.get("create", {}).items():
        out[f"create {n}: until led s"] = (c["until_led_s"], False)
        out[f"create {n}: broker CPU s"] = (c["broker_cpu_s"], False)
        out[f"create {n}: descriptors per partition"] = (c["fds_per_partition"], False)
        if c["bystander_during"].get("n"):
            out[f"create {n}: bystander p99 during, ms"] = (c["bystander_during"]["p99_ms"], False)
        if c["bystander_idle"].get("n"):
            out[f"create {n}: bystander p99 idle, ms"] = (c["bystander_idle"]["p99_ms"], False)
        if "metadata" in c:
            m = c["metadata"]
            out[f"full Metadata, {m['partitions']} partitions: p50 ms"] = (m["p50_ms"], False)
            out[f"full Metadata, {m['partitions']} partitions: broker CPU ms"] = (m["broker_cpu_ms_per_request"], False)
    if "first_write" in r:
        fw = r["first_write"]
        out[f"first write to {fw['partitions']}: s"] = (fw["seconds"], False)
        out[f"first write to {fw['partitions']}: broker CPU s"] = (fw["broker_cpu_s"], False)
        if "epoch_checkpoints_written" in fw:
            out[f"first write to {fw['partitions']}: leader-epoch checkpoints written"] = (
                fw["epoch_checkpoints_written"], False)
        if "fds_per_partition" in fw:
            out[f"first write to {fw['partitions']}: descriptors per partition"] = (fw["fds_per_partition"], False)
    if "txns" in r and r["txns"]["commit_p50_ms"] is not None:
        t = r["txns"]
        out["txns: served per s"] = (t["served_per_s"], True)
        out["txns: commit p50 ms"] = (t["commit_p50_ms"], False)
        out["txns: commit p99 ms"] = (t["commit_p99_ms"], False)
        out["txns: broker CPU s per 1000"] = (t["broker_cpu_s_per_1000"], False)
    if "offset_commits" in r and r["offset_commits"]["commit_p50_ms"] is not None:
        o = r["offset_commits"]
        out[f"OffsetCommit, {o['groups']} groups: served per s"] = (o["served_per_s"], True)
        out[f"OffsetCommit, {o['groups']} groups: p50 ms"] = (o["commit_p50_ms"], False)
        out[f"OffsetCommit, {o['groups']} groups: p99 ms"] = (o["commit_p99_ms"], False)
        out[f"OffsetCommit, {o['groups']} groups: broker CPU s per 1000"] = (o["broker_cpu_s_per_1000"], False)
    if "connections" in r:
        c = r["connections"]
        out[f"{c['connections']} idle connections: broker RSS MB"] = (c["rss_held_mb"], False)
        out[f"{c['connections']} idle connections: KiB per connection"] = (c["kib_per_connection"], False)
        for when in ("before", "held"):
            if c[f"bystander_{when}"].get("n"):
                out[f"{c['connections']} idle connections: producer p99 {when}, ms"] = (
                    c[f"bystander_{when}"]["p99_ms"], False)
    return out


def best(rounds: list[dict[str, tuple[float, bool]]]) -> dict[str, float]:
    out: dict[str, tuple[float, bool]] = {}
    for f in rounds:
        for name, (value, higher) in f.items():
            if name not in out or (value > out[name][0]) == higher:
                out[name] = (value, higher)
    return {k: v for k, (v, _) in out.items()}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", default="create,first-write,txns")
    p.add_argument("--partitions", default="1000,5000", help="partition counts of the create case")
    p.add_argument("--metadata-requests", type=int, default=20,
                   help="full Metadata requests timed after each creation")
    p.add_argument("--idle-s", type=float, default=2.0, help="the bystander's baseline before each creation")
    p.add_argument("--producers", type=int, default=100)
    p.add_argument("--rate", type=float, default=1000.0, help="transactions per second offered, all producers")
    p.add_argument("--txn-s", type=float, default=15.0)
    p.add_argument("--groups", type=int, default=200, help="consumer groups of the offset-commits case")
    p.add_argument("--commit-rate", type=float, default=2000.0, help="OffsetCommits per second offered, all groups")
    p.add_argument("--commit-s", type=float, default=15.0)
    p.add_argument("--connections", type=int, default=20000, help="idle connections of the connections case")
    p.add_argument("--warmup-s", type=float, default=3.0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--against", choices=["kafka"])
    p.add_argument("--a-src", type=Path, help="also an earlier eoslog build (its src/), named 'before'")
    p.add_argument("--config", metavar="KEY=VALUE", action="append", default=[],
                   help="a broker config of this checkout's eoslog (repeatable)")
    p.add_argument("--work-dir", type=Path)
    p.add_argument("--no-save", action="store_true")
    args = p.parse_args()
    args.cases = set(args.cases.split(","))
    args.partitions = [int(x) for x in args.partitions.split(",")]
    return args


def main() -> int:
    args = parse_args()
    if "connections" in args.cases:
        raise_descriptor_limit(2 * args.connections + 4096)  # the client's sockets and the broker's
    config = dict(kv.split("=", 1) for kv in args.config)
    sides = [Side("eoslog", REPO_ROOT / "src", config)]
    if args.a_src is not None:
        sides.append(Side("before", args.a_src.resolve(), {}))
    if args.against == "kafka":
        sides.append(Side("kafka", None, {}))
    work = Path(tempfile.mkdtemp(prefix="scale-", dir=args.work_dir))
    started = datetime.datetime.now().astimezone()
    facts = machine_facts(work)
    runs: dict[str, list[dict[str, Any]]] = {s.name: [] for s in sides}
    try:
        for rnd in range(args.rounds):
            order = sides[rnd % len(sides):] + sides[:rnd % len(sides)]
            for side in order:
                console.print(f"round {rnd + 1}: {side.name} (load {os.getloadavg()[0]:.1f})")
                runs[side.name].append(run_side(side, args, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    bests = {name: best([figures(r) for r in rs]) for name, rs in runs.items()}
    higher = {k: h for rs in runs.values() for r in rs for k, (_, h) in figures(r).items()}
    ratios = {other: {k: round(bests["eoslog"][k] / v, 3) for k, v in bests[other].items()
                      if k in bests["eoslog"] and v}
              for other in bests if other != "eoslog"}
    results = {
        "benchmark": "scale", "timestamp": started.isoformat(timespec="seconds"),
        "load_avg_at_start": facts["load_avg_at_start"], "load_avg_at_end": [round(x, 2) for x in os.getloadavg()],
        "machine": facts, "args": {k: (sorted(v) if isinstance(v, set) else str(v) if isinstance(v, Path) else v)
                                   for k, v in vars(args).items()},
        "sides": {s.name: {"src": str(s.src) if s.src else None,
                           "commit": git_commit(s.src) if s.src else None,
                           "kafka": kafka_version() if s.src is None else None,
                           "config": s.overrides} for s in sides},
        "runs": runs, "best": bests, "higher_is_better": higher, "ratios_eoslog_over": ratios,
    }
    render(results)
    if not args.no_save:
        save(results)
    return 0


def render(results: dict[str, Any]) -> None:
    names = list(results["best"])
    table = Table(title=f"scale (best of {results['args']['rounds']} rounds; load {results['load_avg_at_start']} → "
                        f"{results['load_avg_at_end']})")
    table.add_column("figure")
    for n in names:
        table.add_column(n, justify="right")
    for other in results["ratios_eoslog_over"]:
        table.add_column(f"eoslog/{other}", justify="right")
    for fig in results["best"]["eoslog"]:
        row = [fig + (" (higher better)" if results["higher_is_better"][fig] else "")]
        row += [f"{results['best'][n].get(fig, float('nan')):,.4g}" for n in names]
        row += [f"{results['ratios_eoslog_over'][o].get(fig, float('nan')):.3f}" for o in results["ratios_eoslog_over"]]
        table.add_row(*row)
    console.print(table)


def save(results: dict[str, Any]) -> None:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = results["timestamp"].replace(":", "").replace("-", "")[:15]
    text = json.dumps(results, indent=1) + "\n"
    for name in (f"scale-{stamp}.json", "scale-latest.json"):
        (RESULTS_DIR / name).write_text(text)
        console.print(f"wrote {RESULTS_DIR / name}")
    plot(results, RESULTS_DIR / "scale-latest.png")


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figs = list(results["best"]["eoslog"])
    sides = list(results["best"])
    fig, ax = plt.subplots(figsize=(11, 0.5 * len(figs) + 2))
    height = 0.8 / len(sides)
    for i, side in enumerate(sides):
        base = results["best"]["eoslog"]
        values = [results["best"][side].get(f, 0) / base[f] if base[f] else 0 for f in figs]
        ax.barh([y + i * height for y in range(len(figs))], values, height=height, label=side)
    ax.set_yticks([y + 0.4 - height / 2 for y in range(len(figs))],
                  [f + (" ↑" if results["higher_is_better"][f] else " ↓") for f in figs])
    ax.invert_yaxis()
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xlabel("relative to eoslog (↑ higher is better, ↓ lower is better)")
    ax.set_title(f"scale: {', '.join(sides)}; load {results['load_avg_at_start'][0]} at start")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())

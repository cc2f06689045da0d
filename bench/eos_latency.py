"""Exactly-once latency (issue 17): what transactions add to a consume-transform-produce loop,
for eoslog's client and for librdkafka (confluent-kafka), against one eoslog broker, in one run.

    python bench/eos_latency.py                    # every case, 10 s each (~8 min)
    python bench/eos_latency.py --quick            # 1k and 10k records/s, 6 s each
    python bench/eos_latency.py --impls eoslog --rates 10000 --modes alo,txn-100ms

Each case runs three processes on fresh topics (3 partitions each):

- **generator** (librdkafka, idempotent, linger.ms 1): records of 100 B at a fixed rate into
  ``in``, each value starting with its send time (``time.time_ns()``);
- **loop**, the system measured, of eoslog's client (blocking ``Consumer`` + ``Producer``) or
  of librdkafka: reads ``in`` (read_uncommitted: the input has no transactions, so it reads
  the same records, and the broker's read_committed fetch counters are the sink's alone;
  assigned partitions) and writes each record to
  the same partition of ``out``, stamping it with the time the loop received it and the
  number of its transaction. Modes: ``alo`` — at-least-once with idempotence, no transaction,
  offsets committed every 100 ms; ``txn-10ms`` / ``txn-100ms`` — a transaction committed
  (with its offsets: send_offsets_to_transaction) every 10 / 100 ms; ``txn-1000rec`` — every
  1000 records (or 100 ms, whichever comes first, so that a slow rate still commits). The
  loop logs when each commit was started and when it returned;
- **sink** (librdkafka, read_committed, fetch.wait.max.ms 500: woken by the broker, not by
  its timer): stamps every ``out`` record on receipt.

End-to-end latency = sink receipt - generator send time, over the records sent after the
first ``--warmup`` seconds. Per record the stamps also split it: **in** (generator → loop),
**wait** (loop receipt → its transaction's commit started), **commit** (send_offsets +
commit_transaction: AddOffsetsToTxn, TxnOffsetCommit, the flush, EndTxn), **visible**
(commit returned → sink receipt: the markers written, the last stable offset advanced, the
sink's long-poll woken). Without a transaction wait and commit are 0 and visible is loop
receipt → sink receipt. Ratios: each transactional mode's p50 and p99 ÷ the same client's
``alo`` at the same rate (Redpanda reports its transactional median at 4.6x its naive loop,
Kafka 6.3x; eoslog's design goal is ≤ 3x). Cases are interleaved over ``--rounds``; the
round with the lowest p50 counts (load only slows a case down); all rounds are in the JSON.

**Broker side**: the broker serves ``metrics.listener`` and is scraped before each case's
generator starts and after its sink is done (``broker_timings.py``): per transaction, the
request latency of AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn (and
Produce), the coordinator's second phase (PREPARE_* append, → every marker written,
COMPLETE_* append), and how the sink's parked read_committed fetches ended: woken by the
append that made records readable (the marker: the LSO advance) or expired at
``fetch.wait.max.ms``, with the notification-to-answer time.

Output: a table, ``bench/results/eos-latency-<timestamp>.json``, ``eos-latency-latest.json``
and ``eos-latency-latest.png``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import struct
import subprocess
import sys
import time
from array import array
from pathlib import Path
from typing import Any

from broker_timings import case_timings, scrape
from common import RESULTS_DIR, BrokerProcess, prepare_run
from support.harness import free_port

PARTITIONS = 3
RECORD_BYTES = 100
IMPLS = ["eoslog", "librdkafka"]
MODES = ["alo", "txn-10ms", "txn-100ms", "txn-1000rec"]
RATES = [1000, 10000, 50000]
STAMPS = struct.Struct(">qqi")  # generator send ns, loop receipt ns, transaction number (-1: none)
OFFSET_COMMIT_S = 0.1  # alo: how often the loop commits its consumer offsets


def _now() -> int:
    return time.time_ns()


# -- children ------------------------------------------------------------------------------------


def generator(spec: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": spec["bootstrap"], "linger.ms": 1, "enable.idempotence": True})
    pad = b"g" * (RECORD_BYTES - 8)
    rate, seconds, topic = spec["rate"], spec["seconds"], spec["topic"]
    start = time.monotonic()
    sent = 0
    while (elapsed := time.monotonic() - start) < seconds:
        due = min(int(elapsed * rate) + 1, int(seconds * rate))
        while sent < due:
            try:
                p.produce(topic, struct.pack(">q", _now()) + pad, partition=sent % PARTITIONS)
                sent += 1
            except BufferError:
                p.poll(0.001)
        p.poll(0)
        time.sleep(0.0005)
    p.flush(60)
    return {"sent": sent}


def _transform(value: bytes, txn: int) -> bytes:
    return STAMPS.pack(int.from_bytes(value[:8], "big"), _now(), txn) + value[STAMPS.size:]


def loop(spec: dict[str, Any]) -> dict[str, Any]:
    """Consume ``in``, produce ``out``; returns the commit log [(txn, started ns, returned ns)]."""
    mode, impl = spec["mode"], spec["impl"]
    txn_ms = {"txn-10ms": 10, "txn-100ms": 100, "txn-1000rec": 100}.get(mode)
    max_records = 1000 if mode == "txn-1000rec" else None
    client = EoslogLoop(spec) if impl == "eoslog" else RdLoop(spec)
    commits: list[tuple[int, int, int]] = []
    stop = Path(spec["stop"])
    # Until every generated record (the parent writes their number into the stop file once the
    # generator is done) is processed and committed, or drain seconds after that at most.
    deadline, expected, processed = float("inf"), -1, 0
    txn = 0 if txn_ms else -1
    if txn_ms:
        client.begin()
    interval = (txn_ms / 1000) if txn_ms else OFFSET_COMMIT_S
    next_commit = time.monotonic() + interval
    in_txn = 0
    while time.monotonic() < deadline and not (processed == expected and in_txn == 0):
        for partition, offset, value in client.poll(max(0.0, min(next_commit - time.monotonic(), 0.1))):
            client.send(partition, _transform(value, txn))
            client.offsets[partition] = offset + 1
            in_txn += 1
            processed += 1
        now = time.monotonic()
        if now < next_commit and not (max_records and in_txn >= max_records):
            continue
        if txn_ms:
            if in_txn:
                started = _now()
                client.commit_transaction()
                commits.append((txn, started, _now()))
                txn += 1
                client.begin()
        else:
            client.commit_offsets()
        in_txn = 0
        next_commit = time.monotonic() + interval
        if deadline == float("inf") and stop.exists() and stop.read_text():
            deadline, expected = time.monotonic() + spec["drain"], int(stop.read_text())
    client.close()
    return {"commits": commits}


class EoslogLoop:
    def __init__(self, spec: dict[str, Any]) -> None:
        from eoslog.client.consumer import Consumer
        from eoslog.client.producer import Producer

        b, txn = spec["bootstrap"], spec["mode"].startswith("txn")
        self.group = f"loop-{spec['case']}"
        self.out = spec["out"]
        self.consumer = Consumer({"bootstrap.servers": b, "group.id": self.group, "enable.auto.commit": False,
                                  "isolation.level": "read_uncommitted"})
        self.consumer.assign([(spec["in"], p) for p in range(PARTITIONS)])
        for p in range(PARTITIONS):
            self.consumer.seek((spec["in"], p), 0)
        settings: dict[str, Any] = {"bootstrap.servers": b, "linger.ms": 1, "enable.idempotence": True}
        if txn:
            settings["transactional.id"] = self.group
        self.producer = Producer(settings)
        if txn:
            self.producer.init_transactions()
        self.topic_in = spec["in"]
        self.offsets: dict[int, int] = {}

    def poll(self, timeout: float) -> list[tuple[int, int, bytes]]:
        return [(r.partition, r.offset, r.value) for r in self.consumer.poll(timeout)]

    def send(self, partition: int, value: bytes) -> None:
        self.producer.send(self.out, value, partition=partition)

    def begin(self) -> None:
        self.producer.begin_transaction()

    def commit_transaction(self) -> None:
        self.producer.send_offsets_to_transaction(
            {(self.topic_in, p): o for p, o in self.offsets.items()}, self.group)
        self.producer.commit_transaction()

    def commit_offsets(self) -> None:
        if self.offsets:
            self.consumer.commit({(self.topic_in, p): o for p, o in self.offsets.items()}, asynchronous=True)

    def close(self) -> None:
        self.producer.close()
        self.consumer.close()


class RdLoop:
    def __init__(self, spec: dict[str, Any]) -> None:
        from confluent_kafka import Consumer, Producer, TopicPartition

        self.TP = TopicPartition
        b, txn = spec["bootstrap"], spec["mode"].startswith("txn")
        self.group = f"loop-{spec['case']}"
        self.out = spec["out"]
        self.topic_in = spec["in"]
        self.consumer = Consumer({"bootstrap.servers": b, "group.id": self.group, "enable.auto.commit": False,
                                  "isolation.level": "read_uncommitted"})
        self.consumer.assign([TopicPartition(self.topic_in, p, 0) for p in range(PARTITIONS)])
        settings: dict[str, Any] = {"bootstrap.servers": b, "linger.ms": 1, "enable.idempotence": True}
        if txn:
            settings["transactional.id"] = self.group
        self.producer = Producer(settings)
        if txn:
            self.producer.init_transactions(60)
        self.offsets: dict[int, int] = {}

    def poll(self, timeout: float) -> list[tuple[int, int, bytes]]:
        out = [(m.partition(), m.offset(), m.value()) for m in first_then_rest(self.consumer, timeout)
               if m.error() is None]
        self.producer.poll(0)
        return out

    def send(self, partition: int, value: bytes) -> None:
        while True:
            try:
                self.producer.produce(self.out, value, partition=partition)
                return
            except BufferError:
                self.producer.poll(0.001)

    def begin(self) -> None:
        self.producer.begin_transaction()

    def _positions(self) -> list[Any]:
        return [self.TP(self.topic_in, p, o) for p, o in self.offsets.items()]

    def commit_transaction(self) -> None:
        self.producer.send_offsets_to_transaction(self._positions(), self.consumer.consumer_group_metadata(), 30)
        self.producer.commit_transaction(30)

    def commit_offsets(self) -> None:
        if self.offsets:
            self.consumer.commit(offsets=self._positions(), asynchronous=True)

    def close(self) -> None:
        self.producer.flush(30)
        self.consumer.close()


def first_then_rest(consumer: Any, timeout: float, most: int = 500) -> list[Any]:
    """What librdkafka has, returned as soon as there is one record: ``consume(n, timeout)``
    would wait for n records or the whole timeout."""
    first = consumer.poll(timeout)
    return [] if first is None else [first, *consumer.consume(most - 1, 0)]


def sink(spec: dict[str, Any]) -> dict[str, Any]:
    """Read ``out`` read_committed until the parent's stop file (holding the number of records
    generated) says every record is in, or ``seconds``; the stamps go to a file."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": spec["bootstrap"], "group.id": "sink", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "fetch.wait.max.ms": 500})
    c.assign([TopicPartition(spec["out"], p, 0) for p in range(PARTITIONS)])
    sent, loop_rx, txns, sink_rx = array("q"), array("q"), array("q"), array("q")
    deadline = time.monotonic() + spec["seconds"]
    Path(spec["ready"]).touch()
    while time.monotonic() < deadline:
        msgs = first_then_rest(c, 0.1, 1000)
        now = _now()
        for m in msgs:
            if m.error() is None:
                g, lr, t = STAMPS.unpack_from(m.value())
                sent.append(g)
                loop_rx.append(lr)
                txns.append(t)
                sink_rx.append(now)
        stop = Path(spec["stop"])
        if stop.exists() and stop.read_text() and len(sent) >= int(stop.read_text()):
            break
    c.close()
    with open(spec["stamps"], "wb") as f:
        for a in (sent, loop_rx, txns, sink_rx):
            f.write(struct.pack(">q", len(a)))
            a.tofile(f)
    return {"received": len(sent)}


CHILDREN = {"generator": generator, "loop": loop, "sink": sink}


# -- the parent ------------------------------------------------------------------------------------


def spawn(role: str, spec: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--child", json.dumps({**spec,
                            "role": role})], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def result_of(proc: subprocess.Popen[str], what: str, timeout: float) -> dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{err[-3000:]}")
    answer: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return answer


def read_stamps(path: Path) -> list[array[int]]:
    arrays = []
    with open(path, "rb") as f:
        for _ in range(4):
            (n,) = struct.unpack(">q", f.read(8))
            a = array("q")
            a.fromfile(f, n)
            arrays.append(a)
    return arrays


def run_case(bootstrap: str, metrics_url: str, admin: Any, work: Path, impl: str, mode: str, rate: int, r: int,
             args: argparse.Namespace) -> dict[str, Any]:
    from eoslog.client import NewTopic

    case = f"{impl}-{mode}-{rate}-r{r}"
    t_in, t_out = f"in-{case}", f"out-{case}"
    admin.create_topics([NewTopic(t_in, PARTITIONS), NewTopic(t_out, PARTITIONS)])
    base = {"bootstrap": bootstrap, "case": case, "impl": impl, "mode": mode, "rate": rate, "in": t_in, "out": t_out}
    stamps, ready = work / f"{case}.stamps", work / f"{case}.ready"
    stop_loop, stop_sink = work / f"{case}.stop-loop", work / f"{case}.stop-sink"
    sink_p = spawn("sink", {**base, "seconds": args.seconds + args.drain + 90, "stamps": str(stamps),
                            "ready": str(ready), "stop": str(stop_sink)})
    loop_p = spawn("loop", {**base, "stop": str(stop_loop), "drain": args.drain})
    while not ready.exists():
        if sink_p.poll() is not None:
            raise RuntimeError(f"sink of {case} exited: {sink_p.communicate()[1][-2000:]}")
        time.sleep(0.05)
    time.sleep(2.0)  # the loop's connections and producer id, before records flow
    before = scrape(metrics_url)
    gen = result_of(spawn("generator", {**base, "seconds": args.seconds, "topic": t_in}), "generator",
                    args.seconds + 120)
    stop_loop.write_text(str(gen["sent"]))
    commits = result_of(loop_p, "loop", args.drain + 120)["commits"]
    stop_sink.write_text(str(gen["sent"]))
    result_of(sink_p, "sink", args.seconds + args.drain + 120)
    broker = case_timings(before, scrape(metrics_url), len(commits))
    sent, loop_rx, txns, sink_rx = read_stamps(stamps)
    admin.delete_topics([t_in, t_out])
    return {**summarise(case, gen["sent"], sent, loop_rx, txns, sink_rx, commits, args.warmup, rate),
            "broker": broker}


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def summarise(case: str, generated: int, sent: array[int], loop_rx: array[int], txns: array[int],
              sink_rx: array[int], commits: list[list[int]], warmup_s: float, rate: int) -> dict[str, Any]:
    """Percentiles (ms) of end-to-end latency and of its parts, over records sent after warm-up."""
    by_txn = {t: (s, e) for t, s, e in commits}
    first = min(sent) if sent else 0
    total, part_in, wait, commit, visible = [], [], [], [], []
    for g, lr, t, sr in zip(sent, loop_rx, txns, sink_rx, strict=True):
        if g - first < warmup_s * 1e9:
            continue
        total.append((sr - g) / 1e6)
        part_in.append((lr - g) / 1e6)
        if t >= 0 and t in by_txn:
            s, e = by_txn[t]
            wait.append((s - lr) / 1e6)
            commit.append((e - s) / 1e6)
            visible.append((sr - e) / 1e6)
        else:
            wait.append(0.0)
            commit.append(0.0)
            visible.append((sr - lr) / 1e6)

    def q(values: list[float]) -> dict[str, float]:
        return {"p50": pct(values, 0.5), "p99": pct(values, 0.99), "p999": pct(values, 0.999)}

    # A loop slower than the input rate builds a backlog: its latency is queueing, not the loop's.
    saturated = bool(part_in) and pct(part_in, 0.5) > 1000
    return {"case": case, "saturated": saturated, "generated": generated, "received": len(sent),
            "duplicates": len(sent) - len(set(sent)), "measured": len(total), "commits": len(commits),
            "rate": rate, "latency_ms": q(total),
            "parts_ms": {"in": q(part_in), "wait": q(wait), "commit": q(commit), "visible": q(visible)}}


def run(args: argparse.Namespace) -> dict[str, Any]:
    from eoslog.client import Admin

    started = datetime.datetime.now(datetime.UTC)
    work, data_dir, facts = prepare_run(args.work_dir, "eoslog-eos-latency-", args.broker_src)
    metrics_port = free_port()
    metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    broker = BrokerProcess(data_dir, overrides={"num.partitions": str(PARTITIONS),
                                                "metrics.listener": f"http://127.0.0.1:{metrics_port}"}).start()
    cases = [(impl, mode, rate) for rate in args.rates for mode in args.modes for impl in args.impls]
    runs: dict[str, list[dict[str, Any]]] = {}
    try:
        with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
            for r in range(args.rounds):
                shift = r % len(cases)
                for impl, mode, rate in cases[shift:] + cases[:shift]:
                    key = f"{impl}/{mode}/{rate}"
                    try:
                        res = run_case(broker.bootstrap, metrics_url, admin, work, impl, mode, rate, r, args)
                    except (RuntimeError, subprocess.TimeoutExpired) as e:
                        print(f"round {r + 1} {key:<28} FAILED: {str(e).strip().splitlines()[-1]}", flush=True)
                        runs.setdefault(key, []).append({"round": r + 1, "error": str(e)[-3000:]})
                        continue
                    res["round"] = r + 1
                    # Exactly once: every generated record reaches the sink once (alo may double
                    # on a failure; none happens here, so a duplicate is a bug either way).
                    res["verified"] = res["received"] == res["generated"] and res["duplicates"] == 0
                    runs.setdefault(key, []).append(res)
                    lat, parts = res["latency_ms"], res["parts_ms"]
                    print(f"round {r + 1} {key:<28} p50 {lat['p50']:7.1f} p99 {lat['p99']:7.1f} p99.9 "
                          f"{lat['p999']:7.1f} ms | in {parts['in']['p50']:6.1f} wait {parts['wait']['p50']:6.1f} "
                          f"commit {parts['commit']['p50']:6.1f} visible {parts['visible']['p50']:6.1f} "
                          f"| {res['received']}/{res['generated']}" + ("" if res["verified"] else "  NOT VERIFIED")
                          + ("  SATURATED (backlog)" if res["saturated"] else ""),
                          flush=True)
    finally:
        broker.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    facts["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    best = {k: min((x for x in v if x.get("verified")), key=lambda x: x["latency_ms"]["p50"], default=None)
            for k, v in runs.items()}
    return {"benchmark": "eos-latency", "timestamp": started.strftime("%Y-%m-%dT%H:%M:%SZ"), "machine": facts,
            "workload": {"partitions": PARTITIONS, "record_bytes": RECORD_BYTES, "seconds": args.seconds,
                         "warmup_s": args.warmup, "rounds": args.rounds, "impls": args.impls, "modes": args.modes,
                         "rates": args.rates},
            "best": best, "runs": runs, "ratios": ratios(best, args)}


def ratios(best: dict[str, Any], args: argparse.Namespace) -> list[dict[str, Any]]:
    out = []
    for impl in args.impls:
        for rate in args.rates:
            base = best.get(f"{impl}/alo/{rate}")
            for mode in [m for m in args.modes if m != "alo"]:
                b = best.get(f"{impl}/{mode}/{rate}")
                if base and b:
                    out.append({"impl": impl, "rate": rate, "mode": mode,
                                "p50": b["latency_ms"]["p50"] / base["latency_ms"]["p50"],
                                "p99": b["latency_ms"]["p99"] / base["latency_ms"]["p99"],
                                "saturated": bool(b.get("saturated") or base.get("saturated"))})
    return out


def render(results: dict[str, Any]) -> None:
    print("\nend-to-end latency ms (best round): p50 / p99 / p99.9; parts at p50: in, wait, commit, visible")
    for key, b in results["best"].items():
        if b is None:
            print(f"{key:<28} FAILED")
            continue
        lat, parts = b["latency_ms"], b["parts_ms"]
        print(f"{key:<28} {lat['p50']:7.1f} {lat['p99']:7.1f} {lat['p999']:7.1f}   "
              + "  ".join(f"{k} {parts[k]['p50']:6.1f}" for k in ("in", "wait", "commit", "visible"))
              + ("  saturated: the loop fell behind the input rate" if b.get("saturated") else ""))
    print("\nbroker side, per case (best round): per transaction, requests x mean ms of AddPartitionsToTxn, "
          "AddOffsetsToTxn, TxnOffsetCommit, EndTxn; coordinator mean ms prepare / markers / complete; "
          "sink's read_committed fetch waits woken / expired (not_readable), wake->answer p50 ms")
    for key, b in results["best"].items():
        if b is not None and "broker" in b:
            print(f"{key:<28} {broker_line(b['broker'])}")
    print("\ntransactional / at-least-once (same client, same rate): p50, p99 (goal for eoslog: <= 3)")
    for r in results["ratios"]:
        print(f"{r['impl']:<11} {r['rate']:>6}/s {r['mode']:<12} p50 {r['p50']:5.2f}  p99 {r['p99']:5.2f}"
              + ("  (saturated: backlog, not the loop)" if r.get("saturated") else ""))


def broker_line(broker: dict[str, Any]) -> str:
    req, per_txn, phases = broker["requests"], broker["per_txn"], broker["end_phases"]
    short = {"AddPartitionsToTxn": "AddPartitions", "AddOffsetsToTxn": "AddOffsets",
             "TxnOffsetCommit": "TxnOffsetCommit", "EndTxn": "EndTxn"}
    apis = " ".join(f"{name} {per_txn.get(api, 0):.1f}x{req[api]['mean_ms']:.2f}"
                    for api, name in short.items() if req[api]["count"])
    coordinator = " / ".join(f"{phases[p]['mean_ms']:.2f}" for p in ("prepare", "markers", "complete")) \
        if phases["prepare"]["count"] else "-"
    waits = broker["read_committed_waits"]
    return (f"{apis or 'no transactions'} | coordinator {coordinator} | waits {waits['woken']:.0f} / "
            f"{waits['expired']:.0f} ({waits['not_readable']:.0f}) wake {broker['wake']['p50_ms']:.2f}")


def save(results: dict[str, Any]) -> list[Path]:
    from plot import plot_eos_latency

    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = results["timestamp"].replace("-", "").replace(":", "")
    paths = [RESULTS_DIR / f"eos-latency-{stamp}.json", RESULTS_DIR / "eos-latency-latest.json"]
    for p in paths:
        p.write_text(json.dumps(results, indent=1))
    png = RESULTS_DIR / "eos-latency-latest.png"
    plot_eos_latency(results, png)
    return [*paths, png]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--impls", default=",".join(IMPLS), type=lambda s: s.split(","))
    p.add_argument("--modes", default=",".join(MODES), type=lambda s: s.split(","))
    p.add_argument("--rates", default=",".join(map(str, RATES)), type=lambda s: [int(x) for x in s.split(",")])
    p.add_argument("--seconds", type=float, default=10.0, help="generator run time per case")
    p.add_argument("--warmup", type=float, default=2.0, help="records sent in the first seconds are not counted")
    p.add_argument("--drain", type=float, default=60.0,
                   help="the loop stops once it processed every record, at most this long after the generator")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="1k and 10k records/s, 6 s per case")
    p.add_argument("--work-dir", type=Path, default=None)
    p.add_argument("--broker-src", type=Path, default=None)
    p.add_argument("--keep", action="store_true")
    p.add_argument("--no-save", action="store_true")
    p.add_argument("--render", type=Path, help="print and plot a saved results JSON again")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        spec = json.loads(args.child)
        print(json.dumps(CHILDREN[spec["role"]](spec)), flush=True)
        return 0
    if args.render:
        results = json.loads(args.render.read_text())
        render(results)
        from plot import plot_eos_latency

        plot_eos_latency(results, RESULTS_DIR / "eos-latency-latest.png")
        return 0
    if args.quick:
        args.rates, args.seconds = [r for r in args.rates if r <= 10000], 6.0
    results = run(args)
    render(results)
    if not args.no_save:
        for path in save(results):
            print(f"saved {path}")
    return 0 if all(x.get("verified") for v in results["runs"].values() for x in v) else 1


if __name__ == "__main__":
    sys.exit(main())

"""The exactly-once Spark sink against the at-least-once one, and a Spark standalone
cluster against local mode: records/s through a pass-through query (eoslog source →
eoslog sink), measured in one run (issue 7's benchmark, goal: exactly-once ≥ 0.9 of
at-least-once; issue 18's: standalone with 2 workers vs local[2] — reported, never asserted).

    python bench/spark_sink.py [--records 400000] [--per-batch 50000] [--rounds 2]   # from the repo root, in .venv
    python bench/spark_sink.py --writers arrow,rows    # also the Row-based writer, to measure Arrow's gain
    python bench/spark_sink.py --masters local[2],standalone --rounds 1    # issue 18: cluster vs local

One broker subprocess (transaction.two.phase.commit.enable=true), one input topic of
``--records`` records of ``--value-bytes`` bytes over ``--partitions`` partitions,
written beforehand with librdkafka. ``--masters``: ``local[N]`` (default local[2]: the
machine's two cores as two task threads of one JVM), ``standalone`` (a Spark standalone
cluster started here from PySpark's installation: a master and ``--workers`` workers of
one core each, one executor JVM of 512 MB per worker — ``eoslog.spark.standalone``) or an
existing cluster's ``spark://HOST:PORT``. One SparkSession at a time: each switch of master
stops the session and starts the other's. Each case reads the whole input with
Trigger.AvailableNow, ``--per-batch`` offsets per micro-batch, and writes key and value to a
topic of its own:

- ``at-least-once``: ``eoslog.sink.mode=at-least-once`` — each task writes with an
  idempotent producer and flushes; commit does nothing.
- ``exactly-once``: the default — each task writes one KIP-939 transaction and prepares
  it (after looking up the query's latest decision); the driver records the decision
  (a transaction on ``__eoslog_spark_commits``) and completes every transaction.

A warm-up query per case (a small topic) runs first in every new session, outside the
clock: the executors' Python workers start once. Per case: records/s = records / the sum of
the micro-batches' ``triggerExecution`` durations (Spark's own timing of each batch,
planning to commit), and, for reference, records / the wall time from ``start()`` to the
query's end. The cases run ``--rounds`` times; within a round, each master's cases run back
to back (each round starts one case later, and every other round with the other master).
Ratios are taken per round — exactly-once / at-least-once from two queries that ran back to
back, one master / the other from the same round — and the median of the rounds' ratios is
the result; each case's best round and its median batch are shown too.

After each case, outside the clock: no transaction may be left open in the output (last
stable offsets equal the high watermarks) and a read_committed consumer (librdkafka) must
count exactly ``--records`` records with the values sent. A case that fails is FAILED,
left out of the ratio, and the exit status is 1.

``--against kafka`` (issue 12) starts Apache Kafka (the reference jars, one KRaft node) beside
eoslog, writes the same input to both, and adds Spark's own Kafka sink (format ``"kafka"``,
spark-sql-kafka-0-10 from ``.reference/lib/spark-kafka``: an idempotent producer per task, at
least once) as writer ``kafka``. Per round, in turn on each broker: on eoslog the eoslog sink
exactly-once and at-least-once and Spark's Kafka sink; on Kafka (labelled ``<master>@kafka``)
the eoslog sink at-least-once and Spark's Kafka sink (the exactly-once sink needs KIP-939,
which Kafka 4.4 lacks). Ratios: each sink on eoslog / the same sink on Kafka, and the eoslog
exactly-once sink on eoslog / Spark's Kafka sink on Kafka (what a user switching gets).

``--writers rows`` adds cases with a Row-based writer (``DataSourceStreamWriter``: Spark
converts each Arrow batch to Rows first) doing the same sends, to measure what the Arrow
writers the sink uses save.

Results: a table, ``bench/results/spark-sink-<timestamp>.json`` and ``.png`` (bars per case
and master, the ratios in the title), and ``spark-sink-latest.json``/``.png``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import Row
from pyspark.sql.datasource import DataSource, DataSourceStreamWriter, WriterCommitMessage
from pyspark.sql.types import StructType

import against
from common import RESULTS_DIR, BrokerProcess, prepare_run
from eoslog.client.producer import Producer as EoslogProducer
from eoslog.client.types import TopicPartition as EoslogTopicPartition
from eoslog.spark.log_reader import LogReader
from eoslog.spark.session import spark_session
from eoslog.spark.sink import EoslogStreamWriter, stream_task_identity, write_task
from eoslog.spark.standalone import StandaloneCluster
from support.kafka_harness import spark_kafka_jars

CASES = ("at-least-once", "exactly-once")


class _RowsInput:
    """Spark Rows (key, value) sent as records: ``eoslog.spark.commit.Rows``."""

    def __init__(self, topic: str, rows: Iterator[Row]) -> None:
        self.topic = topic
        self.rows = rows
        self.first: Row | None = None

    def is_empty(self) -> bool:
        self.first = next(self.rows, None)
        return self.first is None

    def send_all(self, producer: EoslogProducer) -> int:
        n = 0
        if self.first is not None:
            producer.send(self.topic, self.first["value"], self.first["key"])
            n = 1
        for row in self.rows:
            producer.send(self.topic, row["value"], row["key"])
            n += 1
        return n

    def drain(self) -> None:
        for _ in self.rows:
            pass


class RowStreamWriter(DataSourceStreamWriter):
    """The sink's logic behind Spark's Row interface (for the Arrow-vs-Rows comparison)."""

    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        self.inner = EoslogStreamWriter(options, schema, overwrite)

    def write(self, iterator: Iterator[Row]) -> WriterCommitMessage:
        return write_task(self.inner.options, stream_task_identity(), _RowsInput(self.inner.options.topic or "",
                                                                                 iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self.inner.commit(messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self.inner.abort(messages, batchId)


class RowsDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "eoslog_rows"

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return RowStreamWriter(dict(self.options), schema, overwrite)


def produce_input(bootstrap: str, topic: str, records: int, value_bytes: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 1_000_000})
    pad = b"x" * max(0, value_bytes - 10)
    for i in range(records):
        while True:
            try:
                p.produce(topic, value=b"%010d" % i + pad, key=b"%d" % (i % 1000))
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0


def run_case(spark: Any, bootstrap: str, source: str, sink: str, mode: str, writer: str, per_batch: int,
             work: Path) -> dict[str, Any]:
    df = (spark.readStream.format("eoslog").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", str(per_batch)).load())
    checkpoint = work / f"ck-{sink}"
    shutil.rmtree(checkpoint, ignore_errors=True)
    started = time.perf_counter()
    fmt = {"arrow": "eoslog", "rows": "eoslog_rows", "kafka": "kafka"}[writer]
    out = (df.select("key", "value").writeStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
           .option("topic", sink).option("checkpointLocation", str(checkpoint)))
    if writer != "kafka":  # Spark's Kafka sink has one mode: at least once
        out = out.option("eoslog.sink.mode", mode)
    query = out.trigger(availableNow=True).start()
    query.awaitTermination()
    wall = time.perf_counter() - started
    if query.exception() is not None:
        raise RuntimeError(f"query failed: {query.exception()}")
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    rows = sum(p["numInputRows"] for p in batches)
    batch_s = sum(p["durationMs"]["triggerExecution"] for p in batches) / 1000
    add_s = sum(p["durationMs"].get("addBatch", 0) for p in batches) / 1000
    return {"rows": rows, "batches": len(batches), "batch_seconds": round(batch_s, 3),
            "wall_seconds": round(wall, 3), "records_s": round(rows / batch_s, 1) if batch_s else 0.0,
            "wall_records_s": round(rows / wall, 1), "add_batch_seconds": round(add_s, 3),
            "batch_ms": [p["durationMs"]["triggerExecution"] for p in batches]}


def verify(bootstrap: str, topic: str, partitions: int, records: int) -> str | None:
    """None if the output is exactly the input's records, once each; else what is wrong."""
    tps = [EoslogTopicPartition(topic, p) for p in range(partitions)]
    with LogReader(bootstrap, read_committed=True) as committed, LogReader(bootstrap, read_committed=False) as raw:
        stable, high = committed.end_offsets(tps), raw.end_offsets(tps)
    if stable != high:
        return f"transactions left open: LSO {stable} below HW {high}"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"verify-{topic}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    seen: set[bytes] = set()
    duplicates = 0
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        done: set[int] = set()
        deadline = time.monotonic() + 300
        while len(done) < partitions and time.monotonic() < deadline:
            for msg in consumer.consume(10000, 1.0):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        done.add(msg.partition())
                        continue
                    return f"consumer error {err}"
                v = msg.value()[:10]
                duplicates += v in seen
                seen.add(v)
    finally:
        consumer.close()
    if duplicates or len(seen) != records:
        return f"read {len(seen)} distinct records of {records}, {duplicates} duplicates"
    if seen != {b"%010d" % i for i in range(records)}:
        return "values differ from those sent"
    return None


def master_label(master: str) -> str:
    return "standalone" if master == "standalone" or master.startswith("spark://") else master


def topic_label(master: str) -> str:
    return "".join(c for c in master_label(master) if c.isalnum())


class Sessions:
    """One SparkSession at a time (one SparkContext per process): switching masters stops
    the current session and starts the other's, with a warm-up outside the clock (the new
    executors start their Python workers)."""

    def __init__(self, args: argparse.Namespace, work: Path, bootstrap: str, writers: list[str]) -> None:
        self.args, self.work, self.bootstrap, self.writers = args, work, bootstrap, writers
        self.cluster: StandaloneCluster | None = None
        self.spark: Any = None
        self.master: str | None = None

    def get(self, master: str) -> Any:
        if master == self.master:
            return self.spark
        if self.spark is not None:
            self.spark.stop()
        conf: dict[str, str] = {}
        url = master
        if master == "standalone":
            if self.cluster is None:
                print(f"starting a standalone cluster: {self.args.workers} workers x 1 core ...", flush=True)
                self.cluster = StandaloneCluster(self.work / "cluster", workers=self.args.workers, cores=1,
                                                 memory="1g").start()
            url, conf = self.cluster.master_url, self.cluster.driver_conf()
        if "kafka" in self.writers:
            conf = {**conf, "spark.jars": ",".join(map(str, spark_kafka_jars()))}
        print(f"session on {master} ({url}) ...", flush=True)
        self.spark = spark_session("eoslog-bench-spark-sink", master=url, work_dir=self.work / "spark", conf=conf)
        self.spark.dataSource.register(RowsDataSource)
        self.master = master
        label = topic_label(master)
        for w in self.writers:
            for m in CASES:
                run_case(self.spark, self.bootstrap, "warmup-in", f"warmup-{label}-{w}-{m}", m, w, 1000, self.work)
        return self.spark

    def close(self) -> None:
        if self.spark is not None:
            self.spark.stop()
        if self.cluster is not None:
            self.cluster.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=400_000)
    ap.add_argument("--per-batch", type=int, default=50_000, help="maxOffsetsPerTrigger")
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--writers", default="arrow", help="arrow, rows or arrow,rows")
    ap.add_argument("--masters", "--master", default="local[2]",
                    help="comma list of local[N], spark://HOST:PORT and 'standalone' (a cluster of --workers "
                         "one-core workers started here); default local[2]")
    ap.add_argument("--workers", type=int, default=2, help="workers of the 'standalone' cluster (default 2)")
    ap.add_argument("--work-dir", type=Path)
    ap.add_argument("--against", choices=["kafka"], help="also Apache Kafka and Spark's own Kafka sink")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    writers = [w.strip() for w in args.writers.split(",") if w.strip()] + (["kafka"] if args.against else [])
    if args.against and not any(j.name.startswith("spark-sql-kafka") for j in spark_kafka_jars()):
        raise SystemExit("--against kafka needs Spark's Kafka connector jars: run scripts/setup.sh")
    masters = [m.strip() for m in args.masters.split(",") if m.strip()]

    work, data_dir, facts = prepare_run(args.work_dir, "eoslog-spark-sink-", None)
    broker = BrokerProcess(data_dir, overrides={"transaction.two.phase.commit.enable": "true"}).start()
    kafka = against.kafka_broker(work / "kafka" / "data").start() if args.against else None
    targets = [("", broker.bootstrap)] + ([("@kafka", kafka.bootstrap)] if kafka is not None else [])
    results: dict[str, list[dict[str, Any]]] = {}
    failures: dict[str, str] = {}
    sessions: Sessions | None = None
    try:
        bootstrap = broker.bootstrap
        topics = ["in", "warmup-in"]
        for label in map(topic_label, masters):
            topics += [f"out-{label}-{w}-{m}-{r}" for w in writers for m in CASES for r in range(args.rounds)]
            topics += [f"warmup-{label}-{w}-{m}" for w in writers for m in CASES]
        for _, target in targets:
            admin = AdminClient({"bootstrap.servers": target})
            for f in admin.create_topics([NewTopic(t, args.partitions, 1) for t in topics]).values():
                f.result(60)
            print(f"writing {args.records} input records to {target} ...", flush=True)
            produce_input(target, "in", args.records, args.value_bytes)
            produce_input(target, "warmup-in", 2000, args.value_bytes)

        sessions = Sessions(args, work, bootstrap, writers)
        for r in range(args.rounds):
            # Each round starts with the master the last one ended with (one session switch
            # per round boundary saved), and with the next case of the writers x modes.
            order_m = masters if r % 2 == 0 else masters[::-1]
            for master in order_m:
                spark = sessions.get(master)
                # Spark's Kafka sink has one mode; on Kafka the eoslog sink only at least once.
                order = [(t, w, m) for t in (targets if r % 2 == 0 else targets[::-1]) for w in writers
                         for m in CASES if not (w == "kafka" and m == "exactly-once")
                         and not (t[0] and m == "exactly-once")]
                order = order[r % len(order):] + order[:r % len(order)]
                for (on, target), w, m in order:
                    name = f"{master_label(master)}{on} {w}/{m}"
                    out = f"out-{topic_label(master)}-{w}-{m}-{r}"
                    print(f"round {r + 1}: {name} ...", flush=True)
                    res = run_case(spark, target, "in", out, m, w, args.per_batch, work)
                    problem = verify(target, out, args.partitions, args.records)
                    if problem:
                        failures[name] = problem
                    res["verified"] = problem is None
                    res["round"] = r
                    results.setdefault(name, []).append(res)
    finally:
        if sessions is not None:
            sessions.close()
        broker.stop()
        if kafka is not None:
            kafka.stop()
        shutil.rmtree(work, ignore_errors=True)

    # Each case by its best round, and by records per batch / the median of all its batches.
    # A ratio is taken per round — its two cases ran back to back (exactly-once vs
    # at-least-once), or in the same round (one master vs the other), under the same load
    # from other processes — and the median of the rounds' ratios is reported, with each round's.
    best = {name: max(runs, key=lambda x: x["records_s"]) for name, runs in results.items()}
    median = {name: round(args.per_batch / statistics.median([ms for r in runs for ms in r["batch_ms"]]) * 1000, 1)
              for name, runs in results.items()}
    print(f"\n{'case':36} {'best rec/s':>11} {'median rec/s':>12} {'wall rec/s':>11} {'batches':>8}  verified")
    for name, b in best.items():
        print(f"{name:36} {b['records_s']:>11,.0f} {median[name]:>12,.0f} {b['wall_records_s']:>11,.0f} "
              f"{b['batches']:>8}  {'FAILED: ' + failures[name] if name in failures else 'yes'}")

    ratios: dict[str, dict[str, Any]] = {}

    def ratio(a: str, b: str, label: str, goal: str = "") -> None:
        if a in results and b in results and a not in failures and b not in failures:
            per_round = [round(x["records_s"] / y["records_s"], 3) for x, y in zip(results[a], results[b],
                                                                                  strict=True)]
            ratios[label] = {"median_of_rounds": round(statistics.median(per_round), 3), "rounds": per_round,
                             "best_rounds": round(best[a]["records_s"] / best[b]["records_s"], 3)}
            print(f"{label} = {ratios[label]['median_of_rounds']:.3f} (median of the rounds {per_round}; best "
                  f"round / best round {ratios[label]['best_rounds']:.3f}{goal})")

    labels = [master_label(m) for m in masters]
    for label in labels:
        for w in writers:
            ratio(f"{label} {w}/exactly-once", f"{label} {w}/at-least-once",
                  f"{label} {w}: exactly-once / at-least-once", "; goal >= 0.9")
    for other in labels[1:]:
        for w in writers:
            for m in CASES:
                ratio(f"{other} {w}/{m}", f"{labels[0]} {w}/{m}", f"{w}/{m}: {other} / {labels[0]}")
    if args.against:
        for label in labels:
            for w in ("arrow", "kafka"):
                ratio(f"{label} {w}/at-least-once", f"{label}@kafka {w}/at-least-once",
                      f"{label} {w}/at-least-once: eoslog / Kafka")
            ratio(f"{label} arrow/exactly-once", f"{label}@kafka kafka/at-least-once",
                  f"{label}: eoslog sink exactly-once on eoslog / Spark's Kafka sink on Kafka")
    if "arrow" in writers and "rows" in writers:
        for label in labels:
            for m in CASES:
                a, b = f"{label} arrow/{m}", f"{label} rows/{m}"
                if a in median and b in median:
                    print(f"{label} {m}: arrow / rows writer = {median[a] / median[b]:.2f} by median batch")

    if not args.no_save:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
        facts["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
        doc = {"benchmark": "spark_sink", "when": stamp, "args": {k: str(v) for k, v in vars(args).items()},
               "machine": facts, "cases": results, "best": best, "median_records_s": median, "ratios": ratios,
               "failures": failures}
        for path in (RESULTS_DIR / f"spark-sink-{stamp}.json", RESULTS_DIR / "spark-sink-latest.json"):
            path.write_text(json.dumps(doc, indent=2) + "\n")
        plot(doc, RESULTS_DIR / f"spark-sink-{stamp}.png")
        shutil.copyfile(RESULTS_DIR / f"spark-sink-{stamp}.png", RESULTS_DIR / "spark-sink-latest.png")
        print(f"saved bench/results/spark-sink-{stamp}.json and .png")
    return 1 if failures else 0


def plot(doc: dict[str, Any], path: Path) -> None:
    """records/s of each case (best round as the bar, every round as a dot), grouped by
    writer and mode, one bar per master; the ratios in the title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases: dict[str, list[dict[str, Any]]] = doc["cases"]
    masters = list(dict.fromkeys(name.split(" ", 1)[0] for name in cases))
    groups = list(dict.fromkeys(name.split(" ", 1)[1] for name in cases))
    fig, ax = plt.subplots(figsize=(3 + 2.2 * len(groups), 5.5))
    width = 0.8 / len(masters)
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd"]
    for i, master in enumerate(masters):
        for j, group in enumerate(groups):
            runs = cases.get(f"{master} {group}", [])
            if not runs:
                continue
            x = j + (i - (len(masters) - 1) / 2) * width
            top = max(r["records_s"] for r in runs)
            ax.bar(x, top, width * 0.9, color=colors[i % len(colors)], label=master if j == 0 else None)
            ax.scatter([x] * len(runs), [r["records_s"] for r in runs], color="black", s=12, zorder=3)
            ax.text(x, top, f"{top:,.0f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylabel("records/s (records / sum of micro-batch durations)")
    ax.legend(title="master")
    ratios = "\n".join(f"{label}: {r['median_of_rounds']:.3f} (rounds {r['rounds']})"
                       for label, r in doc["ratios"].items())
    a = doc["args"]
    m = doc["machine"]
    ax.set_title(f"eoslog Spark sink, pass-through query: {int(a['records']):,} records of {a['value_bytes']} B, "
                 f"{int(a['per_batch']):,} per micro-batch — {doc['when']}\n{m['cpu_count']} shared CPUs, load "
                 f"{m.get('load_avg_at_start')} → {m.get('load_avg_at_end')}; bars: best round, dots: every round\n"
                 + ratios, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())

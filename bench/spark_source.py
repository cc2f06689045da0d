"""Spark's reads through ``format("eoslog")`` with eoslog's C record decoder and without it
(issue 17: what the consumer's speed-up gives the Spark source), in one run.

    python bench/spark_source.py [--records 1000000] [--rounds 2]   # from the repo root, in .venv

One broker subprocess; one topic of ``--records`` records of 100 B over 3 partitions
(librdkafka). Each case is a child process with its own SparkSession (local[2]) and the
executors' Python workers either with the C decoder (``c``) or with ``EOSLOG_NO_EXTENSIONS=1``
(``pure``, what the source ran before the decoder existed); the cases alternate over the
rounds, each round starting with the other. In each: a warm-up read of a small topic (the
Python workers start), then a batch read of the whole topic, timed around
``sum(length(value))``, which must equal records * 100. rows/s = records / that time.

Results: a table and ``bench/results/spark-source-latest.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from clients import fill
from common import RESULTS_DIR, BrokerProcess, prepare_run

PARTITIONS = 3
VALUE_BYTES = 100


def child(spec: dict[str, Any]) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from eoslog.spark.session import spark_session

    spark = spark_session("eoslog-bench-spark-source", work_dir=spec["work"])

    def read(topic: str) -> Any:
        return (spark.read.format("eoslog").option("kafka.bootstrap.servers", spec["bootstrap"])
                .option("subscribe", topic).load())

    def decoder(_: Any) -> list[bool]:
        from eoslog.records import batch

        return [batch.speedups is not None]

    on_workers = spark.sparkContext.parallelize([0], 1).mapPartitions(decoder).collect()
    read(spec["warmup"]).count()
    t0 = time.perf_counter()
    total = read(spec["topic"]).select(F.sum(F.length("value"))).collect()[0][0]
    seconds = time.perf_counter() - t0
    spark.stop()
    return {"seconds": seconds, "value_bytes": total, "c_decoder_on_workers": on_workers}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--work-dir", type=Path, default=None)
    p.add_argument("--no-save", action="store_true")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))), flush=True)
        return 0
    from eoslog.client import Admin, NewTopic

    started = datetime.datetime.now(datetime.UTC)
    work, data_dir, facts = prepare_run(args.work_dir, "eoslog-spark-source-", None)
    broker = BrokerProcess(data_dir, overrides={"num.partitions": str(PARTITIONS)}).start()
    runs: dict[str, list[dict[str, Any]]] = {"c": [], "pure": []}
    ok = True
    try:
        with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
            admin.create_topics([NewTopic("warmup", 1), NewTopic("read", PARTITIONS)])
        fill(broker.bootstrap, "warmup", 10, VALUE_BYTES)
        fill(broker.bootstrap, "read", args.records, VALUE_BYTES)
        for r in range(args.rounds):
            for variant in (["c", "pure"] if r % 2 == 0 else ["pure", "c"]):
                spec = {"bootstrap": broker.bootstrap, "topic": "read", "warmup": "warmup",
                        "work": str(work / "spark")}
                env = {**os.environ, **({"EOSLOG_NO_EXTENSIONS": "1"} if variant == "pure" else {})}
                out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)],
                                     capture_output=True, text=True, env=env, timeout=1800)
                if out.returncode != 0:
                    print(f"round {r + 1} {variant}: FAILED\n{out.stderr[-3000:]}", flush=True)
                    ok = False
                    continue
                res = json.loads(out.stdout.strip().splitlines()[-1])
                res["verified"] = (res["value_bytes"] == args.records * VALUE_BYTES
                                   and res["c_decoder_on_workers"] == [variant == "c"])
                res["rows_s"] = args.records / res["seconds"]
                ok = ok and res["verified"]
                runs[variant].append(res)
                print(f"round {r + 1} {variant:<5} {res['rows_s']:>10,.0f} rows/s ({res['seconds']:.2f} s)"
                      + ("" if res["verified"] else f"  NOT VERIFIED {res}"), flush=True)
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    best = {v: max((x["rows_s"] for x in rs if x["verified"]), default=None) for v, rs in runs.items()}
    facts["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    doc = {"benchmark": "spark-source", "timestamp": started.strftime("%Y-%m-%dT%H:%M:%SZ"), "machine": facts,
           "records": args.records, "value_bytes": VALUE_BYTES, "runs": runs, "best_rows_s": best,
           "ratio_c_over_pure": best["c"] / best["pure"] if best["c"] and best["pure"] else None}
    print(f"best rows/s: C decoder {best['c']}, pure Python {best['pure']}; ratio {doc['ratio_c_over_pure']}")
    if not args.no_save:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        (RESULTS_DIR / "spark-source-latest.json").write_text(json.dumps(doc, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""A Spark driver for the sink's kill -9 and cluster tests: runs one pass-through query
(eoslog source → eoslog sink) in its own SparkSession and JVM, so that a test can kill the
whole driver, or run it against a standalone cluster (one SparkContext per process).

    python sink_driver.py BOOTSTRAP SOURCE SINK CHECKPOINT WORK_DIR [--fail-at SPEC]
                          [--max-per-trigger N] [--continuous] [--master URL] [--conf K=V ...]
                          [--sink-option K=V ...]

Without ``--continuous`` the query runs with Trigger.AvailableNow and the script exits 0
once everything available is written; with it, every 300 ms until killed. Before the query
it prints ``app <application id>`` and ``executors <JSON>`` (what ``probe_executors``
found: each Python worker's pid, interpreter, eoslog copy and working directory), then
``started <query id>``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import spark_jvm
from sink_support import pass_through

from eoslog.spark.session import probe_executors, spark_session


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("bootstrap", "source", "sink", "checkpoint", "work_dir"):
        parser.add_argument(name)
    parser.add_argument("--fail-at", default="")
    parser.add_argument("--max-per-trigger", type=int, default=20)
    parser.add_argument("--continuous", action="store_true")
    parser.add_argument("--master", default="local[2,3]")
    parser.add_argument("--conf", action="append", default=[], help="a Spark setting KEY=VALUE")
    parser.add_argument("--sink-option", action="append", default=[], help="a sink option KEY=VALUE")
    args = parser.parse_args()
    conf = {**spark_jvm.CONF, **dict(item.split("=", 1) for item in args.conf)}
    spark = spark_session("eoslog-sink-driver", master=args.master, work_dir=args.work_dir, conf=conf)
    print(f"app {spark.sparkContext.applicationId}", flush=True)
    print(f"executors {json.dumps([asdict(e) for e in probe_executors(spark)])}", flush=True)
    options = dict(item.split("=", 1) for item in args.sink_option)
    if args.fail_at:
        options["eoslog.sink.test.failAt"] = args.fail_at
    query = pass_through(spark, args.bootstrap, args.source, args.sink, Path(args.checkpoint),
                         max_per_trigger=args.max_per_trigger, sink_options=options,
                         available_now=not args.continuous)
    print(f"started {query.id}", flush=True)
    query.awaitTermination()
    if query.exception() is not None:
        print(f"failed: {query.exception()}", flush=True)
        return 1
    durations = [(p["batchId"], p["durationMs"].get("triggerExecution")) for p in query.recentProgress]
    print(f"done; batch durations (ms): {durations}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

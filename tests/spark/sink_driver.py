"""A Spark driver for the sink's kill -9 tests: runs one pass-through query (eoslog source
→ eoslog sink) in its own SparkSession and JVM, so that a test can kill the whole driver.

    python sink_driver.py BOOTSTRAP SOURCE SINK CHECKPOINT WORK_DIR [--fail-at SPEC]
                          [--max-per-trigger N] [--continuous]

Without ``--continuous`` the query runs with Trigger.AvailableNow and the script exits 0
once everything available is written; with it, every 300 ms until killed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from sink_support import pass_through

from eoslog.spark.session import spark_session


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("bootstrap", "source", "sink", "checkpoint", "work_dir"):
        parser.add_argument(name)
    parser.add_argument("--fail-at", default="")
    parser.add_argument("--max-per-trigger", type=int, default=20)
    parser.add_argument("--continuous", action="store_true")
    args = parser.parse_args()
    spark = spark_session("eoslog-sink-driver", master="local[2,3]", work_dir=args.work_dir)
    options = {"eoslog.sink.test.failAt": args.fail_at} if args.fail_at else {}
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

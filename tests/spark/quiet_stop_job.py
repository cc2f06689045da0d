"""A Spark job for test_quiet_stop.py, in a JVM of its own so that its stderr can be read.

It starts a streaming query whose write task is busy (a Python function that waits), stops
it while the task runs — with ``eoslog.spark.quiet.stop_queries``, or with plain
``query.stop()`` when run with ``--plain`` — and prints the levels of the silenced loggers
afterwards. Arguments: the work directory, a marker file, [--plain].
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import spark_jvm

from eoslog.spark.quiet import _CANCELLATION_LOGGERS, stop_queries
from eoslog.spark.session import spark_session


def main(work_dir: Path, marker: Path, plain: bool) -> None:
    spark = spark_session("quiet-stop", master="local[2]", work_dir=work_dir, conf=spark_jvm.CONF)

    def busy(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            marker.touch()  # the task is running: stop now
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                time.sleep(0.1)
            yield batch

    query = (spark.readStream.format("rate").option("rowsPerSecond", 5).load()
             .mapInArrow(busy, "timestamp timestamp, value long")
             .writeStream.format("noop").option("checkpointLocation", str(work_dir / "checkpoint")).start())
    deadline = time.monotonic() + 120
    while not marker.exists():
        if time.monotonic() > deadline:
            raise SystemExit("the write task never started")
        time.sleep(0.1)
    time.sleep(1)  # well inside the task
    if plain:
        query.stop()
        time.sleep(5)  # what a stop prints, it prints by now
    else:
        stop_queries(spark, [query])
    log4j = spark._jvm.org.apache.logging.log4j  # type: ignore[attr-defined]
    for name in _CANCELLATION_LOGGERS:
        print(f"level {name} {log4j.LogManager.getLogger(name).getLevel()}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), "--plain" in sys.argv[3:])

"""Stopping streaming queries on purpose without Spark's cancellation noise.

``query.stop()`` interrupts the batch in progress. Spark then reports every piece of it as
if it had failed: ERROR lines for each aborted write ("Data source write support ... is
aborting", "Aborting commit for partition ..."), "ERROR Utils: Aborting task" with a
TaskKilledException and its stack trace per killed task, WARN "Lost task ... TaskKilled",
the Python runner's "Incomplete task interrupted", and now and then "ERROR TaskContextImpl: Error
in TaskCompletionListener" with a stack trace through TorrentBroadcast.releaseBlockManagerLock
(a killed task's completion listener releasing a broadcast block lock the kill already
released or whose block already went; seen in CI under load). A user who asked for the stop reads
that as a failure. ``stop_queries`` silences exactly those loggers while the queries stop
and their jobs drain, then restores them: the same lines from a query that fails on its
own are still printed.

What it must never do: hide a query's own error (``query.exception()`` is untouched), or
leave a logger silenced after it returns.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The loggers that report the parts of an interrupted batch (Spark's logger names are the
# class names; a package name covers the classes under it).
_CANCELLATION_LOGGERS = (
    "org.apache.spark.sql.execution.datasources.v2.WriteToDataSourceV2Exec",
    "org.apache.spark.sql.execution.datasources.v2.DataWritingSparkTask",
    "org.apache.spark.util.Utils",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.sql.execution.python",
    "org.apache.spark.api.python",
    "org.apache.spark.TaskContextImpl",  # a killed task's completion listeners failing
)


def stop_queries(spark: SparkSession, queries: Iterable[Any], timeout_s: float = 60.0) -> None:
    """Stop ``queries`` (StreamingQuery objects) and wait, up to ``timeout_s``, until no Spark
    job or task is running any more, with the cancellation loggers off meanwhile."""
    jvm: Any = spark._jvm
    log4j = jvm.org.apache.logging.log4j
    configurator = log4j.core.config.Configurator
    saved = {name: log4j.LogManager.getLogger(name).getLevel() for name in _CANCELLATION_LOGGERS}
    for name in saved:
        configurator.setLevel(name, log4j.Level.OFF)
    try:
        for query in queries:
            query.stop()
        # A cancelled job ends at once; its tasks are killed after that, and log as they go.
        tracker = spark._jsc.sc().statusTracker()  # the JVM's: it counts running tasks too
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and (
            tracker.getActiveJobIds() or any(e.numRunningTasks() for e in tracker.getExecutorInfos())
        ):
            time.sleep(0.1)
    finally:
        for name, level in saved.items():
            configurator.setLevel(name, level)

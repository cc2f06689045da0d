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
and every task they had running ends (its TaskEnd delivered: see
``_wait_until_every_task_ended``), then restores them: the same lines from a query that
fails on its own are still printed.

What it must never do: hide a query's own error (``query.exception()`` is untouched), or
leave a logger silenced after it returns.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from py4j.protocol import Py4JJavaError

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
    job runs and every task of every stage has ended and been reported, with the
    cancellation loggers off meanwhile."""
    jvm: Any = spark._jvm
    log4j = jvm.org.apache.logging.log4j
    configurator = log4j.core.config.Configurator
    saved = {name: log4j.LogManager.getLogger(name).getLevel() for name in _CANCELLATION_LOGGERS}
    for name in saved:
        configurator.setLevel(name, log4j.Level.OFF)
    try:
        for query in queries:
            query.stop()
        _wait_until_every_task_ended(spark, timeout_s)
    finally:
        for name, level in saved.items():
            configurator.setLevel(name, level)


def _wait_until_every_task_ended(spark: SparkSession, timeout_s: float) -> None:
    """A stopped query's job ends at once; its killed tasks go on (a Python task until the
    runner's monitor kills its worker, seconds later) and log their abort path as they end.

    The barrier is the app status listener's own live stages: it keeps a stage, a cancelled
    one too, until the TaskEnd of each of its tasks has reached it (SPARK-24415), and a
    killed task's TaskEnd is posted only after the task ran its abort path and completion
    listeners and the driver logged it lost. The status tracker's running-task count is no
    barrier: it is the executor summary the listener writes at most once per
    spark.ui.liveUpdate.period, so a task start just after another write is only stored at
    the next heartbeat's flush; until then it reads 0 while the tasks run."""
    sc = spark._jsc.sc()
    tracker, status = sc.statusTracker(), sc.statusStore()  # statusStore: private[spark], the driver's

    def busy() -> bool:
        try:
            return bool(tracker.getActiveJobIds()) or not status.activeStages().isEmpty()
        except Py4JJavaError:  # the live stages are read while the listener changes them
            return True

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and busy():
        time.sleep(0.1)

"""fsync metrics the storage layer reports (Kafka's LogFlushStats.LogFlushRateAndTimeMs).

Process-wide, since storage has no broker to hand them to: one broker per process. A write
path that fsyncs calls ``timed_fsync(fd)`` (or times its own and calls ``observe_fsync``);
group commit reports one observation per fsync it issues, however many appends it covers.
"""

from __future__ import annotations

import os
import time

from prometheus_client import Histogram

# Not in prometheus_client's global registry: each broker's registry adds it.
LOG_FLUSH = Histogram(
    "kafka_log_logflushstats_logflush_seconds",
    "fsync calls of log segments and their duration (Kafka: LogFlushStats LogFlushRateAndTimeMs)",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
    registry=None,
)


def observe_fsync(seconds: float) -> None:
    LOG_FLUSH.observe(seconds)


def timed_fsync(fd: int) -> None:
    """``os.fsync(fd)``, counted and timed."""
    start = time.perf_counter()
    os.fsync(fd)
    LOG_FLUSH.observe(time.perf_counter() - start)

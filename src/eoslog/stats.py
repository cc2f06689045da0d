"""Plain counters of the hot paths, on the ground floor: latency histograms observed with a
bisect and three increments (no metrics library), which storage, the replica layer, the
coordinators and the dispatcher keep, and ``eoslog.metrics`` — the one reader, the only code
that knows Prometheus — turns into samples when scraped.
"""

from __future__ import annotations

import bisect
import itertools
import threading

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
LOG_FLUSH_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
GC_PAUSE_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


class LatencyHistogram:
    """count, sum (seconds) and counts per bucket of ``bounds``, observed from one thread (the
    event loop's): no lock."""

    __slots__ = ("bounds", "buckets", "count", "total")

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        self.bounds = bounds
        self.buckets = [0] * (len(bounds) + 1)  # the last one: above every bound (+Inf)
        self.count = 0
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.count += 1
        self.total += seconds
        self.buckets[bisect.bisect_left(self.bounds, seconds)] += 1

    def cumulative(self) -> list[tuple[str, float]]:
        """``HistogramMetricFamily.add_metric``'s buckets: (upper bound, count at or below)."""
        counts: list[float] = list(itertools.accumulate(self.buckets))
        return [(repr(bound), n) for bound, n in zip(self.bounds, counts, strict=False)] + [("+Inf", counts[-1])]


class SharedLatencyHistogram(LatencyHistogram):
    """A ``LatencyHistogram`` observed from several threads (group commit's fdatasyncs run in
    a worker thread, a segment's fsync on the event loop): each observation under a lock."""

    __slots__ = ("_lock",)

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        super().__init__(bounds)
        self._lock = threading.Lock()

    def observe(self, seconds: float) -> None:
        with self._lock:
            super().observe(seconds)

    def snapshot(self) -> tuple[list[tuple[str, float]], float]:
        """(``cumulative()``, sum) of one moment."""
        with self._lock:
            return self.cumulative(), self.total


# fsync calls of log segments and their duration (Kafka's LogFlushStats.LogFlushRateAndTimeMs):
# process-wide, since storage has no broker to hand it to (one broker per process). Segment
# flushes and group commit's fdatasyncs observe it (storage/fileio.py), one observation per
# fsync however many appends it covers.
LOG_FLUSH = SharedLatencyHistogram(LOG_FLUSH_BUCKETS)

# The garbage collector's pauses, one histogram per generation (``broker/gc_policy.py`` observes
# them): process-wide as the collector is. Without a lock although a collection runs in whichever
# thread allocated past the threshold: collections, their callbacks included, never overlap (the
# collector's own `collecting` flag), and a lock would deadlock — a scrape reading a histogram
# under its lock allocates, which can set off the collection whose callback wants that lock.
GC_PAUSES = tuple(LatencyHistogram(GC_PAUSE_BUCKETS) for _ in range(3))

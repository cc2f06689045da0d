"""A latency histogram as plain numbers: observed on a hot path with a bisect and three
increments (no lock, no metrics library), turned into Prometheus samples when scraped.

A leaf module: the dispatcher, the replica layer and the transaction coordinator keep their
own ``LatencyHistogram`` objects and the collectors read them.
"""

from __future__ import annotations

import bisect
import itertools

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class LatencyHistogram:
    """count, sum (seconds) and counts per bucket of ``LATENCY_BUCKETS``."""

    __slots__ = ("buckets", "count", "total")

    def __init__(self) -> None:
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)  # the last one: above every bound (+Inf)
        self.count = 0
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.count += 1
        self.total += seconds
        self.buckets[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1

    def cumulative(self) -> list[tuple[str, float]]:
        """``HistogramMetricFamily.add_metric``'s buckets: (upper bound, count at or below)."""
        counts: list[float] = list(itertools.accumulate(self.buckets))
        return [(repr(bound), n) for bound, n in zip(LATENCY_BUCKETS, counts, strict=False)] + [("+Inf", counts[-1])]

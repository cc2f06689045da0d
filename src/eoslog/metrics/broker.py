"""A broker's metrics registry: the request metrics the dispatcher observes, the state
collector, and the process-wide fsync histogram storage observes (``eoslog.stats.LOG_FLUSH``)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, disable_created_metrics
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from eoslog.metrics.collector import BrokerCollector, BrokerFacts, BrokerView
from eoslog.metrics.requests import RequestMetrics
from eoslog.stats import LOG_FLUSH


def broker_registry(state: BrokerView, facts: BrokerFacts) -> tuple[CollectorRegistry, RequestMetrics]:
    disable_created_metrics()  # type: ignore[no-untyped-call]  # (untyped upstream) no `_created` series, process-wide
    registry = CollectorRegistry()
    registry.register(LogFlushCollector())
    registry.register(BrokerCollector(state, facts))
    requests = RequestMetrics()
    registry.register(requests)
    return registry, requests


class LogFlushCollector(Collector):
    """``LOG_FLUSH`` as Kafka's LogFlushStats.LogFlushRateAndTimeMs, read when scraped."""

    def collect(self) -> Iterator[Metric]:
        flushes = HistogramMetricFamily(
            "kafka_log_logflushstats_logflush_seconds",
            "fsync calls of log segments and their duration (Kafka: LogFlushStats LogFlushRateAndTimeMs)")
        buckets, total = LOG_FLUSH.snapshot()
        flushes.add_metric([], buckets, total)
        yield flushes

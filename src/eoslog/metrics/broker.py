"""A broker's metrics registry: the request metrics the dispatcher observes, the state
collector, and the process-wide fsync histogram storage observes (``eoslog.stats.LOG_FLUSH``)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from eoslog.metrics.collector import BrokerCollector, BrokerFacts, BrokerView
from eoslog.metrics.requests import RequestMetrics
from eoslog.replica import ReplicaManager
from eoslog.stats import GC_PAUSES, LOG_FLUSH
from eoslog.storage import LogManager


def broker_registry(state: BrokerView, facts: BrokerFacts) -> tuple[CollectorRegistry, RequestMetrics]:
    disable_created_metrics()  # type: ignore[no-untyped-call]  # (untyped upstream) no `_created` series, process-wide
    registry = CollectorRegistry()
    registry.register(LogFlushCollector())
    registry.register(GcPauseCollector())
    registry.register(LogDirCollector(state.logs, state.replicas))
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


class GcPauseCollector(Collector):
    """``GC_PAUSES``: the garbage collector's pauses by generation, read when scraped (a full
    collection walks every live object and stops the event loop meanwhile)."""

    def collect(self) -> Iterator[Metric]:
        pauses = HistogramMetricFamily(
            "eoslog_gc_pause_seconds",
            "garbage collections of the broker process and their duration, by generation (2: full)",
            labels=["generation"])
        for generation, histogram in enumerate(GC_PAUSES):
            pauses.add_metric([str(generation)], histogram.cumulative(), histogram.total)
        yield pauses


class LogDirCollector(Collector):
    """Offline log directories and the partitions in them, as Kafka's LogManager and
    ReplicaManager gauges (a directory goes offline at a failed fsync: storage/log_dir_failure.py)."""

    def __init__(self, logs: LogManager, replicas: ReplicaManager) -> None:
        self.logs = logs
        self.replicas = replicas

    def collect(self) -> Iterator[Metric]:
        offline = self.logs.offline_log_dirs
        yield GaugeMetricFamily(
            "kafka_log_logmanager_offlinelogdirectorycount",
            "log directories offline after an I/O error (Kafka: LogManager OfflineLogDirectoryCount)",
            value=len(offline))
        each = GaugeMetricFamily(
            "kafka_log_logmanager_logdirectoryoffline",
            "1 when the log directory is offline (Kafka: LogManager LogDirectoryOffline)", labels=["logdirectory"])
        for d in [*self.logs.live_log_dirs, *offline]:
            each.add_metric([str(d.absolute())], 1 if d in offline else 0)
        yield each
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_offlinereplicacount",
            "partitions of this broker in an offline log directory (Kafka: ReplicaManager OfflineReplicaCount)",
            value=self.replicas.offline_partitions())

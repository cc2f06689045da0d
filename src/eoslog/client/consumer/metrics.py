"""Consumer metrics, counted per fetch, per poll and per group request (never per record).

Names follow Kafka's consumer metrics (``records-consumed-total``, ``fetch-latency-avg``,
``records-lag-max``, ``commit-total``, ``rebalance-total``, ...), returned by
``consumer.metrics()``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ConsumerMetrics:
    records_consumed_total: int = 0
    bytes_consumed_total: int = 0  # record-set bytes of the fetch responses used
    fetch_total: int = 0  # Fetch requests sent
    fetch_response_total: int = 0
    fetch_latency_sum: float = 0.0  # seconds
    fetch_latency_max: float = 0.0
    poll_total: int = 0
    commit_total: int = 0  # OffsetCommit requests answered
    commit_latency_sum: float = 0.0
    commit_latency_max: float = 0.0
    heartbeat_total: int = 0
    rebalance_total: int = 0  # join/sync rounds completed
    failed_rebalance_total: int = 0
    partitions_revoked_total: int = 0
    partitions_assigned_total: int = 0
    partitions_lost_total: int = 0

    def fetch_latency(self, seconds: float) -> None:
        self.fetch_response_total += 1
        self.fetch_latency_sum += seconds
        if seconds > self.fetch_latency_max:
            self.fetch_latency_max = seconds

    def commit_latency(self, seconds: float) -> None:
        self.commit_total += 1
        self.commit_latency_sum += seconds
        if seconds > self.commit_latency_max:
            self.commit_latency_max = seconds

    def as_dict(self, records_lag_max: int, assigned_partitions: int) -> dict[str, float]:
        fetches, commits = self.fetch_response_total, self.commit_total
        return {
            "records-consumed-total": self.records_consumed_total,
            "bytes-consumed-total": self.bytes_consumed_total,
            "fetch-total": self.fetch_total,
            "fetch-latency-avg": self.fetch_latency_sum / fetches * 1000 if fetches else 0.0,
            "fetch-latency-max": self.fetch_latency_max * 1000,
            "records-lag-max": records_lag_max,
            "poll-total": self.poll_total,
            "commit-total": commits,
            "commit-latency-avg": self.commit_latency_sum / commits * 1000 if commits else 0.0,
            "commit-latency-max": self.commit_latency_max * 1000,
            "heartbeat-total": self.heartbeat_total,
            "rebalance-total": self.rebalance_total,
            "failed-rebalance-total": self.failed_rebalance_total,
            "partition-revoked-total": self.partitions_revoked_total,
            "partition-assigned-total": self.partitions_assigned_total,
            "partition-lost-total": self.partitions_lost_total,
            "assigned-partitions": assigned_partitions,
        }

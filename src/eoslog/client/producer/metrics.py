"""Producer metrics, counted per batch and per request (never per record on the hot path).

Names follow Kafka's producer metrics (``record-send-total``, ``record-retry-total``,
``batch-size-avg``, ``request-latency-avg``, ...), returned by ``producer.metrics()``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ProducerMetrics:
    record_send_total: int = 0  # records acknowledged
    record_error_total: int = 0  # records that failed
    record_retry_total: int = 0  # records re-enqueued for another attempt
    batch_total: int = 0
    batch_size_sum: int = 0  # bytes of the batches sent (each attempt)
    batch_size_max: int = 0
    batch_split_total: int = 0
    request_total: int = 0  # Produce requests sent
    request_latency_sum: float = 0.0  # seconds, over the responses received
    request_latency_max: float = 0.0
    response_total: int = 0
    byte_total: int = 0  # bytes of Produce requests sent

    def batch_sent(self, size: int) -> None:
        self.batch_total += 1
        self.batch_size_sum += size
        if size > self.batch_size_max:
            self.batch_size_max = size

    def response(self, latency: float) -> None:
        self.response_total += 1
        self.request_latency_sum += latency
        if latency > self.request_latency_max:
            self.request_latency_max = latency

    def as_dict(self) -> dict[str, float]:
        return {
            "record-send-total": self.record_send_total,
            "record-error-total": self.record_error_total,
            "record-retry-total": self.record_retry_total,
            "batch-total": self.batch_total,
            "batch-size-avg": self.batch_size_sum / self.batch_total if self.batch_total else 0.0,
            "batch-size-max": self.batch_size_max,
            "batch-split-total": self.batch_split_total,
            "request-total": self.request_total,
            "request-latency-avg": (
                self.request_latency_sum / self.response_total * 1000 if self.response_total else 0.0
            ),
            "request-latency-max": self.request_latency_max * 1000,
            "outgoing-byte-total": self.byte_total,
        }

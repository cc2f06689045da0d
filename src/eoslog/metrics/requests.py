"""Per-API request metrics, observed by the dispatcher (Kafka's RequestMetrics):
RequestsPerSec, TotalTimeMs (as a histogram) and ErrorsPerSec by error code.

The one cost paid on every request: two cached children to bump and a walk of the
response's ``error_code`` fields (Kafka's ``AbstractResponse.errorCounts``), whose plan is
worked out once per response class.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client import Counter as CounterMetric

from eoslog.errors import Errors

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# Response class → (does it have an error_code field, the fields that may hold nested structs).
_PLANS: dict[type, tuple[bool, tuple[str, ...]]] = {}


def _plan(cls: type) -> tuple[bool, tuple[str, ...]]:
    plan = _PLANS.get(cls)
    if plan is None:
        fields = dataclasses.fields(cls)
        plan = (any(f.name == "error_code" for f in fields),
                tuple(f.name for f in fields if str(f.type).startswith("tuple[")))
        _PLANS[cls] = plan
    return plan


def error_counts(response: Any, counts: Counter[int] | None = None) -> Counter[int]:
    """Every non-zero ``error_code`` in a kio response, top level and nested, counted."""
    out: Counter[int] = Counter() if counts is None else counts
    has_error, nested = _plan(type(response))
    if has_error:
        code = int(response.error_code)
        if code:
            out[code] += 1
    for name in nested:
        items = getattr(response, name)
        if items and dataclasses.is_dataclass(items[0]):
            for item in items:
                error_counts(item, out)
    return out


def error_name(code: int) -> str:
    try:
        return Errors(code).name
    except ValueError:
        return f"UNKNOWN_{code}"


class RequestMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = CounterMetric(
            "kafka_network_requestmetrics_requests", "requests answered, per API (Kafka: RequestsPerSec)",
            ["request"], registry=registry)
        self.latency = Histogram(
            "kafka_network_requestmetrics_totaltime_seconds",
            "time from a request's arrival at the dispatcher to its response (Kafka: TotalTimeMs)",
            ["request"], buckets=LATENCY_BUCKETS, registry=registry)
        self.errors = CounterMetric(
            "kafka_network_requestmetrics_errors", "error codes in responses, per API and code (Kafka: ErrorsPerSec)",
            ["request", "error"], registry=registry)
        self._children: dict[str, tuple[Any, Any]] = {}

    def observe(self, api: str, seconds: float, response: Any) -> None:
        children = self._children.get(api)
        if children is None:
            children = self._children[api] = (self.requests.labels(api), self.latency.labels(api))
        children[0].inc()
        children[1].observe(seconds)
        if response is not None:
            for code, n in error_counts(response).items():
                self.errors.labels(api, error_name(code)).inc(n)

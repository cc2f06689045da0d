"""Per-API request metrics, observed by the dispatcher (Kafka's RequestMetrics):
RequestsPerSec, TotalTimeMs (as a histogram) and ErrorsPerSec by error code.

The one cost paid on every request: a bisect and three increments of plain numbers, and a
walk of the response's ``error_code`` fields (Kafka's ``AbstractResponse.errorCounts``)
planned once per response class; Prometheus families are built only when scraped.
"""

from __future__ import annotations

import dataclasses
import typing
from collections import Counter
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from eoslog.errors import Errors
from eoslog.protocol.encoded import EncodedItems
from eoslog.stats import LatencyHistogram

# Response class → (its error code field, if any; the tuple fields whose structs hold error codes
# somewhere below): worked out once per class from its type hints, so a walk never descends into
# structs without error codes (aborted transactions, record errors, ...).
_PLANS: dict[type, tuple[str | None, tuple[str, ...]]] = {}
# The fields Kafka's errorCounts counts: AddPartitionsToTxn's results name theirs partition_error_code.
_ERROR_FIELDS = ("error_code", "partition_error_code")


def _element_struct(hint: Any) -> type | None:
    """X of ``tuple[X, ...]`` when X is a struct (a dataclass)."""
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        if args and isinstance(args[0], type) and dataclasses.is_dataclass(args[0]):
            return args[0]
    return None


def _plan(cls: type) -> tuple[str | None, tuple[str, ...]]:
    plan = _PLANS.get(cls)
    if plan is None:
        _PLANS[cls] = (None, ())  # a struct that contains itself is walked once
        hints = typing.get_type_hints(cls)
        nested = []
        for f in dataclasses.fields(cls):
            element = _element_struct(hints.get(f.name))
            if element is not None and any(_plan(element)):
                nested.append(f.name)
        names = {f.name for f in dataclasses.fields(cls)}
        plan = _PLANS[cls] = (next((n for n in _ERROR_FIELDS if n in names), None), tuple(nested))
    return plan


def _error_codes(response: Any, out: list[int]) -> None:
    error_field, nested = _PLANS.get(type(response)) or _plan(type(response))
    if error_field is not None and (code := getattr(response, error_field)):
        out.append(int(code))
    for name in nested:
        items = getattr(response, name)
        if isinstance(items, EncodedItems):  # counted when they were encoded
            out.extend(items.error_codes)
            continue
        for item in items:
            _error_codes(item, out)


def error_counts(response: Any) -> Counter[int]:
    """Every non-zero ``error_code`` in a kio response, top level and nested, counted."""
    codes: list[int] = []
    _error_codes(response, codes)
    return Counter(codes)


def error_name(code: int) -> str:
    try:
        return Errors(code).name
    except ValueError:
        return f"UNKNOWN_{code}"


class RequestMetrics(Collector):
    """Observed per request as plain numbers (a bisect and three increments), turned into
    Prometheus families only when scraped."""

    def __init__(self) -> None:
        self._times: dict[str, LatencyHistogram] = {}
        self._errors: Counter[tuple[str, int]] = Counter()

    def observe(self, api: str, seconds: float, response: Any) -> None:
        times = self._times.get(api)
        if times is None:
            times = self._times[api] = LatencyHistogram()
        times.observe(seconds)
        if response is not None:
            codes: list[int] = []
            _error_codes(response, codes)
            for code in codes:  # usually none
                self._errors[api, code] += 1

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                       "requests answered, per API (Kafka: RequestsPerSec)", labels=["request"])
        latency = HistogramMetricFamily(
            "kafka_network_requestmetrics_totaltime_seconds",
            "time from a request's arrival at the dispatcher to its response (Kafka: TotalTimeMs)", labels=["request"])
        for api, t in sorted(self._times.items()):
            requests.add_metric([api], t.count)
            latency.add_metric([api], t.cumulative(), t.total)
        errors = CounterMetricFamily("kafka_network_requestmetrics_errors",
                                     "error codes in responses, per API and code (Kafka: ErrorsPerSec)",
                                     labels=["request", "error"])
        for (api, code), n in sorted(self._errors.items()):
            errors.add_metric([api, error_name(code)], n)
        yield from (requests, latency, errors)

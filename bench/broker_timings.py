"""Broker-side timings for a benchmark case, from the broker's Prometheus endpoint
(``metrics.listener``): scrape before and after the case, and read the histograms' and
counters' differences.

``case_timings`` turns two scrapes into what a transaction costs on the broker: the request
latency (``kafka_network_requestmetrics_totaltime_seconds``) of the transaction APIs, the
coordinator's second phase (``eoslog_transaction_coordinator_end_phase_seconds``: the
PREPARE_* append, the markers, the COMPLETE_* append), and how the parked read_committed
fetches ended (``eoslog_fetch_delayed_waits_total``: woken by an append that made records
readable — the LSO advance — or expired at their max wait) with the wake-to-answer time.
Quantiles are interpolated inside a bucket, as Prometheus' ``histogram_quantile`` does.
"""

from __future__ import annotations

import math
import urllib.request
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

TXN_APIS = ("AddPartitionsToTxn", "AddOffsetsToTxn", "TxnOffsetCommit", "EndTxn", "Produce")
END_PHASES = ("prepare", "markers", "complete")
WAIT_OUTCOMES = ("woken", "expired", "not_readable")


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=30) as r:
        text = r.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _value(samples: Samples, name: str, labels: dict[str, str]) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def histogram_delta(before: Samples, after: Samples, name: str, **labels: str) -> dict[str, float]:
    """count, mean and p50 / p99 (ms) of what ``name`` observed between two scrapes."""
    count = _value(after, f"{name}_count", labels) - _value(before, f"{name}_count", labels)
    total = _value(after, f"{name}_sum", labels) - _value(before, f"{name}_sum", labels)
    bounds = sorted({float(dict(ls)["le"]) for n, ls in after if n == f"{name}_bucket"
                     and all(dict(ls).get(k) == v for k, v in labels.items())})
    cumulative = [(b, _value(after, f"{name}_bucket", {**labels, "le": _le(b)})
                   - _value(before, f"{name}_bucket", {**labels, "le": _le(b)})) for b in bounds]
    out = {"count": count, "mean_ms": 1000 * total / count if count else math.nan}
    for q in (0.5, 0.99):
        out[f"p{round(q * 100)}_ms"] = 1000 * _quantile(q, cumulative, count)
    return out


def _le(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else repr(bound)


def _quantile(q: float, cumulative: list[tuple[float, float]], count: float) -> float:
    if not count:
        return math.nan
    rank, lower, below = q * count, 0.0, 0.0
    for bound, n in cumulative:
        if n >= rank:
            if math.isinf(bound):
                return lower  # above the largest bound: its lower edge, as Prometheus does
            return lower + (bound - lower) * (rank - below) / max(n - below, 1e-12)
        lower, below = bound, n
    return lower


def case_timings(before: Samples, after: Samples, transactions: int) -> dict[str, Any]:
    """The broker's side of one case; ``per_txn`` counts divide by the loop's transactions."""
    requests = {api: histogram_delta(before, after, "kafka_network_requestmetrics_totaltime_seconds", request=api)
                for api in TXN_APIS}
    phases = {phase: histogram_delta(before, after, "eoslog_transaction_coordinator_end_phase_seconds", phase=phase)
              for phase in END_PHASES}
    waits = {outcome: _value(after, "eoslog_fetch_delayed_waits_total",
                             {"isolation": "read_committed", "outcome": outcome})
             - _value(before, "eoslog_fetch_delayed_waits_total", {"isolation": "read_committed", "outcome": outcome})
             for outcome in WAIT_OUTCOMES}
    wake = histogram_delta(before, after, "eoslog_fetch_delayed_wake_seconds", isolation="read_committed")
    per_txn = {api: r["count"] / transactions for api, r in requests.items()} if transactions else {}
    return {"requests": requests, "end_phases": phases, "read_committed_waits": waits, "wake": wake,
            "per_txn": per_txn}

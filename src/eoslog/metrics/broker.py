"""A broker's metrics registry: the request metrics the dispatcher observes, the state
collector, and the process-wide fsync histogram."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, disable_created_metrics

from eoslog.metrics.collector import BrokerCollector, BrokerFacts
from eoslog.metrics.requests import RequestMetrics
from eoslog.metrics.storage import LOG_FLUSH

if TYPE_CHECKING:
    from eoslog.broker.context import BrokerState


def broker_registry(state: BrokerState, facts: BrokerFacts) -> tuple[CollectorRegistry, RequestMetrics]:
    disable_created_metrics()  # type: ignore[no-untyped-call]  # (untyped upstream) no `_created` series, process-wide
    registry = CollectorRegistry()
    registry.register(LOG_FLUSH)
    registry.register(BrokerCollector(state, facts))
    requests = RequestMetrics()
    registry.register(requests)
    return registry, requests

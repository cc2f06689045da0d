"""One eoslog broker and one Apache Kafka broker for the whole package, configured alike. The
conformance table is printed at the end of the run and saved to build/conformance.json by
tests/conftest.py (which also gathers it from pytest-xdist's workers; report.py).

The pair is shared by every module (starting Kafka and creating its internal topics costs seconds
per pair): sessions use names of their own (topics, groups, transactional ids), and producer and
member ids are compared as symbols numbered within one session (observe.py), so a session sees
nothing of the sessions before it that it would compare."""

from __future__ import annotations

import contextlib
import datetime
import time
from collections.abc import Iterator, Mapping
from functools import partial
from typing import Any

import pytest

from conformance.session import Broker, common_versions
from eoslog.protocol.messages import build, request_types
from support.harness import BrokerProcess, in_parallel, wait_until
from support.kafka_harness import READY_TIMEOUT_S, KafkaBroker
from support.rawkafka import RawClient

# Settings both brokers run with where their defaults differ or would slow the sessions down.
SHARED_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    # Transactions past their timeout are aborted within about a second (default: 10 s):
    # transactions/timeout-abort waits for it.
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
    # KIP-848 groups: the target assignment computed in the heartbeat that asks for it (not batched
    # by KIP-1263's interval, not on a background thread), so both answer a heartbeat alike.
    "group.consumer.assignment.interval.ms": "0",
    "group.consumer.assignor.offload.enable": "false",
    # The sessions' records carry a fixed timestamp (steps.TS, 2023), past the default 7 days'
    # retention: Kafka's first retention check (30 s after its start) deleted the segments of the
    # sessions then running, which then fetched OFFSET_OUT_OF_RANGE on Kafka alone.
    "log.retention.ms": "-1",
}
# eoslog's node id matches the Kafka node's, so partition leaders and coordinators compare equal.
EOSLOG_SETTINGS = {"node.id": "1", **SHARED_SETTINGS}
KAFKA_SETTINGS = {**SHARED_SETTINGS}

FIND_COORDINATOR, INIT_PRODUCER_ID = 10, 22
WARM_UP_KEY = "conformance-warm-up"
WARM_UP_TIMEOUT_S = 240.0


def warm_up(bootstrap: str, version: int) -> None:
    """Create the internal topics (first FindCoordinator of each kind) and let Kafka fetch its first
    producer-id block before any session, so no session sees a coordinator still loading. Generous
    bounds: on two loaded cores Kafka takes a while to create 50 partitions of each topic."""
    m = request_types(FIND_COORDINATOR, version)
    with RawClient(bootstrap) as c:
        for key_type in (0, 1):
            req = build(m.FindCoordinatorRequest, key_type=key_type, key=WARM_UP_KEY, coordinator_keys=(WARM_UP_KEY,))

            def found(req: Any = req) -> bool:
                resp = c.call(req)
                codes = [int(x.error_code) for x in getattr(resp, "coordinators", ())] or [int(resp.error_code)]
                return codes == [0]

            wait_until(found, f"{bootstrap}: a coordinator of key type {key_type}", WARM_UP_TIMEOUT_S)
        init = request_types(INIT_PRODUCER_ID, 0).InitProducerIdRequest(
            transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60))
        wait_until(lambda: int(c.call(init).error_code) == 0, f"{bootstrap}: a first producer id", WARM_UP_TIMEOUT_S)


@contextlib.contextmanager
def broker_pair(tmp_path_factory: pytest.TempPathFactory,
                extra: Mapping[str, str] | None = None) -> Iterator[tuple[Broker, Broker]]:
    """An eoslog broker and a Kafka broker configured alike (plus ``extra`` on both), warmed up."""
    kafka = KafkaBroker(tmp_path_factory.mktemp("kafka") / "data", {**KAFKA_SETTINGS, **(extra or {})})
    eoslog = BrokerProcess(tmp_path_factory.mktemp("eoslog") / "data", overrides={**EOSLOG_SETTINGS, **(extra or {})})
    # Both start, and then warm up, side by side: Kafka's storage tool, JVM start-up and internal
    # topics dominate; eoslog's start fits in their shadow.
    try:
        try:
            in_parallel([kafka.launch, eoslog.start])
            kafka.wait_ready(time.monotonic() + READY_TIMEOUT_S)
            versions = common_versions([eoslog.bootstrap, kafka.bootstrap])
            in_parallel([partial(warm_up, b.bootstrap, versions[FIND_COORDINATOR]) for b in (eoslog, kafka)])
            yield (Broker("eoslog", eoslog.bootstrap, versions, eoslog.data_dir),
                   Broker("kafka", kafka.bootstrap, versions, kafka.data_dir))
        finally:
            eoslog.stop()
    finally:
        kafka.kill()  # nothing is checked after: no controlled shutdown to wait for


@pytest.fixture(scope="package")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Broker, Broker]]:
    """Both brokers, for every module of the package."""
    with broker_pair(tmp_path_factory) as pair:
        yield pair


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``session_name``: one test per session of the module's CATALOGUE, in order."""
    if "session_name" in metafunc.fixturenames:
        metafunc.parametrize("session_name", metafunc.module.CATALOGUE.names())


"""Three rules of Java's KafkaProducer (send()'s size checks, retry.backoff.ms, max.block.ms),
each against the broker double (tests/support/broker_double.py) so that what reaches a broker
is visible:

- a record larger than ``max.request.size`` (or ``buffer.memory``) fails in ``send()``
  itself: nothing is sent, not even a metadata request for its topic;
- a retried batch waits ``retry.backoff.ms`` before it is drained again: seen on the
  accumulator with an injected clock, and in the double's log of Produce arrivals (only
  lower bounds are compared: a slow machine can only make the gaps longer);
- waiting for a topic's metadata is bounded by ``max.block.ms``.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from test_client_accumulator import acc, append, cluster

from eoslog.client.errors import KafkaTimeoutError, MessageTooLargeError
from eoslog.client.producer import AIOProducer
from eoslog.protocol.errors import ErrorCode
from support.broker_double import BrokerDouble

PRODUCE, METADATA = 0, 3
BACKOFF_MS = 200


def run(scenario: Callable[[BrokerDouble], Awaitable[None]], topics: dict[str, int] | None = None) -> None:
    async def main() -> None:
        double = await BrokerDouble(topics or {"t": 1}).start()
        try:
            await asyncio.wait_for(scenario(double), 60)  # a hang guard, far above every limit used
        finally:
            await double.stop()

    asyncio.run(main())


@pytest.mark.parametrize(("limit", "setting"), [("max_request_size", 1000), ("buffer_memory", 1000)])
def test_a_record_over_the_size_limits_fails_in_send_and_nothing_is_sent(limit: str, setting: int) -> None:
    async def scenario(double: BrokerDouble) -> None:
        # batch.size under the limit too: Kafka cannot allocate a batch above buffer.memory either.
        async with AIOProducer(bootstrap_servers=double.bootstrap, linger_ms=0, batch_size=setting // 2,
                               max_block_ms=5000, **{limit: setting}) as p:
            before = list(double.requests)
            with pytest.raises(MessageTooLargeError) as e:
                await p.send("not-known-yet", b"x" * setting)  # no metadata for it either
            assert limit.replace("_", ".") in str(e.value)
            assert double.requests == before
            assert (await p.send_and_wait("t", b"x" * (setting // 2))).offset == 0
        assert double.values("t") == [b"x" * (setting // 2)]

    run(scenario)


def test_a_retried_batch_is_not_drained_before_retry_backoff_ms() -> None:
    c = cluster({"t": [0]})
    a = acc(retry_backoff_ms=BACKOFF_MS, linger_ms=0)
    append(a)
    t0 = a._topics["t"][0][0].created
    [batch] = a.drain(c, {0}, 1 << 20, t0)[0]
    a.reenqueue(batch, t0 + 1.0)  # its response (a retriable error) came back at t0 + 1 s
    backoff = BACKOFF_MS / 1000
    nodes, next_check, _ = a.ready(c, t0 + 1.0 + backoff / 2)
    assert nodes == set() and next_check == pytest.approx(backoff / 2)
    assert a.drain(c, {0}, 1 << 20, t0 + 1.0 + backoff / 2) == {}
    due = t0 + 1.0 + backoff + 1e-6  # a hair past, so float rounding cannot decide
    assert a.ready(c, due)[0] == {0}
    assert a.drain(c, {0}, 1 << 20, due) == {0: [batch]}


def test_retries_reach_the_broker_retry_backoff_ms_apart() -> None:
    arrivals: list[float] = []

    def refuse_three_times(topic: str, partition: int, header: Any) -> int | None:
        arrivals.append(time.monotonic())
        return ErrorCode.not_enough_replicas if len(arrivals) <= 3 else None

    async def scenario(double: BrokerDouble) -> None:
        double.produce_hook = refuse_three_times
        async with AIOProducer(bootstrap_servers=double.bootstrap, linger_ms=0, retry_backoff_ms=BACKOFF_MS) as p:
            assert (await p.send_and_wait("t", b"v")).offset == 0
            assert p.metrics()["record-retry-total"] == 3

    run(scenario)
    assert len(arrivals) == 4
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert all(gap >= BACKOFF_MS / 1000 for gap in gaps), gaps


def test_the_metadata_wait_is_bounded_by_max_block_ms() -> None:
    async def scenario(double: BrokerDouble) -> None:
        async with AIOProducer(bootstrap_servers=double.bootstrap, max_block_ms=300) as p:
            with pytest.raises(KafkaTimeoutError, match="not present in metadata after 300 ms"):
                await p.send("never-created", b"v")
            asked = double.count(METADATA)
            assert asked >= 2  # it did ask, more than once, while waiting
        assert "never-created" not in double.log and double.count(PRODUCE) == 0

    run(scenario)

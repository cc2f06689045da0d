"""A connection pipelines the acks wait of its Produce requests (issues 13/14), nothing else.

A Produce whose appends are done detaches from its connection while it waits for its acks
(here: the group-commit fsync round), so the next requests are read and processed; the
responses still leave in request order. The group-commit fsync is held closed by a gate, so
what the connection has appended and written while a round is pending is looked at exactly,
not timed: three acks=all produces are appended before the first round ends (two rounds for
three requests), a ready acks=1 response waits behind an earlier acks=all one, any other
request waits until every earlier one is answered, failures and timeouts keep their place,
a failed acks=0 produce closes the connection after the earlier answers, so does a failed SASL
re-authentication, a lost connection cancels its waits (also one that detaches after the loss),
and the number of waiting produces is bounded. Requests read before the client closed its side
are still processed (answers dropped); after the broker's own close, nothing queued is.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from eoslog.broker.connection import MAX_AWAITING_ACKS, KafkaProtocol
from eoslog.broker.server import Broker
from eoslog.config import BrokerConfig, TopicConfig
from eoslog.errors import Errors
from eoslog.metrics.requests import RequestMetrics
from eoslog.protocol.codec import decode_response, encode_request
from eoslog.protocol.scram import Mechanism, plain_message
from eoslog.records import build_batch
from eoslog.security.listeners import Listener, SecurityProtocol
from eoslog.security.scram import make_credential
from support.fake_transport import FakeTransport
from support.fsync_gate import FsyncGate
from support.rawkafka import (
    API_VERSIONS,
    FETCH,
    PRODUCE,
    api_versions_request,
    fetch_request,
    produce_request,
    request_module,
    simple_batch,
)

PID = 4242
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
HANG_GUARD_S = 10.0  # waits for a condition end here; the assertion after them says what failed


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(BrokerConfig.load(overrides={"log.dirs": str(tmp_path / "data")}))
    b.logs.startup()
    b.logs.create_topic("t", 1)
    b.state.serving.set()
    assert b.replicas.group_commit is not None, "the single node's default policy is group-commit"
    yield b
    b.logs.shutdown()


class Connection:
    """One KafkaProtocol on a FakeTransport; requests are sent as one chunk."""

    def __init__(self, broker: Broker, listener: Listener | None = None) -> None:
        self.broker = broker
        self.transport = FakeTransport()
        self.protocol = KafkaProtocol(broker.dispatcher, 1 << 20, set(), listener)
        self.protocol.connection_made(self.transport)  # type: ignore[arg-type]
        self.kinds: dict[int, tuple[int, int]] = {}  # correlation id -> (api key, version)

    def send(self, *requests: tuple[int, int, int, Any]) -> None:
        """(correlation id, api key, version, request) each."""
        for cid, key, version, _ in requests:
            self.kinds[cid] = key, version
        self.protocol.data_received(b"".join(encode_request(cid, r, "c") for cid, _, _, r in requests))

    def answered(self) -> list[tuple[int, Any]]:
        out = []
        for frame in self.transport.frames():
            (cid,) = struct.unpack_from(">i", frame)
            out.append(decode_response(frame, *self.kinds[cid]))
        return out

    def log_end(self) -> int:
        plog = self.broker.logs.get_log("t", 0)
        assert plog is not None
        return plog.log_end_offset


async def until(condition: Callable[[], bool]) -> bool:
    """Run the loop until ``condition()`` holds or the hang guard passes; returns it."""
    deadline = asyncio.get_running_loop().time() + HANG_GUARD_S
    while not condition() and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.001)
    return condition()


def produce(cid: int, value: bytes, *, acks: int = -1, topic: str = "t", timeout_ms: int = 10_000,
            records: bytes | None = None) -> tuple[int, int, int, Any]:
    batch = simple_batch([value]) if records is None else records
    return cid, PRODUCE, 9, produce_request(topic, 0, batch, acks=acks, timeout_ms=timeout_ms)


def partition(body: Any) -> Any:
    return body.responses[0].partition_responses[0]


def idempotent(seq: int, value: bytes) -> bytes:
    return build_batch([(None, value, ())], timestamp=1_700_000_000_000, producer_id=PID, producer_epoch=0,
                       base_sequence=seq)


def test_acks_all_produces_on_one_connection_share_fsync_rounds(broker: Broker, gate: FsyncGate) -> None:
    """The wait is detached: the 2nd and 3rd produce are appended while the 1st one's round is
    still pending, so one round covers both (not one round per request in series)."""
    assert broker.replicas.group_commit is not None
    stats = broker.replicas.group_commit.stats

    async def run() -> None:
        conn = Connection(broker)
        conn.send(*(produce(i, b"v%d" % i) for i in (1, 2, 3)))
        assert await until(lambda: conn.log_end() == 3), (
            f"only {conn.log_end()} of 3 produces appended while the first waits for its fsync: not pipelined")
        assert conn.transport.written == b"", "answered before any fsync covered the records"
        gate.open()
        assert await until(lambda: conn.protocol.idle)
        answers = conn.answered()
        assert [cid for cid, _ in answers] == [1, 2, 3]
        assert [(partition(b).error_code, partition(b).base_offset) for _, b in answers] == [(0, 0), (0, 1), (0, 2)]
        conn.protocol.connection_lost(None)

    asyncio.run(run())
    assert stats.offsets_synced == 3
    assert stats.rounds <= 2, f"{stats.rounds} fsync rounds for 3 pipelined acks=all produces"


def test_responses_keep_request_order_with_mixed_acks(broker: Broker, gate: FsyncGate) -> None:
    """acks=1 is ready at once but answered after the acks=all before it; acks=0 gets no answer;
    a Fetch (any request but Produce) is processed only after every earlier one is answered,
    so it sees all four records, as without pipelining."""

    async def run() -> None:
        conn = Connection(broker)
        conn.send(produce(1, b"a"), produce(2, b"b", acks=1), produce(3, b"c", acks=0), produce(4, b"d"),
                  (5, FETCH, 12, fetch_request("t", 0, 0)), (6, API_VERSIONS, 3, api_versions_request(3)))
        # The Fetch taken and held until the produces before it are answered; ApiVersions queued.
        assert await until(lambda: conn.log_end() == 4 and len(conn.protocol._requests) == 1)
        await asyncio.sleep(0.05)  # (a reordering would show here: the acks=1 answer is ready)
        assert conn.transport.written == b"", "a later response went out before the acks=all one before it"
        gate.open()
        assert await until(lambda: conn.protocol.idle)
        answers = conn.answered()
        assert [cid for cid, _ in answers] == [1, 2, 4, 5, 6]
        assert [partition(answers[i][1]).base_offset for i in range(3)] == [0, 1, 3]
        fetched = answers[3][1].responses[0].partitions[0]
        assert fetched.high_watermark == 4 and fetched.records, "the Fetch overtook the produces before it"
        conn.protocol.connection_lost(None)

    asyncio.run(run())


def test_failures_after_a_detached_produce_keep_their_place(broker: Broker, gate: FsyncGate) -> None:
    """A later produce timing out (REQUEST_TIMED_OUT) is answered after the earlier one; the ISR
    shrinking below min.insync.replicas during the wait answers NOT_ENOUGH_REPLICAS_AFTER_APPEND."""

    async def run() -> None:
        conn = Connection(broker)
        conn.send(produce(1, b"a"), produce(2, b"b", timeout_ms=1), produce(3, b"c"))
        assert await until(lambda: conn.log_end() == 3 and len(conn.protocol._unanswered) == 3
                           and conn.protocol._unanswered[1].ready)
        assert conn.transport.written == b""
        plog = broker.logs.get_log("t", 0)
        assert plog is not None
        plog.config = TopicConfig(dict(plog.config.items()), {"min.insync.replicas": 2})
        gate.open()
        assert await until(lambda: conn.protocol.idle)
        answers = conn.answered()
        assert [(cid, partition(b).error_code) for cid, b in answers] == [
            (1, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND.code), (2, Errors.REQUEST_TIMED_OUT.code),
            (3, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND.code)]
        assert not conn.transport.closed
        conn.protocol.connection_lost(None)

    asyncio.run(run())


def test_idempotent_sequences_are_checked_in_request_order(broker: Broker, gate: FsyncGate) -> None:
    """Pipelined idempotent batches are appended in request order: a retried batch is found a
    duplicate (its first offset), a gap is OUT_OF_ORDER_SEQUENCE_NUMBER."""

    async def run() -> None:
        conn = Connection(broker)
        conn.send(produce(1, b"", records=idempotent(0, b"s0")), produce(2, b"", records=idempotent(1, b"s1")),
                  produce(3, b"", records=idempotent(1, b"s1")), produce(4, b"", records=idempotent(5, b"s5")),
                  produce(5, b"", records=idempotent(2, b"s2")))
        assert await until(lambda: conn.log_end() == 3 and not conn.protocol._requests)
        gate.open()
        assert await until(lambda: conn.protocol.idle)
        assert [(cid, partition(b).error_code, partition(b).base_offset) for cid, b in conn.answered()] == [
            (1, 0, 0), (2, 0, 1), (3, 0, 1), (4, Errors.OUT_OF_ORDER_SEQUENCE_NUMBER.code, -1), (5, 0, 2)]
        conn.protocol.connection_lost(None)

    asyncio.run(run())


def test_a_failed_acks_zero_produce_closes_after_the_earlier_answers(broker: Broker, gate: FsyncGate) -> None:
    async def run() -> None:
        conn = Connection(broker)
        conn.send(produce(1, b"a"), produce(2, b"b", acks=0, topic="nope"),
                  (3, API_VERSIONS, 3, api_versions_request(3)))
        assert await until(lambda: conn.log_end() == 1 and len(conn.protocol._requests) == 1)
        await asyncio.sleep(0.05)  # the acks=0 produce failed meanwhile; ApiVersions is never read
        assert not conn.transport.closed and conn.transport.written == b"", "closed before answering request 1"
        gate.open()
        assert await until(lambda: conn.transport.closed)
        assert [cid for cid, _ in conn.answered()] == [1]
        conn.protocol.connection_lost(None)

    asyncio.run(run())


def sasl_plain(cid: int, user: str, password: str) -> list[tuple[int, int, int, Any]]:
    return [(cid, SASL_HANDSHAKE, 1, request_module(SASL_HANDSHAKE, 1).SaslHandshakeRequest(mechanism="PLAIN")),
            (cid + 1, SASL_AUTHENTICATE, 2,
             request_module(SASL_AUTHENTICATE, 2).SaslAuthenticateRequest(auth_bytes=plain_message(user, password)))]


def test_a_failed_reauthentication_is_processed_and_closes_after_the_earlier_answers(
        tmp_path: Path, gate: FsyncGate) -> None:
    """SaslHandshake/SaslAuthenticate (any non-Produce request) wait until the produces before
    them are answered; a failed re-authentication (close_after_response) closes the connection
    after its own answer, the earlier ones written first."""
    b = Broker(BrokerConfig.load(overrides={"log.dirs": str(tmp_path / "data"), "sasl.enabled.mechanisms": "PLAIN",
                                            "connection.failed.authentication.delay.ms": "0"}))
    b.logs.startup()
    b.logs.create_topic("t", 1)
    b.state.serving.set()
    b.state.security.credentials.apply(
        [("alice", Mechanism.SCRAM_SHA_256, make_credential(Mechanism.SCRAM_SHA_256, "secret"))], [])
    sasl = Listener("SASL_PLAINTEXT", SecurityProtocol.SASL_PLAINTEXT, "127.0.0.1", 0)

    async def run() -> None:
        conn = Connection(b, sasl)
        conn.send(*sasl_plain(1, "alice", "secret"))
        assert await until(lambda: len(conn.transport.frames()) == 2)
        conn.send(produce(3, b"a"), produce(4, b"b"), *sasl_plain(5, "alice", "wrong"), produce(7, b"c"))
        assert await until(lambda: conn.log_end() == 2 and len(conn.protocol._requests) == 2)
        await asyncio.sleep(0.05)
        assert len(conn.transport.frames()) == 2 and not conn.transport.closed, "re-authenticated before the answers"
        gate.open()
        assert await until(lambda: conn.transport.closed)
        answers = conn.answered()
        assert [cid for cid, _ in answers] == [1, 2, 3, 4, 5, 6]
        assert [partition(answers[i][1]).error_code for i in (2, 3)] == [0, 0]
        assert answers[5][1].error_code == Errors.SASL_AUTHENTICATION_FAILED.code
        assert conn.log_end() == 2, "a produce after the failed re-authentication was appended"
        conn.protocol.connection_lost(None)

    try:
        asyncio.run(run())
    finally:
        b.logs.shutdown()


def test_an_error_in_a_detached_wait_closes_after_the_earlier_answers(
        broker: Broker, gate: FsyncGate, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The second produce's wait raises (a broker bug): the first one's answer is still written,
    then the connection closes; nothing after it is answered."""
    real_wait = broker.replicas._wait_for_isr
    calls = 0

    async def wait_for_isr(*args: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            await asyncio.sleep(0.01)  # detached by then
            raise RuntimeError("a bug in the wait")
        await real_wait(*args)

    monkeypatch.setattr(broker.replicas, "_wait_for_isr", wait_for_isr)

    async def run() -> None:
        conn = Connection(broker)
        conn.send(produce(1, b"a"), produce(2, b"b"), produce(3, b"c"))
        assert await until(lambda: conn.log_end() == 3)
        await asyncio.sleep(0.05)
        assert not conn.transport.closed and conn.transport.written == b""
        gate.open()
        assert await until(lambda: conn.transport.closed)
        assert [cid for cid, _ in conn.answered()] == [1]
        conn.protocol.connection_lost(None)

    asyncio.run(run())
    assert "a bug in the wait" in caplog.text


def test_a_lost_connection_cancels_its_waits(broker: Broker, gate: FsyncGate,
                                            caplog: pytest.LogCaptureFixture) -> None:
    """No wait is left in the produce purgatory, nothing is written to the closed transport,
    no error is logged and no task exception goes unretrieved."""
    unhandled: list[dict[str, Any]] = []

    async def run() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, context: unhandled.append(context))
        conn = Connection(broker)
        conn.send(produce(1, b"a"), produce(2, b"b"))
        assert await until(lambda: conn.log_end() == 2 and broker.replicas.produce_purgatory.waiting() == 2)
        assert not conn.protocol.idle
        assert not conn.protocol.close_if_idle(asyncio.get_running_loop().time() + 1e6, 0.001), (
            "a connection whose produces wait for their acks was closed as idle")
        conn.protocol.connection_lost(None)
        assert await until(lambda: broker.replicas.produce_purgatory.waiting() == 0 and conn.protocol.idle)
        gate.open()
        assert await until(lambda: broker.replicas.group_commit is not None
                           and broker.replicas.group_commit.stats.offsets_synced == 2)
        assert conn.transport.written == b""

    with caplog.at_level(logging.WARNING):
        asyncio.run(run())
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert unhandled == []


def test_requests_sent_before_the_client_closed_are_still_processed(broker: Broker, gate: FsyncGate) -> None:
    """An acks=0 producer flushes (its requests are sent) and closes: the broker has read the
    requests before it sees the close, and processes them all, as Kafka does. Before: queued
    requests were dropped with the connection (records missing in CI's acks=0 interop test)."""
    gate.open()

    async def run() -> None:
        conn = Connection(broker)
        conn.send(*(produce(i, b"v%d" % i, acks=0) for i in range(1, 6)))
        conn.protocol.connection_lost(None)  # in the same loop iteration: nothing processed yet
        assert await until(lambda: conn.log_end() == 5 and conn.protocol.idle), (
            f"{conn.log_end()} of 5 records sent before the close were appended")
        assert conn.transport.written == b""

    asyncio.run(run())


def test_requests_queued_when_the_broker_closes_are_dropped(broker: Broker, gate: FsyncGate) -> None:
    """Our own close (a failed request, idle, shutdown) drops what is queued behind it."""
    gate.open()

    async def run() -> None:
        conn = Connection(broker)
        conn.send(*(produce(i, b"v%d" % i, acks=0) for i in range(1, 6)))
        conn.protocol.close()
        conn.protocol.connection_lost(None)
        await asyncio.sleep(0.05)
        assert conn.log_end() == 0 and conn.protocol.idle

    asyncio.run(run())


def test_waiting_produces_per_connection_are_bounded(broker: Broker, gate: FsyncGate) -> None:
    """Back-pressure: at most MAX_AWAITING_ACKS produces wait; then the worker stops and,
    once its queue fills, reading pauses; all are answered in order afterwards."""
    n = MAX_AWAITING_ACKS + 24

    async def run() -> None:
        conn = Connection(broker)
        conn.send(*(produce(i, b"%d" % i) for i in range(n)))
        assert await until(lambda: len(conn.protocol._unanswered) == MAX_AWAITING_ACKS and conn.transport.paused)
        await asyncio.sleep(0.05)
        assert conn.log_end() == MAX_AWAITING_ACKS and len(conn.protocol._unanswered) == MAX_AWAITING_ACKS
        gate.open()
        assert await until(lambda: conn.protocol.idle)
        assert [cid for cid, _ in conn.answered()] == list(range(n))
        assert not conn.transport.paused
        conn.protocol.connection_lost(None)

    asyncio.run(run())


def test_request_latency_of_a_detached_produce_includes_its_wait(broker: Broker, gate: FsyncGate) -> None:
    """kafka_network_requestmetrics_totaltime_seconds{request=Produce}: each produce observed
    once, when answered (the gate holds the round for at least 0.2 s)."""
    metrics = broker.dispatcher.metrics = RequestMetrics()
    hold_s = 0.2

    async def run() -> None:
        conn = Connection(broker)
        conn.send(produce(1, b"a"), produce(2, b"b"))
        assert await until(lambda: conn.log_end() == 2)
        await asyncio.sleep(hold_s)
        gate.open()
        assert await until(lambda: conn.protocol.idle)
        conn.protocol.connection_lost(None)

    asyncio.run(run())
    samples = {s.name: s.value for m in metrics.collect() for s in m.samples if s.labels.get("request") == "Produce"
               and "totaltime" in s.name and not s.name.endswith("_bucket")}
    assert samples["kafka_network_requestmetrics_totaltime_seconds_count"] == 2
    assert samples["kafka_network_requestmetrics_totaltime_seconds_sum"] >= 2 * hold_s, samples


def test_a_produce_that_detaches_after_its_connection_was_lost_is_cancelled(broker: Broker) -> None:
    """A produce whose handler suspends before its appends are done (a transactional one that
    asks a remote coordinator, in a cluster) and detaches after the connection was lost: its
    wait is cancelled at once, inside the handler (which runs in the worker until it detaches),
    not left suspended. Here ``Dispatcher.handle`` is a double: a single node's verification
    never suspends, so no real request holds that moment open."""
    resume = asyncio.Event()
    seen: list[str] = []

    async def handle(frame: Any, session: Any, peer: str, detach: Callable[[], None] | None = None,
                     mute: Callable[[int], None] | None = None) -> list[bytes]:
        seen.append("handled")
        await resume.wait()  # before the appends: the connection is lost meanwhile
        assert detach is not None
        detach()
        try:
            await asyncio.get_running_loop().create_future()  # the acks wait, never satisfied
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return []

    async def run() -> None:
        conn = Connection(broker)
        conn.protocol.dispatcher.handle = handle  # type: ignore[method-assign]
        conn.send(produce(1, b"a"))
        assert await until(lambda: seen == ["handled"])
        conn.protocol.connection_lost(None)
        resume.set()
        assert await until(lambda: seen == ["handled", "cancelled"] and conn.protocol.idle), (
            f"the detached wait was not cancelled ({seen}, idle {conn.protocol.idle})")

    asyncio.run(run())

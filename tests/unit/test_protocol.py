"""Framing and dispatch: codec round trips, malformed frames, unsupported versions, and
the per-connection protocol driven through a fake transport (no sockets)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from eoslog.broker.connection import KafkaProtocol
from eoslog.broker.handlers.base import CloseConnection
from eoslog.broker.handlers.registry import REGISTRY
from eoslog.broker.server import Broker
from eoslog.config import BrokerConfig
from eoslog.protocol.codec import (
    DecodeError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    read_prefix,
)
from eoslog.protocol.messages import response_types
from eoslog.security.listeners import Listener, SecurityProtocol
from eoslog.security.session import ANONYMOUS, Session
from support.fake_transport import FakeTransport
from support.rawkafka import (
    api_versions_request,
    create_topics_request,
    fetch_request,
    list_offsets_request,
    produce_request,
    request_module,
    simple_batch,
)

UNSUPPORTED_VERSION = 35

SESSION = Session(Listener("PLAINTEXT", SecurityProtocol.PLAINTEXT, "", 0), ANONYMOUS, "peer")


def metadata_request(version: int, topics: list[str] | None) -> Any:
    m = request_module(3, version)
    wanted = None if topics is None else tuple(
        m.MetadataRequestTopic(**({"name": t, "topic_id": None} if version >= 10 else {"name": t}))
        for t in topics
    )
    fields: dict[str, Any] = {"topics": wanted}
    if version >= 4:
        fields["allow_auto_topic_creation"] = False
    if 8 <= version <= 10:
        fields["include_cluster_authorized_operations"] = False
    if version >= 8:
        fields["include_topic_authorized_operations"] = False
    return m.MetadataRequest(**fields)


SAMPLE_REQUESTS = [
    api_versions_request(0),
    api_versions_request(3),
    metadata_request(1, ["a", "b"]),
    metadata_request(9, None),
    metadata_request(12, ["topic"]),
    produce_request("t", 0, simple_batch([b"x", b"y"], 5), version=3),
    produce_request("t", 2, simple_batch([b"z" * 300], 5), version=9),
    produce_request("t", 1, None, version=9),
    fetch_request("t", 0, 42, version=4),
    fetch_request("t", 0, 42, version=12),
    list_offsets_request("t", 0, -2, version=1),
    list_offsets_request("t", 0, -1, version=7),
    create_topics_request("new", 3, {"segment.bytes": "1000"}, version=7),
]


def frame_body(request: Any, correlation_id: int = 7, client_id: str | None = "c") -> bytes:
    """A request frame without its size prefix, as the dispatcher receives it."""
    return encode_request(correlation_id, request, client_id)[4:]


@pytest.mark.parametrize("request_obj", SAMPLE_REQUESTS,
                         ids=lambda r: f"{type(r).__name__}-v{r.__version__}")
def test_request_round_trip(request_obj: Any) -> None:
    data = encode_request(99, request_obj, "client-1")
    assert struct.unpack_from(">i", data)[0] == len(data) - 4
    body = data[4:]
    prefix = read_prefix(body)
    assert (prefix.api_key, prefix.api_version, prefix.correlation_id) == (
        request_obj.__api_key__, request_obj.__version__, 99)
    decoded, client_id = decode_request(body, prefix)
    assert decoded == request_obj and client_id == "client-1"


def test_header_versions() -> None:
    """Header v1 for non-flexible request versions, v2 (+ tagged fields) for flexible."""
    v1 = frame_body(metadata_request(8, []), client_id="ab")
    v2 = frame_body(metadata_request(9, []), client_id="ab")
    assert v1[8:12] == b"\x00\x02ab"
    assert v2[8:13] == b"\x00\x02ab\x00"  # client id is still int16-sized; then no tags


@pytest.mark.parametrize("request_obj", SAMPLE_REQUESTS,
                         ids=lambda r: f"{type(r).__name__}-v{r.__version__}")
def test_every_truncation_is_a_decode_error(request_obj: Any) -> None:
    body = frame_body(request_obj)
    prefix = read_prefix(body)
    for cut in range(8, len(body)):
        with pytest.raises(DecodeError):
            decode_request(body[:cut], prefix)
    with pytest.raises(DecodeError):
        read_prefix(body[:7])
    # Bytes after the body are ignored, as Kafka's parser does (librdkafka sends some).
    assert decode_request(body + b"\x00\x01\x02", prefix)[0] == request_obj


@settings(max_examples=300, deadline=None)
@given(
    which=st.integers(0, len(SAMPLE_REQUESTS) - 1),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), min_size=1,
                   max_size=6),
)
def test_mutated_frames_decode_or_fail_cleanly(which: int, flips: list[tuple[int, int]]) -> None:
    body = bytearray(frame_body(SAMPLE_REQUESTS[which]))
    for pos, mask in flips:
        i = 8 + pos % (len(body) - 8)  # keep the api key and version
        body[i] ^= mask
    with contextlib.suppress(DecodeError):
        decode_request(bytes(body), read_prefix(bytes(body)))


# -- dispatcher ----------------------------------------------------------------------------


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(BrokerConfig.load(overrides={"log.dirs": str(tmp_path / "data")}))
    b.logs.startup()
    b.state.serving.set()  # what start() does once it serves; these tests drive the dispatcher without it
    yield b
    b.logs.shutdown()


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_api_versions_of_a_newer_version_answers_unsupported_version_in_v0(broker: Broker) -> None:
    newest = REGISTRY[18].max_version
    # A made-up future version: its header and body cannot be parsed, and need not be.
    frame = struct.pack(">hhi", 18, newest + 1, 1234) + b"\x00\x03abc\x00garbage"
    response = run(broker.dispatcher.handle(frame, SESSION, "peer"))
    assert response is not None
    correlation_id, body = decode_response(b"".join(response)[4:], 18, 0)
    assert correlation_id == 1234
    assert body.error_code == UNSUPPORTED_VERSION
    advertised = {(k.api_key, k.min_version, k.max_version) for k in body.api_keys}
    assert advertised == {(s.api_key, *s.advertised) for s in REGISTRY.values()}


def test_api_versions_response_advertises_the_registry(broker: Broker) -> None:
    for version in range(REGISTRY[18].max_version + 1):
        response = run(broker.dispatcher.handle(
            frame_body(api_versions_request(version), correlation_id=5), SESSION, "peer"))
        assert response is not None
        cid, body = decode_response(b"".join(response)[4:], 18, version)
        assert cid == 5 and body.error_code == 0
        assert {(k.api_key, k.min_version, k.max_version) for k in body.api_keys} == {
            (s.api_key, *s.advertised) for s in REGISTRY.values()}


@pytest.mark.parametrize("api_key", sorted(k for k in REGISTRY if k != 18))
def test_unsupported_versions_close_the_connection(broker: Broker, api_key: int) -> None:
    spec = REGISTRY[api_key]
    for version in {spec.min_version - 1, spec.max_version + 1, -1, 32767}:
        frame = struct.pack(">hhi", api_key, version, 1) + b"\x00\x00"
        with pytest.raises(CloseConnection):
            run(broker.dispatcher.handle(frame, SESSION, "peer"))


@pytest.mark.parametrize("api_key", [k for k in (-1, 1000, 32767, 67) if k not in REGISTRY])
def test_unknown_api_keys_close_the_connection(broker: Broker, api_key: int) -> None:
    with pytest.raises(CloseConnection):
        run(broker.dispatcher.handle(struct.pack(">hhi", api_key, 0, 1), SESSION, "peer"))


# -- connection protocol with a fake transport -----------------------------------------------


async def drive(broker: Broker, chunks: list[bytes], max_request_bytes: int = 1 << 20
                ) -> tuple[FakeTransport, KafkaProtocol]:
    """Feed ``chunks`` to a connection and return once it has answered every whole request
    it read (idle: nothing queued, nothing in progress; the answer is written before the
    worker leaves a request) or has closed the connection."""
    transport = FakeTransport()
    protocol = KafkaProtocol(broker.dispatcher, max_request_bytes, set())
    protocol.connection_made(transport)  # type: ignore[arg-type]
    for chunk in chunks:
        protocol.data_received(chunk)
        await asyncio.sleep(0)
    deadline = asyncio.get_running_loop().time() + 30  # a hang guard
    while not (protocol.idle or transport.closed):
        assert asyncio.get_running_loop().time() < deadline, "the connection neither answered nor closed"
        await asyncio.sleep(0.001)
    protocol.connection_lost(None)
    return transport, protocol


def test_pipelined_requests_are_answered_in_order(broker: Broker) -> None:
    requests = [api_versions_request(3), metadata_request(12, None), api_versions_request(0),
                list_offsets_request("nope", 0, -1), metadata_request(1, [])]
    data = b"".join(encode_request(100 + i, r, "c") for i, r in enumerate(requests))
    for chunking in (lambda d: [d], lambda d: [d[i : i + 1] for i in range(len(d))],
                     lambda d: [d[:5], d[5:77], d[77:]]):
        transport, _ = run(drive(broker, chunking(data)))
        frames = transport.frames()
        assert [struct.unpack_from(">i", f)[0] for f in frames] == [100, 101, 102, 103, 104]
        assert not transport.closed or len(frames) == 5


@pytest.mark.parametrize("size", [-1, -(2**31), 1025])
def test_frame_size_outside_limits_closes_the_connection(broker: Broker, size: int) -> None:
    good = encode_request(1, api_versions_request(0), "c")
    transport, _ = run(drive(broker, [good, struct.pack(">i", size) + b"\x00" * 16],
                             max_request_bytes=1024))
    assert transport.closed
    assert [struct.unpack_from(">i", f)[0] for f in transport.frames()] == [1]


def test_malformed_frame_closes_after_earlier_answers(broker: Broker) -> None:
    good = encode_request(1, api_versions_request(0), "c")
    bad = encode_request(2, metadata_request(12, ["x"]), "c")
    bad = bad[:-3]
    bad = struct.pack(">i", len(bad) - 4) + bad[4:]
    later = encode_request(3, api_versions_request(0), "c")
    transport, _ = run(drive(broker, [good + bad + later]))
    assert transport.closed
    assert [struct.unpack_from(">i", f)[0] for f in transport.frames()] == [1]


def test_acks_zero_produce_gets_no_response(broker: Broker) -> None:
    broker.logs.create_topic("t", 1)
    produce = encode_request(1, produce_request("t", 0, simple_batch([b"a"]), acks=0), "c")
    ping = encode_request(2, api_versions_request(0), "c")
    transport, _ = run(drive(broker, [produce + ping]))
    assert [struct.unpack_from(">i", f)[0] for f in transport.frames()] == [2]
    plog = broker.logs.get_log("t", 0)
    assert plog is not None and plog.log_end_offset == 1


def test_api_key_enum_is_kios_index() -> None:
    """One ApiKey for broker and client: Kafka's names and numbers, all of kio's APIs."""
    from kio.index import api_key_map

    from eoslog.protocol.api_keys import ApiKey

    assert {k.value: k.name.lower() for k in ApiKey} == dict(api_key_map)
    assert all(isinstance(spec.api_key, ApiKey) for spec in REGISTRY.values())


def test_describe_transactions_reads_kafkas_minus_one_start_time() -> None:
    """Kafka answers TransactionStartTimeMs -1 with no transaction in progress; kio 0.6.5's class
    cannot read it, eoslog's copy reads it as None and writes None as the same -1."""
    m = response_types(65, 0)

    def state(start: datetime.datetime | None) -> Any:
        return m.TransactionState(
            error_code=ErrorCode.none, transactional_id="t", transaction_state="Empty" if start is None else "Ongoing",
            transaction_timeout=datetime.timedelta(seconds=60), transaction_start_time=start,
            producer_id=7, producer_epoch=1, topics=(m.TopicData(topic="a", partitions=(0, 2)),))

    started = datetime.datetime.fromtimestamp(1_700_000_000.123, datetime.UTC)
    frame = encode_response(9, m.DescribeTransactionsResponse(
        throttle_time=datetime.timedelta(0), transaction_states=(state(None), state(started))), 65)
    assert struct.pack(">q", -1) in frame  # the bytes Kafka sends
    cid, resp = decode_response(frame[4:], 65, 0)
    assert cid == 9
    assert [s.transaction_start_time for s in resp.transaction_states] == [None, started]
    assert resp.transaction_states[1].topics[0].partitions == (0, 2)

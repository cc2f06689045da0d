"""BrokerConnection against a scripted fake broker on a loopback socket.

Covers what a real eoslog broker never does: answering ApiVersions with
UNSUPPORTED_VERSION (the KIP-511 fallback), a wrong correlation id, silence (timeout),
and dropping the connection (one reconnect for read-only requests only).
"""

from __future__ import annotations

import datetime
import socket
import struct
import threading
from collections.abc import Callable, Iterator

import pytest

from eoslog.client.connection import (
    ApiKey,
    BrokerConnection,
    KafkaConnectionError,
    KafkaProtocolError,
    build,
    request_types,
)
from eoslog.protocol.codec import decode_request, encode_response, read_prefix
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import response_types

# A reply function gets (api key, version, correlation id, request) and returns the
# frame to send, None to send nothing, or b"" to close the connection.
Reply = Callable[[int, int, int, object], bytes | None]


class FakeBroker:
    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.requests: list[tuple[int, int]] = []
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            while True:
                head = _recv(conn, 4)
                if head is None:
                    return
                frame = _recv(conn, struct.unpack(">i", head)[0])
                if frame is None:
                    return
                prefix = read_prefix(frame)
                request, _ = decode_request(frame, prefix)
                self.requests.append((prefix.api_key, prefix.api_version))
                out = self.reply(prefix.api_key, prefix.api_version, prefix.correlation_id, request)
                if out == b"":
                    return
                if out is not None:
                    conn.sendall(out)

    def close(self) -> None:
        self.server.close()


def _recv(conn: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def api_versions_response(version: int, correlation_id: int, ranges: dict[int, tuple[int, int]],
                          error: ErrorCode = ErrorCode.none) -> bytes:
    m = response_types(ApiKey.API_VERSIONS, version)
    body = build(
        m.ApiVersionsResponse, error_code=error, throttle_time=datetime.timedelta(0),
        api_keys=tuple(build(m.ApiVersion, api_key=k, min_version=lo, max_version=hi)
                       for k, (lo, hi) in sorted(ranges.items())),
    )
    return encode_response(correlation_id, body, ApiKey.API_VERSIONS)


def metadata_response(version: int, correlation_id: int) -> bytes:
    m = response_types(ApiKey.METADATA, version)
    body = build(m.MetadataResponse, throttle_time=datetime.timedelta(0), brokers=(),
                 cluster_id="c", controller_id=0, topics=(), cluster_authorized_operations=0)
    return encode_response(correlation_id, body, ApiKey.METADATA)


OLD_BROKER = {ApiKey.API_VERSIONS: (0, 2), ApiKey.METADATA: (1, 9), ApiKey.PRODUCE: (3, 7)}


def old_broker_reply(api_key: int, version: int, cid: int, request: object) -> bytes | None:
    """A broker that knows ApiVersions up to v2 only, Metadata up to v9."""
    if api_key == ApiKey.API_VERSIONS:
        if version > 2:  # Kafka answers in v0 format with its ranges
            return api_versions_response(0, cid, OLD_BROKER, ErrorCode.unsupported_version)
        return api_versions_response(version, cid, OLD_BROKER)
    return metadata_response(version, cid)


@pytest.fixture
def fake() -> Iterator[Callable[[Reply], FakeBroker]]:
    started: list[FakeBroker] = []

    def start(reply: Reply) -> FakeBroker:
        started.append(FakeBroker(reply))
        return started[-1]

    yield start
    for f in started:
        f.close()


def metadata_request(conn: BrokerConnection) -> object:
    m = request_types(ApiKey.METADATA, conn.pick_version(ApiKey.METADATA, 12))
    return build(m.MetadataRequest, topics=None, allow_auto_topic_creation=False,
                 include_cluster_authorized_operations=False,
                 include_topic_authorized_operations=False)


def test_api_versions_falls_back_to_the_brokers_version(fake: Callable[[Reply], FakeBroker]) -> None:
    broker = fake(old_broker_reply)
    with BrokerConnection("127.0.0.1", broker.port, timeout_s=10).connect() as conn:
        assert conn.api_versions == OLD_BROKER
        assert [v for k, v in broker.requests if k == ApiKey.API_VERSIONS][-1] == 2
        assert broker.requests[0][1] > 2  # it tried its newest first
        assert conn.pick_version(ApiKey.METADATA, 12) == 9
        assert conn.pick_version(ApiKey.METADATA, 5) == 5
        with pytest.raises(KafkaProtocolError) as e:
            conn.pick_version(ApiKey.METADATA, 12, wanted_min=10)
        assert e.value.error_code == ErrorCode.unsupported_version
        with pytest.raises(KafkaProtocolError):
            conn.pick_version(ApiKey.FETCH, 12)  # not advertised at all
        response = conn.send(metadata_request(conn))
        assert response.cluster_id == "c"
        assert broker.requests[-1] == (ApiKey.METADATA, 9)


def test_wrong_correlation_id_is_a_connection_error(fake: Callable[[Reply], FakeBroker]) -> None:
    def reply(api_key: int, version: int, cid: int, request: object) -> bytes | None:
        if api_key == ApiKey.API_VERSIONS:
            return old_broker_reply(api_key, version, cid, request)
        return metadata_response(version, cid + 1)

    conn = BrokerConnection("127.0.0.1", fake(reply).port, timeout_s=10).connect()
    with pytest.raises(KafkaConnectionError, match="correlation id"):
        conn.send(metadata_request(conn))
    assert not conn.connected


def test_silent_broker_times_out(fake: Callable[[Reply], FakeBroker]) -> None:
    def reply(api_key: int, version: int, cid: int, request: object) -> bytes | None:
        if api_key == ApiKey.API_VERSIONS:
            return old_broker_reply(api_key, version, cid, request)
        return None

    conn = BrokerConnection("127.0.0.1", fake(reply).port, timeout_s=10).connect()
    with pytest.raises(KafkaConnectionError, match="timed out"):
        conn.send(metadata_request(conn), timeout_s=0.2)


def test_one_reconnect_for_read_only_requests_only(fake: Callable[[Reply], FakeBroker]) -> None:
    drops = {"metadata": 1, "produce": 1}

    def reply(api_key: int, version: int, cid: int, request: object) -> bytes | None:
        if api_key == ApiKey.API_VERSIONS:
            return old_broker_reply(api_key, version, cid, request)
        name = "metadata" if api_key == ApiKey.METADATA else "produce"
        if drops[name]:
            drops[name] -= 1
            return b""  # close without answering
        return metadata_response(version, cid)

    broker = fake(reply)
    conn = BrokerConnection("127.0.0.1", broker.port, timeout_s=10).connect()
    assert conn.send(metadata_request(conn)).cluster_id == "c"  # resent once, answered
    assert broker.connections == 2

    m = request_types(ApiKey.PRODUCE, conn.pick_version(ApiKey.PRODUCE, 9))
    produce = build(m.ProduceRequest, transactional_id=None, acks=1,
                    timeout=datetime.timedelta(seconds=1), topic_data=())
    with pytest.raises(KafkaConnectionError, match="closed the connection"):
        conn.send(produce)
    assert [k for k, _ in broker.requests].count(ApiKey.PRODUCE) == 1  # never resent


def test_unreachable_broker() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound but not listening: connection refused
        with pytest.raises(KafkaConnectionError, match="cannot connect"):
            BrokerConnection("127.0.0.1", port, timeout_s=5).connect()

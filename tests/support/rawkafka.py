"""A minimal blocking Kafka wire client for tests that need exact control of the bytes.

Frames are built with eoslog.protocol.codec.encode_request from kio request classes;
tests then send them as they are, corrupted, or cut short. Responses are read with
decode_response. Nothing here retries or hides an error: a closed connection shows.
"""

from __future__ import annotations

import datetime
import socket
import ssl
import struct
import time
from typing import Any

from kio.static.primitive import i8, i16, i32, i64

from eoslog.protocol.codec import decode_response, encode_request
from eoslog.protocol.messages import build, request_types
from eoslog.records import build_batch

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, CREATE_TOPICS = 0, 1, 2, 3, 18, 19
EARLIEST, LATEST = -2, -1


def request_module(api_key: int, version: int) -> Any:
    return request_types(api_key, version)


def produce_request(topic: str, partition: int, records: bytes | None, *, acks: int = -1,
                    version: int = 9, timeout_ms: int = 10_000) -> Any:
    m = request_module(PRODUCE, version)
    return m.ProduceRequest(
        transactional_id=None, acks=i16(acks), timeout=datetime.timedelta(milliseconds=timeout_ms),
        topic_data=(m.TopicProduceData(name=topic, partition_data=(
            m.PartitionProduceData(index=i32(partition), records=records),)),),
    )


def fetch_request(topic: str, partition: int, offset: int, *, max_bytes: int = 1 << 20,
                  max_wait_ms: int = 0, version: int = 12, isolation_level: int = 0) -> Any:
    m = request_module(FETCH, version)
    part = build(
        m.FetchPartition, partition=i32(partition), current_leader_epoch=i32(-1), fetch_offset=i64(offset),
        last_fetched_epoch=i32(-1), log_start_offset=i64(-1), partition_max_bytes=i32(max_bytes),
    )
    return build(
        m.FetchRequest, cluster_id=None, replica_id=i32(-1),
        max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=i32(1),
        max_bytes=i32(max_bytes), isolation_level=i8(isolation_level), session_id=i32(0),
        session_epoch=i32(-1), topics=(m.FetchTopic(topic=topic, partitions=(part,)),),
        forgotten_topics_data=(), rack_id="",
    )




def metadata_request(topics: list[str] | None, version: int = 12,
                     auto_create: bool = False) -> Any:
    """Metadata for ``topics`` (None: every topic)."""
    m = request_module(METADATA, version)
    wanted = None if topics is None else tuple(
        build(m.MetadataRequestTopic, name=t, topic_id=None) for t in topics)
    return build(m.MetadataRequest, topics=wanted, allow_auto_topic_creation=auto_create,
                 include_cluster_authorized_operations=False,
                 include_topic_authorized_operations=False)


def list_offsets_request(topic: str, partition: int, timestamp: int, version: int = 7) -> Any:
    m = request_module(LIST_OFFSETS, version)
    part = build(m.ListOffsetsPartition, partition_index=i32(partition),
                  current_leader_epoch=i32(-1), timestamp=i64(timestamp))
    return build(m.ListOffsetsRequest, replica_id=i32(-1), isolation_level=i8(0),
                  topics=(m.ListOffsetsTopic(name=topic, partitions=(part,)),))


def create_topics_request(name: str, partitions: int, configs: dict[str, str] | None = None,
                          version: int = 7) -> Any:
    m = request_module(CREATE_TOPICS, version)
    return m.CreateTopicsRequest(
        topics=(m.CreatableTopic(
            name=name, num_partitions=i32(partitions), replication_factor=i16(1),
            assignments=(),
            configs=tuple(m.CreatableTopicConfig(name=k, value=v)
                          for k, v in (configs or {}).items()),
        ),),
        timeout=datetime.timedelta(seconds=10), validate_only=False,
    )


def api_versions_request(version: int = 3) -> Any:
    m = request_module(API_VERSIONS, version)
    if version >= 3:
        return m.ApiVersionsRequest(client_software_name="eoslog-tests",
                                    client_software_version="1")
    return m.ApiVersionsRequest()


class ConnectionClosed(Exception):
    pass


class RawClient:
    """One TCP connection speaking Kafka frames, with a correlation id counter."""

    def __init__(self, bootstrap: str, timeout_s: float = 30.0, client_id: str = "raw-test",
                 tls: ssl.SSLContext | None = None) -> None:
        self.client_id = client_id
        host, port = bootstrap.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock if tls is None else tls.wrap_socket(sock, server_hostname=host)
        self.correlation_id = 0

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _read_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionClosed(f"connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def read_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._read_exact(4))
        return self._read_exact(size)

    def frame(self, request: Any) -> tuple[int, bytes]:
        self.correlation_id += 1
        return self.correlation_id, encode_request(self.correlation_id, request, self.client_id)

    def call(self, request: Any) -> Any:
        """Send a request and return the decoded response body."""
        cid, data = self.frame(request)
        self.send(data)
        got, body = decode_response(self.read_frame(), request.__api_key__, request.__version__)
        assert got == cid, f"correlation id {got}, expected {cid}"
        return body

    def closed_by_peer(self, timeout_s: float = 10.0) -> bool:
        """True once the broker closes this connection (EOF or reset) within the timeout."""
        deadline = time.monotonic() + timeout_s
        self.sock.settimeout(0.2)
        try:
            while time.monotonic() < deadline:
                try:
                    if not self.sock.recv(65536):
                        return True
                except TimeoutError:
                    continue
                except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
                    return True
            return False
        finally:
            self.sock.settimeout(30.0)


def coordinator_id(bootstrap: str, key: str, key_type: int = 1) -> int | None:
    """The node coordinating a transactional id (key type 1) or a group (0), as the broker at
    ``bootstrap`` answers FindCoordinator; None while there is none or it cannot be asked."""
    request = build(request_module(10, 4).FindCoordinatorRequest, key_type=key_type, coordinator_keys=(key,), key="")
    try:
        with RawClient(bootstrap, timeout_s=10) as client:
            c = client.call(request).coordinators[0]
    except OSError:
        return None
    return int(c.node_id) if int(c.error_code) == 0 else None


def produce(client: RawClient, topic: str, partition: int, records: bytes,
            version: int = 9) -> tuple[int, int]:
    """(error code, base offset) of one produce."""
    resp = client.call(produce_request(topic, partition, records, version=version))
    p = resp.responses[0].partition_responses[0]
    return int(p.error_code), int(p.base_offset)


def fetch(client: RawClient, topic: str, partition: int, offset: int,
          max_bytes: int = 1 << 20) -> Any:
    resp = client.call(fetch_request(topic, partition, offset, max_bytes=max_bytes))
    return resp.responses[0].partitions[0]


def list_offset(client: RawClient, topic: str, partition: int, timestamp: int) -> tuple[int, int]:
    """(error code, offset)."""
    resp = client.call(list_offsets_request(topic, partition, timestamp))
    p = resp.topics[0].partitions[0]
    return int(p.error_code), int(p.offset)


def create_topic(client: RawClient, name: str, partitions: int = 1,
                 configs: dict[str, str] | None = None) -> int:
    resp = client.call(create_topics_request(name, partitions, configs))
    return int(resp.topics[0].error_code)


def simple_batch(values: list[bytes], timestamp_ms: int | None = None) -> bytes:
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    return build_batch([(None, v, ()) for v in values], timestamp=ts)

"""Fetch responses sent with ``sendfile`` are the bytes the copying path sends.

A plaintext connection sends a Fetch's records from the segment files with ``sendfile``
(``KafkaProtocol._write``); what the socket does not take at once is read and left to the
transport, and a connection whose transport still holds bytes, or a TLS listener's, reads
every region. Here one broker answers the same pipelined Fetch requests over a real loopback
socket (uvloop's and asyncio's own loop) and through the fake transport (no socket: every region
read), and the two byte streams must be equal: read_committed with aborted transactions and an
open one holding the LSO, fetch offsets inside a batch, limits that cut between batches, a first
batch larger than the limit (KIP-74), several partitions sharing ``max_bytes``, Fetch v4 and v12,
and segment boundaries. The client reads slowly (a small receive buffer, reading only after
sending everything), so the socket takes part of a response and the rest goes through the
transport. Mutants seen caught (not committed): the remainder of a partial ``sendfile`` dropped
(the stream ends short), and the transport's pending bytes not checked before a ``sendfile``
(a later response's records overtake an earlier one's tail).
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import ssl
import struct
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvloop
from kio.static.primitive import i32, i64

from eoslog.broker import connection as connection_module
from eoslog.broker.connection import KafkaProtocol
from eoslog.broker.server import Broker
from eoslog.cli.certs import make_dev_certs
from eoslog.config import BrokerConfig
from eoslog.protocol.codec import decode_response, encode_request
from eoslog.records import build_batch
from eoslog.security.listeners import Listener, SecurityProtocol
from support.fake_transport import FakeTransport
from support.leader_log import append, append_marker
from support.rawkafka import fetch_request, request_module

T0 = int(time.time() * 1000)  # markers carry the clock's time: no roll by segment.ms between them
P1, P2, P3 = 7001, 7002, 7003


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(BrokerConfig.load(overrides={"log.dirs": str(tmp_path / "data"), "log.segment.bytes": "3000000"}))
    b.logs.startup()
    b.state.serving.set()
    fill(b)
    yield b
    b.logs.shutdown()


def value(i: int, size: int) -> bytes:
    return (b"%d:" % i).ljust(size, b"v")


def txn(pid: int, seq: int, count: int, size: int) -> bytes:
    return build_batch([(None, value(seq + i, size), ()) for i in range(count)], timestamp=T0,
                       producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True)


def fill(b: Broker) -> None:
    """t-0: 2.2k plain batches of 1-5 records (two segments); t-1: transactions, aborted and
    committed, interleaved, and one left open at the end (its LSO below the high watermark);
    t-2: a few batches larger than the fetch limits."""
    b.logs.create_topic("t", 3)
    logs = [b.logs.get_log("t", p) for p in range(3)]
    assert all(lg is not None for lg in logs)
    t0, t1, t2 = logs  # type: ignore[misc]
    for i in range(2_200):
        n = 1 + i % 5
        append(t0, build_batch([(None, value(i, 100 + (i * 37) % 900), ())] * n, timestamp=T0 + i))
    seq = {P1: 0, P2: 0, P3: 0}
    for round_ in range(30):
        for pid in (P1, P2):
            append(t1, txn(pid, seq[pid], 3, 700))
            seq[pid] += 3
        append_marker(t1, P1, 0, 0, commit=round_ % 3 == 0)
        append_marker(t1, P2, 0, 0, commit=round_ % 2 == 0)
        append(t1, build_batch([(None, value(round_, 300), ())], timestamp=T0))
    append(t1, txn(P3, 0, 4, 500))  # open: the LSO stays here
    append(t1, build_batch([(None, b"after", ())], timestamp=T0))
    for i in range(4):
        append(t2, build_batch([(None, value(i, 200_000), ())] * 5, timestamp=T0 + i))
    assert t1.last_stable_offset < t1.high_watermark


def fetch(cid: int, version: int, isolation: int, parts: list[tuple[int, int, int]], max_bytes: int) -> bytes:
    """One Fetch of (partition, offset, partition max bytes) of topic t."""
    base = fetch_request("t", 0, 0, version=version, isolation_level=isolation, max_bytes=max_bytes)
    m = request_module(1, version)
    template = base.topics[0].partitions[0]
    partitions = tuple(dataclasses.replace(template, partition=i32(p), fetch_offset=i64(o), partition_max_bytes=i32(mb))
                       for p, o, mb in parts)
    request = dataclasses.replace(base, topics=(m.FetchTopic(topic="t", partitions=partitions),))
    return encode_request(cid, request, "sendfile-test")


def requests() -> list[bytes]:
    out = []
    cases = [
        (12, 0, [(0, 0, 4 << 20), (1, 0, 1 << 20), (2, 0, 1 << 20)], 50 << 20),
        (12, 1, [(1, 0, 1 << 20)], 1 << 20),  # read_committed: aborted list, LSO bound
        (12, 1, [(1, 13, 40_000), (0, 3_001, 2 << 20)], 3 << 20),  # inside a batch, a cut limit
        (12, 0, [(2, 2, 100_000), (0, 5_000, 1 << 20)], 600_000),  # first batch over the limit (KIP-74)
        (4, 1, [(1, 100, 1 << 20), (0, 6_590, 4 << 20)], 8 << 20),  # v4; t-0 across its segments
        (12, 0, [(0, 1, 777), (1, 1, 5_000), (2, 19, 1)], 6_000),  # tiny limits, the end of t-2
        (12, 0, [(0, 0, 8 << 20)], 8 << 20),
    ]
    for i, (version, isolation, parts, max_bytes) in enumerate(cases):
        out.append(fetch(100 + i, version, isolation, parts, max_bytes))
    return out


async def through_fake_transport(broker: Broker, frames: list[bytes]) -> bytes:
    transport = FakeTransport()
    protocol = KafkaProtocol(broker.dispatcher, 1 << 20, set())
    protocol.connection_made(transport)  # type: ignore[arg-type]
    protocol.data_received(b"".join(frames))
    while not protocol.idle or len(transport.frames()) < len(frames):
        await asyncio.sleep(0.001)
    protocol.connection_lost(None)
    return bytes(transport.written)


async def through_socket(broker: Broker, frames: list[bytes], expected_bytes: int,
                         listener: Listener | None = None) -> bytes:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: KafkaProtocol(broker.dispatcher, 1 << 20, set(), listener),
                                      "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a slow reader: sendfile is cut short
    sock.connect(("127.0.0.1", port))
    sock.setblocking(False)
    try:
        for frame in frames:
            await loop.sock_sendall(sock, frame)
        return await receive(lambda: loop.sock_recv(sock, 65536), expected_bytes)
    finally:
        sock.close()
        server.close()
        await server.wait_closed()


async def receive(recv: Callable[[], Awaitable[bytes]], expected_bytes: int) -> bytes:
    """``expected_bytes`` read with ``recv``; fails if the broker closes or goes quiet first."""
    received = bytearray()
    while len(received) < expected_bytes:
        try:  # a hang guard, not a timing: a short stream leaves the reader waiting forever
            chunk = await asyncio.wait_for(recv(), 60)
        except TimeoutError:
            pytest.fail(f"nothing more after {len(received)} of {expected_bytes} bytes")
        assert chunk, f"the broker closed the connection after {len(received)} of {expected_bytes} bytes"
        received += chunk
    return bytes(received)


def split(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos + 4 <= len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        out.append(data[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return out


def frame_ids(data: bytes) -> list[int]:
    out, pos = [], 0
    while pos + 8 <= len(data):
        size, cid = struct.unpack_from(">ii", data, pos)
        out.append(cid)
        pos += 4 + size
    return out


LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "uvloop": uvloop.new_event_loop, "asyncio": asyncio.new_event_loop}


def run_on(loop_name: str, coro: Any) -> Any:
    loop = LOOPS[loop_name]()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_sendfile_sends_the_bytes_the_copying_path_sends(broker: Broker, loop_name: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    frames = requests()
    reference = run_on(loop_name, through_fake_transport(broker, frames))
    assert frame_ids(reference) == [100 + i for i in range(len(frames))]
    # The read_committed case is one: aborted transactions listed, records held below the LSO.
    committed = decode_response(split(reference)[1], 1, 12)[1].responses[0].partitions[0]
    assert committed.aborted_transactions and committed.last_stable_offset < committed.high_watermark
    sent: list[int] = []
    real = connection_module.os.sendfile

    def counting(out_fd: int, in_fd: int, offset: int, count: int) -> int:
        n = real(out_fd, in_fd, offset, count)
        sent.append(n)
        return n

    monkeypatch.setattr(connection_module.os, "sendfile", counting)
    received = run_on(loop_name, through_socket(broker, frames, len(reference)))
    assert received == reference
    assert sum(sent) > 0, "no record went out with sendfile"


def test_a_tls_listener_reads_every_region(broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule, on a plain socket: a connection of a TLS listener never calls sendfile (TLS
    encrypts in the process, so the bytes must be read); its answers are the same bytes."""
    frames = requests()[:3]
    reference = run_on("uvloop", through_fake_transport(broker, frames))
    calls: list[int] = []
    monkeypatch.setattr(connection_module.os, "sendfile", lambda *a: calls.append(1) or 0)
    tls = Listener("SSL", SecurityProtocol.SSL, "127.0.0.1", 0)
    assert run_on("uvloop", through_socket(broker, frames, len(reference), tls)) == reference
    assert calls == []


class HeldTransport(FakeTransport):
    """A transport over a real socket whose writes wait in its buffer until ``flush``: as a
    transport does while the peer reads slowly."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self.sock = sock
        self.pending = bytearray()

    def write(self, data: bytes) -> None:
        self.pending += data

    def get_write_buffer_size(self) -> int:
        return len(self.pending)

    def get_extra_info(self, name: str) -> Any:
        return self.sock if name == "socket" else super().get_extra_info(name)

    def flush(self) -> None:
        self.sock.setblocking(True)
        self.sock.sendall(self.pending)
        self.pending.clear()


def test_records_never_overtake_bytes_the_transport_still_holds(broker: Broker) -> None:
    """A response waiting in the transport (an ApiVersions answer here) leaves before a later
    Fetch's records: with bytes pending, the Fetch's regions are read and queued behind them."""
    from support.rawkafka import api_versions_request

    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    received = bytearray()

    def read_all() -> None:
        while chunk := theirs.recv(1 << 16):
            received.extend(chunk)

    frames = [encode_request(1, api_versions_request(3), "c"), *requests()[:2]]

    async def serve() -> None:
        transport = HeldTransport(ours)
        protocol = KafkaProtocol(broker.dispatcher, 1 << 20, set())
        protocol.connection_made(transport)  # type: ignore[arg-type]
        protocol.data_received(b"".join(frames))
        while not protocol.idle:
            await asyncio.sleep(0.001)
        reader = asyncio.get_running_loop().run_in_executor(None, read_all)
        transport.flush()
        ours.shutdown(socket.SHUT_WR)
        await reader

    run_on("uvloop", serve())
    assert frame_ids(bytes(received)) == [1, 100, 101]
    reference = run_on("uvloop", through_fake_transport(broker, frames))
    assert bytes(received) == reference
    ours.close()
    theirs.close()


async def through_tls(broker: Broker, frames: list[bytes], expected_bytes: int, certs: Path) -> bytes:
    """The frames sent over a real TLS connection; the decrypted bytes the broker answered."""
    loop = asyncio.get_running_loop()
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(str(certs / "broker.pem"))
    tls = Listener("SSL", SecurityProtocol.SSL, "127.0.0.1", 0)
    server = await loop.create_server(lambda: KafkaProtocol(broker.dispatcher, 1 << 20, set(), tls),
                                      "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=ssl.create_default_context(cafile=str(certs / "ca.pem")), server_hostname="localhost")
    try:
        for frame in frames:
            writer.write(frame)
        await writer.drain()
        return await receive(lambda: reader.read(65536), expected_bytes)
    finally:
        writer.close()
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_tls_pieces_are_the_bytes_the_copying_path_sends(broker: Broker, loop_name: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Over real TLS a response goes to the transport in pieces (``_tls_pieces``: small buffers
    joined, large ones and file regions cut to TLS_WRITE_BYTES, regions read piece by piece);
    decrypted, the stream is byte for byte the fake transport's. Every piece is at most
    TLS_WRITE_BYTES and the 200 KB batches of t-2 and multi-MB responses are cut. Mutants seen
    caught (not committed): the last run of small buffers not written (a short stream), a
    region's slices read from its start each time (wrong bytes)."""
    make_dev_certs(tmp_path / "certs", clients=())
    monkeypatch.setattr(connection_module, "TLS_WRITE_BYTES", 100_000)  # below t-2's batches too
    frames = requests()
    reference = run_on(loop_name, through_fake_transport(broker, frames))
    pieces: list[int] = []
    real = connection_module._tls_pieces

    def counting(chunks: list[Any]) -> Iterator[Any]:
        for piece in real(chunks):
            pieces.append(len(piece))
            yield piece

    monkeypatch.setattr(connection_module, "_tls_pieces", counting)
    received = run_on(loop_name, through_tls(broker, frames, len(reference), tmp_path / "certs"))
    assert received == reference
    assert max(pieces) == 100_000 and len(pieces) > len(frames)

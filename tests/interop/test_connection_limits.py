"""max.connections, max.connections.per.ip (with its overrides) as Kafka enforces them, run on
eoslog and on Apache Kafka 4.4 alike.

- An address at its ``max.connections.per.ip`` (or its override) has its next connection closed
  at once; once one of its connections closes, it connects again.
- At ``max.connections`` a new connection is not served: its request stays unread in the kernel
  (the broker's side of the socket holds it, ``/proc/net/tcp``'s rx_queue) and gets its answer
  once another connection closes. Kafka's acceptor stops accepting; eoslog accepts and does not
  read: the client sees the same.
- The inter-broker listener is not held by ``max.connections`` (eoslog only here: the harness's
  Kafka has one client listener): its connection is served and the least recently active
  connection of another listener is closed.
- ``max.connections.per.ip=0`` without overrides refuses to start, with Kafka's message.
- (eoslog only) Clients' sockets cannot take the descriptors the broker keeps for its logs: under
  a low descriptor limit, connections opened until the broker closes the next one at once leave
  acks=all produce (each needs a descriptor for its fsync round) acknowledged throughout.

Nothing here is timed: each wait is for an observable condition (a closed socket, bytes held by
the kernel, an answer), with a hang guard.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from clients import RawConnection, request_module

from support.harness import BrokerProcess, free_port, wait_until
from support.kafka_harness import AnyBroker, start_broker
from support.rawkafka import LATEST, RawClient, create_topic, list_offset, produce, simple_batch

KINDS = ["eoslog", "kafka"]


def api_versions(conn: RawConnection) -> bool:
    body = conn.call(request_module(18, 0).ApiVersionsRequest())
    return int(body.error_code) == 0


def connect(bootstrap: str) -> RawConnection:
    return RawConnection(bootstrap, timeout_s=60)


def served(bootstrap: str) -> bool:
    """A new connection is answered (and closed again)."""
    try:
        with connect(bootstrap) as conn:
            return api_versions(conn)
    except (ConnectionError, OSError):
        return False


def open_served(bootstrap: str) -> RawConnection:
    """A connection the broker answers: an earlier connection's close may not have been counted
    yet (Kafka's processor counts it when it sees it), so a rejected try is tried again."""
    opened: list[RawConnection] = []

    def attempt() -> bool:
        conn = connect(bootstrap)
        try:
            if api_versions(conn):
                opened.append(conn)
                return True
        except (ConnectionError, OSError):
            pass
        conn.close()
        return False

    wait_until(attempt, f"a connection to {bootstrap} answered")
    return opened[0]


def unread_bytes(server_port: int, client_port: int) -> int:
    """What the broker's side of the connection from ``client_port`` holds unread (its
    rx_queue in /proc/net/tcp or tcp6), or -1 while the kernel shows no such socket."""
    lines = [line for table in ("tcp", "tcp6") for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]]
    for line in lines:  # a JVM's socket on 127.0.0.1 may be an IPv6 one (::ffff:127.0.0.1)
        fields = line.split()
        local, remote, queues = fields[1], fields[2], fields[4]
        if int(local.split(":")[1], 16) == server_port and int(remote.split(":")[1], 16) == client_port:
            return int(queues.split(":")[1], 16)
    return -1


@pytest.fixture
def stop_after() -> Iterator[list[AnyBroker]]:
    started: list[AnyBroker] = []
    yield started
    for b in started:
        b.stop()


def start(kind: str, root: Path, started: list[AnyBroker], **overrides: str) -> AnyBroker:
    broker = start_broker(kind, root, overrides)
    started.append(broker)
    return broker


@pytest.mark.parametrize("kind", KINDS)
def test_a_connection_beyond_its_address_maximum_is_closed(kind: str, tmp_path: Path,
                                                           stop_after: list[AnyBroker]) -> None:
    broker = start(kind, tmp_path, stop_after, **{"max.connections.per.ip": "2"})
    first, second = open_served(broker.bootstrap), open_served(broker.bootstrap)
    third = connect(broker.bootstrap)
    wait_until(third.closed_by_peer, "the broker closing the third connection from 127.0.0.1")
    assert api_versions(first) and api_versions(second)  # the first two are untouched
    first.close()
    wait_until(lambda: served(broker.bootstrap), "a connection served again once one of the two closed")
    second.close()
    if kind == "eoslog":
        assert ("Rejected connection from 127.0.0.1, address already has the configured maximum of 2 "
                "connections.") in broker.log_text()


@pytest.mark.parametrize("kind", KINDS)
def test_an_override_replaces_the_address_maximum(kind: str, tmp_path: Path, stop_after: list[AnyBroker]) -> None:
    """Every address but localhost may have no connection; localhost (127.0.0.1) three. The
    other address is 127.0.0.2, which reaches the listener on 127.0.0.1 over loopback too. (A
    Kafka node's own connections to its controller listener come from 127.0.0.1 and count under
    the same override: three leave it room.)"""
    broker = start(kind, tmp_path, stop_after,
                   **{"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "localhost:3"})
    host, port = broker.bootstrap.rsplit(":", 1)
    elsewhere = RawConnection.__new__(RawConnection)
    elsewhere.sock = socket.create_connection((host, int(port)), timeout=60, source_address=("127.0.0.2", 0))
    wait_until(elsewhere.closed_by_peer, "the broker closing a connection from 127.0.0.2 (maximum 0)")
    mine = [open_served(broker.bootstrap) for _ in range(3)]
    extra = connect(broker.bootstrap)
    wait_until(extra.closed_by_peer, "the broker closing a fourth connection from localhost")
    assert all(api_versions(c) for c in mine)
    for c in mine:
        c.close()


@pytest.mark.parametrize("kind", KINDS)
def test_at_max_connections_a_new_connection_waits_unread_until_one_closes(
        kind: str, tmp_path: Path, stop_after: list[AnyBroker]) -> None:
    broker = start(kind, tmp_path, stop_after, **{"max.connections": "2"})
    wait_until(lambda: served(broker.bootstrap), "the broker answering")
    port = int(broker.bootstrap.rsplit(":", 1)[1])
    first, second = connect(broker.bootstrap), connect(broker.bootstrap)
    assert api_versions(first) and api_versions(second)
    waiting = connect(broker.bootstrap)
    request = request_module(18, 0).ApiVersionsRequest()
    waiting.send(request)
    client_port = waiting.sock.getsockname()[1]
    wait_until(lambda: unread_bytes(port, client_port) > 0, "the waiting request held unread by the kernel",
               describe=lambda: unread_bytes(port, client_port))
    assert api_versions(first) and api_versions(second)  # the broker serves the others meanwhile
    assert unread_bytes(port, client_port) > 0
    waiting.sock.setblocking(False)
    with pytest.raises(BlockingIOError):
        waiting.sock.recv(1)  # no answer
    waiting.sock.setblocking(True)
    first.close()
    _, body = waiting.receive(request)  # answered once a slot is free
    assert int(body.error_code) == 0
    waiting.close()
    second.close()


def test_the_inter_broker_listener_is_served_and_the_least_recent_other_connection_goes(
        tmp_path: Path, stop_after: list[AnyBroker]) -> None:
    client_port, internal_port = free_port(), free_port()
    broker = BrokerProcess(tmp_path / "data", overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{client_port},INTERNAL://127.0.0.1:{internal_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL", "max.connections": "2"}).start()
    stop_after.append(broker)
    clients = f"127.0.0.1:{client_port}"
    wait_until(lambda: served(clients), "the broker answering")
    older, newer = connect(clients), connect(clients)
    assert api_versions(older) and api_versions(newer)  # older is now the least recently active
    with connect(f"127.0.0.1:{internal_port}") as internal:
        assert api_versions(internal)
        wait_until(older.closed_by_peer, "the least recently active client connection closed")
        assert api_versions(newer)
    newer.close()


def test_per_ip_zero_without_overrides_refuses_to_start(tmp_path: Path) -> None:
    port = free_port()
    result = subprocess.run([sys.executable, "-m", "eoslog", "broker", "--data-dir", str(tmp_path / "data"),
                             "--listen", f"127.0.0.1:{port}", "-o", "max.connections.per.ip=0"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result
    assert ("max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property is set."
            in result.stderr), result.stderr
    assert "Traceback" not in result.stderr
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0  # never listened


DESCRIPTOR_LIMIT = 600  # the broker keeps the top 64 (a tenth, at least 64) for its logs


def answered_connection(bootstrap: str) -> RawConnection | None:
    """A new connection's ApiVersions answered (the connection, left open), or None when the
    broker closed it unanswered."""
    conn = connect(bootstrap)
    try:
        if api_versions(conn):
            return conn
    except (ConnectionError, OSError):
        pass
    conn.close()
    return None


def test_clients_sockets_cannot_take_the_descriptors_the_logs_need(tmp_path: Path) -> None:
    """Before: the sockets took every descriptor, the next fsync round's dup failed with EMFILE,
    the log directory went offline and the broker halted."""
    broker = BrokerProcess(tmp_path / "data", prefix=["prlimit", f"--nofile={DESCRIPTOR_LIMIT}", "--"]).start()
    idle: list[RawConnection] = []
    try:
        with RawClient(broker.bootstrap) as client:
            assert create_topic(client, "kept", 1) == 0
            wait_until(lambda: produce(client, "kept", 0, simple_batch([b"first"]))[0] == 0, "a first produce")
            acknowledged = 1
            refused = False
            while not refused:
                assert len(idle) < DESCRIPTOR_LIMIT, "every descriptor went to a socket"
                sock = answered_connection(broker.bootstrap)
                if sock is None:
                    refused = True
                else:
                    idle.append(sock)
                if len(idle) % 50 == 0 or refused:
                    assert produce(client, "kept", 0, simple_batch([b"%d" % len(idle)])) == (0, acknowledged)
                    acknowledged += 1
            for i in range(5):  # at the ceiling, durable produce goes on
                assert produce(client, "kept", 0, simple_batch([b"more %d" % i])) == (0, acknowledged)
                acknowledged += 1
            assert broker.alive()
            assert "Rejected connection from 127.0.0.1: the broker keeps its last" in broker.log_text()
            assert list_offset(client, "kept", 0, LATEST) == (0, acknowledged)
            for sock in idle[: len(idle) // 2]:
                sock.close()
            wait_until(lambda: (s := answered_connection(broker.bootstrap)) is not None and idle.append(s) is None,
                       "a connection answered again once others closed")
    finally:
        for sock in idle:
            sock.close()
        broker.stop()

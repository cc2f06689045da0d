"""connections.max.idle.ms: the broker closes a connection that has neither read nor written
for longer than that, as Kafka's Selector does; a connection in use stays, and so does one
whose request is still being answered (a long-poll fetch waiting longer than the limit).
Clients reconnect on their own.

The broker runs with a one-second limit. Waiting loops are hang guards; the only thing
compared is which connection the broker closed first.
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Iterator

import pytest
from clients import RawConnection, request_module
from confluent_kafka import Producer

from eoslog.client import Admin, NewTopic
from support.harness import BrokerProcess, wait_until

IDLE_MS = 1000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("idle") / "data",
                      overrides={"connections.max.idle.ms": str(IDLE_MS)}).start()
    yield b
    if b.alive():
        b.stop()


def api_versions(conn: RawConnection) -> None:
    body = conn.call(request_module(18, 0).ApiVersionsRequest())
    assert int(body.error_code) == 0


def test_an_idle_connection_is_closed_and_a_busy_one_is_not(broker: BrokerProcess) -> None:
    idle, busy = RawConnection(broker.bootstrap), RawConnection(broker.bootstrap)
    api_versions(idle)
    stop = threading.Event()
    busy_errors: list[BaseException] = []

    def keep_busy() -> None:
        try:
            while not stop.is_set():
                api_versions(busy)
                time.sleep(IDLE_MS / 10_000)
        except BaseException as e:
            busy_errors.append(e)

    worker = threading.Thread(target=keep_busy, daemon=True)
    worker.start()
    try:
        wait_until(idle.closed_by_peer, "the broker closing the idle connection", timeout_s=60)
        assert not busy_errors, busy_errors
    finally:
        stop.set()
        worker.join(30)
    api_versions(busy)  # still open after the idle one went
    idle.close()
    busy.close()


def test_a_request_answered_after_the_limit_keeps_its_connection(broker: BrokerProcess) -> None:
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic("idle-fetch", 1)])
    wait_ms = 3 * IDLE_MS
    m = request_module(1, 12)
    fetch = m.FetchRequest(
        cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(milliseconds=wait_ms),
        min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
        topics=(m.FetchTopic(topic="idle-fetch", partitions=(m.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
            partition_max_bytes=1 << 20),)),),
        forgotten_topics_data=(), rack_id="",
    )
    with RawConnection(broker.bootstrap) as conn:
        body = conn.call(fetch)  # waits the whole max_wait: nothing is produced
        assert int(body.responses[0].partitions[0].error_code) == 0
        api_versions(conn)


def test_clients_reconnect_after_an_idle_close(broker: BrokerProcess) -> None:
    probe = RawConnection(broker.bootstrap)
    api_versions(probe)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    delivered: list[int] = []
    for _ in range(2):
        p.produce("idle-clients", b"v",
                  on_delivery=lambda err, msg: delivered.append(msg.offset()) if err is None else None)
        assert p.flush(30) == 0
        # Every connection of the producer has been quiet at least as long as the probe's.
        wait_until(probe.closed_by_peer, "the broker closing idle connections", timeout_s=60)
        probe = RawConnection(broker.bootstrap)
        api_versions(probe)
    assert delivered == [0, 1]
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        wait_until(probe.closed_by_peer, "the broker closing idle connections", timeout_s=60)
        assert "idle-clients" in admin.list_topics()  # the admin's connection was closed too
    probe.close()


def test_thousands_of_idle_connections_are_all_closed(broker: BrokerProcess) -> None:
    """The sweep yields to the loop every IDLE_SWEEP_SLICE (1,000) connections: every one of
    2,500 idle connections is still closed, and the broker keeps answering meanwhile."""
    conns: list[RawConnection] = []
    try:
        for _ in range(2500):  # each answered at once, before the limit passes
            conns.append(conn := RawConnection(broker.bootstrap))
            api_versions(conn)
        for conn in conns:
            wait_until(conn.closed_by_peer, "the broker closing every idle connection", timeout_s=60)
        with RawConnection(broker.bootstrap) as fresh:
            api_versions(fresh)
    finally:
        for conn in conns:
            conn.close()

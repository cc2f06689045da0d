"""Issue 13, test 4 (producers): librdkafka, kafka-python, aiokafka and eoslog.client
idempotent producers (acks=all) write while, in turn, the partitions' leader is killed with
SIGKILL, another broker shuts down cleanly (controlled shutdown) and leadership moves back to
the preferred replicas: every acknowledged record is in the log exactly once, in send order.
(Transactional producers and read_committed group consumers through coordinator moves run in
test_cluster_transactions.py and the cluster scenarios of tests/chaos/test_copy.py.)"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster_harness import Cluster, create_topic, read_all
from eoslog.client import Producer
from eoslog.client.admin import Admin, ElectionType
from harness import wait_until
from history import OK, History, check

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "interop"))
from clients import AIOKAFKA, CONFLUENT, KAFKA_PYTHON, Record, produce

CHUNK = 200
EOSLOG = "eoslog"
IDEMPOTENT = {
    CONFLUENT: {"enable.idempotence": True, "max.in.flight.requests.per.connection": 5},
    KAFKA_PYTHON: {"enable_idempotence": True, "max_in_flight_requests_per_connection": 5},
    AIOKAFKA: {"enable_idempotence": True},
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("clients")).start()
    yield c
    c.stop()


def _produce(client: str, cluster: Cluster, topic: str, values: list[bytes]) -> None:
    if client == EOSLOG:
        with Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                       "delivery.timeout.ms": 120000}) as producer:
            futures = [producer.send(topic, v, partition=i % 2) for i, v in enumerate(values)]
            producer.flush(180)
        for f in futures:
            f.result(0)
        return
    records = [Record(None, v, partition=i % 2) for i, v in enumerate(values)]
    produce(client, cluster.bootstrap, topic, records, config=IDEMPOTENT[client], timeout_s=180)


@pytest.mark.parametrize("client", [CONFLUENT, KAFKA_PYTHON, AIOKAFKA, EOSLOG])
def test_idempotent_producer_rides_through_leader_changes(cluster: Cluster, client: str) -> None:
    topic = f"ride-{client}"
    create_topic(cluster.any_alive().bootstrap, topic, assignment={0: [1, 2, 3], 1: [2, 3, 1]},
                 configs={"min.insync.replicas": "2"})
    sent: list[bytes] = []
    failure: list[BaseException] = []
    done = threading.Event()

    def write() -> None:
        """Chunks of CHUNK records, one producer each, until the leader changes are over."""
        try:
            while not done.is_set():
                chunk = [f"{client}-{len(sent) + i}".encode() for i in range(CHUNK)]
                _produce(client, cluster, topic, chunk)
                sent.extend(chunk)
        except BaseException as e:
            failure.append(e)

    writer = threading.Thread(target=write)
    writer.start()
    progress: list[int] = []

    def writing() -> None:
        """The writer acknowledged more since the last change: it was writing through it."""
        wait_until(lambda: len(sent) > (progress[-1] if progress else 0) or bool(failure), "the writer", 120)
        progress.append(len(sent))

    writing()
    cluster.brokers[1].kill()  # partition 0's leader
    cluster.wait_for(lambda m: m.topics[topic][0].leader in (2, 3), "a new leader of partition 0", 60, via=2)
    cluster.brokers[1].start()
    cluster.wait_for(lambda m: len(m.topics[topic][0].isr) == 3, "broker 1 back in the ISR", 90)
    writing()
    assert cluster.brokers[2].stop() == 0  # partition 1's leader: controlled shutdown
    cluster.brokers[2].start()
    cluster.wait_for(lambda m: all(len(p.isr) == 3 for p in m.topics[topic].values()), "the ISRs whole", 90)
    writing()
    with Admin({"bootstrap.servers": cluster.bootstrap}) as admin:
        admin.elect_leaders(ElectionType.PREFERRED, None)
    writing()
    done.set()
    writer.join(240)
    assert not writer.is_alive()
    assert not failure, failure[0]
    history = History()
    for v in sent:
        history.send(v, OK)
    for p in (0, 1):
        records = read_all(cluster.bootstrap, topic, p)
        history.final_read(p, records)
        assert [v for _, v in records] == [v for i, v in enumerate(sent) if i % 2 == p]  # send order
    report = check(history)
    print(report.summary())
    assert report.ok, report.summary()

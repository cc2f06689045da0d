"""A cluster with ``log.flush.policy=group-commit`` (issue 14's policy, chosen explicitly; a
cluster's default too since issue 28): a partition leader answers WriteTxnMarkers only once its markers
are replicated to the ISR, and a transaction whose markers go to leaders on other brokers
still completes. The coordinator's markers and its followers' fetches to the same broker
travel on separate connections (a broker serves one request at a time per connection): on
one connection the follower's next fetch waited behind the WriteTxnMarkers that needed it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from eoslog.client import Producer
from eoslog.protocol.errors import ErrorCode
from support.cluster_harness import Cluster, create_topic, read_all

TOPIC = "gc-out"
PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("group-commit"), overrides={"log.flush.policy": "group-commit"}).start()
    result = create_topic(c.any_alive().bootstrap, TOPIC, partitions=PARTITIONS, replication_factor=3,
                          configs={"min.insync.replicas": "2"})
    assert result.error_code == ErrorCode.none
    yield c
    c.stop()


def test_transactions_commit_with_markers_on_other_brokers(cluster: Cluster) -> None:
    leaders = {p.leader for p in cluster.metadata([TOPIC]).topics[TOPIC].values()}
    assert len(leaders) > 1  # markers go to more than one broker, some not the coordinator
    sent: list[bytes] = []
    with Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "gc",
                   "transaction.timeout.ms": 60000}) as producer:
        producer.init_transactions(60)
        for t in range(3):
            producer.begin_transaction()
            values = [f"gc-{t}-{i}".encode() for i in range(2 * PARTITIONS)]
            for i, v in enumerate(values):
                producer.send(TOPIC, v, partition=i % PARTITIONS)
            # Each commit is answered only after every partition's marker is replicated (the
            # marker wait of group commit); a marker request stuck ahead of a follower's fetch
            # held the commit until the marker request timed out and was retried.
            producer.commit_transaction(60)
            sent += values
    read = [v for p in range(PARTITIONS) for _, v in read_all(cluster.bootstrap, TOPIC, p)]
    assert sorted(read) == sorted(sent)
    isr = {p: m.isr for p, m in cluster.metadata([TOPIC]).topics[TOPIC].items()}
    assert all(len(r) == 3 for r in isr.values()), isr  # no follower dropped for waiting behind a marker

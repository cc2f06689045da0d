"""The reference harness itself: eoslog, a Kafka node and a 3-node Kafka cluster behind one
interface — start, write, ``kill -9``, restart on the same data, read back what was acknowledged."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from eoslog.records import decode_records, iter_batch_headers
from support import rawkafka as raw
from support.harness import wait_until
from support.kafka_harness import KINDS, AnyBroker, KafkaCluster, cluster_marked, start_broker


@pytest.fixture(scope="module", params=cluster_marked(KINDS))
def any_broker(request: pytest.FixtureRequest,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[AnyBroker]:
    b = start_broker(request.param, tmp_path_factory.mktemp(request.param))
    yield b
    b.kill()  # nothing is checked after: no controlled shutdown to wait for


def leader_bootstrap(b: AnyBroker, topic: str) -> str:
    return b.leader_of(topic).bootstrap if isinstance(b, KafkaCluster) else b.bootstrap


def values_at(bootstrap: str, topic: str) -> list[bytes | None]:
    """The values of partition 0 from offset 0, through the partition's leader."""
    with raw.RawClient(bootstrap) as c:
        p = raw.fetch(c, topic, 0, 0)
    if p.error_code != 0:
        return []
    data = bytes(p.records or b"")
    out: list[bytes | None] = []
    for pos, header in iter_batch_headers(data):
        out += [r.value for r in decode_records(data[pos:pos + header.size])]
    return out


def produce_until_ok(bootstrap: str, topic: str, values: list[bytes]) -> None:
    with raw.RawClient(bootstrap) as c:
        def acked() -> bool:
            return raw.produce(c, topic, 0, raw.simple_batch(values))[0] == 0
        wait_until(acked, f"an acknowledged produce to {topic}")


def test_data_survives_kill_and_restart(any_broker: AnyBroker) -> None:
    with raw.RawClient(any_broker.bootstrap.split(",")[0]) as c:
        assert raw.create_topic(c, "harness-kill", 1) == 0
    produce_until_ok(leader_bootstrap(any_broker, "harness-kill"), "harness-kill", [b"a", b"b"])
    any_broker.kill()
    assert not any_broker.alive()
    any_broker.restart(kill=True)
    assert any_broker.alive()
    wait_until(lambda: values_at(leader_bootstrap(any_broker, "harness-kill"), "harness-kill") == [b"a", b"b"],
               "the acknowledged records after kill -9 and restart")


def broker_ids(bootstrap: str) -> set[int]:
    with raw.RawClient(bootstrap) as c:
        resp = c.call(raw.metadata_request([]))
    return {int(b.node_id) for b in resp.brokers}


@pytest.mark.parametrize("any_broker", cluster_marked(["kafka-cluster"]), indirect=True)
def test_cluster_node_killed_and_restarted(any_broker: AnyBroker) -> None:
    cluster = any_broker
    assert isinstance(cluster, KafkaCluster)
    node = cluster.nodes[0]
    node.kill()
    assert not node.alive() and not cluster.alive()
    # The two others still form a quorum: a new topic can be created and written.
    other = cluster.nodes[1].bootstrap
    with raw.RawClient(other) as c:
        assert raw.create_topic(c, "harness-two-of-three", 1) == 0
    node.start()
    assert cluster.alive()
    wait_until(lambda: broker_ids(node.bootstrap) == {1, 2, 3}, "the restarted node back in the cluster")
    with raw.RawClient(node.bootstrap) as c:
        assert raw.create_topic(c, "harness-after-rejoin", 3) == 0

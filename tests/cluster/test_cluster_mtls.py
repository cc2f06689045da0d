"""Brokers reach each other over mutual TLS (issue 24, acceptance 7): three brokers whose only
listener is SSL with ``ssl.client.auth=required`` and ACLs on. A broker presents its own
keystore's certificate to the others (security/listeners.inter_broker_security), whose DN
(``User:CN=localhost,OU=eoslog-dev``) is its principal, a super user: without that certificate
no follower could fetch and no ISR would grow past its leader. The harness and the test's
clients present the client certificate.

The cluster replicates (acks=all to three replicas, byte-identical logs), elects a new leader
when the leader is killed, and the restarted broker catches up again over mTLS.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.cli.certs import make_dev_certs
from eoslog.cluster.zookeeper_server import ZooKeeperServer
from support.cluster_harness import Cluster, segment_bytes
from support.harness import wait_until
from support.rawkafka import ConnectionClosed, RawClient
from support.security_harness import STANDARD_AUTHORIZER

BROKER_PRINCIPAL = "User:CN=localhost,OU=eoslog-dev"  # eoslog certs dev's broker certificate
CLIENT_PRINCIPAL = "User:CN=client,OU=eoslog-dev"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_dev_certs(tmp_path_factory.mktemp("mtls-certs"))


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, certs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    def connect(bootstrap: str) -> RawClient:
        ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
        ctx.load_cert_chain(str(certs / "client.pem"))
        return RawClient(bootstrap, timeout_s=10, tls=ctx)

    c = Cluster(tmp_path_factory.mktemp("mtls-cluster"), zookeeper=zookeeper, connect=connect,
                per_broker=lambda _i, port: {"listeners": f"SSL://127.0.0.1:{port}"}, overrides={
                    "inter.broker.listener.name": "SSL", "listener.name.ssl.ssl.client.auth": "required",
                    "ssl.keystore.location": str(certs / "broker.pem"),
                    "ssl.truststore.location": str(certs / "ca.pem"),
                    "authorizer.class.name": STANDARD_AUTHORIZER,
                    "super.users": f"{BROKER_PRINCIPAL};{CLIENT_PRINCIPAL}"}).start()
    yield c
    c.stop()


def tls_conf(cluster: Cluster, certs: Path) -> dict[str, Any]:
    return {"bootstrap.servers": cluster.bootstrap, "security.protocol": "SSL",
            "ssl.ca.location": str(certs / "ca.pem"), "ssl.certificate.location": str(certs / "client-cert.pem"),
            "ssl.key.location": str(certs / "client-key.pem")}


def produce(conf: dict[str, Any], values: list[bytes]) -> None:
    errors: list[KafkaError | None] = []
    p = Producer({**conf, "acks": "all", "enable.idempotence": True})
    for v in values:
        p.produce("mtls", v, partition=0, on_delivery=lambda err, _m: errors.append(err))
    assert p.flush(60) == 0
    assert errors == [None] * len(values), errors


def test_the_listener_requires_a_client_certificate(cluster: Cluster, certs: Path) -> None:
    no_certificate = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    with pytest.raises((OSError, ConnectionClosed)), \
            RawClient(cluster.brokers[1].bootstrap, timeout_s=10, tls=no_certificate) as raw:  # SSLError: OSError
        raw.send(b"\0\0\0\0")
        raw.read_frame()


def test_brokers_replicate_and_elect_over_mutual_tls(cluster: Cluster, certs: Path) -> None:
    conf = tls_conf(cluster, certs)
    admin = AdminClient(conf)
    for f in admin.create_topics([NewTopic("mtls", 1, 3, config={"min.insync.replicas": "2"})],
                                 request_timeout=30).values():
        f.result()
    meta = cluster.wait_for(lambda m: len(m.topics["mtls"][0].isr) == 3, "every replica in the ISR")
    produce(conf, [f"a{i}".encode() for i in range(20)])
    leader = meta.topics["mtls"][0].leader
    cluster.brokers[leader].kill()
    cluster.wait_for(lambda m: m.topics["mtls"][0].leader not in (-1, leader), "a new leader",
                     via=next(i for i in cluster.brokers if i != leader))
    produce({**conf, "bootstrap.servers": cluster.bootstrap}, [f"b{i}".encode() for i in range(20)])
    cluster.restart_dead()
    cluster.wait_for(lambda m: len(m.topics["mtls"][0].isr) == 3, "the restarted broker back in the ISR")

    c = Consumer({**conf, "group.id": "mtls-check", "isolation.level": "read_committed",
                  "auto.offset.reset": "earliest", "enable.partition.eof": True})
    c.assign([TopicPartition("mtls", 0, 0)])
    got: list[bytes] = []
    while True:
        m = c.poll(30)
        assert m is not None, f"stuck after {len(got)} records"
        if m.error() is None:
            got.append(m.value())
        elif m.error().code() == KafkaError._PARTITION_EOF:  # type: ignore[union-attr]
            break
    c.close()
    assert got == [f"a{i}".encode() for i in range(20)] + [f"b{i}".encode() for i in range(20)]
    wait_until(lambda: len({segment_bytes(b, "mtls") for b in cluster.brokers.values()}) == 1,
               "three byte-identical replicas")

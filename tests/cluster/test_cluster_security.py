"""Issue 15 in cluster mode: SCRAM credentials and ACLs live in ZooKeeper (as in Kafka's
ZooKeeper era: /config/users + /config/changes, /kafka-acl + /kafka-acl-changes), so what one
broker is told, every broker applies (cluster/security_store.py).

Three brokers, each with a PLAINTEXT listener (first: the inter-broker one, whose ANONYMOUS
principal is a super user, see docs/security.md) and a SASL_PLAINTEXT one; ACLs on.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from cluster_harness import Cluster, create_topic
from eoslog.cluster.zookeeper_server import ZooKeeperServer
from eoslog.protocol.scram import Mechanism
from harness import free_port, wait_until
from rawkafka import RawClient
from security_harness import STANDARD_AUTHORIZER, scram_login

PASSWORD = "carol-secret"


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    sasl_ports = {i: free_port() for i in (1, 2, 3)}

    def listeners(i: int, port: int) -> dict[str, str]:
        return {"listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_ports[i]}"}

    c = Cluster(tmp_path_factory.mktemp("secured-cluster"), zookeeper=zookeeper, per_broker=listeners, overrides={
        "sasl.enabled.mechanisms": "SCRAM-SHA-512", "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:ANONYMOUS"}).start()
    c.sasl_ports = sasl_ports  # type: ignore[attr-defined]
    yield c
    c.stop()


def sasl(c: Cluster, i: int) -> str:
    return f"127.0.0.1:{c.sasl_ports[i]}"  # type: ignore[attr-defined]


def logs_in(c: Cluster, i: int, user: str, password: str) -> bool:
    client = RawClient(sasl(c, i))
    try:
        return int(scram_login(client, user, password, Mechanism.SCRAM_SHA_512).error_code) == 0
    finally:
        client.close()


def test_a_user_and_an_acl_made_at_one_broker_apply_at_the_others(cluster: Cluster) -> None:
    via_1 = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    assert not logs_in(cluster, 2, "carol", PASSWORD)
    upsert = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                          PASSWORD.encode())
    for f in via_1.alter_user_scram_credentials([upsert], request_timeout=30).values():
        f.result()
    for i in (1, 2, 3):
        wait_until(lambda i=i: logs_in(cluster, i, "carol", PASSWORD), f"carol logs in at broker {i}")  # type: ignore[misc]
    assert not logs_in(cluster, 3, "carol", "wrong")

    create_topic(cluster.brokers[1].bootstrap, "carol-topic", 1, 3)
    conf = {"bootstrap.servers": sasl(cluster, 3), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "carol", "sasl.password": PASSWORD}

    def produce_error() -> KafkaError | None:
        errors: list[KafkaError | None] = []
        p = Producer({**conf, "message.timeout.ms": 10000})
        p.produce("carol-topic", b"x", on_delivery=lambda err, _m: errors.append(err))
        p.flush(30)
        return errors[0] if errors else KafkaError(KafkaError._TIMED_OUT)

    refused = produce_error()
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, refused
    binding = AclBinding(ResourceType.TOPIC, "carol-", ResourcePatternType.PREFIXED, "User:carol", "*",
                         AclOperation.WRITE, AclPermissionType.ALLOW)
    for f in via_1.create_acls([binding], request_timeout=30).values():
        f.result()
    wait_until(lambda: produce_error() is None, "the ACL made at broker 1 lets carol write at broker 3")
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    via_2 = AdminClient({"bootstrap.servers": cluster.brokers[2].bootstrap})
    acls = via_2.describe_acls(everything, request_timeout=30).result()
    assert [(a.name, a.principal) for a in acls] == [("carol-", "User:carol")]

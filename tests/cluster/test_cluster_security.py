"""Issue 15 in cluster mode: SCRAM credentials and ACLs live in ZooKeeper (as in Kafka's
ZooKeeper era: /config/users + /config/changes, /kafka-acl + /kafka-acl-changes), so what one
broker is told, every broker applies (cluster/security_store.py).

Three brokers whose listeners are all SASL: a SASL_PLAINTEXT one for this test's clients and
the harness's own Metadata requests (logged in), and a SASL_SSL one, the inter-broker listener
(inter.broker.listener.name): the brokers replicate, send markers and verify transactions over
TLS (a throw-away CA's certificates) as User:broker, the only super user, with SCRAM-SHA-512.
No PLAINTEXT listener is needed for anything. The broker user's
credential is written into ZooKeeper before the first start by ``eoslog users set-password
--zookeeper``, as ``kafka-configs.sh --zookeeper`` did; this test's admin client logs in as
that user too.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kio.static.primitive import f64, i16, i32

from eoslog.cli.certs import make_dev_certs
from eoslog.cluster.zookeeper_server import ZooKeeperServer
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.messages import build
from eoslog.protocol.scram import Mechanism
from support.cluster_harness import Cluster, settled
from support.harness import free_ports, wait_until
from support.rawkafka import RawClient, produce_request, request_module, simple_batch
from support.security_harness import STANDARD_AUTHORIZER, scram_login
from support.zk_harness import zookeeper_client

PASSWORD = "carol-secret"
BROKER_PASSWORD = "broker-secret"
CHANGE_EXPIRATION_MS = 2000  # Kafka's 15 min, short here so the purge can be seen


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    sasl_ports: dict[int, int] = {}
    tls_ports: dict[int, int] = {}

    def listeners(i: int, port: int) -> dict[str, str]:
        sasl_ports[i] = port  # the harness's port: its requests log in (connect below)
        [tls_ports[i]] = free_ports(1, avoid={*c.ports.values(), *tls_ports.values()})
        return {"listeners": f"SASL_PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{tls_ports[i]}"}

    def connect(bootstrap: str) -> RawClient:
        client = RawClient(bootstrap, timeout_s=10)
        if scram_login(client, "broker", BROKER_PASSWORD).error_code != 0:
            client.close()
            raise OSError(f"the harness's login at {bootstrap} was refused")
        return client

    root = tmp_path_factory.mktemp("secured-cluster")
    certs = make_dev_certs(root / "certs")
    done = eoslog_cli("users", "set-password", "broker", "--password", BROKER_PASSWORD,
                      "--zookeeper", f"{zookeeper.connect_string}/{root.name}")
    assert done.returncode == 0, done.stderr
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="broker" password="{BROKER_PASSWORD}";')
    c = Cluster(root, zookeeper=zookeeper, per_broker=listeners, connect=connect, overrides={
        "sasl.enabled.mechanisms": "SCRAM-SHA-512", "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:broker", "inter.broker.listener.name": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": jaas,
        "ssl.keystore.location": str(certs / "broker.pem"), "ssl.truststore.location": str(certs / "ca.pem"),
        "zookeeper.change.notification.expiration.ms": str(CHANGE_EXPIRATION_MS)})
    c.start()
    c.sasl_ports = sasl_ports  # type: ignore[attr-defined]
    yield c
    c.stop()


def eoslog_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "eoslog", *args], capture_output=True, text=True, timeout=120)


def admin_conf(c: Cluster, i: int) -> dict[str, str]:
    return {"bootstrap.servers": sasl(c, i), "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "broker", "sasl.password": BROKER_PASSWORD}


def sasl(c: Cluster, i: int) -> str:
    return f"127.0.0.1:{c.sasl_ports[i]}"  # type: ignore[attr-defined]


def logs_in(c: Cluster, i: int, user: str, password: str) -> bool:
    client = RawClient(sasl(c, i))
    try:
        return int(scram_login(client, user, password, Mechanism.SCRAM_SHA_512).error_code) == 0
    finally:
        client.close()


def test_a_user_and_an_acl_made_at_one_broker_apply_at_the_others(cluster: Cluster) -> None:
    via_1 = AdminClient(admin_conf(cluster, 1))
    assert not logs_in(cluster, 2, "carol", PASSWORD)
    upsert = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                          PASSWORD.encode())
    for f in via_1.alter_user_scram_credentials([upsert], request_timeout=30).values():
        f.result()
    for i in (1, 2, 3):
        wait_until(lambda i=i: logs_in(cluster, i, "carol", PASSWORD), f"carol logs in at broker {i}")  # type: ignore[misc]
    assert not logs_in(cluster, 3, "carol", "wrong")

    for f in via_1.create_topics([NewTopic("carol-topic", 1, 3)], request_timeout=30).values():
        f.result()
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
    via_2 = AdminClient(admin_conf(cluster, 2))
    described: list[list[tuple[str, str]]] = []

    def described_at_2() -> list[tuple[str, str]]:  # broker 2 learns it from its own watch
        described[:] = [[(a.name, a.principal) for a in via_2.describe_acls(everything, request_timeout=30).result()]]
        return described[0]

    wait_until(lambda: described_at_2() == [("carol-", "User:carol")], "broker 2 describes the ACL made at broker 1",
               describe=lambda: described)


def test_replication_and_a_transaction_across_brokers_over_the_authenticated_listener(cluster: Cluster) -> None:
    """Only User:broker may replicate (ClusterAction) and write markers: an acks=all write to
    3 replicas and a committed transaction whose coordinator and leaders differ prove that the
    brokers logged in to each other over SASL_SSL."""
    admin = AdminClient(admin_conf(cluster, 1))
    for f in admin.create_topics([NewTopic("replicated", 3, 3, config={"min.insync.replicas": "3"})],
                                 request_timeout=30).values():
        f.result()
    conf = admin_conf(cluster, 2)
    p = Producer({**conf, "acks": "all", "transactional.id": "across-brokers"})
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(30):
        p.produce("replicated", f"v{i}".encode(), partition=i % 3)
    p.commit_transaction(60)
    # The commit is answered before its markers are written: a read_committed consumer could
    # meet the end of a partition at the last stable offset still below the records.
    for q in range(3):
        settled(conf["bootstrap.servers"], "replicated", q, config=conf)
    c = Consumer({**conf, "group.id": "check", "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                  "enable.partition.eof": True})
    c.assign([TopicPartition("replicated", q, 0) for q in range(3)])
    got, ends = [], set()
    while len(ends) < 3:
        m = c.poll(30)
        assert m is not None, "no records"
        if m.error() is None:
            got.append(m.value())
        elif m.error().code() == KafkaError._PARTITION_EOF:  # type: ignore[union-attr]
            ends.add(m.partition())
    c.close()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(30))


def test_find_coordinator_answers_with_the_listener_the_client_came_in_on(cluster: Cluster) -> None:
    """A SASL client is sent to the coordinator's SASL_PLAINTEXT address (it was given the first,
    PLAINTEXT, listener's: librdkafka's consumer then failed its SASL handshake there and its
    close waited ~45 s for the coordinator)."""
    from support.rawkafka import request_module

    client = RawClient(sasl(cluster, 1))
    try:
        assert scram_login(client, "broker", BROKER_PASSWORD).error_code == 0
        for key_type, key in ((0, "any-group"), (1, "any-txn")):
            wait_until(lambda kt=key_type, k=key: client.call(request_module(10, 4).FindCoordinatorRequest(  # type: ignore[misc]
                key_type=kt, coordinator_keys=(k,))).coordinators[0].error_code == 0, f"a coordinator for {key}")
            found = client.call(request_module(10, 4).FindCoordinatorRequest(
                key_type=key_type, coordinator_keys=(key,))).coordinators[0]
            assert (found.host, found.port) == ("127.0.0.1", cluster.sasl_ports[found.node_id])  # type: ignore[attr-defined]
    finally:
        client.close()


def test_users_set_password_into_zookeeper_reaches_running_brokers_and_keeps_other_mechanisms(
        cluster: Cluster, zookeeper: ZooKeeperServer) -> None:
    """``eoslog users set-password --zookeeper`` on a running cluster: its change notification
    makes every broker load the new user; a second mechanism is added beside the first;
    the znode holds salted keys only."""
    from eoslog.cluster.security_store import USERS
    from eoslog.security.scram import password_matches
    from eoslog.security.zk_codec import user_credentials

    connect = f"{zookeeper.connect_string}/{cluster.root.name}"
    for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
        done = eoslog_cli("users", "set-password", "dave", "--password", "dave-secret", "--mechanism", mechanism,
                          "--zookeeper", connect)
        assert done.returncode == 0, done.stderr
    for i in (1, 2, 3):
        wait_until(lambda i=i: logs_in(cluster, i, "dave", "dave-secret"), f"dave logs in at broker {i}")  # type: ignore[misc]
    assert not logs_in(cluster, 2, "dave", "wrong")
    with zookeeper_client(connect) as client:
        data, _ = client.get(f"{USERS}/dave")
    stored = user_credentials(data)
    assert set(stored) == {Mechanism.SCRAM_SHA_512, Mechanism.SCRAM_SHA_256}
    assert all(password_matches(m, c, "dave-secret") and c.iterations >= 4096 for m, c in stored.items())
    assert b"dave-secret" not in data
    both = eoslog_cli("users", "set-password", "x", "--password", "p", "--zookeeper", connect, "--data-dir", "/tmp")
    assert both.returncode == 2 and "not both" in both.stderr


def test_change_notifications_past_the_expiration_are_purged(cluster: Cluster, zookeeper: ZooKeeperServer) -> None:
    """A credential and an ACL change, then (past zookeeper.change.notification.expiration.ms)
    another pair: processing the second deletes the first pair's change znodes, as Kafka's
    ZkNodeChangeNotificationListener did; the changes themselves stay in force."""
    from eoslog.cluster.security_store import ACL_CHANGES, CONFIG_CHANGES

    connect = f"{zookeeper.connect_string}/{cluster.root.name}"
    admin = AdminClient(admin_conf(cluster, 1))

    def change(n: int) -> None:
        done = eoslog_cli("users", "set-password", f"erin{n}", "--password", "erin-secret", "--zookeeper", connect)
        assert done.returncode == 0, done.stderr
        binding = AclBinding(ResourceType.TOPIC, f"erin{n}-", ResourcePatternType.PREFIXED, f"User:erin{n}", "*",
                             AclOperation.READ, AclPermissionType.ALLOW)
        for f in admin.create_acls([binding], request_timeout=30).values():
            f.result()

    with zookeeper_client(connect) as client:
        def notifications() -> set[str]:
            return {f"{p}/{c}" for p in (CONFIG_CHANGES, ACL_CHANGES) for c in client.get_children(p)}

        change(1)
        first = notifications()
        assert any(n.startswith(CONFIG_CHANGES) for n in first) and any(n.startswith(ACL_CHANGES) for n in first)
        time.sleep(CHANGE_EXPIRATION_MS / 1000 + 0.5)
        change(2)
        wait_until(lambda: not first & notifications(), "the expired change notifications deleted")
    assert logs_in(cluster, 3, "erin1", "erin-secret") and logs_in(cluster, 3, "erin2", "erin-secret")


def test_only_notifications_older_than_the_expiration_are_obsolete() -> None:
    from eoslog.cluster.security_store import obsolete

    created = {"config_change_0000000001": 1000, "config_change_0000000002": 8000, "config_change_0000000003": 9500}
    assert obsolete(created, now_ms=10000, expiration_ms=2000) == ["config_change_0000000001"]
    assert obsolete(created, now_ms=10000, expiration_ms=0) == sorted(created)


def _quotas_request(entity: tuple[tuple[str, str | None], ...], ops: dict[str, float | None]) -> Any:
    m = request_module(ApiKey.ALTER_CLIENT_QUOTAS, 1)
    return build(m.AlterClientQuotasRequest, validate_only=False, entries=(build(
        m.EntryData, entity=tuple(build(m.EntityData, entity_type=t, entity_name=n) for t, n in entity),
        ops=tuple(build(m.OpData, key=k, value=f64(v or 0.0), remove=v is None) for k, v in ops.items())),))


def _described_quotas(cluster: Cluster, i: int) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    m = request_module(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1)
    with cluster.connect(f"127.0.0.1:{cluster.ports[i]}") as client:  # type: ignore[misc]
        answer = client.call(build(m.DescribeClientQuotasRequest, components=(), strict=False))
    assert int(answer.error_code) == 0, answer
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: float(v.value) for v in entry.values}
            for entry in answer.entries or ()}


def test_client_quotas_altered_at_one_broker_are_kept_in_zookeeper_and_enforced_by_the_others(
        cluster: Cluster, zookeeper: ZooKeeperServer) -> None:
    """AlterClientQuotas at broker 1 writes Kafka's znodes (/config/users/<user> beside the user's
    SCRAM credentials, /config/users/<user>/clients/<id>, /config/clients/<id>) with a change
    notification; brokers 2 and 3 describe the quotas from their own watch, and the partition's
    leader throttles a producer with that client id; a password set afterwards keeps the quota,
    and removing the quotas at broker 3 empties them everywhere."""
    from eoslog.cluster.security_store import USERS
    from eoslog.security.zk_codec import user_credentials

    connect = f"{zookeeper.connect_string}/{cluster.root.name}"
    assert eoslog_cli("users", "set-password", "quinn", "--password", "q1", "--zookeeper", connect).returncode == 0
    user, client = (("user", "quinn"),), (("client-id", "slow"),)
    user_client = (("user", "quinn"), ("client-id", "app"))
    with cluster.connect(f"127.0.0.1:{cluster.ports[1]}") as admin:  # type: ignore[misc]
        for entity, ops in ((user, {"producer_byte_rate": 1048576.0}), (user_client, {"request_percentage": 50.0}),
                            (client, {"producer_byte_rate": 10000.0})):
            answered = admin.call(_quotas_request(entity, ops))
            assert [int(e.error_code) for e in answered.entries] == [0], answered
    wanted = {user: {"producer_byte_rate": 1048576.0}, user_client: {"request_percentage": 50.0},
              client: {"producer_byte_rate": 10000.0}}
    for i in (2, 3):
        wait_until(lambda i=i: _described_quotas(cluster, i) == wanted, f"broker {i} describes the quotas")  # type: ignore[misc]
    with zookeeper_client(connect) as zk:
        quinn = json.loads(zk.get(f"{USERS}/quinn")[0])
        assert quinn["config"]["producer_byte_rate"] == "1048576" and "SCRAM-SHA-512" in quinn["config"], quinn
        assert json.loads(zk.get(f"{USERS}/quinn/clients/app")[0]) == {
            "version": 1, "config": {"request_percentage": "50.0"}}
        assert json.loads(zk.get("/config/clients/slow")[0]) == {
            "version": 1, "config": {"producer_byte_rate": "10000"}}
    # A new password keeps the user's quota (one znode holds both, as in Kafka).
    assert eoslog_cli("users", "set-password", "quinn", "--password", "q2", "--zookeeper", connect).returncode == 0
    wait_until(lambda: logs_in(cluster, 2, "quinn", "q2"), "quinn's new password reaches broker 2")
    assert _described_quotas(cluster, 2)[user] == {"producer_byte_rate": 1048576.0}
    with zookeeper_client(connect) as zk:
        assert user_credentials(zk.get(f"{USERS}/quinn")[0])

    with cluster.connect(f"127.0.0.1:{cluster.ports[1]}") as admin:  # type: ignore[misc]
        m = request_module(ApiKey.CREATE_TOPICS, 7)
        created = admin.call(build(m.CreateTopicsRequest, timeout=datetime.timedelta(seconds=30), validate_only=False,
                                   topics=(build(m.CreatableTopic, name="quota-topic", num_partitions=i32(1),
                                                 replication_factor=i16(3), assignments=(), configs=()),)))
        assert int(created.topics[0].error_code) == 0, created
    leader = cluster.wait_for(lambda m: m.topics.get("quota-topic", {}).get(0, None) is not None
                              and m.topics["quota-topic"][0].leader > 0, "quota-topic's leader").topics[
        "quota-topic"][0].leader
    with cluster.connect(f"127.0.0.1:{cluster.ports[leader]}") as slow:  # type: ignore[misc]
        slow.client_id = "slow"
        throttle_ms = 0
        for _ in range(8):  # 128 kB: more than the 10 windows' worth (100 kB) a first burst may take
            answer = slow.call(produce_request("quota-topic", 0, simple_batch([b"x" * 1000] * 16)))
            assert int(answer.responses[0].partition_responses[0].error_code) == 0, answer
            throttle_ms = int(answer.throttle_time.total_seconds() * 1000)
            if throttle_ms:
                break
    assert throttle_ms > 0, f"broker {leader} did not throttle the client whose quota broker 1 stored"

    with cluster.connect(f"127.0.0.1:{cluster.ports[3]}") as admin:  # type: ignore[misc]
        for entity, ops in ((user, {"producer_byte_rate": None}), (user_client, {"request_percentage": None}),
                            (client, {"producer_byte_rate": None})):
            assert [int(e.error_code) for e in admin.call(_quotas_request(entity, ops)).entries] == [0]
    for i in (1, 2, 3):
        wait_until(lambda i=i: _described_quotas(cluster, i) == {}, f"broker {i} has no quotas left")  # type: ignore[misc]
    with zookeeper_client(connect) as zk:
        assert "producer_byte_rate" not in json.loads(zk.get(f"{USERS}/quinn")[0])["config"]

"""Issue 15: TLS, SASL and ACLs against real clients, on one broker with every listener
(tests/support/security_harness.py): PLAINTEXT, SSL with mTLS required, SASL_PLAINTEXT, SASL_SSL,
and a SASL_PLAINTEXT listener (SHORT) whose sessions last 1.5 s (connections.max.reauth.ms).

The admin principal (a super user) sets ACLs with librdkafka's AdminClient; alice, bob and
the mTLS principal get exactly the ACLs a test names, so every refusal below is one the
authorizer made, and the same operation with the ACL succeeds.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from eoslog.broker.handlers.registry import REGISTRY
from eoslog.client.admin import Admin
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.scram import Mechanism, ScramClient
from support.deps import require, require_kcat
from support.harness import wait_until
from support.rawkafka import ConnectionClosed, RawClient, fetch_request, metadata_request, produce_request, simple_batch
from support.security_harness import (
    SHORT_SESSION_MS,
    USERS,
    SecuredBroker,
    plain_login,
    sasl_authenticate,
    sasl_handshake,
    scram_login,
)
from support.txn_clients import AIOKAFKA, CONFLUENT, EOSLOG, KAFKA_PYTHON, reader, writer


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    sb = SecuredBroker(tmp_path_factory.mktemp("secured"))
    b = sb.broker.start()
    yield sb
    if b.alive():
        b.stop()


_admins: dict[int, AdminClient] = {}


def admin(sb: SecuredBroker) -> AdminClient:
    """The super user's AdminClient (kept: librdkafka fails the futures of a destroyed one)."""
    key = id(sb)
    if key not in _admins:
        _admins[key] = AdminClient(sb.rdkafka("SASL_SSL", user="admin"))
    return _admins[key]


def grant(sb: SecuredBroker, principal: str, rtype: ResourceType, name: str, *ops: AclOperation,
          pattern: ResourcePatternType = ResourcePatternType.LITERAL,
          permission: AclPermissionType = AclPermissionType.ALLOW) -> None:
    bindings = [AclBinding(rtype, name, pattern, principal, "*", op, permission) for op in ops]
    for f in admin(sb).create_acls(bindings, request_timeout=30).values():
        f.result()


def revoke(sb: SecuredBroker, principal: str, rtype: ResourceType, name: str) -> None:
    flt = AclBindingFilter(rtype, name, ResourcePatternType.ANY, principal, None, AclOperation.ANY,
                           AclPermissionType.ANY)
    for f in admin(sb).delete_acls([flt], request_timeout=30).values():
        f.result()


def create_topic(sb: SecuredBroker, name: str, partitions: int = 1) -> None:
    for f in admin(sb).create_topics([NewTopic(name, partitions, 1)], request_timeout=30).values():
        f.result()


def produce(conf: dict[str, Any], topic: str, values: list[bytes], **extra: Any) -> list[KafkaError | None]:
    errors: list[KafkaError | None] = []
    p = Producer({**conf, **extra})
    for v in values:
        p.produce(topic, v, on_delivery=lambda err, _msg: errors.append(err))
    assert p.flush(60) == 0, "deliveries still pending after 60 s"
    return errors


def consume(conf: dict[str, Any], topic: str, count: int, group: str, **extra: Any) -> list[bytes]:
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  **extra})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                raise KafkaException(m.error())
            got.append(m.value())
        c.commit(asynchronous=False)
    finally:
        c.close()
    return got


# -- 1. real clients over every protocol ----------------------------------------------------------


# Acceptance test 1: each client produces idempotently and transactionally and reads
# read_committed over each secured protocol, as the principal that protocol authenticates.
# Every client of the table does both: kafka-python has transactions since 2.1 (3.0.12 here),
# aiokafka since 0.5; kcat's producer commits a transaction per run but cannot abort one.
MATRIX = {  # listener -> (SASL mechanism, the principal the broker sees)
    "SASL_SSL": ("SCRAM-SHA-512", "User:alice"),
    "SSL": (None, "User:CN=client,OU=eoslog-dev"),  # mTLS: the client certificate's DN
    "SASL_PLAINTEXT": ("PLAIN", "User:alice"),
}
MATRIX_PREFIX = "accept1-"


@pytest.fixture(scope="module")
def matrix_acls(secured: SecuredBroker) -> None:
    """Each matrix principal may write, read and use transactional ids and groups named
    accept1-*: nothing else (a refusal elsewhere stays one)."""
    for principal in {p for _, p in MATRIX.values()}:
        for rtype, op in ((ResourceType.TOPIC, AclOperation.WRITE), (ResourceType.TOPIC, AclOperation.READ),
                          (ResourceType.TRANSACTIONAL_ID, AclOperation.WRITE), (ResourceType.GROUP, AclOperation.READ)):
            grant(secured, principal, rtype, MATRIX_PREFIX, op, pattern=ResourcePatternType.PREFIXED)


def matrix_settings(sb: SecuredBroker, listener: str) -> dict[str, Any]:
    mechanism, _ = MATRIX[listener]
    return {k: v for k, v in sb.rdkafka(listener, mechanism=mechanism or "").items() if k != "bootstrap.servers"}


# What each cell writes: partition -> values in order; an aborted transaction sits between two
# committed ones, so a reader that shows it (or drops a record after it) is caught.
IDEMPOTENT = [(0, b"i0"), (1, b"i1"), (0, b"i2")]
COMMITTED_1, ABORTED, COMMITTED_2 = [(0, b"c0"), (1, b"c1")], [(0, b"aborted0"), (1, b"aborted1")], [(1, b"c2")]
EXPECTED = {0: [b"i0", b"i2", b"c0"], 1: [b"i1", b"c1", b"c2"]}


def read_committed_by_partition(client: str, sb: SecuredBroker, listener: str, topic: str) -> dict[int, list[bytes]]:
    """Everything a read_committed group member of ``client`` gets, by partition: polled until the
    expected count and then once more, so a duplicate or an aborted record would show."""
    got: dict[int, list[bytes]] = {0: [], 1: []}
    r = reader(client, sb.address(listener), topic, f"{topic}-group", lambda _parts: None,
               matrix_settings(sb, listener))
    try:
        deadline = time.monotonic() + 60
        while sum(map(len, got.values())) < sum(map(len, EXPECTED.values())) and time.monotonic() < deadline:
            for partition, _offset, value in r.poll():
                got[partition].append(value)
        for partition, _offset, value in r.poll():
            got[partition].append(value)
    finally:
        r.close()
    return got


@pytest.mark.parametrize("listener", list(MATRIX))
@pytest.mark.parametrize("client", [CONFLUENT, KAFKA_PYTHON, AIOKAFKA, EOSLOG])
def test_client_produces_idempotently_and_transactionally_and_reads_committed(
        secured: SecuredBroker, matrix_acls: None, client: str, listener: str) -> None:
    topic = f"{MATRIX_PREFIX}{client}-{listener}".lower()
    create_topic(secured, topic, partitions=2)
    settings = matrix_settings(secured, listener)
    idempotent = writer(client, secured.address(listener), topic, None, settings)
    try:
        idempotent.send(IDEMPOTENT)
    finally:
        idempotent.close()
    transactional = writer(client, secured.address(listener), topic, f"{topic}-txn", settings)
    try:
        transactional.transaction(COMMITTED_1, commit=True)
        transactional.transaction(ABORTED, commit=False)
        transactional.transaction(COMMITTED_2, commit=True)
    finally:
        transactional.close()
    assert read_committed_by_partition(client, secured, listener, topic) == EXPECTED


def kcat_env(listener: str, tmp_path: Path) -> dict[str, str]:
    """kcat's environment: over SASL_SSL (SCRAM-SHA-512) it loads confluent-kafka's bundled
    librdkafka (2.16) instead of Debian's 2.0.2, whose SCRAM client-final nonce Kafka 4 and
    eoslog refuse (librdkafka#4895): kcat 1.7.1 itself speaks SCRAM through whichever
    librdkafka.so.1 it is given. Over SSL and SASL_PLAINTEXT (PLAIN) it runs as installed."""
    import os

    import confluent_kafka

    env = dict(os.environ)
    if listener == "SASL_SSL":
        libs = Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs"
        bundled = sorted(libs.glob("librdkafka*.so*"))
        require("confluent-kafka's bundled librdkafka (its manylinux wheel)", bool(bundled),
                "pip install confluent-kafka (a Linux wheel); kcat needs a librdkafka newer than 2.0.2 for SCRAM")
        (tmp_path / "librdkafka.so.1").symlink_to(bundled[0])
        env["LD_LIBRARY_PATH"] = str(tmp_path)
    return env


@pytest.mark.parametrize("listener", list(MATRIX))
def test_kcat_produces_idempotently_and_transactionally_and_reads_committed(
        secured: SecuredBroker, matrix_acls: None, listener: str, tmp_path: Path) -> None:
    """kcat -P with enable.idempotence, then with a transactional.id (kcat commits at the end of
    its input); the aborted transaction between them comes from eoslog.client over the same
    listener; kcat -C with isolation.level=read_committed must show each committed record once."""
    topic = f"{MATRIX_PREFIX}kcat-{listener}".lower()
    create_topic(secured, topic)
    kcat = [require_kcat(), "-b", secured.address(listener),
            *(f"-X{k}={v}" for k, v in matrix_settings(secured, listener).items()), "-t", topic]
    env = kcat_env(listener, tmp_path)

    def kcat_produce(values: bytes, *settings: str) -> None:
        done = subprocess.run([*kcat, "-P", "-p", "0", *settings], input=values, capture_output=True, timeout=60,
                              env=env)
        assert done.returncode == 0, done.stderr

    kcat_produce(b"i0\ni1\n", "-Xenable.idempotence=true")
    kcat_produce(b"c0\nc1\n", f"-Xtransactional.id={topic}-txn")
    aborting = writer(EOSLOG, secured.address(listener), topic, f"{topic}-aborting", matrix_settings(secured, listener))
    try:
        aborting.transaction([(0, b"aborted")], commit=False)
    finally:
        aborting.close()
    # Its ABORT marker (offset 6 below) is written after the abort is answered: before c2.
    with Admin({"bootstrap.servers": secured.address(listener), **matrix_settings(secured, listener)}) as admin:
        wait_until(lambda: admin.describe_transactions([f"{topic}-aborting"])[f"{topic}-aborting"].state
                   == "CompleteAbort", "the aborted transaction's marker")
    kcat_produce(b"c2\n", f"-Xtransactional.id={topic}-txn")
    reads: list[subprocess.CompletedProcess[bytes]] = []

    def read_committed() -> int:
        reads.append(subprocess.run([*kcat, "-C", "-o", "beginning", "-e", "-f", "%o:%s\\n",
                                     "-Xisolation.level=read_committed"], capture_output=True, timeout=60, env=env))
        assert reads[-1].returncode == 0, reads[-1].stderr
        return len(reads[-1].stdout.split())

    # kcat's commit is answered before its COMMIT marker is written, and -e stops at the LSO it
    # finds first: read until the five records show, then check them exactly.
    wait_until(lambda: read_committed() >= 5, "the last transaction's COMMIT marker",
               describe=lambda: reads[-1].stdout)
    # Offsets 4, 6 and 8 are the commit, abort and commit markers: kcat's runs were transactions.
    assert reads[-1].stdout.split() == [b"0:i0", b"1:i1", b"2:c0", b"3:c1", b"7:c2"]


def test_mtls_principal_is_the_certificate_dn(secured: SecuredBroker) -> None:
    """SSL with ssl.client.auth=required: the principal is the client certificate's DN
    (Kafka's DEFAULT mapping rule), and its ACLs are what let it in."""
    topic = "mtls-events"
    create_topic(secured, topic)
    conf = secured.rdkafka("SSL")
    refused = produce(conf, topic, [b"x"], **{"message.timeout.ms": 10000})
    assert refused[0] is not None and refused[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    principal = "User:CN=client,OU=eoslog-dev"
    grant(secured, principal, ResourceType.TOPIC, topic, AclOperation.WRITE, AclOperation.READ)
    grant(secured, principal, ResourceType.GROUP, "mtls-group", AclOperation.READ)
    assert produce(conf, topic, [b"m0", b"m1"]) == [None, None]
    assert consume(conf, topic, 2, "mtls-group") == [b"m0", b"m1"]


def test_tls_refuses_an_untrusted_broker_and_a_foreign_client_certificate(secured: SecuredBroker) -> None:
    import ssl

    # A client that does not trust the broker's CA fails the handshake.
    with pytest.raises(ssl.SSLCertVerificationError):
        RawClient(secured.address("SASL_SSL"), tls=secured.tls(ca=secured.other_ca / "ca.pem"))
    # A client certificate from another CA is refused under ssl.client.auth=required.
    foreign = ssl.create_default_context(cafile=str(secured.certs / "ca.pem"))
    foreign.load_cert_chain(str(secured.other_ca / "client.pem"))
    with pytest.raises((ssl.SSLError, ConnectionError, ConnectionClosed)):
        c = RawClient(secured.address("SSL"), tls=foreign)
        c.call(metadata_request(None))
    # No certificate at all: refused too.
    with pytest.raises((ssl.SSLError, ConnectionError, ConnectionClosed)):
        c = RawClient(secured.address("SSL"), tls=secured.tls())
        c.call(metadata_request(None))


# -- 2. authorization: refusals with Kafka's codes, and the same with the ACL ---------------------


def test_transactional_producer_without_transactional_id_write_is_refused(secured: SecuredBroker) -> None:
    create_topic(secured, "bob-txn-topic")
    grant(secured, "User:bob", ResourceType.TOPIC, "bob-txn-topic", AclOperation.WRITE)
    p = Producer({**secured.rdkafka("SASL_SSL", user="bob"), "transactional.id": "bob-txn"})
    with pytest.raises(KafkaException) as e:
        p.init_transactions(30)
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    grant(secured, "User:bob", ResourceType.TRANSACTIONAL_ID, "bob-txn", AclOperation.WRITE)
    p = Producer({**secured.rdkafka("SASL_SSL", user="bob"), "transactional.id": "bob-txn"})
    p.init_transactions(30)  # in effect at once: no restart


def test_a_producer_without_write_on_a_transactional_id_cannot_fence_its_owner(secured: SecuredBroker) -> None:
    topic, txn = "alice-fence", "alice-fence-txn"
    create_topic(secured, topic)
    grant(secured, "User:alice", ResourceType.TOPIC, "alice-", AclOperation.WRITE, AclOperation.READ,
          pattern=ResourcePatternType.PREFIXED)
    grant(secured, "User:alice", ResourceType.TRANSACTIONAL_ID, txn, AclOperation.WRITE)
    owner = Producer({**secured.rdkafka("SASL_SSL", user="alice"), "transactional.id": txn})
    owner.init_transactions(30)
    owner.begin_transaction()
    owner.produce(topic, b"owned")
    owner.flush(30)
    intruder = Producer({**secured.rdkafka("SASL_SSL", user="bob"), "transactional.id": txn})
    with pytest.raises(KafkaException) as e:
        intruder.init_transactions(30)
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    owner.commit_transaction(30)  # not fenced: the intruder's InitProducerId never reached the coordinator


def test_consumer_without_group_read_is_refused(secured: SecuredBroker) -> None:
    topic = "bob-grouped"
    create_topic(secured, topic)
    grant(secured, "User:bob", ResourceType.TOPIC, topic, AclOperation.WRITE, AclOperation.READ)
    assert produce(secured.rdkafka("SASL_SSL", user="bob"), topic, [b"g0"]) == [None]
    with pytest.raises(KafkaException) as e:
        consume(secured.rdkafka("SASL_SSL", user="bob"), topic, 1, "bob-no-group")
    assert e.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    grant(secured, "User:bob", ResourceType.GROUP, "bob-no-group", AclOperation.READ)
    assert consume(secured.rdkafka("SASL_SSL", user="bob"), topic, 1, "bob-no-group") == [b"g0"]


def test_produce_without_topic_write_and_metadata_hides_what_it_may_not_see(secured: SecuredBroker) -> None:
    create_topic(secured, "secret-ledger")
    conf = secured.rdkafka("SASL_SSL", user="bob")
    errors = produce(conf, "secret-ledger", [b"x"], **{"message.timeout.ms": 10000})
    assert errors[0] is not None and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    listed = AdminClient(conf).list_topics(timeout=30).topics
    assert "secret-ledger" not in listed
    assert "secret-ledger" in admin(secured).list_topics(timeout=30).topics
    with RawClient(secured.address("SASL_PLAINTEXT")) as raw:
        assert scram_login(raw, "bob", USERS["bob"]).error_code == 0
        topic = raw.call(metadata_request(["secret-ledger"])).topics[0]
        assert topic.error_code == 29 and topic.partitions == ()  # TOPIC_AUTHORIZATION_FAILED, nothing else
        # Reading it: the fetch is refused and returns no records.
        part = raw.call(fetch_request("secret-ledger", 0, 0)).responses[0].partitions[0]
        assert part.error_code == 29 and not part.records


# -- 3. no way around it ---------------------------------------------------------------------------


def test_every_api_before_authentication_closes_the_connection(secured: SecuredBroker) -> None:
    """Every API key and version eoslog serves, except ApiVersions and the SASL ones, sent
    first on a SASL listener: closed unanswered, and no log byte changes."""
    create_topic(secured, "alice-untouched")
    before = secured.log_digest()
    exempt = {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE}
    tried = 0
    for spec in REGISTRY.values():
        if spec.api_key in exempt:
            continue
        for version in range(spec.min_version, spec.max_version + 1):
            with RawClient(secured.address("SASL_PLAINTEXT")) as raw:
                header = ApiKey(spec.api_key).to_bytes(2, "big") + version.to_bytes(2, "big") + b"\0\0\0\1\xff\xff"
                raw.send(len(header + b"\0" * 16).to_bytes(4, "big") + header + b"\0" * 16)
                assert raw.closed_by_peer(), f"{spec.name} v{version} was not refused"
                tried += 1
    # A well-formed produce too, over TLS: nothing appended.
    with secured.raw("SASL_SSL") as raw:
        raw.send(raw.frame(produce_request("alice-untouched", 0, simple_batch([b"sneaky"])))[1])
        assert raw.closed_by_peer()
    assert tried > 100
    assert secured.log_digest() == before


def test_wrong_password_is_delayed_answered_and_closed_without_logging_it(secured: SecuredBroker) -> None:
    wrong = "not-alices-password-7f3a"
    for login in (lambda r: scram_login(r, "alice", wrong), lambda r: plain_login(r, "alice", wrong),
                  lambda r: scram_login(r, "nobody", wrong, Mechanism.SCRAM_SHA_256)):
        with secured.raw("SASL_SSL") as raw:
            started = time.monotonic()
            answer = login(raw)
            assert answer.error_code == 58  # SASL_AUTHENTICATION_FAILED
            assert time.monotonic() - started >= 0.1  # connection.failed.authentication.delay.ms
            assert raw.closed_by_peer()
    assert wrong not in secured.broker.log_text()
    assert "failed authentication" in secured.broker.log_text()


def test_truncated_replayed_and_oversized_scram_exchanges_fail(secured: SecuredBroker) -> None:
    # Truncated: client-first, then something else than the client-final.
    with secured.raw("SASL_PLAINTEXT") as raw:
        assert sasl_handshake(raw, "SCRAM-SHA-512").error_code == 0
        sasl_authenticate(raw, ScramClient(Mechanism.SCRAM_SHA_512, "alice", USERS["alice"]).first_message())
        raw.send(raw.frame(metadata_request(None))[1])
        assert raw.closed_by_peer()
    # Replayed: alice's client-final from a finished exchange, in a new one.
    with secured.raw("SASL_PLAINTEXT") as raw:
        assert sasl_handshake(raw, "SCRAM-SHA-512").error_code == 0
        scram = ScramClient(Mechanism.SCRAM_SHA_512, "alice", USERS["alice"])
        final = scram.final_message(sasl_authenticate(raw, scram.first_message()).auth_bytes)
        assert sasl_authenticate(raw, final).error_code == 0
    with secured.raw("SASL_PLAINTEXT") as raw:
        assert sasl_handshake(raw, "SCRAM-SHA-512").error_code == 0
        replay = ScramClient(Mechanism.SCRAM_SHA_512, "alice", "whatever", nonce=scram.nonce)
        sasl_authenticate(raw, replay.first_message())
        assert sasl_authenticate(raw, final).error_code == 58
        assert raw.closed_by_peer()
    # An over-long user name: refused, and the broker serves the next client.
    with secured.raw("SASL_PLAINTEXT") as raw:
        assert sasl_handshake(raw, "SCRAM-SHA-512").error_code == 0
        huge = ScramClient(Mechanism.SCRAM_SHA_512, "u" * 100_000, "x").first_message()
        assert sasl_authenticate(raw, huge).error_code == 58
    with secured.raw("SASL_PLAINTEXT") as raw:
        assert scram_login(raw, "alice", USERS["alice"]).error_code == 0


def test_session_expires_after_connections_max_reauth_ms_unless_reauthenticated(secured: SecuredBroker) -> None:
    with secured.raw("SHORT") as raw:
        answer = scram_login(raw, "alice", USERS["alice"])
        assert answer.error_code == 0
        assert answer.session_lifetime.total_seconds() * 1000 == SHORT_SESSION_MS
        raw.call(metadata_request(None))
        time.sleep(SHORT_SESSION_MS / 1000 * 0.5)
        assert scram_login(raw, "alice", USERS["alice"]).error_code == 0  # KIP-368 re-authentication
        time.sleep(SHORT_SESSION_MS / 1000 * 0.7)  # past the first session's end, inside the second
        raw.call(metadata_request(None))
    with secured.raw("SHORT") as raw:
        assert scram_login(raw, "alice", USERS["alice"]).error_code == 0
        time.sleep(SHORT_SESSION_MS / 1000 + 0.3)
        raw.send(raw.frame(metadata_request(None))[1])
        assert raw.closed_by_peer()
    with secured.raw("SHORT") as raw:  # re-authenticating as someone else is refused
        assert scram_login(raw, "alice", USERS["alice"]).error_code == 0
        assert scram_login(raw, "bob", USERS["bob"]).error_code == 58


# -- 5. changes take effect at once and survive a restart ------------------------------------------


def test_acl_and_credential_changes_apply_at_once_and_survive_a_restart(secured: SecuredBroker) -> None:
    topic = "carol-notes"
    create_topic(secured, topic)
    a = admin(secured)
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    upsert = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                          b"carol-secret")
    for f in a.alter_user_scram_credentials([upsert]).values():
        f.result()
    conf = {**secured.rdkafka("SASL_SSL", user="alice"), "sasl.username": "carol", "sasl.password": "carol-secret"}
    assert produce(conf, topic, [b"c0"], **{"message.timeout.ms": 10000})[0].code() == (
        KafkaError.TOPIC_AUTHORIZATION_FAILED)
    grant(secured, "User:carol", ResourceType.TOPIC, topic, AclOperation.WRITE)
    grant(secured, "User:carol", ResourceType.TOPIC, topic, AclOperation.WRITE, permission=AclPermissionType.DENY)
    assert produce(conf, topic, [b"c1"], **{"message.timeout.ms": 10000})[0].code() == (
        KafkaError.TOPIC_AUTHORIZATION_FAILED)  # DENY wins over ALLOW
    flt = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:carol", "*",
                           AclOperation.WRITE, AclPermissionType.DENY)
    for f in a.delete_acls([flt]).values():
        f.result()
    assert produce(conf, topic, [b"c2"]) == [None]
    secured.broker.restart()
    assert produce(conf, topic, [b"c3"]) == [None]  # carol's credential and ACL came back
    bob = secured.rdkafka("SASL_SSL", user="bob")
    assert produce(bob, topic, [b"b"], **{"message.timeout.ms": 10000})[0].code() == (
        KafkaError.TOPIC_AUTHORIZATION_FAILED)  # and nothing more
    described = admin(secured).describe_acls(AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, "User:carol", None, AclOperation.ANY,
        AclPermissionType.ANY), request_timeout=30).result()
    assert [(b.name, b.operation, b.permission_type) for b in described] == [
        (topic, AclOperation.WRITE, AclPermissionType.ALLOW)]


# -- eoslog's own client and CLI -------------------------------------------------------------------


def eoslog_settings(sb: SecuredBroker, listener: str, user: str = "alice", password: str | None = None
                    ) -> dict[str, Any]:
    """eoslog.client's settings: librdkafka's names (mTLS with Kafka's PEM keystore name)."""
    conf = sb.rdkafka(listener, user=user, password=password)
    if listener == "SSL":
        conf = {k: v for k, v in conf.items() if not k.startswith("ssl.certificate") and k != "ssl.key.location"}
        conf["ssl.keystore.location"] = str(sb.certs / "client.pem")
    return conf


def test_eoslog_client_wrong_password_is_a_fatal_authentication_error(secured: SecuredBroker) -> None:
    from eoslog.client import Admin
    from eoslog.client.errors import SaslAuthenticationFailedError

    with pytest.raises(SaslAuthenticationFailedError):
        Admin({**eoslog_settings(secured, "SASL_SSL", password="wrong"), "default.api.timeout.ms": 5000}).list_topics()


def _eoslog(*args: str) -> subprocess.CompletedProcess[str]:
    import sys

    return subprocess.run([sys.executable, "-m", "eoslog", *args], capture_output=True, text=True, timeout=120)


def _command_config(sb: SecuredBroker, path: Path, user: str) -> list[str]:
    """``--bootstrap-server`` and ``--command-config`` for ``user`` over SASL_SSL (a properties file)."""
    path.write_text("\n".join(f"{k}={v}" for k, v in sb.rdkafka("SASL_SSL", user=user).items()
                              if k != "bootstrap.servers") + "\n")
    return ["--bootstrap-server", sb.address("SASL_SSL"), "--command-config", str(path)]


def test_cli_users_and_acls_with_command_config(secured: SecuredBroker, tmp_path: Path) -> None:
    common = _command_config(secured, tmp_path / "admin.properties", "admin")
    done = _eoslog("users", "set-password", "dora", "--password", "dora-secret", "--mechanism", "SCRAM-SHA-256",
                   *common)
    assert done.returncode == 0, done.stderr
    listed = _eoslog("users", "list", *common)
    assert "dora" in listed.stdout and "SCRAM-SHA-256" in listed.stdout
    added = _eoslog("acls", "add", "--allow-principal", "User:dora", "--operation", "Write", "--topic", "dora-",
                    "--resource-pattern-type", "prefixed", *common)
    assert added.returncode == 0, added.stderr
    shown = _eoslog("acls", "list", "--principal", "User:dora", *common)
    assert "dora-" in shown.stdout and "PREFIXED" in shown.stdout and "WRITE" in shown.stdout
    create_topic(secured, "dora-log")
    dora = {**secured.rdkafka("SASL_SSL", mechanism="SCRAM-SHA-256"), "sasl.username": "dora",
            "sasl.password": "dora-secret"}
    assert produce(dora, "dora-log", [b"d"]) == [None]
    removed = _eoslog("acls", "remove", "--allow-principal", "User:dora", "--topic", "dora-",
                      "--resource-pattern-type", "prefixed", *common)
    assert removed.returncode == 0 and "dora-" in removed.stdout, removed.stderr
    assert produce(dora, "dora-log", [b"d"], **{"message.timeout.ms": 10000})[0].code() == (
        KafkaError.TOPIC_AUTHORIZATION_FAILED)
    # Without the admin's settings the CLI cannot get in: a readable error, not a hang. The broker
    # closes each plaintext attempt and the CLI retries until default.api.timeout.ms (30 s by
    # default): a command config holding only a shorter timeout ends it sooner, as it would a user's.
    short = tmp_path / "timeout-only.properties"
    short.write_text("default.api.timeout.ms=5000\n")
    refused = _eoslog("acls", "list", "--bootstrap-server", secured.address("SASL_SSL"), "--command-config", str(short))
    assert refused.returncode != 0 and "Traceback" not in refused.stderr, refused.stderr
    assert "timed out after 5000 ms" in refused.stderr, refused.stderr


def test_cli_topics_produce_consume_with_command_config(secured: SecuredBroker, tmp_path: Path) -> None:
    """The client commands take --command-config like acls and users: alice's SCRAM settings over
    SASL_SSL; her ACLs decide what they may do (unit test: every broker command has the option)."""
    import sys

    alice = _command_config(secured, tmp_path / "alice.properties", "alice")
    grant(secured, "User:alice", ResourceType.TOPIC, "alice-", AclOperation.WRITE, AclOperation.READ,
          AclOperation.CREATE, AclOperation.DESCRIBE, pattern=ResourcePatternType.PREFIXED)
    created = _eoslog("topics", "create", "alice-cli", "--partitions", "1", *alice)
    assert created.returncode == 0, created.stderr
    produced = subprocess.run([sys.executable, "-m", "eoslog", "produce", "alice-cli", *alice], input="c0\nc1\n",
                              capture_output=True, text=True, timeout=120)
    assert produced.returncode == 0, produced.stderr
    consumed = _eoslog("consume", "alice-cli", "--from-beginning", "--max-messages", "2", "--timeout-ms", "30000",
                       *alice)
    assert consumed.returncode == 0 and consumed.stdout.split() == ["c0", "c1"], consumed.stderr
    refused = _eoslog("topics", "create", "bob-cli", *alice)  # no CREATE on bob-*: Kafka's refusal, readable
    assert refused.returncode != 0 and "authoriz" in refused.stderr.lower(), refused.stderr
    create_topic(secured, "hidden-from-alice")
    listed = _eoslog("topics", "list", *alice)  # Metadata shows her topics only
    assert "alice-cli" in listed.stdout.split() and "hidden-from-alice" not in listed.stdout, listed.stderr


def test_cli_users_set_password_offline_into_a_data_dir(tmp_path: Path) -> None:
    from eoslog.security.credentials import CredentialStore
    from eoslog.security.scram import password_matches

    done = _eoslog("users", "set-password", "root", "--password", "s3cret", "--data-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    cred = CredentialStore(tmp_path).get("root", Mechanism.SCRAM_SHA_512)
    assert cred is not None and cred.iterations >= 4096
    assert password_matches(Mechanism.SCRAM_SHA_512, cred, "s3cret")
    assert not password_matches(Mechanism.SCRAM_SHA_512, cred, "other")
    assert "s3cret" not in (tmp_path / "scram-credentials.json").read_text()


def _outcome(result: Any) -> int | None:
    """The first Kafka error code among an AdminClient call's futures (None: all succeeded)."""
    futures = list(result.values()) if isinstance(result, dict) else [result]
    for f in futures:
        try:
            f.result()
        except KafkaException as e:
            return int(e.args[0].code())
    return None


def test_admin_apis_refuse_a_principal_without_the_permission_and_serve_a_super_user(
        secured: SecuredBroker) -> None:
    """Part of the authorization matrix through librdkafka's AdminClient: bob holds no ACL on
    these resources and gets Kafka's code for each API; the super user succeeds. (librdkafka
    2.x aborts on a refused DescribeUserScramCredentials, so that one goes through eoslog's.)"""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import ConfigResource, NewPartitions

    create_topic(secured, "matrix-topic", partitions=1)
    t, c, g = KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED, (
        KafkaError.GROUP_AUTHORIZATION_FAILED)
    calls: dict[str, tuple[Any, int]] = {
        "DescribeConfigs(topic)": (lambda a: a.describe_configs([ConfigResource("TOPIC", "matrix-topic")]), t),
        "DescribeConfigs(broker)": (lambda a: a.describe_configs([ConfigResource("BROKER", "0")]), c),
        "CreatePartitions": (lambda a: a.create_partitions([NewPartitions("matrix-topic", 2)]), t),
        "DescribeGroups": (lambda a: a.describe_consumer_groups(["matrix-group"]), g),
        "OffsetFetch": (
            lambda a: a.list_consumer_group_offsets([ConsumerGroupTopicPartitions("matrix-group")]), g),
        "CreateAcls": (lambda a: a.create_acls([AclBinding(ResourceType.TOPIC, "x", ResourcePatternType.LITERAL,
                                                           "User:bob", "*", AclOperation.READ,
                                                           AclPermissionType.ALLOW)]), c),
        "CreateTopics": (lambda a: a.create_topics([NewTopic("matrix-new", 1, 1)]), t),
        "DeleteTopics": (lambda a: a.delete_topics(["matrix-topic"]), t),
    }
    bob = AdminClient(secured.rdkafka("SASL_SSL", user="bob"))
    refused = {name: _outcome(call(bob)) for name, (call, _) in calls.items()}
    assert refused == {name: code for name, (_, code) in calls.items()}
    super_user = admin(secured)
    for name in ("DescribeConfigs(topic)", "DescribeConfigs(broker)", "CreatePartitions"):
        assert _outcome(calls[name][0](super_user)) is None, name
    # DescribeUserScramCredentials through eoslog's admin (librdkafka 2.x crashes on this refusal).
    from eoslog.client import Admin
    from eoslog.client.admin.types import ConfigResource as EosConfigResource
    from eoslog.client.admin.types import ConfigResourceType

    # DescribeAcls, DescribeCluster, ListOffsets, DeleteRecords through eoslog's admin too:
    # librdkafka answers the last three from Metadata (which hides the topic) without asking.
    from eoslog.client.errors import ClusterAuthorizationFailedError, TopicAuthorizationFailedError

    with Admin(eoslog_settings(secured, "SASL_SSL", user="bob")) as eos_bob:
        with pytest.raises(ClusterAuthorizationFailedError):
            eos_bob.describe_user_scram_credentials()
        with pytest.raises(ClusterAuthorizationFailedError):
            eos_bob.describe_acls((1, None, 1, None, None, 1, 1))
        with pytest.raises(ClusterAuthorizationFailedError):
            eos_bob.describe_cluster()
        with pytest.raises((TopicAuthorizationFailedError, ClusterAuthorizationFailedError)):
            eos_bob.describe_configs([EosConfigResource(ConfigResourceType.TOPIC, "matrix-topic")])

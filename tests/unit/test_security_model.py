"""Issue 15's model, without a broker: Kafka's ACL decision (StandardAuthorizer semantics),
SCRAM against RFC 7677's test vector and against hostile input, the session state table, and
docs/security.md naming what every API eoslog serves checks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eoslog.broker.handlers.registry import REGISTRY
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.scram import AuthenticationFailed, Mechanism, ScramClient, plain_message
from eoslog.security.acls import AclBinding, AclFilter, AclOperation, PatternType, PermissionType, ResourceType, decide
from eoslog.security.listeners import Listener, SecurityProtocol
from eoslog.security.scram import ScramServer, make_credential, plain_authenticate
from eoslog.security.session import ANONYMOUS, SaslState, Session

T, G, Op = ResourceType.TOPIC, ResourceType.GROUP, AclOperation
ALLOW, DENY = PermissionType.ALLOW, PermissionType.DENY
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED


def acl(name: str, op: AclOperation, permission: PermissionType = ALLOW, principal: str = "User:alice",
        pattern: PatternType = LIT, host: str = "*", rtype: ResourceType = T) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, permission)


def allowed(acls: list[AclBinding], op: AclOperation, name: str = "payments", principal: str = "User:alice",
            host: str = "10.0.0.1", rtype: ResourceType = T, open_if_none: bool = False) -> bool:
    return decide(acls, principal, host, op, rtype, name, open_if_none)


def test_no_acl_means_denied_unless_allow_everyone_if_no_acl_found() -> None:
    assert not allowed([], Op.READ)
    assert allowed([], Op.READ, open_if_none=True)
    # An ACL on the resource for someone else: the resource is no longer "without ACLs".
    assert not allowed([acl("payments", Op.READ, principal="User:bob")], Op.READ, open_if_none=True)


def test_literal_wildcard_prefixed_principal_and_host_matching() -> None:
    assert allowed([acl("payments", Op.READ)], Op.READ)
    assert not allowed([acl("payment", Op.READ)], Op.READ)
    assert allowed([acl("*", Op.READ)], Op.READ)
    assert allowed([acl("pay", Op.READ, pattern=PRE)], Op.READ)
    assert not allowed([acl("payx", Op.READ, pattern=PRE)], Op.READ)
    assert allowed([acl("payments", Op.READ, principal="User:*")], Op.READ)
    assert not allowed([acl("payments", Op.READ, principal="User:bob")], Op.READ)
    assert allowed([acl("payments", Op.READ, host="10.0.0.1")], Op.READ)
    assert not allowed([acl("payments", Op.READ, host="10.0.0.2")], Op.READ)
    assert not allowed([acl("payments", Op.READ, rtype=G)], Op.READ)  # another resource type


def test_deny_wins_and_all_covers_every_operation() -> None:
    assert not allowed([acl("payments", Op.READ), acl("pay", Op.READ, DENY, pattern=PRE)], Op.READ)
    assert not allowed([acl("payments", Op.ALL), acl("*", Op.ALL, DENY, principal="User:*")], Op.WRITE)
    assert allowed([acl("payments", Op.ALL)], Op.ALTER_CONFIGS)
    # A DENY of DESCRIBE does not deny READ (Kafka denies the named operation or ALL only).
    assert allowed([acl("payments", Op.READ), acl("payments", Op.DESCRIBE, DENY)], Op.READ)


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER])
def test_read_write_delete_alter_imply_describe(granted: AclOperation) -> None:
    assert allowed([acl("payments", granted)], Op.DESCRIBE)
    assert not allowed([acl("payments", Op.DESCRIBE)], granted)


def test_alter_configs_implies_describe_configs_only() -> None:
    assert allowed([acl("payments", Op.ALTER_CONFIGS)], Op.DESCRIBE_CONFIGS)
    assert not allowed([acl("payments", Op.DESCRIBE_CONFIGS)], Op.ALTER_CONFIGS)
    assert not allowed([acl("payments", Op.CREATE)], Op.DESCRIBE)


def test_filters_match_as_describe_and_delete_acls_use_them() -> None:
    a, b = acl("pay", Op.READ, pattern=PRE), acl("payments", Op.WRITE, DENY, principal="User:bob")
    assert [x for x in (a, b) if AclFilter(resource_name="payments", pattern_type=PatternType.MATCH).matches(x)] == [
        a, b]
    assert [x for x in (a, b) if AclFilter(principal="User:bob").matches(x)] == [b]
    assert [x for x in (a, b) if AclFilter(pattern_type=PRE, operation=Op.READ).matches(x)] == [a]
    assert AclBinding(T, "*", PRE, "User:a", "*", Op.READ, ALLOW).invalid_reason() is not None
    assert AclBinding(ResourceType.CLUSTER, "x", LIT, "User:a", "*", Op.READ, ALLOW).invalid_reason() is not None


# -- SCRAM ------------------------------------------------------------------------------------------


def test_scram_sha256_matches_rfc7677_test_vector() -> None:
    mech = Mechanism.SCRAM_SHA_256
    client = ScramClient(mech, "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first_message() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    assert client.final_message(server_first) == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    client.verify_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


def _server(mech: Mechanism, password: str = "pw") -> ScramServer:
    cred = make_credential(mech, password)
    return ScramServer(mech, lambda user, m: cred if (user, m) == ("alice", mech) else None, b"k" * 32)


@pytest.mark.parametrize("mech", [Mechanism.SCRAM_SHA_256, Mechanism.SCRAM_SHA_512])
def test_scram_server_accepts_the_password_only(mech: Mechanism) -> None:
    server, client = _server(mech), ScramClient(mech, "alice", "pw")
    client.verify_server_final(server.evaluate(client.final_message(server.evaluate(client.first_message()))))
    assert server.complete and server.username == "alice"
    for user, password in (("alice", "wrong"), ("nobody", "pw")):
        server, client = _server(mech), ScramClient(mech, user, password)
        final = client.final_message(server.evaluate(client.first_message()))
        with pytest.raises(AuthenticationFailed):
            server.evaluate(final)
        assert not server.complete


def test_unknown_user_gets_a_stable_made_up_salt() -> None:
    """Probing cannot tell a missing user from a wrong password: the same salt each time."""
    first = [_server(Mechanism.SCRAM_SHA_512).evaluate(ScramClient(Mechanism.SCRAM_SHA_512, "ghost", "x", nonce="n")
                                                       .first_message()).split(b",")[1] for _ in range(2)]
    assert first[0] == first[1]


def test_a_client_final_message_is_good_for_one_exchange_only() -> None:
    mech = Mechanism.SCRAM_SHA_512
    server, client = _server(mech), ScramClient(mech, "alice", "pw")
    final = client.final_message(server.evaluate(client.first_message()))
    server.evaluate(final)
    with pytest.raises(AuthenticationFailed):
        server.evaluate(final)  # the same exchange, once more
    other = _server(mech)
    other.evaluate(ScramClient(mech, "alice", "pw", nonce=client.nonce).first_message())
    with pytest.raises(AuthenticationFailed):
        other.evaluate(final)  # another exchange: another server nonce


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.binary(max_size=400))
def test_hostile_scram_and_plain_bytes_never_authenticate(first: bytes, second: bytes) -> None:
    server = _server(Mechanism.SCRAM_SHA_256)
    try:
        server.evaluate(first)
        server.evaluate(second)
    except AuthenticationFailed:
        pass
    else:
        pytest.fail("random bytes completed a SCRAM exchange")
    assert not server.complete
    cred = make_credential(Mechanism.SCRAM_SHA_256, "pw")
    if first != plain_message("alice", "pw"):
        with pytest.raises(AuthenticationFailed):
            plain_authenticate(first, lambda u, m: cred if u == "alice" else None)


def test_plain_checks_the_password_against_the_stored_scram_credential() -> None:
    cred = make_credential(Mechanism.SCRAM_SHA_512, "pw")
    lookup = {("alice", Mechanism.SCRAM_SHA_512): cred}.get
    assert plain_authenticate(plain_message("alice", "pw"), lambda u, m: lookup((u, m))) == "alice"
    for message in (plain_message("alice", "pw2"), b"bob\0alice\0pw", plain_message("a" * 5000, "pw")):
        with pytest.raises(AuthenticationFailed):
            plain_authenticate(message, lambda u, m: lookup((u, m)))


# -- the session's state table ------------------------------------------------------------------------


def test_a_sasl_session_admits_only_the_handshake_apis_until_authenticated() -> None:
    session = Session(Listener("SASL_SSL", SecurityProtocol.SASL_SSL, "", 0), ANONYMOUS, "h",
                      sasl=SaslState.HANDSHAKE)
    served = set(REGISTRY)
    assert {k for k in served if session.admits(k)} == {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE}
    session.sasl = SaslState.AUTHENTICATE
    assert {k for k in served if session.admits(k)} == {ApiKey.API_VERSIONS, ApiKey.SASL_AUTHENTICATE}
    session.sasl = SaslState.AUTHENTICATED
    assert {k for k in served if session.admits(k)} == served
    session.expires_at = 0.0  # expired: only a re-authentication
    assert {k for k in served if session.admits(k)} == {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE}
    session.sasl = SaslState.FAILED
    assert not any(session.admits(k) for k in served)


def test_docs_name_the_permission_every_served_api_checks() -> None:
    """docs/security.md's table has a row for each API in the registry (a new API must say
    what it checks before it can be served)."""
    doc = (Path(__file__).parents[2] / "docs" / "security.md").read_text()
    rows = set(re.findall(r"^\| (\w+) \|", doc, re.MULTILINE))
    assert {spec.name for spec in REGISTRY.values()} - rows == set()


def test_a_client_final_nonce_other_than_the_combined_one_is_refused() -> None:
    """librdkafka before 2.6.1 sends its nonce twice (librdkafka#4895) with a proof that is
    right for what it sent; Kafka 4 refuses it, and so does eoslog."""
    import base64

    from eoslog.protocol.scram import salted_password, scram_hash, scram_hmac

    mech = Mechanism.SCRAM_SHA_512
    server, client = _server(mech), ScramClient(mech, "alice", "pw", nonce="cnonce")
    server_first = server.evaluate(client.first_message())
    attrs = dict(part.split("=", 1) for part in server_first.decode().split(","))
    without_proof = f"c=biws,r=cnonce{attrs['r']}"
    auth = f"n=alice,r=cnonce,{server_first.decode()},{without_proof}".encode()
    salted = salted_password(mech, "pw", base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = scram_hmac(mech, salted, b"Client Key")
    proof = bytes(a ^ b for a, b in zip(client_key, scram_hmac(mech, scram_hash(mech, client_key), auth), strict=True))
    with pytest.raises(AuthenticationFailed, match="nonce"):
        server.evaluate(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())


def test_client_security_settings_under_librdkafka_and_kafka_names() -> None:
    from eoslog.client.errors import ConfigException
    from eoslog.client.producer.config import producer_config

    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="p\\"w";'
    c = producer_config({"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": jaas})
    assert (c.security.mechanism, c.security.username, c.security.password) == (
        Mechanism.SCRAM_SHA_256, "alice", 'p"w')
    assert 'p"w' not in repr(c) and "password" not in repr(c.security)
    for bad in ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", "sasl.username": "a"},
                {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"},
                {"security.protocol": "TLS"}):
        with pytest.raises(ConfigException):
            producer_config({"bootstrap.servers": "h:1", **bad})

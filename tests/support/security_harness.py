"""A broker with every kind of listener, and the clients' settings to reach each one.

``SecuredBroker`` makes a throw-away CA (``eoslog certs dev``'s code) in a temporary
directory, stores SCRAM credentials offline in the data directory (as ``eoslog users
set-password --data-dir`` does, before the first start), and starts one broker with
PLAINTEXT, SSL (mTLS required), SASL_PLAINTEXT, SASL_SSL and SHORT (SASL_PLAINTEXT with
1.5 s sessions) listeners on free ports, ACLs on (``super.users=User:admin``). Nothing
secret is committed: all of it is made at test time.
"""

from __future__ import annotations

import hashlib
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eoslog.cli.certs import make_dev_certs
from eoslog.protocol.messages import request_types
from eoslog.protocol.scram import Mechanism, ScramClient, plain_message
from eoslog.security.credentials import CredentialStore
from eoslog.security.scram import make_credential
from support.harness import BrokerProcess, free_port
from support.rawkafka import RawClient

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
SHORT_SESSION_MS = 1500
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@dataclass
class SecuredBroker:
    root: Path
    overrides: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.certs = make_dev_certs(self.root / "certs", clients=("client", "admin"))
        self.other_ca = make_dev_certs(self.root / "other-ca", clients=("client",), ca_name="someone-else")
        self.data = self.root / "data"
        self.data.mkdir(parents=True, exist_ok=True)
        store = CredentialStore(self.data)
        store.apply([(u, m, make_credential(m, p)) for u, p in USERS.items()
                     for m in (Mechanism.SCRAM_SHA_256, Mechanism.SCRAM_SHA_512)], [])
        self.ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL", "SHORT")}
        listeners = ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.ports.items())
        self.broker = BrokerProcess(self.data, self.ports["PLAINTEXT"], {
            "listeners": listeners,
            # SHORT: SASL_PLAINTEXT whose sessions end after SHORT_SESSION_MS (KIP-368).
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,SHORT:SASL_PLAINTEXT"),
            "listener.name.short.connections.max.reauth.ms": str(SHORT_SESSION_MS),
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "ssl.keystore.location": str(self.certs / "broker.pem"),
            "ssl.truststore.location": str(self.certs / "ca.pem"),
            "listener.name.ssl.ssl.client.auth": "required",
            "authorizer.class.name": STANDARD_AUTHORIZER,
            "super.users": "User:admin;User:CN=admin,OU=eoslog-dev",
            "authorizer.log.level": "INFO",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.num.partitions": "1",
            "group.initial.rebalance.delay.ms": "0",
            **self.overrides,
        })

    def log_digest(self) -> str:
        """A digest of every log segment's bytes: equal before and after means nothing was written."""
        h = hashlib.sha256()
        for path in sorted(self.data.rglob("*.log")):
            h.update(str(path).encode() + path.read_bytes())
        return h.hexdigest()

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    # -- librdkafka's names (confluent-kafka, kcat) ------------------------------------------

    def rdkafka(self, listener: str, user: str = "alice", mechanism: str = "SCRAM-SHA-512",
                password: str | None = None, cert: str = "client", ca: Path | None = None) -> dict[str, Any]:
        conf: dict[str, Any] = {"bootstrap.servers": self.address(listener), "security.protocol": listener}
        if listener in ("SSL", "SASL_SSL"):
            conf["ssl.ca.location"] = str(ca or self.certs / "ca.pem")
        if listener == "SSL":
            conf["ssl.certificate.location"] = str(self.certs / f"{cert}-cert.pem")
            conf["ssl.key.location"] = str(self.certs / f"{cert}-key.pem")
        if listener.startswith("SASL"):
            conf.update({"sasl.mechanism": mechanism, "sasl.username": user,
                         "sasl.password": USERS[user] if password is None else password})
        return conf

    # -- raw wire ------------------------------------------------------------------------------

    def tls(self, cert: str | None = None, ca: Path | None = None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(ca or self.certs / "ca.pem"))
        if cert is not None:
            ctx.load_cert_chain(str(self.certs / f"{cert}.pem"))
        return ctx

    def raw(self, listener: str, cert: str | None = None) -> RawClient:
        tls = self.tls(cert) if listener in ("SSL", "SASL_SSL") else None
        return RawClient(self.address(listener), tls=tls)


def sasl_handshake(client: RawClient, mechanism: str) -> Any:
    return client.call(request_types(17, 1).SaslHandshakeRequest(mechanism=mechanism))


def sasl_authenticate(client: RawClient, auth_bytes: bytes, version: int = 2) -> Any:
    return client.call(request_types(36, version).SaslAuthenticateRequest(auth_bytes=auth_bytes))


def scram_login(client: RawClient, user: str, password: str, mechanism: Mechanism = Mechanism.SCRAM_SHA_512) -> Any:
    """Handshake and the two SCRAM round trips; the last SaslAuthenticate response."""
    assert sasl_handshake(client, mechanism.value).error_code == 0
    scram = ScramClient(mechanism, user, password)
    first = sasl_authenticate(client, scram.first_message())
    if first.error_code != 0:
        return first
    final = sasl_authenticate(client, scram.final_message(first.auth_bytes))
    if final.error_code == 0:
        scram.verify_server_final(final.auth_bytes)
    return final


def plain_login(client: RawClient, user: str, password: str) -> Any:
    assert sasl_handshake(client, "PLAIN").error_code == 0
    return sasl_authenticate(client, plain_message(user, password))

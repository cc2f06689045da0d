"""How a client connection is secured: TLS and SASL settings under librdkafka's and Kafka's names.

What it owns: reading ``security.protocol``, the ``ssl.*`` settings (librdkafka's
``ssl.ca.location`` / ``ssl.certificate.location`` / ``ssl.key.location`` or Kafka's PEM
``ssl.truststore.location`` / ``ssl.keystore.location``), ``sasl.mechanism`` with
``sasl.username`` / ``sasl.password`` or Kafka's ``sasl.jaas.config``; building the TLS
context; running the SASL exchange on a freshly negotiated connection. What it must never do:
show a password (``repr`` hides it; errors name the user and mechanism only).
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from eoslog.client.errors import ConfigException, SaslAuthenticationFailedError, error_for
from eoslog.protocol.messages import request_types
from eoslog.protocol.scram import SCRAM_MECHANISMS, AuthenticationFailed, Mechanism, ScramClient, plain_message

# The settings every client (producer, consumer, admin) accepts, by underscored name.
SECURITY_SETTINGS = frozenset({
    "security_protocol", "ssl_ca_location", "ssl_truststore_location", "ssl_certificate_location",
    "ssl_key_location", "ssl_keystore_location", "ssl_key_password", "ssl_endpoint_identification_algorithm",
    "ssl_keystore_type", "ssl_truststore_type", "sasl_mechanism", "sasl_mechanisms", "sasl_username",
    "sasl_password", "sasl_jaas_config",
})


def security_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The security settings among ``settings`` (dotted or underscored names), as given: what
    every extra client built for the same user (an admin beside a producer) must carry too."""
    return {k: v for k, v in settings.items() if k.replace(".", "_") in SECURITY_SETTINGS}


PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_JAAS = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')

# Sends a kio request on the connection being opened; resolves to the decoded response.
Send = Callable[[Any], Awaitable[Any]]


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanism: Mechanism | None = None
    username: str = ""
    password: str = field(default="", repr=False)

    @property
    def uses_sasl(self) -> bool:
        return self.mechanism is not None

    async def authenticate(self, send: Send, max_authenticate_version: int, where: str) -> None:
        """SaslHandshake v1 and SaslAuthenticate; SaslAuthenticationFailedError (fatal, as
        Kafka's client makes it) when the broker refuses."""
        assert self.mechanism is not None
        handshake = await send(request_types(17, 1).SaslHandshakeRequest(mechanism=self.mechanism.value))
        if handshake.error_code != 0:
            raise error_for(int(handshake.error_code),
                            f"{where}: SASL mechanism {self.mechanism.value} not enabled "
                            f"(broker offers {', '.join(handshake.mechanisms) or 'none'})")
        version = min(max_authenticate_version, 2)
        cls = request_types(36, version).SaslAuthenticateRequest

        async def step(data: bytes) -> bytes:
            answer = await send(cls(auth_bytes=data))
            if answer.error_code != 0:
                raise SaslAuthenticationFailedError(
                    f"{where}: authentication of {self.username} with {self.mechanism.value if self.mechanism else ''} "
                    f"failed: {answer.error_message or 'invalid credentials'}")
            return bytes(answer.auth_bytes)

        if self.mechanism is Mechanism.PLAIN:
            await step(plain_message(self.username, self.password))
            return
        scram = ScramClient(self.mechanism, self.username, self.password)
        try:
            server_first = await step(scram.first_message())
            scram.verify_server_final(await step(scram.final_message(server_first)))
        except AuthenticationFailed as e:
            raise SaslAuthenticationFailedError(f"{where}: {e}") from None


def _jaas(text: str) -> tuple[str, str]:
    """username and password of Kafka's PlainLoginModule / ScramLoginModule JAAS line."""
    if "PlainLoginModule" not in text and "ScramLoginModule" not in text:
        raise ConfigException("sasl.jaas.config: only PlainLoginModule and ScramLoginModule are supported")
    values = {k: v.replace('\\"', '"') for k, v in _JAAS.findall(text)}
    if "username" not in values or "password" not in values:
        raise ConfigException("sasl.jaas.config needs username=\"...\" and password=\"...\"")
    return values["username"], values["password"]


def _tls(raw: Mapping[str, Any]) -> ssl.SSLContext:
    ca = raw.get("ssl_ca_location") or raw.get("ssl_truststore_location")
    ctx = ssl.create_default_context(cafile=str(ca) if ca else None)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if str(raw.get("ssl_endpoint_identification_algorithm", "https")).lower() in ("", "none"):
        ctx.check_hostname = False
    password = raw.get("ssl_key_password") or None
    try:
        if raw.get("ssl_keystore_location"):
            ctx.load_cert_chain(str(raw["ssl_keystore_location"]), password=password)
        elif raw.get("ssl_certificate_location"):
            ctx.load_cert_chain(str(raw["ssl_certificate_location"]), raw.get("ssl_key_location"), password=password)
    except (OSError, ssl.SSLError) as e:
        raise ConfigException(f"cannot load the client certificate or key: {e}") from None
    return ctx


def client_security(raw: Mapping[str, Any]) -> ClientSecurity:
    """The security settings among a client's (underscored) settings."""
    protocol = str(raw.get("security_protocol", "PLAINTEXT")).upper()
    if protocol not in PROTOCOLS:
        raise ConfigException(f"Invalid value {protocol} for configuration security.protocol: "
                              f"one of {', '.join(PROTOCOLS)}")
    tls = _tls(raw) if protocol in ("SSL", "SASL_SSL") else None
    if not protocol.startswith("SASL"):
        return ClientSecurity(protocol, tls)
    name = str(raw.get("sasl_mechanism") or raw.get("sasl_mechanisms") or "GSSAPI").upper()
    if name not in (m.value for m in (Mechanism.PLAIN, *SCRAM_MECHANISMS)):
        raise ConfigException(f"sasl.mechanism={name}: eoslog's client speaks PLAIN, SCRAM-SHA-256, SCRAM-SHA-512")
    if raw.get("sasl_jaas_config"):
        username, password = _jaas(str(raw["sasl_jaas_config"]))
    else:
        username, password = str(raw.get("sasl_username", "")), str(raw.get("sasl_password", ""))
    if not username:
        raise ConfigException(f"security.protocol={protocol} needs sasl.username/sasl.password or sasl.jaas.config")
    return ClientSecurity(protocol, tls, Mechanism(name), username, password)

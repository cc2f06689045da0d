"""A connection's security state: its listener, its principal, and (on a SASL listener) where
its SASL exchange stands.

The dispatcher asks ``Session.admits`` before decoding anything else: on SASL_PLAINTEXT and
SASL_SSL listeners only ApiVersions, SaslHandshake and SaslAuthenticate pass until the
exchange succeeded, and after ``connections.max.reauth.ms`` only a re-authentication does
(KIP-368); anything else closes the connection. Principals: ``User:ANONYMOUS`` on PLAINTEXT
(and SSL without a client certificate), the certificate's mapped DN on SSL with one, the SASL
user on SASL (``authorizer.Security`` makes sessions and runs the exchange).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from eoslog.config import ConfigError
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.scram import Mechanism
from eoslog.security.listeners import Listener
from eoslog.security.scram import ScramServer


@dataclass(frozen=True, slots=True)
class Principal:
    type: str
    name: str

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"


ANONYMOUS = Principal("User", "ANONYMOUS")

# What an unauthenticated SASL connection may send (Kafka's SaslServerAuthenticator).
BEFORE_AUTHENTICATION = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


class SaslState(Enum):
    """A SASL connection's states, and what each admits (one table, Session.admits)."""

    HANDSHAKE = "handshake"          # waiting for SaslHandshake
    AUTHENTICATE = "authenticate"    # mechanism chosen, SaslAuthenticate exchange running
    AUTHENTICATED = "authenticated"  # every API admitted until the session expires
    FAILED = "failed"                # the failure was answered; the connection closes


def principal_from_certificate(der_subject: Any, rules: str) -> Principal:
    """The DN of a client certificate (RFC 2253 order, as Kafka prints it), mapped through
    ``ssl.principal.mapping.rules`` (``RULE:pattern/replacement/[LU]``, then DEFAULT)."""
    # ssl's subject is a tuple of RDNs, most significant first; RFC 2253 lists them reversed.
    names = {"commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O", "localityName": "L",
             "stateOrProvinceName": "ST", "countryName": "C", "emailAddress": "EMAILADDRESS"}
    dn = ",".join("+".join(f"{names.get(k, k)}={v}" for k, v in rdn) for rdn in reversed(der_subject))
    for rule in _split_rules(rules):
        if rule == "DEFAULT":
            return Principal("User", dn)
        m = re.fullmatch(r"RULE:(.*)/(.*)/([LU]?)", rule)
        if m is None:
            raise ConfigError(f"ssl.principal.mapping.rules: {rule!r} is not RULE:pattern/replacement/[LU] or DEFAULT")
        pattern, replacement, case = m.groups()
        if re.fullmatch(pattern, dn):
            name = re.sub(pattern, replacement.replace("$", "\\"), dn, count=1)
            return Principal("User", name.lower() if case == "L" else name.upper() if case == "U" else name)
    return Principal("User", dn)


def _split_rules(rules: str) -> list[str]:
    return [r.strip() for r in re.split(r",\s*(?=RULE:|DEFAULT)", rules) if r.strip()]


@dataclass
class Session:
    """One connection's security state."""

    listener: Listener
    principal: Principal
    peer_host: str
    sasl: SaslState | None = None  # None: not a SASL listener
    mechanism: Mechanism | None = None
    scram: ScramServer | None = None
    expires_at: float | None = None  # monotonic; None: never (connections.max.reauth.ms=0)
    close_after_response: bool = False
    _reauthenticating: bool = field(default=False)
    # Groups whose no-generation OffsetCommit this connection has had audited at INFO
    # (``broker.audit``: its later ones are logged at DEBUG).
    audited_commit_groups: set[str] = field(default_factory=set)

    def admits(self, api_key: int) -> bool:
        """May this request be processed? (False: the connection is closed unanswered.)"""
        if self.sasl is None:
            return True
        if self.sasl is SaslState.AUTHENTICATED and not self.expired():
            return True
        if self.sasl is SaslState.FAILED:
            return False
        if api_key == ApiKey.API_VERSIONS:
            return True
        if api_key == ApiKey.SASL_HANDSHAKE:
            return self.sasl in (SaslState.HANDSHAKE, SaslState.AUTHENTICATED)
        return api_key == ApiKey.SASL_AUTHENTICATE and self.sasl is SaslState.AUTHENTICATE

    def expired(self) -> bool:
        return self.expires_at is not None and time.monotonic() >= self.expires_at

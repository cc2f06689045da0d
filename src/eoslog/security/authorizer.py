"""The one place every request passes for authentication and authorization: ``Security``
makes each connection's ``Session`` (session.py), runs its SASL exchange against the stored
credentials, and decides what a principal may do by the ACLs (Kafka's StandardAuthorizer).

``Security.allowed`` is what handlers ask, per resource, before touching it; every
decision is logged (``eoslog.authorizer``) with who, what, which resource and the answer.
"""

from __future__ import annotations

import logging
import os
import ssl
import time
from collections.abc import Iterable
from typing import Protocol

from eoslog.config import BrokerConfig, ConfigError
from eoslog.protocol.scram import AuthenticationFailed, Mechanism
from eoslog.security.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AclStore,
    PermissionType,
    ResourceType,
    decide,
)
from eoslog.security.credentials import CredentialStore
from eoslog.security.listeners import Listener, SecurityProtocol, listener_value
from eoslog.security.scram import ScramCredential, ScramServer, plain_authenticate
from eoslog.security.session import ANONYMOUS, Principal, SaslState, Session, principal_from_certificate

decision_log = logging.getLogger("eoslog.authorizer")
log = logging.getLogger(__name__)

SUPPORTED_MECHANISMS = frozenset(m.value for m in Mechanism)
# authorizer.class.name values (any package) that mean "Kafka's ACL authorizer".
KNOWN_AUTHORIZERS = frozenset({"StandardAuthorizer", "AclAuthorizer"})


class Security:
    """The broker's listeners' security: credentials, ACLs, and the decisions."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.credentials = CredentialStore(config.log_dir)
        self.acl_store = AclStore(config.log_dir)
        self.remote: RemoteSecurityStore | None = None  # set in cluster mode
        authorizer = str(config["authorizer.class.name"]).strip()
        if authorizer and authorizer.rsplit(".", 1)[-1] not in KNOWN_AUTHORIZERS:
            raise ConfigError(f"authorizer.class.name={authorizer}: eoslog serves StandardAuthorizer only")
        self.acls_enabled = bool(authorizer)
        self.allow_if_no_acl = bool(config["allow.everyone.if.no.acl.found"])  # read-only, as in Kafka
        self.super_users = frozenset(u.strip() for u in str(config["super.users"]).split(";") if u.strip())
        self.mechanisms = [m.strip().upper() for m in str(config["sasl.enabled.mechanisms"]).split(",") if m.strip()]
        self._fake_salt_key = os.urandom(32)
        level = str(config["authorizer.log.level"])
        self._allow_level = logging.getLevelName(level)
        self._deny_level = max(logging.INFO, self._allow_level)

    def check_listeners(self, listeners: Iterable[Listener]) -> None:
        """Refuse a configuration whose SASL listener could never authenticate anyone."""
        if any(lst.protocol.uses_sasl for lst in listeners):
            unsupported = [m for m in self.mechanisms if m not in SUPPORTED_MECHANISMS]
            if unsupported or not self.mechanisms:
                raise ConfigError(f"sasl.enabled.mechanisms={','.join(self.mechanisms) or '(empty)'}: eoslog serves "
                                  "PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 only")

    # -- authentication -------------------------------------------------------------------

    def new_session(self, listener: Listener, peer_host: str, tls: ssl.SSLObject | None) -> Session:
        principal = ANONYMOUS
        if tls is not None and listener.protocol is SecurityProtocol.SSL:
            cert = tls.getpeercert()
            if cert:
                principal = principal_from_certificate(cert["subject"], str(self.config["ssl.principal.mapping.rules"]))
        return Session(listener, principal, peer_host,
                       sasl=SaslState.HANDSHAKE if listener.protocol.uses_sasl else None)

    def handshake(self, session: Session, mechanism: str) -> bool:
        """SaslHandshake: True when ``mechanism`` is enabled (the exchange may start)."""
        if mechanism not in self.mechanisms:
            return False
        if session.sasl is SaslState.AUTHENTICATED:
            session._reauthenticating = True
        session.mechanism = Mechanism(mechanism)
        session.scram = None
        session.sasl = SaslState.AUTHENTICATE
        return True

    def authenticate(self, session: Session, auth_bytes: bytes) -> tuple[bytes, int]:
        """One SaslAuthenticate step: the server's bytes and the session lifetime (ms) once
        complete. AuthenticationFailed ends the connection (after the answer)."""
        assert session.mechanism is not None
        try:
            if session.mechanism is Mechanism.PLAIN:
                user, answer = plain_authenticate(auth_bytes, self.credentials.get), b""
            else:
                if session.scram is None:
                    session.scram = ScramServer(session.mechanism, self.credentials.get, self._fake_salt_key)
                answer = session.scram.evaluate(auth_bytes)
                if not session.scram.complete:
                    return answer, 0
                assert session.scram.username is not None
                user = session.scram.username
            principal = Principal("User", user)
            if session._reauthenticating and principal != session.principal:
                raise AuthenticationFailed("re-authentication must keep the principal")
        except AuthenticationFailed as e:
            session.sasl = SaslState.FAILED
            session.close_after_response = True
            log.info("failed authentication from %s on %s with %s: %s", session.peer_host, session.listener.name,
                     session.mechanism.value, e)
            raise
        session.principal, session.sasl, session.scram = principal, SaslState.AUTHENTICATED, None
        session._reauthenticating = False
        reauth_ms = int(listener_value(self.config, session.listener.name, "connections.max.reauth.ms"))
        session.expires_at = time.monotonic() + reauth_ms / 1000 if reauth_ms > 0 else None
        return answer, reauth_ms

    @property
    def failed_authentication_delay_s(self) -> float:
        return int(self.config["connection.failed.authentication.delay.ms"]) / 1000

    # -- authorization ----------------------------------------------------------------------

    def allowed(self, principal: Principal, host: str, operation: AclOperation, resource_type: ResourceType,
                name: str, api: str, *, log: bool = True) -> bool:
        if not self.acls_enabled or str(principal) in self.super_users:
            return True
        result = decide(self.acl_store.acls, str(principal), host, operation, resource_type, name,
                        self.allow_if_no_acl)
        if not log:
            return result
        decision_log.log(self._allow_level if result else self._deny_level,
                         "Principal = %s is %s operation = %s from host = %s on resource = %s:%s for request = %s",
                         principal, "Allowed" if result else "Denied", operation.name, host,
                         resource_type.name, name, api)
        return result

    def allowed_any(self, principal: Principal, host: str, operation: AclOperation,
                    resource_type: ResourceType, api: str) -> bool:
        """Kafka's authorizeByResourceType: some resource of the type allows ``operation``
        (an ALLOW for the principal that no wildcard DENY cancels)."""
        if not self.acls_enabled or str(principal) in self.super_users:
            return True
        mine = [a for a in self.acl_store.acls if a.resource_type == resource_type
                and a.principal in (str(principal), "User:*") and a.host in (host, "*")
                and a.operation in (operation, AclOperation.ALL)]
        denied_all = any(a.permission is PermissionType.DENY and a.resource_name == "*" for a in mine)
        result = not denied_all and any(a.permission is PermissionType.ALLOW for a in mine)
        decision_log.log(self._allow_level if result else self._deny_level,
                         "Principal = %s is %s operation = %s on any resource of type %s for request = %s",
                         principal, "Allowed" if result else "Denied", operation.name, resource_type.name, api)
        return result

    async def store_acls(self, acls: Iterable[AclBinding]) -> None:
        """Store the new set durably (ZooKeeper in cluster mode, the local file otherwise); in
        effect here from the next check."""
        if self.remote is not None:
            await self.remote.store_acls(acls)
        else:
            self.acl_store.replace(acls)

    async def store_credentials(self, upserts: list[tuple[str, Mechanism, ScramCredential]],
                                deletions: list[tuple[str, Mechanism]]) -> None:
        if self.remote is not None:
            await self.remote.store_credentials(upserts, deletions)
        else:
            self.credentials.apply(upserts, deletions)


class RemoteSecurityStore(Protocol):
    """Where a cluster keeps ACLs and credentials for every broker (cluster/security_store.py)."""

    async def store_acls(self, acls: Iterable[AclBinding]) -> None: ...

    async def store_credentials(self, upserts: list[tuple[str, Mechanism, ScramCredential]],
                                deletions: list[tuple[str, Mechanism]]) -> None: ...


CLUSTER = (ResourceType.CLUSTER, CLUSTER_NAME)

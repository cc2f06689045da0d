"""SCRAM-SHA-256/512 and PLAIN, the server side, as Kafka's ScramSaslServer and
PlainSaslServer speak them (the wire's primitives and the client side: ``protocol/scram.py``).

Only salted credentials are ever kept (salt, StoredKey, ServerKey, iterations), never a
password: SCRAM proves the client knows the password without sending it, and PLAIN's
password is checked by deriving the same keys from the user's stored SCRAM salt. An unknown
user gets a made-up salt and fails at the proof, exactly as a wrong password does, so the
exchange does not tell which user names exist.
"""

from __future__ import annotations

import base64
import hmac
import os
from collections.abc import Callable
from dataclasses import dataclass

from eoslog.protocol.scram import (
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    AuthenticationFailed,
    Mechanism,
    salted_password,
    scram_attributes,
    scram_hash,
    scram_hmac,
)

MAX_ITERATIONS = 16384
MAX_USERNAME_BYTES = 1024  # longer client-first messages are refused unread


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_json(self) -> dict[str, str | int]:
        return {"salt": base64.b64encode(self.salt).decode(), "stored_key": base64.b64encode(self.stored_key).decode(),
                "server_key": base64.b64encode(self.server_key).decode(), "iterations": self.iterations}

    @classmethod
    def from_json(cls, doc: dict[str, str | int]) -> ScramCredential:
        return cls(base64.b64decode(str(doc["salt"])), base64.b64decode(str(doc["stored_key"])),
                   base64.b64decode(str(doc["server_key"])), int(doc["iterations"]))


def make_credential(mechanism: Mechanism, password: str, iterations: int = MIN_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, got {iterations}")
    salt = os.urandom(32) if salt is None else salt
    return credential_from_salted(mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations)


def credential_from_salted(mechanism: Mechanism, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """The stored form of a salted password (AlterUserScramCredentials sends the salted one)."""
    client_key = scram_hmac(mechanism, salted, b"Client Key")
    server_key = scram_hmac(mechanism, salted, b"Server Key")
    return ScramCredential(salt, scram_hash(mechanism, client_key), server_key, iterations)


def password_matches(mechanism: Mechanism, cred: ScramCredential, password: str) -> bool:
    expected = make_credential(mechanism, password, cred.iterations, cred.salt).stored_key
    return hmac.compare_digest(expected, cred.stored_key)


CredentialLookup = Callable[[str, Mechanism], ScramCredential | None]


def _saslname(name: str) -> str:
    """RFC 5802's escaping of ',' and '=' in user names."""
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise AuthenticationFailed("malformed SCRAM user name")
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One SCRAM exchange: client-first → server-first, client-final → server-final."""

    def __init__(self, mechanism: Mechanism, lookup: CredentialLookup, fake_salt_key: bytes) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._fake_salt_key = fake_salt_key
        self._step = 0
        self.username: str | None = None
        self._cred: ScramCredential | None = None
        self._known = False
        self._nonce = ""
        self._gs2 = ""
        self._client_first_bare = ""
        self._server_first = ""

    @property
    def complete(self) -> bool:
        return self._step == 2

    def evaluate(self, response: bytes) -> bytes:
        """The server's answer to one client message; AuthenticationFailed ends the exchange."""
        if len(response) > MAX_USERNAME_BYTES + 512:
            raise AuthenticationFailed("SCRAM message too long")
        try:
            text = response.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("SCRAM message is not UTF-8") from None
        if self._step == 0:
            return self._client_first(text)
        if self._step == 1:
            return self._client_final(text)
        raise AuthenticationFailed("SCRAM exchange already complete")

    def _client_first(self, text: str) -> bytes:
        # gs2-header: "n,," or "n,a=authzid," (no channel binding; Kafka refuses "y"/"p").
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] != "n":
            raise AuthenticationFailed("SCRAM client-first message without an 'n' gs2 header")
        self._gs2 = f"{parts[0]},{parts[1]},"
        self._client_first_bare = parts[2]
        attrs = scram_attributes(parts[2])
        if "n" not in attrs or "r" not in attrs or not attrs["r"]:
            raise AuthenticationFailed("SCRAM client-first message without user name or nonce")
        username = _saslname(attrs["n"])
        authzid = parts[1][2:] if parts[1].startswith("a=") else ""
        if authzid and _saslname(authzid) != username:
            raise AuthenticationFailed("SCRAM authorization id differs from the user name")
        if not username or len(username.encode()) > MAX_USERNAME_BYTES:
            raise AuthenticationFailed("SCRAM user name empty or too long")
        self.username = username
        cred = self._lookup(username, self.mechanism)
        self._known = cred is not None
        if cred is None:  # a stable fake, so probing cannot tell a missing user from a bad password
            salt = hmac.new(self._fake_salt_key, username.encode(), "sha256").digest()
            cred = ScramCredential(salt, b"\0" * 64, b"\0" * 64, MIN_ITERATIONS)
        self._cred = cred
        self._nonce = attrs["r"] + os.urandom(24).hex()  # plain alphanumerics: old librdkafka mangles "+" and "/"
        self._server_first = f"r={self._nonce},s={base64.b64encode(cred.salt).decode()},i={cred.iterations}"
        self._step = 1
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        self._step = 3  # one try: any failure below ends the exchange
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise AuthenticationFailed("SCRAM client-final message without a proof")
        attrs = scram_attributes(without_proof)
        if attrs.get("c") != base64.b64encode(self._gs2.encode()).decode():
            raise AuthenticationFailed("SCRAM channel binding does not match the gs2 header")
        # Exactly the combined nonce (RFC 5802, Kafka 4): librdkafka before 2.6.1 sends its own
        # nonce twice (librdkafka#4895) and is refused here as by Kafka 4.
        if attrs.get("r") != self._nonce:
            raise AuthenticationFailed("SCRAM nonce does not match (a replayed or foreign message)")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise AuthenticationFailed("SCRAM proof is not base64") from None
        assert self._cred is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = scram_hmac(self.mechanism, self._cred.stored_key, auth_message)
        if len(proof) != len(signature):
            raise AuthenticationFailed("invalid credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not (self._known and hmac.compare_digest(scram_hash(self.mechanism, client_key), self._cred.stored_key)):
            raise AuthenticationFailed("invalid credentials")
        self._step = 2
        server_signature = scram_hmac(self.mechanism, self._cred.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)


def plain_authenticate(response: bytes, lookup: CredentialLookup) -> str:
    """PLAIN (RFC 4616): ``authzid NUL user NUL password``; the user name when the password
    matches the user's stored SCRAM credential (either mechanism)."""
    if len(response) > 2 * MAX_USERNAME_BYTES + 1024:
        raise AuthenticationFailed("PLAIN message too long")
    parts = response.split(b"\0")
    if len(parts) != 3:
        raise AuthenticationFailed("malformed PLAIN message")
    try:
        authzid, username, password = (p.decode("utf-8") for p in parts)
    except UnicodeDecodeError:
        raise AuthenticationFailed("PLAIN message is not UTF-8") from None
    if not username or len(username.encode()) > MAX_USERNAME_BYTES:
        raise AuthenticationFailed("PLAIN user name empty or too long")
    if authzid and authzid != username:
        raise AuthenticationFailed("PLAIN authorization id differs from the user name")
    for mechanism in SCRAM_MECHANISMS:
        cred = lookup(username, mechanism)
        if cred is not None:
            if password_matches(mechanism, cred, password):
                return username
            break
    raise AuthenticationFailed("invalid credentials")

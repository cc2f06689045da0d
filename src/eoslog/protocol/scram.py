"""SCRAM-SHA-256/512 (RFC 5802, RFC 7677) and PLAIN, the server side, as Kafka's
ScramSaslServer and PlainSaslServer speak them.

Only salted credentials are ever kept (salt, StoredKey, ServerKey, iterations), never a
password: SCRAM proves the client knows the password without sending it, and PLAIN's
password is checked by deriving the same keys from the user's stored SCRAM salt. An unknown
user gets a made-up salt and fails at the proof, exactly as a wrong password does, so the
exchange does not tell which user names exist.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

MIN_ITERATIONS = 4096  # Kafka's ScramMechanism minimum
MAX_ITERATIONS = 16384
MAX_USERNAME_BYTES = 1024  # longer client-first messages are refused unread


class Mechanism(StrEnum):
    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"

    @property
    def hash_name(self) -> str:
        return "sha256" if self is Mechanism.SCRAM_SHA_256 else "sha512"

    @property
    def kafka_type(self) -> int:
        """ScramMechanism's type byte in Describe/AlterUserScramCredentials."""
        return {Mechanism.SCRAM_SHA_256: 1, Mechanism.SCRAM_SHA_512: 2}[self]

    @classmethod
    def from_kafka_type(cls, value: int) -> Mechanism:
        for m in (cls.SCRAM_SHA_256, cls.SCRAM_SHA_512):
            if m.kafka_type == value:
                return m
        raise ValueError(f"unknown SCRAM mechanism type {value}")


SCRAM_MECHANISMS = (Mechanism.SCRAM_SHA_256, Mechanism.SCRAM_SHA_512)


class AuthenticationFailed(Exception):
    """The exchange failed; the message is safe to log and to send (no secret in it)."""


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


def _hmac(mechanism: Mechanism, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, mechanism.hash_name).digest()


def _h(mechanism: Mechanism, data: bytes) -> bytes:
    return hashlib.new(mechanism.hash_name, data).digest()


def salted_password(mechanism: Mechanism, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)


def make_credential(mechanism: Mechanism, password: str, iterations: int = MIN_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, got {iterations}")
    salt = os.urandom(32) if salt is None else salt
    return credential_from_salted(mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations)


def credential_from_salted(mechanism: Mechanism, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """The stored form of a salted password (AlterUserScramCredentials sends the salted one)."""
    client_key = _hmac(mechanism, salted, b"Client Key")
    return ScramCredential(salt, _h(mechanism, client_key), _hmac(mechanism, salted, b"Server Key"), iterations)


def password_matches(mechanism: Mechanism, cred: ScramCredential, password: str) -> bool:
    expected = make_credential(mechanism, password, cred.iterations, cred.salt).stored_key
    return hmac.compare_digest(expected, cred.stored_key)


CredentialLookup = Callable[[str, Mechanism], ScramCredential | None]


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1 or key in out:
            raise AuthenticationFailed("malformed SCRAM message")
        out[key] = value
    return out


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
        attrs = _attributes(parts[2])
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
        attrs = _attributes(without_proof)
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
        signature = _hmac(self.mechanism, self._cred.stored_key, auth_message)
        if len(proof) != len(signature):
            raise AuthenticationFailed("invalid credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not (self._known and hmac.compare_digest(_h(self.mechanism, client_key), self._cred.stored_key)):
            raise AuthenticationFailed("invalid credentials")
        self._step = 2
        server_signature = _hmac(self.mechanism, self._cred.server_key, auth_message)
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


class ScramClient:
    """The client side of one SCRAM exchange (eoslog.client, the tests)."""

    def __init__(self, mechanism: Mechanism, username: str, password: str, nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self.username = username
        self.password = password
        self.nonce = nonce or os.urandom(24).hex()
        self._client_first_bare = f"n={username.replace('=', '=3D').replace(',', '=2C')},r={self.nonce}"
        self._server_signature = b""

    def first_message(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final_message(self, server_first: bytes) -> bytes:
        attrs = _attributes(server_first.decode("utf-8"))
        if not attrs.get("r", "").startswith(self.nonce):
            raise AuthenticationFailed("the server's nonce does not extend ours")
        iterations = int(attrs["i"])
        if iterations < MIN_ITERATIONS:
            raise AuthenticationFailed(f"the server asked for {iterations} iterations, fewer than {MIN_ITERATIONS}")
        salted = salted_password(self.mechanism, self.password, base64.b64decode(attrs["s"]), iterations)
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={attrs['r']}"
        auth_message = f"{self._client_first_bare},{server_first.decode()},{without_proof}".encode()
        client_key = _hmac(self.mechanism, salted, b"Client Key")
        signature = _hmac(self.mechanism, _h(self.mechanism, client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = _hmac(self.mechanism, _hmac(self.mechanism, salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        """The server proves it knows the credential too (a man in the middle would not)."""
        expected = b"v=" + base64.b64encode(self._server_signature)
        if not hmac.compare_digest(server_final, expected):
            raise AuthenticationFailed("the server's signature does not match: not the broker holding the credential")


def plain_message(username: str, password: str) -> bytes:
    return b"\0" + username.encode() + b"\0" + password.encode()

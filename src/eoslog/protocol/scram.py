"""SASL's PLAIN and SCRAM-SHA-256/512 (RFC 4616, RFC 5802, RFC 7677) as the wire carries them:
the mechanisms' names and Kafka's type bytes, the primitives both sides derive keys with, and
the client side of an exchange (eoslog.client, the CLI, the tests). The broker's side —
stored credentials, ScramServer, PLAIN's check — is ``eoslog.security.scram``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from enum import StrEnum

MIN_ITERATIONS = 4096  # Kafka's ScramMechanism minimum


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


def scram_hmac(mechanism: Mechanism, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, mechanism.hash_name).digest()


def scram_hash(mechanism: Mechanism, data: bytes) -> bytes:
    return hashlib.new(mechanism.hash_name, data).digest()


def salted_password(mechanism: Mechanism, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)


def scram_attributes(message: str) -> dict[str, str]:
    """A SCRAM message's ``k=value`` attributes (each key one letter, once)."""
    out: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1 or key in out:
            raise AuthenticationFailed("malformed SCRAM message")
        out[key] = value
    return out


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
        attrs = scram_attributes(server_first.decode("utf-8"))
        if not attrs.get("r", "").startswith(self.nonce):
            raise AuthenticationFailed("the server's nonce does not extend ours")
        iterations = int(attrs["i"])
        if iterations < MIN_ITERATIONS:
            raise AuthenticationFailed(f"the server asked for {iterations} iterations, fewer than {MIN_ITERATIONS}")
        salted = salted_password(self.mechanism, self.password, base64.b64decode(attrs["s"]), iterations)
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={attrs['r']}"
        auth_message = f"{self._client_first_bare},{server_first.decode()},{without_proof}".encode()
        client_key = scram_hmac(self.mechanism, salted, b"Client Key")
        signature = scram_hmac(self.mechanism, scram_hash(self.mechanism, client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = scram_hmac(self.mechanism, salted, b"Server Key")
        self._server_signature = scram_hmac(self.mechanism, server_key, auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        """The server proves it knows the credential too (a man in the middle would not)."""
        expected = b"v=" + base64.b64encode(self._server_signature)
        if not hmac.compare_digest(server_final, expected):
            raise AuthenticationFailed("the server's signature does not match: not the broker holding the credential")


def plain_message(username: str, password: str) -> bytes:
    return b"\0" + username.encode() + b"\0" + password.encode()

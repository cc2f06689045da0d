"""The one place every request passes for authentication and authorization.

Today the only listener is PLAINTEXT and every principal is ``User:ANONYMOUS``, as in
Kafka without SASL; the authorizer allows everything. SASL, TLS and ACLs plug in here
(``authenticate`` per connection, ``authorize`` per request) without touching handlers.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Principal:
    type: str
    name: str

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"


ANONYMOUS = Principal("User", "ANONYMOUS")


class Authorizer:
    """Decides whether a principal may run a request. Allows all until ACLs exist."""

    def authenticate(self, peer: str) -> Principal:
        return ANONYMOUS

    def authorize(self, principal: Principal, api_key: int, request: object) -> bool:
        return True

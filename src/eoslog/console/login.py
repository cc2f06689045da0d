"""Logging a person in with the cluster's own identities.

The console's ``--command-config`` says how to reach the cluster (``security.protocol``, the
TLS settings, the default ``sasl.mechanism``); a login adds the person's user name, password
and mechanism, and is checked by the cluster itself: the admin client made with them must
get through SASL and describe the cluster. The console's own identity is not used for it.
That client then serves the person's session (sessions.py).
"""

from __future__ import annotations

from collections.abc import Mapping

from eoslog.client.errors import KafkaError, SaslAuthenticationFailedError
from eoslog.console.sessions import Clients

MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")
# The console's own login settings are never a person's.
_IDENTITY = frozenset({"sasl.username", "sasl.password", "sasl.jaas.config", "sasl_username", "sasl_password",
                       "sasl_jaas_config"})


class LoginFailed(Exception):
    """Refused: the message is safe to show and to log (never the password)."""


def uses_sasl(settings: Mapping[str, str]) -> bool:
    protocol = str(settings.get("security.protocol", settings.get("security_protocol", "PLAINTEXT"))).upper()
    return protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def default_mechanism(settings: Mapping[str, str]) -> str:
    mechanism = str(settings.get("sasl.mechanism", settings.get("sasl.mechanisms", ""))).upper()
    return mechanism if mechanism in MECHANISMS else MECHANISMS[0]


def person_settings(base: Mapping[str, str], user: str, password: str, mechanism: str) -> dict[str, str]:
    return {**{k: v for k, v in base.items() if k not in _IDENTITY}, "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}


def log_in(base: Mapping[str, str], user: str, password: str, mechanism: str) -> Clients:
    """The person's clients once the cluster accepted the login (blocking: call it in a thread)."""
    if not user or not password:
        raise LoginFailed("user name and password are required")
    if mechanism not in MECHANISMS:
        raise LoginFailed(f"mechanism {mechanism!r} is not one of {', '.join(MECHANISMS)}")
    clients: Clients | None = None
    try:
        # The admin client logs in as it starts (its first Metadata); Metadata is what any
        # authenticated principal may ask (DescribeCluster would need an ACL).
        clients = Clients(person_settings(base, user, password, mechanism))
        clients.admin.list_topics()
    except SaslAuthenticationFailedError:
        if clients is not None:
            clients.close()
        raise LoginFailed("the cluster refused the user name or password") from None
    except (KafkaError, OSError) as e:
        if clients is not None:
            clients.close()
        raise LoginFailed(f"could not log in to the cluster: {type(e).__name__}: {e}") from None
    return clients

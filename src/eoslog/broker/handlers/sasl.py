"""SaslHandshake (key 17, v1) and SaslAuthenticate (key 36, v0-v2): SASL over Kafka frames.

The exchange itself lives in ``security/`` (``Security.authenticate`` over the ``Session``, and ``scram.py``);
this module translates. A failed authentication is answered SASL_AUTHENTICATION_FAILED
after ``connection.failed.authentication.delay.ms`` and the connection is then closed, as
Kafka's SaslServerAuthenticator does. SaslHandshake v0 (raw tokens after the handshake
instead of SaslAuthenticate) is not served but advertised, as Kafka advertises it: librdkafka
before 2.1 (kcat's 2.0.2) enables SCRAM only when the range starts at 0, then uses v1. A v0
request closes the connection (docs/security.md).
"""

from __future__ import annotations

import asyncio
import datetime
from typing import TYPE_CHECKING, Any

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import ApiSpec, CloseConnection, build, response_types
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.scram import AuthenticationFailed

if TYPE_CHECKING:
    from eoslog.protocol.requests import SaslAuthenticateRequest, SaslHandshakeRequest


async def handle_sasl_handshake(ctx: RequestContext, request: SaslHandshakeRequest) -> Any:
    module = response_types(ctx)
    security = ctx.state.security
    if ctx.session is None or ctx.session.sasl is None:
        # Kafka answers ILLEGAL_SASL_STATE on a listener without SASL.
        return build(module.SaslHandshakeResponse, error_code=ErrorCode.illegal_sasl_state, mechanisms=())
    ok = security.handshake(ctx.session, request.mechanism)
    return build(module.SaslHandshakeResponse,
                 error_code=ErrorCode.none if ok else ErrorCode.unsupported_sasl_mechanism,
                 mechanisms=tuple(security.mechanisms))


async def handle_sasl_authenticate(ctx: RequestContext, request: SaslAuthenticateRequest) -> Any:
    module = response_types(ctx)
    if ctx.session is None or ctx.session.sasl is None:
        raise CloseConnection("SaslAuthenticate on a listener without SASL")
    try:
        answer, lifetime_ms = ctx.state.security.authenticate(ctx.session, request.auth_bytes)
    except AuthenticationFailed:
        await asyncio.sleep(ctx.state.security.failed_authentication_delay_s)
        mechanism = ctx.session.mechanism.value if ctx.session.mechanism else "?"
        return build(module.SaslAuthenticateResponse, error_code=ErrorCode.sasl_authentication_failed,
                     error_message=f"Authentication failed during authentication due to invalid credentials "
                                   f"with SASL mechanism {mechanism}",
                     auth_bytes=b"", session_lifetime=datetime.timedelta(0))
    return build(module.SaslAuthenticateResponse, error_code=ErrorCode.none, error_message=None,
                 auth_bytes=answer, session_lifetime=datetime.timedelta(milliseconds=lifetime_ms))


APIS = [
    ApiSpec(ApiKey.SASL_HANDSHAKE, "SaslHandshake", 1, 1, handle_sasl_handshake, advertised_min_version=0),
    ApiSpec(ApiKey.SASL_AUTHENTICATE, "SaslAuthenticate", 0, 2, handle_sasl_authenticate),
]

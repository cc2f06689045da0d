"""Request dispatch: frame → (version check, decode, authorize, handle) → frame.

The registry (``handlers/registry.py``) is built from each handler module's ``APIS``
list; ApiVersions advertises exactly what is registered. What Kafka does with a request it cannot serve:

- ApiVersions of an unknown (newer) version → a v0 response with UNSUPPORTED_VERSION
  and the supported ranges;
- any other unknown API key or version, or a malformed frame → the connection is
  closed (Kafka's ``InvalidRequestException``); other connections are untouched;
- on a SASL listener, any request the session does not admit yet (before authentication,
  or after its session expired) → the connection is closed before the request is decoded.

Only Produce may detach from its connection once its appends are done (``pipelined``,
``RequestContext.detach``): the connection then processes the next Produce requests while
the earlier ones wait for their acks (``broker.connection``).
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import struct
import time
from collections.abc import Callable
from typing import Any

from eoslog.broker import audit
from eoslog.broker.context import BrokerState, RequestContext
from eoslog.broker.handlers.api_versions import unsupported_version_response
from eoslog.broker.handlers.base import CloseConnection
from eoslog.broker.handlers.registry import REGISTRY
from eoslog.broker.request_time import Timed
from eoslog.metrics.requests import RequestMetrics
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.codec import (
    API_VERSIONS_KEY,
    Chunk,
    DecodeError,
    Frame,
    decode_request,
    encode_response_chunks,
    read_prefix,
)
from eoslog.quotas.client import QuotaType
from eoslog.security.session import Session

log = logging.getLogger(__name__)

_API_KEY = struct.Struct(">h")
_REQUEST_QUOTA_EXEMPT = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


class Dispatcher:
    def __init__(self, state: BrokerState, metrics: RequestMetrics | None = None) -> None:
        self.state = state
        self.metrics = metrics  # None: metrics.listener unset, nothing observed
        self._serving = False  # state.serving seen set: it stays set, so asked no more

    @staticmethod
    def pipelined(frame: Frame) -> bool:
        """Is ``frame`` a Produce, the one request whose wait may overlap the next requests?"""
        return len(frame) >= 2 and _API_KEY.unpack_from(frame)[0] == ApiKey.PRODUCE

    async def handle(self, frame: Frame, session: Session, peer: str,
                     detach: Callable[[], None] | None = None,
                     mute: Callable[[int], None] | None = None) -> list[Chunk] | None:
        """Answer one request frame with the buffers of its response frame; None when no
        response is due (acks=0). A Fetch's records may be file regions, to be sent or read
        before the event loop moves on (``codec.read_chunks``). ``detach``: given to a pipelined
        request's handler (``RequestContext.detach``); ``mute(ms)``: the connection is to read
        nothing more for that long (a quota's throttle, KIP-219)."""
        if not self._serving:
            await self.state.serving.wait()
            self._serving = True
        start = time.perf_counter() if self.metrics is not None else 0.0
        try:
            prefix = read_prefix(frame)
        except DecodeError as e:
            raise CloseConnection(str(e)) from e
        if not session.admits(prefix.api_key):
            raise CloseConnection(f"API key {prefix.api_key} before SASL authentication completed"
                                  + (" (session expired: connections.max.reauth.ms)" if session.expired() else ""))
        spec = REGISTRY.get(prefix.api_key)
        if spec is None or not spec.min_version <= prefix.api_version <= spec.max_version:
            if prefix.api_key == API_VERSIONS_KEY:
                return encode_response_chunks(
                    prefix.correlation_id,
                    unsupported_version_response(REGISTRY),
                    API_VERSIONS_KEY,
                )
            raise CloseConnection(
                f"unsupported API key {prefix.api_key} version {prefix.api_version}"
                + (f" (supported {spec.min_version}-{spec.max_version})" if spec else "")
            )
        try:
            request, client_id = decode_request(frame, prefix)
        except DecodeError as e:
            raise CloseConnection(str(e)) from e
        ctx = RequestContext(
            prefix.api_key, prefix.api_version, prefix.correlation_id, client_id,
            session.principal, peer, self.state, session, detach, len(frame), mute=mute,
        )
        # Authorization is per resource: each handler asks ctx.allowed(...) before it
        # touches one and answers Kafka's *_AUTHORIZATION_FAILED code for it.
        quotas = self.state.quota_admin.quotas
        if quotas.enabled(QuotaType.REQUEST) and self._request_quota_applies(prefix.api_key, client_id):
            timed = Timed(spec.handler(ctx, request))
            response = await timed
            # Kafka's request-time quota: percent of one thread, recorded as thread-seconds x 100.
            ctx.record_quota(QuotaType.REQUEST, timed.busy_s * 100)
        else:
            response = await spec.handler(ctx, request)
        if ctx.throttle.ms > 0:
            response = self._throttled(ctx, response)
        if prefix.api_key in audit.AUDITED_APIS:
            audit.record(ctx, request, response)
        if self.metrics is not None:
            self.metrics.observe(spec.name, time.perf_counter() - start, response)
        if response is None:
            return None
        return encode_response_chunks(prefix.correlation_id, response, prefix.api_key)

    def _request_quota_applies(self, api_key: int, client_id: str | None) -> bool:
        """Kafka exempts other brokers and the requests a client needs before it can be
        identified (ApiVersions, SASL)."""
        return api_key not in _REQUEST_QUOTA_EXEMPT and not self.state.metadata_support.is_inter_broker(client_id)

    def _throttled(self, ctx: RequestContext, response: Any) -> Any:
        """KIP-219: the response says how long the client is to wait (the connection is muted
        for as long already: ``RequestContext.record_quota``), so that one that does not wait
        is held back anyway."""
        throttle = ctx.throttle
        assert throttle.quota is not None
        self.state.quota_admin.quotas.throttled(throttle.quota, ctx.principal.name, ctx.client_id or "", throttle.ms)
        if response is not None and any(f.name == "throttle_time" for f in dataclasses.fields(response)):
            response = dataclasses.replace(response, throttle_time=datetime.timedelta(milliseconds=throttle.ms))
        return response

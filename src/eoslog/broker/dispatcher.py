"""Request dispatch: frame → (version check, decode, authorize, handle) → frame.

The registry (``handlers/registry.py``) is built from each handler module's ``APIS``
list; ApiVersions advertises exactly what is registered. What Kafka does with a request it cannot serve:

- ApiVersions of an unknown (newer) version → a v0 response with UNSUPPORTED_VERSION
  and the supported ranges;
- any other unknown API key or version, or a malformed frame → the connection is
  closed (Kafka's ``InvalidRequestException``); other connections are untouched.
"""

from __future__ import annotations

import logging
import time

from eoslog.broker.context import BrokerState, RequestContext
from eoslog.broker.handlers.api_versions import unsupported_version_response
from eoslog.broker.handlers.base import CloseConnection
from eoslog.broker.handlers.registry import REGISTRY
from eoslog.broker.security import Authorizer, Principal
from eoslog.metrics.requests import RequestMetrics
from eoslog.protocol.codec import (
    API_VERSIONS_KEY,
    DecodeError,
    Frame,
    decode_request,
    encode_response_chunks,
    read_prefix,
)

log = logging.getLogger(__name__)


class Dispatcher:
    def __init__(self, state: BrokerState, authorizer: Authorizer | None = None,
                 metrics: RequestMetrics | None = None) -> None:
        self.state = state
        self.authorizer = authorizer or Authorizer()
        self.metrics = metrics  # None: metrics.listener unset, nothing observed

    async def handle(self, frame: Frame, principal: Principal, peer: str) -> list[bytes] | None:
        """Answer one request frame with the buffers of its response frame; None when no
        response is due (acks=0)."""
        if not self.state.serving.is_set():
            await self.state.serving.wait()
        start = time.perf_counter()
        try:
            prefix = read_prefix(frame)
        except DecodeError as e:
            raise CloseConnection(str(e)) from e
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
            principal, peer, self.state,
        )
        if not self.authorizer.authorize(principal, prefix.api_key, request):
            # Unreachable until ACLs exist; each handler family will answer with its
            # *_AUTHORIZATION_FAILED code here.
            raise CloseConnection(f"{principal} is not authorized for {spec.name}")
        response = await spec.handler(ctx, request)
        if self.metrics is not None:
            self.metrics.observe(spec.name, time.perf_counter() - start, response)
        if response is None:
            return None
        return encode_response_chunks(prefix.correlation_id, response, prefix.api_key)

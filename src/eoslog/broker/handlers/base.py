"""What every handler module shares: the ApiSpec it registers and the response types.

Handlers build responses with ``eoslog.protocol.messages.build`` (re-exported here), passing
every field they know of, so one handler serves a whole version range.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from eoslog.broker.context import RequestContext
from eoslog.protocol.messages import build
from eoslog.protocol.messages import response_types as protocol_response_types

__all__ = ["NO_THROTTLE", "ApiSpec", "Handler", "build", "response_module", "response_types"]

Handler = Callable[[RequestContext, Any], Awaitable[Any | None]]

NO_THROTTLE = datetime.timedelta(0)


@dataclass(frozen=True, slots=True)
class ApiSpec:
    api_key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler


def response_module(api_key: int, version: int) -> ModuleType:
    return protocol_response_types(api_key, version)


def response_types(ctx: RequestContext) -> ModuleType:
    """The kio module holding the response classes for this request's version."""
    return protocol_response_types(ctx.api_key, ctx.api_version)

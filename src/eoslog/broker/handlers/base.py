"""What every handler module shares: the ApiSpec it registers and a response builder.

kio generates one dataclass per API *version*; newer versions add fields. Handlers
build responses through ``build`` with every field they know of, and ``build`` keeps
the ones the requested version has, so one handler serves a whole version range.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any

from kio.index import load_payload_module
from kio.static.constants import EntityType

from eoslog.broker.context import RequestContext

Handler = Callable[[RequestContext, Any], Awaitable[Any | None]]

NO_THROTTLE = datetime.timedelta(0)


@dataclass(frozen=True, slots=True)
class ApiSpec:
    api_key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler


@cache
def response_module(api_key: int, version: int) -> ModuleType:
    return load_payload_module(api_key, version, EntityType.response)


@cache
def _field_names(cls: type[Any]) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def build(cls: type[Any], **values: Any) -> Any:
    """Instantiate a kio dataclass with the subset of ``values`` its version defines."""
    names = _field_names(cls)
    return cls(**{k: v for k, v in values.items() if k in names})


def response_types(ctx: RequestContext) -> ModuleType:
    """The kio module holding the response classes for this request's version."""
    return response_module(ctx.api_key, ctx.api_version)

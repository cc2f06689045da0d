"""What every handler module shares: the ApiSpec it registers, the response types, and the
wait every coordinator's answer makes for its write to be replicated (``replicated``).

Handlers build responses with ``eoslog.protocol.messages.build`` (re-exported here), passing
every field they know of, so one handler serves a whole version range.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from eoslog.broker.context import RequestContext
from eoslog.coordinator.internal_topic import InternalTopic
from eoslog.errors import Errors
from eoslog.features import FEATURES
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.messages import build
from eoslog.protocol.messages import response_types as protocol_response_types
from eoslog.security.acls import AclOperation

__all__ = [
    "NO_THROTTLE", "ApiSpec", "CloseConnection", "Handler", "build", "replicated", "response_module",
    "response_types", "to_ms", "versioned",
]

Handler = Callable[[RequestContext, Any], Awaitable[Any | None]]

NO_THROTTLE = datetime.timedelta(0)
# What *_authorized_operations fields hold when the request did not ask for them.
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


class CloseConnection(Exception):
    """The request cannot be answered; close this connection only (the dispatcher does)."""


def authorized_operations(requested: bool, operations: Iterable[AclOperation]) -> int:
    """The bit field a response reports for ``operations`` (those the principal may perform,
    ``RequestContext.allowed_operations``), or the 'omitted' marker when not requested."""
    if not requested:
        return AUTHORIZED_OPERATIONS_OMITTED
    return sum(1 << op for op in set(operations))


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """One API a handler module serves: the versions it accepts and its handler.

    ``advertised_min_version`` is set only where Kafka's ApiVersions answer claims
    more than the broker accepts (Produce, below); requests outside
    ``min_version..max_version`` are refused either way.

    ``feature``/``feature_level``: an API that exists only with a feature (KIP-584) at that level
    is served — registered, so advertised and dispatched — only while this broker supports the
    level (``eoslog.features.FEATURES``); its handler checks the *finalized* level per request.
    """

    api_key: ApiKey
    name: str
    min_version: int
    max_version: int
    handler: Handler
    advertised_min_version: int | None = None
    feature: str | None = None
    feature_level: int = 1

    @property
    def enabled(self) -> bool:
        """Served by this build: no feature needed, or its level is implemented."""
        if self.feature is None:
            return True
        known = FEATURES.get(self.feature)
        return known is not None and known.supports(self.feature_level)

    @property
    def advertised(self) -> tuple[int, int]:
        """The (min, max) version range ApiVersions reports for this API."""
        low = self.min_version if self.advertised_min_version is None else self.advertised_min_version
        return low, self.max_version


def versioned(request: object) -> Any:
    """The request, for reading a field only some of its versions have, in a branch the
    version was checked in (a request typed as the union of its versions has only the
    fields common to all)."""
    return request


def to_ms(value: datetime.timedelta) -> int:
    return value // datetime.timedelta(milliseconds=1)


def response_module(api_key: int, version: int) -> ModuleType:
    return protocol_response_types(api_key, version)


def response_types(ctx: RequestContext) -> ModuleType:
    """The kio module holding the response classes for this request's version."""
    return protocol_response_types(ctx.api_key, ctx.api_version)


# Kafka's offsets.commit.timeout.ms default: how long a coordinator's write may wait for the ISR.
COORDINATOR_WRITE_TIMEOUT_MS = 5000


async def replicated(ctx: RequestContext, topic: InternalTopic, partition: int, error: Errors) -> Errors:
    """A coordinator's own writes are acks=all: its answer waits until the ISR has them (a new
    leader would not have a write its followers lacked) and, with group commit, until they
    are fsynced (a power cut must not take back an answered write). The error a client
    should see when that fails, as Kafka maps its append errors (NOT_COORDINATOR when this
    broker no longer leads the partition, else COORDINATOR_NOT_AVAILABLE, retriable)."""
    return await coordinator_write_replicated(topic, partition, error)


async def coordinator_write_replicated(topic: InternalTopic, partition: int, error: Errors) -> Errors:
    """``replicated`` for a write no request context stands behind (a leader's implicit add)."""
    if error is not Errors.NONE:
        return error
    outcome = await topic.wait_replicated(partition, COORDINATOR_WRITE_TIMEOUT_MS)
    if outcome is Errors.NONE:
        return Errors.NONE
    return Errors.NOT_COORDINATOR if outcome is Errors.NOT_LEADER_OR_FOLLOWER else Errors.COORDINATOR_NOT_AVAILABLE

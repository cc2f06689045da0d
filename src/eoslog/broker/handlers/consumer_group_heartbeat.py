"""ConsumerGroupHeartbeat (key 68, KIP-848): served only by a build that implements
``group.version`` 1 (``ApiSpec(feature=GROUP_VERSION)``). Until then it is neither advertised nor
dispatched: a client that reads ApiVersions (franz-go, librdkafka, Kafka's Java consumer) sees the
consumer protocol is not there and falls back to the classic one or says so, instead of being
answered UNSUPPORTED_VERSION by an API the broker claimed to have.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, cast

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import NO_THROTTLE, ApiSpec, build, response_types
from eoslog.features import GROUP_VERSION
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from eoslog.protocol.requests import ConsumerGroupHeartbeatRequest
    from eoslog.protocol.responses import ConsumerGroupHeartbeatResponse


async def handle_consumer_group_heartbeat(
    ctx: RequestContext, request: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse:
    return cast("ConsumerGroupHeartbeatResponse", build(
        response_types(ctx).ConsumerGroupHeartbeatResponse, throttle_time=NO_THROTTLE,
                 error_code=ErrorCode.unsupported_version, error_message=None, member_id=None, member_epoch=0,
                 heartbeat_interval=datetime.timedelta(0), assignment=None))


APIS = [ApiSpec(ApiKey.CONSUMER_GROUP_HEARTBEAT, "ConsumerGroupHeartbeat", 0, 1, handle_consumer_group_heartbeat,
                feature=GROUP_VERSION)]

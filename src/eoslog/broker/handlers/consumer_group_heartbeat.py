"""ConsumerGroupHeartbeat (key 68, KIP-848), refused as Apache Kafka refuses it when its
``consumer`` group protocol is off (``group.coordinator.rebalance.protocols=classic``): the API is
advertised and every request is answered UNSUPPORTED_VERSION, which Kafka's Java consumer reports as
"The cluster does not support the new CONSUMER group protocol. Set group.protocol=classic ...".
eoslog serves classic groups only (JoinGroup/SyncGroup/Heartbeat). Checked against Kafka 4.4 by
tests/conformance (groups/consumer-protocol-off) and tests/reference/test_java_clients.py.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, cast

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import NO_THROTTLE, ApiSpec, build, response_types
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


APIS = [ApiSpec(ApiKey.CONSUMER_GROUP_HEARTBEAT, "ConsumerGroupHeartbeat", 0, 1, handle_consumer_group_heartbeat)]

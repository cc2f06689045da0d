"""DescribeCluster (key 60): cluster id, controller and brokers, as a KRaft broker answers;
ElectLeaders (key 43), handled by the controller.

A broker serves the BROKER endpoint type (1) only; a request for the CONTROLLER type (2)
gets MISMATCHED_ENDPOINT_TYPE and any other type UNSUPPORTED_ENDPOINT_TYPE (v0 has no
such codes: INVALID_REQUEST). The controller id a KRaft broker reports is some live
broker; with one node that is this node, in a ZooKeeper cluster the elected controller.
No broker is ever fenced, so v2's ``include_fenced_brokers`` changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import (
    AUTHORIZED_OPERATIONS_OMITTED,
    NO_THROTTLE,
    ApiSpec,
    authorized_operations,
    build,
    response_types,
)
from eoslog.errors import Errors, KafkaError
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import ErrorCode, error_code
from eoslog.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from eoslog.types import TopicPartition

if TYPE_CHECKING:
    from eoslog.protocol.requests import DescribeClusterRequest, ElectLeadersRequest
    from eoslog.protocol.responses import DescribeClusterResponse, ElectLeadersResponse

BROKER_ENDPOINT = 1
CONTROLLER_ENDPOINT = 2
_ENDPOINT_NAMES = {BROKER_ENDPOINT: "BROKER", CONTROLLER_ENDPOINT: "CONTROLLER"}



async def handle_describe_cluster(ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    module = response_types(ctx)
    endpoint_type = int(getattr(request, "endpoint_type", BROKER_ENDPOINT))
    if endpoint_type != BROKER_ENDPOINT:
        known = endpoint_type in _ENDPOINT_NAMES
        if ctx.api_version == 0:
            code = ErrorCode.invalid_request
        else:
            code = ErrorCode.mismatched_endpoint_type if known else ErrorCode.unsupported_endpoint_type
        message = (
            f"The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type "
            f"{_ENDPOINT_NAMES[endpoint_type]}" if known else f"Unsupported endpoint type {endpoint_type}"
        )
        return cast("DescribeClusterResponse", build(
            module.DescribeClusterResponse,
            throttle_time=NO_THROTTLE, error_code=code, error_message=message,
            endpoint_type=BROKER_ENDPOINT, cluster_id="", controller_id=-1, brokers=(),
            cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        ))
    if not ctx.allowed_on_cluster(AclOperation.DESCRIBE):
        return cast("DescribeClusterResponse", build(
            module.DescribeClusterResponse,
            throttle_time=NO_THROTTLE, error_code=ErrorCode.cluster_authorization_failed, error_message=None,
            endpoint_type=BROKER_ENDPOINT, cluster_id="", controller_id=-1, brokers=(),
            cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        ))
    state = ctx.state
    brokers = tuple(
        build(module.DescribeClusterBroker, broker_id=b.node_id, host=b.host, port=b.port,
              rack=b.rack, is_fenced=False)
        for b in state.live_brokers(ctx.listener)
    )
    return cast("DescribeClusterResponse", build(
        module.DescribeClusterResponse,
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
        endpoint_type=BROKER_ENDPOINT, cluster_id=state.cluster_id, controller_id=state.controller_id,
        brokers=brokers,
        cluster_authorized_operations=authorized_operations(
            bool(request.include_cluster_authorized_operations),
            ctx.allowed_operations(ResourceType.CLUSTER, CLUSTER_NAME)),
    ))


# -- ElectLeaders ------------------------------------------------------------------------


PREFERRED, UNCLEAN = 0, 1


async def handle_elect_leaders(ctx: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    """ElectLeaders (43): answered by the controller (others: NOT_CONTROLLER). A null list asks
    for every partition and, as Kafka, reports only those an election was tried for."""
    module = response_types(ctx)
    unclean = int(getattr(request, "election_type", PREFERRED)) == UNCLEAN
    wanted = None if request.topic_partitions is None else [
        TopicPartition(str(t.topic), int(p)) for t in request.topic_partitions for p in t.partitions]
    top_level = Errors.NONE
    if not ctx.allowed_on_cluster(AclOperation.ALTER):
        top_level = Errors.CLUSTER_AUTHORIZATION_FAILED
        results = dict.fromkeys(wanted or (), top_level)
    else:
        try:
            results = await ctx.state.metadata_support.elect_leaders(wanted, unclean)
        except KafkaError as e:
            top_level = e.error
            results = dict.fromkeys(wanted or (), e.error)
    if wanted is None:
        results = {tp: e for tp, e in results.items() if e is not Errors.ELECTION_NOT_NEEDED}
    by_topic: dict[str, list[Any]] = {}
    for tp, error in sorted(results.items()):
        by_topic.setdefault(tp.topic, []).append(build(
            module.PartitionResult, partition_id=tp.partition, error_code=error_code(error),
            error_message=None if error is Errors.NONE else error.name))
    return cast("ElectLeadersResponse", build(
        module.ElectLeadersResponse, throttle_time=NO_THROTTLE, error_code=error_code(top_level),
        replica_election_results=tuple(build(module.ReplicaElectionResult, topic=t, partition_result=tuple(r))
                                       for t, r in by_topic.items()),
    ))


APIS = [
    ApiSpec(ApiKey.DESCRIBE_CLUSTER, "DescribeCluster", 0, 2, handle_describe_cluster),
    ApiSpec(ApiKey.ELECT_LEADERS, "ElectLeaders", 0, 2, handle_elect_leaders),
]

"""AlterPartitionReassignments (key 45) and ListPartitionReassignments (key 46), KIP-455:
answered by the controller (others: NOT_CONTROLLER, and the admin client asks the controller
Metadata names), as Kafka's ZooKeeper-era KafkaApis answered them. Altering needs ALTER on the
cluster, listing DESCRIBE; the reassignment itself is the controller's
(``cluster/controller/reassignments.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import NO_THROTTLE, ApiSpec, build, response_types
from eoslog.errors import Errors, KafkaError
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import error_code
from eoslog.security.acls import AclOperation
from eoslog.types import TopicPartition

if TYPE_CHECKING:
    from eoslog.protocol.requests import AlterPartitionReassignmentsRequest, ListPartitionReassignmentsRequest
    from eoslog.protocol.responses import AlterPartitionReassignmentsResponse, ListPartitionReassignmentsResponse


async def handle_alter_partition_reassignments(ctx: RequestContext, request: AlterPartitionReassignmentsRequest
                                               ) -> AlterPartitionReassignmentsResponse:
    module = response_types(ctx)
    allow_change = bool(getattr(request, "allow_replication_factor_change", True))
    targets: dict[TopicPartition, tuple[int, ...] | None] = {
        TopicPartition(str(t.name), int(p.partition_index)): None if p.replicas is None else tuple(map(int, p.replicas))
        for t in request.topics for p in t.partitions}
    top_level, message = Errors.NONE, None
    results: dict[TopicPartition, tuple[Errors, str | None]] = {}
    if not ctx.allowed_on_cluster(AclOperation.ALTER):
        # AlterPartitionReassignmentsRequest.getErrorResponse: every partition and the top level.
        top_level = Errors.CLUSTER_AUTHORIZATION_FAILED
        results = dict.fromkeys(targets, (top_level, None))
    else:
        try:
            refusals = await ctx.state.metadata_support.alter_reassignments(targets, allow_change)
        except KafkaError as e:
            top_level, message = e.error, str(e)  # NOT_CONTROLLER: nothing per partition, as Kafka
        else:
            results = {tp: (Errors.NONE, None) if r is None else (r.error, r.message) for tp, r in refusals.items()}
    by_topic: dict[str, list[Any]] = {}
    for tp, (error, text) in results.items():
        by_topic.setdefault(tp.topic, []).append(build(
            module.ReassignablePartitionResponse, partition_index=tp.partition, error_code=error_code(error),
            error_message=text))
    return cast("AlterPartitionReassignmentsResponse", build(
        module.AlterPartitionReassignmentsResponse, throttle_time=NO_THROTTLE,
        allow_replication_factor_change=allow_change, error_code=error_code(top_level), error_message=message,
        responses=tuple(build(module.ReassignableTopicResponse, name=t, partitions=tuple(ps))
                        for t, ps in by_topic.items())))


async def handle_list_partition_reassignments(ctx: RequestContext, request: ListPartitionReassignmentsRequest
                                              ) -> ListPartitionReassignmentsResponse:
    module = response_types(ctx)
    wanted = None if request.topics is None else [
        TopicPartition(str(t.name), int(p)) for t in request.topics for p in t.partition_indexes]
    top_level, message = Errors.NONE, None
    ongoing = {}
    if not ctx.allowed_on_cluster(AclOperation.DESCRIBE):
        top_level = Errors.CLUSTER_AUTHORIZATION_FAILED
    else:
        try:
            ongoing = await ctx.state.metadata_support.list_reassignments(wanted)
        except KafkaError as e:
            top_level, message = e.error, str(e)
    by_topic: dict[str, list[Any]] = {}
    for tp, a in sorted(ongoing.items()):
        by_topic.setdefault(tp.topic, []).append(build(
            module.OngoingPartitionReassignment, partition_index=tp.partition, replicas=a.replicas,
            adding_replicas=a.adding, removing_replicas=a.removing))
    return cast("ListPartitionReassignmentsResponse", build(
        module.ListPartitionReassignmentsResponse, throttle_time=NO_THROTTLE, error_code=error_code(top_level),
        error_message=message,
        topics=tuple(build(module.OngoingTopicReassignment, name=t, partitions=tuple(ps))
                     for t, ps in by_topic.items())))


APIS = [
    ApiSpec(ApiKey.ALTER_PARTITION_REASSIGNMENTS, "AlterPartitionReassignments", 0, 1,
            handle_alter_partition_reassignments),
    ApiSpec(ApiKey.LIST_PARTITION_REASSIGNMENTS, "ListPartitionReassignments", 0, 0,
            handle_list_partition_reassignments),
]

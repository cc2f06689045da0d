"""Metadata (key 3): brokers, cluster id, controller, topics and partitions.

One node owns every partition (leader = node id, replicas = ISR = [node id]); in a
cluster the answer comes from the ZooKeeper-fed metadata cache: every registered broker,
the controller, each partition's replicas, ISR, offline replicas, leader and leader epoch
(LEADER_NOT_AVAILABLE while it has no live leader). Topics named in the request that do not
exist are created when ``auto.create.topics.enable`` and the request's
``allow_auto_topic_creation`` (v4+) both allow it.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
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
from eoslog.broker.handlers.topics import create_with_defaults
from eoslog.cluster.metadata import PartitionView
from eoslog.errors import Errors
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import ErrorCode, error_code
from eoslog.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from eoslog.storage import TopicError, TopicInfo
from eoslog.types import INTERNAL_TOPICS

if TYPE_CHECKING:
    from eoslog.cluster.member import ClusterMember
    from eoslog.protocol.requests import MetadataRequest
    from eoslog.protocol.responses import MetadataResponse


TopicOps = Callable[[str], int]


def _topic_entry(module: ModuleType, name: str, topic_id: Any, internal: bool, partitions: list[PartitionView],
                 topic_ops: TopicOps) -> Any:
    return build(
        module.MetadataResponseTopic,
        error_code=ErrorCode.none, name=name, topic_id=topic_id, is_internal=internal,
        partitions=tuple(
            build(module.MetadataResponsePartition,
                  error_code=error_code(p.error), partition_index=p.partition, leader_id=p.leader,
                  leader_epoch=p.leader_epoch, replica_nodes=p.replicas, isr_nodes=p.isr,
                  offline_replicas=p.offline_replicas)
            for p in partitions
        ),
        topic_authorized_operations=topic_ops(name),
    )


def _local_entry(module: ModuleType, ctx: RequestContext, info: TopicInfo, topic_ops: TopicOps) -> Any:
    """One node: it leads every partition, in epoch 0."""
    node = (ctx.state.node_id,)
    views = [PartitionView(p, node[0], 0, node, node, (), Errors.NONE) for p in range(info.num_partitions)]
    return _topic_entry(module, info.name, info.topic_id, info.internal, views, topic_ops)


def _cluster_entry(module: ModuleType, cluster: ClusterMember, topic: str, topic_ops: TopicOps) -> Any:
    assignment = cluster.metadata.topics[topic]
    views = [cluster.metadata.view(tp) for tp in cluster.metadata.partitions_of(topic)]
    return _topic_entry(module, topic, assignment.topic_id, topic in INTERNAL_TOPICS, views, topic_ops)


def _error_entry(module: ModuleType, name: str | None, code: ErrorCode, topic_id: Any = None) -> Any:
    return build(
        module.MetadataResponseTopic,
        error_code=code, name=name, topic_id=topic_id, is_internal=False, partitions=(),
        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


async def _cluster_topics(ctx: RequestContext, cluster: ClusterMember, request: Any, module: ModuleType,
                          topic_ops: TopicOps, all_topics: bool) -> list[Any]:
    metadata = cluster.metadata
    if all_topics:
        return [_cluster_entry(module, cluster, t, topic_ops) for t in sorted(metadata.topics) if _describable(ctx, t)]
    out: list[Any] = []
    for wanted in request.topics:
        name = wanted.name
        if name is None and getattr(wanted, "topic_id", None) is not None:
            name = next((t for t, a in metadata.topics.items() if a.topic_id == wanted.topic_id), None)
            if name is None:
                out.append(_error_entry(module, None, ErrorCode.unknown_topic_id, wanted.topic_id))
                continue
        refusal = _refusal(ctx, request, name, name in metadata.topics)
        if refusal is not None:
            out.append(_error_entry(module, name, refusal))
        elif name in metadata.topics:
            out.append(_cluster_entry(module, cluster, name, topic_ops))
        elif name is not None and _may_auto_create(ctx, request):
            # As Kafka: the new topic has no leaders yet; the client asks again.
            error = await create_with_defaults(ctx, name)
            out.append(_error_entry(module, name, ErrorCode.leader_not_available if error is None else error))
        else:
            out.append(_error_entry(module, name, ErrorCode.unknown_topic_or_partition))
    return out


def _describable(ctx: RequestContext, topic: str) -> bool:
    return ctx.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)


def _refusal(ctx: RequestContext, request: Any, name: str | None, exists: bool) -> ErrorCode | None:
    """Kafka's answer for a named topic the principal may not see (no DESCRIBE) or may not
    auto-create (no CREATE on the cluster or the topic): TOPIC_AUTHORIZATION_FAILED."""
    if name is None:
        return None
    if not _describable(ctx, name):
        return ErrorCode.topic_authorization_failed
    if not exists and _may_auto_create(ctx, request) and not (
            ctx.allowed_on_cluster(AclOperation.CREATE) or ctx.allowed(AclOperation.CREATE, ResourceType.TOPIC, name)):
        return ErrorCode.topic_authorization_failed
    return None


def _may_auto_create(ctx: RequestContext, request: Any) -> bool:
    return bool(getattr(request, "allow_auto_topic_creation", True)) and bool(
        ctx.state.config["auto.create.topics.enable"])


def _local_topics(ctx: RequestContext, request: Any, module: ModuleType, topic_ops: TopicOps,
                  all_topics: bool) -> list[Any]:
    logs = ctx.state.logs
    if all_topics:
        return [_local_entry(module, ctx, t, topic_ops) for t in logs.topics.values() if _describable(ctx, t.name)]
    topics: list[Any] = []
    allow_create = _may_auto_create(ctx, request)
    for wanted in request.topics:
        name = wanted.name
        info = logs.topics.get(name) if name is not None else None
        if info is None and name is None and getattr(wanted, "topic_id", None) is not None:
            info = logs.topic_by_id(wanted.topic_id)
            if info is None:
                topics.append(_error_entry(module, None, ErrorCode.unknown_topic_id, wanted.topic_id))
                continue
        refusal = _refusal(ctx, request, name if info is None else info.name, info is not None)
        if refusal is not None:
            topics.append(_error_entry(module, name, refusal))
            continue
        if info is None and allow_create and name is not None:
            try:
                info = logs.create_topic(name, int(ctx.state.config["num.partitions"]))
            except TopicError as e:
                topics.append(_error_entry(module, name, error_code(e.error)))
                continue
        if info is None:
            topics.append(_error_entry(module, name, ErrorCode.unknown_topic_or_partition))
        else:
            topics.append(_local_entry(module, ctx, info, topic_ops))
    return topics


async def handle_metadata(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    module = response_types(ctx)
    # v8+: the operations the principal may perform, only when asked for.
    include_topic_ops = bool(getattr(request, "include_topic_authorized_operations", False))

    def topic_ops(name: str) -> int:
        return authorized_operations(include_topic_ops, ctx.allowed_operations(ResourceType.TOPIC, name))

    # v0: an empty list means all topics; v1+: null means all, empty means none.
    all_topics = request.topics is None or (ctx.api_version == 0 and not request.topics)
    cluster = ctx.state.cluster
    if cluster is None:
        topics = _local_topics(ctx, request, module, topic_ops, all_topics)
    else:
        topics = await _cluster_topics(ctx, cluster, request, module, topic_ops, all_topics)
    brokers = tuple(
        build(module.MetadataResponseBroker, node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
        for b in ctx.state.live_brokers(ctx.listener)
    )
    return cast("MetadataResponse", build(
        module.MetadataResponse,
        throttle_time=NO_THROTTLE, brokers=brokers, cluster_id=ctx.state.cluster_id,
        controller_id=ctx.state.controller_id, topics=tuple(topics),
        cluster_authorized_operations=authorized_operations(
            bool(getattr(request, "include_cluster_authorized_operations", False)),
            ctx.allowed_operations(ResourceType.CLUSTER, CLUSTER_NAME),
        ),
    ))


APIS = [ApiSpec(ApiKey.METADATA, "Metadata", 0, 12, handle_metadata)]

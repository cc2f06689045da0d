"""Metadata (key 3): brokers, cluster id, controller, topics and partitions.

One node owns every partition (leader = node id, replicas = ISR = [node id]). Topics
named in the request that do not exist are created when ``auto.create.topics.enable``
and the request's ``allow_auto_topic_creation`` (v4+) both allow it.
"""

from __future__ import annotations

from typing import Any

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import (
    AUTHORIZED_OPERATIONS_OMITTED,
    CLUSTER_OPERATIONS,
    NO_THROTTLE,
    TOPIC_OPERATIONS,
    ApiSpec,
    authorized_operations,
    build,
    response_types,
)
from eoslog.protocol.errors import ErrorCode, error_code
from eoslog.storage import TopicError, TopicInfo


def _topic_entry(module: Any, ctx: RequestContext, info: TopicInfo, topic_ops: int) -> Any:
    node = ctx.state.node_id
    partitions = tuple(
        build(
            module.MetadataResponsePartition,
            error_code=ErrorCode.none, partition_index=p, leader_id=node, leader_epoch=0,
            replica_nodes=(node,), isr_nodes=(node,), offline_replicas=(),
        )
        for p in range(info.num_partitions)
    )
    return build(
        module.MetadataResponseTopic,
        error_code=ErrorCode.none, name=info.name, topic_id=info.topic_id,
        is_internal=info.internal, partitions=partitions,
        topic_authorized_operations=topic_ops,
    )


def _error_entry(module: Any, name: str | None, code: ErrorCode, topic_id: Any = None) -> Any:
    return build(
        module.MetadataResponseTopic,
        error_code=code, name=name, topic_id=topic_id, is_internal=False, partitions=(),
        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


async def handle_metadata(ctx: RequestContext, request: Any) -> Any:
    module = response_types(ctx)
    logs = ctx.state.logs
    config = ctx.state.config
    topics: list[Any] = []
    # v8+: the operations the principal may perform, only when asked for.
    topic_ops = authorized_operations(
        bool(getattr(request, "include_topic_authorized_operations", False)), TOPIC_OPERATIONS
    )
    # v0: an empty list means all topics; v1+: null means all, empty means none.
    all_topics = request.topics is None or (ctx.api_version == 0 and not request.topics)
    if all_topics:
        topics = [_topic_entry(module, ctx, t, topic_ops) for t in logs.topics.values()]
    else:
        allow_create = getattr(request, "allow_auto_topic_creation", True) and bool(
            config["auto.create.topics.enable"]
        )
        for wanted in request.topics:
            name = wanted.name
            info = logs.topics.get(name) if name is not None else None
            if info is None and name is None and getattr(wanted, "topic_id", None) is not None:
                info = logs.topic_by_id(wanted.topic_id)
                if info is None:
                    topics.append(_error_entry(module, None, ErrorCode.unknown_topic_id, wanted.topic_id))
                    continue
            if info is None and allow_create and name is not None:
                try:
                    info = logs.create_topic(name, int(config["num.partitions"]))
                except TopicError as e:
                    topics.append(_error_entry(module, name, error_code(e.error)))
                    continue
            if info is None:
                topics.append(_error_entry(module, name, ErrorCode.unknown_topic_or_partition))
            else:
                topics.append(_topic_entry(module, ctx, info, topic_ops))
    broker = build(
        module.MetadataResponseBroker,
        node_id=ctx.state.node_id, host=ctx.state.advertised_host,
        port=ctx.state.advertised_port, rack=None,
    )
    return build(
        module.MetadataResponse,
        throttle_time=NO_THROTTLE, brokers=(broker,), cluster_id=ctx.state.cluster_id,
        controller_id=ctx.state.node_id, topics=tuple(topics),
        cluster_authorized_operations=authorized_operations(
            bool(getattr(request, "include_cluster_authorized_operations", False)),
            CLUSTER_OPERATIONS,
        ),
    )


APIS = [ApiSpec(3, "Metadata", 0, 12, handle_metadata)]

"""Metadata (key 3): brokers, cluster id, controller, topics and partitions.

What the broker's ``MetadataSupport`` knows: one node owns every partition (leader = node id,
replicas = ISR = [node id], epoch 0); in a cluster the ZooKeeper-fed metadata cache answers:
every registered broker, the controller, each partition's replicas, ISR, offline replicas,
leader and leader epoch (LEADER_NOT_AVAILABLE while it has no live leader). Topics named in
the request that do not exist are created when ``auto.create.topics.enable`` and the
request's ``allow_auto_topic_creation`` (v4+) both allow it, and answered once their
partitions have leaders (at once on one node; in a cluster the controller elects them
later, so the answer is LEADER_NOT_AVAILABLE and the client asks again, as from Kafka).
A topic asked for by id that the principal may not describe is answered without its name.

Each topic's entry is encoded once per change of the topic and response version and kept
(``broker/metadata_cache.py``); the response carries the entries as ``EncodedItems``.
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
from eoslog.broker.metadata_support import TopicDescription
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.encoded import EncodedItems, encode_entity, flat_encoder, spliced
from eoslog.protocol.errors import ErrorCode
from eoslog.security.acls import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.protocol.requests import MetadataRequest
    from eoslog.protocol.responses import MetadataResponse


TopicOps = Callable[[str], int]


def _topic_entry(module: ModuleType, topic: TopicDescription, operations: int) -> bytes:
    """The topic's entry, encoded: its partitions straight from their values (``encode_flat``:
    a topic of 5,000 partitions took ~40 ms through kio objects, enough to hold up every other
    client of the loop when it changed), spliced into the rest."""
    partition = flat_encoder(module.MetadataResponsePartition)
    partitions = [partition({
        "error_code": p.error.value, "partition_index": p.partition, "leader_id": p.leader,
        "leader_epoch": p.leader_epoch, "replica_nodes": p.replicas, "isr_nodes": p.isr,
        "offline_replicas": p.offline_replicas,
    }) for p in topic.partitions]
    entry = build(
        module.MetadataResponseTopic,
        error_code=ErrorCode.none, name=topic.name, topic_id=topic.topic_id, is_internal=topic.internal,
        partitions=(), topic_authorized_operations=operations,
    )
    return b"".join(spliced(entry, "partitions", partitions))


def _error_entry(module: ModuleType, name: str | None, code: ErrorCode, topic_id: Any = None) -> Any:
    return build(
        module.MetadataResponseTopic,
        error_code=code, name=name, topic_id=topic_id, is_internal=False, partitions=(),
        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


class _Entries:
    """The response's topic entries, encoded (kept ones where the topic is unchanged)."""

    def __init__(self, ctx: RequestContext, module: ModuleType, topic_ops: TopicOps) -> None:
        self.ctx, self.module, self.topic_ops = ctx, module, topic_ops
        self.items: list[bytes] = []
        self.error_codes: list[int] = []

    def topic(self, name: str) -> None:
        """Add the entry of ``name`` (a topic that exists: nothing is added otherwise)."""
        ops = self.topic_ops(name)
        encoded = self.ctx.state.metadata_entries.entry(
            self.ctx.state.metadata_support, self.ctx.api_version, name, ops,
            lambda topic: _topic_entry(self.module, topic, ops))
        if encoded is not None:
            self.items.append(encoded.data)
            self.error_codes += encoded.error_codes

    def error(self, name: str | None, code: ErrorCode, topic_id: Any = None) -> None:
        self.items.append(encode_entity(_error_entry(self.module, name, code, topic_id)))
        self.error_codes.append(code.value)

    def encoded(self) -> EncodedItems:
        return EncodedItems(self.items, self.error_codes)


async def _topics(ctx: RequestContext, request: Any, module: ModuleType, topic_ops: TopicOps,
                  all_topics: bool) -> EncodedItems:
    support = ctx.state.metadata_support
    out = _Entries(ctx, module, topic_ops)
    if all_topics:
        for listed in list(support.topic_names()):
            if _describable(ctx, listed):
                out.topic(listed)
        return out.encoded()
    for wanted in request.topics:
        name: str | None = wanted.name
        topic_id = getattr(wanted, "topic_id", None)
        if not name and topic_id is not None and topic_id.int != 0:
            name = None  # asked by id (Kafka's Java consumer sends the name as "", not null)
        found = name if name is not None and support.topic_version(name) is not None else None
        if name is None and topic_id is not None:
            found = support.topic_named(topic_id)
            if found is None or support.topic_version(found) is None:
                out.error(None, ErrorCode.unknown_topic_id, topic_id)
                continue
        refusal = _refusal(ctx, request, name if found is None else found, found is not None)
        if refusal is not None:
            out.error(name, refusal)  # by id: the name is not told
        elif found is not None:
            out.topic(found)
        elif name is not None and _may_auto_create(ctx, request):
            error = await create_with_defaults(ctx, name)
            created = support.describe_topic(name) if error is None else None
            if created is not None and all(p.leader >= 0 for p in created.partitions):
                out.topic(name)
            else:  # as Kafka: the new topic has no leaders yet; the client asks again
                out.error(name, ErrorCode.leader_not_available if error is None else error)
        else:
            out.error(name, ErrorCode.unknown_topic_or_partition)
    return out.encoded()


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


async def handle_metadata(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    module = response_types(ctx)
    # v8+: the operations the principal may perform, only when asked for.
    include_topic_ops = bool(getattr(request, "include_topic_authorized_operations", False))

    def topic_ops(name: str) -> int:
        return authorized_operations(include_topic_ops, ctx.allowed_operations(ResourceType.TOPIC, name))

    # v0: an empty list means all topics; v1+: null means all, empty means none.
    all_topics = request.topics is None or (ctx.api_version == 0 and not request.topics)
    topics = await _topics(ctx, request, module, topic_ops, all_topics)
    brokers = tuple(
        build(module.MetadataResponseBroker, node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
        for b in ctx.state.live_brokers(ctx.listener)
    )
    return cast("MetadataResponse", build(
        module.MetadataResponse,
        throttle_time=NO_THROTTLE, brokers=brokers, cluster_id=ctx.state.cluster_id,
        controller_id=ctx.state.controller_id, topics=topics,
        cluster_authorized_operations=authorized_operations(
            bool(getattr(request, "include_cluster_authorized_operations", False)),
            ctx.allowed_operations(ResourceType.CLUSTER, CLUSTER_NAME),
        ),
    ))


APIS = [ApiSpec(ApiKey.METADATA, "Metadata", 0, 12, handle_metadata)]

"""Committed offsets: OffsetCommit (8) v2-v9, OffsetFetch (9) v1-v9, OffsetDelete (47) v0.

As Kafka's KafkaApis does before the coordinator sees a request, partitions of topics
that do not exist are answered UNKNOWN_TOPIC_OR_PARTITION on commit and delete. The
versions that name topics by id (OffsetCommit v10, OffsetFetch v10) are left out with
the rest of the topic-id path.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import NO_THROTTLE, ApiSpec, build, replicated, response_types, to_ms, versioned
from eoslog.coordinator.group import FetchedOffset, OffsetAndMetadata, TopicPartition
from eoslog.errors import Errors
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import error_code
from eoslog.security.acls import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.protocol.requests import OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest
    from eoslog.protocol.responses import OffsetCommitResponse, OffsetDeleteResponse, OffsetFetchResponse

INVALID_OFFSET = -1
NO_RETENTION = -1


def requested_partitions(
    ctx: RequestContext, request: Any, refused: Errors | None = None
) -> tuple[list[tuple[TopicPartition, Any]], dict[TopicPartition, Errors]]:
    """Each requested partition with its request entry, in request order, and the error of
    those not to be touched (OffsetCommit, OffsetDelete, TxnOffsetCommit), as KafkaApis
    decides them: every one ``refused`` (the group or transactional id was not authorized),
    TOPIC_AUTHORIZATION_FAILED without READ on the topic, UNKNOWN_TOPIC_OR_PARTITION for
    those that do not exist."""
    parts = [(TopicPartition(t.name, int(p.partition_index)), p) for t in request.topics for p in t.partitions]
    if refused is not None:
        return parts, {tp: refused for tp, _ in parts}
    readable = {t.name for t in request.topics if ctx.allowed(AclOperation.READ, ResourceType.TOPIC, t.name)}
    errors = {tp: Errors.TOPIC_AUTHORIZATION_FAILED for tp, _ in parts if tp.topic not in readable}
    errors.update({tp: Errors.UNKNOWN_TOPIC_OR_PARTITION for tp, _ in parts
                   if tp not in errors and not ctx.state.partition_exists(tp.topic, tp.partition)})
    return parts, errors


def group_refusal(ctx: RequestContext, operation: AclOperation, group_id: str) -> Errors | None:
    return None if ctx.allowed(operation, ResourceType.GROUP, group_id) else Errors.GROUP_AUTHORIZATION_FAILED


def committed_offset(p: Any, now: int, expire: int | None) -> OffsetAndMetadata:
    """The offset an OffsetCommit/TxnOffsetCommit partition entry asks to commit."""
    return OffsetAndMetadata(int(p.committed_offset), int(getattr(p, "committed_leader_epoch", -1)),
                             p.committed_metadata or "", now, expire)


def _by_topic(items: Iterable[tuple[TopicPartition, Any]]) -> dict[str, list[tuple[int, Any]]]:
    """Group per-partition results by topic, keeping request order."""
    out: dict[str, list[tuple[int, Any]]] = defaultdict(list)
    for tp, value in items:
        out[tp.topic].append((tp.partition, value))
    return out


# -- OffsetCommit -------------------------------------------------------------------------------


async def handle_offset_commit(ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
    module = response_types(ctx)
    now = ctx.state.clock_ms()
    retention = getattr(request, "retention_time", None)  # v2-v4 only
    retention_ms = to_ms(retention) if retention is not None else NO_RETENTION
    expire = now + retention_ms if retention_ms != NO_RETENTION else None
    parts, errors = requested_partitions(ctx, request, group_refusal(ctx, AclOperation.READ, request.group_id))
    order = [tp for tp, _ in parts]
    offsets = {tp: committed_offset(p, now, expire) for tp, p in parts if tp not in errors}
    if offsets:
        groups = ctx.state.group_coordinator
        committed = groups.commit_offsets(
            request.group_id, request.member_id, getattr(request, "group_instance_id", None),
            int(request.generation_id_or_member_epoch), offsets, ctx.api_version,
        )
        if any(e is Errors.NONE for e in committed.values()):
            outcome = await replicated(ctx, groups.topic, groups.partition_for(request.group_id), Errors.NONE)
            committed = {tp: outcome if e is Errors.NONE else e for tp, e in committed.items()}
        errors.update(committed)
    topics = tuple(
        build(
            module.OffsetCommitResponseTopic, name=name,
            partitions=tuple(
                build(module.OffsetCommitResponsePartition, partition_index=p, error_code=error_code(e))
                for p, e in parts
            ),
        )
        for name, parts in _by_topic((tp, errors[tp]) for tp in order).items()
    )
    return cast("OffsetCommitResponse", build(module.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics))


# -- OffsetFetch ----------------------------------------------------------------------------------


def _fetch_group(
    ctx: RequestContext, group_id: str, topics: Any, require_stable: bool,
    member_id: str | None = None, member_epoch: int = -1,
) -> tuple[Errors, list[FetchedOffset]]:
    tps = None if topics is None else [
        TopicPartition(t.name, int(p)) for t in topics for p in t.partition_indexes
    ]
    refusal = group_refusal(ctx, AclOperation.DESCRIBE, group_id)
    if refusal is not None:
        return refusal, [FetchedOffset(tp, None, refusal) for tp in tps or ()]
    # DESCRIBE on each topic: a named one is refused, the others are left out.
    visible = {name for name in ({tp.topic for tp in tps} if tps is not None else set())
               if ctx.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, name)}
    error, fetched = ctx.state.group_coordinator.fetch_offsets(
        group_id, None if tps is None else [tp for tp in tps if tp.topic in visible], require_stable,
        member_id, member_epoch)
    if tps is None:
        fetched = [f for f in fetched if ctx.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, f.tp.topic)]
    if error != Errors.NONE and tps is not None:
        fetched = [FetchedOffset(tp, None, error) for tp in tps]
    elif tps is not None:
        found = {f.tp: f for f in fetched}
        fetched = [found[tp] if tp.topic in visible else FetchedOffset(tp, None, Errors.TOPIC_AUTHORIZATION_FAILED)
                   for tp in tps]
    return error, fetched


def _response_topics(module: ModuleType, fetched: list[FetchedOffset], batched: bool) -> tuple[Any, ...]:
    # kio names the classes in the plural from v8 (the batched, per-group layout).
    suffix = "s" if batched else ""
    cls_topic = getattr(module, f"OffsetFetchResponseTopic{suffix}")
    cls_partition = getattr(module, f"OffsetFetchResponsePartition{suffix}")
    return tuple(
        build(
            cls_topic, name=name,
            partitions=tuple(
                build(
                    cls_partition, partition_index=p,
                    committed_offset=f.offset.offset if f.offset else INVALID_OFFSET,
                    committed_leader_epoch=f.offset.leader_epoch if f.offset else -1,
                    metadata=f.offset.metadata if f.offset else "",
                    error_code=error_code(f.error),
                )
                for p, f in parts
            ),
        )
        for name, parts in _by_topic((f.tp, f) for f in fetched).items()
    )


async def handle_offset_fetch(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    module = response_types(ctx)
    require_stable = bool(getattr(request, "require_stable", False))
    if ctx.api_version < 8:
        error, fetched = _fetch_group(ctx, versioned(request).group_id, versioned(request).topics, require_stable)
        if ctx.api_version < 2:
            error = Errors.NONE  # v1 reports group errors per partition only
        elif error != Errors.NONE:
            fetched = []  # v2+: the group error alone, as Kafka answers
        return cast("OffsetFetchResponse", build(
            module.OffsetFetchResponse, throttle_time=NO_THROTTLE, error_code=error_code(error),
            topics=_response_topics(module, fetched, batched=False),
        ))
    groups = []
    for g in versioned(request).groups:  # v8+: several groups
        # v9+: a consumer group's member says who it is (KIP-848: its epoch must be current).
        error, fetched = _fetch_group(ctx, g.group_id, g.topics, require_stable, getattr(g, "member_id", None),
                                      int(getattr(g, "member_epoch", -1)))
        groups.append(build(
            module.OffsetFetchResponseGroup, group_id=g.group_id, error_code=error_code(error),
            topics=() if error != Errors.NONE else _response_topics(module, fetched, batched=True),
        ))
    return cast("OffsetFetchResponse", build(
        module.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=tuple(groups)))


# -- OffsetDelete -------------------------------------------------------------------------------


async def handle_offset_delete(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    module = response_types(ctx)
    refusal = group_refusal(ctx, AclOperation.DELETE, request.group_id)
    parts, errors = requested_partitions(ctx, request)
    order = [tp for tp, _ in parts]
    wanted = [tp for tp in order if tp not in errors]
    error, results = (ctx.state.group_coordinator.delete_offsets(request.group_id, wanted) if refusal is None
                      else (refusal, {}))
    if error != Errors.NONE:
        return cast("OffsetDeleteResponse", build(module.OffsetDeleteResponse, error_code=error_code(error),
                     throttle_time=NO_THROTTLE, topics=()))
    errors.update(results)
    topics = tuple(
        build(
            module.OffsetDeleteResponseTopic, name=name,
            partitions=tuple(
                build(module.OffsetDeleteResponsePartition, partition_index=p, error_code=error_code(e))
                for p, e in parts
            ),
        )
        for name, parts in _by_topic((tp, errors.get(tp, Errors.NONE)) for tp in order).items()
    )
    return cast("OffsetDeleteResponse", build(
        module.OffsetDeleteResponse, error_code=error_code(Errors.NONE), throttle_time=NO_THROTTLE,
                 topics=topics))


APIS = [
    ApiSpec(ApiKey.OFFSET_COMMIT, "OffsetCommit", 2, 9, handle_offset_commit),
    ApiSpec(ApiKey.OFFSET_FETCH, "OffsetFetch", 1, 9, handle_offset_fetch),
    ApiSpec(ApiKey.OFFSET_DELETE, "OffsetDelete", 0, 0, handle_offset_delete),
]

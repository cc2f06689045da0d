"""Fetching from share groups (KIP-932): ShareFetch (78) v1-v2 and ShareAcknowledge (79) v1-v2,
translated into ``share.manager.SharePartitionManager`` calls.

Topic ids become names from this broker's view of the topics; an unknown id is answered
UNKNOWN_TOPIC_ID for its partitions. Authorization as Kafka's KafkaApis: READ on the group
(else GROUP_AUTHORIZATION_FAILED for the whole request) and READ on each topic (else
TOPIC_AUTHORIZATION_FAILED for its partitions). A partition answered NOT_LEADER_OR_FOLLOWER
carries its current leader, and the response that leader's endpoint.

eoslog's extension (``protocol/share_transactions``, docs/consumer.md): a ShareAcknowledge
carrying a transaction accepts its records inside it (WRITE on the transactional id needed).
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import NO_THROTTLE, ApiSpec, build, response_types
from eoslog.broker.handlers.share_groups import share_groups_enabled
from eoslog.coordinator.share.coordinator import TransactionalWrite
from eoslog.errors import Errors
from eoslog.features import SHARE_VERSION
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import ErrorCode, error_code
from eoslog.protocol.share_transactions import TRANSACTIONAL_ACCEPT
from eoslog.security.acls import AclOperation, ResourceType
from eoslog.share.manager import PartitionRequest, PartitionResult, ShareFetchParams, ShareFetchResult
from eoslog.share.partition import AcknowledgementBatch, AcknowledgeType
from eoslog.types import TopicPartition

_REFUSED_TYPE = -1  # not an acknowledge type: INVALID_REQUEST

if TYPE_CHECKING:
    from eoslog.protocol.requests import ShareAcknowledgeRequest, ShareFetchRequest
    from eoslog.protocol.responses import ShareAcknowledgeResponse, ShareFetchResponse


class _Translated:
    """A request's partitions by name, and those answered before the manager sees them.
    ``transactional``: eoslog's acknowledgements inside a transaction, where every type must be
    TRANSACTIONAL_ACCEPT (an ACCEPT for the manager); anything else is made a type the manager
    refuses (INVALID_REQUEST)."""

    def __init__(self, ctx: RequestContext, topics: Iterable[Any], transactional: bool = False) -> None:
        self.names = ctx.state.topic_names()
        self.ids = {name: topic_id for topic_id, name in self.names.items()}
        self.partitions: list[PartitionRequest] = []
        self.refused: dict[tuple[uuid.UUID | None, int], Errors] = {}
        readable: dict[str, bool] = {}
        for t in topics:
            name = self.names.get(t.topic_id) if t.topic_id is not None else None
            for p in t.partitions:
                index = int(p.partition_index)
                if name is None:
                    self.refused[(t.topic_id, index)] = Errors.UNKNOWN_TOPIC_ID
                    continue
                if name not in readable:
                    readable[name] = ctx.allowed(AclOperation.READ, ResourceType.TOPIC, name)
                if not readable[name]:
                    self.refused[(t.topic_id, index)] = Errors.TOPIC_AUTHORIZATION_FAILED
                    continue
                acks = tuple(AcknowledgementBatch(int(b.first_offset), int(b.last_offset),
                                                  tuple(_type(int(k), transactional) for k in b.acknowledge_types))
                             for b in p.acknowledgement_batches)
                self.partitions.append(PartitionRequest(TopicPartition(name, index), acks))

    def forgotten(self, topics: Iterable[Any]) -> tuple[TopicPartition, ...]:
        return tuple(TopicPartition(self.names[t.topic_id], int(p)) for t in topics if t.topic_id in self.names
                     for p in t.partitions)


def _type(kind: int, transactional: bool) -> int:
    if not transactional:
        return kind  # TRANSACTIONAL_ACCEPT without the transaction: refused as any unknown type
    return int(AcknowledgeType.ACCEPT) if kind == TRANSACTIONAL_ACCEPT else _REFUSED_TYPE


def _transaction(ctx: RequestContext, request: Any) -> tuple[TransactionalWrite | None, ErrorCode | None]:
    """The transaction of eoslog's tagged field, if any, and the request's refusal: WRITE on the
    transactional id is needed, as for the producer's TxnOffsetCommit."""
    t = getattr(request, "eoslog_transaction", None)
    if t is None or t.transactional_id is None:
        return None, None
    if not ctx.allowed(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, t.transactional_id):
        return None, ErrorCode.transactional_id_authorization_failed
    if int(t.producer_id) < 0 or int(t.producer_epoch) < 0:
        return None, ErrorCode.invalid_request
    return TransactionalWrite(t.transactional_id, int(t.producer_id), int(t.producer_epoch)), None


def _leader(ctx: RequestContext, tp: TopicPartition) -> tuple[int, int]:
    """(leader id, leader epoch) of a partition as this broker knows it."""
    described = ctx.state.metadata_support.describe_topic(tp.topic)
    views = [v for v in (described.partitions if described is not None else ()) if v.partition == tp.partition]
    return (views[0].leader, views[0].leader_epoch) if views else (-1, -1)


def _node_endpoints(ctx: RequestContext, module: Any, leaders: Iterable[int]) -> tuple[Any, ...]:
    by_id = {b.node_id: b for b in ctx.state.live_brokers(ctx.listener)}
    return tuple(build(module.NodeEndpoint, node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
                 for b in (by_id.get(i) for i in sorted(set(leaders))) if b is not None)


def _group_refusal(ctx: RequestContext, group_id: str | None, member_id: str | None) -> ErrorCode | None:
    if not share_groups_enabled(ctx):
        return ErrorCode.unsupported_version
    if not group_id or not member_id:
        return ErrorCode.invalid_request
    if not ctx.allowed(AclOperation.READ, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed
    return None


ByTopic = dict[uuid.UUID | None, list[tuple[int, PartitionResult]]]


def _by_topic(tx: _Translated, results: list[PartitionResult]) -> ByTopic:
    out: ByTopic = {}
    for r in results:
        out.setdefault(tx.ids.get(r.tp.topic), []).append((r.tp.partition, r))
    for (topic_id, index), error in tx.refused.items():
        out.setdefault(topic_id, []).append((index, PartitionResult(TopicPartition("", index), error=error)))
    return out


def _responses(ctx: RequestContext, module: Any, result: ShareFetchResult | None, tx: _Translated | None,
               topic_cls: Any, partition: Callable[[int, PartitionResult, Any], Any]) -> tuple[tuple[Any, ...], Any]:
    """The response's topics (``partition`` builds one partition's answer from its index, result
    and current leader) and the node endpoints of the leaders its NOT_LEADER_OR_FOLLOWER answers name."""
    responses: list[Any] = []
    leaders: list[int] = []
    if result is not None and tx is not None:
        for topic_id, parts in _by_topic(tx, result.partitions).items():
            partitions = []
            for index, r in parts:
                # The current leader only where the answer says to look for it, as Kafka fills it
                # (untouched otherwise: 0, 0).
                moved = Errors.NOT_LEADER_OR_FOLLOWER in (r.error, r.acknowledge_error) and bool(r.tp.topic)
                leader_id, leader_epoch = _leader(ctx, r.tp) if moved else (0, 0)
                if moved and leader_id >= 0:
                    leaders.append(leader_id)
                current = build(module.LeaderIdAndEpoch, leader_id=leader_id, leader_epoch=leader_epoch)
                partitions.append(partition(index, r, current))
            responses.append(build(topic_cls, topic_id=topic_id, partitions=tuple(partitions)))
    return tuple(responses), _node_endpoints(ctx, module, leaders)


async def handle_share_fetch(ctx: RequestContext, request: ShareFetchRequest) -> ShareFetchResponse:
    module = response_types(ctx)

    def answer(code: ErrorCode, result: ShareFetchResult | None = None, tx: _Translated | None = None,
               message: str | None = None) -> ShareFetchResponse:
        def partition(index: int, r: PartitionResult, current: Any) -> Any:
            return build(
                module.PartitionData, partition_index=index, error_code=error_code(r.error), error_message=None,
                acknowledge_error_code=error_code(r.acknowledge_error or Errors.NONE), acknowledge_error_message=None,
                current_leader=current, records=r.records, acquired_records=tuple(
                    build(module.AcquiredRecords, first_offset=a.first_offset, last_offset=a.last_offset,
                          delivery_count=a.delivery_count) for a in r.acquired))

        responses, endpoints = _responses(ctx, module, result, tx, module.ShareFetchableTopicResponse, partition)
        lock_ms = result.lock_duration_ms if result is not None else 0
        return cast("ShareFetchResponse", build(
            module.ShareFetchResponse, throttle_time=NO_THROTTLE, error_code=code, error_message=message,
            acquisition_lock_timeout=datetime.timedelta(milliseconds=lock_ms), responses=responses,
            node_endpoints=endpoints))

    refusal = _group_refusal(ctx, request.group_id, request.member_id)
    if refusal is not None:
        return answer(refusal)
    assert request.group_id is not None and request.member_id is not None
    tx = _Translated(ctx, request.topics)
    renew_only = bool(getattr(request, "is_renew_ack", False))
    result = await ctx.state.share_partitions.fetch(ShareFetchParams(
        request.group_id, request.member_id, int(request.share_session_epoch), ctx.session,
        tuple(tx.partitions), tx.forgotten(request.forgotten_topics_data),
        max_wait_ms=int(request.max_wait.total_seconds() * 1000), min_bytes=int(request.min_bytes),
        max_bytes=min(int(request.max_bytes), int(ctx.state.config["fetch.max.bytes"])),
        max_records=max(1, int(getattr(request, "max_records", 500))), fetching=not renew_only))
    if result.error != Errors.NONE:
        return answer(error_code(result.error))
    return answer(ErrorCode.none, result, tx)


async def handle_share_acknowledge(ctx: RequestContext, request: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse:
    module = response_types(ctx)

    def answer(code: ErrorCode, result: ShareFetchResult | None = None,
               tx: _Translated | None = None) -> ShareAcknowledgeResponse:
        def partition(index: int, r: PartitionResult, current: Any) -> Any:
            error = r.error if r.error != Errors.NONE else r.acknowledge_error or Errors.NONE
            return build(module.PartitionData, partition_index=index, error_code=error_code(error),
                         error_message=None, current_leader=current)

        responses, endpoints = _responses(ctx, module, result, tx, module.ShareAcknowledgeTopicResponse, partition)
        lock_ms = result.lock_duration_ms if result is not None else 0
        return cast("ShareAcknowledgeResponse", build(
            module.ShareAcknowledgeResponse, throttle_time=NO_THROTTLE, error_code=code, error_message=None,
            acquisition_lock_timeout=datetime.timedelta(milliseconds=lock_ms), responses=responses,
            node_endpoints=endpoints))

    refusal = _group_refusal(ctx, request.group_id, request.member_id)
    txn, txn_refusal = _transaction(ctx, request)
    if refusal is not None or txn_refusal is not None:
        return answer(refusal if refusal is not None else cast(ErrorCode, txn_refusal))
    assert request.group_id is not None and request.member_id is not None
    tx = _Translated(ctx, request.topics, transactional=txn is not None)
    result = await ctx.state.share_partitions.fetch(ShareFetchParams(
        request.group_id, request.member_id, int(request.share_session_epoch), ctx.session,
        tuple(tx.partitions), fetching=False), txn)
    if result.error != Errors.NONE:
        return answer(error_code(result.error))
    return answer(ErrorCode.none, result, tx)


APIS = [
    ApiSpec(ApiKey.SHARE_FETCH, "ShareFetch", 1, 2, handle_share_fetch, feature=SHARE_VERSION),
    ApiSpec(ApiKey.SHARE_ACKNOWLEDGE, "ShareAcknowledge", 1, 2, handle_share_acknowledge, feature=SHARE_VERSION),
]

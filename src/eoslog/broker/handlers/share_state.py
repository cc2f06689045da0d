"""The share coordinator's inter-broker APIs (KIP-932): InitializeShareGroupState (83) v0,
ReadShareGroupState (84) v0, WriteShareGroupState (85) v0-v1, DeleteShareGroupState (86) v0,
ReadShareGroupStateSummary (87) v0-v1 — what a share-partition leader (or a group coordinator)
on another broker sends to the share coordinator of a key (``broker/share_persister.py``).

Each partition becomes a ``coordinator.share.ShareCoordinator`` call, answered once what it
appended is replicated. CLUSTER_ACTION on the cluster is required (brokers only), as Kafka's.
A share-partition never initialized reads as state epoch 0 and start offset -1: share.auto.offset.reset
decides. WriteShareGroupState v1 may carry eoslog's transaction (``protocol/share_transactions``):
the write is then made inside it (docs/consumer.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import ApiSpec, build, response_types
from eoslog.coordinator.share import DeliveryState, SharePartitionKey, StateBatch, StateWrite
from eoslog.coordinator.share.coordinator import TransactionalWrite
from eoslog.coordinator.share.persister import write_state
from eoslog.coordinator.share.state import NO_OFFSET
from eoslog.errors import Errors
from eoslog.features import SHARE_VERSION
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import error_code
from eoslog.security.acls import AclOperation

if TYPE_CHECKING:
    from eoslog.protocol.requests import (
        DeleteShareGroupStateRequest,
        InitializeShareGroupStateRequest,
        ReadShareGroupStateRequest,
        ReadShareGroupStateSummaryRequest,
        WriteShareGroupStateRequest,
    )
    from eoslog.protocol.responses import (
        DeleteShareGroupStateResponse,
        InitializeShareGroupStateResponse,
        ReadShareGroupStateResponse,
        ReadShareGroupStateSummaryResponse,
        WriteShareGroupStateResponse,
    )

# One partition of a request → its answer's fields (beyond partition and error_code).
PartitionCall = Callable[[SharePartitionKey, Any], Awaitable[tuple[Errors, dict[str, Any]]]]


async def _each(ctx: RequestContext, request: Any, result_cls: str, refused: dict[str, Any],
                call: PartitionCall) -> tuple[Any, ...]:
    """Every partition of ``request.topics`` through ``call``, answered per topic (every one
    CLUSTER_AUTHORIZATION_FAILED without CLUSTER_ACTION)."""
    module = response_types(ctx)
    allowed = ctx.allowed_on_cluster(AclOperation.CLUSTER_ACTION)
    out = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            key = SharePartitionKey(request.group_id, t.topic_id, int(p.partition))
            error, fields = (Errors.CLUSTER_AUTHORIZATION_FAILED, refused) if not allowed else await call(key, p)
            partitions.append(build(module.PartitionResult, partition=p.partition, error_code=error_code(error),
                                    error_message=None, **(fields if error == Errors.NONE else refused)))
        out.append(build(getattr(module, result_cls), topic_id=t.topic_id, partitions=tuple(partitions)))
    return tuple(out)


def _durable(ctx: RequestContext) -> Callable[[SharePartitionKey, Errors], Awaitable[Errors]]:
    async def durable(key: SharePartitionKey, error: Errors) -> Errors:
        return await ctx.state.share_coordinator.replicated(key) if error == Errors.NONE else error
    return durable


async def handle_initialize(ctx: RequestContext,
                            request: InitializeShareGroupStateRequest) -> InitializeShareGroupStateResponse:
    coordinator, durable = ctx.state.share_coordinator, _durable(ctx)

    async def call(key: SharePartitionKey, p: Any) -> tuple[Errors, dict[str, Any]]:
        return await durable(key, coordinator.initialize_state(key, int(p.state_epoch), int(p.start_offset))), {}

    results = await _each(ctx, request, "InitializeStateResult", {}, call)
    return cast("InitializeShareGroupStateResponse",
                build(response_types(ctx).InitializeShareGroupStateResponse, results=results))


async def handle_read(ctx: RequestContext, request: ReadShareGroupStateRequest) -> ReadShareGroupStateResponse:
    coordinator, durable, module = ctx.state.share_coordinator, _durable(ctx), response_types(ctx)
    empty = {"state_epoch": 0, "start_offset": NO_OFFSET, "state_batches": ()}

    async def call(key: SharePartitionKey, p: Any) -> tuple[Errors, dict[str, Any]]:
        error, state = coordinator.read_state(key, int(p.leader_epoch))
        error = await durable(key, error)  # a newer leader epoch it recorded
        if error != Errors.NONE or state is None:
            return error, empty
        return error, {"state_epoch": state.state_epoch, "start_offset": state.start_offset,
                       "state_batches": tuple(build(module.StateBatch, first_offset=b.first_offset,
                                                    last_offset=b.last_offset, delivery_state=int(b.delivery_state),
                                                    delivery_count=b.delivery_count)
                                              for b in state.state_batches)}

    results = await _each(ctx, request, "ReadStateResult", empty, call)
    return cast("ReadShareGroupStateResponse", build(module.ReadShareGroupStateResponse, results=results))


async def handle_write(ctx: RequestContext, request: WriteShareGroupStateRequest) -> WriteShareGroupStateResponse:
    coordinator = ctx.state.share_coordinator
    # eoslog's extension (protocol/share_transactions.py): a write inside a producer's transaction.
    t = getattr(request, "eoslog_transaction", None)
    txn = (TransactionalWrite(t.transactional_id, int(t.producer_id), int(t.producer_epoch))
           if t is not None and t.transactional_id is not None else None)

    async def call(key: SharePartitionKey, p: Any) -> tuple[Errors, dict[str, Any]]:
        batches = tuple(StateBatch(int(b.first_offset), int(b.last_offset), DeliveryState(int(b.delivery_state)),
                                   int(b.delivery_count)) for b in p.state_batches)
        write = StateWrite(int(p.state_epoch), int(p.leader_epoch), int(p.start_offset), batches)
        return await write_state(coordinator, key, write, txn), {}

    results = await _each(ctx, request, "WriteStateResult", {}, call)
    return cast("WriteShareGroupStateResponse",
                build(response_types(ctx).WriteShareGroupStateResponse, results=results))


async def handle_delete(ctx: RequestContext, request: DeleteShareGroupStateRequest) -> DeleteShareGroupStateResponse:
    coordinator, durable = ctx.state.share_coordinator, _durable(ctx)

    async def call(key: SharePartitionKey, p: Any) -> tuple[Errors, dict[str, Any]]:
        return await durable(key, coordinator.delete_state(key)), {}

    results = await _each(ctx, request, "DeleteStateResult", {}, call)
    return cast("DeleteShareGroupStateResponse",
                build(response_types(ctx).DeleteShareGroupStateResponse, results=results))


async def handle_summary(ctx: RequestContext,
                         request: ReadShareGroupStateSummaryRequest) -> ReadShareGroupStateSummaryResponse:
    coordinator = ctx.state.share_coordinator
    empty = {"state_epoch": 0, "leader_epoch": -1, "start_offset": NO_OFFSET, "delivery_complete_count": -1}

    async def call(key: SharePartitionKey, p: Any) -> tuple[Errors, dict[str, Any]]:
        error, state = coordinator.read_summary(key)
        if error != Errors.NONE or state is None:
            return error, empty
        return error, {"state_epoch": state.state_epoch, "leader_epoch": state.leader_epoch,
                       "start_offset": state.start_offset, "delivery_complete_count": state.delivery_complete_count}

    results = await _each(ctx, request, "ReadStateSummaryResult", empty, call)
    return cast("ReadShareGroupStateSummaryResponse",
                build(response_types(ctx).ReadShareGroupStateSummaryResponse, results=results))


APIS = [
    ApiSpec(ApiKey.INITIALIZE_SHARE_GROUP_STATE, "InitializeShareGroupState", 0, 0, handle_initialize,
            feature=SHARE_VERSION),
    ApiSpec(ApiKey.READ_SHARE_GROUP_STATE, "ReadShareGroupState", 0, 0, handle_read, feature=SHARE_VERSION),
    ApiSpec(ApiKey.WRITE_SHARE_GROUP_STATE, "WriteShareGroupState", 0, 1, handle_write, feature=SHARE_VERSION),
    ApiSpec(ApiKey.DELETE_SHARE_GROUP_STATE, "DeleteShareGroupState", 0, 0, handle_delete, feature=SHARE_VERSION),
    ApiSpec(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, "ReadShareGroupStateSummary", 0, 1, handle_summary,
            feature=SHARE_VERSION),
]

"""Transaction-coordinator API family. For now: InitProducerId (key 22) for idempotent
producers. Without a transactional id any broker answers with a fresh producer id and
epoch 0 (seed 001: "blindly accept the request and return a new producerId").

The transactional path (FindCoordinator TRANSACTION, AddPartitionsToTxn, EndTxn, ...)
arrives with the transaction coordinator.
"""

from __future__ import annotations

from typing import Any

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import NO_THROTTLE, ApiSpec, build, response_types
from eoslog.coordinator.producer_id_manager import ProducerIdsExhausted
from eoslog.protocol.errors import ErrorCode


async def handle_init_producer_id(ctx: RequestContext, request: Any) -> Any:
    module = response_types(ctx)
    producer_id, epoch, code = -1, -1, ErrorCode.none
    if request.transactional_id is not None:
        # Until the transaction coordinator exists no broker coordinates transactions.
        code = ErrorCode.coordinator_not_available
    else:
        try:
            producer_id, epoch = ctx.state.producer_ids.generate_producer_id(), 0
        except ProducerIdsExhausted:
            code = ErrorCode.unknown_server_error
    return build(
        module.InitProducerIdResponse, throttle_time=NO_THROTTLE, error_code=code,
        producer_id=producer_id, producer_epoch=epoch,
    )


# v6 adds KIP-939's two-phase-commit fields; it arrives with that feature.
APIS = [ApiSpec(22, "InitProducerId", 0, 5, handle_init_producer_id)]

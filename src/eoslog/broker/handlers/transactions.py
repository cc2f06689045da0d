"""Producer-id and transaction API family. For now: InitProducerId (key 22) for idempotent
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


async def handle_describe_producers(ctx: RequestContext, request: Any) -> Any:
    """DescribeProducers (key 61): the active producers of each partition, as kept by the
    partition's producer-state manager (Kafka's kafka-transactions.sh describe-producers)."""
    module = response_types(ctx)
    topics = []
    for topic in request.topics:
        partitions = []
        for index in topic.partition_indexes:
            plog = ctx.state.logs.get_log(topic.name, int(index))
            if plog is None:
                partitions.append(build(
                    module.PartitionResponse, partition_index=index,
                    error_code=ErrorCode.unknown_topic_or_partition,
                    error_message=f"{topic.name}-{index} does not exist", active_producers=(),
                ))
                continue
            producers = tuple(
                build(
                    module.ProducerState, producer_id=e.producer_id, producer_epoch=e.producer_epoch,
                    last_sequence=e.last_seq, last_timestamp=e.last_timestamp,
                    coordinator_epoch=e.coordinator_epoch,
                    current_txn_start_offset=e.current_txn_first_offset,
                )
                for e in plog.producer_state.producers.values()
            )
            partitions.append(build(
                module.PartitionResponse, partition_index=index, error_code=ErrorCode.none,
                error_message=None, active_producers=producers,
            ))
        topics.append(build(module.TopicResponse, name=topic.name, partitions=tuple(partitions)))
    return build(module.DescribeProducersResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


APIS = [
    # v6 adds KIP-939's two-phase-commit fields; it arrives with that feature.
    ApiSpec(22, "InitProducerId", 0, 5, handle_init_producer_id),
    ApiSpec(61, "DescribeProducers", 0, 0, handle_describe_producers),
]

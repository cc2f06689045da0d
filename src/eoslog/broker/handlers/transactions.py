"""Producer-id and transaction APIs: InitProducerId (22), AddPartitionsToTxn (24),
AddOffsetsToTxn (25), EndTxn (26), WriteTxnMarkers (27), TxnOffsetCommit (28),
DescribeProducers (61), DescribeTransactions (65), ListTransactions (66).

Requests become ``TransactionCoordinator`` calls; results (``Errors`` members) become codes,
translated for the versions that predate them as Kafka's KafkaApis does: PRODUCER_FENCED
is INVALID_PRODUCER_EPOCH below InitProducerId v4 and AddPartitionsToTxn/AddOffsetsToTxn/
EndTxn v2; TRANSACTION_ABORTABLE is INVALID_TXN_STATE where the version predates it.
Without a transactional id InitProducerId hands out a fresh producer id with epoch 0
(Kafka's TransactionCoordinator.handleInitProducerId: "blindly accept the request and
return a new producerId").

AddPartitionsToTxn (not verify-only), AddOffsetsToTxn, EndTxn and InitProducerId are handled
through ``TransactionCoordinator.held``: one the coordinator would answer CONCURRENT_TRANSACTIONS
because the id's previous step is still under way is handled again once it has ended.

Versions are those of transaction protocol 1 (Kafka 3.x): EndTxn v5, TxnOffsetCommit v5
and WriteTxnMarkers v2 belong to KIP-890 part 2 and are not served. AddPartitionsToTxn v4+
(broker to broker, several transactions, verify-only) is, and so is InitProducerId v6:
KIP-939's two-phase commit (``enable_2pc``, ``keep_prepared_txn``, and the kept
transaction's producer id and epoch in the response).

WriteTxnMarkers and DescribeProducers go to the replica layer (``ReplicaManager``), which
also runs the KIP-890 check of transactional Produce.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterable
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import NO_THROTTLE, ApiSpec, build, replicated, response_types, to_ms, versioned
from eoslog.broker.handlers.offsets import committed_offset, group_refusal, requested_partitions
from eoslog.broker.txn_verifier import LocalTransactionVerifier
from eoslog.coordinator.internal_topic import OFFSETS_TOPIC
from eoslog.coordinator.producer_id_manager import ProducerIdsExhausted, ProducerIdsUnavailable
from eoslog.coordinator.transaction import DescribedTransaction
from eoslog.coordinator.transaction.coordinator import EndTxnResult
from eoslog.errors import Errors, KafkaError
from eoslog.features import TRANSACTION_VERSION_2
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import ErrorCode, error_code
from eoslog.protocol.messages import request_types
from eoslog.replica import TxnMarkerWrite
from eoslog.replica.verification import txn_offset_commit_operation
from eoslog.security.acls import AclOperation, ResourceType
from eoslog.types import TopicPartition

if TYPE_CHECKING:
    from eoslog.protocol.requests import (
        AddOffsetsToTxnRequest,
        AddPartitionsToTxnRequest,
        DescribeProducersRequest,
        DescribeTransactionsRequest,
        EndTxnRequest,
        InitProducerIdRequest,
        ListTransactionsRequest,
        TxnOffsetCommitRequest,
        WriteTxnMarkersRequest,
    )
    from eoslog.protocol.responses import (
        AddOffsetsToTxnResponse,
        AddPartitionsToTxnResponse,
        DescribeProducersResponse,
        DescribeTransactionsResponse,
        EndTxnResponse,
        InitProducerIdResponse,
        ListTransactionsResponse,
        TxnOffsetCommitResponse,
        WriteTxnMarkersResponse,
    )

log = logging.getLogger(__name__)

_UTC = datetime.UTC
END_TXN_V2_VERSION = 5  # EndTxn v5+, AddPartitionsToTxn v4+: transactions v2 (Kafka's TransactionVersion)
BROKER_ADD_PARTITIONS_VERSION = 4


def _fenced(name: Errors, version: int, first_version: int) -> Errors:
    """PRODUCER_FENCED is new in ``first_version``; older clients know INVALID_PRODUCER_EPOCH."""
    return Errors.INVALID_PRODUCER_EPOCH if name == Errors.PRODUCER_FENCED and version < first_version else name


def _abortable(name: Errors, version: int, first_version: int) -> Errors:
    return Errors.INVALID_TXN_STATE if name == Errors.TRANSACTION_ABORTABLE and version < first_version else name




def _itself(error: Errors) -> Errors:
    return error


def _may_write_txn(ctx: RequestContext, transactional_id: str) -> bool:
    """WRITE on the transactional id: what every transactional request needs (Kafka's KafkaApis)."""
    return ctx.allowed(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


# -- InitProducerId ----------------------------------------------------------------------------


async def handle_init_producer_id(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    module = response_types(ctx)
    producer_id, epoch, error = -1, -1, Errors.NONE
    ongoing = (-1, -1)
    expected_pid = int(getattr(request, "producer_id", -1))
    expected_epoch = int(getattr(request, "producer_epoch", -1))
    if request.transactional_id is None and not (ctx.allowed_on_cluster(AclOperation.IDEMPOTENT_WRITE)
                                                 or ctx.allowed_any(AclOperation.WRITE, ResourceType.TOPIC)):
        error = Errors.CLUSTER_AUTHORIZATION_FAILED  # KIP-679: IDEMPOTENT_WRITE, or WRITE on some topic
    elif request.transactional_id is not None and not _may_write_txn(ctx, request.transactional_id):
        error = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif request.transactional_id is None:
        try:
            producer_id, epoch = ctx.state.producer_ids.generate_producer_id(), 0
        except ProducerIdsExhausted:
            error = Errors.UNKNOWN_SERVER_ERROR
        except ProducerIdsUnavailable:
            error = Errors.COORDINATOR_LOAD_IN_PROGRESS  # retriable: the next block is on its way
    elif (expected_pid == -1) != (expected_epoch == -1):
        error = Errors.INVALID_REQUEST  # KIP-360: both or neither
    else:
        coordinator, txn_id = ctx.state.txn_coordinator, request.transactional_id
        result = await coordinator.held("InitProducerId", txn_id, lambda: coordinator.init_producer_id(
            txn_id, to_ms(request.transaction_timeout),
            None if expected_pid == -1 else (expected_pid, expected_epoch),
            enable_2pc=bool(getattr(request, "enable2_pc", False)),
            keep_prepared_txn=bool(getattr(request, "keep_prepared_txn", False)),
        ), lambda r: r.error)
        producer_id, epoch, error = result.producer_id, result.producer_epoch, result.error
        ongoing = (result.ongoing_txn_producer_id, result.ongoing_txn_producer_epoch)
        error = await _replicated_txn(ctx, request.transactional_id, error)
    return cast("InitProducerIdResponse", build(
        module.InitProducerIdResponse, throttle_time=NO_THROTTLE,
        error_code=error_code(_fenced(error, ctx.api_version, 4)),
        producer_id=producer_id, producer_epoch=epoch,
        ongoing_txn_producer_id=ongoing[0], ongoing_txn_producer_epoch=ongoing[1],
    ))


async def _replicated_txn(ctx: RequestContext, transactional_id: str, error: Errors) -> Errors:
    """The coordinator's write for ``transactional_id`` replicated before it is answered."""
    coordinator = ctx.state.txn_coordinator
    return await replicated(ctx, coordinator.state.topic, coordinator.state.partition_for(transactional_id), error)


# -- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------------------


def _add_partitions_refused(ctx: RequestContext, txn: Any, version: int) -> dict[TopicPartition, Errors] | None:
    """Kafka's rules before the coordinator is asked: a client's request (v3 and below) needs
    WRITE on the transactional id (else every partition fails) and on each topic; a broker's (v4+,
    its CLUSTER_ACTION checked once) neither. Unknown partitions fail, and then nothing is attempted."""
    tps = [TopicPartition(t.name, int(p)) for t in txn.topics for p in t.partitions]
    if version < BROKER_ADD_PARTITIONS_VERSION and not _may_write_txn(ctx, txn.transactional_id):
        return dict.fromkeys(tps, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    writable = {t.name for t in txn.topics
                if version >= BROKER_ADD_PARTITIONS_VERSION or ctx.allowed(AclOperation.WRITE, ResourceType.TOPIC,
                                                                           t.name)}
    failed = {tp: Errors.TOPIC_AUTHORIZATION_FAILED for tp in tps if tp.topic not in writable}
    failed.update({tp: Errors.UNKNOWN_TOPIC_OR_PARTITION for tp in tps
                   if tp not in failed and not ctx.state.partition_exists(tp.topic, tp.partition)})
    if failed:
        return {tp: failed.get(tp, Errors.OPERATION_NOT_ATTEMPTED) for tp in tps}
    return None


async def _add_partitions(ctx: RequestContext, txn: Any, version: int) -> dict[TopicPartition, Errors]:
    """One transaction of an AddPartitionsToTxn: verified (v4+ verify_only, KIP-890 part 1) or
    added — by a client (v3 and below: transactions v1) or by a partition leader for a v2
    producer (v4+: Kafka's transactionVersionForAddPartitionsToTxn)."""
    refused = _add_partitions_refused(ctx, txn, version)
    if refused is not None:
        return refused
    tps = [TopicPartition(t.name, int(p)) for t in txn.topics for p in t.partitions]
    coordinator = ctx.state.txn_coordinator
    if version >= BROKER_ADD_PARTITIONS_VERSION and txn.verify_only:
        return coordinator.verify_partitions(txn.transactional_id, int(txn.producer_id), int(txn.producer_epoch), tps)
    client_version = TRANSACTION_VERSION_2 if version >= BROKER_ADD_PARTITIONS_VERSION else 0
    error = await LocalTransactionVerifier(coordinator).add_partitions(
        txn.transactional_id, int(txn.producer_id), int(txn.producer_epoch), tps, client_version)
    return dict.fromkeys(tps, error)


def _topic_results(module: ModuleType, results: dict[TopicPartition, Errors], version: int) -> tuple[Any, ...]:
    by_topic: dict[str, list[Any]] = {}
    for tp, error in results.items():
        name = _abortable(_fenced(error, version, 2), version, 5)
        by_topic.setdefault(tp.topic, []).append(build(
            module.AddPartitionsToTxnPartitionResult, partition_index=tp.partition,
            partition_error_code=error_code(name),
        ))
    return tuple(
        build(module.AddPartitionsToTxnTopicResult, name=topic, results_by_partition=tuple(parts))
        for topic, parts in by_topic.items()
    )


async def handle_add_partitions_to_txn(
    ctx: RequestContext, request: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse:
    module = response_types(ctx)
    version = ctx.api_version
    if version < 4:
        txn = build(
            request_types(ApiKey.ADD_PARTITIONS_TO_TXN, 4).AddPartitionsToTxnTransaction,
            transactional_id=versioned(request).v3_and_below_transactional_id,
            producer_id=versioned(request).v3_and_below_producer_id,
            producer_epoch=versioned(request).v3_and_below_producer_epoch, verify_only=False,
            topics=versioned(request).v3_and_below_topics,
        )
        results = await _add_partitions(ctx, txn, version)
        return cast("AddPartitionsToTxnResponse", build(module.AddPartitionsToTxnResponse, throttle_time=NO_THROTTLE,
                     results_by_topic_v3_and_below=_topic_results(module, results, version)))
    if not ctx.allowed_on_cluster(AclOperation.CLUSTER_ACTION):  # v4+ is for brokers only
        return cast("AddPartitionsToTxnResponse", build(
            module.AddPartitionsToTxnResponse, throttle_time=NO_THROTTLE,
            error_code=ErrorCode.cluster_authorization_failed, results_by_transaction=()))
    transactions = tuple([
        build(module.AddPartitionsToTxnResult, transactional_id=txn.transactional_id,
              topic_results=_topic_results(module, await _add_partitions(ctx, txn, version), version))
        for txn in versioned(request).transactions  # v4+: several transactions (brokers)
    ])
    return cast("AddPartitionsToTxnResponse", build(
        module.AddPartitionsToTxnResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                 results_by_transaction=transactions))


async def handle_add_offsets_to_txn(ctx: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    module = response_types(ctx)
    if not _may_write_txn(ctx, request.transactional_id):
        error = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not ctx.allowed(AclOperation.READ, ResourceType.GROUP, request.group_id):
        error = Errors.GROUP_AUTHORIZATION_FAILED
    else:
        ctx.state.group_coordinator.ensure_offsets_topic()  # the group's partition must exist to take a marker
        coordinator = ctx.state.txn_coordinator
        error = await coordinator.held("AddOffsetsToTxn", request.transactional_id, lambda: coordinator.add_offsets(
            request.transactional_id, int(request.producer_id), int(request.producer_epoch), request.group_id,
        ), _itself)
        error = await _replicated_txn(ctx, request.transactional_id, error)
    return cast("AddOffsetsToTxnResponse", build(module.AddOffsetsToTxnResponse, throttle_time=NO_THROTTLE,
                 error_code=error_code(_fenced(error, ctx.api_version, 2))))


# -- EndTxn and the markers ----------------------------------------------------------------------


async def handle_end_txn(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    """v5+ is transactions v2 (Kafka's transactionVersionForEndTxn): the epoch is bumped and the
    answer carries the producer id and epoch the client goes on with."""
    module = response_types(ctx)
    if not _may_write_txn(ctx, request.transactional_id):
        result = EndTxnResult(Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    else:
        coordinator = ctx.state.txn_coordinator
        client_version = TRANSACTION_VERSION_2 if ctx.api_version >= END_TXN_V2_VERSION else 0
        durable = (await coordinator.make_durable_before_commit(request.transactional_id, int(request.producer_id))
                   if request.committed else Errors.NONE)
        result = EndTxnResult(durable) if durable is not Errors.NONE else await coordinator.held(
            "EndTxn", request.transactional_id, lambda: coordinator.end_transaction(
                request.transactional_id, int(request.producer_id), int(request.producer_epoch),
                bool(request.committed), client_version,
            ), lambda r: r.error)
        error = await _replicated_txn(ctx, request.transactional_id, result.error)
        if error is not result.error:
            result = EndTxnResult(error)
    return cast("EndTxnResponse", build(module.EndTxnResponse, throttle_time=NO_THROTTLE,
                 error_code=error_code(_fenced(result.error, ctx.api_version, 2)),
                 producer_id=result.producer_id, producer_epoch=result.producer_epoch))


async def handle_write_txn_markers(ctx: RequestContext, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    module = response_types(ctx)
    writes = [TxnMarkerWrite(TopicPartition(t.name, int(p)), int(marker.producer_id), int(marker.producer_epoch),
                             int(marker.coordinator_epoch), bool(marker.transaction_result),
                             int(getattr(marker, "transaction_version", 0)))  # v2+
              for marker in request.markers for t in marker.topics for p in t.partition_indexes]
    allowed = ctx.allowed_on_cluster(AclOperation.CLUSTER_ACTION)  # brokers only
    timeout_ms = ctx.state.txn_coordinator.config.marker_write_timeout_ms
    errors = iter(await ctx.state.replicas.write_txn_markers(writes, timeout_ms) if allowed
                  else [Errors.CLUSTER_AUTHORIZATION_FAILED] * len(writes))
    markers = []
    for marker in request.markers:
        topics = tuple(
            build(module.WritableTxnMarkerTopicResult, name=t.name, partitions=tuple(
                build(module.WritableTxnMarkerPartitionResult, partition_index=p, error_code=error_code(next(errors)))
                for p in t.partition_indexes
            ))
            for t in marker.topics
        )
        markers.append(build(module.WritableTxnMarkerResult, producer_id=marker.producer_id, topics=topics))
    return cast("WriteTxnMarkersResponse", build(module.WriteTxnMarkersResponse, markers=tuple(markers)))


def _by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in tps:
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


# -- TxnOffsetCommit ------------------------------------------------------------------------------


async def _verify_offsets_partition(ctx: RequestContext, request: TxnOffsetCommitRequest) -> Errors:
    """Kafka 3.6+ checks that the group's partition is in the transaction first (KIP-890),
    asking the transaction coordinator — another broker's, in a cluster; from v5 (transactions
    v2) it adds the partition instead, the client having sent no AddOffsetsToTxn."""
    verifier = ctx.state.replicas.verifier
    assert verifier is not None
    tp = TopicPartition(OFFSETS_TOPIC, ctx.state.group_coordinator.partition_for(request.group_id))
    pid, epoch = int(request.producer_id), int(request.producer_epoch)
    if txn_offset_commit_operation(ctx.api_version).supports_epoch_bump:
        ctx.state.group_coordinator.ensure_offsets_topic()  # the group's partition must exist to take a marker
        error = await verifier.add_partition(request.transactional_id, pid, epoch, tp)
    else:
        error = await verifier.verify_partition(request.transactional_id, pid, epoch, tp)
    # As Kafka's AddPartitionsToTxnManager and maybeConvertOffsetCommitError.
    return _abortable(Errors.INVALID_PRODUCER_EPOCH if error == Errors.PRODUCER_FENCED else error, ctx.api_version, 4)


# The first TxnOffsetCommit version whose answer may carry STALE_MEMBER_EPOCH (Kafka 4.4).
STALE_MEMBER_EPOCH_TXN_OFFSET_COMMIT_VERSION = 6


async def handle_txn_offset_commit(ctx: RequestContext, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    module = response_types(ctx)
    now = ctx.state.clock_ms()
    refused = (Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED if not _may_write_txn(ctx, request.transactional_id)
               else group_refusal(ctx, AclOperation.READ, request.group_id))
    parts, errors = requested_partitions(ctx, request, refused)
    order = [tp for tp, _ in parts]
    offsets = {tp: committed_offset(p, now, None) for tp, p in parts if tp not in errors}
    if offsets:
        error = await _verify_offsets_partition(ctx, request)
        if error != Errors.NONE:
            errors.update(dict.fromkeys(offsets, error))
        else:
            groups = ctx.state.group_coordinator
            committed = groups.commit_transactional_offsets(
                request.group_id, int(request.producer_id), int(request.producer_epoch),
                getattr(request, "member_id", ""), getattr(request, "group_instance_id", None),
                int(getattr(request, "generation_id", -1)), offsets,
            )
            if (any(e is Errors.NONE for e in committed.values())
                    and not ctx.state.txn_coordinator.commit_makes_durable(request.transactional_id)):
                outcome = await replicated(ctx, groups.topic, groups.partition_for(request.group_id), Errors.NONE)
                committed = {tp: outcome if e is Errors.NONE else e for tp, e in committed.items()}
            errors.update(committed)
    if ctx.api_version < STALE_MEMBER_EPOCH_TXN_OFFSET_COMMIT_VERSION:
        # Kafka's TxnOffsetCommitRequest.supportsStaleMemberEpochError: older versions get ILLEGAL_GENERATION.
        errors = {tp: Errors.ILLEGAL_GENERATION if e is Errors.STALE_MEMBER_EPOCH else e for tp, e in errors.items()}
    topics = tuple(
        build(module.TxnOffsetCommitResponseTopic, name=name, partitions=tuple(
            build(module.TxnOffsetCommitResponsePartition, partition_index=p,
                  error_code=error_code(errors.get(TopicPartition(name, p), Errors.COORDINATOR_NOT_AVAILABLE)))
            for p in parts
        ))
        for name, parts in _by_topic(order).items()
    )
    return cast("TxnOffsetCommitResponse", build(
        module.TxnOffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics))


# -- DescribeProducers / DescribeTransactions / ListTransactions --------------------------------------


async def handle_describe_producers(
    ctx: RequestContext, request: DescribeProducersRequest,
) -> DescribeProducersResponse:
    """DescribeProducers (key 61): the active producers of each partition, as kept by the
    partition's producer-state manager (Kafka's kafka-transactions.sh describe-producers)."""
    module = response_types(ctx)
    topics = []
    for topic in request.topics:
        partitions = []
        readable = ctx.allowed(AclOperation.READ, ResourceType.TOPIC, topic.name)
        for index in topic.partition_indexes:
            try:
                if not readable:
                    raise KafkaError(Errors.TOPIC_AUTHORIZATION_FAILED, f"{ctx.principal} may not READ {topic.name}")
                active = ctx.state.replicas.active_producers(TopicPartition(topic.name, int(index)))
            except KafkaError as e:
                partitions.append(build(
                    module.PartitionResponse, partition_index=index, error_code=error_code(e.error),
                    error_message=f"{topic.name}-{index} does not exist"
                    if e.error is Errors.UNKNOWN_TOPIC_OR_PARTITION else str(e), active_producers=(),
                ))
                continue
            producers = tuple(
                build(
                    module.ProducerState, producer_id=e.producer_id, producer_epoch=e.producer_epoch,
                    last_sequence=e.last_seq, last_timestamp=e.last_timestamp,
                    coordinator_epoch=e.coordinator_epoch,
                    current_txn_start_offset=e.current_txn_first_offset,
                )
                for e in active
            )
            partitions.append(build(
                module.PartitionResponse, partition_index=index, error_code=ErrorCode.none,
                error_message=None, active_producers=producers,
            ))
        topics.append(build(module.TopicResponse, name=topic.name, partitions=tuple(partitions)))
    return cast("DescribeProducersResponse", build(
        module.DescribeProducersResponse, throttle_time=NO_THROTTLE, topics=tuple(topics)))


async def handle_describe_transactions(
    ctx: RequestContext, request: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse:
    module = response_types(ctx)
    states = []
    for txn_id in request.transactional_ids:
        d = (ctx.state.txn_coordinator.describe(txn_id)
             if ctx.allowed(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id)
             else DescribedTransaction(Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, txn_id))
        if d.error != Errors.NONE:  # Kafka leaves the fields at their schema defaults: zeros
            d = DescribedTransaction(d.error, txn_id, start_ms=0, producer_id=0, producer_epoch=0)
        states.append(build(
            module.TransactionState, error_code=error_code(d.error), transactional_id=txn_id,
            transaction_state=d.state, transaction_timeout=datetime.timedelta(milliseconds=d.timeout_ms),
            transaction_start_time=(  # None writes Kafka's -1: no transaction in progress
                datetime.datetime.fromtimestamp(d.start_ms / 1000, _UTC) if d.start_ms >= 0 else None),
            producer_id=d.producer_id, producer_epoch=d.producer_epoch,
            topics=tuple(build(module.TopicData, topic=t, partitions=tuple(sorted(ps)))
                         for t, ps in sorted(_by_topic(d.partitions).items())),
        ))
    return cast("DescribeTransactionsResponse", build(
        module.DescribeTransactionsResponse, throttle_time=NO_THROTTLE, transaction_states=tuple(states)))


async def handle_list_transactions(ctx: RequestContext, request: ListTransactionsRequest) -> ListTransactionsResponse:
    module = response_types(ctx)
    error, unknown, listed = ctx.state.txn_coordinator.list_transactions(
        tuple(request.state_filters), {int(p) for p in request.producer_id_filters},
        int(getattr(request, "duration_filter", -1)), getattr(request, "transactional_id_pattern", None),
    )
    listed = [t for t in listed
              if ctx.allowed(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t.transactional_id)]
    return cast("ListTransactionsResponse", build(
        module.ListTransactionsResponse, throttle_time=NO_THROTTLE, error_code=error_code(error),
        unknown_state_filters=tuple(unknown),
        transaction_states=tuple(
            build(module.TransactionState, transactional_id=t.transactional_id, producer_id=t.producer_id,
                  transaction_state=t.state)
            for t in listed
        ),
    ))


APIS = [
    ApiSpec(ApiKey.INIT_PRODUCER_ID, "InitProducerId", 0, 6, handle_init_producer_id),
    ApiSpec(ApiKey.ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxn", 0, 5, handle_add_partitions_to_txn),
    ApiSpec(ApiKey.ADD_OFFSETS_TO_TXN, "AddOffsetsToTxn", 0, 4, handle_add_offsets_to_txn),
    ApiSpec(ApiKey.END_TXN, "EndTxn", 0, 5, handle_end_txn),
    ApiSpec(ApiKey.WRITE_TXN_MARKERS, "WriteTxnMarkers", 1, 2, handle_write_txn_markers),
    ApiSpec(ApiKey.TXN_OFFSET_COMMIT, "TxnOffsetCommit", 0, 5, handle_txn_offset_commit),
    ApiSpec(ApiKey.DESCRIBE_PRODUCERS, "DescribeProducers", 0, 0, handle_describe_producers),
    ApiSpec(ApiKey.DESCRIBE_TRANSACTIONS, "DescribeTransactions", 0, 0, handle_describe_transactions),
    ApiSpec(ApiKey.LIST_TRANSACTIONS, "ListTransactions", 0, 2, handle_list_transactions),
]

"""Transactions: ListTransactions, DescribeTransactions, DescribeProducers and
``abort_transaction`` (WriteTxnMarkers), the tools for a hanging transaction.

- ``list_transactions`` asks every broker (each coordinates its own transactional ids).
- ``describe_transactions`` asks each id's coordinator (FindCoordinator, key type 1).
- ``describe_producers`` asks each partition's leader for its active producers, among
  them the start offset of each open transaction.
- ``abort_transaction`` ends one open transaction in one partition, as Kafka's
  Admin.abortTransaction: a WriteTxnMarkers request with an ABORT marker, sent to the
  partition's leader as if from the transaction coordinator, with the producer id and
  epoch and a coordinator epoch the partition accepts (from ``describe_producers``). For
  a transaction no coordinator will ever finish; the partition's last stable offset then
  moves on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, cast

from eoslog.client.admin.core import TRANSACTION_KEY_TYPE, AdminCore, MakeRequest, raise_for
from eoslog.client.admin.types import AbortTransactionSpec, ProducerState, TransactionDescription, TransactionListing
from eoslog.client.errors import KafkaError
from eoslog.client.types import TopicPartition
from eoslog.client.versions import ApiVersionTable
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.messages import build, request_types

if TYPE_CHECKING:
    from kio.schema.describe_producers.v0.response import ProducerState as KioProducerState

    from eoslog.protocol.requests import (
        DescribeProducersRequest,
        DescribeTransactionsRequest,
        ListTransactionsRequest,
        WriteTxnMarkersRequest,
    )
    from eoslog.protocol.responses import (
        DescribeProducersResponse,
        DescribeTransactionsResponse,
        ListTransactionsResponse,
        WriteTxnMarkersResponse,
    )

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = (
    ApiKey.WRITE_TXN_MARKERS, ApiKey.DESCRIBE_PRODUCERS, ApiKey.DESCRIBE_TRANSACTIONS, ApiKey.LIST_TRANSACTIONS)


# -- the API ----------------------------------------------------------------------------------------


def _producer_state(s: KioProducerState) -> ProducerState:
    coordinator_epoch, start = int(s.coordinator_epoch), int(s.current_txn_start_offset)
    return ProducerState(int(s.producer_id), int(s.producer_epoch), int(s.last_sequence), int(s.last_timestamp),
                         coordinator_epoch if coordinator_epoch >= 0 else None, start if start >= 0 else None)


class TransactionAdmin(AdminCore):
    async def list_transactions(
        self, states: Iterable[str] | None = None, producer_ids: Iterable[int] | None = None, *,
        min_duration_ms: int | None = None, transactional_id_pattern: str | None = None,
        timeout_ms: int | None = None,
    ) -> list[TransactionListing]:
        """The transactional ids every coordinator knows (ListTransactions on each broker),
        optionally only those in ``states`` (``Ongoing``, ``PrepareCommit``, ...), of
        ``producer_ids``, running for longer than ``min_duration_ms`` (v1) or matching a
        regular expression (v2). A state no broker knows is ignored, with a warning."""
        state_filter = tuple(states or ())
        producer_filter = tuple(int(p) for p in producer_ids or ())
        duration = -1 if min_duration_ms is None else min_duration_ms
        min_version = 2 if transactional_id_pattern is not None else 1 if duration >= 0 else 0

        def make(versions: ApiVersionTable) -> ListTransactionsRequest:
            m = request_types(LIST_TRANSACTIONS, versions.pick(LIST_TRANSACTIONS, 2, min_version))
            return cast("ListTransactionsRequest", build(
                m.ListTransactionsRequest, state_filters=state_filter, producer_id_filters=producer_filter,
                         duration_filter=duration, transactional_id_pattern=transactional_id_pattern))

        def handle(node_id: int | None, response: ListTransactionsResponse) -> list[TransactionListing]:
            raise_for(response.error_code, f"ListTransactions on broker {node_id}")
            if response.unknown_state_filters:
                log.warning("unknown state filter(s) ignored by broker %s: %s", node_id,
                            ", ".join(sorted(str(s) for s in response.unknown_state_filters)))
            return [TransactionListing(str(t.transactional_id), int(t.producer_id), str(t.transaction_state),
                                       int(node_id if node_id is not None else -1))
                    for t in response.transaction_states]

        listed = await self._on_every_broker("list_transactions", make, handle, timeout_ms)
        return sorted(listed, key=lambda t: (t.transactional_id, t.coordinator_id))

    async def describe_transactions(self, transactional_ids: Iterable[str], *,
                                    timeout_ms: int | None = None) -> dict[str, TransactionDescription]:
        """State, producer id and epoch, timeout, start time and partitions of each
        transactional id, from its coordinator. Unknown ids raise TransactionalIdNotFoundError."""

        async def describe(txn_id: str) -> TransactionDescription:
            def make(versions: ApiVersionTable) -> DescribeTransactionsRequest:
                m = request_types(DESCRIBE_TRANSACTIONS, versions.pick(DESCRIBE_TRANSACTIONS, 0))
                return cast("DescribeTransactionsRequest", build(
                    m.DescribeTransactionsRequest, transactional_ids=(txn_id,)))

            def handle(node_id: int | None, response: DescribeTransactionsResponse) -> TransactionDescription:
                [s] = response.transaction_states
                raise_for(s.error_code, f"transactional id {txn_id}")
                start = s.transaction_start_time  # None: no transaction in progress
                partitions = sorted(TopicPartition(str(t.topic), int(p)) for t in s.topics for p in t.partitions)
                return TransactionDescription(
                    int(node_id if node_id is not None else -1), str(s.transactional_id), str(s.transaction_state),
                    int(s.producer_id), int(s.producer_epoch), round(s.transaction_timeout.total_seconds() * 1000),
                    None if start is None else round(start.timestamp() * 1000), tuple(partitions))

            return await self._call("describe_transactions", make, handle,
                                    node=self._coordinator_of(TRANSACTION_KEY_TYPE, txn_id), timeout_ms=timeout_ms)

        return await self._each(transactional_ids, describe)

    async def describe_producers(self, partitions: Iterable[TopicPartition], *, broker_id: int | None = None,
                                 timeout_ms: int | None = None) -> dict[TopicPartition, list[ProducerState]]:
        """The active producers of each partition (DescribeProducers), from its leader or
        from the replica on ``broker_id``."""

        def make(batch: list[TopicPartition]) -> MakeRequest:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in batch:
                by_topic.setdefault(topic, []).append(partition)

            def build_request(versions: ApiVersionTable) -> DescribeProducersRequest:
                m = request_types(DESCRIBE_PRODUCERS, versions.pick(DESCRIBE_PRODUCERS, 0))
                return cast("DescribeProducersRequest", build(m.DescribeProducersRequest, topics=tuple(
                    build(m.TopicRequest, name=t, partition_indexes=tuple(ps)) for t, ps in by_topic.items())))
            return build_request

        def handle(node_id: int | None,
                   response: DescribeProducersResponse) -> dict[TopicPartition, list[ProducerState]]:
            out: dict[TopicPartition, list[ProducerState]] = {}
            for t in response.topics:
                for p in t.partitions:
                    tp = TopicPartition(str(t.name), int(p.partition_index))
                    raise_for(p.error_code, p.error_message or f"partition {tp.topic}-{tp.partition} "
                                                               f"on broker {node_id}")
                    out[tp] = sorted((_producer_state(s) for s in p.active_producers), key=lambda s: s.producer_id)
            return out

        if broker_id is None:
            return await self._per_leader("describe_producers", partitions, make, handle, timeout_ms)
        wanted = list(dict.fromkeys(TopicPartition(str(t), int(p)) for t, p in partitions))

        return await self._call("describe_producers", make(wanted), handle, node=self._broker(broker_id, or_any=False),
                                timeout_ms=timeout_ms)

    async def abort_transaction(self, spec: AbortTransactionSpec, *, timeout_ms: int | None = None) -> None:
        """Write an ABORT marker for the spec's open transaction at the partition's leader
        (WriteTxnMarkers). Raises InvalidProducerEpochError / TransactionCoordinatorFencedError
        when the partition has seen a newer producer or coordinator epoch."""
        tp = TopicPartition(str(spec.topic_partition[0]), int(spec.topic_partition[1]))

        def make(batch: list[TopicPartition]) -> MakeRequest:
            def build_request(versions: ApiVersionTable) -> WriteTxnMarkersRequest:
                m = request_types(WRITE_TXN_MARKERS, versions.pick(WRITE_TXN_MARKERS, 1))
                return cast("WriteTxnMarkersRequest", build(m.WriteTxnMarkersRequest, markers=(build(
                    m.WritableTxnMarker, producer_id=spec.producer_id, producer_epoch=spec.producer_epoch,
                    transaction_result=False, coordinator_epoch=spec.coordinator_epoch,
                    topics=(build(m.WritableTxnMarkerTopic, name=tp.topic, partition_indexes=(tp.partition,)),),
                ),)))
            return build_request

        def handle(node_id: int, response: WriteTxnMarkersResponse) -> dict[TopicPartition, None]:
            results = [(t.name, p) for mk in response.markers for t in mk.topics for p in t.partitions]
            if not results:
                raise KafkaError(f"broker {node_id} answered WriteTxnMarkers without a result")
            for _, p in results:
                raise_for(p.error_code, f"abort of producer {spec.producer_id} (epoch {spec.producer_epoch}, "
                                        f"coordinator epoch {spec.coordinator_epoch}) on {tp.topic}-{tp.partition}")
            return {tp: None}

        await self._per_leader("abort_transaction", [tp], make, handle, timeout_ms)


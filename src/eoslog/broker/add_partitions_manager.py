"""Kafka's AddPartitionsToTxnManager: a partition leader asking another broker's transaction
coordinator to verify (KIP-890 part 1) or add (part 2, transactions v2) the partitions a
transactional Produce (or TxnOffsetCommit) writes to, with AddPartitionsToTxn v4+ — the
brokers' form, several transactions in one request.

Per coordinator broker one request is in flight at a time; what arrives meanwhile waits and
leaves together in the next one. A transactional id appears once per request: a later ask for
the same id and epoch joins the waiting one (its partitions are added to it and both callers get
their partitions' answers; Kafka instead bounces the earlier caller with NETWORK_EXCEPTION, which
its producer retries); one with a newer epoch replaces it (the earlier caller is told
INVALID_PRODUCER_EPOCH, as by Kafka); an older one is refused at once (INVALID_PRODUCER_EPOCH).
A verify and an add for the same id do not share a request entry: the earlier caller gets
NETWORK_EXCEPTION, as from Kafka.

Answers mapped as Kafka maps them: PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH; a top-level
CLUSTER_AUTHORIZATION_FAILED (this broker may not CLUSTER_ACTION there) becomes INVALID_TXN_STATE;
a lost connection NETWORK_EXCEPTION for every caller of that request; a broker without the API
version leaves the check undone (Kafka: "verification is not supported", the append goes on).
The callers (``replica.verification``) map what the producer is told.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from eoslog.client.errors import KafkaError as ClientError
from eoslog.client.errors import KafkaProtocolError
from eoslog.client.versions import ApiVersionTable
from eoslog.errors import Errors
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import ErrorCode, from_code
from eoslog.protocol.messages import build, request_types
from eoslog.types import TopicPartition

log = logging.getLogger(__name__)

# Sends ``make(versions)`` to a broker and returns its answer (the inter-broker channel).
Send = Callable[[int, Callable[[ApiVersionTable], Any]], Awaitable[Any]]
BROKER_MIN_VERSION = 4  # the brokers' form of AddPartitionsToTxn (several transactions)
ADD_VERSION = 5  # transactions v2: adding, not only verifying


@dataclass
class _Pending:
    producer_id: int
    producer_epoch: int
    verify_only: bool
    partitions: set[TopicPartition] = field(default_factory=set)
    waiters: list[asyncio.Future[dict[TopicPartition, Errors]]] = field(default_factory=list)

    def answer(self, errors: dict[TopicPartition, Errors]) -> None:
        for waiter in self.waiters:
            if not waiter.done():
                waiter.set_result(errors)

    def answer_all(self, error: Errors) -> None:
        self.answer(dict.fromkeys(self.partitions, error))


class AddPartitionsToTxnManager:
    def __init__(self, send: Send) -> None:
        self._send = send
        self._waiting: dict[int, dict[str, _Pending]] = {}  # node → transactional id → what to ask
        self._in_flight: set[int] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def add_or_verify(self, node: int, transactional_id: str, producer_id: int, producer_epoch: int,
                            partitions: set[TopicPartition], verify_only: bool) -> dict[TopicPartition, Errors]:
        """Each partition's answer from ``node``'s coordinator (the caller's partitions only)."""
        batch = self._waiting.setdefault(node, {})
        waiter: asyncio.Future[dict[TopicPartition, Errors]] = asyncio.get_running_loop().create_future()
        pending = batch.get(transactional_id)
        if pending is not None:
            if producer_epoch < pending.producer_epoch:
                return dict.fromkeys(partitions, Errors.INVALID_PRODUCER_EPOCH)
            if (producer_epoch > pending.producer_epoch or producer_id != pending.producer_id
                    or verify_only != pending.verify_only):
                del batch[transactional_id]
                pending.answer_all(Errors.INVALID_PRODUCER_EPOCH if producer_epoch > pending.producer_epoch
                                   else Errors.NETWORK_EXCEPTION)
                pending = None
        if pending is None:
            pending = batch[transactional_id] = _Pending(producer_id, producer_epoch, verify_only)
        pending.partitions |= partitions
        pending.waiters.append(waiter)
        self._maybe_send(node)
        answered = await waiter
        return {tp: answered.get(tp, Errors.UNKNOWN_SERVER_ERROR) for tp in partitions}

    def _maybe_send(self, node: int) -> None:
        if node in self._in_flight or not self._waiting.get(node):
            return
        self._in_flight.add(node)
        task = asyncio.get_running_loop().create_task(self._send_batch(node, self._waiting.pop(node)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_batch(self, node: int, batch: dict[str, _Pending]) -> None:
        try:
            await self._exchange(node, batch)
        except Exception:
            log.exception("AddPartitionsToTxn to broker %d failed", node)
            for pending in batch.values():
                pending.answer_all(Errors.NETWORK_EXCEPTION)
        finally:
            self._in_flight.discard(node)
            self._maybe_send(node)

    async def _exchange(self, node: int, batch: dict[str, _Pending]) -> None:
        def make(versions: ApiVersionTable) -> Any:
            m = request_types(ApiKey.ADD_PARTITIONS_TO_TXN,
                              versions.pick(ApiKey.ADD_PARTITIONS_TO_TXN, ADD_VERSION, BROKER_MIN_VERSION))
            return build(m.AddPartitionsToTxnRequest, transactions=tuple(
                build(m.AddPartitionsToTxnTransaction, transactional_id=txn_id, producer_id=p.producer_id,
                      producer_epoch=p.producer_epoch, verify_only=p.verify_only, topics=tuple(
                          build(m.AddPartitionsToTxnTopic, name=topic, partitions=tuple(sorted(
                              tp.partition for tp in p.partitions if tp.topic == topic)))
                          for topic in sorted({tp.topic for tp in p.partitions})))
                for txn_id, p in batch.items()))

        try:
            response = await self._send(node, make)
        except KafkaProtocolError as e:
            if e.error_code == ErrorCode.unsupported_version:
                log.warning("broker %d does not take AddPartitionsToTxn v%d+: continuing without verification",
                            node, BROKER_MIN_VERSION)
                for pending in batch.values():
                    pending.answer({})  # no error for any partition: Kafka's versionMismatch
                return
            raise
        except (ClientError, OSError) as e:
            log.info("AddPartitionsToTxn to broker %d: %s", node, e)
            for pending in batch.values():
                pending.answer_all(Errors.NETWORK_EXCEPTION)
            return
        top: Errors = from_code(int(response.error_code))
        if top is not Errors.NONE:
            error = Errors.INVALID_TXN_STATE if top is Errors.CLUSTER_AUTHORIZATION_FAILED else top
            for pending in batch.values():
                pending.answer_all(error)
            return
        answered: set[str] = set()
        for txn in response.results_by_transaction:
            found = batch.get(str(txn.transactional_id))
            if found is None:
                continue
            answered.add(str(txn.transactional_id))
            errors: dict[TopicPartition, Errors] = {}
            for topic in txn.topic_results:
                for p in topic.results_by_partition:
                    answer: Errors = from_code(int(p.partition_error_code))
                    errors[TopicPartition(str(topic.name), int(p.partition_index))] = (
                        Errors.INVALID_PRODUCER_EPOCH if answer is Errors.PRODUCER_FENCED else answer)
            found.answer(errors)
        for txn_id, pending in batch.items():
            if txn_id not in answered:
                pending.answer_all(Errors.UNKNOWN_SERVER_ERROR)

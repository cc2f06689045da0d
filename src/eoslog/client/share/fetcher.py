"""A share consumer's ShareFetch and ShareAcknowledge (Java's ShareConsumeRequestManager and
ShareSessionHandler): one share session per leader broker.

What it owns: the sessions (epoch 0 opens one; each answered request moves the epoch on; -1 closes
it; SHARE_SESSION_NOT_FOUND or INVALID_SHARE_SESSION_EPOCH start it again), which partitions each
session has (added with the next request, forgotten when no longer assigned), the records of the
acquired ranges (whole batches come back: only the acquired offsets are handed out, each with its
delivery count), and acknowledgements: queued per partition, sent with the next ShareFetch to
that partition's leader or, on a commit, with a ShareAcknowledge; their outcome per partition is
reported to ``on_acknowledged``. One request per broker at a time, so epochs stay in order.

What it must never do: decide what is acknowledged (the consumer does).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kio.schema.types import ProducerId, TransactionalId
from kio.static.primitive import i16

from eoslog.client.aio_client import AioClient
from eoslog.client.consumer.completed_fetch import CompletedFetch
from eoslog.client.errors import KafkaConnectionError, KafkaError, error_for
from eoslog.client.share.config import ShareConsumerConfig
from eoslog.client.types import TopicPartition, TransactionIdentity
from eoslog.client.versions import ApiVersionTable
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import ErrorCode as E
from eoslog.protocol.messages import build, request_types
from eoslog.protocol.share_transactions import TRANSACTIONAL_ACCEPT, ShareTransaction

log = logging.getLogger(__name__)

INITIAL_EPOCH, FINAL_EPOCH = 0, -1
_RESTART = frozenset({E.share_session_not_found, E.invalid_share_session_epoch})
_METADATA = frozenset({E.not_leader_or_follower, E.unknown_topic_or_partition, E.unknown_topic_id,
                       E.fenced_leader_epoch})
Acknowledged = Callable[[dict[TopicPartition, set[int]], KafkaError | None], None]


class ShareRecord(NamedTuple):
    """A record handed out by a share consumer's ``poll``: a ConsumerRecord's fields, and how many
    times it has been delivered (1 the first time)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: tuple[tuple[str, bytes | None], ...]
    leader_epoch: int | None
    delivery_count: int


@dataclass
class _Session:
    epoch: int = INITIAL_EPOCH
    partitions: set[TopicPartition] = field(default_factory=set)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def _batches(acks: dict[int, int]) -> list[tuple[int, int, list[int]]]:
    """Offsets → (first, last, one type per offset) runs of consecutive offsets."""
    runs: list[tuple[int, int, list[int]]] = []
    for offset in sorted(acks):
        if runs and runs[-1][1] + 1 == offset:
            first, _, types = runs[-1]
            runs[-1] = (first, offset, [*types, acks[offset]])
        else:
            runs.append((offset, offset, [acks[offset]]))
    return runs


class ShareFetcher:
    def __init__(self, config: ShareConsumerConfig, client: AioClient, wake: Callable[[], None]) -> None:
        self.config = config
        self.client = client
        self.group_id = config.group_id
        self.member_id = ""
        self.buffered: deque[ShareRecord] = deque()
        self.pending: dict[TopicPartition, dict[int, int]] = {}  # acknowledgements not sent yet
        self.on_acknowledged: list[Acknowledged] = []
        self._sessions: dict[int, _Session] = {}
        self._in_flight: set[int] = set()
        self._wake = wake
        self._tasks: set[asyncio.Task[None]] = set()

    def _session(self, node: int) -> _Session:
        return self._sessions.setdefault(node, _Session())

    # -- fetching ---------------------------------------------------------------------------------

    def fetch(self, assignment: Iterable[TopicPartition]) -> None:
        """Start a ShareFetch to every leader of ``assignment`` (or holding a session) that has
        none in flight."""
        by_node: dict[int, set[TopicPartition]] = {}
        for tp in assignment:
            leader = self.client.cluster.leader(tp)
            if leader >= 0:
                by_node.setdefault(leader, set()).add(tp)
            else:
                self.client.request_update()
        for node in set(by_node) | {n for n, s in self._sessions.items() if s.partitions}:
            if node not in self._in_flight:
                self._spawn(node, self._fetch(node, by_node.get(node, set())))

    def _spawn(self, node: int, coro: Any) -> None:
        self._in_flight.add(node)
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)

        def done(t: asyncio.Task[None]) -> None:
            self._tasks.discard(t)
            self._in_flight.discard(node)
            self._wake()
        task.add_done_callback(done)

    def _take_acks(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, dict[int, int]]:
        out = {}
        for tp in list(partitions):
            acks = self.pending.pop(tp, None)
            if acks:
                out[tp] = acks
        return out

    async def _fetch(self, node: int, wanted: set[TopicPartition]) -> None:
        session = self._session(node)
        async with session.lock:
            opening = session.epoch == INITIAL_EPOCH
            acks = {} if opening else self._take_acks(session.partitions & (wanted | set(self.pending)))
            added = wanted - session.partitions if not opening else wanted
            forgotten = session.partitions - wanted
            if not added and not acks and not forgotten and not session.partitions and not wanted:
                return
            try:
                response = await self.client.send(
                    lambda v: self._share_fetch(v, session.epoch, added | set(acks), acks, forgotten), node)
            except (KafkaError, TimeoutError, OSError) as e:
                self._lost(node, acks, e if isinstance(e, KafkaError) else KafkaConnectionError(str(e)))
                return
            if self._answered(node, session, response, acks):
                session.partitions = (session.partitions | added) - forgotten
                self._records(response)

    def _share_fetch(self, versions: ApiVersionTable, epoch: int, topics: set[TopicPartition],
                     acks: dict[TopicPartition, dict[int, int]], forgotten: set[TopicPartition]) -> Any:
        version = versions.pick(ApiKey.SHARE_FETCH, 1, 1)
        m = request_types(ApiKey.SHARE_FETCH, version)
        ids = {t.name: t.topic_id for t in self.client.cluster.topics.values()}
        by_topic: dict[str, list[TopicPartition]] = {}
        for tp in sorted(topics):
            by_topic.setdefault(tp.topic, []).append(tp)
        fetch_topics = tuple(build(m.FetchTopic, topic_id=ids.get(name), partitions=tuple(
            build(m.FetchPartition, partition_index=tp.partition, acknowledgement_batches=self._ack_batches(
                m, acks.get(tp, {}))) for tp in tps)) for name, tps in by_topic.items())
        forgotten_by_topic: dict[str, list[int]] = {}
        for tp in forgotten:
            forgotten_by_topic.setdefault(tp.topic, []).append(tp.partition)
        return build(
            m.ShareFetchRequest, group_id=self.group_id, member_id=self.member_id, share_session_epoch=epoch,
            max_wait=datetime.timedelta(milliseconds=self.config.fetch_max_wait_ms),
            min_bytes=self.config.fetch_min_bytes, max_bytes=self.config.fetch_max_bytes,
            max_records=self.config.max_poll_records, batch_size=self.config.max_poll_records,
            topics=fetch_topics, forgotten_topics_data=tuple(
                build(m.ForgottenTopic, topic_id=ids.get(name), partitions=tuple(sorted(ps)))
                for name, ps in forgotten_by_topic.items()))

    @staticmethod
    def _ack_batches(m: Any, acks: dict[int, int]) -> tuple[Any, ...]:
        return tuple(build(m.AcknowledgementBatch, first_offset=first, last_offset=last,
                           acknowledge_types=tuple(types)) for first, last, types in _batches(acks))

    def _answered(self, node: int, session: _Session, response: Any,
                  acks: dict[TopicPartition, dict[int, int]]) -> bool:
        """Handle the request-level answer; False when the session must start again."""
        code = int(response.error_code)
        if code in _RESTART:
            log.info("share session with node %d: %s, opening another", node, E(code).name)
            self._sessions.pop(node, None)
            self._lost(node, acks, error_for(code))
            return False
        if code != E.none:
            self._lost(node, acks, error_for(code, getattr(response, "error_message", None)))
            return False
        session.epoch = 1 if session.epoch in (2**31 - 1, FINAL_EPOCH) else session.epoch + 1
        names = self.client.cluster.topic_names_by_id()
        for t in response.responses:
            for p in t.partitions:
                tp = TopicPartition(names.get(t.topic_id, ""), int(p.partition_index))
                error_code = int(getattr(p, "acknowledge_error_code", p.error_code))
                if tp in acks:
                    self._report({tp: set(acks.pop(tp))}, error_for(error_code) if error_code else None)
                if int(p.error_code) in _METADATA:
                    self.client.request_update()
        for tp, offsets in acks.items():  # not named in the answer: nothing went wrong
            self._report({tp: set(offsets)}, None)
        return True

    def _records(self, response: Any) -> None:
        names = self.client.cluster.topic_names_by_id()
        c = self.config
        for t in response.responses:
            name = names.get(t.topic_id)
            if name is None:
                continue
            for p in t.partitions:
                if not p.acquired_records or not p.records:
                    continue
                tp = TopicPartition(name, int(p.partition_index))
                ranges = [(int(a.first_offset), int(a.last_offset), int(a.delivery_count)) for a in p.acquired_records]
                fetched = CompletedFetch(tp, ranges[0][0], p.records, check_crcs=c.check_crcs,
                                         key_deserializer=c.key_deserializer, value_deserializer=c.value_deserializer)
                for r in fetched.take(2**31 - 1):
                    count = next((n for first, last, n in ranges if first <= r.offset <= last), 0)
                    if count:
                        self.buffered.append(ShareRecord(*r, delivery_count=count))

    # -- acknowledging ----------------------------------------------------------------------------

    def _report(self, offsets: dict[TopicPartition, set[int]], error: KafkaError | None) -> None:
        for callback in self.on_acknowledged:
            callback(offsets, error)

    def _lost(self, node: int, acks: dict[TopicPartition, dict[int, int]], error: KafkaError) -> None:
        if isinstance(error, KafkaConnectionError):
            self._sessions.pop(node, None)  # the broker ended the session with the connection
        for tp, offsets in acks.items():
            self._report({tp: set(offsets)}, error)

    async def acknowledge(self, final: bool = False, timeout_s: float | None = None) -> None:
        """Send every pending acknowledgement now (ShareAcknowledge to each leader with a
        session); ``final``: and close the sessions (epoch -1). Returns once answered."""
        nodes: dict[int, set[TopicPartition]] = {}
        for tp in self.pending:
            nodes.setdefault(self.client.cluster.leader(tp), set()).add(tp)
        if final:
            for node in self._sessions:
                nodes.setdefault(node, set())
        jobs = [self._acknowledge(node, tps, final) for node, tps in nodes.items()]
        if jobs:
            await asyncio.wait_for(asyncio.gather(*jobs), timeout_s)

    async def _acknowledge(self, node: int, tps: set[TopicPartition], final: bool) -> None:
        session = self._sessions.get(node)
        if session is None:
            self._lost(node, self._take_acks(tps), error_for(E.share_session_not_found))
            return
        async with session.lock:
            acks = self._take_acks(tps)
            if not acks and not final:
                return
            epoch = FINAL_EPOCH if final else session.epoch
            try:
                response = await self.client.send(lambda v: self._share_acknowledge(v, epoch, acks), node)
            except (KafkaError, TimeoutError, OSError) as e:
                self._lost(node, acks, e if isinstance(e, KafkaError) else KafkaConnectionError(str(e)))
                return
            self._answered(node, session, response, acks)
            if final:
                self._sessions.pop(node, None)

    async def acknowledge_in_transaction(self, accepts: dict[TopicPartition, set[int]],
                                         transaction: TransactionIdentity) -> dict[TopicPartition, KafkaError | None]:
        """eoslog's extension: ACCEPT ``accepts`` inside ``transaction`` (a ShareAcknowledge to each
        leader, its types TRANSACTIONAL_ACCEPT and the transaction in eoslog's tagged field:
        ``protocol/share_transactions``); each partition's outcome (None: held by the transaction).
        A broker that is not eoslog refuses the type: nothing is accepted outside the transaction."""
        outcome: dict[TopicPartition, KafkaError | None] = {}

        def record(offsets: dict[TopicPartition, set[int]], error: KafkaError | None) -> None:
            for tp in offsets:
                if tp in accepts:
                    outcome[tp] = error

        nodes: dict[int, set[TopicPartition]] = {}
        for tp in accepts:
            nodes.setdefault(self.client.cluster.leader(tp), set()).add(tp)
        self.on_acknowledged.insert(0, record)
        try:
            await asyncio.gather(*(self._acknowledge_in_transaction(node, {tp: accepts[tp] for tp in tps}, transaction)
                                   for node, tps in nodes.items()))
        finally:
            self.on_acknowledged.remove(record)
        return {tp: outcome.get(tp, error_for(E.unknown_server_error)) for tp in accepts}

    async def _acknowledge_in_transaction(self, node: int, accepts: dict[TopicPartition, set[int]],
                                          transaction: TransactionIdentity) -> None:
        acks = {tp: dict.fromkeys(offsets, TRANSACTIONAL_ACCEPT) for tp, offsets in accepts.items()}
        session = self._sessions.get(node)
        if session is None:  # the records came through a session this broker has ended: released
            self._lost(node, acks, error_for(E.share_session_not_found))
            return
        async with session.lock:
            try:
                response = await self.client.send(
                    lambda v: self._share_acknowledge(v, session.epoch, acks, transaction), node)
            except (KafkaError, TimeoutError, OSError) as e:
                self._lost(node, acks, e if isinstance(e, KafkaError) else KafkaConnectionError(str(e)))
                return
            self._answered(node, session, response, acks)

    def _share_acknowledge(self, versions: ApiVersionTable, epoch: int, acks: dict[TopicPartition, dict[int, int]],
                           transaction: TransactionIdentity | None = None) -> Any:
        version = versions.pick(ApiKey.SHARE_ACKNOWLEDGE, 1, 1)
        m = request_types(ApiKey.SHARE_ACKNOWLEDGE, version)
        ids = {t.name: t.topic_id for t in self.client.cluster.topics.values()}
        by_topic: dict[str, list[TopicPartition]] = {}
        for tp in sorted(acks):
            by_topic.setdefault(tp.topic, []).append(tp)
        txn = ShareTransaction() if transaction is None else ShareTransaction(
            transactional_id=TransactionalId(transaction.transactional_id),
            producer_id=ProducerId(transaction.producer_id), producer_epoch=i16(transaction.producer_epoch))
        return build(m.ShareAcknowledgeRequest, group_id=self.group_id, member_id=self.member_id,
                     share_session_epoch=epoch, eoslog_transaction=txn, topics=tuple(
                         build(m.AcknowledgeTopic, topic_id=ids.get(name), partitions=tuple(
                             build(m.AcknowledgePartition, partition_index=tp.partition,
                                   acknowledgement_batches=self._ack_batches(m, acks[tp])) for tp in tps))
                         for name, tps in by_topic.items()))

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        self._sessions.clear()

"""The share consumer's public API (KIP-932): ``AIOShareConsumer`` (asyncio) and ``ShareConsumer``
(threads), with Java's and confluent-kafka's names.

What it owns: the API — ``subscribe``/``unsubscribe``, ``poll``, ``acknowledge`` (ACCEPT, RELEASE,
REJECT) and ``acknowledge_offset``, ``commit_sync``/``commit_async`` with an acknowledgement
commit callback, ``close`` — and the acknowledgement modes:

- implicit (``share.acknowledgement.mode=implicit``, the default): the records a poll returned
  are ACCEPTed by the next poll, commit or close;
- explicit: the application acknowledges every record a poll returned before it polls again
  (else IllegalStateError, as Java's and librdkafka's consumers refuse); what it acknowledged is
  sent with the next fetch, or at once by ``commit_sync``/``commit_async``;
- transactional (eoslog's extension, docs/consumer.md): as explicit, but records are ACCEPTed
  only inside a producer's transaction — ``Producer.send_acknowledgements_to_transaction(consumer)``
  accepts the poll's records (all, or those acknowledged ACCEPT) in it, and the transaction's
  commit makes its output visible and the records acknowledged at once; RELEASE and REJECT go
  as in explicit mode.

A record's acquisition lock runs on the broker (``share.record.lock.duration.ms``, 30 s by
default): a record not acknowledged by then goes to another member. What it must never do: I/O of
its own (the membership's and the fetcher's).

Example::

    from eoslog.client import ShareConsumer, AcknowledgeType

    c = ShareConsumer({"bootstrap.servers": "127.0.0.1:9092", "group.id": "workers",
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe(["jobs"])
    while True:
        for record in c.poll(1.0):
            c.acknowledge(record, AcknowledgeType.ACCEPT if handle(record) else AcknowledgeType.RELEASE)
        c.commit_sync()
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Mapping
from enum import IntEnum
from types import TracebackType
from typing import Any, Self

from eoslog.client.aio_client import AioClient
from eoslog.client.errors import IllegalStateError, KafkaError, KafkaTimeoutError
from eoslog.client.share.config import ShareConsumerConfig, share_consumer_config
from eoslog.client.share.fetcher import ShareFetcher, ShareRecord
from eoslog.client.share.membership import ShareMembership
from eoslog.client.sync import BlockingFacade
from eoslog.client.types import TopicPartition, TransactionIdentity

CommitCallback = Callable[[dict[TopicPartition, set[int]], KafkaError | None], object]


class AcknowledgeType(IntEnum):
    """How a record is acknowledged (KIP-932): ACCEPT (done with), RELEASE (hand it out again),
    REJECT (never hand it out again)."""

    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


class AIOShareConsumer:
    """An asyncio share consumer; ``await start()`` (or ``async with``) before use."""

    def __init__(self, settings: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.config: ShareConsumerConfig = share_consumer_config(settings, **kwargs)
        self._client: AioClient | None = None
        self._membership: ShareMembership | None = None
        self._fetcher: ShareFetcher | None = None
        self._wakeup: asyncio.Event | None = None
        self._delivered: dict[tuple[TopicPartition, int], ShareRecord] = {}  # the last poll's, unacknowledged
        self._txn_accepts: dict[TopicPartition, set[int]] = {}  # transactional mode: ACCEPTs for the transaction
        self._callback: CommitCallback | None = None
        self._results: dict[TopicPartition, KafkaError | None] = {}
        self._closed = False

    async def start(self) -> None:
        if self._client is not None:
            return
        client = self._client = AioClient.from_config(self.config, allow_auto_topic_creation=False)
        self._wakeup = asyncio.Event()
        client.add_listener(self._wake)
        client.start()
        self._membership = ShareMembership(self.config, client, self._wake)
        self._fetcher = ShareFetcher(self.config, client, self._wake)
        self._fetcher.member_id = self._membership.member_id
        self._fetcher.on_acknowledged.append(self._acknowledged)

    def _wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    def _parts(self) -> tuple[ShareMembership, ShareFetcher]:
        if self._closed:
            raise IllegalStateError("This share consumer has already been closed.")
        if self._membership is None or self._fetcher is None:
            raise IllegalStateError("the share consumer is not started: await start() first")
        return self._membership, self._fetcher

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    # -- subscription ---------------------------------------------------------------------------

    def subscribe(self, topics: str | Iterable[str]) -> None:
        names = (topics,) if isinstance(topics, str) else tuple(topics)
        if not names or any(not t for t in names):
            raise ValueError("topics must be non-empty names")
        membership, _ = self._parts()
        membership.subscribe(tuple(sorted(set(names))))

    def subscription(self) -> set[str]:
        membership, _ = self._parts()
        return set(membership.topics)

    def assignment(self) -> set[TopicPartition]:
        membership, _ = self._parts()
        return set(membership.assignment)

    # -- records ----------------------------------------------------------------------------------

    async def poll(self, timeout: float = 0.0) -> list[ShareRecord]:
        membership, fetcher = self._parts()
        if not membership.topics:
            raise IllegalStateError("Consumer is not subscribed to any topics.")
        if self._delivered or self._txn_accepts:
            if self.config.transactional:
                raise IllegalStateError("records from the previous poll have not been acknowledged: accept them "
                                        "in a transaction (Producer.send_acknowledgements_to_transaction), or "
                                        "RELEASE or REJECT them")
            if self.config.explicit:
                raise IllegalStateError(f"{len(self._delivered)} records from the previous poll have not been "
                                        "acknowledged")
            self._accept_delivered()
        deadline = time.monotonic() + timeout
        assert self._wakeup is not None
        while True:
            if membership.fatal is not None:
                raise membership.fatal
            if fetcher.buffered:
                return self._hand_out(fetcher)
            membership.resolve()
            fetcher.fetch(membership.assignment)
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            self._wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), left)

    def _hand_out(self, fetcher: ShareFetcher) -> list[ShareRecord]:
        out: list[ShareRecord] = []
        assigned = self._membership.assignment if self._membership is not None else frozenset()
        while fetcher.buffered and len(out) < self.config.max_poll_records:
            r = fetcher.buffered.popleft()
            if TopicPartition(r.topic, r.partition) in assigned:
                out.append(r)
        for r in out:
            self._delivered[(TopicPartition(r.topic, r.partition), r.offset)] = r
        return out

    def _accept_delivered(self) -> None:
        for (tp, offset) in list(self._delivered):
            self._queue(tp, offset, AcknowledgeType.ACCEPT)
        self._delivered.clear()

    def _queue(self, tp: TopicPartition, offset: int, kind: int) -> None:
        _, fetcher = self._parts()
        fetcher.pending.setdefault(tp, {})[offset] = int(kind)

    def acknowledge(self, record: ShareRecord, kind: AcknowledgeType | int = AcknowledgeType.ACCEPT) -> None:
        """Explicit mode: how the broker should treat ``record`` (sent with the next poll or commit)."""
        self.acknowledge_offset(record.topic, record.partition, record.offset, kind)

    def acknowledge_offset(self, topic: str, partition: int, offset: int,
                           kind: AcknowledgeType | int = AcknowledgeType.ACCEPT) -> None:
        if not self.config.explicit:
            raise IllegalStateError("acknowledge() needs share.acknowledgement.mode=explicit")
        if int(kind) not in (1, 2, 3):
            raise ValueError(f"unknown acknowledge type {kind}")
        tp = TopicPartition(topic, partition)
        if self._delivered.pop((tp, offset), None) is None:
            raise IllegalStateError(f"{topic}-{partition} offset {offset} is not a record the last poll returned "
                                    "that is still waiting for its acknowledgement")
        if self.config.transactional and int(kind) == AcknowledgeType.ACCEPT:
            self._txn_accepts.setdefault(tp, set()).add(offset)  # sent only inside a transaction
        else:
            self._queue(tp, offset, kind)

    # -- eoslog's extension: acknowledging inside a producer's transaction ------------------------

    async def acknowledge_in_transaction(self, transaction: TransactionIdentity, timeout: float | None = None) -> None:
        """Transactional mode: ACCEPT, inside ``transaction``, the records acknowledged ACCEPT since
        the last call and every record of the last poll not acknowledged otherwise; the
        transaction's commit makes them acknowledged, its abort hands them out again. Called by
        ``Producer.send_acknowledgements_to_transaction``; raises the first partition's error
        (the records of a refused partition are released)."""
        _, fetcher = self._parts()
        if not self.config.transactional:
            raise IllegalStateError("acknowledging in a transaction needs share.acknowledgement.mode=transactional")
        accepts, self._txn_accepts = self._txn_accepts, {}
        for (tp, offset) in self._delivered:
            accepts.setdefault(tp, set()).add(offset)
        self._delivered.clear()
        if not accepts:
            return
        timeout_s = timeout if timeout is not None else self.config.default_api_timeout_ms / 1000
        try:
            errors = await asyncio.wait_for(fetcher.acknowledge_in_transaction(accepts, transaction), timeout_s)
        except TimeoutError:
            errors = dict.fromkeys(accepts, KafkaTimeoutError("the acknowledgements in the transaction were not "
                                                              f"answered within {timeout_s} s"))
        failed = {tp: e for tp, e in errors.items() if e is not None}
        for tp in failed:
            for offset in accepts[tp]:
                self._queue(tp, offset, AcknowledgeType.RELEASE)  # not held by the transaction: hand them out again
        if failed:
            tp, error = next(iter(sorted(failed.items())))
            raise error

    # -- commits ----------------------------------------------------------------------------------

    def set_acknowledgement_commit_callback(self, callback: CommitCallback | None) -> None:
        self._callback = callback

    def _acknowledged(self, offsets: dict[TopicPartition, set[int]], error: KafkaError | None) -> None:
        for tp in offsets:
            self._results[tp] = error
        if self._callback is not None:
            self._callback(offsets, error)

    async def commit_sync(self, timeout: float | None = None) -> dict[TopicPartition, KafkaError | None]:
        """Send the acknowledgements made so far (implicit mode: the last poll's records, all
        ACCEPT) and wait for the brokers; the outcome per partition (None: acknowledged)."""
        _, fetcher = self._parts()
        if not self.config.explicit:
            self._accept_delivered()
        self._results = {}
        try:
            await fetcher.acknowledge(timeout_s=timeout if timeout is not None else
                                      self.config.default_api_timeout_ms / 1000)
        except TimeoutError:
            raise KafkaTimeoutError("commit_sync timed out waiting for the acknowledgements' answers") from None
        results, self._results = self._results, {}
        return results

    async def commit_async(self) -> None:
        """Send the acknowledgements made so far; their outcome goes to the commit callback."""
        _, fetcher = self._parts()
        if not self.config.explicit:
            self._accept_delivered()
        task = asyncio.get_running_loop().create_task(fetcher.acknowledge())
        task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)

    async def unsubscribe(self) -> None:
        membership, fetcher = self._parts()
        await self._finish(membership, fetcher, self.config.default_api_timeout_ms / 1000)
        membership.topics = ()

    async def _finish(self, membership: ShareMembership, fetcher: ShareFetcher, timeout_s: float) -> None:
        if not self.config.explicit:
            self._accept_delivered()
        with contextlib.suppress(TimeoutError, KafkaError):
            await fetcher.acknowledge(final=True, timeout_s=timeout_s)
        await membership.leave(timeout_s)

    async def close(self, timeout: float | None = None) -> None:
        """Send the pending acknowledgements, close the share sessions (what is still acquired is
        released at once) and leave the group."""
        if self._closed or self._client is None:
            self._closed = True
            return
        timeout_s = self.config.default_api_timeout_ms / 1000 if timeout is None else timeout
        membership, fetcher = self._parts()
        try:
            await self._finish(membership, fetcher, timeout_s)
        finally:
            self._closed = True
            await fetcher.close()
            await self._client.close()


class ShareConsumer(BlockingFacade):
    """The blocking facade: an AIOShareConsumer on an event loop in a thread of its own (which
    also heartbeats). Not for several threads at once; the commit callback runs on that loop's
    thread."""

    def __init__(self, settings: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self._aio = AIOShareConsumer(settings, **kwargs)
        self.config = self._aio.config
        self._start_loop(f"eoslog-share-consumer-thread | {self.config.client_id}",
                         "a blocking share consumer call from the consumer's own thread would deadlock",
                         self._aio.start())

    def subscribe(self, topics: str | Iterable[str]) -> None:
        names = [topics] if isinstance(topics, str) else list(topics)
        self._run(lambda: self._aio.subscribe(names))

    def subscription(self) -> set[str]:
        return self._run(self._aio.subscription)

    def assignment(self) -> set[TopicPartition]:
        return self._run(self._aio.assignment)

    def unsubscribe(self) -> None:
        self._call(self._aio.unsubscribe())

    def poll(self, timeout: float = 0.0) -> list[ShareRecord]:
        return self._call(self._aio.poll(timeout))

    def acknowledge(self, record: ShareRecord, kind: AcknowledgeType | int = AcknowledgeType.ACCEPT) -> None:
        self._run(lambda: self._aio.acknowledge(record, kind))

    def acknowledge_offset(self, topic: str, partition: int, offset: int,
                           kind: AcknowledgeType | int = AcknowledgeType.ACCEPT) -> None:
        self._run(lambda: self._aio.acknowledge_offset(topic, partition, offset, kind))

    def commit_sync(self, timeout: float | None = None) -> dict[TopicPartition, KafkaError | None]:
        return self._call(self._aio.commit_sync(timeout))

    def acknowledge_in_transaction(self, transaction: TransactionIdentity, timeout: float | None = None) -> None:
        self._call(self._aio.acknowledge_in_transaction(transaction, timeout))

    def commit_async(self) -> None:
        self._call(self._aio.commit_async())

    def set_acknowledgement_commit_callback(self, callback: CommitCallback | None) -> None:
        self._run(lambda: self._aio.set_acknowledgement_commit_callback(callback))

    def close(self, timeout: float | None = None) -> None:
        self._close_once(lambda: self._call(self._aio.close(timeout)))

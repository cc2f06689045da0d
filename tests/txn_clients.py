"""Transactional producers and read_committed group consumers of librdkafka, kafka-python,
aiokafka and eoslog.client behind one small interface, for tests that drive them through
broker faults (issue 13, test 4). Each call either returns or raises the client's own error;
``Writer.abortable`` says whether an error left the transaction for sure uncommitted.
``WedgedCall``: a call that did not return in CALL_TIMEOUT_S, which the caller gives up on
as an application must (a new producer instance then fences the wedged one)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

CONFLUENT, KAFKA_PYTHON, AIOKAFKA, EOSLOG = "confluent", "kafka-python", "aiokafka", "eoslog"
CALL_TIMEOUT_S = 60.0
T = TypeVar("T")
OnAssign = Callable[[list[int]], None]


class WedgedCall(TimeoutError):
    pass


class Writer(Protocol):
    def transaction(self, records: list[tuple[int, bytes]], commit: bool) -> None:
        """Begin, send each (partition, value) and wait until they are written, then
        commit or abort."""

    def abort(self) -> None: ...
    def abortable(self, exc: BaseException) -> bool: ...
    def close(self) -> None: ...


class Reader(Protocol):
    def poll(self) -> list[tuple[int, int, bytes]]:
        """(partition, offset, value) of the records polled; may be empty."""

    def close(self) -> None: ...


class _Loop:
    """aiokafka's coroutines, run on an event loop thread of their own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(asyncio.wait_for(coro, CALL_TIMEOUT_S), self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)


class _Confluent:
    def __init__(self, bootstrap: str, topic: str, transactional_id: str) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.p = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "acks": "all",
                           "linger.ms": 5})
        self.p.init_transactions(CALL_TIMEOUT_S)

    def transaction(self, records: list[tuple[int, bytes]], commit: bool) -> None:
        self.p.begin_transaction()
        for partition, value in records:
            self.p.produce(self.topic, value, partition=partition)
        if self.p.flush(CALL_TIMEOUT_S):  # an abort is of records in the log, not purged ones
            raise WedgedCall("librdkafka's flush did not complete")
        (self.p.commit_transaction if commit else self.p.abort_transaction)(CALL_TIMEOUT_S)

    def abort(self) -> None:
        self.p.abort_transaction(CALL_TIMEOUT_S)

    def abortable(self, exc: BaseException) -> bool:
        from confluent_kafka import KafkaException

        return isinstance(exc, KafkaException) and bool(exc.args) and exc.args[0].txn_requires_abort()

    def close(self) -> None:
        self.p.flush(0)


class _KafkaPython:
    def __init__(self, bootstrap: str, topic: str, transactional_id: str) -> None:
        from kafka import KafkaProducer

        self.topic = topic
        self.p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id, acks="all",
                               enable_idempotence=True, linger_ms=5, max_block_ms=int(CALL_TIMEOUT_S * 1000))
        self.p.init_transactions()

    def transaction(self, records: list[tuple[int, bytes]], commit: bool) -> None:
        self.p.begin_transaction()
        for partition, value in records:
            self.p.send(self.topic, value, partition=partition)
        self.p.flush(CALL_TIMEOUT_S)  # an abort is of records in the log
        self._end(commit)

    def _end(self, commit: bool) -> None:
        """KafkaProducer.commit_transaction/abort_transaction with a timeout: kafka-python
        3.0.12's Sender drops a transactional request whose send to the coordinator raised
        (the coordinator just died) without re-enqueueing it, and the call waits forever."""
        tm = self.p._transaction_manager
        result = tm.begin_commit() if commit else tm.begin_abort()
        self.p._sender.wakeup()
        if not result.wait(int(CALL_TIMEOUT_S * 1000)):
            raise WedgedCall(f"kafka-python's {'commit' if commit else 'abort'} did not complete")

    def abort(self) -> None:
        self._end(False)

    def abortable(self, exc: BaseException) -> bool:
        tm = self.p._transaction_manager
        return tm is not None and tm.has_abortable_error() and not tm.has_fatal_error()

    def close(self) -> None:
        from kafka.errors import KafkaTimeoutError

        try:
            self.p.close(0)
        except KafkaTimeoutError:  # its close(0) flushes first, and raises on what is left
            self.p._sender.force_close()


class _AioKafka:
    def __init__(self, bootstrap: str, topic: str, transactional_id: str) -> None:
        from aiokafka import AIOKafkaProducer

        self.topic = topic
        self.loop = _Loop()

        async def start() -> AIOKafkaProducer:  # aiokafka binds the running loop
            p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id, acks="all",
                                 enable_idempotence=True, linger_ms=5)
            await p.start()  # InitProducerId
            return p

        self.p = self.loop.run(start())

    def transaction(self, records: list[tuple[int, bytes]], commit: bool) -> None:
        async def run() -> None:
            await self.p.begin_transaction()
            sent = [await self.p.send(self.topic, value, partition=partition) for partition, value in records]
            await asyncio.gather(*sent)  # an abort is of records in the log
            await (self.p.commit_transaction() if commit else self.p.abort_transaction())

        self.loop.run(run())

    def abort(self) -> None:
        self.loop.run(self.p.abort_transaction())

    def abortable(self, exc: BaseException) -> bool:
        import aiokafka.errors as e

        tm = self.p._txn_manager
        return isinstance(exc, e.KafkaError) and not exc.retriable and not tm.is_fatal_error()

    def close(self) -> None:
        try:
            self.loop.run(self.p.stop())
        finally:
            self.loop.stop()


class _Eoslog:
    def __init__(self, bootstrap: str, topic: str, transactional_id: str) -> None:
        from eoslog.client import Producer

        self.topic = topic
        self.p = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
        self.p.init_transactions(CALL_TIMEOUT_S)

    def transaction(self, records: list[tuple[int, bytes]], commit: bool) -> None:
        self.p.begin_transaction()
        for partition, value in records:
            self.p.send(self.topic, value, partition=partition)
        self.p.flush(CALL_TIMEOUT_S)  # an abort is of records in the log
        (self.p.commit_transaction if commit else self.p.abort_transaction)(CALL_TIMEOUT_S)

    def abort(self) -> None:
        self.p.abort_transaction(CALL_TIMEOUT_S)

    def abortable(self, exc: BaseException) -> bool:
        from eoslog.client.errors import KafkaError

        return isinstance(exc, KafkaError) and exc.txn_requires_abort and not exc.fatal

    def close(self) -> None:
        self.p.close(0)


WRITERS: dict[str, Callable[[str, str, str], Writer]] = {
    CONFLUENT: _Confluent, KAFKA_PYTHON: _KafkaPython, AIOKAFKA: _AioKafka, EOSLOG: _Eoslog,
}


def writer(client: str, bootstrap: str, topic: str, transactional_id: str) -> Writer:
    """A transactional producer of ``client`` whose InitProducerId is done."""
    return WRITERS[client](bootstrap, topic, transactional_id)


def reader(client: str, bootstrap: str, topic: str, group: str, on_assign: OnAssign) -> Reader:
    """A read_committed member of ``group`` subscribed to ``topic`` (offsets auto-committed
    each second); ``on_assign`` gets the partitions of each assignment."""
    if client == CONFLUENT:
        return _ConfluentReader(bootstrap, topic, group, on_assign)
    if client == KAFKA_PYTHON:
        return _KafkaPythonReader(bootstrap, topic, group, on_assign)
    if client == AIOKAFKA:
        return _AioKafkaReader(bootstrap, topic, group, on_assign)
    return _EoslogReader(bootstrap, topic, group, on_assign)


class _ConfluentReader:
    def __init__(self, bootstrap: str, topic: str, group: str, on_assign: OnAssign) -> None:
        from confluent_kafka import Consumer

        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                           "auto.offset.reset": "earliest", "auto.commit.interval.ms": 1000})
        self.c.subscribe([topic], on_assign=lambda _c, parts: on_assign([p.partition for p in parts]))

    def poll(self) -> list[tuple[int, int, bytes]]:
        from confluent_kafka import KafkaException

        out = []
        for m in self.c.consume(500, 0.5):
            if m.error() is not None:
                if m.error().retriable():
                    continue
                raise KafkaException(m.error())
            out.append((int(m.partition() or 0), int(m.offset() or 0), m.value() or b""))
        return out

    def close(self) -> None:
        self.c.close()


def _listener(on_assign: OnAssign, base: type) -> Any:
    class Listener(base):  # type: ignore[misc,valid-type]
        def on_partitions_revoked(self, revoked: Any) -> None:
            pass

        def on_partitions_assigned(self, assigned: Any) -> None:
            on_assign([tp.partition for tp in assigned])

    return Listener()


class _KafkaPythonReader:
    def __init__(self, bootstrap: str, topic: str, group: str, on_assign: OnAssign) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer

        self.c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, isolation_level="read_committed",
                               auto_offset_reset="earliest", auto_commit_interval_ms=1000)
        self.c.subscribe([topic], listener=_listener(on_assign, ConsumerRebalanceListener))

    def poll(self) -> list[tuple[int, int, bytes]]:
        return [(m.partition, m.offset, m.value) for batch in self.c.poll(timeout_ms=500).values() for m in batch]

    def close(self) -> None:
        self.c.close()


class _AioKafkaReader:
    def __init__(self, bootstrap: str, topic: str, group: str, on_assign: OnAssign) -> None:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

        self.loop = _Loop()

        async def start() -> AIOKafkaConsumer:
            c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, isolation_level="read_committed",
                                 auto_offset_reset="earliest", auto_commit_interval_ms=1000)
            await c.start()
            c.subscribe([topic], listener=_listener(on_assign, ConsumerRebalanceListener))
            return c

        self.c = self.loop.run(start())

    def poll(self) -> list[tuple[int, int, bytes]]:
        batches = self.loop.run(self.c.getmany(timeout_ms=500))
        return [(m.partition, m.offset, m.value) for batch in batches.values() for m in batch]

    def close(self) -> None:
        try:
            self.loop.run(self.c.stop())
        finally:
            self.loop.stop()


class _EoslogReader:
    def __init__(self, bootstrap: str, topic: str, group: str, on_assign: OnAssign) -> None:
        from eoslog.client import Consumer

        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                           "auto.offset.reset": "earliest", "auto.commit.interval.ms": 1000})
        self.c.subscribe([topic], on_assign=lambda _c, parts: on_assign([tp.partition for tp in parts]))

    def poll(self) -> list[tuple[int, int, bytes]]:
        return [(r.partition, r.offset, r.value or b"") for r in self.c.poll(0.5)]

    def close(self) -> None:
        self.c.close()

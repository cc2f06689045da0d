"""Transactional (or only idempotent) producers and read_committed group consumers of
librdkafka, kafka-python, aiokafka and eoslog.client behind one small interface, for tests
that drive them through broker faults (issue 13, test 4) or over every security protocol
(issue 15, test 1). Each call either returns or raises the client's own error;
``Writer.abortable`` says whether an error left the transaction for sure uncommitted.
``WedgedCall``: a call that did not return in CALL_TIMEOUT_S (or whose request kafka-python
has dropped, see ``_KafkaPython._wait``), which the caller gives up on as an application must
(a new producer instance then fences the wedged one).

``settings``: security settings in librdkafka's names (``security.protocol``, ``ssl.ca.location``,
``ssl.certificate.location``, ``ssl.key.location``, ``sasl.mechanism``, ``sasl.username``,
``sasl.password``), which librdkafka and eoslog.client take as they are and ``_python_names``
translates for kafka-python and aiokafka."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

from support.kafka_python_drops import DropWatch, request_dropped

CONFLUENT, KAFKA_PYTHON, AIOKAFKA, EOSLOG = "confluent", "kafka-python", "aiokafka", "eoslog"
CALL_TIMEOUT_S = 60.0
T = TypeVar("T")
OnAssign = Callable[[list[int]], None]


class WedgedCall(TimeoutError):
    pass


class Writer(Protocol):
    def send(self, records: list[tuple[int, bytes]]) -> None:
        """Send each (partition, value) outside any transaction and wait until all are written."""

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


Settings = dict[str, Any]


def _python_names(settings: Settings, aiokafka: bool = False) -> dict[str, Any]:
    """kafka-python's / aiokafka's keyword arguments for librdkafka-named security settings
    (aiokafka takes an SSLContext where kafka-python takes the files)."""
    out: dict[str, Any] = {}
    protocol = settings.get("security.protocol", "PLAINTEXT")
    out["security_protocol"] = protocol
    if protocol in ("SSL", "SASL_SSL"):
        files = {"cafile": settings.get("ssl.ca.location"), "certfile": settings.get("ssl.certificate.location"),
                 "keyfile": settings.get("ssl.key.location")}
        if aiokafka:
            from aiokafka.helpers import create_ssl_context

            out["ssl_context"] = create_ssl_context(**files)
        else:
            out.update({f"ssl_{k}": v for k, v in files.items() if v})
    if protocol.startswith("SASL"):
        out.update(sasl_mechanism=settings["sasl.mechanism"], sasl_plain_username=settings["sasl.username"],
                   sasl_plain_password=settings["sasl.password"])
    return out


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
    def __init__(self, bootstrap: str, topic: str, transactional_id: str | None, settings: Settings) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        txn = {"transactional.id": transactional_id} if transactional_id else {}
        self.p = Producer({**settings, "bootstrap.servers": bootstrap, **txn, "enable.idempotence": True,
                           "acks": "all", "linger.ms": 5})
        if transactional_id:
            self.p.init_transactions(CALL_TIMEOUT_S)

    def send(self, records: list[tuple[int, bytes]]) -> None:
        from confluent_kafka import KafkaException

        errors = []
        for partition, value in records:
            self.p.produce(self.topic, value, partition=partition, on_delivery=lambda e, _m: errors.append(e))
        if self.p.flush(CALL_TIMEOUT_S):
            raise WedgedCall("librdkafka's flush did not complete")
        for e in errors:
            if e is not None:
                raise KafkaException(e)

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
    def __init__(self, bootstrap: str, topic: str, transactional_id: str | None, settings: Settings) -> None:
        from kafka import KafkaProducer

        self.topic = topic
        self.p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id, acks="all",
                               enable_idempotence=True, linger_ms=5, max_block_ms=int(CALL_TIMEOUT_S * 1000),
                               **_python_names(settings))
        if transactional_id:
            try:
                self._init_transactions()
            except BaseException:
                self.close()
                raise

    def _init_transactions(self) -> None:
        """KafkaProducer.init_transactions, given up as ``_wait`` does."""
        result = self.p._transaction_manager.initialize_transactions()
        self.p._init_transactions_result = result  # what init_transactions() would wait for
        self.p._sender.wakeup()
        self._wait(lambda timeout_s: bool(result.wait(int(timeout_s * 1000))), "init_transactions",
                   awaits_coordinator=lambda: not result.is_done)

    def send(self, records: list[tuple[int, bytes]]) -> None:
        for future in [self.p.send(self.topic, value, partition=partition) for partition, value in records]:
            future.get(CALL_TIMEOUT_S)

    def transaction(self, records: list[tuple[int, bytes]], commit: bool) -> None:
        self.p.begin_transaction()
        for partition, value in records:
            self.p.send(self.topic, value, partition=partition)
        self._wait(self._flushed, "flush")  # an abort is of records in the log
        self._end(commit)

    def _flushed(self, timeout_s: float) -> bool:
        from kafka.errors import KafkaTimeoutError

        try:
            self.p.flush(timeout_s)
        except KafkaTimeoutError:
            return False
        return True

    def _end(self, commit: bool) -> None:
        """KafkaProducer.commit_transaction/abort_transaction, given up as ``_wait`` does."""
        tm = self.p._transaction_manager
        result = tm.begin_commit() if commit else tm.begin_abort()
        self.p._sender.wakeup()
        self._wait(lambda timeout_s: bool(result.wait(int(timeout_s * 1000))), "commit" if commit else "abort",
                   awaits_coordinator=lambda: not result.is_done)

    def _wait(self, done: Callable[[float], bool], what: str, awaits_coordinator: Callable[[], bool] | None = None,
              ) -> None:
        """Poll ``done(timeout_s)`` for up to CALL_TIMEOUT_S, given up sooner when kafka-python
        dropped the request it waits for (see kafka_python_drops): giving up at 60 s cost the
        cluster test ~55 s per wedge, and the next init_transactions wedged as often."""
        deadline = time.monotonic() + CALL_TIMEOUT_S
        watch = DropWatch()
        while not done(0.2):
            if watch.lasting(request_dropped(self.p, bool(awaits_coordinator and awaits_coordinator()))):
                raise WedgedCall(f"kafka-python dropped the request its {what} waits for")
            if time.monotonic() > deadline:
                raise WedgedCall(f"kafka-python's {what} did not complete")

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
    def __init__(self, bootstrap: str, topic: str, transactional_id: str | None, settings: Settings) -> None:
        from aiokafka import AIOKafkaProducer

        self.topic = topic
        self.loop = _Loop()

        async def start() -> AIOKafkaProducer:  # aiokafka binds the running loop
            p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id, acks="all",
                                 enable_idempotence=True, linger_ms=5, **_python_names(settings, aiokafka=True))
            await p.start()  # InitProducerId
            return p

        self.p = self.loop.run(start())

    def send(self, records: list[tuple[int, bytes]]) -> None:
        async def run() -> None:
            await asyncio.gather(*[await self.p.send(self.topic, value, partition=partition)
                                   for partition, value in records])

        self.loop.run(run())

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
    def __init__(self, bootstrap: str, topic: str, transactional_id: str | None, settings: Settings) -> None:
        from eoslog.client import Producer

        self.topic = topic
        txn = {"transactional.id": transactional_id} if transactional_id else {}
        self.p = Producer({**settings, "bootstrap.servers": bootstrap, **txn, "enable.idempotence": True})
        if transactional_id:
            self.p.init_transactions(CALL_TIMEOUT_S)

    def send(self, records: list[tuple[int, bytes]]) -> None:
        for future in [self.p.send(self.topic, value, partition=partition) for partition, value in records]:
            future.result(CALL_TIMEOUT_S)

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


WRITERS: dict[str, Callable[[str, str, str | None, Settings], Writer]] = {
    CONFLUENT: _Confluent, KAFKA_PYTHON: _KafkaPython, AIOKAFKA: _AioKafka, EOSLOG: _Eoslog,
}


def writer(client: str, bootstrap: str, topic: str, transactional_id: str | None,
           settings: Settings | None = None) -> Writer:
    """A producer of ``client`` with idempotence on: transactional, its InitProducerId done,
    when ``transactional_id`` is given (else only ``send`` serves)."""
    return WRITERS[client](bootstrap, topic, transactional_id, settings or {})


def reader(client: str, bootstrap: str, topic: str, group: str, on_assign: OnAssign,
           settings: Settings | None = None) -> Reader:
    """A read_committed member of ``group`` subscribed to ``topic`` (offsets auto-committed
    each second); ``on_assign`` gets the partitions of each assignment."""
    return READERS[client](bootstrap, topic, group, on_assign, settings or {})


class _ConfluentReader:
    def __init__(self, bootstrap: str, topic: str, group: str, on_assign: OnAssign, settings: Settings) -> None:
        from confluent_kafka import Consumer

        self.c = Consumer({**settings, "bootstrap.servers": bootstrap, "group.id": group,
                           "isolation.level": "read_committed",
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
    def __init__(self, bootstrap: str, topic: str, group: str, on_assign: OnAssign, settings: Settings) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer

        self.c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, isolation_level="read_committed",
                               auto_offset_reset="earliest", auto_commit_interval_ms=1000, **_python_names(settings))
        self.c.subscribe([topic], listener=_listener(on_assign, ConsumerRebalanceListener))

    def poll(self) -> list[tuple[int, int, bytes]]:
        from kafka.errors import KafkaError

        try:
            polled = self.c.poll(timeout_ms=500)
        except KafkaError as e:
            # kafka-python 3.0.12 lets a retriable error out of poll: the metadata refresh its
            # coordinator lookup waits for fails (KafkaConnectionError) while that node shuts
            # down; only a timeout is caught there. An application polls again, as the
            # librdkafka reader above does on a retriable error.
            if e.retriable:
                return []
            raise
        return [(m.partition, m.offset, m.value) for batch in polled.values() for m in batch]

    def close(self) -> None:
        self.c.close()


class _AioKafkaReader:
    def __init__(self, bootstrap: str, topic: str, group: str, on_assign: OnAssign, settings: Settings) -> None:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

        self.loop = _Loop()

        async def start() -> AIOKafkaConsumer:
            c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, isolation_level="read_committed",
                                 auto_offset_reset="earliest", auto_commit_interval_ms=1000,
                                 **_python_names(settings, aiokafka=True))
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
    def __init__(self, bootstrap: str, topic: str, group: str, on_assign: OnAssign, settings: Settings) -> None:
        from eoslog.client import Consumer

        self.c = Consumer({**settings, "bootstrap.servers": bootstrap, "group.id": group,
                           "isolation.level": "read_committed",
                           "auto.offset.reset": "earliest", "auto.commit.interval.ms": 1000})
        self.c.subscribe([topic], on_assign=lambda _c, parts: on_assign([tp.partition for tp in parts]))

    def poll(self) -> list[tuple[int, int, bytes]]:
        return [(r.partition, r.offset, r.value or b"") for r in self.c.poll(0.5)]

    def close(self) -> None:
        self.c.close()


READERS: dict[str, Callable[[str, str, str, OnAssign, Settings], Reader]] = {
    CONFLUENT: _ConfluentReader, KAFKA_PYTHON: _KafkaPythonReader, AIOKAFKA: _AioKafkaReader, EOSLOG: _EoslogReader,
}

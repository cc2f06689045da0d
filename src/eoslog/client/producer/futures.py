"""What ``send()`` returns: a record's future, backed by its batch's result.

What it owns: ``ProduceResult``, one per batch (Java's ProduceRequestResult): the base
offset or the error, completed once by the sender; and ``RecordFuture``, one small object
per record (Java's FutureRecordMetadata): its batch's result and its index in the batch.
A record's offset is the batch's base offset plus that index, so completing a batch costs
the same whatever its record count. A batch split after MESSAGE_TOO_LARGE completes with
``split`` set; its records' futures follow that link to the new batches' results.

Both styles of waiting work: ``result(timeout)`` from any thread (a threading.Event made
only when somebody waits), and ``await`` in the producer's event loop (an asyncio future
made only when somebody awaits). Callbacks run in the producer's I/O thread, after the
batch completes: keep them short. What it must never do: know about batches' bytes.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Generator
from typing import Any, NamedTuple

from eoslog.client.errors import KafkaTimeoutError

# Guards the hand-over between a completing batch and a thread starting to wait on it.
_LOCK = threading.Lock()
NO_TIMESTAMP = -1


class RecordMetadata(NamedTuple):
    topic: str
    partition: int
    offset: int  # -1 when acks=0, or when the broker only said DUPLICATE_SEQUENCE_NUMBER
    timestamp: int  # ms: the broker's LogAppendTime when the topic uses it, else the record's


DeliveryCallback = Callable[[RecordMetadata | None, BaseException | None], None]


class ProduceResult:
    """The outcome of one batch; completed once, in the sender's thread."""

    __slots__ = ("_aio", "_callbacks", "_event", "base_offset", "done", "error", "log_append_time",
                 "partition", "record_errors", "split", "topic")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.base_offset = -1
        self.log_append_time = NO_TIMESTAMP
        self.error: BaseException | None = None
        # KIP-467: the records the broker named, each with its own error; ``error`` is the others'.
        self.record_errors: dict[int, BaseException] | None = None
        self.done = False
        # (first record index, the new batch's result) after a split, in index order.
        self.split: list[tuple[int, ProduceResult]] | None = None
        self._event: threading.Event | None = None
        self._aio: asyncio.Future[None] | None = None
        self._callbacks: list[tuple[int, int, DeliveryCallback]] | None = None

    def complete(self, base_offset: int, log_append_time: int = NO_TIMESTAMP,
                 error: BaseException | None = None, record_errors: dict[int, BaseException] | None = None) -> None:
        with _LOCK:
            if self.done:
                return
            self.base_offset = base_offset
            self.log_append_time = log_append_time
            self.error = error
            self.record_errors = record_errors
            self.done = True
            event, callbacks = self._event, self._callbacks
            self._callbacks = None
        if event is not None:
            event.set()
        aio = self._aio
        if aio is not None and not aio.done():
            aio.set_result(None)
        if callbacks:
            for index, timestamp, callback in callbacks:
                self._run_callback(index, timestamp, callback)

    def complete_split(self, parts: list[tuple[int, ProduceResult]]) -> None:
        """This batch was split: its records now live in ``parts`` (first index, result)."""
        with _LOCK:
            self.split = parts
            callbacks, self._callbacks = self._callbacks, None
        for index, timestamp, callback in callbacks or ():
            result, i = self._locate(index)
            result.add_callback(i, timestamp, callback)
        self.complete(-1)

    def _locate(self, index: int) -> tuple[ProduceResult, int]:
        result: ProduceResult = self
        while result.split is not None:
            start, part = result.split[0]
            for first, candidate in result.split:
                if first > index:
                    break
                start, part = first, candidate
            index -= start
            result = part
        return result, index

    def add_callback(self, index: int, timestamp: int, callback: DeliveryCallback) -> None:
        with _LOCK:
            if not self.done:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append((index, timestamp, callback))
                return
        if self.split is not None:
            result, i = self._locate(index)
            result.add_callback(i, timestamp, callback)
        else:
            self._run_callback(index, timestamp, callback)

    def error_of(self, index: int) -> BaseException | None:
        """The error of the record at ``index``: its own (KIP-467), else the batch's."""
        if self.record_errors is not None and index in self.record_errors:
            return self.record_errors[index]
        return self.error

    def _run_callback(self, index: int, timestamp: int, callback: DeliveryCallback) -> None:
        error = self.error_of(index)
        if error is not None:
            callback(None, error)
        else:
            callback(self.metadata(index, timestamp), None)

    def metadata(self, index: int, timestamp: int) -> RecordMetadata:
        offset = self.base_offset + index if self.base_offset >= 0 else -1
        ts = self.log_append_time if self.log_append_time != NO_TIMESTAMP else timestamp
        return RecordMetadata(self.topic, self.partition, offset, ts)

    def wait(self, timeout: float | None) -> bool:
        """Block the calling thread until done; False on timeout."""
        if self.done:
            return True
        with _LOCK:
            if self.done:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)

    def aio_wait(self) -> asyncio.Future[None]:
        """An asyncio future of completion, in the running loop (the producer's)."""
        if self._aio is None:
            self._aio = asyncio.get_running_loop().create_future()
            if self.done:
                self._aio.set_result(None)
        return self._aio


class RecordFuture:
    """The future of one sent record: ``result(timeout)``, ``await``, callbacks."""

    __slots__ = ("_index", "_result", "timestamp")

    def __init__(self, result: ProduceResult, index: int, timestamp: int) -> None:
        self._result = result
        self._index = index
        self.timestamp = timestamp

    def _final(self) -> tuple[ProduceResult, int]:
        return self._result._locate(self._index)

    def done(self) -> bool:
        result, _ = self._final()
        return result.done

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """The record's metadata; raises the delivery error, or KafkaTimeoutError."""
        result, index = self._result, self._index
        while True:
            if not result.wait(timeout):
                raise KafkaTimeoutError(f"record not acknowledged within {timeout}s")
            if result.split is None:
                break
            result, index = result._locate(index)
        error = result.error_of(index)
        if error is not None:
            raise error
        return result.metadata(index, self.timestamp)

    get = result  # kafka-python's spelling

    def exception(self, timeout: float | None = None) -> BaseException | None:
        try:
            self.result(timeout)
        except KafkaTimeoutError:
            raise
        except BaseException as e:
            return e
        return None

    def add_done_callback(self, callback: DeliveryCallback) -> None:
        """``callback(metadata, None)`` on success, ``callback(None, error)`` on failure."""
        self._result.add_callback(self._index, self.timestamp, callback)

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        result, index = self._result, self._index
        while True:
            if not result.done:
                yield from result.aio_wait().__await__()
            if result.split is None:
                break
            result, index = result._locate(index)
        error = result.error_of(index)
        if error is not None:
            raise error
        return result.metadata(index, self.timestamp)

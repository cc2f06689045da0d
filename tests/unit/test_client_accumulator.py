"""RecordAccumulator: batching, linger, buffer.memory, draining by broker and request size,
retries back at the front in sequence order, delivery timeouts. Time is passed in, so
nothing sleeps except the one test of blocking on buffer.memory."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from eoslog.client.cluster import ClusterMetadata
from eoslog.client.producer.accumulator import NEED_MEMORY, NEW_BATCH, RecordAccumulator
from eoslog.client.producer.batch import ProducerBatch, encode_headers
from eoslog.client.producer.futures import RecordFuture
from eoslog.client.producer.transaction_manager import ProducerIdAndEpoch, State, TransactionManager

NO_HEADERS = encode_headers(())


def cluster(leaders: dict[str, list[int]]) -> ClusterMetadata:
    c = ClusterMetadata([("127.0.0.1", 9092)])
    response = SimpleNamespace(
        brokers=[SimpleNamespace(node_id=n, host="127.0.0.1", port=9092 + n) for n in (0, 1)],
        cluster_id="c", controller_id=0,
        topics=[SimpleNamespace(name=t, error_code=0, partitions=[
            SimpleNamespace(partition_index=p, error_code=0, leader_id=leader, leader_epoch=0)
            for p, leader in enumerate(ls)]) for t, ls in leaders.items()],
    )
    c.update(response)
    return c


def acc(**kw: Any) -> RecordAccumulator:
    settings: dict[str, Any] = dict(batch_size=1000, buffer_memory=100_000, linger_ms=10, retry_backoff_ms=100,
                                    delivery_timeout_ms=5000)
    settings.update(kw)
    return RecordAccumulator(**settings)


def append(a: RecordAccumulator, topic: str = "t", partition: int = 0, value: bytes = b"v" * 100,
           sticky: bool = False) -> Any:
    return a.append(topic, partition, 0, None, value, NO_HEADERS, len(value) + 21, sticky)


def test_records_fill_one_batch_per_partition_until_batch_size() -> None:
    a = acc()
    futures = [append(a) for _ in range(20)]
    assert all(isinstance(f, RecordFuture) for f in futures)
    dq = a._topics["t"][0]
    assert len(dq) == 3 and dq[0].full and not dq[-1].full
    assert sum(b.count for b in dq) == 20 and all(len(b.buf) <= 1000 for b in dq)


def test_linger_decides_readiness_unless_a_batch_is_full() -> None:
    c = cluster({"t": [0, 1]})
    a = acc()
    append(a, partition=0)
    created = a._topics["t"][0][0].created
    nodes, next_check, unknown = a.ready(c, created + 0.004)
    assert nodes == set() and next_check == pytest.approx(0.006) and not unknown
    # Past linger by a margin: (created + 0.010) - created can round to just under 0.010.
    assert a.ready(c, created + 0.0101)[0] == {0}
    for _ in range(10):
        append(a, partition=1)  # fills a batch: ready at once
    assert a.ready(c, created)[0] == {1}


def test_flush_makes_everything_ready() -> None:
    c = cluster({"t": [0]})
    a = acc(linger_ms=60000)
    append(a)
    now = a._topics["t"][0][0].created
    assert a.ready(c, now)[0] == set()
    a.begin_flush()
    assert a.ready(c, now)[0] == {0}
    a.end_flush()


def test_unknown_leader_is_reported() -> None:
    c = cluster({"t": [-1]})
    a = acc()
    append(a)
    assert a.ready(c, time.monotonic() + 1)[2] is True


def test_drain_takes_one_batch_per_partition_up_to_the_request_size() -> None:
    c = cluster({"t": [0, 0, 0, 1]})
    a = acc()
    for p in range(4):
        for _ in range(20):
            append(a, partition=p)  # three batches each
    drained = a.drain(c, {0, 1}, 2500, time.monotonic())
    assert [b.partition for b in drained[1]] == [3]
    assert len(drained[0]) == 2  # a third ~1000-byte batch would pass 2500 bytes
    assert len({b.partition for b in drained[0]}) == 2
    assert all(b.wire is not None for bs in drained.values() for b in bs)  # closed on the way out
    # The next drain starts after the last partition served, so none starves.
    second = a.drain(c, {0}, 2500, time.monotonic())
    assert {b.partition for b in second[0]} != {b.partition for b in drained[0]}


def test_a_batch_larger_than_the_request_size_goes_alone() -> None:
    c = cluster({"t": [0, 0]})
    a = acc(batch_size=10_000)
    append(a, partition=0, value=b"x" * 5000)
    append(a, partition=1, value=b"x" * 5000)
    assert len(a.drain(c, {0}, 1000, time.monotonic())[0]) == 1


def test_buffer_memory_is_reserved_per_batch_and_returned_on_completion() -> None:
    a = acc(buffer_memory=2500)
    append(a, partition=0)
    append(a, partition=1)
    assert append(a, partition=2) is NEED_MEMORY
    batch = a._topics["t"][0].popleft()
    a.deallocate(batch)
    assert isinstance(append(a, partition=2), RecordFuture)


def test_a_memory_waiter_is_told_when_memory_returns_and_makes_batches_sendable() -> None:
    a = acc(buffer_memory=1500)
    append(a, partition=0)
    assert not a.has_room(121)
    told: list[bool] = []
    listener = lambda: told.append(a.has_room(121))  # noqa: E731
    a.add_memory_listener(listener)
    created = a._topics["t"][0][0].created  # within linger: only exhausted memory makes it sendable
    assert a.ready(cluster({"t": [0, 1]}), created)[0] == {0}
    batch = a._topics["t"][0].popleft()
    a.deallocate(batch)
    assert told == [True]
    a.remove_memory_listener(listener)
    assert isinstance(append(a, partition=1), RecordFuture)


def test_sticky_append_refuses_to_open_a_second_batch() -> None:
    a = acc()
    results = [append(a, sticky=True) for _ in range(12)]
    assert NEW_BATCH in results and len(a._topics["t"][0]) == 1


def test_retries_go_back_to_the_front_in_sequence_order() -> None:
    tm = TransactionManager(transactional_id=None)
    tm.state = State.READY
    tm.producer = ProducerIdAndEpoch(1, 0)
    c = cluster({"t": [0]})
    a = acc(transaction_manager=tm, retry_backoff_ms=0)
    for _ in range(40):
        append(a)
    # The first batch acknowledged: until then a partition has one batch in flight.
    (first,) = a.drain(c, {0}, 10**6, time.monotonic())[0]
    tm.handle_completed_batch(first, 0)
    sent: list[ProducerBatch] = []
    for _ in range(3):
        sent += a.drain(c, {0}, 10**6, time.monotonic())[0]
    assert [b.base_sequence for b in sent] == sorted(b.base_sequence for b in sent)
    a.reenqueue(sent[2], time.monotonic())
    a.reenqueue(sent[0], time.monotonic())
    a.reenqueue(sent[1], time.monotonic())
    dq = a._topics["t"][0]
    assert [b.base_sequence for b in list(dq)[:3]] == [s.base_sequence for s in sent]
    assert not dq[3].has_sequence  # new batches stay behind the retries


def test_expired_batches_are_removed_from_the_front() -> None:
    a = acc(delivery_timeout_ms=1000)
    append(a, partition=0)
    created = a._topics["t"][0][0].created
    assert a.expired(created + 0.5) == []
    assert a.oldest_deadline() == pytest.approx(created + 1.0)
    expired = a.expired(created + 1.0)
    assert len(expired) == 1 and not a._topics["t"][0]


def test_abort_undrained_keeps_batches_being_retried() -> None:
    tm = TransactionManager(transactional_id=None)
    tm.state = State.READY
    tm.producer = ProducerIdAndEpoch(1, 0)
    c = cluster({"t": [0]})
    a = acc(transaction_manager=tm)
    append(a)
    (sent,) = a.drain(c, {0}, 10**6, time.monotonic())[0]
    a.reenqueue(sent, time.monotonic())
    append(a, value=b"x" * 990)
    aborted = a.abort_undrained(keep_sequenced=True)
    assert len(aborted) == 1 and not aborted[0].has_sequence
    assert list(a._topics["t"][0]) == [sent]


def test_an_append_wakes_a_sleeping_sender_only_when_it_must() -> None:
    woken: list[int] = []
    a = acc(linger_ms=10)
    a.wakeup = lambda: woken.append(1)
    assert a.sender_sleeps_until(time.monotonic() + 60)
    append(a)  # a new batch, ready in 10 ms: before the sender's deadline
    assert woken == [1]
    assert a.sender_sleeps_until(time.monotonic() + 0.001)
    append(a)  # same batch, not full: no reason
    assert woken == [1]
    a.sender_deadline = 0.0  # the sender is running: the append leaves a note instead
    for _ in range(10):
        append(a)
    assert woken == [1] and a.wake_pending
    assert not a.sender_sleeps_until(time.monotonic() + 60)  # so it looks again before sleeping

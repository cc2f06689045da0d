"""eoslog.client's consumer against the real broker process, with data written by eoslog's
own producer and by confluent-kafka (librdkafka).

- assign/poll: keys, values, headers, timestamps and offsets under every codec, in order;
  max.poll.records; the asyncio API;
- positions: seek, seek_to_beginning/end, position, beginning/end offsets, offsets for
  times, OFFSET_OUT_OF_RANGE with auto.offset.reset earliest/latest/none;
- commits: commit/committed (sync, async, auto on close), another member resuming from
  them, require_stable under read_committed while a transaction holds offsets, and a
  consume-transform-produce loop with the consumer's group_metadata, an aborted round
  redone from the committed offsets;
- read_committed: aborted transactions interleaved with committed ones (and with plain
  records) on one partition, from eoslog's producer and from librdkafka: exactly the
  committed records, in offset order, no control records, and the position ends at the
  last stable offset; an open transaction holds the position at its first offset.

Waiting loops are hang guards; nothing asserts on timing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from clients import ensure_topic
from confluent_kafka import Producer as RdProducer

from eoslog.client.consumer import AIOConsumer, Consumer, ConsumerRecord, OffsetOutOfRangeNoResetError
from eoslog.client.errors import KafkaTimeoutError
from eoslog.client.producer import Producer
from eoslog.client.types import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition
from support.harness import BrokerProcess

WAIT_S = 60.0


def consumer(broker: BrokerProcess, **settings: Any) -> Consumer:
    config = {"bootstrap.servers": broker.bootstrap, "auto.offset.reset": "earliest", "fetch.max.wait.ms": 100}
    config.update({k.replace("_", "."): v for k, v in settings.items()})
    return Consumer(config)


def read(c: Consumer, count: int, *, linger_s: float = 0.3) -> list[ConsumerRecord]:
    """``count`` records, then polls for ``linger_s`` more so that an extra record shows."""
    got: list[ConsumerRecord] = []
    deadline = time.monotonic() + WAIT_S
    while len(got) < count and time.monotonic() < deadline:
        got += c.poll(0.5)
    until = time.monotonic() + linger_s
    while time.monotonic() < until:
        got += c.poll(0.1)
    return got


def fill(broker: BrokerProcess, topic: str, count: int, partitions: int = 1, value: bytes | None = None) -> None:
    """A topic of ``partitions`` partitions holding ``count`` records (value ``b"<i>"``
    unless given), dealt round-robin over the partitions."""
    ensure_topic(broker.bootstrap, topic, partitions)
    with Producer({"bootstrap.servers": broker.bootstrap}) as p:
        for i in range(count):
            p.send(topic, b"%d" % i if value is None else value, partition=i % partitions)


@pytest.fixture
def make_consumer(shared_broker: BrokerProcess) -> Iterator[Any]:
    made: list[Consumer] = []

    def make(**settings: Any) -> Consumer:
        c = consumer(shared_broker, **settings)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


# -- assign / poll ------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_records_read_back_exactly(shared_broker: BrokerProcess, make_consumer: Any, codec: str) -> None:
    topic = f"consumer-plain-{codec}"
    ensure_topic(shared_broker.bootstrap, topic, 2)
    sent = {}
    with Producer({"bootstrap.servers": shared_broker.bootstrap, "compression.type": codec, "linger.ms": 20}) as p:
        futures = []
        for i in range(400):
            headers = [("h", b"%d" % i), ("none", None)] if i % 3 else None
            key = None if i % 7 == 0 else b"k%d" % i
            value = None if i % 11 == 0 else b"v%d-" % i + b"x" * (i % 300)
            futures.append((key, value, headers, p.send(topic, value, key=key, headers=headers, partition=i % 2,
                                                        timestamp_ms=1_700_000_000_000 + i)))
        p.flush()
        for key, value, headers, f in futures:
            md = f.result(0)
            sent[(md.partition, md.offset)] = (key, value, tuple(headers or ()), md.timestamp)
    c = make_consumer(max_poll_records=37)
    c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    got = read(c, 400)
    assert {(r.partition, r.offset): (r.key, r.value, r.headers, r.timestamp) for r in got} == sent
    for partition in (0, 1):
        offsets = [r.offset for r in got if r.partition == partition]
        assert offsets == list(range(200))  # in order, no gap, no duplicate
    assert all(r.topic == topic and r.timestamp_type == 0 for r in got)
    assert c.position(TopicPartition(topic, 0)) == 200
    assert c.metrics()["records-consumed-total"] == 400


def test_large_fetch_responses_read_back_exactly(shared_broker: BrokerProcess, make_consumer: Any) -> None:
    """Fetch responses of megabytes reach the client in many socket reads, which the
    connection gathers before decoding; every value must come back whole and in order."""
    topic = "large-responses"
    ensure_topic(shared_broker.bootstrap, topic, 3)
    values = [b"%06d" % i + bytes([i % 251]) * 3000 for i in range(2400)]
    with Producer({"bootstrap.servers": shared_broker.bootstrap, "linger.ms": 20, "batch.size": 1_000_000}) as p:
        for i, v in enumerate(values):
            p.send(topic, v, partition=i % 3)
    c = make_consumer(max_poll_records=1000)
    c.assign([TopicPartition(topic, p) for p in range(3)])
    got = read(c, len(values), linger_s=0.1)
    for partition in range(3):
        assert [r.value for r in got if r.partition == partition] == values[partition::3]
    assert len(got) == len(values)


def test_max_poll_records_bounds_each_poll(shared_broker: BrokerProcess, make_consumer: Any) -> None:
    topic = "max-poll"
    fill(shared_broker, topic, 100)
    c = make_consumer(max_poll_records=7)
    c.assign([TopicPartition(topic, 0)])
    sizes = []
    values: list[bytes] = []
    deadline = time.monotonic() + WAIT_S
    while len(values) < 100 and time.monotonic() < deadline:
        batch = c.poll(0.5)
        sizes.append(len(batch))
        values += [r.value for r in batch]
    assert values == [b"%d" % i for i in range(100)]
    assert max(sizes) == 7


def test_asyncio_consumer(shared_broker: BrokerProcess) -> None:
    topic = "aio-consume"
    fill(shared_broker, topic, 50)

    async def main() -> tuple[list[bytes], int, dict[TopicPartition, int]]:
        async with AIOConsumer(bootstrap_servers=shared_broker.bootstrap, auto_offset_reset="earliest") as c:
            c.assign([TopicPartition(topic, 0)])
            values: list[bytes] = []
            deadline = time.monotonic() + WAIT_S
            while len(values) < 50 and time.monotonic() < deadline:
                values += [r.value for r in await c.poll(0.5)]
            return values, await c.position(TopicPartition(topic, 0)), await c.end_offsets([TopicPartition(topic, 0)])

    values, position, end = asyncio.run(main())
    assert values == [b"%d" % i for i in range(50)]
    assert position == 50 and end == {TopicPartition(topic, 0): 50}


# -- positions -----------------------------------------------------------------------------------


def test_seek_positions_and_offset_lookups(shared_broker: BrokerProcess, make_consumer: Any) -> None:
    topic = "positions"
    ensure_topic(shared_broker.bootstrap, topic, 1)
    tp = TopicPartition(topic, 0)
    with Producer({"bootstrap.servers": shared_broker.bootstrap, "linger.ms": 0}) as p:
        for i in range(30):
            p.send(topic, b"%d" % i, timestamp_ms=1_000_000 + 10 * i).result(WAIT_S)
    c = make_consumer(auto_offset_reset="latest")
    c.assign([tp])
    assert c.position(tp) == 30  # latest: nothing read yet
    assert c.beginning_offsets([tp]) == {tp: 0}
    assert c.end_offsets([tp]) == {tp: 30}
    assert c.offsets_for_times({tp: 1_000_000 + 55}) == {tp: 6}
    assert c.offsets_for_times({tp: 1_000_000}) == {tp: 0}
    assert c.offsets_for_times({tp: 9_000_000}) == {tp: None}
    c.seek(tp, 25)
    assert [r.offset for r in read(c, 5)] == [25, 26, 27, 28, 29]
    c.seek_to_beginning([tp])
    assert c.position(tp) == 0
    assert [r.value for r in c.poll(WAIT_S)][:3] == [b"0", b"1", b"2"]
    c.seek_to_end()
    assert c.position(tp) == 30
    assert c.poll(0.2) == []
    with pytest.raises(Exception, match="No current assignment"):
        c.position(TopicPartition(topic, 5))


@pytest.mark.parametrize(("reset", "expected"), [("earliest", 0), ("latest", 10)])
def test_out_of_range_position_is_reset(shared_broker: BrokerProcess, make_consumer: Any, reset: str,
                                        expected: int) -> None:
    topic = f"out-of-range-{reset}"
    fill(shared_broker, topic, 10)
    tp = TopicPartition(topic, 0)
    c = make_consumer(auto_offset_reset=reset)
    c.assign([tp])
    c.seek(tp, 1000)
    got: list[ConsumerRecord] = []
    deadline = time.monotonic() + WAIT_S
    while c.position(tp) == 1000 and time.monotonic() < deadline:
        got += c.poll(0.2)
    got += read(c, 10 - expected - len(got))
    assert [r.offset for r in got] == list(range(expected, 10))
    assert c.position(tp) == 10


def test_out_of_range_without_a_reset_policy_raises(shared_broker: BrokerProcess, make_consumer: Any) -> None:
    topic = "out-of-range-none"
    ensure_topic(shared_broker.bootstrap, topic, 1)
    tp = TopicPartition(topic, 0)
    c = make_consumer(auto_offset_reset="none")
    c.assign([tp])
    c.seek(tp, 1000)
    with pytest.raises(OffsetOutOfRangeNoResetError):
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            c.poll(0.2)
    c.seek(tp, 0)
    assert c.poll(0.2) == []  # a valid position again: polling goes on


# -- read_committed --------------------------------------------------------------------------------


def txn_producer(bootstrap: str, txn_id: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0})
    p.init_transactions()
    return p


def interleave_eoslog(bootstrap: str, topic: str) -> list[bytes]:
    """Two transactional producers and a plain one writing to one partition at once, each
    record waited for so that their batches interleave; every other round aborts one of
    the transactions. Returns what read_committed must return, in offset order."""
    a, b = txn_producer(bootstrap, f"{topic}-a"), txn_producer(bootstrap, f"{topic}-b")
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    expected: list[tuple[int, bytes]] = []
    try:
        for rnd in range(6):
            a.begin_transaction()
            b.begin_transaction()
            sent: dict[str, list[tuple[int, bytes]]] = {"a": [], "b": [], "plain": []}
            for i in range(8):
                for name, p in (("a", a), ("b", b), ("plain", plain)):
                    if name == "plain" and i % 3:
                        continue
                    value = f"{name}-{rnd}-{i}".encode()
                    md = p.send(topic, value, partition=0).result(WAIT_S)
                    sent[name].append((md.offset, value))
            commit_a, commit_b = rnd % 3 != 1, rnd % 2 == 0
            (a.commit_transaction if commit_a else a.abort_transaction)()
            (b.commit_transaction if commit_b else b.abort_transaction)()
            expected += sent["plain"] + (sent["a"] if commit_a else []) + (sent["b"] if commit_b else [])
    finally:
        for p in (a, b, plain):
            p.close()
    return [v for _, v in sorted(expected)]


def interleave_librdkafka(bootstrap: str, topic: str) -> list[bytes]:
    """The same with confluent-kafka's transactional producers."""
    def make(txn_id: str) -> RdProducer:
        p = RdProducer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0})
        p.init_transactions(WAIT_S)
        return p

    a, b = make(f"{topic}-a"), make(f"{topic}-b")
    expected: list[tuple[int, bytes]] = []

    def send(p: RdProducer, value: bytes) -> int:
        offsets: list[int] = []
        p.produce(topic, value, partition=0, on_delivery=lambda err, msg: offsets.append(msg.offset()))
        p.flush(WAIT_S)
        return offsets[0]

    for rnd in range(6):
        a.begin_transaction()
        b.begin_transaction()
        sent: dict[str, list[tuple[int, bytes]]] = {"a": [], "b": []}
        for i in range(6):
            for name, p in (("a", a), ("b", b)):
                value = f"rd-{name}-{rnd}-{i}".encode()
                sent[name].append((send(p, value), value))
        commit_a, commit_b = rnd % 2 == 1, rnd % 3 == 0
        (a.commit_transaction if commit_a else a.abort_transaction)(WAIT_S)
        (b.commit_transaction if commit_b else b.abort_transaction)(WAIT_S)
        expected += (sent["a"] if commit_a else []) + (sent["b"] if commit_b else [])
    return [v for _, v in sorted(expected)]


@pytest.mark.parametrize("writer", ["eoslog", "librdkafka"])
def test_read_committed_returns_exactly_the_committed_records(shared_broker: BrokerProcess, make_consumer: Any,
                                                              writer: str) -> None:
    topic = f"rc-interleaved-{writer}"
    ensure_topic(shared_broker.bootstrap, topic, 1)
    tp = TopicPartition(topic, 0)
    expected = (interleave_eoslog if writer == "eoslog" else interleave_librdkafka)(shared_broker.bootstrap, topic)
    c = make_consumer(isolation_level="read_committed", max_poll_records=5)
    c.assign([tp])
    got = read(c, len(expected))
    assert [r.value for r in got] == expected
    offsets = [r.offset for r in got]
    assert offsets == sorted(offsets)
    lso = c.end_offsets([tp])[tp]
    assert c.position(tp) == lso
    # Everything is decided: the LSO is the log end. read_uncommitted returns the aborted
    # records too, but no more than read_committed does the 12 markers (6 rounds x 2).
    with consumer(shared_broker) as uncommitted:
        assert uncommitted.end_offsets([tp])[tp] == lso
        uncommitted.assign([tp])
        everything = read(uncommitted, lso - 12)
        assert uncommitted.position(tp) == lso
    assert len(everything) == lso - 12
    assert set(expected) < {r.value for r in everything}


def test_an_open_transaction_holds_the_position_at_its_first_offset(shared_broker: BrokerProcess,
                                                                    make_consumer: Any) -> None:
    topic = "rc-open"
    ensure_topic(shared_broker.bootstrap, topic, 1)
    tp = TopicPartition(topic, 0)
    with Producer({"bootstrap.servers": shared_broker.bootstrap}) as plain:
        for i in range(3):
            plain.send(topic, b"before-%d" % i).result(WAIT_S)
    p = txn_producer(shared_broker.bootstrap, "rc-open-1")
    try:
        p.begin_transaction()
        first = p.send(topic, b"pending-0").result(WAIT_S).offset
        p.send(topic, b"pending-1").result(WAIT_S)
        with Producer({"bootstrap.servers": shared_broker.bootstrap}) as plain:
            plain.send(topic, b"after").result(WAIT_S)  # above the LSO until the transaction ends
        c = make_consumer(isolation_level="read_committed")
        c.assign([tp])
        assert [r.value for r in read(c, 3)] == [b"before-0", b"before-1", b"before-2"]
        assert c.end_offsets([tp])[tp] == first == c.position(tp)
        p.commit_transaction()
        assert [r.value for r in read(c, 3)] == [b"pending-0", b"pending-1", b"after"]
        assert c.position(tp) == c.end_offsets([tp])[tp]
    finally:
        p.close()


# -- commits -------------------------------------------------------------------------------------


def test_commit_and_committed(shared_broker: BrokerProcess, make_consumer: Any) -> None:
    topic = "commits"
    fill(shared_broker, topic, 20, partitions=2)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    c = make_consumer(group_id="committer", enable_auto_commit=False)
    assert c.committed([tp0, tp1]) == {tp0: None, tp1: None}
    c.assign([tp0, tp1])
    assert len(read(c, 20)) == 20
    c.commit({tp0: OffsetAndMetadata(4, "four")})
    assert c.committed([tp0, tp1]) == {tp0: OffsetAndMetadata(4, "four", -1), tp1: None}
    c.commit()  # the positions
    assert {tp: om.offset for tp, om in c.committed([tp0, tp1]).items() if om} == {tp0: 10, tp1: 10}
    c.commit({tp1: 3}, asynchronous=True).result(WAIT_S)
    assert c.committed([tp1])[tp1].offset == 3  # type: ignore[union-attr]
    assert c.group_metadata() == ConsumerGroupMetadata("committer", -1, "", None)
    assert c.metrics()["commit-total"] == 3
    # Another member of the group starts where the commits left off.
    d = make_consumer(group_id="committer", enable_auto_commit=False, auto_offset_reset="none")
    d.assign([tp0, tp1])
    assert d.position(tp0) == 10 and d.position(tp1) == 3
    assert sorted(r.offset for r in read(d, 7) if r.partition == 1) == list(range(3, 10))


def test_auto_commit_on_close(shared_broker: BrokerProcess, make_consumer: Any) -> None:
    topic = "auto-commit"
    fill(shared_broker, topic, 15)
    tp = TopicPartition(topic, 0)
    with consumer(shared_broker, group_id="auto", max_poll_records=5) as c:
        c.assign([tp])
        assert len(read(c, 15)) == 15
    check = make_consumer(group_id="auto")
    assert check.committed([tp])[tp] == OffsetAndMetadata(15, "", -1)


def test_committed_under_read_committed_waits_for_an_open_transaction(shared_broker: BrokerProcess,
                                                                      make_consumer: Any) -> None:
    """OffsetFetch with require_stable (KIP-447): offsets an open transaction is committing
    are not answered until it ends, and a timeout meanwhile says so — not that the coordinator
    was silent (it answered UNSTABLE_OFFSET_COMMIT every time), which sent the diagnosis of a
    hanging transaction on Kafka 4.4 (tests/chaos/test_copy.py, kafka-eoslog) looking for a
    client connection problem."""
    topic = "stable-offsets"
    ensure_topic(shared_broker.bootstrap, topic, 1)
    tp = TopicPartition(topic, 0)
    group = "stable-group"
    plain = make_consumer(group_id=group, enable_auto_commit=False)
    plain.commit({tp: 1})
    p = txn_producer(shared_broker.bootstrap, "stable-offsets-1")
    try:
        p.begin_transaction()
        p.send(topic, b"x")
        p.send_offsets_to_transaction({tp: 7}, group)
        assert plain.committed([tp])[tp] == OffsetAndMetadata(1, "", -1)  # read_uncommitted: the stable one
        rc = make_consumer(group_id=group, enable_auto_commit=False, isolation_level="read_committed")
        with pytest.raises(KafkaTimeoutError, match=r"offsets of stable-offsets-0 were still pending in an open "
                                                    r"transaction \(UNSTABLE_OFFSET_COMMIT\)"):
            rc.committed([tp], timeout=1.0)  # retried while the transaction is open
        p.commit_transaction()
        assert rc.committed([tp])[tp] == OffsetAndMetadata(7, "", -1)
    finally:
        p.close()


def test_consume_transform_produce(shared_broker: BrokerProcess, make_consumer: Any) -> None:
    """Read, transform and write with the input offsets committed in the same transaction
    (the consumer's group_metadata); a round aborted half way is redone from the committed
    offsets. The output holds every input record transformed exactly once, in order."""
    source, sink, group = "ctp-in", "ctp-out", "ctp-group"
    fill(shared_broker, source, 60)
    ensure_topic(shared_broker.bootstrap, sink, 1)
    tp = TopicPartition(source, 0)
    c = make_consumer(group_id=group, enable_auto_commit=False, isolation_level="read_committed",
                      max_poll_records=8)
    c.assign([tp])
    p = txn_producer(shared_broker.bootstrap, "ctp-1")
    rounds = aborted = 0
    try:
        deadline = time.monotonic() + WAIT_S
        while c.position(tp) < 60 and time.monotonic() < deadline:
            records = c.poll(0.5)
            if not records:
                continue
            p.begin_transaction()
            for r in records:
                p.send(sink, b"out-" + r.value)
            p.send_offsets_to_transaction({tp: c.position(tp)}, c.group_metadata())
            rounds += 1
            if rounds % 3 == 0:
                p.abort_transaction()
                aborted += 1
                committed = c.committed([tp])[tp]
                c.seek(tp, committed.offset if committed else 0)
            else:
                p.commit_transaction()
    finally:
        p.close()
    assert aborted > 0
    assert c.committed([tp])[tp] == OffsetAndMetadata(60, "", -1)
    out = make_consumer(isolation_level="read_committed")
    out.assign([TopicPartition(sink, 0)])
    assert [r.value for r in read(out, 60)] == [b"out-%d" % i for i in range(60)]


# -- flow control, metrics -------------------------------------------------------------------------


def test_a_caught_up_partition_does_not_hold_back_the_others(shared_broker: BrokerProcess,
                                                              make_consumer: Any) -> None:
    """p0 is read to its end after the first fetch while p1 still has many fetches to go,
    all on one broker. A fetch of p0 alone would be held by the broker for
    fetch.max.wait.ms (longer than the test waits) and, one fetch in flight per broker,
    p1's next fetch with it: the caught-up partition is asked for with p1 instead."""
    topic = "caught-up"
    ensure_topic(shared_broker.bootstrap, topic, 2)
    values = [b"%04d" % i + b"x" * 1000 for i in range(200)]
    with Producer({"bootstrap.servers": shared_broker.bootstrap}) as p:
        p.send(topic, b"only", partition=0)
        for v in values:
            p.send(topic, v, partition=1)
    c = make_consumer(max_poll_records=5, max_partition_fetch_bytes=16384, fetch_max_wait_ms=int(WAIT_S * 2000))
    c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    got = read(c, 201, linger_s=0)
    assert [r.value for r in got if r.partition == 0] == [b"only"]
    assert [r.value for r in got if r.partition == 1] == values


def test_pause_and_resume(shared_broker: BrokerProcess, make_consumer: Any) -> None:
    topic = "pause"
    fill(shared_broker, topic, 40, partitions=2)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    c = make_consumer(max_poll_records=3)
    c.assign([tp0, tp1])
    first = c.poll(WAIT_S)  # data of both partitions may be buffered now
    c.pause([tp0])
    assert c.paused() == {tp0}
    got = first + read(c, 20 - sum(r.partition == 1 for r in first))
    while_paused = got[len(first):]
    assert while_paused and {r.partition for r in while_paused} == {1}
    assert c.position(tp0) == sum(r.partition == 0 for r in first)
    c.resume([tp0])
    assert c.paused() == set()
    got += read(c, 40 - len(got))
    for partition in (0, 1):
        assert [r.offset for r in got if r.partition == partition] == list(range(20))


def test_metrics(shared_broker: BrokerProcess, make_consumer: Any) -> None:
    topic = "metrics"
    fill(shared_broker, topic, 50, value=b"x" * 100)
    tp = TopicPartition(topic, 0)
    c = make_consumer(group_id="metrics-group", enable_auto_commit=False, max_poll_records=10)
    c.assign([tp])
    assert len(c.poll(WAIT_S)) == 10
    m = c.metrics()
    assert m["records-consumed-total"] == 10
    assert m["records-lag-max"] == 40  # the high watermark the fetch reported, less the position
    assert m["fetch-total"] >= 1 and m["bytes-consumed-total"] > 5000 and m["assigned-partitions"] == 1
    c.commit()
    assert c.metrics()["commit-total"] == 1
    read(c, 40)
    assert c.metrics()["records-consumed-total"] == 50 and c.metrics()["records-lag-max"] == 0

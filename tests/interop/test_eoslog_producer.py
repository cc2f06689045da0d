"""eoslog.client's producer against the real broker process, read back with librdkafka.

- records (keys, values, headers, timestamps) and the offsets the producer reports, under
  every compression codec, with the sync and the asyncio API;
- keyed records land where librdkafka's murmur2 partitioner (Java's default) puts them;
  keyless records stick to a partition per batch;
- MESSAGE_TOO_LARGE from a topic's max.message.bytes splits the batch; LogAppendTime
  topics report the broker's time;
- transactions: committed records are visible to a read_committed consumer and aborted ones
  never; offsets sent in a transaction become the group's committed offsets only on commit;
  a second instance with the same transactional.id fences the first (fatal);
- flush, close(timeout=0) failing what is queued, delivery.timeout.ms with the broker down;
- the idempotence test of the chaos suite: numbered records through the fault proxy
  (dropped responses, cut requests) and a broker kill -9; every partition must hold each
  record exactly once, in order.

Waiting loops are hang guards; nothing asserts on timing.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clients import CONFLUENT, Consumed, ensure_topic, list_offsets, read_to_end
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka import Producer as RdProducer
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.client.errors import KafkaTimeoutError, ProducerClosedError, ProducerFencedError
from eoslog.client.producer import AIOProducer, Producer, RecordMetadata
from support.faults import ADD_PARTITIONS_TO_TXN, END_TXN, PRODUCE, FaultPolicy, FaultRig
from support.features import finalize
from support.harness import BrokerProcess, wait_until

WAIT_S = 60.0


def consume(bootstrap: str, topic: str, partitions: int, *, isolation: str = "read_uncommitted") -> list[Consumed]:
    """Every record of the topic's first ``partitions`` partitions, read up to their end
    offsets (``clients.read_to_end``: an extra record, a duplicate or an aborted one, shows)."""
    return read_to_end(bootstrap, topic, range(partitions), isolation=isolation)


def create_topic(bootstrap: str, topic: str, partitions: int, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config)])[topic].result(30)


# -- plain produce ------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_records_and_offsets_read_back_by_librdkafka(shared_broker: BrokerProcess, codec: str) -> None:
    topic = f"plain-{codec}"
    ensure_topic(shared_broker.bootstrap, topic, 3)
    sent: list[tuple[bytes, bytes, list[tuple[str, bytes]], int, RecordMetadata]] = []
    with Producer({"bootstrap.servers": shared_broker.bootstrap, "compression.type": codec,
                   "linger.ms": 20}) as p:
        futures = []
        for i in range(300):
            key, value = b"key-%d" % (i % 17), b"value-%d-" % i + b"x" * (i % 200)
            headers = [("h", b"%d" % i), ("n", None)] if i % 3 else []
            futures.append((key, value, headers, 1_700_000_000_000 + i,
                            p.send(topic, value, key=key, headers=headers, timestamp_ms=1_700_000_000_000 + i)))
        p.flush()
        sent = [(k, v, h, ts, f.result(0)) for k, v, h, ts, f in futures]
        assert p.metrics()["record-send-total"] == 300
    got = consume(shared_broker.bootstrap, topic, 3)
    assert len(got) == 300
    by_position = {(m.partition, m.offset): m for m in got}
    for key, value, headers, ts, md in sent:
        m = by_position[(md.partition, md.offset)]
        assert (m.key, m.value, m.timestamp_ms, md.timestamp) == (key, value, ts, ts)
        assert list(m.headers) == headers


def test_keyed_records_go_where_librdkafkas_murmur2_partitioner_puts_them(shared_broker: BrokerProcess) -> None:
    topic = "keyed"
    ensure_topic(shared_broker.bootstrap, topic, 7)
    keys = [b"k%d" % i for i in range(200)] + [b"", b"\x00\xff" * 9, "ünïcode".encode()]
    rd = RdProducer({"bootstrap.servers": shared_broker.bootstrap, "partitioner": "murmur2_random"})
    theirs: dict[bytes, int] = {}
    for k in keys:
        rd.produce(topic, b"rd", key=k, on_delivery=lambda err, msg: theirs.__setitem__(msg.key(), msg.partition()))
    assert rd.flush(WAIT_S) == 0
    with Producer({"bootstrap.servers": shared_broker.bootstrap}) as p:
        ours = {k: f.result(WAIT_S).partition for k, f in [(k, p.send(topic, b"eos", key=k)) for k in keys]}
    assert ours == theirs
    assert len(set(ours.values())) == 7


def test_keyless_records_stick_to_a_partition_per_batch(shared_broker: BrokerProcess) -> None:
    topic = "sticky"
    ensure_topic(shared_broker.bootstrap, topic, 4)
    with Producer({"bootstrap.servers": shared_broker.bootstrap, "batch.size": 2000, "linger.ms": 1000}) as p:
        futures = [p.send(topic, b"x" * 90) for _ in range(400)]
        p.flush()
        partitions = [f.result(0).partition for f in futures]
    runs = sum(1 for a, b in itertools.pairwise(partitions) if a != b) + 1
    assert len(set(partitions)) == 4  # spread over the partitions...
    assert runs <= 400 * 110 // 2000 + 5  # ...a batch (~18 records) at a time, not round-robin


def test_asyncio_producer(shared_broker: BrokerProcess) -> None:
    topic = "asyncio"
    ensure_topic(shared_broker.bootstrap, topic, 2)

    async def main() -> list[RecordMetadata]:
        delivered: list[RecordMetadata] = []
        async with AIOProducer(bootstrap_servers=shared_broker.bootstrap, linger_ms=2) as p:
            futures = [await p.send(topic, f"v{i}", key=f"k{i % 5}", on_delivery=lambda md, err: delivered.append(md))
                       for i in range(100)]
            results = [await f for f in futures]
            assert (await p.send_and_wait(topic, b"last", partition=1)).partition == 1
        assert len(delivered) == 100
        return results

    results = asyncio.run(main())
    per_partition: dict[int, list[int]] = {}
    for md in results:
        per_partition.setdefault(md.partition, []).append(md.offset)
    for offsets in per_partition.values():
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
    got = consume(shared_broker.bootstrap, topic, 2)
    assert sorted(m.value for m in got) == sorted([f"v{i}".encode() for i in range(100)] + [b"last"])


@pytest.mark.parametrize("acks", ["0", "1"])
def test_non_idempotent_acks(shared_broker: BrokerProcess, acks: str) -> None:
    topic = f"acks-{acks}"
    ensure_topic(shared_broker.bootstrap, topic, 1)
    with Producer({"bootstrap.servers": shared_broker.bootstrap, "acks": acks}) as p:
        assert not p.config.enable_idempotence
        futures = [p.send(topic, b"%d" % i) for i in range(50)]
        p.flush()
        offsets = [f.result(0).offset for f in futures]
    assert offsets == ([-1] * 50 if acks == "0" else list(range(50)))
    # Unanswered (acks=0) or answered on append (acks=1), the records pass the high watermark
    # only once the broker has them and (under group commit) fsynced them; consume reads up to
    # the high watermark it finds first, so wait for the 50 (a lost record never comes).
    wait_until(lambda: list_offsets(CONFLUENT, shared_broker.bootstrap, topic, [0])[0][1] == 50,
               "the 50 records below the high watermark",
               describe=lambda: list_offsets(CONFLUENT, shared_broker.bootstrap, topic, [0]))
    assert [m.value for m in consume(shared_broker.bootstrap, topic, 1)] == [b"%d" % i for i in range(50)]


def test_message_too_large_splits_the_batch(shared_broker: BrokerProcess) -> None:
    topic = "split"
    create_topic(shared_broker.bootstrap, topic, 1, **{"max.message.bytes": "3000"})
    with Producer({"bootstrap.servers": shared_broker.bootstrap, "batch.size": 100_000, "linger.ms": 60000}) as p:
        futures = [p.send(topic, b"%04d" % i + b"." * 200) for i in range(120)]
        p.flush()
        offsets = [f.result(0).offset for f in futures]
        assert p.metrics()["batch-split-total"] >= 1
    assert offsets == list(range(120))
    got = consume(shared_broker.bootstrap, topic, 1)
    assert [(m.value or b"")[:4] for m in got] == [b"%04d" % i for i in range(120)]


def test_log_append_time_is_reported(shared_broker: BrokerProcess) -> None:
    topic = "append-time"
    create_topic(shared_broker.bootstrap, topic, 1, **{"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    with Producer({"bootstrap.servers": shared_broker.bootstrap}) as p:
        md = p.send(topic, b"v", timestamp_ms=1000).result(WAIT_S)
    assert md.timestamp >= before - 1000  # the broker's clock, not the record's 1000


def test_close_with_zero_timeout_fails_what_is_queued(shared_broker: BrokerProcess) -> None:
    topic = "close-now"
    ensure_topic(shared_broker.bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": shared_broker.bootstrap, "linger.ms": 60000, "delivery.timeout.ms": 120000})
    futures = [p.send(topic, b"v") for _ in range(10)]
    p.close(timeout=0)
    for f in futures:
        with pytest.raises(ProducerClosedError):
            f.result(WAIT_S)
    with pytest.raises(ProducerClosedError):
        p.send(topic, b"late")


def test_close_drains_what_is_queued(shared_broker: BrokerProcess) -> None:
    topic = "close-drain"
    ensure_topic(shared_broker.bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": shared_broker.bootstrap, "linger.ms": 60000})
    futures = [p.send(topic, b"%d" % i) for i in range(10)]
    p.close()
    assert [f.result(0).offset for f in futures] == list(range(10))


def test_delivery_timeout_with_the_broker_down(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        ensure_topic(broker.bootstrap, "t", 1)
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "request.timeout.ms": 1000,
                      "delivery.timeout.ms": 1500, "reconnect.backoff.max.ms": 200})
        p.send("t", b"before").result(WAIT_S)
        broker.kill()
        future = p.send("t", b"lost")
        with pytest.raises(KafkaTimeoutError, match="Expiring 1 record"):
            future.result(WAIT_S)
        p.close(timeout=5)
    finally:
        broker.kill()


# -- transactions ---------------------------------------------------------------------------

def txn_producer(bootstrap: str, txn_id: str, **extra: Any) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **extra})
    p.init_transactions()
    return p


def test_committed_and_aborted_transactions_read_committed(shared_broker: BrokerProcess) -> None:
    topic = "txn-rc"
    ensure_topic(shared_broker.bootstrap, topic, 3)
    with txn_producer(shared_broker.bootstrap, "txn-rc-1") as p:
        for n in range(6):
            p.begin_transaction()
            for i in range(50):
                p.send(topic, f"t{n}-{i}", key=f"{i}")
            if n % 2:
                p.flush()  # in the log, then aborted: read_committed must skip them
                p.abort_transaction()
            else:
                p.commit_transaction()
        p.begin_transaction()
        p.commit_transaction()  # nothing added: no EndTxn, still fine
        p.begin_transaction()
        p.send(topic, b"aborted at once")
        # Still queued (failed locally) or, on a loaded machine past linger.ms, already in the
        # log: aborted either way.
        p.abort_transaction()
    committed = [(m.value or b"").decode() for m in consume(shared_broker.bootstrap, topic, 3,
                                                            isolation="read_committed")]
    assert sorted(committed) == sorted(f"t{n}-{i}" for n in (0, 2, 4) for i in range(50))
    everything = [(m.value or b"").decode() for m in consume(shared_broker.bootstrap, topic, 3)]
    # read_uncommitted sees the aborted records too
    assert sorted(v for v in everything if v != "aborted at once") == sorted(
        f"t{n}-{i}" for n in range(6) for i in range(50))
    assert everything.count("aborted at once") <= 1


def test_offsets_sent_in_a_transaction_are_committed_only_with_it(shared_broker: BrokerProcess) -> None:
    topic = "txn-offsets"
    ensure_topic(shared_broker.bootstrap, topic, 1)
    ensure_topic(shared_broker.bootstrap, "input", 2)  # offsets of unknown topics are refused (and retried)
    group = "copier-group"
    with txn_producer(shared_broker.bootstrap, "txn-offsets-1") as p:
        p.begin_transaction()
        p.send(topic, b"a")
        p.send_offsets_to_transaction({("input", 0): 10, ("input", 1): 20}, group)
        p.abort_transaction()
        p.begin_transaction()
        p.send(topic, b"b")
        p.send_offsets_to_transaction({("input", 0): 11, ("input", 1): 21}, group)
        p.commit_transaction()
    c = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committed = c.committed([TopicPartition("input", 0), TopicPartition("input", 1)], timeout=30)
    finally:
        c.close()
    assert [tp.offset for tp in committed] == [11, 21]
    values = [m.value for m in consume(shared_broker.bootstrap, topic, 1, isolation="read_committed")]
    assert values == [b"b"]


def test_a_second_instance_fences_the_first(shared_broker: BrokerProcess) -> None:
    topic = "txn-fence"
    ensure_topic(shared_broker.bootstrap, topic, 1)
    old = txn_producer(shared_broker.bootstrap, "fence-1")
    old.begin_transaction()
    old.send(topic, b"zombie").result(WAIT_S)
    new = txn_producer(shared_broker.bootstrap, "fence-1")  # aborts the old one's transaction
    new.begin_transaction()
    new.send(topic, b"fresh")
    new.commit_transaction()
    with pytest.raises(ProducerFencedError) as info:
        old.send(topic, b"more")
        old.commit_transaction()
    assert info.value.fatal
    old.close(timeout=0)
    new.close()
    assert [m.value for m in consume(shared_broker.bootstrap, topic, 1, isolation="read_committed")] == [b"fresh"]


def test_send_outside_a_transaction_is_refused(shared_broker: BrokerProcess) -> None:
    with txn_producer(shared_broker.bootstrap, "outside-1") as p, pytest.raises(Exception, match="READY"):
        p.send("txn-rc", b"no transaction")


# -- idempotence through faults and a kill -9 -------------------------------------------------

N_RECORDS = 100_000
PARTITIONS = 3


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[FaultRig]:
    r = FaultRig(tmp_path, PARTITIONS)
    yield r
    r.close()


def numbered(i: int) -> bytes:
    return f"eoslog-{i:07d}".encode() + b"." * (i % 50)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [7, 11])
def test_idempotent_producer_through_faults_and_a_broker_kill(rig: FaultRig, seed: int) -> None:
    topic = "idem-eoslog"
    ensure_topic(rig.broker.bootstrap, topic, PARTITIONS)
    # Small batches: many requests, so many faults (about 1500 requests for 100k records).
    p = Producer({"bootstrap.servers": rig.proxy.address, "linger.ms": 5, "batch.size": 4096,
                  "request.timeout.ms": 10000, "delivery.timeout.ms": 300000, "reconnect.backoff.max.ms": 1000})
    rig.proxy.set_policy(FaultPolicy(drop_probability=0.05, close_mid_request_probability=0.01,
                                     delay_probability=0.01, delay_seconds=0.2, seed=seed))
    futures = []
    for i in range(N_RECORDS):
        futures.append(p.send(topic, numbered(i), partition=i % PARTITIONS))
        if i == N_RECORDS // 2:
            threading.Thread(target=rig.kill_and_restart, daemon=True).start()
    p.flush()
    for f in futures:
        f.result(0)  # raises if any record failed
    retries = p.metrics()["record-retry-total"]
    p.close()
    rig.proxy.heal()
    assert rig.killed.is_set()
    assert rig.proxy.injected["drop"] > 0, "no response was dropped: the test proved nothing"
    assert retries > 0
    print(f"faults injected: {dict(rig.proxy.injected)}; records retried: {retries}")
    got: dict[int, list[bytes]] = {p_: [] for p_ in range(PARTITIONS)}
    for m in consume(rig.broker.bootstrap, topic, PARTITIONS):
        got[m.partition].append(m.value or b"")
    for part in range(PARTITIONS):
        expected = [numbered(i) for i in range(part, N_RECORDS, PARTITIONS)]
        records = got[part]
        assert len(records) == len(set(records)), f"partition {part}: duplicates"
        missing = set(expected) - set(records)
        assert not missing, f"partition {part}: {len(missing)} records lost"
        assert records == expected, f"partition {part}: order differs from send order"


def test_closing_with_an_open_transaction_aborts_it(shared_broker: BrokerProcess) -> None:
    topic = "txn-close"
    ensure_topic(shared_broker.bootstrap, topic, 1)
    p = txn_producer(shared_broker.bootstrap, "close-open-1")
    p.begin_transaction()
    p.send(topic, b"open").result(WAIT_S)
    p.close()
    q = txn_producer(shared_broker.bootstrap, "close-open-2")
    q.begin_transaction()
    q.send(topic, b"after")
    q.commit_transaction()
    q.close()
    values = [m.value for m in consume(shared_broker.bootstrap, topic, 1, isolation="read_committed")]
    assert values == [b"after"]  # "open" was aborted by close(), so "after" is readable at once


def test_threads_share_one_producer(shared_broker: BrokerProcess) -> None:
    topic = "threads"
    ensure_topic(shared_broker.bootstrap, topic, 3)
    with Producer({"bootstrap.servers": shared_broker.bootstrap, "batch.size": 4096}) as p:
        futures: list[list[Any]] = [[] for _ in range(4)]

        def work(t: int) -> None:
            futures[t] = [p.send(topic, f"{t}-{i}".encode(), key=f"{t}".encode()) for i in range(5000)]

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        p.flush()
        results = [[f.result(0) for f in fs] for fs in futures]
    for rs in results:  # one key per thread: one partition, offsets increasing in send order
        assert len({md.partition for md in rs}) == 1
        assert [md.offset for md in rs] == sorted(md.offset for md in rs)
    got = consume(shared_broker.bootstrap, topic, 3)
    assert sorted(m.value or b"" for m in got) == sorted(f"{t}-{i}".encode() for t in range(4) for i in range(5000))


@pytest.mark.slow
@pytest.mark.parametrize("transaction_version", [1, 2])
def test_transactions_through_faults(rig: FaultRig, transaction_version: int) -> None:
    """Responses to AddPartitionsToTxn (version 1) and EndTxn (commit and abort) dropped
    after the coordinator applied them, and to Produce at random, plus cut requests: every
    committed transaction is read exactly once, in order, and no aborted record shows. Under
    version 2 a dropped EndTxn answer hides the epoch bump the coordinator made: the retry
    must still be taken as the same EndTxn (KIP-890's retry rule), not fence the producer."""
    topic = "txn-faults"
    ensure_topic(rig.broker.bootstrap, topic, PARTITIONS)
    finalize(rig.broker.bootstrap, transaction_version)
    p = txn_producer(rig.proxy.address, "faulty-1", **{"batch.size": 4096, "request.timeout.ms": 10000,
                                                        "delivery.timeout.ms": 300000})
    # One AddPartitionsToTxn (version 1 only) and one EndTxn per transaction (plus retries):
    # the 2nd and 7th AddPartitionsToTxn responses and the 1st, 3rd and 8th EndTxn responses
    # are dropped (transactions 0, 2 and 7 end by commit, abort and commit).
    scripted = {END_TXN: frozenset({1, 3, 8})}
    if transaction_version == 1:
        scripted[ADD_PARTITIONS_TO_TXN] = frozenset({2, 7})
    rig.proxy.set_policy(FaultPolicy(api_keys=frozenset({PRODUCE, ADD_PARTITIONS_TO_TXN, END_TXN}),
                                     drop_probability=0.05, close_mid_request_probability=0.01,
                                     drop_responses=scripted, seed=3))
    expected: list[bytes] = []
    for n in range(30):
        p.begin_transaction()
        values = [f"txn{n:02d}-{i:04d}".encode() for i in range(300)]
        for v in values:
            p.send(topic, v, partition=0)
        if n % 3 == 2:
            p.flush()
            p.abort_transaction()
        else:
            p.commit_transaction()
            expected += values
    p.close()
    # Version 2: the partitions' leader added them (Produce v12); the client sent no AddPartitionsToTxn.
    assert (rig.proxy.responses[ADD_PARTITIONS_TO_TXN] == 0) is (transaction_version == 2)
    rig.proxy.heal()
    print(f"faults injected: {dict(rig.proxy.injected)}; dropped per api key: {dict(rig.proxy.dropped)}")
    for api_key, ordinals in scripted.items():
        assert rig.proxy.dropped[api_key] >= len(ordinals), \
            f"api key {api_key}: {rig.proxy.dropped[api_key]} responses dropped, {len(ordinals)} scripted"
    got = [m.value for m in consume(rig.broker.bootstrap, topic, PARTITIONS, isolation="read_committed")]
    assert got == expected


def test_only_the_records_the_broker_names_fail_as_invalid(shared_broker: BrokerProcess) -> None:
    """KIP-467, as Java's producer: a batch with records 0 and 5 keyless to a compacted topic; the
    broker names them in record_errors, their futures (and callbacks) raise InvalidRecordError,
    the eight others a KafkaError saying their batch had invalid records."""
    from eoslog.client.errors import InvalidRecordError, KafkaError

    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    admin.create_topics([NewTopic("eoslog-record-errors", 1, 1, config={"cleanup.policy": "compact"})])[
        "eoslog-record-errors"].result(30)
    called: dict[int, BaseException | None] = {}
    with Producer({"bootstrap.servers": shared_broker.bootstrap, "linger.ms": 1000, "retries": 0}) as p:
        futures = [p.send("eoslog-record-errors", b"v%d" % i, key=None if i % 5 == 0 else b"k%d" % i, partition=0)
                   for i in range(10)]
        for i, f in enumerate(futures):
            f.add_done_callback(lambda _, error, i=i: called.__setitem__(i, error))
        p.flush(30)
    errors = [f.exception(30) for f in futures]
    assert [i for i, e in enumerate(errors) if isinstance(e, InvalidRecordError)] == [0, 5]
    assert all(type(e) is KafkaError and "invalid records" in str(e) for i, e in enumerate(errors) if i % 5)
    assert called == dict(enumerate(errors))
    assert "Compacted topic cannot accept message without key" in str(errors[0])

"""A transaction's writes are durable at its commit, not at each answer (issue 28), and a power cut
never commits an acknowledged write it lost, while a kill -9 (which loses nothing) lets the
transaction go on as Kafka's does.

On one node under group commit a transaction's acks=all Produce (and its TxnOffsetCommit) is
answered once appended; its coordinator makes the transaction's writes durable before it writes
the PrepareCommit that decides them. After an unclean stop the broker asks whether the writes no
fsync covered survived (``storage.unsynced_witness``: a file in each log directory, never
fsynced, holding the kernel's boot id): if not, it refuses the commit of every transaction that
was open (any of them may have lost an acknowledged write) with an abortable error. Here the
disk stops answering an fsync the broker's group commit waits on (``PowerCutBroker.stall_group_commit``)
once the transaction's first record is acknowledged, so the cut after the other 49 takes them away; the broker
restarts on what survived; the producer's commit must then fail, abortably
(not fenced: it aborts and commits its next transaction), a read_committed reader must see none
of the lost transaction's records, and a new instance of the transactional id must start cleanly.
Before that the producer commits a transaction, whose records the cut must leave all there.
The second test ``kill -9``s the broker instead, with the same records acknowledged and the same
fsyncs stalled (the last 49 records unsynced): the restarted broker keeps the transaction open, and the
producer commits it with every record.

Mutants shown (not committed): with ``unsynced_witness.survived`` answering True (a power cut
taken for a kill) the commit after the cut succeeds and the committed transaction holds none of
its 50 acknowledged records: "committed without its acknowledged records"; with it answering
False (every unclean stop taken for a power cut) the second test's commit is refused.
Also (reads wait for acknowledged writes): a consumer or ListOffsets right after the
acknowledgement sees the records, the high watermark past them
(tests/interop/test_transactions.py::test_hung_transaction_is_aborted_and_its_producer_fenced
read (0, 0) without ``ReplicaManager.acknowledged_visible``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from support.cutfs import CutFs
from support.harness import wait_until
from support.power_cut import PowerCutBroker

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

TOPIC = "txn-writes"
RECORDS = 50


def read(bootstrap: str, isolation: str) -> list[bytes]:
    """Every value a consumer of ``isolation`` reads from the start to the end of the partition."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"txn-writes-{isolation}", "enable.auto.commit": False,
                  "isolation.level": isolation, "enable.partition.eof": True})
    try:
        c.assign([CTopicPartition(TOPIC, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is None:
                values.append(m.value() or b"")
            elif m.error().code() == KafkaError._PARTITION_EOF:
                return values
        raise AssertionError(f"no end of {TOPIC} reached ({isolation}): {len(values)} read")
    finally:
        c.close()


def transactional(bootstrap: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "txn-writes", "linger.ms": 0,
                  "message.timeout.ms": 120_000, "transaction.timeout.ms": 120_000})
    p.init_transactions(120)
    return p


def begin_acknowledged(producer: Producer, prefix: bytes, before_the_rest: Callable[[], None]) -> None:
    """A transaction of RECORDS records ``prefix-i``, each acknowledged; left open. The first
    is acknowledged (its partition added to the transaction, the coordinator's write durable)
    before ``before_the_rest`` runs."""
    producer.begin_transaction()
    acked: list[bytes] = []
    for i in range(RECORDS):
        producer.produce(TOPIC, b"%s-%d" % (prefix, i), partition=0,
                         on_delivery=lambda err, msg: acked.append(msg.value()) if err is None else None)
        if i == 0:
            assert producer.flush(60) == 0
            before_the_rest()
    assert producer.flush(60) == 0
    assert len(acked) == RECORDS, "the transaction's records were not all acknowledged"


def test_an_acknowledged_transactional_write_lost_by_a_power_cut_is_never_committed(
        cutfs: CutFs, tmp_path: Path) -> None:
    node = PowerCutBroker(cutfs, "txn-writes", tmp_path, {}).start()  # one node: group commit
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})  # kept alive until its answer
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(60)
        producer = transactional(node.bootstrap)
        # A committed transaction first: its commit made its writes durable, a cut keeps them.
        producer.begin_transaction()
        for i in range(RECORDS):
            producer.produce(TOPIC, b"committed-%d" % i, partition=0)
        producer.commit_transaction(120)
        # Then one whose records are acknowledged and not yet durable when the power goes.
        begin_acknowledged(producer, b"lost", node.stall_group_commit)
        dropped = cutfs.cut()  # (the stalled fsyncs fail: the power is gone)
        node.broker.kill()
        cutfs.thaw()
        node.start()
        # (The first record's round may have ended before the stall.)
        survived = [v for v in read(node.bootstrap, "read_uncommitted") if v.startswith(b"lost-")]
        assert len(survived) <= 1, f"the cut came after the records were durable: nothing to prove ({dropped})"
        committed, abortable = True, False
        try:
            producer.commit_transaction(120)
        except KafkaException as e:
            committed, abortable = False, e.args[0].txn_requires_abort()
            print(f"commit after the cut refused: {e}")
        values = read(node.bootstrap, "read_committed")
        report = (f"cut dropped {dropped}; commit after the cut {'succeeded' if committed else 'refused'}; "
                  f"read_committed holds {len(values)} records")
        print(report)
        assert values == [b"committed-%d" % i for i in range(RECORDS)], f"not the committed records\n{report}"
        assert not committed, f"committed without its acknowledged records: {RECORDS} missing\n{report}"
        assert abortable, f"the refusal is not abortable: the producer cannot go on\n{report}"
        producer.abort_transaction(120)  # (its epoch bumped: KIP-360) and it goes on
        producer.begin_transaction()
        producer.produce(TOPIC, b"next", partition=0)
        producer.commit_transaction(120)
        wait_until(lambda: read(node.bootstrap, "read_committed")[-1:] == [b"next"],
                   "the producer's next transaction committed", 120)
        fresh = transactional(node.bootstrap)  # the id starts cleanly: the open transaction was ended
        fresh.begin_transaction()
        fresh.produce(TOPIC, b"after", partition=0)
        fresh.commit_transaction(120)
        wait_until(lambda: read(node.bootstrap, "read_committed")[-1:] == [b"after"],
                   "the new instance's commit visible (its markers written)", 120)
    finally:
        node.stop()


def test_a_kill_loses_no_acknowledged_transactional_write_and_the_transaction_commits(
        cutfs: CutFs, tmp_path: Path) -> None:
    node = PowerCutBroker(cutfs, "txn-writes-kill", tmp_path, {}).start()  # one node: group commit
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(60)
        producer = transactional(node.bootstrap)
        begin_acknowledged(producer, b"kept", node.stall_group_commit)
        # No cut: the page cache (cutfs's unsynced state) keeps every write, the last 49 unsynced.
        node.kill()
        node.start()
        producer.commit_transaction(120)
        # EndTxn is answered once the commit is decided (PrepareCommit); the marker that moves
        # the last stable offset past the records follows it, as in Kafka.
        wait_until(lambda: read(node.bootstrap, "read_committed") != [],
                   "the commit's marker written (read_committed reads past the transaction)", 120)
        values = read(node.bootstrap, "read_committed")
        print(f"after the kill: read_committed holds {len(values)} records")
        assert values == [b"kept-%d" % i for i in range(RECORDS)], "not the transaction's records"
    finally:
        node.stop()

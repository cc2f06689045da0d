"""The late write transaction version 2 shuts out (KIP-890 part 2), through the tests' TCP proxy.

A transactional producer's Produce is held in the proxy (``FaultProxy.hold``) while its
transaction is aborted and the next one begins; then it is released and reaches the partition
leader late. What happens to it is the difference between the two transaction versions, on one
broker whose finalized ``transaction.version`` is set between the runs:

- version 2: the abort's EndTxn v5 bumped the producer's epoch, so the leader's implicit add
  for the late Produce v12 (the old epoch) is refused by the coordinator — INVALID_PRODUCER_EPOCH,
  as Kafka 4.4 answers (conformance ``transactions-v2/late-produce-first``). The record is never
  written, no transaction opens on the partition (the LSO is the high watermark at once), and
  read_committed sees only the next transaction's record.
- version 1 (the old behaviour, documented here): the epoch stays, the next transaction added
  the partition again (AddPartitionsToTxn), so the late Produce v11 passes KIP-890 part 1's check
  — the partition *is* in a transaction under that epoch — and joins it: a record of the aborted
  transaction is committed with the next one. (Clients that bump their epoch themselves after a
  failed batch, KIP-360, avoid it; the protocol did not.)

Mutant (not committed): the coordinator's end of a v2 transaction keeping the epoch
(``prepare_abort_or_commit`` without the bump) — the version 2 run fails as version 1 does: the
late record is accepted into the next transaction.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from typing import Any

import pytest
from clients import RawConnection, ensure_topic, read_values, request_module

from eoslog.protocol.errors import ErrorCode
from eoslog.records import build_batch
from support.faults import PRODUCE, FaultProxy
from support.features import finalize
from support.harness import BrokerProcess, wait_until
from support.rawkafka import coordinator_id

TOPIC = "late-write"


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, FaultProxy]]:
    broker = BrokerProcess(tmp_path_factory.mktemp("late") / "data").start()
    proxy = FaultProxy("127.0.0.1", broker.port).start()
    ensure_topic(broker.bootstrap, TOPIC, 2)
    try:
        yield broker, proxy
    finally:
        proxy.stop()
        broker.stop()


class Producer:
    """A transactional producer spoken by hand: version 1 or 2 of the transaction protocol."""

    def __init__(self, bootstrap: str, conn: RawConnection, txn_id: str, transaction_version: int) -> None:
        self.conn, self.txn_id, self.v2 = conn, txn_id, transaction_version == 2
        wait_until(lambda: coordinator_id(bootstrap, txn_id) is not None, "the transaction coordinator")
        m = request_module(22, 5)
        r = conn.call(m.InitProducerIdRequest(transactional_id=txn_id, transaction_timeout=datetime.timedelta(
            seconds=60), producer_id=-1, producer_epoch=-1))
        assert r.error_code == 0
        self.pid, self.epoch = int(r.producer_id), int(r.producer_epoch)

    def add(self, partition: int) -> None:
        """Version 1 only: AddPartitionsToTxn (version 2 has the leader add it)."""
        m = request_module(24, 3)
        r = self.conn.call(m.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.txn_id, v3_and_below_producer_id=self.pid,
            v3_and_below_producer_epoch=self.epoch,
            v3_and_below_topics=(m.AddPartitionsToTxnTopic(name=TOPIC, partitions=(partition,)),)))
        assert r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0

    def produce_request(self, partition: int, value: bytes, sequence: int) -> Any:
        batch = build_batch([(None, value, ())], timestamp=int(time.time() * 1000), producer_id=self.pid,
                            producer_epoch=self.epoch, base_sequence=sequence, transactional=True)
        m = request_module(0, 12 if self.v2 else 11)
        return m.ProduceRequest(transactional_id=self.txn_id, acks=-1, timeout=datetime.timedelta(seconds=30),
                                topic_data=(m.TopicProduceData(name=TOPIC, partition_data=(
                                    m.PartitionProduceData(index=partition, records=batch),)),))

    def end(self, commit: bool) -> None:
        m = request_module(26, 5 if self.v2 else 4)
        r = self.conn.call(m.EndTxnRequest(transactional_id=self.txn_id, producer_id=self.pid,
                                           producer_epoch=self.epoch, committed=commit))
        assert r.error_code == 0
        if self.v2:
            self.pid, self.epoch = int(r.producer_id), int(r.producer_epoch)
        wait_until(lambda: self.state() in ("CompleteCommit", "CompleteAbort"), "the markers")

    def state(self) -> str:
        m = request_module(65, 0)
        r = self.conn.call(m.DescribeTransactionsRequest(transactional_ids=(self.txn_id,)))
        return str(r.transaction_states[0].transaction_state)


def produce_code(conn: RawConnection, request: Any) -> int:
    return int(conn.call(request).responses[0].partition_responses[0].error_code)


def offsets(conn: RawConnection, partition: int) -> tuple[int, int]:
    """(last stable offset, high watermark) of the partition."""
    def latest(isolation: int) -> int:
        m = request_module(2, 7)
        r = conn.call(m.ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=(m.ListOffsetsTopic(
            name=TOPIC, partitions=(m.ListOffsetsPartition(partition_index=partition, timestamp=-1,
                                                           current_leader_epoch=-1),)),)))
        return int(r.topics[0].partitions[0].offset)
    return latest(1), latest(0)


@pytest.mark.parametrize(("transaction_version", "partition"), [(2, 0), (1, 1)])
def test_a_late_produce_after_the_abort(rig: tuple[BrokerProcess, FaultProxy], transaction_version: int,
                                        partition: int) -> None:
    broker, proxy = rig
    finalize(broker.bootstrap, transaction_version)
    with RawConnection(broker.bootstrap) as conn, RawConnection(proxy.address) as late_conn:
        p = Producer(broker.bootstrap, conn, f"late-v{transaction_version}", transaction_version)
        if not p.v2:
            p.add(partition)
        # The first transaction's Produce leaves, and is held on the way.
        late = p.produce_request(partition, b"from the aborted transaction", 0)
        held = proxy.held[PRODUCE]
        proxy.hold(PRODUCE)
        correlation = late_conn.send(late)
        wait_until(lambda: proxy.held[PRODUCE] == held + 1, "the Produce held in the proxy")
        p.end(commit=False)  # the application gave up on it and aborts
        if not p.v2:
            p.add(partition)  # the next transaction begins with the same partition
        proxy.release()  # it reaches the leader now
        got, answer = late_conn.receive(late)
        assert got == correlation
        code = int(answer.responses[0].partition_responses[0].error_code)
        if p.v2:
            assert code == ErrorCode.invalid_producer_epoch, ErrorCode(code).name
            lso, hw = offsets(conn, partition)
            assert lso == hw  # no transaction was opened by it
            next_sequence = 0
        else:
            assert code == ErrorCode.none  # the old behaviour: it joins the next transaction
            next_sequence = 1
        assert produce_code(conn, p.produce_request(partition, b"next", next_sequence)) == 0
        p.end(commit=True)
        lso, hw = offsets(conn, partition)
        assert lso == hw
    committed = read_values(broker.bootstrap, TOPIC, partition)
    if transaction_version == 2:
        assert committed == ["next"]
        assert "from the aborted transaction" not in read_values(broker.bootstrap, TOPIC, partition,
                                                                 isolation="read_uncommitted")
    else:
        assert committed == ["from the aborted transaction", "next"]


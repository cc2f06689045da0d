"""Two-phase commit (KIP-939) end to end: eoslog producers in their own processes against
the real broker process, read back by librdkafka (confluent-kafka) read_committed.

- A producer with ``transaction.two.phase.commit.enable`` writes to two partitions,
  ``prepare_transaction()``, and is killed (SIGKILL). Nothing is visible and the LSO is
  pinned; the coordinator's timeout scan aborts a plain transaction meanwhile but never the
  prepared one, also after the broker is killed and restarted. A new process with the same
  transactional id, ``init_transactions(keep_prepared_txn=True)``, finds exactly the state
  the first one prepared, and ``complete_transaction`` commits it: each record is read once.
- A mismatching state aborts instead; ``keep_prepared_txn=False`` aborts like any
  InitProducerId; a broker that does not allow 2PC refuses it; a prepared producer that is
  still alive is fenced by the new instance, at the coordinator and in the partitions.
- ``close()`` of a prepared producer leaves its transaction prepared.

Waiting loops are hang guards with generous deadlines; nothing asserts how long anything took.
"""

from __future__ import annotations

import datetime
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from clients import RawConnection, ensure_topic, read_values, request_module
from test_transactions import WAIT_S, describe_transaction, partition_offsets

from eoslog.client import PreparedTxnState
from eoslog.client.errors import InvalidTxnStateError, ProducerFencedError, TransactionalIdAuthorizationFailedError
from eoslog.client.producer import Producer
from eoslog.protocol.errors import ErrorCode
from eoslog.records import build_batch
from support.harness import BrokerProcess, wait_until

ABORT_INTERVAL_MS = 200
TWO_PC_TIMEOUT_MS = 2**31 - 1
RECORDS = 3  # per partition

# Producer A: begin, write RECORDS to partitions 0 and 1, prepare, print the state, wait to
# be killed. It asks for a 1 s transaction timeout (bypassing the config check that forbids
# setting one with 2PC) to show that the broker ignores it for a 2PC transaction.
PREPARE = """
import sys
from eoslog.client.producer import Producer
bootstrap, txn_id, topic = sys.argv[1:4]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
              "transaction.two.phase.commit.enable": True, "linger.ms": 0})
p._aio._tm.transaction_timeout_ms = 1000
p.init_transactions()
p.begin_transaction()
for partition in (0, 1):
    for i in range(int(sys.argv[4])):
        p.send(topic, f"{txn_id}-{partition}-{i}".encode(), partition=partition)
print(p.prepare_transaction().to_string(), flush=True)
sys.stdin.read()
"""

# Producer B: init keeping the prepared transaction, print what it found, complete it with
# the state the external coordinator stored (argv[3]).
COMPLETE = """
import sys
from eoslog.client import PreparedTxnState
from eoslog.client.producer import Producer
bootstrap, txn_id, stored = sys.argv[1:4]
with Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
               "transaction.two.phase.commit.enable": True}) as p:
    p.init_transactions(keep_prepared_txn=True)
    found = p.prepared_transaction_state()
    print(found.to_string() if found is not None else "none", flush=True)
    if found is not None:
        p.complete_transaction(PreparedTxnState.from_string(stored))
"""


def two_pc_config(bootstrap: str, txn_id: str) -> dict[str, object]:
    return {"bootstrap.servers": bootstrap, "transactional.id": txn_id,
            "transaction.two.phase.commit.enable": True, "linger.ms": 0}


def prepare_and_kill(bootstrap: str, txn_id: str, topic: str) -> PreparedTxnState:
    """Producer A in its own process: prepare, then SIGKILL it. Returns its prepared state."""
    proc = subprocess.Popen([sys.executable, "-c", PREPARE, bootstrap, txn_id, topic, str(RECORDS)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
    finally:
        proc.kill()
        proc.wait(30)
    assert line, f"producer A exited with {proc.returncode} before preparing"
    state = PreparedTxnState.from_string(line)
    assert state.has_transaction
    return state


def records_of(txn_id: str) -> list[str]:
    return sorted(f"{txn_id}-{p}-{i}" for p in (0, 1) for i in range(RECORDS))


def read_committed(bootstrap: str, topic: str, *, settled: bool = True) -> list[str]:
    """Both partitions read_committed up to their end (the LSO: with ``settled`` False that
    of a still open transaction), sorted."""
    return sorted(v for p in (0, 1) for v in read_values(bootstrap, topic, p, settled=settled))


def lso_pinned(bootstrap: str, topic: str) -> bool:
    return all(partition_offsets(bootstrap, topic, p) == (0, RECORDS) for p in (0, 1))


def all_stable(bootstrap: str, topic: str) -> bool:
    """Every partition's LSO is its high watermark: the transaction ended (with its marker)."""
    return all(partition_offsets(bootstrap, topic, p) == (RECORDS + 1, RECORDS + 1) for p in (0, 1))


def time_out_a_plain_transaction(bootstrap: str, txn_id: str, topic: str) -> None:
    """A plain transaction with a 1 s timeout is left open until the coordinator aborts it:
    proof that the timeout scan ran over every open transaction meanwhile."""
    with Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 1000,
                   "linger.ms": 0}) as p:
        p.init_transactions(WAIT_S)
        p.begin_transaction()
        p.send(topic, b"left open", partition=0).result(WAIT_S)
        wait_until(lambda: describe_transaction(bootstrap, txn_id).transaction_state == "CompleteAbort",
              f"the coordinator to abort {txn_id} on its timeout")
        # Transaction version 2 (the broker's level): the abort bumped the epoch, so the
        # coordinator takes this EndTxn for a retry of the abort and refuses to commit it —
        # INVALID_TXN_STATE, fatal, as Kafka 4.4 answers (version 1 answered PRODUCER_FENCED).
        with pytest.raises(InvalidTxnStateError) as refused:
            p.commit_transaction(WAIT_S)
        assert refused.value.fatal


def assert_still_prepared(bootstrap: str, txn_id: str, topic: str, state: PreparedTxnState) -> None:
    d = describe_transaction(bootstrap, txn_id)
    assert d.error_code == 0 and d.transaction_state == "Ongoing"
    assert (d.producer_id, d.producer_epoch) == (state.producer_id, state.epoch)
    assert d.transaction_timeout == datetime.timedelta(milliseconds=TWO_PC_TIMEOUT_MS)
    assert lso_pinned(bootstrap, topic)


@contextmanager
def own_broker(tmp_path: Path, **overrides: str) -> Iterator[BrokerProcess]:
    """A 2PC-enabled broker of one test (which kills and restarts it)."""
    broker = BrokerProcess(tmp_path / "data", overrides={"transaction.two.phase.commit.enable": "true",
                                                         **overrides}).start()
    try:
        yield broker
    finally:
        if broker.alive():
            broker.stop()


@pytest.fixture(scope="module")
def two_pc_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("two-pc") / "data", overrides={
        "transaction.two.phase.commit.enable": "true",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": str(ABORT_INTERVAL_MS),
    }).start()
    yield b
    if b.alive():
        b.stop()


def test_prepared_transaction_survives_timeouts_and_a_broker_crash_and_a_new_process_commits_it(
    tmp_path: Path,
) -> None:
    with own_broker(tmp_path, **{"transaction.abort.timed.out.transaction.cleanup.interval.ms":
                                 str(ABORT_INTERVAL_MS)}) as broker:
        bootstrap, topic, txn_id = broker.bootstrap, "prepared", "sink-0"
        ensure_topic(bootstrap, topic, 2)
        ensure_topic(bootstrap, "plain", 1)
        state = prepare_and_kill(bootstrap, txn_id, topic)
        assert lso_pinned(bootstrap, topic)
        assert read_committed(bootstrap, topic, settled=False) == []
        # A plain transaction, younger than the prepared one and with a shorter timeout than
        # A asked for, is aborted by the timeout scan; the prepared one is not.
        time_out_a_plain_transaction(bootstrap, "plain-1", "plain")
        assert_still_prepared(bootstrap, txn_id, topic, state)

        broker.restart(kill=True)
        time_out_a_plain_transaction(bootstrap, "plain-2", "plain")
        assert_still_prepared(bootstrap, txn_id, topic, state)

        b = subprocess.run([sys.executable, "-c", COMPLETE, bootstrap, txn_id, state.to_string()],
                           capture_output=True, text=True, timeout=WAIT_S * 2)
        assert b.returncode == 0, b.stderr[-3000:]
        assert b.stdout.strip() == state.to_string()  # B found exactly what A prepared
        # CompleteCommit is written once every marker is (so the LSOs have moved by then).
        wait_until(lambda: describe_transaction(bootstrap, txn_id).transaction_state == "CompleteCommit",
                   "the commit markers and CompleteCommit")
        assert all_stable(bootstrap, topic)
        assert read_committed(bootstrap, topic) == records_of(txn_id)


def test_a_mismatching_state_aborts_the_prepared_transaction(two_pc_broker: BrokerProcess) -> None:
    bootstrap, topic, txn_id = two_pc_broker.bootstrap, "mismatch", "sink-mismatch"
    ensure_topic(bootstrap, topic, 2)
    state = prepare_and_kill(bootstrap, txn_id, topic)
    with Producer(two_pc_config(bootstrap, txn_id)) as b:
        b.init_transactions(WAIT_S, keep_prepared_txn=True)
        assert b.prepared_transaction_state() == state
        # The external coordinator recorded another transaction (say, the one before).
        b.complete_transaction(PreparedTxnState(state.producer_id, state.epoch + 1), WAIT_S)
        assert b.prepared_transaction_state() is None
        wait_until(lambda: describe_transaction(bootstrap, txn_id).transaction_state == "CompleteAbort",
                   "the abort markers and CompleteAbort")
        assert all_stable(bootstrap, topic)
        assert read_committed(bootstrap, topic) == []
        b.begin_transaction()  # and B goes on with transactions of its own
        b.send(topic, b"after", partition=0)
        b.commit_transaction(WAIT_S)
    assert read_values(bootstrap, topic, 0) == ["after"]


def test_init_without_keep_prepared_aborts_it(two_pc_broker: BrokerProcess) -> None:
    bootstrap, topic, txn_id = two_pc_broker.bootstrap, "not-kept", "sink-not-kept"
    ensure_topic(bootstrap, topic, 2)
    prepare_and_kill(bootstrap, txn_id, topic)
    with Producer(two_pc_config(bootstrap, txn_id)) as b:
        b.init_transactions(WAIT_S)
        assert b.prepared_transaction_state() is None
    wait_until(lambda: all_stable(bootstrap, topic), "the abort markers")
    assert read_committed(bootstrap, topic) == []
    assert describe_transaction(bootstrap, txn_id).transaction_state == "Empty"  # aborted, then B's epoch


def test_a_broker_that_does_not_allow_2pc_refuses_it(broker: BrokerProcess) -> None:
    with Producer(two_pc_config(broker.bootstrap, "refused")) as p, \
            pytest.raises(TransactionalIdAuthorizationFailedError):
        p.init_transactions(WAIT_S)
    with Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "refused"}) as p:
        p.init_transactions(WAIT_S)  # the same id without 2PC is fine


def test_a_live_prepared_producer_is_fenced_by_the_new_instance(two_pc_broker: BrokerProcess) -> None:
    bootstrap, topic, txn_id = two_pc_broker.bootstrap, "zombie", "sink-zombie"
    ensure_topic(bootstrap, topic, 2)
    a = Producer(two_pc_config(bootstrap, txn_id))
    b = Producer(two_pc_config(bootstrap, txn_id))
    try:
        a.init_transactions(WAIT_S)
        a.begin_transaction()
        for partition in (0, 1):
            for i in range(RECORDS):
                a.send(topic, f"{txn_id}-{partition}-{i}".encode(), partition=partition)
        state = a.prepare_transaction(WAIT_S)
        b.init_transactions(WAIT_S, keep_prepared_txn=True)
        assert b.prepared_transaction_state() == state
        # A is fenced at the coordinator...
        with pytest.raises(ProducerFencedError):
            a.commit_transaction(WAIT_S)
        # ...and in a partition it already wrote to, which only learns of B's epoch from the
        # markers: a batch A had still in hand (its next sequence) must not join the transaction.
        assert produce_as(bootstrap, txn_id, state, topic, 0, sequence=RECORDS) == "INVALID_PRODUCER_EPOCH"
        b.complete_transaction(state, WAIT_S)
    finally:
        a.close(0)
        b.close()
    wait_until(lambda: all_stable(bootstrap, topic), "the commit markers")
    assert read_committed(bootstrap, topic) == records_of(txn_id)


def produce_as(bootstrap: str, txn_id: str, state: PreparedTxnState, topic: str, partition: int,
               sequence: int) -> str:
    """One transactional batch under the prepared producer's id and epoch; the error name."""
    batch = build_batch([(None, b"zombie", ())], timestamp=int(time.time() * 1000),
                        producer_id=state.producer_id, producer_epoch=state.epoch, base_sequence=sequence,
                        transactional=True)
    m = request_module(0, 9)
    with RawConnection(bootstrap) as conn:
        r = conn.call(m.ProduceRequest(
            transactional_id=txn_id, acks=-1, timeout=datetime.timedelta(seconds=10),
            topic_data=(m.TopicProduceData(name=topic, partition_data=(
                m.PartitionProduceData(index=partition, records=batch),)),)))
    return ErrorCode(r.responses[0].partition_responses[0].error_code).name.upper()



def test_close_leaves_a_prepared_transaction_prepared(two_pc_broker: BrokerProcess) -> None:
    bootstrap, topic, txn_id = two_pc_broker.bootstrap, "closed", "sink-closed"
    ensure_topic(bootstrap, topic, 2)
    with Producer(two_pc_config(bootstrap, txn_id)) as a:
        a.init_transactions(WAIT_S)
        a.begin_transaction()
        for partition in (0, 1):
            for i in range(RECORDS):
                a.send(topic, f"{txn_id}-{partition}-{i}".encode(), partition=partition)
        state = a.prepare_transaction(WAIT_S)
    assert_still_prepared(bootstrap, txn_id, topic, state)
    with Producer(two_pc_config(bootstrap, txn_id)) as b:
        b.init_transactions(WAIT_S, keep_prepared_txn=True)
        assert b.prepared_transaction_state() == state
        b.complete_transaction(state, WAIT_S)
    wait_until(lambda: all_stable(bootstrap, topic), "the commit markers")
    assert read_committed(bootstrap, topic) == records_of(txn_id)


def test_the_kept_transaction_survives_a_broker_crash_before_the_new_instance_commits(tmp_path: Path) -> None:
    with own_broker(tmp_path) as broker:
        bootstrap, topic, txn_id = broker.bootstrap, "kept", "sink-kept"
        ensure_topic(bootstrap, topic, 2)
        state = prepare_and_kill(bootstrap, txn_id, topic)
        with Producer(two_pc_config(bootstrap, txn_id)) as b:
            b.init_transactions(WAIT_S, keep_prepared_txn=True)
            assert b.prepared_transaction_state() == state
            # Both pairs (the kept transaction's and B's newer one) are only in __transaction_state now.
            broker.restart(kill=True)
            assert_still_prepared(bootstrap, txn_id, topic, state)
            b.complete_transaction(state, WAIT_S)
        wait_until(lambda: all_stable(bootstrap, topic), "the commit markers")
        assert read_committed(bootstrap, topic) == records_of(txn_id)

"""Transactions with confluent-kafka (librdkafka) against the real broker process.

- Zombie fencing (acceptance 2): two producers with one transactional id; the older
  one's send, sendOffsets and commit each fail as fenced, and ``eoslog dump-log`` of the
  partition shows the seed's picture: the zombie's record at epoch e, the ABORT marker at
  e + 1, the new instance's record and COMMIT at e + 2.
- Timeout (acceptance 3): a producer that begins, writes and hangs is aborted by the
  coordinator; the last stable offset moves on; the hung producer's commit fails as fenced.
- Interleaving (acceptance 4): three producers interleave committed and aborted
  transactions on one partition; read_committed and read_uncommitted consumers each see
  exactly what they should, in log order.
- Crashes: the broker SIGKILLs itself (``EOSLOG_TEST_CRASH_AT``) before PREPARE_COMMIT,
  after it, after the markers and after COMPLETE_COMMIT; after a restart the commit ends
  as committed, the offsets sent in the transaction are committed, and the producer goes on.

Waiting loops are hang guards with generous deadlines; assertions are about what is in the
log and what consumers see, never about how long anything took.
"""

from __future__ import annotations

import datetime
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from clients import RawConnection, ensure_topic, request_module, stored_batches
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from harness import BrokerProcess

WAIT_S = 60.0
ABORT_INTERVAL_MS = 500
CRASH_ENV = "EOSLOG_TEST_CRASH_AT"


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(
        tmp_path_factory.mktemp("txn") / "data",
        overrides={"transaction.abort.timed.out.transaction.cleanup.interval.ms": str(ABORT_INTERVAL_MS)},
    ).start()
    yield b
    if b.alive():
        b.stop()


def producer(bootstrap: str, txn_id: str, **extra: Any) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0, **extra})
    p.init_transactions(WAIT_S)
    return p


def send(p: Producer, topic: str, value: str) -> None:
    """Produce one record and wait until the broker has it."""
    p.produce(topic, value=value.encode())
    assert p.flush(WAIT_S) == 0


def until(condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def read_values(bootstrap: str, topic: str, isolation: str, count: int, partition: int = 0) -> list[str]:
    """Read ``count`` records from the start, then keep polling briefly so that any record
    beyond them (a duplicate, an aborted one) is caught too."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{topic}-{isolation}",
                  "isolation.level": isolation, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, partition, 0)])
    got: list[str] = []
    try:
        deadline = time.monotonic() + WAIT_S
        while len(got) < count and time.monotonic() < deadline:
            got += [m.value().decode() for m in c.consume(100, 0.2) if m.error() is None]
        extra_until = time.monotonic() + 1.0
        while time.monotonic() < extra_until:
            got += [m.value().decode() for m in c.consume(100, 0.2) if m.error() is None]
    finally:
        c.close()
    return got


def partition_offsets(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    """(last stable offset, high watermark) as a Fetch response reports them."""
    m = request_module(1, 12)
    req = m.FetchRequest(
        cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1,
        isolation_level=1, session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=(),
        topics=(m.FetchTopic(topic=topic, partitions=(m.FetchPartition(
            partition=partition, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=1),)),),
    )
    with RawConnection(bootstrap) as conn:
        p = conn.call(req).responses[0].partitions[0]
    return int(p.last_stable_offset), int(p.high_watermark)


def describe_transaction(bootstrap: str, txn_id: str) -> Any:
    """DescribeTransactions, retried while the coordinator is still loading."""
    deadline = time.monotonic() + WAIT_S
    with RawConnection(bootstrap) as conn:
        while True:
            state = conn.call(request_module(65, 0).DescribeTransactionsRequest(
                transactional_ids=(txn_id,))).transaction_states[0]
            if state.error_code != KafkaError.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
                return state
            time.sleep(0.05)


def fenced(e: KafkaException) -> bool:
    err = e.args[0]
    return bool(err.fatal()) and err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                                 KafkaError.INVALID_PRODUCER_EPOCH)


# -- dump-log ---------------------------------------------------------------------------------

_BATCH = re.compile(r"^baseOffset: (\d+) .* producerId: (-?\d+) producerEpoch: (-?\d+) .* isControl: (\w+)")
_RECORD = re.compile(r"^\| offset: (\d+) .*?(?:endTxnMarker: (\w+) coordinatorEpoch: (\d+)|payload: (.*))$")


def dump_entries(data_dir: Path, topic: str) -> list[tuple[int, int, int, str]]:
    """(offset, producer id, producer epoch, payload or marker) from ``eoslog dump-log``."""
    seg = data_dir / f"{topic}-0" / "00000000000000000000.log"
    out = subprocess.run([sys.executable, "-m", "eoslog", "dump-log", "--print-data-log", str(seg)],
                         capture_output=True, text=True, check=True).stdout
    entries = []
    pid = epoch = -1
    for line in out.splitlines():
        if b := _BATCH.match(line):
            pid, epoch = int(b.group(2)), int(b.group(3))
        elif r := _RECORD.match(line):
            what = f"{r.group(2)} coordinatorEpoch: {r.group(3)}" if r.group(2) else r.group(4)
            entries.append((int(r.group(1)), pid, epoch, what))
    return entries


# -- acceptance 2: zombie fencing --------------------------------------------------------------


@pytest.mark.parametrize("operation", ["send", "send_offsets", "commit"])
def test_zombie_is_fenced(txn_broker: BrokerProcess, operation: str) -> None:
    topic, txn_id = f"fence-{operation}", f"zombie-{operation}"
    ensure_topic(txn_broker.bootstrap, topic, 1)
    old = producer(txn_broker.bootstrap, txn_id)
    old.begin_transaction()
    send(old, topic, "thisIsMessageValue1")
    new = producer(txn_broker.bootstrap, txn_id)  # aborts the old instance's transaction
    new.begin_transaction()
    send(new, topic, "thisIsMessageValue2")
    new.commit_transaction(WAIT_S)

    with pytest.raises(KafkaException) as raised:
        if operation == "send":
            send(old, topic, "zombie write")
        elif operation == "send_offsets":
            group = Consumer({"bootstrap.servers": txn_broker.bootstrap, "group.id": f"g-{operation}"})
            try:
                old.send_offsets_to_transaction([TopicPartition(topic, 0, 1)], group.consumer_group_metadata(),
                                                WAIT_S)
            finally:
                group.close()
        else:
            old.commit_transaction(WAIT_S)
    assert fenced(raised.value), raised.value

    entries = dump_entries(txn_broker.data_dir, topic)
    pid, epoch = entries[0][1], entries[0][2]
    assert entries == [
        (0, pid, epoch, "thisIsMessageValue1"),
        (1, pid, epoch + 1, "ABORT coordinatorEpoch: 0"),
        (2, pid, epoch + 2, "thisIsMessageValue2"),
        (3, pid, epoch + 2, "COMMIT coordinatorEpoch: 0"),
    ]
    assert read_values(txn_broker.bootstrap, topic, "read_committed", 1) == ["thisIsMessageValue2"]


# -- acceptance 3: a hung producer's transaction times out -------------------------------------------


def test_hung_transaction_is_aborted_and_its_producer_fenced(txn_broker: BrokerProcess) -> None:
    topic, txn_id = "hung", "hung-producer"
    ensure_topic(txn_broker.bootstrap, topic, 1)
    hung = producer(txn_broker.bootstrap, txn_id, **{"transaction.timeout.ms": 2000})
    hung.begin_transaction()
    send(hung, topic, "never committed")
    assert partition_offsets(txn_broker.bootstrap, topic) == (0, 1)  # the open transaction pins the LSO
    # ... and the producer hangs. The coordinator aborts it with a bumped epoch.
    until(lambda: partition_offsets(txn_broker.bootstrap, topic) == (2, 2), "the timed-out transaction's abort")
    data, marker = stored_batches(txn_broker.data_dir, topic, 0)
    assert marker.is_control and marker.producer_id == data.producer_id
    assert marker.producer_epoch == data.producer_epoch + 1
    state = describe_transaction(txn_broker.bootstrap, txn_id)
    assert (state.transaction_state, int(state.producer_epoch)) == ("CompleteAbort", data.producer_epoch + 1)

    with pytest.raises(KafkaException) as raised:
        hung.commit_transaction(WAIT_S)
    assert fenced(raised.value), raised.value
    assert read_values(txn_broker.bootstrap, topic, "read_committed", 0) == []
    assert read_values(txn_broker.bootstrap, topic, "read_uncommitted", 1) == ["never committed"]


# -- acceptance 4: interleaved transactions on one partition -------------------------------------------


def test_interleaved_transactions_on_one_partition(txn_broker: BrokerProcess) -> None:
    topic = "interleaved"
    ensure_topic(txn_broker.bootstrap, topic, 1)
    names = ("a", "b", "c")
    producers = {n: producer(txn_broker.bootstrap, f"interleave-{n}") for n in names}
    # Round r: every producer writes 3 records, turn by turn; then they end in a rotating
    # order, each committing or aborting by a fixed pattern (so every mix occurs).
    outcomes = {("a", 0): True, ("b", 0): False, ("c", 0): True, ("a", 1): False, ("b", 1): True,
                ("c", 1): False, ("a", 2): True, ("b", 2): True, ("c", 2): True, ("a", 3): False,
                ("b", 3): False, ("c", 3): False}
    written: list[str] = []
    for r in range(4):
        for p in producers.values():
            p.begin_transaction()
        for i in range(3):
            for n in names:
                value = f"{n}-{r}-{i}-{'commit' if outcomes[(n, r)] else 'abort'}"
                send(producers[n], topic, value)
                written.append(value)
        for n in names[r % 3:] + names[:r % 3]:
            if outcomes[(n, r)]:
                producers[n].commit_transaction(WAIT_S)
            else:
                producers[n].abort_transaction(WAIT_S)
    committed = [v for v in written if v.endswith("-commit")]
    assert read_values(txn_broker.bootstrap, topic, "read_uncommitted", len(written)) == written
    assert read_values(txn_broker.bootstrap, topic, "read_committed", len(committed)) == committed
    lso, hw = partition_offsets(txn_broker.bootstrap, topic)
    assert lso == hw == len(written) + 12  # one marker per transaction


# -- crashes around the commit -------------------------------------------------------------------------


@pytest.mark.parametrize(("crash_at", "markers"), [
    ("before_prepare", 1), ("after_prepare", 1), ("after_markers", 2), ("after_complete", 1),
])
def test_broker_crash_during_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    crash_at: str, markers: int) -> None:
    broker = BrokerProcess(tmp_path / "data")
    monkeypatch.setenv(CRASH_ENV, crash_at)
    broker.start()
    monkeypatch.delenv(CRASH_ENV)  # restarts run without the hook
    try:
        _crash_during_commit(broker, markers)
    finally:
        if broker.alive():
            broker.stop()


def _crash_during_commit(broker: BrokerProcess, markers: int) -> None:
    topic, txn_id, group_id, n = "crash", "crash-producer", "crash-group", 10
    ensure_topic(broker.bootstrap, topic, 1)
    p = producer(broker.bootstrap, txn_id, **{"transaction.timeout.ms": 120_000})
    group = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group_id,
                      "isolation.level": "read_committed", "enable.auto.commit": False})
    p.begin_transaction()
    for i in range(n):
        p.produce(topic, value=f"r{i}".encode())
    assert p.flush(WAIT_S) == 0
    p.send_offsets_to_transaction([TopicPartition(topic, 0, 7)], group.consumer_group_metadata(), WAIT_S)

    outcome: list[BaseException | None] = []

    def commit() -> None:
        try:
            p.commit_transaction(4 * WAIT_S)
            outcome.append(None)
        except BaseException as e:  # handed to the test thread
            outcome.append(e)

    committer = threading.Thread(target=commit, daemon=True)
    committer.start()
    until(lambda: not broker.alive(), "the broker to kill itself")
    assert broker.proc is not None and broker.proc.returncode == -9
    broker.start()
    committer.join(4 * WAIT_S)
    assert outcome, "commit_transaction did not return"
    for _ in range(5):  # librdkafka's advice: retry a commit that failed retriably
        error = outcome[-1]
        if error is None:
            break
        assert isinstance(error, KafkaException) and error.args[0].retriable(), error
        commit()
    assert outcome[-1] is None, outcome

    state = describe_transaction(broker.bootstrap, txn_id)
    assert state.transaction_state == "CompleteCommit"
    assert read_values(broker.bootstrap, topic, "read_committed", n) == [f"r{i}" for i in range(n)]
    controls = [h for h in stored_batches(broker.data_dir, topic, 0) if h.is_control]
    assert len(controls) == markers  # re-sent markers after a crash between them and COMPLETE
    committed = group.committed([TopicPartition(topic, 0)], WAIT_S)
    assert committed[0].offset == 7
    # The producer goes on with its next transaction.
    p.begin_transaction()
    send(p, topic, "after")
    p.commit_transaction(WAIT_S)
    assert read_values(broker.bootstrap, topic, "read_committed", n + 1)[-1] == "after"
    group.close()
    assert partition_offsets(broker.bootstrap, topic) == (n + 1 + markers + 1,) * 2
    assert os.environ.get(CRASH_ENV) is None

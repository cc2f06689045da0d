"""Transactions with confluent-kafka (librdkafka) against the real broker process.

- Zombie fencing (acceptance 2): two producers with one transactional id; the older
  one's send, sendOffsets and commit each fail as fenced, and ``eoslog dump-log`` of the
  partition shows what Kafka's kafka-dump-log.sh shows of a fenced zombie: the zombie's
  record at epoch e, the ABORT marker at e + 1, the new instance's record and COMMIT at e + 2.
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clients import RawConnection, ensure_topic, read_values, request_module, stored_batches
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from support.harness import BrokerProcess, wait_until

WAIT_S = 60.0
ABORT_INTERVAL_MS = 500
HUNG_TIMEOUT_MS = 8000  # the hung producer's transaction.timeout.ms
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
    assert read_values(txn_broker.bootstrap, topic) == ["thisIsMessageValue2"]


# -- acceptance 3: a hung producer's transaction times out -------------------------------------------


def test_hung_transaction_is_aborted_and_its_producer_fenced(txn_broker: BrokerProcess) -> None:
    topic, txn_id = "hung", "hung-producer"
    ensure_topic(txn_broker.bootstrap, topic, 1)
    # Long enough for the checks below to run while the transaction is still open on a loaded
    # machine (2 s was not: the abort sometimes came first); the Ongoing state read after the
    # offsets shows they were read while it was open.
    hung = producer(txn_broker.bootstrap, txn_id, **{"transaction.timeout.ms": HUNG_TIMEOUT_MS})
    hung.begin_transaction()
    send(hung, topic, "never committed")
    assert partition_offsets(txn_broker.bootstrap, topic) == (0, 1)  # the open transaction pins the LSO
    assert describe_transaction(txn_broker.bootstrap, txn_id).transaction_state == "Ongoing"
    # ... and the producer hangs. The coordinator aborts it with a bumped epoch.
    # CompleteAbort is written after the ABORT marker: wait for it, then check both.
    wait_until(lambda: describe_transaction(txn_broker.bootstrap, txn_id).transaction_state == "CompleteAbort",
               "the timed-out transaction's abort")
    assert partition_offsets(txn_broker.bootstrap, topic) == (2, 2)
    data, marker = stored_batches(txn_broker.data_dir, topic, 0)
    assert marker.is_control and marker.producer_id == data.producer_id
    assert marker.producer_epoch == data.producer_epoch + 1
    assert int(describe_transaction(txn_broker.bootstrap, txn_id).producer_epoch) == data.producer_epoch + 1

    with pytest.raises(KafkaException) as raised:
        hung.commit_transaction(WAIT_S)
    assert fenced(raised.value), raised.value
    assert read_values(txn_broker.bootstrap, topic) == []
    assert read_values(txn_broker.bootstrap, topic, isolation="read_uncommitted") == ["never committed"]


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
    assert read_values(txn_broker.bootstrap, topic, isolation="read_uncommitted") == written
    assert read_values(txn_broker.bootstrap, topic) == committed
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
    wait_until(lambda: not broker.alive(), "the broker to kill itself")
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

    # A commit retried while the restarted coordinator rolls PrepareCommit forward can be
    # answered before its CompleteCommit record is written: wait for it.
    wait_until(lambda: describe_transaction(broker.bootstrap, txn_id).transaction_state == "CompleteCommit",
          "the transaction to complete")
    assert read_values(broker.bootstrap, topic) == [f"r{i}" for i in range(n)]
    controls = [h for h in stored_batches(broker.data_dir, topic, 0) if h.is_control]
    assert len(controls) == markers  # re-sent markers after a crash between them and COMPLETE
    committed = group.committed([TopicPartition(topic, 0)], WAIT_S)
    assert committed[0].offset == 7
    # The producer goes on with its next transaction.
    p.begin_transaction()
    send(p, topic, "after")
    p.commit_transaction(WAIT_S)
    assert read_values(broker.bootstrap, topic) == [*(f"r{i}" for i in range(n)), "after"]
    group.close()
    assert partition_offsets(broker.bootstrap, topic) == (n + 1 + markers + 1,) * 2
    assert os.environ.get(CRASH_ENV) is None


# -- protocol corners no client reaches (raw requests) --------------------------------------------------

FENCED, INVALID_EPOCH, INVALID_TXN_STATE, ABORTABLE = 90, 47, 48, 120


class RawTxn:
    """One transactional producer spoken by hand over a raw connection."""

    def __init__(self, conn: RawConnection, txn_id: str) -> None:
        self.conn, self.txn_id = conn, txn_id
        self.pid = self.epoch = -1
        self.seq: dict[int, int] = {}

    def init(self, version: int = 4, expected: tuple[int, int] = (-1, -1)) -> int:
        m = request_module(22, version)
        r = self.conn.call(m.InitProducerIdRequest(
            transactional_id=self.txn_id, transaction_timeout=datetime.timedelta(seconds=60),
            **({"producer_id": expected[0], "producer_epoch": expected[1]} if version >= 3 else {})))
        if r.error_code == 0:
            self.pid, self.epoch = int(r.producer_id), int(r.producer_epoch)
        return int(r.error_code)

    def add(self, topic: str, partitions: tuple[int, ...], version: int = 0,
            epoch: int | None = None) -> dict[int, int]:
        m = request_module(24, version)
        topics = (m.AddPartitionsToTxnTopic(name=topic, partitions=partitions),)
        ep = self.epoch if epoch is None else epoch
        if version < 4:
            r = self.conn.call(m.AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=self.txn_id, v3_and_below_producer_id=self.pid,
                v3_and_below_producer_epoch=ep, v3_and_below_topics=topics))
            results = r.results_by_topic_v3_and_below[0].results_by_partition
        else:
            r = self.conn.call(m.AddPartitionsToTxnRequest(transactions=(m.AddPartitionsToTxnTransaction(
                transactional_id=self.txn_id, producer_id=self.pid, producer_epoch=ep, verify_only=True,
                topics=topics),)))
            results = r.results_by_transaction[0].topic_results[0].results_by_partition
        return {int(p.partition_index): int(p.partition_error_code) for p in results}

    def produce(self, topic: str, partition: int, value: str) -> tuple[int, str | None]:
        from eoslog.records import build_batch

        seq = self.seq.get(partition, 0)
        batch = build_batch([(None, value.encode(), ())], timestamp=int(time.time() * 1000),
                            producer_id=self.pid, producer_epoch=self.epoch, base_sequence=seq, transactional=True)
        m = request_module(0, 9)
        r = self.conn.call(m.ProduceRequest(
            transactional_id=self.txn_id, acks=-1, timeout=datetime.timedelta(seconds=10),
            topic_data=(m.TopicProduceData(name=topic, partition_data=(
                m.PartitionProduceData(index=partition, records=batch),)),)))
        p = r.responses[0].partition_responses[0]
        if p.error_code == 0:
            self.seq[partition] = seq + 1
        return int(p.error_code), p.error_message

    def commit_offsets(self, group: str, topic: str, partition: int, offset: int) -> int:
        m = request_module(28, 3)
        r = self.conn.call(m.TxnOffsetCommitRequest(
            transactional_id=self.txn_id, group_id=group, producer_id=self.pid, producer_epoch=self.epoch,
            generation_id=-1, member_id="", group_instance_id=None,
            topics=(m.TxnOffsetCommitRequestTopic(name=topic, partitions=(m.TxnOffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_leader_epoch=-1,
                committed_metadata=""),)),)))
        return int(r.topics[0].partitions[0].error_code)

    def end(self, commit: bool, version: int = 1, epoch: int | None = None) -> int:
        m = request_module(26, version)
        return int(self.conn.call(m.EndTxnRequest(
            transactional_id=self.txn_id, producer_id=self.pid,
            producer_epoch=self.epoch if epoch is None else epoch, committed=commit)).error_code)


def find_txn_coordinator(conn: RawConnection, txn_id: str) -> int:
    r = conn.call(request_module(10, 4).FindCoordinatorRequest(key_type=1, coordinator_keys=(txn_id,)))
    return int(r.coordinators[0].error_code)


def test_a_write_outside_the_transaction_never_opens_one(txn_broker: BrokerProcess) -> None:
    """KIP-890 part 1: Produce to a partition the coordinator did not add is refused, as
    Kafka 3.6+ answers Produce below v12; so is a late write after the commit."""
    topic = "kip890"
    ensure_topic(txn_broker.bootstrap, topic, 2)
    with RawConnection(txn_broker.bootstrap) as conn:
        assert find_txn_coordinator(conn, "raw-890") == 0
        txn = RawTxn(conn, "raw-890")
        assert txn.init() == 0
        assert txn.produce(topic, 0, "stray") == (INVALID_TXN_STATE, "Partition was not added to the transaction")
        assert txn.add(topic, (0,)) == {0: 0}
        assert txn.produce(topic, 0, "in")[0] == 0
        assert txn.produce(topic, 1, "stray")[0] == INVALID_TXN_STATE
        assert txn.add(topic, (0, 1), version=4) == {0: 0, 1: INVALID_TXN_STATE}  # verify only
        assert txn.add(topic, (0, 1), version=5) == {0: 0, 1: ABORTABLE}
        # Offsets too: TxnOffsetCommit before AddOffsetsToTxn is refused, after it accepted.
        assert txn.commit_offsets("raw-890-group", topic, 0, 1) == INVALID_TXN_STATE
        m = request_module(25, 0)
        assert conn.call(m.AddOffsetsToTxnRequest(transactional_id=txn.txn_id, producer_id=txn.pid,
                                                  producer_epoch=txn.epoch, group_id="raw-890-group")).error_code == 0
        assert txn.commit_offsets("raw-890-group", topic, 0, 1) == 0
        assert txn.end(commit=True) == 0
        # Until CompleteCommit (written after the markers) the partition is still the
        # transaction's, and the late write is refused retriably (NOT_ENOUGH_REPLICAS, as Kafka).
        wait_until(lambda: describe_transaction(txn_broker.bootstrap, txn.txn_id).transaction_state == "CompleteCommit",
                   "the commit marker and CompleteCommit")
        assert partition_offsets(txn_broker.bootstrap, topic) == (2, 2)
        assert txn.produce(topic, 0, "late")[0] == INVALID_TXN_STATE
    # Nothing but the one committed record and its marker reached the partitions.
    assert partition_offsets(txn_broker.bootstrap, topic, 1) == (0, 0)
    assert read_values(txn_broker.bootstrap, topic, isolation="read_uncommitted") == ["in"]
    group = Consumer({"bootstrap.servers": txn_broker.bootstrap, "group.id": "raw-890-group"})
    assert group.committed([TopicPartition(topic, 0)], WAIT_S)[0].offset == 1
    group.close()


def test_error_codes_follow_the_request_version(txn_broker: BrokerProcess) -> None:
    """PRODUCER_FENCED for clients that know it, INVALID_PRODUCER_EPOCH for older ones."""
    topic = "versions"
    ensure_topic(txn_broker.bootstrap, topic, 1)
    with RawConnection(txn_broker.bootstrap) as conn:
        assert find_txn_coordinator(conn, "raw-versions") == 0
        txn = RawTxn(conn, "raw-versions")
        assert txn.init() == 0
        old_pid, old = txn.pid, txn.epoch
        assert txn.init() == 0 and txn.epoch == old + 1
        assert txn.add(topic, (0,), version=1, epoch=old) == {0: INVALID_EPOCH}
        assert txn.add(topic, (0,), version=2, epoch=old) == {0: FENCED}
        assert txn.end(True, version=1, epoch=old) == INVALID_EPOCH
        assert txn.end(True, version=3, epoch=old) == FENCED
        assert txn.end(True) == INVALID_TXN_STATE  # nothing open
        assert txn.init(version=3, expected=(old_pid, old + 7)) == INVALID_EPOCH
        assert txn.init(version=4, expected=(old_pid, old + 7)) == FENCED
        assert txn.init(version=4, expected=(old_pid, -1)) == 42  # INVALID_REQUEST: both or neither
        assert txn.init(version=4, expected=(old_pid, txn.epoch)) == 0  # KIP-360 resumption


def test_advertised_transaction_api_versions(txn_broker: BrokerProcess) -> None:
    from clients import broker_api_versions

    versions = broker_api_versions(txn_broker.bootstrap)
    assert {k: versions[k] for k in (22, 24, 25, 26, 27, 28, 61, 65, 66)} == {
        22: (0, 6), 24: (0, 5), 25: (0, 4), 26: (0, 5), 27: (1, 2), 28: (0, 5), 61: (0, 0), 65: (0, 0), 66: (0, 2),
    }
    assert versions[0][1] == 12  # Produce v12: transactions v2 (KIP-890 part 2)


def test_list_and_describe_transactions(txn_broker: BrokerProcess) -> None:
    topic = "listed"
    ensure_topic(txn_broker.bootstrap, topic, 1)
    p = producer(txn_broker.bootstrap, "listed-open")
    p.begin_transaction()
    send(p, topic, "open")
    with RawConnection(txn_broker.bootstrap) as conn:
        m = request_module(66, 1)
        r = conn.call(m.ListTransactionsRequest(state_filters=("Ongoing", "Bogus"), producer_id_filters=(),
                                                duration_filter=-1))
        assert r.error_code == 0 and list(r.unknown_state_filters) == ["Bogus"]
        assert "listed-open" in {t.transactional_id for t in r.transaction_states}
        assert all(t.transaction_state == "Ongoing" for t in r.transaction_states)
        m2 = request_module(66, 2)
        r2 = conn.call(m2.ListTransactionsRequest(state_filters=(), producer_id_filters=(), duration_filter=-1,
                                                  transactional_id_pattern="listed-.*"))
        assert [t.transactional_id for t in r2.transaction_states] == ["listed-open"]
    state = describe_transaction(txn_broker.bootstrap, "listed-open")
    assert (state.error_code, state.transaction_state) == (0, "Ongoing")
    assert [(t.topic, list(t.partitions)) for t in state.topics] == [(topic, [0])]
    p.abort_transaction(WAIT_S)


def test_abort_marker_in_a_later_segment_hides_the_records(txn_broker: BrokerProcess) -> None:
    """A transaction whose ABORT marker lands segments after its first records (after another
    aborted transaction's marker) is still filtered from a read_committed fetch of the earlier
    segment (the copy test's failure before 7222b67)."""
    topic = "span-segments"
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": txn_broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": "2048"})])[topic].result(WAIT_S)
    a = producer(txn_broker.bootstrap, "span-a")
    a.begin_transaction()
    send(a, topic, "a-aborted")
    a.abort_transaction(WAIT_S)  # its marker stays in the first segment
    b = producer(txn_broker.bootstrap, "span-b")
    b.begin_transaction()
    for i in range(40):  # one batch each: several segments roll inside the transaction
        send(b, topic, f"b-aborted-{i}")
    b.abort_transaction(WAIT_S)
    c = producer(txn_broker.bootstrap, "span-c")
    c.begin_transaction()
    send(c, topic, "c-committed")
    c.commit_transaction(WAIT_S)
    assert len(list((txn_broker.data_dir / f"{topic}-0").glob("*.log"))) >= 2  # a roll inside B
    assert read_values(txn_broker.bootstrap, topic) == ["c-committed"]

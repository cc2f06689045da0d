"""The transaction coordinator and transactional partitions: every legal and illegal transition
with its error code per API version, markers, LSO and aborted lists, TxnOffsetCommit visibility,
fencing and timeouts — eoslog against Apache Kafka.

The requests are those of a transactions-v1 client (EndTxn up to v4, AddPartitionsToTxn v3 and
below, Produce v11 and below, TxnOffsetCommit v4 and below), which both brokers still serve with
transaction.version=2 finalized (librdkafka, kafka-python, aiokafka are such clients): the
catalogue caps those versions. Both run KIP-890 part 1's verification. Transactions v2 (part 2)
are test_conformance_transactions_v2.py's; KIP-939 two-phase commit (InitProducerId v6) is not in
Kafka 4.4's stable versions.
"""

from __future__ import annotations

from conformance.session import Broker, Catalogue, Target
from conformance.steps import (
    ADD_OFFSETS_TO_TXN,
    END_TXN,
    INIT_PRODUCER_ID,
    LATEST,
    PRODUCE,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    TXN_OFFSET_COMMIT,
    add_offsets,
    add_partitions,
    batch,
    create_topic,
    describe_producers,
    describe_txn,
    end_txn,
    fetch,
    find_coordinator,
    init_txn,
    list_offsets,
    list_txns,
    offset_fetch,
    produce,
    settle,
    txn_offset_commit,
    txn_state,
)

CATALOGUE = Catalogue("transactions", caps={END_TXN: 4, PRODUCE: 11, TXN_OFFSET_COMMIT: 4})
session = CATALOGUE.session


def test_session(session_name: str, brokers: tuple[Broker, Broker]) -> None:
    CATALOGUE.run(session_name, brokers)


def txn_batch(values: list[bytes], pid: int, epoch: int, seq: int) -> bytes:
    return batch(values, pid=pid, epoch=epoch, seq=seq, txn=True)


def both_isolations(t: Target, topic: str, partition: int = 0) -> None:
    for isolation in (READ_UNCOMMITTED, READ_COMMITTED):
        fetch(t, topic, partition, 0, isolation=isolation)
        list_offsets(t, topic, partition, LATEST, isolation=isolation)


def open_txn(t: Target, txn_id: str, topic: str, partitions: list[int], *, timeout_ms: int = 60000,
             values: list[bytes] | None = None) -> tuple[int, int]:
    """FindCoordinator, InitProducerId, AddPartitionsToTxn and one transactional batch per partition."""
    find_coordinator(t, txn_id)
    pid, epoch, _ = init_txn(t, txn_id, timeout_ms=timeout_ms)
    add_partitions(t, txn_id, pid, epoch, topic, partitions)
    for p in partitions:
        produce(t, topic, p, txn_batch(values or [b"t1", b"t2"], pid, epoch, 0), txn_id=txn_id)
    return pid, epoch


@session("commit", "a transaction over two partitions: open (LSO held, Ongoing), committed (markers, "
         "LSO = HW), as Fetch, ListOffsets, DescribeTransactions, ListTransactions and DescribeProducers see it")
def _commit(t: Target) -> None:
    create_topic(t, "txn-commit", 2)
    pid, epoch = open_txn(t, "txn-commit", "txn-commit", [0, 1])
    both_isolations(t, "txn-commit")
    describe_txn(t, "txn-commit", label="describe open")
    list_txns(t, states=("Ongoing",), pids=(pid,), label="list ongoing")
    describe_producers(t, "txn-commit", [0, 1], label="producers open")
    end_txn(t, "txn-commit", pid, epoch, True)
    settle(t, "txn-commit")
    both_isolations(t, "txn-commit")
    fetch(t, "txn-commit", 1, 0, isolation=READ_COMMITTED)
    describe_txn(t, "txn-commit", label="describe committed")
    list_txns(t, pids=(pid,), label="list after")
    describe_producers(t, "txn-commit", [0, 1], label="producers committed")


@session("abort", "an aborted transaction then a committed one: aborted lists for read_committed, "
         "markers for read_uncommitted")
def _abort(t: Target) -> None:
    create_topic(t, "txn-abort")
    pid, epoch = open_txn(t, "txn-abort", "txn-abort", [0], values=[b"a1", b"a2"])
    end_txn(t, "txn-abort", pid, epoch, False)
    settle(t, "txn-abort")
    add_partitions(t, "txn-abort", pid, epoch, "txn-abort", [0])
    produce(t, "txn-abort", 0, txn_batch([b"c1"], pid, epoch, 2), txn_id="txn-abort")
    end_txn(t, "txn-abort", pid, epoch, True)
    settle(t, "txn-abort")
    both_isolations(t, "txn-abort")
    fetch(t, "txn-abort", 0, 1, isolation=READ_COMMITTED, label="read_committed from inside the aborted one")
    describe_producers(t, "txn-abort", [0])


@session("empty-transaction", "EndTxn without any partition or offsets added (v2: an abort of nothing is "
         "allowed and bumps the epoch; a commit of nothing is not)")
def _empty(t: Target) -> None:
    find_coordinator(t, "txn-empty")
    pid, epoch, _ = init_txn(t, "txn-empty")
    end_txn(t, "txn-empty", pid, epoch, True, label="commit nothing")
    end_txn(t, "txn-empty", pid, epoch, False, label="abort nothing")
    settle(t, "txn-empty")  # Kafka writes CompleteAbort after answering, at its own pace
    describe_txn(t, "txn-empty")


@session("end-txn-retry", "EndTxn repeated after completion: the same result, then the opposite one, "
         "at every EndTxn version")
def _end_retry(t: Target) -> None:
    create_topic(t, "txn-retry")
    pid, epoch = open_txn(t, "txn-retry", "txn-retry", [0])
    end_txn(t, "txn-retry", pid, epoch, True)
    settle(t, "txn-retry")
    for v in range(0, t.v(END_TXN) + 1):
        end_txn(t, "txn-retry", pid, epoch, True, version=v, label=f"commit again v{v}")
        end_txn(t, "txn-retry", pid, epoch, False, version=v, label=f"abort after commit v{v}")
    describe_txn(t, "txn-retry")


@session("stale-epoch-per-version", "a fenced producer's AddPartitionsToTxn, AddOffsetsToTxn, "
         "TxnOffsetCommit, EndTxn and InitProducerId at every version (PRODUCER_FENCED vs INVALID_PRODUCER_EPOCH)")
def _stale(t: Target) -> None:
    create_topic(t, "txn-stale")
    find_coordinator(t, "txn-stale")
    pid, old, _ = init_txn(t, "txn-stale")
    _, new, _ = init_txn(t, "txn-stale", label="second instance")
    for v in range(0, 4):
        add_partitions(t, "txn-stale", pid, old, "txn-stale", [0], version=v, label=f"AddPartitionsToTxn v{v}")
    for v in range(0, t.v(ADD_OFFSETS_TO_TXN) + 1):
        add_offsets(t, "txn-stale", pid, old, "txn-stale-group", version=v, label=f"AddOffsetsToTxn v{v}")
    for v in range(0, t.v(END_TXN) + 1):
        end_txn(t, "txn-stale", pid, old, True, version=v, label=f"EndTxn v{v}")
    for v in range(3, t.v(INIT_PRODUCER_ID) + 1):
        init_txn(t, "txn-stale", pid=pid, epoch=old - 1 if old > 0 else 0, version=v,
                 label=f"InitProducerId v{v} naming an older epoch")
    add_partitions(t, "txn-stale", pid, new, "txn-stale", [0], label="current epoch")
    add_offsets(t, "txn-stale", pid, new, "txn-stale-group", label="current epoch offsets")
    for v in range(0, t.v(TXN_OFFSET_COMMIT) + 1):
        txn_offset_commit(t, "txn-stale", "txn-stale-group", pid, old, "txn-stale", 0, 5, version=v,
                          label=f"TxnOffsetCommit v{v}")
    for v in range(3, t.v(PRODUCE) + 1):
        produce(t, "txn-stale", 0, txn_batch([b"zombie"], pid, old, 0), txn_id="txn-stale", version=v,
                label=f"Produce v{v} from the old epoch")
    end_txn(t, "txn-stale", pid, new, False)
    settle(t, "txn-stale")


@session("wrong-producer-id", "AddPartitionsToTxn, AddOffsetsToTxn and EndTxn naming another producer id")
def _wrong_pid(t: Target) -> None:
    create_topic(t, "txn-wrongpid")
    find_coordinator(t, "txn-wrongpid")
    pid, epoch, _ = init_txn(t, "txn-wrongpid")
    add_partitions(t, "txn-wrongpid", pid + 7, epoch, "txn-wrongpid", [0])
    add_offsets(t, "txn-wrongpid", pid + 7, epoch, "g")
    end_txn(t, "txn-wrongpid", pid + 7, epoch, True)
    init_txn(t, "txn-wrongpid", pid=pid + 7, epoch=epoch, label="InitProducerId naming another id")


@session("unknown-transactional-id", "requests naming a transactional id the coordinator never saw")
def _unknown(t: Target) -> None:
    create_topic(t, "txn-unknown")
    find_coordinator(t, "txn-never")
    add_partitions(t, "txn-never", 1, 0, "txn-unknown", [0])
    add_offsets(t, "txn-never", 1, 0, "g")
    end_txn(t, "txn-never", 1, 0, True)
    describe_txn(t, "txn-never", "txn-never-2")
    init_txn(t, "txn-never", pid=1, epoch=0, label="InitProducerId naming an id and epoch")


@session("transaction-timeout-bounds", "InitProducerId with a timeout above transaction.max.timeout.ms, "
         "zero and negative")
def _timeout_bounds(t: Target) -> None:
    find_coordinator(t, "txn-bounds")
    for timeout in (900001, 0, -1, 900000):
        init_txn(t, "txn-bounds", timeout_ms=timeout, label=f"timeout {timeout}")


@session("unknown-topic-in-transaction", "AddPartitionsToTxn with an unknown topic among known ones")
def _unknown_topic(t: Target) -> None:
    create_topic(t, "txn-known")
    find_coordinator(t, "txn-unknown-topic")
    pid, epoch, _ = init_txn(t, "txn-unknown-topic")
    add_partitions(t, "txn-unknown-topic", pid, epoch, "no-such-topic", [0])
    add_partitions(t, "txn-unknown-topic", pid, epoch, "txn-known", [0, 9])
    describe_txn(t, "txn-unknown-topic")


@session("produce-without-add-partitions", "a transactional batch to a partition not added to the "
         "transaction (KIP-890 verification), and a non-transactional batch inside a transaction")
def _unverified(t: Target) -> None:
    create_topic(t, "txn-verify", 2)
    pid, epoch = open_txn(t, "txn-verify", "txn-verify", [0])
    for v in range(3, t.v(PRODUCE) + 1):
        produce(t, "txn-verify", 1, txn_batch([b"x"], pid, epoch, 0), txn_id="txn-verify", version=v,
                label=f"transactional batch, partition not added, Produce v{v}")
    produce(t, "txn-verify", 0, batch([b"y"], pid=pid, epoch=epoch, seq=2),
            label="non-transactional batch in an open transaction")
    end_txn(t, "txn-verify", pid, epoch, False)
    settle(t, "txn-verify")
    both_isolations(t, "txn-verify", 1)


@session("fencing", "a second InitProducerId while the first instance's transaction is open: the open "
         "transaction is aborted, the old epoch fenced everywhere")
def _fencing(t: Target) -> None:
    create_topic(t, "txn-fence")
    pid, old = open_txn(t, "txn-fence", "txn-fence", [0])
    _, _, first = init_txn(t, "txn-fence", label="second instance, first answer")
    if int(first.error_code) != 0:
        t.until("the fencing InitProducerId", lambda: init_txn(t, "txn-fence", record=False)[2],
                lambda r: int(r.error_code) == 0)
    describe_txn(t, "txn-fence", label="after fencing")
    produce(t, "txn-fence", 0, txn_batch([b"zombie"], pid, old, 2), txn_id="txn-fence", label="zombie produce")
    add_partitions(t, "txn-fence", pid, old, "txn-fence", [0], label="zombie AddPartitionsToTxn")
    end_txn(t, "txn-fence", pid, old, True, label="zombie EndTxn")
    both_isolations(t, "txn-fence")


@session("timeout-abort", "a transaction past its timeout is aborted by the coordinator; its producer "
         "is fenced")
def _timeout(t: Target) -> None:
    create_topic(t, "txn-timeout")
    pid, epoch = open_txn(t, "txn-timeout", "txn-timeout", [0], timeout_ms=1000)
    t.until("the timed-out transaction aborted", lambda: txn_state(t, "txn-timeout"),
            lambda s: s == "CompleteAbort", timeout_s=60)
    describe_txn(t, "txn-timeout", label="after the timeout")
    end_txn(t, "txn-timeout", pid, epoch, True, label="commit after the timeout")
    add_partitions(t, "txn-timeout", pid, epoch, "txn-timeout", [0], label="AddPartitionsToTxn after it")
    both_isolations(t, "txn-timeout")


@session("txn-offset-commit", "TxnOffsetCommit: invisible to require_stable readers until the commit "
         "marker, an aborted one never visible")
def _offsets(t: Target) -> None:
    create_topic(t, "txn-off")
    find_coordinator(t, "txn-off")
    find_coordinator(t, "txn-off-group", key_type=0)
    pid, epoch, _ = init_txn(t, "txn-off")
    add_offsets(t, "txn-off", pid, epoch, "txn-off-group")
    txn_offset_commit(t, "txn-off", "txn-off-group", pid, epoch, "txn-off", 0, 10)
    offset_fetch(t, "txn-off-group", "txn-off", [0], require_stable=True, label="stable, open")
    offset_fetch(t, "txn-off-group", "txn-off", [0], require_stable=False, label="unstable, open")
    end_txn(t, "txn-off", pid, epoch, True)
    settle(t, "txn-off")
    offset_fetch(t, "txn-off-group", "txn-off", [0], require_stable=True, label="stable, committed")
    add_offsets(t, "txn-off", pid, epoch, "txn-off-group", label="second AddOffsetsToTxn")
    txn_offset_commit(t, "txn-off", "txn-off-group", pid, epoch, "txn-off", 0, 20, label="second commit")
    end_txn(t, "txn-off", pid, epoch, False)
    settle(t, "txn-off")
    offset_fetch(t, "txn-off-group", "txn-off", [0], require_stable=True, label="after abort")
    txn_offset_commit(t, "txn-off", "txn-off-group", pid, epoch, "txn-off", 0, 30,
                      label="TxnOffsetCommit without AddOffsetsToTxn")


@session("add-partitions-versions", "AddPartitionsToTxn at every client version, and again for a "
         "partition already added")
def _add_versions(t: Target) -> None:
    create_topic(t, "txn-addv", 4)
    find_coordinator(t, "txn-addv")
    pid, epoch, _ = init_txn(t, "txn-addv")
    for v in range(0, 4):
        add_partitions(t, "txn-addv", pid, epoch, "txn-addv", [v], version=v, label=f"v{v}")
    add_partitions(t, "txn-addv", pid, epoch, "txn-addv", [0, 1], label="again")
    describe_txn(t, "txn-addv")
    end_txn(t, "txn-addv", pid, epoch, False)
    settle(t, "txn-addv")

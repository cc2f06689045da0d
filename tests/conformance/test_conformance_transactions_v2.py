"""Transactions v2 (KIP-890 part 2), eoslog against Apache Kafka 4.4, both with transaction.version=2
finalized: the requests of a v2 client — no AddPartitionsToTxn or AddOffsetsToTxn, Produce v12 and
TxnOffsetCommit v5 add their partition implicitly, EndTxn v5 bumps the epoch and answers the new one,
which the client then uses. The late Produce of a transaction that has ended (the hanging
transaction v2 prevents), retries told apart by their epoch, an abort of nothing, fencing and
timeouts, a v1 producer beside a v2 one on one partition, and the `__transaction_state` records a v2
transactional id leaves, read with Kafka's DumpLogSegments from each broker's files (mutant, not committed:
the coordinator leaving out ClientTransactionVersion when it is 2 — 14 differences in transaction-log).
"""

from __future__ import annotations

import json
import re
from typing import Any

from conformance.session import Broker, Catalogue, Target
from conformance.steps import (
    END_TXN,
    LATEST,
    PRODUCE,
    READ_COMMITTED,
    TXN_OFFSET_COMMIT,
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
    offset_fetch,
    produce,
    settle,
    txn_offset_commit,
    txn_state,
)
from conformance.test_conformance_transactions import both_isolations, txn_batch
from eoslog.coordinator.partitioning import coordinator_partition_for
from support.kafka_harness import run_tool

TRANSACTION_STATE_PARTITIONS = 50  # transaction.state.log.num.partitions, both brokers' default

CATALOGUE = Catalogue("transactions-v2")
session = CATALOGUE.session


def test_session(session_name: str, brokers: tuple[Broker, Broker]) -> None:
    CATALOGUE.run(session_name, brokers)


def end_v2(t: Target, txn_id: str, pid: int, epoch: int, commit: bool, *, label: str | None = None) -> tuple[int, int]:
    """EndTxn v5: the producer id and epoch the client goes on with (its own on an error)."""
    r: Any = end_txn(t, txn_id, pid, epoch, commit, version=t.v(END_TXN), label=label)
    return (int(r.producer_id), int(r.producer_epoch)) if int(r.error_code) == 0 else (pid, epoch)


def start(t: Target, txn_id: str, topic: str, partitions: int = 1, **init: Any) -> tuple[int, int]:
    create_topic(t, topic, partitions)
    find_coordinator(t, txn_id)
    pid, epoch, _ = init_txn(t, txn_id, **init)
    return pid, epoch


@session("commit-and-abort", "a v2 transaction over two partitions, added by Produce v12: open, committed (the "
         "epoch bumped and handed back, the markers under it), then the next one at the new epoch, aborted")
def _commit_abort(t: Target) -> None:
    pid, epoch = start(t, "v2-commit", "v2-commit", 2)
    for p in (0, 1):
        produce(t, "v2-commit", p, txn_batch([b"c1", b"c2"], pid, epoch, 0), txn_id="v2-commit",
                label=f"implicit add {p}")
    describe_txn(t, "v2-commit", label="open")
    both_isolations(t, "v2-commit")
    pid, epoch = end_v2(t, "v2-commit", pid, epoch, True, label="commit")
    settle(t, "v2-commit")
    describe_txn(t, "v2-commit", label="committed")
    describe_producers(t, "v2-commit", [0, 1], label="producers committed")
    produce(t, "v2-commit", 0, txn_batch([b"a1"], pid, epoch, 0), txn_id="v2-commit", label="next, at the new epoch")
    end_v2(t, "v2-commit", pid, epoch, False, label="abort")
    settle(t, "v2-commit")
    both_isolations(t, "v2-commit")
    fetch(t, "v2-commit", 0, 0, isolation=READ_COMMITTED, label="committed only")
    describe_producers(t, "v2-commit", [0, 1], label="producers aborted")


@session("end-txn-retries", "EndTxn v5 retried (the epoch before the bump), the other outcome, a commit and an "
         "abort of nothing, and an epoch from the future")
def _retries(t: Target) -> None:
    pid, old = start(t, "v2-retry", "v2-retry")
    produce(t, "v2-retry", 0, txn_batch([b"r"], pid, old, 0), txn_id="v2-retry")
    _, new = end_v2(t, "v2-retry", pid, old, True, label="commit")
    settle(t, "v2-retry")
    end_txn(t, "v2-retry", pid, old, True, label="commit retried")
    end_txn(t, "v2-retry", pid, old, False, label="abort with the old epoch")
    end_txn(t, "v2-retry", pid, new, True, label="commit of nothing")
    _, newer = end_v2(t, "v2-retry", pid, new, False, label="abort of nothing")
    settle(t, "v2-retry")
    end_txn(t, "v2-retry", pid, new, False, label="abort of nothing retried")
    end_txn(t, "v2-retry", pid, newer + 5, False, label="an epoch from the future")
    describe_txn(t, "v2-retry")
    for v in range(0, 5):
        end_txn(t, "v2-retry", pid, newer, False, version=v, label=f"v1 EndTxn v{v} of nothing")


@session("late-produce", "the hanging transaction v2 prevents: a Produce of an aborted transaction arriving once "
         "the next one has begun on the same partition is refused and never seen, the LSO moves on")
def _late(t: Target) -> None:
    pid, old = start(t, "v2-late", "v2-late")
    produce(t, "v2-late", 0, txn_batch([b"first"], pid, old, 0), txn_id="v2-late", label="first transaction")
    pid, new = end_v2(t, "v2-late", pid, old, False, label="abort")
    settle(t, "v2-late")
    produce(t, "v2-late", 0, txn_batch([b"second"], pid, new, 0), txn_id="v2-late", label="next transaction")
    produce(t, "v2-late", 0, txn_batch([b"late"], pid, old, 1), txn_id="v2-late", label="the late Produce")
    describe_txn(t, "v2-late", label="after the late Produce")
    end_v2(t, "v2-late", pid, new, True, label="commit")
    settle(t, "v2-late")
    both_isolations(t, "v2-late")
    describe_producers(t, "v2-late", [0])


@session("late-produce-first", "the same late Produce arriving before the next transaction wrote anything: the "
         "coordinator refuses the implicit add under the old epoch; the partition stays free of any transaction")
def _late_first(t: Target) -> None:
    pid, old = start(t, "v2-late-first", "v2-late-first")
    produce(t, "v2-late-first", 0, txn_batch([b"first"], pid, old, 0), txn_id="v2-late-first",
            label="first transaction")
    pid, new = end_v2(t, "v2-late-first", pid, old, False, label="abort")
    settle(t, "v2-late-first")
    produce(t, "v2-late-first", 0, txn_batch([b"late"], pid, old, 1), txn_id="v2-late-first", label="the late Produce")
    describe_txn(t, "v2-late-first", label="after the late Produce")
    both_isolations(t, "v2-late-first")
    produce(t, "v2-late-first", 0, txn_batch([b"second"], pid, new, 0), txn_id="v2-late-first",
            label="next transaction")
    end_v2(t, "v2-late-first", pid, new, True, label="commit")
    settle(t, "v2-late-first")
    both_isolations(t, "v2-late-first")
    describe_producers(t, "v2-late-first", [0])


@session("produce-v12-refusals", "Produce v12 the coordinator cannot add for: an unknown transactional id, a "
         "producer id it does not know, a sequence that does not start at 0")
def _refusals(t: Target) -> None:
    pid, epoch = start(t, "v2-refuse", "v2-refuse")
    produce(t, "v2-refuse", 0, txn_batch([b"x"], pid, epoch, 0), txn_id="v2-never", label="unknown transactional id")
    produce(t, "v2-refuse", 0, txn_batch([b"x"], pid + 9, epoch, 0), txn_id="v2-refuse", label="another producer id")
    produce(t, "v2-refuse", 0, txn_batch([b"x"], pid, epoch, 3), txn_id="v2-refuse", label="first sequence 3")
    describe_txn(t, "v2-refuse")
    end_v2(t, "v2-refuse", pid, epoch, False)
    settle(t, "v2-refuse")
    both_isolations(t, "v2-refuse")


@session("txn-offset-commit", "TxnOffsetCommit v5 without AddOffsetsToTxn: the group's partition joins the "
         "transaction; committed offsets visible after the commit, aborted ones never")
def _offsets(t: Target) -> None:
    pid, epoch = start(t, "v2-off", "v2-off")
    find_coordinator(t, "v2-off-group", key_type=0)
    txn_offset_commit(t, "v2-off", "v2-off-group", pid, epoch, "v2-off", 0, 10, version=t.v(TXN_OFFSET_COMMIT))
    describe_txn(t, "v2-off", label="offsets added")
    offset_fetch(t, "v2-off-group", "v2-off", [0], require_stable=False, label="unstable, open")
    pid, epoch = end_v2(t, "v2-off", pid, epoch, True)
    settle(t, "v2-off")
    offset_fetch(t, "v2-off-group", "v2-off", [0], require_stable=True, label="committed")
    txn_offset_commit(t, "v2-off", "v2-off-group", pid, epoch, "v2-off", 0, 20, label="second")
    end_v2(t, "v2-off", pid, epoch, False)
    settle(t, "v2-off")
    offset_fetch(t, "v2-off-group", "v2-off", [0], require_stable=True, label="after abort")
    txn_offset_commit(t, "v2-off", "v2-off-group", pid, epoch, "v2-off", 0, 30, label="with the old epoch")


@session("fencing", "a new instance while a v2 transaction is open: aborted under a bumped epoch; the old "
         "instance's Produce v12 and EndTxn v5 are fenced")
def _fencing(t: Target) -> None:
    pid, old = start(t, "v2-fence", "v2-fence")
    produce(t, "v2-fence", 0, txn_batch([b"open"], pid, old, 0), txn_id="v2-fence")
    t.until("the fencing InitProducerId", lambda: init_txn(t, "v2-fence", record=False)[2],
            lambda r: int(r.error_code) == 0)
    settle(t, "v2-fence")
    describe_txn(t, "v2-fence", label="after fencing")
    produce(t, "v2-fence", 0, txn_batch([b"zombie"], pid, old, 1), txn_id="v2-fence", label="zombie Produce")
    end_txn(t, "v2-fence", pid, old, True, version=t.v(END_TXN), label="zombie EndTxn")
    both_isolations(t, "v2-fence")
    describe_producers(t, "v2-fence", [0])


@session("timeout-abort", "a v2 transaction past its timeout: aborted by the coordinator under a bumped epoch")
def _timeout(t: Target) -> None:
    pid, epoch = start(t, "v2-timeout", "v2-timeout", timeout_ms=1000)
    produce(t, "v2-timeout", 0, txn_batch([b"slow"], pid, epoch, 0), txn_id="v2-timeout")
    t.until("the timed-out transaction aborted", lambda: txn_state(t, "v2-timeout"),
            lambda s: s == "CompleteAbort", timeout_s=60)
    describe_txn(t, "v2-timeout", label="after the timeout")
    end_txn(t, "v2-timeout", pid, epoch, True, version=t.v(END_TXN), label="commit after the timeout")
    produce(t, "v2-timeout", 0, txn_batch([b"more"], pid, epoch, 1), txn_id="v2-timeout", label="Produce after it")
    both_isolations(t, "v2-timeout")
    describe_producers(t, "v2-timeout", [0])


@session("v1-and-v2-producers", "a v1 producer (AddPartitionsToTxn, Produce v11, EndTxn v4) and a v2 producer on "
         "one partition, their transactions interleaved: one aborted, one committed")
def _mixed(t: Target) -> None:
    create_topic(t, "v2-mixed")
    for txn in ("v2-mixed-1", "v2-mixed-2"):
        find_coordinator(t, txn)
    p1, e1, _ = init_txn(t, "v2-mixed-1")
    p2, e2, _ = init_txn(t, "v2-mixed-2")
    add_partitions(t, "v2-mixed-1", p1, e1, "v2-mixed", [0])
    produce(t, "v2-mixed", 0, txn_batch([b"v1-a"], p1, e1, 0), txn_id="v2-mixed-1", version=min(11, t.v(PRODUCE)),
            label="v1 Produce")
    produce(t, "v2-mixed", 0, txn_batch([b"v2-a"], p2, e2, 0), txn_id="v2-mixed-2", label="v2 Produce")
    list_offsets(t, "v2-mixed", 0, LATEST, isolation=READ_COMMITTED, label="LSO with both open")
    end_txn(t, "v2-mixed-1", p1, e1, False, version=min(4, t.v(END_TXN)), label="v1 abort")
    settle(t, "v2-mixed-1")
    end_v2(t, "v2-mixed-2", p2, e2, True, label="v2 commit")
    settle(t, "v2-mixed-2")
    both_isolations(t, "v2-mixed")
    describe_producers(t, "v2-mixed", [0])
    produce(t, "v2-mixed", 0, batch([b"plain"]), label="a plain batch after them")


def transaction_log(t: Target, txn_id: str) -> list[dict[str, object]]:
    """The ``__transaction_state`` records of ``txn_id`` as Kafka 4.4's DumpLogSegments
    ``--transaction-log-decoder`` reads them from the broker's own segment files, in log order:
    producer ids as the session's symbols, timestamps as set or not (each broker's clock)."""
    assert t.broker.data_dir is not None
    partition = coordinator_partition_for(txn_id, TRANSACTION_STATE_PARTITIONS)
    segments = sorted((t.broker.data_dir / f"__transaction_state-{partition}").glob("*.log"))
    dumped = run_tool("org.apache.kafka.tools.DumpLogSegments",
                      ["--files", ",".join(map(str, segments)), "--transaction-log-decoder", "--print-data-log"],
                      t.broker.data_dir.parent).stdout
    records: list[dict[str, object]] = []
    for key, payload in re.findall(r"key: (\{.*?\}) payload: (\{.*\})$", dumped, re.MULTILINE):
        if json.loads(key)["data"]["transactionalId"] != txn_id:
            continue
        value = json.loads(payload)
        fields: dict[str, object] = {"version": value["version"]}
        for name, v in value["data"].items():
            if name.lower().endswith("producerid"):
                fields[name] = t.aliases.symbol("pid", int(v))
            elif name.endswith("TimestampMs"):
                fields[name] = "set" if int(v) >= 0 else int(v)
            elif name == "transactionPartitions":
                fields[name] = sorted((p["topic"], sorted(p["partitionIds"])) for p in v or ())
            else:
                fields[name] = v
        records.append(fields)
    return records


@session("transaction-log", "the __transaction_state records a v2 transactional id leaves (implicit adds, "
         "TxnOffsetCommit v5, commit, abort, an abort of nothing, fencing), read by Kafka's DumpLogSegments "
         "--transaction-log-decoder from each broker's own files")
def _transaction_log(t: Target) -> None:
    txn_id = "v2-log"
    pid, epoch = start(t, txn_id, txn_id, 2)
    find_coordinator(t, "v2-log-group", key_type=0)
    for p in (0, 1):
        produce(t, txn_id, p, txn_batch([b"c"], pid, epoch, 0), txn_id=txn_id, label=f"implicit add {p}")
    txn_offset_commit(t, txn_id, "v2-log-group", pid, epoch, txn_id, 0, 1, version=t.v(TXN_OFFSET_COMMIT))
    pid, epoch = end_v2(t, txn_id, pid, epoch, True, label="commit")
    settle(t, txn_id)
    produce(t, txn_id, 0, txn_batch([b"a"], pid, epoch, 0), txn_id=txn_id, label="next")
    pid, epoch = end_v2(t, txn_id, pid, epoch, False, label="abort")
    settle(t, txn_id)
    pid, epoch = end_v2(t, txn_id, pid, epoch, False, label="abort of nothing")
    settle(t, txn_id)
    produce(t, txn_id, 1, txn_batch([b"f"], pid, epoch, 0), txn_id=txn_id, label="open, then fenced")
    t.until("the fencing InitProducerId", lambda: init_txn(t, txn_id, record=False)[2],
            lambda r: int(r.error_code) == 0)
    settle(t, txn_id)
    t.record("transaction log", transaction_log(t, txn_id))

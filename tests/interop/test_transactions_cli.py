"""``eoslog transactions list|describe|describe-producers|find-hanging|abort`` against the real
broker, with confluent-kafka (librdkafka) transactional producers and read_committed consumers.

- An open transaction: a producer begins, writes to two partitions and stays open; ``list``
  shows it Ongoing, ``describe`` its partitions and timing, ``describe-producers`` the
  transaction's start offset, and ``find-hanging`` does *not* report it: its coordinator
  still counts the partitions in the transaction, so it will end it.
- A hanging transaction, made the way it happens in practice: the coordinator loses the
  state of a transactional id while a partition still holds that id's open transaction.
  See ``test_hanging_transaction_is_found_and_aborted``.
- User mistakes end with one readable line and an exit code, never a traceback.

The CLI runs as ``python -m eoslog`` subprocesses, as users run it. Waiting loops are hang
guards with generous deadlines; nothing asserts on how long anything took.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clients import ensure_topic, read_values
from confluent_kafka import Consumer, Producer, TopicPartition

from support.hanging import lose_coordinator_state, open_transactions_app
from support.harness import BrokerProcess, wait_until

WAIT_S = 60.0


def cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eoslog", "transactions", *args, "--bootstrap-server", bootstrap],
        capture_output=True, text=True, timeout=120,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


def ok_json(bootstrap: str, *args: str) -> Any:
    return json.loads(ok(cli(bootstrap, *args, "--output", "json")))


def failed(result: subprocess.CompletedProcess[str], exit_code: int = 1) -> str:
    """The one-line error of a failed command (no traceback)."""
    assert result.returncode == exit_code, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr


def table_rows(output: str) -> list[list[str]]:
    """The data rows of a rich table printed by the CLI (after the ─── rule)."""
    lines = output.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("─"))
    return [line.split() for line in lines[rule + 1:] if line.strip()]


def end_offset(bootstrap: str, topic: str, partition: int, isolation: str) -> int:
    """ListOffsets LATEST by librdkafka: the last stable offset under read_committed, the
    high watermark under read_uncommitted."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"offsets-{topic}", "isolation.level": isolation})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, partition), timeout=30, cached=False)[1])
    finally:
        c.close()


def transactional_producer(bootstrap: str, txn_id: str, **extra: Any) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0, **extra})
    p.init_transactions(WAIT_S)
    return p


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("txn-cli") / "data").start()
    yield b
    if b.alive():
        b.stop()


# -- an open transaction the coordinator knows ---------------------------------------------------


def test_open_transaction_is_listed_described_and_not_hanging(txn_broker: BrokerProcess) -> None:
    bootstrap, topic, txn_id = txn_broker.bootstrap, "cli-open", "cli-open-producer"
    ensure_topic(bootstrap, topic, 2)
    p = transactional_producer(bootstrap, txn_id, **{"transaction.timeout.ms": 45_000})
    [empty] = ok_json(bootstrap, "describe", "--transactional-id", txn_id)  # no transaction yet: start time -1
    assert (empty["state"], empty["start_time_ms"], empty["duration_ms"], empty["partitions"]) == \
        ("Empty", None, None, []), empty
    [row] = table_rows(ok(cli(bootstrap, "describe", "--transactional-id", txn_id)))
    assert row[4:] == ["Empty", "45000", "None", "None"], row
    before_ms = int(time.time() * 1000)
    p.begin_transaction()
    for partition in (0, 1):
        p.produce(topic, value=b"open", partition=partition)
    assert p.flush(WAIT_S) == 0

    listed = [x for x in ok_json(bootstrap, "list") if x["transactional_id"] == txn_id]
    assert len(listed) == 1 and listed[0]["state"] == "Ongoing", listed
    producer_id = listed[0]["producer_id"]
    rows = table_rows(ok(cli(bootstrap, "list")))
    assert [txn_id, "0", str(producer_id), "Ongoing"] in rows, rows
    assert not any(x["transactional_id"] == txn_id for x in ok_json(bootstrap, "list", "--state", "CompleteCommit"))
    assert [x["transactional_id"] for x in ok_json(bootstrap, "list", "--producer-id", str(producer_id))] == [txn_id]
    assert [x["transactional_id"] for x in ok_json(bootstrap, "list", "--transactional-id-pattern", "cli-open-.*")] \
        == [txn_id]

    [described] = ok_json(bootstrap, "describe", "--transactional-id", txn_id)
    assert described["state"] == "Ongoing" and described["producer_id"] == producer_id
    assert described["timeout_ms"] == 45_000
    assert described["partitions"] == [{"topic": topic, "partition": 0}, {"topic": topic, "partition": 1}]
    assert described["start_time_ms"] >= before_ms - 1000 and described["duration_ms"] >= 0, described
    [row] = table_rows(ok(cli(bootstrap, "describe", "--transactional-id", txn_id)))
    assert row[1:5] == [txn_id, str(producer_id), str(described["producer_epoch"]), "Ongoing"], row
    assert row[-1] == f"{topic}-0,{topic}-1", row

    [producer] = ok_json(bootstrap, "describe-producers", "--topic", topic, "--partition", "0")
    assert producer["producer_id"] == producer_id and producer["current_txn_start_offset"] == 0, producer
    # Open and idle for longer than a 0-minute timeout: a candidate, but the coordinator
    # still counts both partitions in the transaction, so it is not hanging.
    wait_until(lambda: int(time.time() * 1000) > producer["last_timestamp"], "a millisecond to pass")
    assert ok_json(bootstrap, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0") == []
    assert table_rows(ok(cli(bootstrap, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0"))) == []

    p.commit_transaction(WAIT_S)
    after = markers_written(bootstrap, txn_id)
    assert after["partitions"] == [], after
    [producer] = ok_json(bootstrap, "describe-producers", "--topic", topic, "--partition", "0")
    assert producer["current_txn_start_offset"] is None, producer
    [row] = table_rows(ok(cli(bootstrap, "describe-producers", "--topic", topic, "--partition", "0")))
    assert row == [str(producer_id), str(producer["producer_epoch"]), str(producer["coordinator_epoch"]),
                   "0", str(producer["last_timestamp"]), "None"], row


# -- a hanging transaction --------------------------------------------------------------------------


def without_duration(hanging: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in hanging.items() if k != "duration_ms"}


def markers_written(bootstrap: str, txn_id: str) -> dict[str, Any]:
    """EndTxn is answered once PrepareCommit is written, as in Kafka; the markers follow. Waits
    for CompleteCommit (every marker written) and returns the description."""
    described: list[dict[str, Any]] = []

    def complete() -> bool:
        described[:] = ok_json(bootstrap, "describe", "--transactional-id", txn_id)
        return described[0]["state"] == "CompleteCommit"

    wait_until(complete, f"{txn_id}'s commit markers", WAIT_S, describe=lambda: described)
    return described[0]


def test_hanging_transaction_is_found_and_aborted(tmp_path: Path) -> None:
    """A transaction no coordinator will ever end, and the operator's way out.

    How it is made: two producers (in a child process, as an application) each open a
    transaction, one on partition 0 and one on partition 1, and write to it. Then the
    application and the broker die (SIGKILL), and while the broker is down the
    ``__transaction_state`` partitions that hold those transactional ids are deleted: the
    coordinator's record of them is lost, as after a lost disk or an operator wiping "just
    the internal topic". After the restart the partitions still replay their producers'
    open transactions from their own logs, but the coordinator knows nothing of them, so
    no timeout will ever abort them and a restarted application gets a fresh producer id
    that fences nothing. Each pins its partition's last stable offset: committed data
    written after it stays invisible to read_committed consumers. (KIP-890's check rules
    out the other classic cause, a late write to a partition outside the transaction.)

    Then: ``find-hanging`` reports both, the LSO is pinned, ``abort`` ends one by
    ``--start-offset`` and the other by producer id and epochs (the pre-3.0 form), each
    LSO moves to the high watermark and a read_committed consumer sees exactly the
    committed records behind them.
    """
    b = BrokerProcess(tmp_path / "data").start()
    app: subprocess.Popen[str] | None = None
    try:
        bootstrap, topic = b.bootstrap, "orders"
        ensure_topic(bootstrap, topic, 2)
        hanging_ids = {0: "orders-app-a", 1: "orders-app-b"}
        app = open_transactions_app(bootstrap, topic, hanging_ids)
        open_txns = {p: ok_json(bootstrap, "describe-producers", "--topic", topic, "--partition", str(p))
                     for p in hanging_ids}
        assert all(len(ps) == 1 and ps[0]["current_txn_start_offset"] == 0 for ps in open_txns.values()), open_txns

        lose_coordinator_state(b, app, hanging_ids)  # the application and the broker crash

        for txn_id in hanging_ids.values():
            err = failed(cli(bootstrap, "describe", "--transactional-id", txn_id))
            assert "TRANSACTIONAL_ID_NOT_FOUND" in err and txn_id in err, err

        # The crashed application comes back: its transactional id gets a new producer id,
        # which fences nothing in the partitions.
        restarted = transactional_producer(bootstrap, hanging_ids[0])
        [described] = ok_json(bootstrap, "describe", "--transactional-id", hanging_ids[0])
        assert described["state"] == "Empty", described
        assert described["producer_id"] != open_txns[0][0]["producer_id"], (described, open_txns)

        # Another application commits records behind the hanging transactions.
        healthy = transactional_producer(bootstrap, "orders-app-healthy")
        healthy.begin_transaction()
        for partition in hanging_ids:
            for i in range(2):
                healthy.produce(topic, value=f"committed-{partition}-{i}".encode(), partition=partition)
        healthy.commit_transaction(WAIT_S)
        markers_written(bootstrap, "orders-app-healthy")  # the high watermarks below include them

        high_watermarks = {p: end_offset(bootstrap, topic, p, "read_uncommitted") for p in hanging_ids}
        for p in hanging_ids:
            assert high_watermarks[p] > 3, high_watermarks  # 3 open records, 2 committed, a marker
            assert end_offset(bootstrap, topic, p, "read_committed") == 0  # pinned at the open transaction
        assert read_values(bootstrap, topic, 0, settled=False) == []  # read up to the pinned LSO

        found = ok_json(bootstrap, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0")
        assert [(h["partition"], h["producer_id"], h["start_offset"]) for h in found] == [
            (p, open_txns[p][0]["producer_id"], 0) for p in sorted(hanging_ids)
        ], found
        table = ok(cli(bootstrap, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0"))
        assert [row[:6] for row in table_rows(table)] == [
            [topic, str(h["partition"]), str(h["producer_id"]), str(h["producer_epoch"]),
             str(h["coordinator_epoch"]), str(h["start_offset"])] for h in found
        ], table
        by_broker = ok_json(bootstrap, "find-hanging", "--broker-id", "0", "--max-transaction-timeout", "0")
        assert [without_duration(h) for h in by_broker] == [without_duration(h) for h in found], by_broker
        only_1 = ok_json(bootstrap, "find-hanging", "--topic", topic, "--partition", "1",
                         "--max-transaction-timeout", "0")
        assert [without_duration(h) for h in only_1] == [without_duration(found[1])], only_1
        # Written moments ago: younger than the default 15-minute limit, so not a candidate yet.
        assert ok_json(bootstrap, "find-hanging", "--topic", topic) == []

        err = failed(cli(bootstrap, "abort", "--topic", topic, "--partition", "0", "--start-offset", "4"))
        assert "Could not find any open transactions starting at offset 4 on partition orders-0" in err, err
        assert end_offset(bootstrap, topic, 0, "read_committed") == 0

        out = ok(cli(bootstrap, "abort", "--topic", topic, "--partition", "0", "--start-offset", "0"))
        assert f"producer {found[0]['producer_id']}" in out, out
        hanging_b = found[1]
        ok(cli(bootstrap, "abort", "--topic", topic, "--partition", "1",
               "--producer-id", str(hanging_b["producer_id"]), "--producer-epoch", str(hanging_b["producer_epoch"]),
               "--coordinator-epoch", str(hanging_b["coordinator_epoch"])))

        assert ok_json(bootstrap, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0") == []
        for p, txn_id in hanging_ids.items():
            hw = end_offset(bootstrap, topic, p, "read_uncommitted")
            assert hw == high_watermarks[p] + 1  # the ABORT marker
            assert end_offset(bootstrap, topic, p, "read_committed") == hw
            assert read_values(bootstrap, topic, p) == [f"committed-{p}-{i}" for i in range(2)]
            assert read_values(bootstrap, topic, p, isolation="read_uncommitted") == [
                *(f"{txn_id}-uncommitted-{i}" for i in range(3)), *(f"committed-{p}-{i}" for i in range(2))
            ]
            states = ok_json(bootstrap, "describe-producers", "--topic", topic, "--partition", str(p))
            assert all(s["current_txn_start_offset"] is None for s in states), states
        healthy.flush(WAIT_S)
        restarted.flush(WAIT_S)
    finally:
        if app is not None and app.poll() is None:
            app.kill()
            app.wait(30)
        if b.alive():
            b.stop()


# -- user mistakes ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def errors_topic(txn_broker: BrokerProcess) -> BrokerProcess:
    """The broker, with a one-partition topic ``cli-errors`` the mistakes refer to."""
    ensure_topic(txn_broker.bootstrap, "cli-errors", 1)
    return txn_broker


@pytest.mark.parametrize(("args", "exit_code", "message"), [
    (["find-hanging"], 2, "requires either --topic or --broker-id"),
    (["find-hanging", "--broker-id", "0", "--partition", "0"], 2, "--partition argument requires --topic"),
    (["find-hanging", "--topic", "no-such-topic"], 1, "Topic 'no-such-topic' does not exist"),
    (["find-hanging", "--topic", "cli-errors", "--partition", "7"], 1, "Partition cli-errors-7 does not exist"),
    (["find-hanging", "--broker-id", "42"], 1, "broker 42 is not in the cluster"),
    (["abort", "--topic", "cli-errors", "--partition", "0"], 2, "either with --start-offset"),
    (["abort", "--topic", "cli-errors", "--partition", "0", "--producer-id", "5"], 2, "--producer-epoch"),
    (["abort", "--topic", "cli-errors", "--partition", "0", "--producer-id", "5", "--producer-epoch", "0"], 2,
     "--coordinator-epoch"),
    (["abort", "--topic", "cli-errors", "--partition", "0", "--start-offset", "0"], 1,
     "Could not find any open transactions starting at offset 0 on partition cli-errors-0"),
    (["describe-producers", "--topic", "cli-errors", "--partition", "3"], 1, "Partition cli-errors-3 does not exist"),
    (["describe", "--transactional-id", "never-used"], 1, "TRANSACTIONAL_ID_NOT_FOUND"),
])
def test_user_mistakes_are_one_readable_line(errors_topic: BrokerProcess, args: list[str], exit_code: int,
                                             message: str) -> None:
    err = failed(cli(errors_topic.bootstrap, *args), exit_code)
    assert message in err, err
    assert err.startswith("eoslog transactions "), err


def test_unreachable_broker_is_a_readable_error() -> None:
    from support.harness import free_port

    err = failed(cli(f"127.0.0.1:{free_port()}", "list"))
    assert "cannot connect to broker" in err, err

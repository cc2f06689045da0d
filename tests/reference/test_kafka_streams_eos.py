"""Kafka Streams with processing.guarantee=exactly_once_v2 against eoslog (java/PaymentsBalances.java):
per-account balances from a payments topic, kept in a state store with a changelog, written after
every payment. The application is killed -9 and so is the broker while it runs; afterwards a
read_committed reader of the balances topic must see, for every account, exactly the running sums
of its payments in order: a payment applied twice, lost, or an aborted write read, breaks a sum.

Transaction versions (KIP-890 part 2): the application starts on version 2 (a new log directory's
level); halfway it is stopped, Kafka's ``kafka-features.sh`` downgrades transaction.version to 1 and
it is started again. The markers of the balances topic show both: before the downgrade each producer's
transactions end under strictly increasing epochs (every EndTxn v5 bumps it), after it consecutive
ones share an epoch; Kafka's ``kafka-transactions.sh describe-producers`` shows each producer at its
last marker's epoch.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from eoslog.client import Consumer, Producer
from eoslog.client.types import TopicPartition
from support import rawkafka as raw
from support.deps import require
from support.features import kafka_describe_producers, kafka_features_tool
from support.harness import BrokerProcess, wait_until
from support.kafka_harness import JVM_FLAGS, class_data_flags, kafka_classpath, write_log_config
from support.markers import Marker, epoch_reused, epochs_not_advancing, transaction_markers

SOURCE = Path(__file__).parent / "java" / "PaymentsBalances.java"
ACCOUNTS, PARTITIONS, PAYMENTS = 12, 2, 6000


def amount(i: int) -> int:
    return (i * 7919) % 1000 - 300  # deposits and withdrawals


class StreamsApp:
    def __init__(self, work: Path, bootstrap: str) -> None:
        javac = shutil.which("javac")
        require("a JDK (javac; Java's single-file source launcher needs its compiler)", javac is not None,
                "apt-get install -y openjdk-17-jdk-headless (scripts/setup.sh does it)")
        self.cmd = ["java", *JVM_FLAGS, *class_data_flags(),
                    "-Xmx384m", f"-Dlog4j2.configurationFile={write_log_config(work, 'WARN')}",
                    "-cp", kafka_classpath(), str(SOURCE), bootstrap, str(work / "state")]
        self.log = work / "streams.log"
        self.proc: subprocess.Popen[str] | None = None
        self.running = threading.Event()

    def start(self) -> None:
        self.running.clear()
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        proc, running, log = self.proc, self.running, self.log

        def watch() -> None:
            assert proc.stdout is not None
            with open(log, "a") as out:
                for line in proc.stdout:
                    out.write(line)
                    out.flush()
                    if line.strip() == "RUNNING":
                        running.set()

        threading.Thread(target=watch, daemon=True).start()
        wait_until(lambda: running.is_set() or proc.poll() is not None, "the Streams application RUNNING", 180)
        assert proc.poll() is None, f"Streams exited {proc.returncode}:\n{self.log.read_text()[-4000:]}"

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


def read_committed(bootstrap: str, topic: str, isolation: str = "read_committed") -> dict[str, list[int]]:
    """Every committed record of ``topic`` by key, in offset order per partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "isolation.level": isolation,
                         "enable.auto.commit": False})
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(tps)
        ends = consumer.end_offsets(tps)
        out: dict[str, list[int]] = {}
        deadline = time.monotonic() + 120
        # The position, not the last record, reaches the end: a transaction marker ends the log.
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, "the read_committed reader did not reach the end offsets"
            for r in consumer.poll(1.0):
                out.setdefault(r.key.decode(), []).append(struct.unpack(">q", r.value)[0])
        return out
    finally:
        consumer.close()


def open_writes(bootstrap: str, topic: str) -> bool:
    """Has ``topic`` writes of a transaction still open (high watermark above the LSO)?"""
    m = raw.request_module(raw.LIST_OFFSETS, 7)
    ends = []
    with raw.RawClient(bootstrap) as c:
        for isolation in (0, 1):
            resp = c.call(m.ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=(m.ListOffsetsTopic(
                name=topic, partitions=tuple(m.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1,
                                                                    timestamp=raw.LATEST)
                                             for p in range(PARTITIONS))),)))
            ends.append([int(p.offset) for p in resp.topics[0].partitions])
    return any(hw > lso for hw, lso in zip(*ends, strict=True))


def total(bootstrap: str, isolation: str) -> int:
    return sum(len(v) for v in read_committed(bootstrap, "balances", isolation).values())


@pytest.fixture
def eoslog(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data", overrides={"group.initial.rebalance.delay.ms": "0"}).start()
    yield b
    if b.alive():
        b.stop()


@pytest.mark.slow
def test_streams_exactly_once_v2_through_kill_9_of_app_and_broker(eoslog: BrokerProcess, tmp_path: Path) -> None:
    with raw.RawClient(eoslog.bootstrap) as c:
        assert raw.create_topic(c, "payments", PARTITIONS) == 0
        assert raw.create_topic(c, "balances", PARTITIONS) == 0
    app = StreamsApp(tmp_path, eoslog.bootstrap)
    expected: dict[str, list[int]] = {}
    sent = 0

    def pay(bootstrap: str, stop: int) -> None:
        """Payments up to ``stop``, paced so that the application is busy when it or the broker dies."""
        nonlocal sent
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
        try:
            for i in range(sent, stop):
                account = f"acct-{i % ACCOUNTS}"
                producer.send("payments", key=account.encode(), value=struct.pack(">q", amount(i)))
                balances = expected.setdefault(account, [])
                balances.append((balances[-1] if balances else 0) + amount(i))
                if i % 100 == 99:
                    producer.flush()
                    time.sleep(0.05)
            producer.flush()
            sent = stop
        finally:
            producer.close()

    def copied() -> int:
        return sum(len(v) for v in read_committed(eoslog.bootstrap, "balances").values())

    def in_background(stop: int) -> threading.Thread:
        thread = threading.Thread(target=pay, args=(eoslog.bootstrap, stop))
        thread.start()
        return thread

    feeding = threading.Thread()

    def until_open_transaction(limit: int) -> None:
        """Wait for a transaction with writes beyond the LSO in balances, feeding payments in
        chunks (up to ``limit``) whenever the feeder is done: an application that has caught up
        opens no transaction, and how soon it catches up depends on the machine's load."""
        nonlocal feeding
        deadline = time.monotonic() + 60
        while not open_writes(eoslog.bootstrap, "balances"):
            if not feeding.is_alive() and sent < limit:
                feeding = in_background(min(sent + 200, limit))
            assert time.monotonic() < deadline, f"gave up waiting for an open transaction ({sent} payments sent)"
            time.sleep(0.05)

    try:
        app.start()
        feeding = in_background(PAYMENTS // 4)
        wait_until(lambda: copied() > PAYMENTS // 6, "some balances", 120)
        # kill -9 of the application in the middle of a transaction (writes beyond the LSO), until
        # one kill has left aborted writes behind for read_committed readers to skip.
        for _ in range(5):
            until_open_transaction(PAYMENTS // 2)
            app.kill()
            app.start()
            wait_until(lambda: not open_writes(eoslog.bootstrap, "balances") or copied() >= sent,
                       "the fenced transaction aborted", 60)
            if total(eoslog.bootstrap, "read_uncommitted") > total(eoslog.bootstrap, "read_committed"):
                break
        feeding.join()
        pay(eoslog.bootstrap, PAYMENTS // 2)
        wait_until(lambda: copied() >= PAYMENTS // 2 - 300, "the first half nearly done", 180)
        # Version 2 so far; the application goes on at version 1.
        app.kill()
        with raw.RawClient(eoslog.bootstrap) as c:
            downgraded_at = [raw.list_offset(c, "balances", p, raw.LATEST)[1] for p in range(PARTITIONS)]
        out = kafka_features_tool(eoslog.bootstrap, tmp_path, "downgrade", "--feature", "transaction.version=1")
        assert out.strip() == "transaction.version was downgraded to 1.", out
        app.start()
        feeding = in_background(PAYMENTS * 5 // 8)
        until_open_transaction(PAYMENTS * 3 // 4)
        eoslog.kill()  # kill -9 of the broker in the middle of a transaction
        eoslog.start()
        feeding.join()
        # At least two transactions with writes in every partition after the broker's restart, so
        # that version 1's shared epoch shows in each: the backlog may all go into one (it did on
        # a loaded machine), so the last payments are sent only once it has committed.
        last = PAYMENTS - 2 * ACCOUNTS
        pay(eoslog.bootstrap, last)
        wait_until(lambda: copied() >= last, "the balances of all but the last payments", 300)
        pay(eoslog.bootstrap, PAYMENTS)
        wait_until(lambda: copied() >= PAYMENTS, "every payment's balance", 120)
    finally:
        app.kill()
    got = read_committed(eoslog.bootstrap, "balances")
    for account, balances in expected.items():
        assert got.get(account) == balances, f"{account}: balances are not the running sums of its payments"
    assert sum(len(v) for v in got.values()) == PAYMENTS
    # The kills left aborted writes behind, which read_committed must have skipped.
    assert total(eoslog.bootstrap, "read_uncommitted") > PAYMENTS
    for p in range(PARTITIONS):
        markers = transaction_markers(eoslog.bootstrap, "balances", p)
        v2: list[Marker] = [m for m in markers if m.offset < downgraded_at[p]]
        v1: list[Marker] = [m for m in markers if m.offset >= downgraded_at[p]]
        assert not epochs_not_advancing(v2) and len(v2) >= 2, v2
        assert epoch_reused(v1), v1
        assert kafka_describe_producers(eoslog.bootstrap, tmp_path, "balances", p) == {
            m.producer_id: m.producer_epoch for m in markers}

"""Kafka's own transactions system test (tests/kafkatest/tests/core/transactions_test.py), pointed at
eoslog: Kafka's VerifiableProducer seeds the input topic, Kafka's TransactionalMessageCopier
instances (one per input partition, random aborts, offsets sent with the consumer's group metadata)
copy it transactionally while the copiers are killed -9 or the broker is, a concurrent
read_committed VerifiableConsumer reads the output as it is written and a final one reads it
afterwards. The checks are the system test's: no duplicate in either reading, output == input, and
with one partition the same order.

Sizes are a third of Kafka's (its 100000 seed messages take long on two cores); the transaction
size and timeouts are Kafka's, but for a shorter transaction timeout where only copiers are killed.

Transaction versions (KIP-890 part 2): the broker kills run at version 2 (a new log directory's
level, which Kafka's Java producer takes up), the copier kills at version 1, downgraded by Kafka's
``kafka-features.sh`` before the copiers start. Afterwards every marker of the output partitions
is read: at version 2 each copier's transactions end under strictly increasing epochs (every
EndTxn v5 bumps it), at version 1 consecutive ones share an epoch; and Kafka's
``kafka-transactions.sh describe-producers`` shows each copier at its last marker's epoch.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from eoslog.client.admin import Admin, NewTopic
from support import rawkafka as raw
from support.cluster_harness import Cluster, find_coordinator
from support.features import kafka_describe_producers, kafka_features_tool
from support.harness import BrokerProcess, wait_until
from support.history import OK, History, check
from support.kafka_harness import java_command, write_log_config
from support.markers import epoch_reused, epochs_not_advancing, transaction_markers

INPUT, OUTPUT = "input-topic", "output-topic"
CONSUMER_GROUP = "transactions-test-consumer-group"
TRANSACTION_SIZE = 750
# Kafka's: below the progress timeout, at least the request timeout (a produce may wait that long
# for a killed broker).
TRANSACTION_TIMEOUT_MS = 40000
# Where only copiers are killed no produce waits for a dead broker, and a copier killed after sending
# its offsets leaves them pending until this timeout aborts its transaction: its successor's first
# OffsetFetch (require_stable, sent before initTransactions in Kafka's copier) waits for that (once or
# twice a run; 30-40 s each at 40 s).
COPIERS_KILLED_TRANSACTION_TIMEOUT_MS = 20000
PROGRESS_TIMEOUT_S = 120.0
TOOLS = "org.apache.kafka.tools."


@dataclass
class JavaTool:
    """One of Kafka's tools as a child process whose stdout JSON lines are collected."""
    name: str
    cmd: list[str]
    log: Path
    events: list[dict[str, object]] = field(default_factory=list)
    proc: subprocess.Popen[str] | None = None

    def start(self) -> JavaTool:
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=open(self.log, "a"),  # noqa: SIM115
                                     text=True)
        proc = self.proc

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.startswith("{"):
                    with contextlib.suppress(json.JSONDecodeError):
                        self.events.append(json.loads(line))

        threading.Thread(target=read, daemon=True).start()
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def done(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()


class Copier:
    """Kafka's TransactionalMessageCopier for one input partition, restartable (as the system
    test's service) after a kill -9."""

    def __init__(self, work: Path, bootstrap: str, partition: int, use_group_metadata: bool,
                 transaction_timeout_ms: int) -> None:
        self.transactional_id = f"copier-{partition}"
        args = ["--broker-list", bootstrap, "--transactional-id", self.transactional_id,
                "--consumer-group", CONSUMER_GROUP, "--input-topic", INPUT, "--input-partition", str(partition),
                "--output-topic", OUTPUT, "--max-messages", "-1", "--transaction-size", str(TRANSACTION_SIZE),
                "--transaction-timeout", str(transaction_timeout_ms), "--enable-random-aborts"]
        if use_group_metadata:
            args.append("--use-group-metadata")
        self.cmd = java_command(TOOLS + "TransactionalMessageCopier", args, log_config=write_log_config(work, "WARN"),
                                heap=("-Xmx256m",))
        self.log = work / f"{self.transactional_id}.log"
        self.runs: list[JavaTool] = []

    def start(self) -> None:
        self.runs.append(JavaTool(self.transactional_id, self.cmd, self.log).start())

    @property
    def current(self) -> JavaTool:
        return self.runs[-1]

    def progress_percent(self) -> float:
        """As the system test's service: consumed / (consumed + remaining) of the last status."""
        for event in reversed(self.current.events):
            if "remaining" in event and "consumed" in event:
                consumed, remaining = float(event["consumed"]), float(event["remaining"])  # type: ignore[arg-type]
                return 100.0 * consumed / (consumed + remaining) if consumed + remaining else 0.0
        return 0.0

    def total_processed(self) -> int:
        """Messages this copier committed, over all its runs (a restarted run starts at 0)."""
        return sum(max((int(str(e.get("totalProcessed", 0))) for e in run.events), default=0) for run in self.runs)

    def hard_bounce(self) -> None:
        self.current.kill()
        self.start()

    def is_done(self) -> bool:
        if self.current.done() and self.current.returncode() != 0:
            raise AssertionError(f"{self.transactional_id} exited {self.current.returncode()}; see {self.log}:\n"
                                 + self.log.read_text()[-3000:])
        return self.current.done()


def verifiable_producer(work: Path, bootstrap: str, count: int) -> list[int]:
    """Kafka's VerifiableProducer (idempotent, acks=all): the acked values, in acknowledgement order."""
    tool = JavaTool("seed", java_command(TOOLS + "VerifiableProducer", [
        "--bootstrap-server", bootstrap, "--topic", INPUT, "--max-messages", str(count), "--acks", "-1"],
        log_config=write_log_config(work, "WARN"), heap=("-Xmx256m",)), work / "seed.log").start()
    wait_until(tool.done, "the seed producer", timeout_s=600)
    assert tool.returncode() == 0, (work / "seed.log").read_text()[-3000:]
    return [int(str(e["value"])) for e in tool.events if e.get("name") == "producer_send_success"]


def read_committed_consumer(work: Path, bootstrap: str, group: str, count: int) -> JavaTool:
    """Kafka's VerifiableConsumer in read_committed, from the beginning, until ``count`` records."""
    config = work / f"{group}.properties"
    config.write_text("isolation.level=read_committed\n")
    return JavaTool(group, java_command(TOOLS + "VerifiableConsumer", [
        "--bootstrap-server", bootstrap, "--topic", OUTPUT, "--group-id", group, "--max-messages", str(count),
        "--reset-policy", "earliest", "--verbose", "--command-config", str(config)],
        log_config=write_log_config(work, "WARN"), heap=("-Xmx256m",)), work / f"{group}.log").start()


def consumed_values(tool: JavaTool, timeout_s: float = 300) -> list[int]:
    wait_until(tool.done, f"{tool.name} to read every record", timeout_s=timeout_s)
    assert tool.returncode() == 0, tool.log.read_text()[-3000:]
    return [int(str(e["value"])) for e in tool.events if e.get("name") == "record_data"]


@dataclass(frozen=True)
class Scenario:
    bounce: str  # "copiers": kill -9 each copier 3 times; "broker": kill -9 the broker 3 times
    check_order: bool
    use_group_metadata: bool
    transaction_version: int

    @property
    def partitions(self) -> tuple[int, int]:
        return (1, 1) if self.check_order else (2, 3)

    @property
    def messages(self) -> int:
        return 33_333 // 3 if self.check_order else 33_333


SCENARIOS = [
    Scenario("copiers", check_order=False, use_group_metadata=True, transaction_version=1),
    Scenario("broker", check_order=True, use_group_metadata=False, transaction_version=2),
]


@pytest.fixture
def eoslog(tmp_path: Path) -> Iterator[BrokerProcess]:
    # no pause before a new group's first rebalance (the verifying consumer's join waited 3 s)
    b = BrokerProcess(tmp_path / "data", overrides={"group.initial.rebalance.delay.ms": "0"}).start()
    yield b
    if b.alive():
        b.stop()


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: f"{s.bounce}-kill9{'-ordered' if s.check_order else ''}"
                                                             f"-tv{s.transaction_version}")
def test_kafka_transactions_system_test_on_eoslog(scenario: Scenario, eoslog: BrokerProcess, tmp_path: Path) -> None:
    inputs, outputs = scenario.partitions
    with raw.RawClient(eoslog.bootstrap) as c:
        assert raw.create_topic(c, INPUT, inputs) == 0
        assert raw.create_topic(c, OUTPUT, outputs) == 0
    input_messages = verifiable_producer(tmp_path, eoslog.bootstrap, scenario.messages)
    assert len(input_messages) == scenario.messages
    if scenario.transaction_version == 1:
        out = kafka_features_tool(eoslog.bootstrap, tmp_path, "downgrade", "--feature", "transaction.version=1")
        assert out.strip() == "transaction.version was downgraded to 1.", out

    timeout_ms = COPIERS_KILLED_TRANSACTION_TIMEOUT_MS if scenario.bounce == "copiers" else TRANSACTION_TIMEOUT_MS
    copiers = [Copier(tmp_path, eoslog.bootstrap, p, scenario.use_group_metadata, timeout_ms) for p in range(inputs)]
    for copier in copiers:
        copier.start()
    concurrent = read_committed_consumer(tmp_path, eoslog.bootstrap, "concurrent_consumer", scenario.messages)
    try:
        for _ in range(3):
            if scenario.bounce == "copiers":
                for copier in copiers:
                    wait_until(lambda copier=copier: copier.progress_percent() >= 20.0 or copier.is_done(),
                               f"{copier.transactional_id} 20% on", timeout_s=PROGRESS_TIMEOUT_S)
                    copier.hard_bounce()
            else:
                # Each kill after a tenth of the messages more have been copied.
                target = sum(c.total_processed() for c in copiers) + scenario.messages // 10

                def further(target: int = target) -> bool:
                    return sum(c.total_processed() for c in copiers) >= target or all(c.is_done() for c in copiers)

                wait_until(further, "the copiers 10% further", timeout_s=PROGRESS_TIMEOUT_S)
                eoslog.kill()
                time.sleep(1.0)
                eoslog.start()
        for copier in copiers:
            wait_until(copier.is_done, f"{copier.transactional_id} to copy everything", timeout_s=600)
        concurrently_consumed = consumed_values(concurrent)
    finally:
        for copier in copiers:
            copier.current.kill()
        concurrent.kill()
    output_messages = consumed_values(read_committed_consumer(tmp_path, eoslog.bootstrap, "verifying_consumer",
                                                              scenario.messages))

    # The system test's checks, in its words.
    assert len(output_messages) == len(set(output_messages)), "duplicates in the output stream"
    assert set(input_messages) == set(output_messages), "input and output message sets are not equal"
    assert len(concurrently_consumed) == len(set(concurrently_consumed)), "dups in concurrently consumed messages"
    assert set(input_messages) == set(concurrently_consumed), "input and concurrently consumed sets differ"
    if scenario.check_order:
        assert input_messages == sorted(input_messages), "the seed messages themselves were not in order"
        assert output_messages == input_messages, "output messages are not in order"
        assert concurrently_consumed == output_messages, "concurrently consumed messages are not in order"
    aborted_or_bounced = sum(len(c.runs) for c in copiers)
    assert aborted_or_bounced >= len(copiers) * (4 if scenario.bounce == "copiers" else 1)

    # The epochs: bumped by every transaction at version 2, kept across a copier run's at version 1.
    written = 0
    for partition in range(outputs):
        markers = transaction_markers(eoslog.bootstrap, OUTPUT, partition)
        written += len(markers)
        if scenario.transaction_version == 2:
            assert not epochs_not_advancing(markers)
        elif markers:
            assert epoch_reused(markers), markers
        last_epoch = {m.producer_id: m.producer_epoch for m in markers}
        assert kafka_describe_producers(eoslog.bootstrap, tmp_path, OUTPUT, partition) == last_epoch
    assert written >= scenario.messages // TRANSACTION_SIZE


CLUSTER_MESSAGES = 20_000


def _victim(cluster: Cluster, turn: int) -> tuple[int, str]:
    """In turn: the transaction coordinator of copier-0 (where the implicit adds arrive), the
    leader of an output partition (which sends them for each Produce v12), and the group
    coordinator (which sends them for each TxnOffsetCommit v5)."""
    if turn == 0:
        return find_coordinator(cluster, "copier-0"), "the transaction coordinator of copier-0"
    if turn == 1:
        leader = cluster.wait_for(lambda m: m.topics[OUTPUT][0].leader > 0, f"a leader of {OUTPUT}-0")
        return leader.topics[OUTPUT][0].leader, f"the leader of {OUTPUT}-0"
    return find_coordinator(cluster, CONSUMER_GROUP, key_type=0), f"the group coordinator of {CONSUMER_GROUP}"


@pytest.mark.slow
def test_kafka_transactions_system_test_on_an_eoslog_cluster(tmp_path: Path) -> None:
    """The same copy with Kafka's Java copiers at transaction version 2 on a ZooKeeper + 3-broker
    eoslog cluster (topics at replication factor 3, min.insync.replicas 2), while the broker of
    each role in the implicit add is killed -9 in turn (``_victim``). Besides the system test's
    checks, the history checker reads the concurrent and the final consumer's records (lost writes,
    duplicates, inconsistent offsets, non-monotonic polls), and every output marker shows the
    copiers' epochs advancing per transaction."""
    cluster = Cluster(tmp_path / "cluster", overrides={"group.initial.rebalance.delay.ms": "0"}).start()
    try:
        bootstrap = cluster.bootstrap
        with Admin({"bootstrap.servers": bootstrap}, default_api_timeout_ms=30000) as admin:
            admin.create_topics([NewTopic(t, n, 3, {"min.insync.replicas": "2"})
                                 for t, n in ((INPUT, 2), (OUTPUT, 3))])
            assert admin.describe_features().finalized_features["transaction.version"] == 2
        input_messages = verifiable_producer(tmp_path, bootstrap, CLUSTER_MESSAGES)
        assert len(input_messages) == CLUSTER_MESSAGES
        copiers = [Copier(tmp_path, bootstrap, p, True, TRANSACTION_TIMEOUT_MS) for p in range(2)]
        for copier in copiers:
            copier.start()
        concurrent = read_committed_consumer(tmp_path, bootstrap, "concurrent_consumer", CLUSTER_MESSAGES)
        killed: list[str] = []
        try:
            for turn in range(3):
                target = sum(c.total_processed() for c in copiers) + CLUSTER_MESSAGES // 5
                wait_until(lambda target=target: sum(c.total_processed() for c in copiers) >= target
                           or all(c.is_done() for c in copiers), "the copiers 20% further",
                           timeout_s=PROGRESS_TIMEOUT_S)
                node, what = _victim(cluster, turn)
                cluster.brokers[node].kill()
                killed.append(what)
                time.sleep(1.0)
                cluster.brokers[node].start()
            for copier in copiers:
                wait_until(copier.is_done, f"{copier.transactional_id} to copy everything", timeout_s=600)
            concurrently = _wait_events(concurrent)
        finally:
            for copier in copiers:
                copier.current.kill()
            concurrent.kill()
        final = _wait_events(read_committed_consumer(tmp_path, bootstrap, "verifying_consumer", CLUSTER_MESSAGES))
        output = [int(str(e["value"])) for e in final if e.get("name") == "record_data"]
        assert len(output) == len(set(output)) and set(output) == set(input_messages), "output != input, once each"
        history = History()
        for v in input_messages:
            history.send(str(v).encode(), OK)
        for e in concurrently:
            if e.get("name") == "partitions_assigned":
                for tp in e["partitions"]:  # type: ignore[union-attr]
                    history.assign("concurrent", int(tp["partition"]))  # type: ignore[index]
            elif e.get("name") == "record_data":
                history.poll("concurrent", int(str(e["partition"])), int(str(e["offset"])), str(e["value"]).encode())
        for p in range(3):
            history.final_read(p, [(int(str(e["offset"])), str(e["value"]).encode()) for e in final
                                   if e.get("name") == "record_data" and int(str(e["partition"])) == p])
        report = check(history)
        print(f"killed: {killed}\n{report.summary()}")
        assert report.ok, report.summary()
        for p in range(3):
            meta = cluster.wait_for(lambda m, p=p: m.topics[OUTPUT][p].leader > 0, f"a leader of {OUTPUT}-{p}")
            leader = meta.topics[OUTPUT][p].leader
            markers = transaction_markers(cluster.brokers[leader].bootstrap, OUTPUT, p)
            assert not epochs_not_advancing(markers)
    finally:
        cluster.stop()


def _wait_events(tool: JavaTool, timeout_s: float = 300) -> list[dict[str, object]]:
    wait_until(tool.done, f"{tool.name} to read every record", timeout_s=timeout_s)
    assert tool.returncode() == 0, tool.log.read_text()[-3000:]
    return list(tool.events)

"""Kafka's command-line tools, run as Java classes against eoslog: topics, consumer groups
(describe, reset-offsets), kafka-transactions (list, describe, describe-producers, find-hanging,
abort), and Kafka's log dump tool reading eoslog's own files, which must agree with
``eoslog dump-log`` line for line.

Producer-state snapshots are the one on-disk format eoslog changes on purpose (every producer's
last five batches, not only the last one, so a retry stays a duplicate across a restart): Kafka's
tool cannot read them, and docs/compatibility.md says so.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from eoslog.client import Producer
from support import rawkafka as raw
from support.harness import BrokerProcess, wait_until
from support.kafka_harness import JVM_POLL_S, run_tool

TOOLS = "org.apache.kafka.tools."
TOPIC = "tools-data"


def produce_mixed(bootstrap: str, topic: str, transactions: int = 6) -> None:
    """Committed and aborted transactions with keys and headers, then plain and gzip batches."""
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-txn", "linger.ms": 0})
    txn.init_transactions()
    for i in range(transactions):
        txn.begin_transaction()
        for j in range(5):
            txn.send(topic, value=f"v{i}-{j}".encode(), key=b"k", partition=0, headers=[("h", b"x")])
        txn.flush()
        (txn.commit_transaction if i % 2 == 0 else txn.abort_transaction)()
    txn.close()
    for codec in ("none", "gzip"):
        plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": codec})
        for j in range(4):
            plain.send(topic, value=f"{codec}-{j}".encode(), partition=0)
        plain.flush()
        plain.close()


def tool(work: Path, cls: str, *args: str) -> str:
    return run_tool(TOOLS + cls, list(args), work).stdout


def rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.splitlines() if line.strip()]


# -- the log dump tool on eoslog's files -------------------------------------------------------


@pytest.fixture(scope="module")
def stopped_partition(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A partition directory written by eoslog (several segments, dense indexes, aborted
    transactions), after a clean shutdown."""
    root = tmp_path_factory.mktemp("dump")
    broker = BrokerProcess(root / "data").start()
    try:
        with raw.RawClient(broker.bootstrap) as c:
            assert raw.create_topic(c, TOPIC, 1, {"segment.bytes": "1200", "index.interval.bytes": "100"}) == 0
        produce_mixed(broker.bootstrap, TOPIC)
    finally:
        assert broker.stop() == 0
    return root / "data" / f"{TOPIC}-0"


def eoslog_dump(*args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "eoslog", "dump-log", *args], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize(("suffix", "options"), [
    (".log", ()), (".log", ("--deep-iteration",)), (".log", ("--print-data-log",)),
    (".index", ()), (".timeindex", ()), (".txnindex", ()),
], ids=["log", "log-deep", "log-data", "index", "timeindex", "txnindex"])
def test_kafka_dump_log_reads_eoslog_files_as_eoslog_does(stopped_partition: Path, suffix: str,
                                                           options: tuple[str, ...]) -> None:
    files = sorted(stopped_partition.glob(f"*{suffix}"))
    assert len(files) >= 2, f"expected several segments, got {files}"
    for f in files:
        kafka = run_tool(TOOLS + "DumpLogSegments", ["--files", str(f), *options], stopped_partition.parent).stdout
        ours = eoslog_dump(str(f), *options)
        assert kafka.splitlines() == ours.splitlines(), f"{f.name}:\nKafka:\n{kafka}\neoslog:\n{ours}"
    if suffix == ".txnindex":
        assert any("producerId" in eoslog_dump(str(f)) for f in files), "no aborted transaction was indexed"


def test_snapshots_are_eoslog_own_format(stopped_partition: Path) -> None:
    """The deliberate difference: Kafka's tool does not read eoslog's snapshots faithfully,
    eoslog's reads them (docs/compatibility.md)."""
    [snapshot] = sorted(stopped_partition.glob("*.snapshot"))[-1:]
    ours = eoslog_dump(str(snapshot))
    # The transactional producer (id 0) at epoch 6: at transaction.version 2 (KIP-890) each of
    # produce_mixed's 6 EndTxns bumps the epoch, and its marker is written at the new one. The
    # two idempotent producers after it keep epoch 0. Kafka 4.4's own snapshot after
    # produce_mixed has the same producers at the same epochs (measured with its dump tool).
    assert "producerId: 0 producerEpoch: 6 coordinatorEpoch: 0 currentTxnFirstOffset: None" in ours
    assert [line.split()[1] + "/" + line.split()[3] for line in ours.splitlines()[1:]] == ["0/6", "1/0", "2/0"]
    kafka = run_tool(TOOLS + "DumpLogSegments", ["--files", str(snapshot)], stopped_partition.parent,
                     check=False).stdout
    assert kafka.splitlines()[1:] != ours.splitlines()[1:]


# -- topics, consumer groups, transactions -----------------------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("tools") / "data").start()
    yield b
    b.stop()


def test_topic_command(broker: BrokerProcess, tmp_path: Path) -> None:
    bs = broker.bootstrap
    assert "Created topic cli-topic." in tool(tmp_path, "TopicCommand", "--bootstrap-server", bs, "--create",
                                              "--topic", "cli-topic", "--partitions", "3", "--replication-factor", "1",
                                              "--config", "retention.ms=3600000")
    assert "cli-topic" in tool(tmp_path, "TopicCommand", "--bootstrap-server", bs, "--list").split()
    described = tool(tmp_path, "TopicCommand", "--bootstrap-server", bs, "--describe", "--topic", "cli-topic")
    assert "PartitionCount: 3" in described and "retention.ms=3600000" in described
    assert [r[3] for r in rows(described) if r[0] == "Topic:" and r[2] == "Partition:"] == ["0", "1", "2"]


def test_consumer_group_command_describe_and_reset(broker: BrokerProcess, tmp_path: Path) -> None:
    bs = broker.bootstrap
    with raw.RawClient(bs) as c:
        assert raw.create_topic(c, "cli-group-topic", 1) == 0
    tool(tmp_path, "VerifiableProducer", "--bootstrap-server", bs, "--topic", "cli-group-topic",
         "--max-messages", "50", "--acks", "-1")
    # Kafka's VerifiableConsumer commits what it read (classic group protocol).
    tool(tmp_path, "VerifiableConsumer", "--bootstrap-server", bs, "--topic", "cli-group-topic",
         "--group-id", "cli-group", "--max-messages", "50", "--reset-policy", "earliest")
    assert "cli-group" in tool(tmp_path, "consumer.group.ConsumerGroupCommand", "--bootstrap-server", bs,
                               "--list").split()

    def described() -> list[list[str]]:
        out = tool(tmp_path, "consumer.group.ConsumerGroupCommand", "--bootstrap-server", bs,
                   "--describe", "--group", "cli-group")
        return [r for r in rows(out) if r[:2] == ["cli-group", "cli-group-topic"]]

    wait_until(lambda: [r[3:6] for r in described()] == [["50", "50", "0"]], "offset 50, lag 0",
               interval_s=JVM_POLL_S)
    reset = tool(tmp_path, "consumer.group.ConsumerGroupCommand", "--bootstrap-server", bs, "--reset-offsets",
                 "--group", "cli-group", "--topic", "cli-group-topic", "--to-offset", "20", "--execute")
    assert [r[1:] for r in rows(reset) if r[0] == "cli-group"] == [["cli-group-topic", "0", "20"]]
    assert [r[3:6] for r in described()] == [["20", "50", "30"]]


def test_consumer_group_command_on_consumer_and_classic_groups(broker: BrokerProcess, tmp_path: Path) -> None:
    """kafka-consumer-groups.sh lists both kinds with their type and describes a KIP-848 group as Kafka's
    admin sees it through ConsumerGroupDescribe (member and target epochs and assignments, the group
    epochs), a classic group through DescribeGroups (no epochs)."""
    from confluent_kafka import Consumer

    bs, topic = broker.bootstrap, "cli-848-topic"
    with raw.RawClient(bs) as c:
        assert raw.create_topic(c, topic, 2) == 0
    producer = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    for i in range(10):
        producer.send(topic, value=str(i).encode(), partition=i % 2)
    producer.close()
    conf = {"bootstrap.servers": bs, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    modern = Consumer({**conf, "group.id": "cli-848", "group.protocol": "consumer", "client.id": "c848"})
    classic = Consumer({**conf, "group.id": "cli-classic", "group.protocol": "classic", "client.id": "cclassic"})
    modern.subscribe([topic])
    classic.subscribe([topic])
    consumed = 0

    def poll() -> bool:
        nonlocal consumed
        m = modern.poll(0.2)
        if m is not None and m.error() is None:
            consumed += 1
            modern.commit(message=m, asynchronous=False)
        classic.poll(0.2)
        return consumed == 10 and len(classic.assignment()) == 2

    try:
        wait_until(poll, "both groups consuming, the consumer group's ten records committed", 120)

        def command(*args: str) -> list[list[str]]:
            poll()  # the members keep heartbeating between the tool's runs
            return rows(tool(tmp_path, "consumer.group.ConsumerGroupCommand", "--bootstrap-server", bs, *args))

        listed = command("--list", "--type")
        assert ["cli-848", "Consumer"] in listed and ["cli-classic", "Classic"] in listed
        offsets = [r[1:6] for r in command("--describe", "--group", "cli-848") if r[0] == "cli-848"]
        assert offsets == [[topic, "0", "5", "5", "0"], [topic, "1", "5", "5", "0"]]
        state = [r for r in command("--describe", "--group", "cli-848", "--state", "--verbose") if r[0] == "cli-848"]
        assert len(state) == 1 and state[0][-5:-3] == ["uniform", "Stable"], state
        group_epoch, target_epoch = state[0][-3:-1]
        assert group_epoch == target_epoch != "-"
        members = [r for r in command("--describe", "--group", "cli-848", "--members", "--verbose")
                   if r[0] == "cli-848"]
        # #PARTITIONS, CURRENT-EPOCH, CURRENT-ASSIGNMENT, TARGET-EPOCH, TARGET-ASSIGNMENT
        assert [r[3:] for r in members] == [["c848", "2", group_epoch, f"{topic}:0,1", group_epoch, f"{topic}:0,1"]]
        members = [r for r in command("--describe", "--group", "cli-classic", "--members", "--verbose")
                   if r[0] == "cli-classic"]
        assert [r[3:] for r in members] == [["cclassic", "2", "-", f"{topic}:0,1", "-", "-"]]
        state = [r for r in command("--describe", "--group", "cli-classic", "--state", "--verbose")
                 if r[0] == "cli-classic"]
        assert state[0][-5:] == ["range", "Stable", "-", "-", "1"], state
    finally:
        modern.close()
        classic.close()


def test_transactions_command(broker: BrokerProcess, tmp_path: Path) -> None:
    bs = broker.bootstrap
    with raw.RawClient(bs) as c:
        assert raw.create_topic(c, "cli-txn", 1) == 0
    producer = Producer({"bootstrap.servers": bs, "transactional.id": "cli-open", "linger.ms": 0,
                         "transaction.timeout.ms": 900000})
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("cli-txn", value=b"open", partition=0)
    producer.flush()  # the transaction stays open
    try:
        listed = rows(tool(tmp_path, "TransactionsCommand", "--bootstrap-server", bs, "list"))
        assert ["cli-open", "0", listed[1][2], "Ongoing"] in [r[:4] for r in listed]
        described = rows(tool(tmp_path, "TransactionsCommand", "--bootstrap-server", bs, "describe",
                              "--transactional-id", "cli-open"))
        assert described[1][0] == "0" and described[1][1] == "cli-open" and "Ongoing" in described[1]
        assert "cli-txn-0" in described[1]
        producers = rows(tool(tmp_path, "TransactionsCommand", "--bootstrap-server", bs, "describe-producers",
                              "--topic", "cli-txn", "--partition", "0"))
        pid, epoch, start = producers[1][0], producers[1][1], producers[1][-1]
        assert start == "0"  # CurrentTransactionStartOffset
        hanging = rows(tool(tmp_path, "TransactionsCommand", "--bootstrap-server", bs, "find-hanging",
                            "--broker-id", "0"))
        assert hanging[1:] == [], "an open transaction its coordinator knows is not hanging"
        # Kafka's abort: a WriteTxnMarkers ABORT for the partition's open transaction.
        tool(tmp_path, "TransactionsCommand", "--bootstrap-server", bs, "abort", "--topic", "cli-txn",
             "--partition", "0", "--producer-id", pid, "--producer-epoch", epoch, "--coordinator-epoch", "0")
        after = rows(tool(tmp_path, "TransactionsCommand", "--bootstrap-server", bs, "describe-producers",
                          "--topic", "cli-txn", "--partition", "0"))
        assert after[1][-1] == "None"
        m = raw.request_module(raw.LIST_OFFSETS, 7)
        read_committed_end = m.ListOffsetsRequest(replica_id=-1, isolation_level=1, topics=(m.ListOffsetsTopic(
            name="cli-txn", partitions=(m.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                               timestamp=raw.LATEST),)),))
        with raw.RawClient(bs) as c:
            lso = int(c.call(read_committed_end).topics[0].partitions[0].offset)
        assert lso == 2, "the LSO moved past the aborted transaction (record + marker)"
    finally:
        producer.close()

"""Kafka's Java clients against eoslog and against Apache Kafka (java/ClientsCheck.java): Admin
(topics, configs, consumer groups, transactions, producers, DeleteRecords), idempotent and
transactional producers, a batch with keyless records to a compacted topic (KIP-467 record errors),
read_committed consumers in a classic group, sendOffsetsToTransaction with the consumer's group
metadata, and a consumer of the KIP-848 ``consumer`` protocol (group.protocol=consumer). Every check
must answer the same on both brokers, and none but the record errors' may fail.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.deps import require
from support.harness import BrokerProcess, in_parallel
from support.kafka_harness import (
    JVM_FLAGS,
    READY_TIMEOUT_S,
    KafkaBroker,
    class_data_flags,
    kafka_classpath,
    write_log_config,
)

SOURCE = Path(__file__).parent / "java" / "ClientsCheck.java"


def run_checks(bootstrap: str, work: Path) -> dict[str, str]:
    require("a JDK (javac; Java's single-file source launcher needs its compiler)", shutil.which("javac") is not None,
            "apt-get install -y openjdk-17-jdk-headless (scripts/setup.sh does it)")
    cmd = ["java", *JVM_FLAGS, *class_data_flags(),
           "-Xmx384m", f"-Dlog4j2.configurationFile={write_log_config(work, 'ERROR')}",
           "-cp", kafka_classpath(), str(SOURCE), bootstrap]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr[-4000:]
    checks = {}
    for line in result.stdout.splitlines():
        if line.startswith("CHECK "):
            _, name, answer = line.split(" ", 2)
            checks[name] = answer
    return checks


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], dict[str, str]]]:
    root = tmp_path_factory.mktemp("java-clients")
    (root / "eoslog").mkdir()
    eoslog = BrokerProcess(root / "eoslog" / "data", overrides={"group.initial.rebalance.delay.ms": "0"})
    kafka = KafkaBroker(root / "kafka" / "data", {})
    # Kafka formats and starts while the checks run against eoslog: one broker at a time serves
    # the checks, neither waits for the other's start-up.
    try:
        try:
            in_parallel([eoslog.start, kafka.launch])
            ours = run_checks(eoslog.bootstrap, root)
        finally:
            eoslog.stop()
        kafka.wait_ready(time.monotonic() + READY_TIMEOUT_S)
        theirs = run_checks(kafka.bootstrap, root)
    finally:
        kafka.kill()  # nothing is checked after: no controlled shutdown to wait for
    yield ours, theirs


def test_java_clients_get_the_same_answers_from_eoslog_and_kafka(both: tuple[dict[str, str], dict[str, str]]) -> None:
    ours, theirs = both
    assert len(theirs) == 16, f"the check program ran {len(theirs)} checks: {theirs}"
    assert ours == theirs


def test_no_check_fails_the_kip848_consumer_included(both: tuple[dict[str, str], dict[str, str]]) -> None:
    ours, _ = both
    failed = {name: answer for name, answer in ours.items() if answer.startswith("ERROR") and name != "record-errors"}
    assert failed == {}
    assert ours["read-read_committed"] == "10 0 aborted, end 15"
    # KIP-467: only the keyless records 0 and 5 fail as invalid; the others fail as their batch-mates.
    outcomes = ours["record-errors"].split(",")
    assert [i for i, o in enumerate(outcomes) if o == "ERROR InvalidRecordException"] == [0, 5], outcomes
    assert {o for i, o in enumerate(outcomes) if i % 5} == {"ERROR KafkaException"}, outcomes
    assert ours["read-read_uncommitted"] == "13 3 aborted, end 15"

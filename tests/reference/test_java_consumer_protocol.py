"""Kafka 4.4's Java consumer with ``group.protocol=consumer`` (KIP-848) against eoslog
(java/ConsumerProtocolCheck.java): members join and leave while records flow, each record committed
before the next poll — every record consumed exactly once, and the first member never stopped while the
second joined; a static member back on its partitions; a regular expression subscription (RE2/J's
SubscriptionPattern, resolved by the broker) picking up a topic created later.

One broker for the module, its consumer-group heartbeat and session lowered so that membership
changes take seconds.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.deps import require
from support.harness import BrokerProcess
from support.kafka_harness import JVM_FLAGS, class_data_flags, kafka_classpath, write_log_config

SOURCE = Path(__file__).parent / "java" / "ConsumerProtocolCheck.java"
BROKER_OVERRIDES = {
    "group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "6000", "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.assignment.interval.ms": "0",
}


@dataclass(frozen=True)
class Line:
    kind: str
    member: str
    at: int
    rest: tuple[str, ...]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("java-kip848") / "data", overrides=BROKER_OVERRIDES).start()
    yield b
    b.stop()


def run(broker: BrokerProcess, scenario: str, work: Path) -> tuple[list[Line], int]:
    require("a JDK (javac; Java's single-file source launcher needs its compiler)", shutil.which("javac") is not None,
            "apt-get install -y openjdk-17-jdk-headless (scripts/setup.sh does it)")
    cmd = ["java", *JVM_FLAGS, *class_data_flags(),
           "-Xmx384m", f"-Dlog4j2.configurationFile={write_log_config(work, 'ERROR')}",
           "-cp", kafka_classpath(), str(SOURCE), broker.bootstrap, scenario]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=400, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    lines, sent = [], -1
    for raw in result.stdout.splitlines():
        kind, *rest = raw.split()
        if kind == "SENT":
            sent = int(rest[0])
        elif kind in ("ASSIGNED", "REVOKED", "RECORD", "ERROR", "JOINING", "CLOSING", "CLOSED", "BACK"):
            lines.append(Line(kind, rest[0], int(rest[1]) if kind != "ERROR" else 0, tuple(rest[2:])))
    assert [ln for ln in lines if ln.kind == "ERROR"] == []
    return lines, sent


def partitions(line: Line) -> set[str]:
    return set() if line.rest[0] == "-" else set(line.rest[0].split(","))


def test_members_join_and_leave_and_every_record_is_consumed_once(broker: BrokerProcess, tmp_path: Path) -> None:
    lines, sent = run(broker, "flow", tmp_path)
    values = [ln.rest[2] for ln in lines if ln.kind == "RECORD"]
    assert sent > 0 and sorted(values, key=int) == [str(i) for i in range(sent)], "a record lost or read twice"
    m1 = [ln for ln in lines if ln.member == "m1"]
    revokes = [partitions(ln) for ln in m1 if ln.kind == "REVOKED" and partitions(ln)]
    assert revokes and all(len(r) < 6 for r in revokes[:-1]), "m1 gave everything up while staying"
    joined = next(ln.at for ln in lines if ln.kind == "JOINING")
    got2 = next(ln.at for ln in lines if ln.kind == "ASSIGNED" and ln.member == "m2" and partitions(ln))
    first = next(partitions(ln) for ln in m1 if ln.kind == "ASSIGNED" and partitions(ln))
    kept = first - revokes[0]
    during = [ln for ln in m1 if ln.kind == "RECORD" and joined <= ln.at <= got2
              and f"{ln.rest[0]}:{ln.rest[1]}" in kept]
    assert during, "m1 stopped fetching its kept partitions while m2 joined"


def owned(lines: list[Line], member: str, until: int) -> set[str]:
    """What ``member`` held at ``until``: its assignments less its revocations (incremental)."""
    held: set[str] = set()
    for ln in sorted((ln for ln in lines if ln.member == member and ln.at <= until), key=lambda ln: ln.at):
        if ln.kind == "ASSIGNED":
            held |= partitions(ln)
        elif ln.kind == "REVOKED":
            held -= partitions(ln)
    return held


def test_a_static_member_comes_back_to_its_partitions(broker: BrokerProcess, tmp_path: Path) -> None:
    lines, _ = run(broker, "static", tmp_path)
    closing = next(ln.at for ln in lines if ln.kind == "CLOSING")
    closed = next(ln.at for ln in lines if ln.kind == "CLOSED")
    b_had = owned(lines, "b", closing)
    back = next(ln.at for ln in lines if ln.kind == "BACK")
    b2_got = owned(lines, "b2", back)
    assert b2_got == b_had and len(b_had) == 2
    assert [ln for ln in lines if ln.member == "a" and ln.kind in ("ASSIGNED", "REVOKED") and ln.at > closed
            and ln.at < back and partitions(ln)] == [], "the other static member was moved"


def test_a_pattern_subscription_picks_up_a_new_topic(broker: BrokerProcess, tmp_path: Path) -> None:
    lines, _ = run(broker, "regex", tmp_path)
    got = set().union(*(partitions(ln) for ln in lines if ln.kind == "ASSIGNED"))
    assert got == {"jrx-first:0", "jrx-first:1", "jrx-second:0", "jrx-second:1"}
    assert [ln.rest[2] for ln in lines if ln.kind == "RECORD"] == ["late"]

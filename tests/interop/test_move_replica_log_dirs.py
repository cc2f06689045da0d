"""Issue 27, acceptance test 5 (moving a replica between disks online): Kafka 4.4's
``kafka-reassign-partitions.sh --execute`` with ``log_dirs`` moves partitions between a broker's two
``log.dirs`` (AlterReplicaLogDirs, throttled by ``--replica-alter-log-dirs-throttle``) while an
idempotent acks=all producer (eoslog.client) and a transactional producer (librdkafka, a quarter
of its transactions aborted) write to them; ``kafka-log-dirs.sh`` shows the future replica while it
moves, ``--verify`` says when it is done. The history checker (Jepsen's anomalies) then finds every
acknowledged record once, no aborted one read, each partition on its new disk — also after a
restart. A broker killed with SIGKILL mid-copy resumes the move at its next start; one killed
between the swap's two renames (fault point ``log_dir_move_between_renames``) completes it.

Mutant (not committed): ``LogManager._complete_interrupted_moves`` not run at start-up — the broker
killed between the renames comes back without the partition's records (the future log is removed
as a stray): ``test_a_move_killed_between_its_renames_is_completed`` fails with lost writes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer

from eoslog.faults import CRASH_ENV
from support.acked_writer import Writer
from support.cluster_harness import read_all, wait_until
from support.harness import BrokerProcess
from support.history import ABORT, COMMIT, INFO, OK, History, check
from support.kafka_harness import JVM_POLL_S, run_tool
from support.rawkafka import RawClient, create_topic

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"
TOPIC = "moving"
PRELOAD = 40 * 1024  # records of ~256 bytes per partition: a copy of several MB
THROTTLE = 500_000  # bytes/s (after the rate window's first 10 s): the copies take ~30 s, written to meanwhile


class TxnWriter:
    """A librdkafka transactional producer writing numbered transactions to one partition until
    stopped; every fourth aborted. A transaction cut by a broker's death is of unknown outcome."""

    def __init__(self, bootstrap: str, partition: int, history: History) -> None:
        self.bootstrap, self.partition, self.history = bootstrap, partition, history
        self.committed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TxnWriter:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(180)

    def _producer(self) -> Producer:
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": "mover", "linger.ms": 5,
                      "transaction.timeout.ms": 60000})
        p.init_transactions(120)
        return p

    def _run(self) -> None:
        p = self._producer()
        n = 0
        while not self._stop.is_set():
            name, commit = f"txn{n}", n % 4 != 3
            values = [f"{name}-{i}".encode() for i in range(20)]
            n += 1
            try:
                p.begin_transaction()
                for v in values:
                    p.produce(TOPIC, v, partition=self.partition)
                if commit:
                    p.commit_transaction(60)
                else:
                    p.abort_transaction(60)
            except KafkaException:
                for v in values:
                    self.history.send(v, INFO, txn=name)  # outcome unknown: the checker requires nothing
                p = self._producer()  # fences the cut transaction: aborted or completed, never open
                continue
            for v in values:
                self.history.send(v, OK, txn=name)
            self.history.txn(name, COMMIT if commit else ABORT)
            self.committed += commit


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "disk-a", more_log_dirs=[tmp_path / "disk-b"]).start()
    yield b
    if b.alive():
        b.kill()


def where(broker: BrokerProcess, work: Path) -> dict[int, tuple[str, bool, int]]:
    """Per partition of TOPIC, as kafka-log-dirs.sh describes it: (directory, future?, offset lag);
    a partition being moved is reported at its future replica."""
    out = run_tool(LOG_DIRS, ["--bootstrap-server", broker.bootstrap, "--describe", "--topic-list", TOPIC],
                   work).stdout
    doc = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    found: dict[int, tuple[str, bool, int]] = {}
    for d in doc["brokers"][0]["logDirs"]:
        for p in d["partitions"]:
            partition = int(p["partition"].rsplit("-", 1)[1])
            if p["isFuture"] or partition not in found:
                found[partition] = (d["logDir"], p["isFuture"], p["offsetLag"])
    return found


def preload(broker: BrokerProcess, partitions: int) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 20})
    for partition in range(partitions):
        for i in range(PRELOAD):
            p.produce(TOPIC, b"pre-%d-%d-" % (partition, i) + b"x" * 240, partition=partition)
            if i % 1000 == 0:
                p.poll(0)
    assert p.flush(120) == 0


def start_moves(broker: BrokerProcess, work: Path, targets: dict[int, str], *, throttle: bool = True) -> None:
    plan = work / "move.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": p, "replicas": [0], "log_dirs": [d]} for p, d in targets.items()]}))
    out = run_tool(REASSIGN, ["--bootstrap-server", broker.bootstrap, "--execute", "--reassignment-json-file",
                              str(plan), *(["--replica-alter-log-dirs-throttle", str(THROTTLE)] if throttle else [])],
                   work).stdout
    assert out.count("Successfully started moving log directory") == len(targets), out


def verify_done(broker: BrokerProcess, work: Path) -> bool:
    out = run_tool(REASSIGN, ["--bootstrap-server", broker.bootstrap, "--verify", "--reassignment-json-file",
                              str(work / "move.json")], work, check=False).stdout
    replicas = out.count("Reassignment of replica")
    return replicas > 0 and "is still in progress" not in out and out.count("completed successfully.") == replicas


def final_check(broker: BrokerProcess, history: History, partitions: int) -> None:
    for p in range(partitions):
        history.final_read(p, read_all(broker.bootstrap, TOPIC, p, timeout_s=120))
    report = check(history)
    assert report.ok, report.summary()


def other_disk(broker: BrokerProcess, current: str) -> str:
    [other] = [str(d.resolve()) for d in broker.log_dirs if str(d.resolve()) != current]
    return other


def test_kafka_reassign_partitions_moves_replicas_between_disks_under_writes(broker: BrokerProcess,
                                                                              tmp_path: Path) -> None:
    with RawClient(broker.bootstrap) as raw:
        assert create_topic(raw, TOPIC, 2) == 0
    preload(broker, 2)
    before = where(broker, tmp_path)
    targets = {p: other_disk(broker, d) for p, (d, _, _) in before.items()}
    history = History()
    seen_future: set[int] = set()
    with Writer(broker, TOPIC, history, partition=0) as idempotent, TxnWriter(broker.bootstrap, 1, history) as txns:
        wait_until(lambda: idempotent.sent > 0 and txns.committed > 0, "both writers writing", 60)
        start_moves(broker, tmp_path, targets)

        def done() -> bool:
            now = where(broker, tmp_path)
            seen_future.update(p for p, (d, future, lag) in now.items() if future and d == targets[p] and lag > 0)
            return verify_done(broker, tmp_path)

        wait_until(done, "the moves done (--verify)", 240, interval_s=JVM_POLL_S)
        sent = idempotent.sent
        wait_until(lambda: idempotent.sent > sent + 200, "writes after the moves", 60)
    assert seen_future == {0, 1}  # kafka-log-dirs.sh showed each future replica catching up
    after = where(broker, tmp_path)
    assert {p: d for p, (d, _, _) in after.items()} == targets and not any(f for _, f, _ in after.values())
    assert not [p for d in broker.log_dirs for p in d.glob("*-future")]
    final_check(broker, history, 2)
    broker.stop()
    broker.start()
    assert {p: d for p, (d, _, _) in where(broker, tmp_path).items()} == targets
    history.final.clear()
    final_check(broker, history, 2)


def test_a_move_killed_mid_copy_resumes_at_the_next_start(broker: BrokerProcess, tmp_path: Path) -> None:
    with RawClient(broker.bootstrap) as raw:
        assert create_topic(raw, TOPIC, 2) == 0
    preload(broker, 2)
    targets = {p: other_disk(broker, d) for p, (d, _, _) in where(broker, tmp_path).items()}
    history = History()
    with Writer(broker, TOPIC, history, partition=0) as idempotent, TxnWriter(broker.bootstrap, 1, history):
        wait_until(lambda: idempotent.sent > 0, "writing", 60)
        start_moves(broker, tmp_path, targets)
        wait_until(lambda: all(future for _, future, _ in where(broker, tmp_path).values()), "both moving", 60,
                   interval_s=JVM_POLL_S)
        broker.kill()  # SIGKILL mid-copy
        assert [p for d in broker.log_dirs for p in d.glob("*-future")]
        broker.start()
        wait_until(lambda: verify_done(broker, tmp_path), "the moves done after the restart", 240,
                   interval_s=JVM_POLL_S)
        sent = idempotent.sent
        wait_until(lambda: idempotent.sent > sent + 200, "writes after the moves", 60)
    assert {p: d for p, (d, _, _) in where(broker, tmp_path).items()} == targets
    assert "resumes" in broker.log_text()
    final_check(broker, history, 2)


def test_a_move_killed_between_its_renames_is_completed(broker: BrokerProcess, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    with RawClient(broker.bootstrap) as raw:
        assert create_topic(raw, TOPIC, 1) == 0
    preload(broker, 1)
    [(current, _, _)] = where(broker, tmp_path).values()
    target = other_disk(broker, current)
    history = History()
    broker.stop()
    monkeypatch.setenv(CRASH_ENV, "log_dir_move_between_renames")
    broker.start()
    with Writer(broker, TOPIC, history, partition=0) as idempotent:
        wait_until(lambda: idempotent.sent > 0, "writing", 60)
        plan = tmp_path / "move.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": TOPIC, "partition": 0, "replicas": [0], "log_dirs": [target]}]}))
        run_tool(REASSIGN, ["--bootstrap-server", broker.bootstrap, "--execute", "--reassignment-json-file",
                            str(plan)], tmp_path)
        wait_until(lambda: not broker.alive(), "the broker killed at the fault point", 120)
        assert "log_dir_move_between_renames" in broker.log_text()
        monkeypatch.delenv(CRASH_ENV)
        broker.start()
        sent = idempotent.sent
        wait_until(lambda: idempotent.sent > sent + 200, "writes after the restart", 120)
    final_check(broker, history, 1)
    assert {p: d for p, (d, _, _) in where(broker, tmp_path).items()} == {0: target}
    assert "completing the move of moving-0" in broker.log_text()


def test_eoslog_partitions_move_dir_moves_a_replica_and_follows_it(broker: BrokerProcess, tmp_path: Path) -> None:
    """``eoslog partitions move-dir``: the same move from eoslog's CLI, followed to its end; a
    directory that is not one of log.dirs is refused with the broker's error."""
    with RawClient(broker.bootstrap) as raw:
        assert create_topic(raw, TOPIC, 1) == 0
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(2000):
        p.produce(TOPIC, b"r-%d" % i, partition=0)
    assert p.flush(60) == 0
    [(current, _, _)] = where(broker, tmp_path).values()
    target = other_disk(broker, current)

    def move(log_dir: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "eoslog", "partitions", "move-dir", "--topic", TOPIC,
                               "--partition", "0", "--log-dir", log_dir, "--bootstrap-server", broker.bootstrap],
                              capture_output=True, text=True, timeout=120)

    refused = move(str(tmp_path / "not-a-log-dir"))
    assert refused.returncode != 0 and "cannot move moving-0 on broker 0" in refused.stdout + refused.stderr
    moved = move(target)
    assert moved.returncode == 0, moved.stdout + moved.stderr
    assert f"moving-0 on broker 0 is in {target}" in moved.stdout
    assert where(broker, tmp_path) == {0: (target, False, 0)}
    assert [v for _, v in read_all(broker.bootstrap, TOPIC, 0, timeout_s=60)] == [b"r-%d" % i for i in range(2000)]

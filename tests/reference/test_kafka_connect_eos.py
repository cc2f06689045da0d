"""Kafka Connect's exactly-once source support (KIP-618) on eoslog, with Kafka 4.4's distributed
worker (connect-runtime from reference/pom.xml) and a small source connector compiled here
(java/connect: one task copies the lines of a file, its source offset the number of lines done).

Two workers of one Connect cluster (``exactly.once.source.support=enabled``) copy a generated
file into a topic; each poll's records and the task's offset are committed in one transaction,
and the leader fences the task's earlier producers (Admin.fenceProducers: InitProducerId for the
task's transactional id) before the task starts anywhere. Meanwhile:

1. the worker running the task is killed -9 and started again (the task moves or restarts and
   resumes from the offset its last committed transaction stored);
2. the broker is killed -9 and restarted — on a cluster, the leader of the output partition;
3. a zombie: the worker running the task is stopped (SIGSTOP) while its transaction is open;
   the other worker takes the task over after the group drops the stopped one, fencing it; when
   the stopped worker resumes, its task's transaction is refused (fenced) and aborted.

The topic read ``read_committed`` then holds every line of the file exactly once, in order; the
zombie's open transaction is among the aborted records ``read_uncommitted`` shows; the stopped
worker's task reports the fencing; and the task's producer epochs advanced (transaction
version 2, every EndTxn v5 bumps it). Single node and a ZooKeeper + 3-broker cluster (topics at
replication factor 3, min.insync.replicas 2).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eoslog.client import Consumer
from eoslog.client.admin import Admin, IsolationLevel, NewTopic, OffsetSpec
from eoslog.client.types import TopicPartition
from support.cluster_harness import Cluster
from support.deps import require
from support.harness import BrokerProcess, free_port, wait_until
from support.kafka_harness import C1_ONLY, JVM_FLAGS, class_data_flags, kafka_classpath, write_log_config
from support.markers import epochs_not_advancing, transaction_markers

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SOURCE = Path(__file__).parent / "java" / "connect"
GROUP, CONNECTOR, TOPIC = "connect-eos", "lines", "copied-lines"
TASK_TXN_ID = f"{GROUP}-{CONNECTOR}-0"  # Connect's transactional id of the connector's task 0
LINES = 30_000
READY_S = 240.0


@pytest.fixture(scope="module")
def connector_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test connector, compiled against Kafka's jars (its ServiceLoader manifest beside it)."""
    javac = shutil.which("javac")
    require("a JDK (javac) to compile the test connector", javac is not None,
            "apt-get install -y openjdk-17-jdk-headless (scripts/setup.sh does it)")
    out = tmp_path_factory.mktemp("connector")
    subprocess.run([str(javac), "-d", str(out), "-cp", kafka_classpath(),
                    *map(str, sorted((SOURCE / "eoslog" / "connect").glob("*.java")))], check=True)
    shutil.copytree(SOURCE / "META-INF", out / "META-INF")
    return out


class Worker:
    """One Kafka Connect distributed worker (org.apache.kafka.connect.cli.ConnectDistributed)."""

    def __init__(self, work: Path, name: str, bootstrap: str, classes: Path, replication: int) -> None:
        self.name, self.port = name, free_port()
        self.worker_id = f"127.0.0.1:{self.port}"
        work.mkdir(parents=True, exist_ok=True)
        props = work / f"{name}.properties"
        props.write_text("\n".join([
            f"bootstrap.servers={bootstrap}", f"group.id={GROUP}",
            "key.converter=org.apache.kafka.connect.storage.StringConverter",
            "value.converter=org.apache.kafka.connect.storage.StringConverter",
            "offset.storage.topic=connect-offsets", "config.storage.topic=connect-configs",
            "status.storage.topic=connect-status", "offset.storage.partitions=5", "status.storage.partitions=1",
            *(f"{t}.storage.replication.factor={replication}" for t in ("offset", "config", "status")),
            "exactly.once.source.support=enabled", f"listeners=http://127.0.0.1:{self.port}",
            "rest.advertised.host.name=127.0.0.1", f"rest.advertised.port={self.port}",
            # A stopped worker leaves the group (and its task moves) after this long.
            "session.timeout.ms=6000", "heartbeat.interval.ms=1000", "scheduled.rebalance.max.delay.ms=0",
            "plugin.discovery=service_load",
        ]) + "\n")
        self.cmd = ["java", *JVM_FLAGS, *class_data_flags(), "-Xmx384m", *C1_ONLY,
                    f"-Dlog4j2.configurationFile={write_log_config(work, 'INFO')}",
                    "-cp", f"{kafka_classpath()}{os.pathsep}{classes}",  # Kafka's jars first: their class-data archive
                    "org.apache.kafka.connect.cli.ConnectDistributed", str(props)]
        self.log = work / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Worker:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT)
        wait_until(lambda: self.up() or not self.alive(), f"Connect worker {self.name}", READY_S)
        assert self.alive(), f"worker {self.name} exited:\n{self.log.read_text()[-4000:]}"
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def up(self) -> bool:
        try:
            code, body = self.rest("GET", "/")
            return code == 200 and isinstance(body, dict) and "version" in body
        except (OSError, urllib.error.URLError):
            return False

    def rest(self, method: str, path: str, body: object = None) -> tuple[int, Any]:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                return r.status, _json(r.read())
        except urllib.error.HTTPError as e:
            return e.code, _json(e.read())

    def kill(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGCONT)  # a stopped JVM must be able to die
            self.proc.kill()
            self.proc.wait(30)

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)


def _json(data: bytes) -> Any:
    """A REST answer's JSON; None for anything else (Jetty's HTML pages while the worker starts)."""
    try:
        return json.loads(data or b"null")
    except ValueError:
        return None


def committed_lines(bootstrap: str, isolation: str = "read_committed") -> list[str]:
    """The output topic's values up to its end, as a read_committed (or not) consumer sees them."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "isolation.level": isolation, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        values: list[str] = []
        deadline = time.monotonic() + 120
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, f"reading {TOPIC} stuck at {consumer.position(tp)} of {end}"
            values += [(r.value or b"").decode() for r in consumer.poll(1.0)]
        return values
    finally:
        consumer.close()


def end_offsets(bootstrap: str) -> tuple[int, int]:
    """(last stable offset, high watermark) of the output partition, asked of its leader."""
    tp = TopicPartition(TOPIC, 0)
    with Admin({"bootstrap.servers": bootstrap}, default_api_timeout_ms=30000) as admin:
        lso = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=IsolationLevel.READ_COMMITTED)[tp]
        hw = admin.list_offsets({tp: OffsetSpec.latest()})[tp]
    return lso.offset, hw.offset


def open_transaction(bootstrap: str) -> bool:
    lso, hw = end_offsets(bootstrap)
    return hw > lso


# How long a stopped task's transaction must stay Ongoing to count as open: longer than an EndTxn
# sent just before the SIGSTOP can be held (eoslog makes the transaction's writes durable, an fsync
# round, before PrepareCommit; the coordinator still says Ongoing meanwhile).
SETTLE_S = 2.0


def ongoing_with_records(bootstrap: str) -> bool:
    """The task's transaction has records in the log and its coordinator still calls it Ongoing,
    before and after SETTLE_S: with its producer stopped it can then only end aborted. (An open
    range in the log alone may be a commit already decided, its markers on their way.)"""
    def ongoing() -> bool:
        with Admin({"bootstrap.servers": bootstrap}, default_api_timeout_ms=30000) as admin:
            return admin.describe_transactions([TASK_TXN_ID])[TASK_TXN_ID].state == "Ongoing"

    if not (open_transaction(bootstrap) and ongoing()):
        return False
    time.sleep(SETTLE_S)
    return ongoing() and open_transaction(bootstrap)


class Setup:
    """The brokers (one, or a cluster) and what the test kills on them."""

    def __init__(self, tmp: Path, cluster: bool) -> None:
        self.cluster = Cluster(tmp / "cluster").start() if cluster else None
        self.single = None if cluster else BrokerProcess(tmp / "data").start()
        self.replication = 3 if cluster else 1

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap if self.cluster is not None else self.single.bootstrap  # type: ignore[union-attr]

    def create_output(self) -> None:
        config = {"min.insync.replicas": "2"} if self.cluster is not None else {}
        with Admin({"bootstrap.servers": self.bootstrap}, default_api_timeout_ms=30000) as admin:
            admin.create_topics([NewTopic(TOPIC, 1, self.replication, config)])

    def leader_bootstrap(self) -> str:
        """The output partition's leader (where its markers are fetched from)."""
        if self.cluster is None:
            return self.bootstrap
        leader = self.cluster.wait_for(lambda m: m.topics[TOPIC][0].leader > 0, "a leader").topics[TOPIC][0].leader
        return self.cluster.brokers[leader].bootstrap

    def kill_broker(self) -> str:
        if self.cluster is None:
            assert self.single is not None
            self.single.kill()
            self.single.start()
            return "the broker"
        leader = self.cluster.wait_for(lambda m: m.topics[TOPIC][0].leader > 0, "a leader").topics[TOPIC][0].leader
        victim = self.cluster.brokers[leader]
        victim.kill()
        victim.start()
        return f"broker {leader}, the leader of {TOPIC}-0"

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
        elif self.single is not None and self.single.alive():
            self.single.stop()


@pytest.fixture(params=["single", "cluster"])
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Setup]:
    s = Setup(tmp_path, request.param == "cluster")
    try:
        yield s
    finally:
        s.stop()


def test_exactly_once_source_through_kills_and_a_zombie(setup: Setup, connector_classes: Path,
                                                        tmp_path: Path) -> None:
    lines = [f"line {i:06d} " + "x" * (i % 40) for i in range(LINES)]
    source = tmp_path / "input.txt"
    source.write_text("".join(f"{line}\n" for line in lines))
    setup.create_output()
    workers = {name: Worker(tmp_path / "workers", name, setup.bootstrap, connector_classes, setup.replication)
               for name in ("a", "b")}
    try:
        for w in workers.values():
            w.start()
        status, body = workers["a"].rest("PUT", f"/connectors/{CONNECTOR}/config", {
            "connector.class": "eoslog.connect.LinesSourceConnector", "tasks.max": "1", "file": str(source),
            "topic": TOPIC, "exactly.once.support": "required", "transaction.boundary": "poll",
            "lines.per.poll": "25", "poll.pause.ms": "10"})
        assert status == 201, body

        stopped: set[str] = set()

        def copied() -> int:
            """Lines copied by committed transactions: the task's source offset as stored with
            them (Connect's GET /connectors/{name}/offsets reads it from the offsets topic)."""
            for w in workers.values():
                if not w.alive() or w.name in stopped:
                    continue
                with contextlib.suppress(OSError, urllib.error.URLError):
                    code, body = w.rest("GET", f"/connectors/{CONNECTOR}/offsets")
                    if code == 200:
                        return max((int(o["offset"]["line"]) for o in body["offsets"]), default=0)
            return 0

        def running_on() -> Worker | None:
            for w in workers.values():
                if not w.alive() or w.name in stopped:
                    continue
                with contextlib.suppress(OSError, urllib.error.URLError):
                    code, st = w.rest("GET", f"/connectors/{CONNECTOR}/status")
                    if code == 200 and st["tasks"] and st["tasks"][0]["state"] == "RUNNING":
                        return next((x for x in workers.values() if x.worker_id == st["tasks"][0]["worker_id"]),
                                    None)
            return None

        def further(fraction: float) -> None:
            target = copied() + int(LINES * fraction)
            wait_until(lambda: copied() >= min(target, LINES), f"{target} lines copied", 180)

        further(0.1)
        # 1. kill -9 of the worker running the task, and its restart.
        victim = running_on()
        assert victim is not None
        victim.kill()
        victim.start()
        further(0.15)
        # 2. kill -9 of the broker (the output partition's leader on a cluster).
        setup.kill_broker()
        further(0.15)
        # 3. a zombie: stop the task's worker with its transaction open; the other takes over.
        zombie = None
        for _ in range(50):
            wait_until(lambda: open_transaction(setup.bootstrap), "an open transaction", 60)
            candidate = running_on()
            assert candidate is not None
            candidate.signal(signal.SIGSTOP)
            if ongoing_with_records(setup.bootstrap):
                zombie = candidate
                stopped.add(zombie.name)
                break
            candidate.signal(signal.SIGCONT)  # it committed (or was committing) in between: again
        assert zombie is not None, "the task never stopped inside a transaction"
        other = next(w for w in workers.values() if w is not zombie)
        wait_until(lambda: running_on() is other, "the task taken over by the other worker", 120)
        further(0.1)
        logged = zombie.log.stat().st_size
        zombie.signal(signal.SIGCONT)
        stopped.clear()
        wait_until(lambda: copied() >= LINES, "every line copied", 300)
        # The zombie's task learnt it was fenced when it tried to go on.
        def fenced() -> bool:
            with open(zombie.log, "rb") as f:
                f.seek(logged)
                return b"ProducerFencedException" in f.read()

        wait_until(fenced, "the zombie task's producer fenced (ProducerFencedException in its log)", 120)
    finally:
        for w in workers.values():
            w.kill()

    got = committed_lines(setup.bootstrap)
    assert len(got) == LINES and got == lines, (
        f"{len(got)} lines read_committed; first difference at "
        f"{next((i for i, (a, b) in enumerate(zip(got, lines, strict=False)) if a != b), min(len(got), LINES))}")
    everything = committed_lines(setup.bootstrap, "read_uncommitted")
    assert len(everything) > LINES  # the zombie's open transaction (and the killed ones') aborted
    markers = transaction_markers(setup.leader_bootstrap(), TOPIC, 0)
    assert not epochs_not_advancing(markers), "a task producer ended two transactions under one epoch"
    assert any(not m.commit for m in markers)

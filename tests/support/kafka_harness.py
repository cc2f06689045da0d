"""Apache Kafka beside eoslog: a real Kafka broker (KRaft) as a subprocess on free loopback ports.

``KafkaBroker`` is one KRaft node in combined mode (controller and broker in one JVM), with a fresh
data directory formatted by Kafka's own storage tool. ``KafkaCluster`` is three such nodes forming one
controller quorum. Both offer ``BrokerProcess``'s interface (``bootstrap``, ``start``, ``stop``,
``kill``, ``restart``, ``alive``, ``log_text``), so a test can be parametrised over ``eoslog``,
``kafka`` and ``kafka-cluster``; a cluster's single nodes are ``cluster.nodes[i]``.

The jars come from ``.reference/lib/kafka`` (``scripts/setup.sh`` resolves ``reference/pom.xml``
there); a missing Java or missing jars fail the test (tests/support/deps.py), never skip it. The JVMs are
small and start fast on two cores: serial GC, a 512 MB heap cap and class data sharing; the
short-lived tools also stop at the C1 compiler.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from support.deps import missing, require_java
from support.harness import BrokerProcess, ServerProcess, free_port, in_parallel, wait_until

ROOT = Path(__file__).resolve().parents[2]
REFERENCE_LIB = Path(os.environ.get("EOSLOG_REFERENCE_LIB", ROOT / ".reference" / "lib"))
KAFKA_LIB = REFERENCE_LIB / "kafka"
SPARK_KAFKA_LIB = REFERENCE_LIB / "spark-kafka"  # spark-sql-kafka-0-10 and the jars PySpark lacks
SETUP_HINT = ("run scripts/setup.sh: it resolves reference/pom.xml with Maven into .reference/lib "
              "(needs Java 17 and Maven; as root it installs Maven with apt-get)")
READY_TIMEOUT_S = 120.0
# How often a test polls with a Kafka tool (a JVM each time, about a CPU-second): wait_until's
# 50 ms default would start them back to back and take a core from the rest of the suite.
JVM_POLL_S = 1.0
READY_LINE = "Kafka Server started"

# Startup on 2 shared cores matters more than peak speed: tests run many short JVMs.
JVM_FLAGS = ("-XX:+UseSerialGC", "-Xshare:auto", "-Djava.awt.headless=true")
# JDK 17's CDS logging warns on stdout, which tests parse, about classes it cannot archive.
CDS_QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
CDS_DIR = ROOT / ".reference" / "cds"
BROKER_HEAP = ("-Xms64m", "-Xmx512m")
C1_ONLY = ("-XX:TieredStopAtLevel=1",)  # no C2 compiles: half a short run's CPU, a slower peak
TOOL_FLAGS = ("-Xmx256m", *C1_ONLY)
# Brokers run Kafka's own JIT (the benchmarks compare against that) unless the process asked for
# start-up over peak speed (``brokers_favour_start_up``: the test suite).
_broker_jit: tuple[str, ...] = ()


def brokers_favour_start_up() -> None:
    """Kafka brokers this process starts from now on compile with C1 only: a broker's start and
    100,000 records took 5.8 CPU-s with C2, 3.5 without, on a suite that is CPU-bound. Not for
    benchmarks: Kafka's peak speed is what they measure."""
    global _broker_jit
    _broker_jit = C1_ONLY

LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.out.ref = OUT
"""


def kafka_classpath() -> str:
    """The classpath of Kafka's jars; fails the test naming what to run when they are missing."""
    jars = list(KAFKA_LIB.glob("kafka_2.13-*.jar")) if KAFKA_LIB.is_dir() else []
    if not jars:
        missing(f"Apache Kafka's jars ({KAFKA_LIB} has no kafka_2.13-*.jar)", SETUP_HINT)
    return str(KAFKA_LIB / "*")


def spark_kafka_jars() -> list[Path]:
    """The jars of Spark's Kafka connector (``spark.jars``); empty when they are not resolved."""
    return sorted(SPARK_KAFKA_LIB.glob("*.jar")) if SPARK_KAFKA_LIB.is_dir() else []


def require_spark_kafka() -> None:
    """Fail the test, naming what to run, when Spark's Kafka connector jars are missing."""
    if not any(j.name.startswith("spark-sql-kafka-0-10") for j in spark_kafka_jars()):
        missing(f"Spark's Kafka connector ({SPARK_KAFKA_LIB} has no spark-sql-kafka-0-10_*.jar)", SETUP_HINT)


def kafka_version() -> str:
    jars = sorted(KAFKA_LIB.glob("kafka_2.13-*.jar"))
    return jars[0].name.removeprefix("kafka_2.13-").removesuffix(".jar") if jars else "unknown"


@functools.cache  # the JVM and the jars do not change during a run: stat them once, not per JVM
def class_data_archive() -> Path:
    """The application class-data archive (AppCDS) of Kafka's jars on this JVM. A Kafka tool's
    start costs about 1.4 CPU-seconds, 0.7 with its classes mapped from the archive, and the suite
    starts hundreds of them on two cores. Keyed by the JVM build and the jars, so a new JDK or
    Kafka version gets an archive of its own (a stale one would only be ignored by the JVM)."""
    java = Path(os.path.realpath(require_java()))
    jvm = [(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in java.parents[1].glob("lib/server/libjvm.so")]
    jars = sorted((p.name, p.stat().st_size) for p in KAFKA_LIB.glob("*.jar"))
    return CDS_DIR / f"kafka-{hashlib.sha256(repr((jvm, jars)).encode()).hexdigest()[:16]}.jsa"


def class_data_flags() -> tuple[str, ...]:
    """The JVM flags that map Kafka's classes from their archive when it exists; for any JVM whose
    classpath starts with ``kafka_classpath()`` (the JVM ignores the archive otherwise)."""
    archive = class_data_archive()
    return (*CDS_QUIET, *((f"-XX:SharedArchiveFile={archive}",) if archive.exists() else ()))


def java_command(main_class: str, args: Sequence[str], *, log_config: Path,
                 heap: Sequence[str] = TOOL_FLAGS, extra_flags: Sequence[str] = ()) -> list[str]:
    """``java`` running one of Kafka's main classes (a broker, a tool, a client) on its jars, with
    their class-data archive once a tool run has written it (``run_tool``)."""
    return [require_java(), *JVM_FLAGS, *class_data_flags(), *heap, *extra_flags,
            f"-Dlog4j2.configurationFile={log_config}", "-cp", kafka_classpath(), main_class, *args]


def write_log_config(directory: Path, level: str = "INFO") -> Path:
    path = directory / f"log4j2-{level.lower()}.properties"
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        path.write_text(LOG4J2.format(level=level))
    return path


@contextlib.contextmanager
def _writing_archive(archive: Path) -> Iterator[Path | None]:
    """Where this tool run should write the class-data archive at its exit: a temporary name when
    there is none yet and no other test process is writing one (pytest-xdist workers), else None."""
    if archive.exists():
        yield None
        return
    archive.parent.mkdir(parents=True, exist_ok=True)
    lock = archive.with_suffix(".writing")
    with contextlib.suppress(FileNotFoundError):
        if time.time() - lock.stat().st_mtime > 600:  # left by a run killed mid-dump
            lock.unlink(missing_ok=True)
    try:
        os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        yield None
        return
    dump_to = archive.with_suffix(f".{os.getpid()}.tmp")
    try:
        yield dump_to
    finally:
        dump_to.unlink(missing_ok=True)
        lock.unlink(missing_ok=True)


def run_tool(main_class: str, args: Sequence[str], work_dir: Path, *, timeout_s: float = 120.0,
             check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's command-line tools (e.g. ``org.apache.kafka.tools.TopicCommand``) to
    completion; a non-zero exit fails with its output when ``check``."""
    cmd = java_command(main_class, args, log_config=write_log_config(work_dir, "WARN"))
    archive = class_data_archive()
    with _writing_archive(archive) as dump_to:
        if dump_to is not None:
            cmd.insert(1, f"-XX:ArchiveClassesAtExit={dump_to}")
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, input=stdin,
                              check=False)
        if dump_to is not None and proc.returncode == 0 and dump_to.exists():
            os.replace(dump_to, archive)
    if check and proc.returncode != 0:
        raise AssertionError(f"{main_class} {' '.join(args)} exited {proc.returncode}:\n"
                             f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


class KafkaNode(ServerProcess):
    """One KRaft node in combined mode (``process.roles=broker,controller``)."""

    def __init__(self, data_dir: Path, node_id: int, port: int, controller_port: int,
                 voters: str, cluster_id: str, overrides: Mapping[str, str]) -> None:
        self.data_dir = data_dir
        self.node_id = node_id
        self.port = port
        self.controller_port = controller_port
        self.voters = voters
        self.cluster_id = cluster_id
        self.overrides = dict(overrides)
        self.proc: subprocess.Popen[str] | None = None
        self.log_path = data_dir.parent / f"kafka-{node_id}-{port}.log"
        self.config_path = data_dir.parent / f"kafka-{node_id}.properties"
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def properties(self) -> dict[str, str]:
        return {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.data_dir),
            **self.overrides,
        }

    def _write_config(self) -> None:
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))

    def formatted(self) -> bool:
        return (self.data_dir / "meta.properties").exists()

    def format(self) -> None:
        """Format the data directory with Kafka's storage tool (a fresh node only)."""
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        self._write_config()
        run_tool("kafka.tools.StorageTool",
                 ["format", f"--cluster-id={self.cluster_id}", "-c", str(self.config_path)], self.data_dir.parent)

    def launch(self) -> None:
        """Start the JVM without waiting for it (a cluster starts its nodes together: a node
        waits for the quorum before it says it has started)."""
        if not self.formatted():
            self.format()
        self._write_config()
        cmd = java_command("kafka.Kafka", [str(self.config_path)], heap=BROKER_HEAP, extra_flags=_broker_jit,
                           log_config=write_log_config(self.data_dir.parent))
        with open(self.log_path, "a") as log:
            log.write(f"--- start {self.starts} ---\n")
        # One pipe for both streams: the watcher copies them to the log and spots the ready line.
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.starts += 1
        self._ready = threading.Event()
        proc, ready, log_path = self.proc, self._ready, self.log_path

        def watch() -> None:
            assert proc.stdout is not None
            with open(log_path, "a") as out:
                for line in proc.stdout:
                    out.write(line)
                    out.flush()
                    if READY_LINE in line:
                        ready.set()

        threading.Thread(target=watch, daemon=True).start()

    def wait_ready(self, deadline: float) -> None:
        assert self.proc is not None
        while not self._ready.wait(0.05):
            if self.proc.poll() is not None:
                raise RuntimeError(f"Kafka node {self.node_id} exited with {self.proc.returncode}; "
                                   f"see {self.log_path}:\n" + self.log_text()[-3000:])
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"Kafka node {self.node_id} not ready after {READY_TIMEOUT_S}s; "
                                   f"see {self.log_path}:\n" + self.log_text()[-3000:])

    def start(self) -> KafkaNode:
        self.launch()
        self.wait_ready(time.monotonic() + READY_TIMEOUT_S)
        return self

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait: Kafka's controlled shutdown."""
        return super().stop(timeout)


def _defaults(replication: int, min_isr: int) -> dict[str, str]:
    """Broker settings for tests: internal topics fitting the node count, and no pause before a
    new group's first rebalance (eoslog's test brokers are configured the same way where it matters)."""
    return {
        "offsets.topic.replication.factor": str(replication),
        "transaction.state.log.replication.factor": str(replication),
        "transaction.state.log.min.isr": str(min_isr),
        "share.coordinator.state.topic.replication.factor": str(replication),
        "share.coordinator.state.topic.min.isr": str(min_isr),
        "default.replication.factor": str(replication),
        "group.initial.rebalance.delay.ms": "0",
    }


class KafkaBroker(KafkaNode):
    """A single-node Apache Kafka (KRaft combined mode) with its own data directory."""

    def __init__(self, data_dir: Path, overrides: Mapping[str, str] | None = None, node_id: int = 1) -> None:
        port, controller_port = free_port(), free_port()
        super().__init__(data_dir, node_id=node_id, port=port, controller_port=controller_port,
                         voters=f"{node_id}@127.0.0.1:{controller_port}", cluster_id=new_cluster_id(),
                         overrides={**_defaults(1, 1), **(overrides or {})})


class KafkaCluster(ServerProcess):
    """Three KRaft nodes, each controller and broker, on loopback: one controller quorum."""

    def __init__(self, root: Path, size: int = 3, overrides: Mapping[str, str] | None = None) -> None:
        ports = [(free_port(), free_port()) for _ in range(size)]
        voters = ",".join(f"{i + 1}@127.0.0.1:{c}" for i, (_, c) in enumerate(ports))
        cluster_id = new_cluster_id()
        settings = {**_defaults(min(3, size), min(2, size)), **(overrides or {})}
        self.proc, self.log_path = None, root / "cluster.log"  # the nodes have the processes
        self.nodes = [KafkaNode(root / f"node{i + 1}" / "data", node_id=i + 1, port=p,
                                controller_port=c, voters=voters, cluster_id=cluster_id,
                                overrides=settings)
                      for i, (p, c) in enumerate(ports)]

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        return next(n for n in self.nodes if n.node_id == node_id)

    def leader_of(self, topic: str, partition: int = 0) -> KafkaNode:
        """The node leading ``topic``'s partition, as a live node's metadata says (waits for one)."""
        def leader() -> int:
            for n in self.nodes:
                if n.alive():
                    return partition_leader(n.bootstrap, topic, partition)
            return -1
        wait_until(lambda: leader() >= 0, f"a leader of {topic}-{partition}")
        return self.node(leader())

    def coordinator_of(self, key: str, key_type: int = 1) -> KafkaNode:
        """The node coordinating a transactional id (key type 1) or a group (0) (waits for one)."""
        from support.rawkafka import coordinator_id

        found: list[int] = []

        def ask() -> bool:
            for n in self.nodes:
                node = coordinator_id(n.bootstrap, key, key_type) if n.alive() else None
                if node is not None:
                    found[:] = [node]
                    return True
            return False

        wait_until(ask, f"the coordinator of {key}")
        return self.node(found[0])

    def start(self) -> KafkaCluster:
        # Kafka's storage tool is a JVM of its own per node: the three format at once.
        in_parallel([n.format for n in self.nodes if not n.formatted()])
        for n in self.nodes:
            n.launch()
        deadline = time.monotonic() + READY_TIMEOUT_S
        for n in self.nodes:
            n.wait_ready(deadline)
        return self

    def kill(self) -> None:
        """``kill -9`` of every node (one node: ``cluster.node(i).kill()``)."""
        for n in self.nodes:
            n.kill()

    def stop(self, timeout: float = 20.0) -> int:
        """Stop every node; the highest exit code. A node still shutting down after ``timeout``
        is killed -9 instead: with every node a KRaft controller, the last one's controlled
        shutdown can wait for a quorum its peers' exits took away ("RaftManager ... could not be
        established" until killed, seen in CI), which is Kafka's, not what a test checks."""
        # Signal every node first: controlled shutdowns proceed in parallel.
        for n in self.nodes:
            if n.alive():
                assert n.proc is not None
                n.proc.send_signal(signal.SIGTERM)
        codes = []
        for n in self.nodes:
            try:
                codes.append(n.stop(timeout))
            except subprocess.TimeoutExpired:  # ServerProcess.stop killed it
                codes.append(-signal.SIGKILL)
        return max(codes)

    def alive(self) -> bool:
        return all(n.alive() for n in self.nodes)

    def log_text(self) -> str:
        return "".join(n.log_text() for n in self.nodes)


def partition_leader(bootstrap: str, topic: str, partition: int = 0) -> int:
    """The leader's node id of a partition per ``bootstrap``'s metadata; -1 when it has none."""
    from support import rawkafka

    try:
        with rawkafka.RawClient(bootstrap, timeout_s=10) as c:
            resp = c.call(rawkafka.metadata_request([topic]))
    except OSError:
        return -1
    for t in resp.topics:
        for p in t.partitions:
            if t.name == topic and p.partition_index == partition and p.error_code == 0:
                return int(p.leader_id)
    return -1


# Kafka 4.4's transaction coordinator, loading a transaction in PrepareCommit/PrepareAbort on a
# node restarted after kill -9 while that node is not (yet) a live leader in its metadata, finds no
# leader for the transaction's partitions, logs this line and skips their markers; unless the
# CompleteCommit/CompleteAbort that follows is refused ("No longer the coordinator"), the
# transaction is complete at the coordinator and open for ever in its partitions: a hanging
# transaction (the LSO stops, require_stable OffsetFetch answers UNSTABLE_OFFSET_COMMIT).
_SKIPPED_MARKERS = re.compile(r"Couldn't find leader endpoint for partitions (Set\(.*?\)) while trying to send "
                              r"transaction markers for (\S+), these partitions are likely deleted")


def skipped_transaction_markers(log_text: str) -> list[str]:
    """The transactions whose markers a Kafka node skipped at startup (``_SKIPPED_MARKERS``), one
    line each: its log line's time, the transactional id, the partitions, and whether its
    completion was then written (a hanging transaction) or refused (harmless: sent again later)."""
    lines = log_text.splitlines()
    found = []
    for i, line in enumerate(lines):
        m = _SKIPPED_MARKERS.search(line)
        if m is None:
            continue
        partitions, txn_id = m.group(1), m.group(2).rstrip(",")
        refused = any(f"No longer the coordinator for transactionalId: {txn_id} " in later
                      for later in lines[i + 1:i + 40])
        found.append(f"{line[1:24]} {txn_id}: markers for {partitions} skipped; "
                     + ("its completion was refused (sent again later)" if refused
                        else "its completion was written: a hanging transaction"))
    return found


def new_cluster_id() -> str:
    """A cluster id as Kafka's ``random-uuid`` prints it: URL-safe base64 of 16 random bytes,
    never starting with '-' (Kafka's Uuid.randomUuid draws again; a command line would take it
    for an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


# The brokers a test can be parametrised over; each kind offers BrokerProcess's interface.
KINDS = ("eoslog", "kafka", "kafka-cluster")
AnyBroker = BrokerProcess | KafkaBroker | KafkaCluster


def cluster_marked(names: Sequence[str]) -> list[object]:
    """``names`` as pytest parameters, those starting a 3-node Apache Kafka cluster ("kafka-cluster…")
    marked ``kafka_cluster``, so ``-m "not kafka_cluster"`` leaves them out (issue 12's CI section)."""
    import pytest

    return [pytest.param(n, marks=pytest.mark.kafka_cluster) if n.startswith("kafka-cluster") else n
            for n in names]


def start_broker(kind: str, root: Path, overrides: Mapping[str, str] | None = None) -> AnyBroker:
    """Start a broker of ``kind`` (one of KINDS) under ``root``; ``overrides`` are broker
    settings under Kafka's names, which eoslog shares."""
    if kind == "eoslog":
        return BrokerProcess(root / "data", overrides=dict(overrides or {})).start()
    if kind == "kafka":
        return KafkaBroker(root / "data", overrides).start()
    if kind == "kafka-cluster":
        return KafkaCluster(root, overrides=overrides).start()
    raise ValueError(f"unknown broker kind {kind!r}; one of {', '.join(KINDS)}")

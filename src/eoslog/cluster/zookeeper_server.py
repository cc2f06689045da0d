"""A local, standalone ZooKeeper server for development clusters and tests.

Runs Debian's ZooKeeper (package ``zookeeper``: ``/usr/share/java/zookeeper.jar``, whose
manifest names its dependencies) under ``java`` with a small heap, on a port of our choosing
with a throw-away data directory. Used by ``eoslog cluster up`` and by the test harness; a
production cluster runs its own ZooKeeper ensemble instead.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
# ZooKeeper logs through SLF4J; without a binding it prints a warning and nothing else.
SLF4J_BINDING = Path("/usr/share/java/slf4j-simple.jar")
CLASSPATH_ENV = "EOSLOG_ZOOKEEPER_CLASSPATH"
INSTALL_HINT = ("install Debian's ZooKeeper: apt-get install -y zookeeper (scripts/setup.sh does it "
                f"when run as root), or set {CLASSPATH_ENV} to a ZooKeeper 3.5+ classpath")
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
JVM_OPTIONS = ("-Xms16m", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Dzookeeper.jmx.log4j.disable=true", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
# tickTime bounds the session timeouts a server grants (2 to 20 ticks unless set): short
# ticks let tests use short sessions; maxSessionTimeout allows Kafka's 18 s default. A
# session expires on the first tick after its timeout, so a tick also adds up to its length
# to every failover: 100 ms rather than 500.
TICK_MS = 100
MAX_SESSION_TIMEOUT_MS = 60_000


class ZooKeeperUnavailable(RuntimeError):
    """ZooKeeper cannot run here; the message says what to install."""


@dataclass(frozen=True)
class ZooKeeperInstall:
    java: str
    classpath: str


def find_zookeeper() -> ZooKeeperInstall:
    """The java and classpath to run ZooKeeper with, or ZooKeeperUnavailable."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if java is None or not Path(java).exists():
        raise ZooKeeperUnavailable("ZooKeeper needs Java and none was found "
                                   "(apt-get install -y openjdk-17-jre-headless)")
    classpath = os.environ.get(CLASSPATH_ENV)
    if classpath is None:
        if not ZOOKEEPER_JAR.exists():
            raise ZooKeeperUnavailable(f"no ZooKeeper at {ZOOKEEPER_JAR}: {INSTALL_HINT}")
        parts = [ZOOKEEPER_JAR] + ([SLF4J_BINDING] if SLF4J_BINDING.exists() else [])
        classpath = os.pathsep.join(map(str, parts))
    return ZooKeeperInstall(java, classpath)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def four_letter_word(host: str, port: int, word: str, timeout_s: float = 2.0) -> str:
    """Send one of ZooKeeper's four-letter commands (``ruok``, ``srvr``) and return the reply."""
    with socket.create_connection((host, port), timeout=timeout_s) as s:
        s.sendall(word.encode())
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperServer:
    """One standalone ZooKeeper process: ``start`` waits until it answers ``ruok``; ``stop``
    (SIGTERM), ``kill`` (SIGKILL) and ``start`` again on the same port and data."""

    def __init__(self, data_dir: Path, port: int | None = None, host: str = "127.0.0.1",
                 install: ZooKeeperInstall | None = None) -> None:
        self.data_dir = data_dir
        self.host = host
        self.port = port or free_port(host)
        self.install = install
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir / "zookeeper.log"

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.data_dir / "zoo.cfg"
        cfg.write_text("\n".join([
            f"tickTime={TICK_MS}",
            f"dataDir={self.data_dir / 'data'}",
            f"clientPort={self.port}",
            f"clientPortAddress={self.host}",
            f"maxSessionTimeout={MAX_SESSION_TIMEOUT_MS}",
            "maxClientCnxns=0",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr",
            # Dev and test data: snapshots are not worth keeping around.
            "autopurge.snapRetainCount=3",
            "autopurge.purgeInterval=1",
        ]) + "\n")
        return cfg

    def start(self, timeout_s: float = 60.0) -> ZooKeeperServer:
        install = self.install or find_zookeeper()
        cfg = self._write_config()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [install.java, *JVM_OPTIONS, "-cp", install.classpath, MAIN_CLASS, str(cfg)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C of `eoslog cluster up` is handled by its parent
            )
        deadline = time.monotonic() + timeout_s
        while not self.ready():
            if self.proc.poll() is not None:
                raise ZooKeeperUnavailable(
                    f"ZooKeeper exited with {self.proc.returncode}; its log {self.log_path}:\n"
                    + self.log_path.read_text(errors="replace")[-2000:])
            if time.monotonic() > deadline:
                self.kill()
                raise ZooKeeperUnavailable(f"ZooKeeper not ready after {timeout_s:.0f}s; see {self.log_path}")
            time.sleep(0.1)
        return self

    def ready(self) -> bool:
        try:
            return four_letter_word(self.host, self.port, "ruok", 1.0) == "imok"
        except OSError:
            return False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL, as ``kill -9``."""
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self, timeout_s: float = 30.0) -> None:
        if not self.alive():
            return
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            self.proc.wait(10)

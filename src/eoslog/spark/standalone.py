"""A Spark standalone cluster on this machine, from PySpark's own installation.

    python -m eoslog.spark.standalone [--workers 2] [--cores 1] [--memory 1g] [--dir DIR]

starts a master and workers and prints the master URL for ``spark_session(master=...)``
or ``./scripts/main.sh --master spark://HOST:PORT``, until Ctrl-C. Tests and benchmarks use
``StandaloneCluster`` directly.

What it owns: the master and each worker as a process of its own (``spark-class
org.apache.spark.deploy.master.Master`` / ``...deploy.worker.Worker`` from the pip-installed
PySpark, whose ``bin/`` and ``jars/`` are a complete Spark), every port chosen by the process
itself (port 0: nothing can take it between choosing and binding) and read back from the
master's log and its JSON status, every file under one root directory (conf, logs, each
worker's work dir — where the executors of each application run, one directory each — and
scratch dirs), small daemons (``SPARK_DAEMON_MEMORY``), and the workers' environment: the
executors they start inherit it, so ``PYSPARK_PYTHON`` and ``PYTHONPATH`` given here reach
the executors' Python workers. It also finds the executor processes of an application and
kills a worker (with everything it started, as a lost machine) or an executor with SIGKILL,
for fault tests.

What it must never do: touch a process it did not start (or that one of its daemons did not
start), or use Spark's ``sbin`` scripts (they daemonize, write pid files outside the root and
need ssh for workers).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from eoslog.spark.session import log4j2_properties, require_java

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
HOST = "127.0.0.1"
START_TIMEOUT_S = 180.0  # JVM start-ups on a loaded two-core machine; bounds a hang only

_MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")
_MASTER_UI = re.compile(r"Successfully started service 'MasterUI' on port (\d+)")
_EXECUTOR_PID = re.compile(r"CoarseGrainedExecutorBackend: Started daemon with process name: (\d+)@")

# The daemons' log (and the executors': the conf dir is on their classpath too): INFO, as
# Spark's default, without the per-block and security chatter.
_LOG4J2 = log4j2_properties("eoslog.spark.standalone", "info", {
    "org.apache.spark.SecurityManager": "warn",
    "org.apache.hadoop.util.NativeCodeLoader": "error",
    "org.apache.spark.storage": "warn",
}, "%d{HH:mm:ss.SSS} %p %c{1}: %m%n%ex")


class ClusterError(RuntimeError):
    """The cluster did not start or lost a process it needs; the message names the log."""


def spark_home() -> Path:
    """The pip-installed PySpark's directory: a full Spark (bin/spark-class, jars/)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


# -- processes, from /proc (Linux: Spark's own scripts are Unix-only too) --------------------------


def _parent_of(pid: int) -> int | None:
    try:
        # The command name in parentheses may hold spaces and ')': the fields follow the last ')'.
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def descendants(pid: int) -> list[int]:
    """Every live process under ``pid`` (children first found, then theirs)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            parent = _parent_of(int(entry.name))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry.name))
    out: list[int] = []
    todo = list(children.get(pid, []))
    while todo:
        p = todo.pop(0)
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def ancestors(pid: int) -> list[int]:
    """``pid``'s parent, its parent, … up to init."""
    out: list[int] = []
    parent = _parent_of(pid)
    while parent is not None and parent > 1:
        out.append(parent)
        parent = _parent_of(parent)
    return out


def kill9(pids: list[int]) -> None:
    for p in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)


def _option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv and argv.index(name) + 1 < len(argv) else None


# -- the cluster ------------------------------------------------------------------------------------


@dataclass
class Daemon:
    """A master or worker process (``spark-class`` execs the JVM: the pid is the JVM's)."""

    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    work_dir: Path | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


@dataclass(frozen=True)
class Executor:
    """An executor JVM a worker started for an application."""

    pid: int
    app_id: str
    executor_id: str
    worker: int  # index into StandaloneCluster.workers


@dataclass(frozen=True)
class ExecutorRecord:
    """An executor a worker ran (running or not): its id, the worker (``worker<i>-<n>``), its
    JVM's pid and its work dir."""

    executor_id: str
    worker: str
    pid: int | None
    work_dir: Path


class StandaloneCluster:
    """A master and ``workers`` workers (``cores`` and ``memory`` each) under ``root``.

    ``env`` is added to the daemons' environment (and so the executors'); by default the
    workers' ``PYSPARK_PYTHON`` is this interpreter and ``PYTHONPATH`` is this process's, so
    the executors import the same eoslog as the caller."""

    def __init__(self, root: Path, *, workers: int = 2, cores: int = 1, memory: str = "1g",
                 daemon_memory: str = "256m", python: str | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        self.root = root.resolve()
        self.worker_count = workers
        self.cores = cores
        self.memory = memory
        self.daemon_memory = daemon_memory
        self.python = python or sys.executable
        self.extra_env = dict(env or {})
        self.master: Daemon | None = None
        self.workers: list[Daemon] = []
        self.master_url = ""
        self.ui_url = ""
        self._starts = 0

    # -- start and stop

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({
            "SPARK_HOME": str(spark_home()),
            "SPARK_CONF_DIR": str(self.root / "conf"),
            "SPARK_LOCAL_IP": HOST,
            "SPARK_DAEMON_MEMORY": self.daemon_memory,
            "PYSPARK_PYTHON": self.python,
            # The REST submission server would take another port; nothing here uses it.
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        })
        env.pop("SPARK_ENV_LOADED", None)
        env.update(self.extra_env)
        return env

    def _launch(self, name: str, cls: str, args: list[str], env: Mapping[str, str],
                work_dir: Path | None = None) -> Daemon:
        log_path = self.root / "logs" / f"{name}.log"
        log: IO[bytes] = open(log_path, "ab")  # noqa: SIM115 - handed to the child
        try:
            proc = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), cls, *args], env=dict(env),
                                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        finally:
            log.close()
        return Daemon(name, proc, log_path, work_dir)

    def start(self, timeout_s: float = START_TIMEOUT_S) -> StandaloneCluster:
        """Start the master, then the workers, and wait until every worker is ALIVE."""
        require_java()
        for d in ("conf", "logs"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        (self.root / "conf" / "log4j2.properties").write_text(_LOG4J2)
        self.master = self._launch("master", MASTER_CLASS, ["--host", HOST, "--port", "0", "--webui-port", "0"],
                                   self._env())
        deadline = time.monotonic() + timeout_s
        try:
            url, ui = self._wait_for_master(deadline)
            self.master_url, self.ui_url = url, f"http://{HOST}:{ui}"
            self.workers = [self._start_worker(i) for i in range(self.worker_count)]
            self.wait_for_workers(deadline - time.monotonic())
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_for_master(self, deadline: float) -> tuple[str, str]:
        assert self.master is not None
        while True:
            text = self.master.log_tail(1 << 20)
            url, ui = _MASTER_URL.search(text), _MASTER_UI.search(text)
            if url and ui:
                return url.group(1), ui.group(1)
            if not self.master.alive():
                raise ClusterError(f"the Spark master exited ({self.master.log_path}):\n{self.master.log_tail()}")
            if time.monotonic() > deadline:
                raise ClusterError(f"the Spark master did not start ({self.master.log_path}):\n"
                                   f"{self.master.log_tail()}")
            time.sleep(0.2)

    def _start_worker(self, index: int) -> Daemon:
        self._starts += 1
        tag = f"worker{index}-{self._starts}"
        work, local = self.root / tag / "work", self.root / tag / "local"
        work.mkdir(parents=True)
        local.mkdir(parents=True)
        env = self._env()
        env["SPARK_LOCAL_DIRS"] = str(local)  # the executors' scratch (shuffle, blocks, Python)
        args = ["--host", HOST, "--port", "0", "--webui-port", "0", "--cores", str(self.cores),
                "--memory", self.memory, "--work-dir", str(work), self.master_url]
        return self._launch(tag, WORKER_CLASS, args, env, work)

    def stop(self) -> None:
        """SIGTERM the workers (they stop their executors) and the master; SIGKILL whatever
        of theirs is left after 15 s."""
        daemons = [*self.workers, *([self.master] if self.master else [])]
        tree = [p for d in daemons if d.alive() for p in descendants(d.pid)]
        for d in daemons:
            if d.alive():
                d.proc.terminate()
        deadline = time.monotonic() + 15
        for d in daemons:
            with contextlib.suppress(subprocess.TimeoutExpired):
                d.proc.wait(max(0.1, deadline - time.monotonic()))
        kill9([*tree, *(d.pid for d in daemons if d.alive())])
        for d in daemons:
            with contextlib.suppress(subprocess.TimeoutExpired):
                d.proc.wait(10)

    def __enter__(self) -> StandaloneCluster:
        return self.start() if self.master is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- state

    def status(self) -> dict[str, Any]:
        """The master's JSON status (workers, applications)."""
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=10) as r:
            result: dict[str, Any] = json.load(r)
            return result

    def alive_workers(self) -> list[dict[str, Any]]:
        return [w for w in self.status()["workers"] if w["state"] == "ALIVE"]

    def wait_for(self, condition: Callable[[], bool], what: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            if self.master is not None and not self.master.alive():
                raise ClusterError(f"the Spark master exited ({self.master.log_path}):\n{self.master.log_tail()}")
            if time.monotonic() > deadline:
                raise ClusterError(f"gave up waiting for {what}; logs in {self.root / 'logs'}")
            time.sleep(0.2)

    def wait_for_workers(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until as many workers as started are ALIVE at the master."""
        def ready() -> bool:
            for w in self.workers:
                if not w.alive():
                    raise ClusterError(f"Spark worker {w.name} exited ({w.log_path}):\n{w.log_tail()}")
            try:
                return len(self.alive_workers()) >= len(self.workers)
            except (OSError, ValueError):
                # The master's UI answers 404 until its handlers are attached, and for a few ms
                # its root page's HTML for /json/ (the "/" context starts before "/json").
                return False

        self.wait_for(ready, f"{len(self.workers)} Spark workers to register", timeout_s)

    def driver_conf(self, executor_memory: str = "512m") -> dict[str, str]:
        """What a driver needs for one executor of ``cores`` cores per worker, and to wait
        for all of them before its first job (else the first batches run on fewer)."""
        cores = self.cores * self.worker_count
        return {
            "spark.cores.max": str(cores),
            "spark.executor.cores": str(self.cores),
            "spark.executor.memory": executor_memory,
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
        }

    def executors(self, app_id: str | None = None) -> list[Executor]:
        """The executor JVMs the live workers run (of ``app_id``, or of every application)."""
        out = []
        for i, w in enumerate(self.workers):
            if not w.alive():
                continue
            for pid in descendants(w.pid):
                argv = _cmdline(pid)
                if EXECUTOR_CLASS not in argv:
                    continue
                app, executor_id = _option(argv, "--app-id"), _option(argv, "--executor-id")
                if app is not None and executor_id is not None and app_id in (None, app):
                    out.append(Executor(pid, app, executor_id, i))
        return out

    def executor_history(self, app_id: str) -> list[ExecutorRecord]:
        """Every executor any worker (dead ones too) ran for ``app_id``, from the work dirs
        the workers leave: ``<work dir>/<app id>/<executor id>/stderr``, whose first log
        lines name the executor JVM's pid."""
        out = []
        for stderr in sorted(self.root.glob(f"worker*/work/{app_id}/*/stderr")):
            found = _EXECUTOR_PID.search(stderr.read_text(errors="replace")[:1 << 16])
            out.append(ExecutorRecord(stderr.parent.name, stderr.parents[3].name,
                                      int(found.group(1)) if found else None, stderr.parent))
        return out

    def worker_of(self, pid: int) -> int | None:
        """The index of the worker ``pid`` runs under (an executor, its Python workers)."""
        pids = {w.pid: i for i, w in enumerate(self.workers) if w.alive()}
        for a in [pid, *ancestors(pid)]:
            if a in pids:
                return pids[a]
        return None

    # -- faults

    def kill_worker(self, index: int) -> list[int]:
        """kill -9 worker ``index`` and everything under it (its executors and their Python
        workers), all at once, as when its machine is lost; the pids killed."""
        w = self.workers[index]
        pids = [w.pid, *descendants(w.pid)]
        kill9(pids)
        w.proc.wait(30)
        return pids

    def kill_executor(self, pid: int) -> None:
        """kill -9 one executor JVM (its Python workers see their pipes close and exit)."""
        if not any(e.pid == pid for e in self.executors()):
            raise ValueError(f"{pid} is not an executor of this cluster")
        kill9([pid])

    def restart_dead_workers(self, timeout_s: float = START_TIMEOUT_S) -> list[int]:
        """Start a new worker (new work dir) in place of each dead one; wait until all are
        ALIVE. The indexes restarted."""
        dead = [i for i, w in enumerate(self.workers) if not w.alive()]
        for i in dead:
            self.workers[i] = self._start_worker(i)
        if dead:
            self.wait_for_workers(timeout_s)
        return dead


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--cores", type=int, default=1, help="cores each worker offers (default 1)")
    ap.add_argument("--memory", default="1g", help="memory each worker offers to executors (default 1g)")
    ap.add_argument("--dir", type=Path, default=Path(".spark-cluster"),
                    help="conf, logs and work dirs (default ./.spark-cluster)")
    args = ap.parse_args(argv)

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # Ctrl-C, and kill (SIGTERM), stop the cluster; also when started where SIGINT is ignored.
    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    cluster = StandaloneCluster(args.dir, workers=args.workers, cores=args.cores, memory=args.memory)
    print(f"starting a Spark master and {args.workers} workers under {cluster.root} ...", flush=True)
    with cluster:
        print(f"master  {cluster.master_url}   (status: {cluster.ui_url}, logs: {cluster.root / 'logs'})\n"
              f"workers {args.workers} x {args.cores} core(s), {args.memory}; executors' Python {cluster.python}\n"
              f"try:    ./scripts/main.sh --master {cluster.master_url}\n"
              "Ctrl-C stops the cluster.", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while all(d.alive() for d in (cluster.master, *cluster.workers) if d is not None):
                time.sleep(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

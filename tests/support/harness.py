"""Test harness: the real broker as a subprocess on a free port.

``BrokerProcess`` starts ``python -m eoslog broker``, waits for its ready line, and
can stop it cleanly (SIGTERM), kill it (SIGKILL, as ``kill -9``) and restart it on
the same port and data directory.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Self

READY_TIMEOUT_S = 60.0


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _worker_port_range() -> range:
    """This process's share of the ports below the kernel's ephemeral range. A port the kernel
    handed out for ``bind(0)`` is an ephemeral one: between being chosen and the broker binding
    it (or a killed broker restarting on it), any client's outgoing connection may take it as its
    local port ("Address already in use" in CI). Ports below the range are never taken that way,
    and each pytest-xdist worker gets a slice of its own, so workers never race each other."""
    low, high = 10000, min(_ephemeral_low(), 32768)
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    size = (high - low) // max(workers, 1)
    return range(low + index * size, low + (index + 1) * size)


_PORTS = _worker_port_range()
_next_port = _PORTS.start + (os.getpid() * 7919) % max(len(_PORTS), 1)  # a new run starts elsewhere


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(n: int, avoid: Iterable[int] = ()) -> list[int]:
    """``n`` distinct free ports, none in ``avoid`` (ports chosen earlier and not bound yet), taken
    in turn from this worker's slice below the ephemeral range: a port is handed out again only
    after the whole slice has been (thousands of ports later)."""
    global _next_port
    unwanted = set(avoid)
    chosen: list[int] = []
    for _ in range(len(_PORTS)):
        port = _next_port
        _next_port = _PORTS.start if _next_port + 1 >= _PORTS.stop else _next_port + 1
        if port not in unwanted and port not in chosen and _bindable(port):
            chosen.append(port)
            if len(chosen) == n:
                return chosen
    raise RuntimeError(f"no {n} free ports in {_PORTS}")


def free_port() -> int:
    return free_ports(1)[0]


def wait_until(condition: Callable[[], object], what: str, timeout_s: float = 60.0, *,
               describe: Callable[[], object] | None = None, interval_s: float = 0.05) -> None:
    """Poll ``condition`` every ``interval_s`` until it holds; fail naming ``what`` (and what
    ``describe()`` says about the state then) after ``timeout_s`` (generous: it bounds a hang,
    it does not assert a speed)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}" + (f"; state: {describe()}" if describe else ""))
        time.sleep(interval_s)


def in_parallel(jobs: list[Callable[[], object]]) -> None:
    """Run ``jobs`` each in a thread of its own and wait for all; re-raise the first failure
    (brokers, JVM tools: on two cores their start-ups overlap well, mostly waiting)."""
    errors: list[BaseException] = []

    def run(job: Callable[[], object]) -> None:
        try:
            job()
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(j,)) for j in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


class ServerProcess:
    """A server started as a child process (eoslog's broker, a Kafka node): kill -9, clean stop,
    restart on the same data. Subclasses set ``proc`` and ``log_path`` and define ``start``."""

    proc: subprocess.Popen[str] | None
    log_path: Path

    def start(self) -> Self:
        raise NotImplementedError

    def kill(self) -> None:
        """SIGKILL: no flush, no clean-shutdown marker."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait: a clean shutdown."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                raise
        return int(self.proc.returncode)

    def restart(self, *, kill: bool = False) -> Self:
        if kill:
            self.kill()
        else:
            self.stop()
        return self.start()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class BrokerProcess(ServerProcess):
    def __init__(self, data_dir: Path, port: int | None = None,
                 overrides: dict[str, str] | None = None, *, host: str = "127.0.0.1",
                 prefix: list[str] | None = None, args: list[str] | None = None,
                 more_log_dirs: list[Path] | None = None) -> None:
        """``host``/``prefix``: a broker in a network namespace of tests/support/netns.py listens on the
        namespace's address and starts under ``ip netns exec`` (the same process id). ``args``: more
        command-line arguments, after the harness's own (``--config FILE``). ``more_log_dirs``: log
        directories after ``data_dir`` (JBOD)."""
        self.args = list(args or [])
        self.data_dir = data_dir
        self.log_dirs = [data_dir, *(more_log_dirs or [])]
        self.host = host
        self.prefix = list(prefix or [])
        self.port = port or free_port()
        self.overrides = dict(overrides or {})
        self.proc: subprocess.Popen[str] | None = None
        self.log_path = data_dir.parent / f"broker-{self.port}.log"
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> BrokerProcess:
        cmd = [*self.prefix, sys.executable, "-m", "eoslog", "broker", "--data-dir", ",".join(map(str, self.log_dirs))]
        if "listeners" not in self.overrides:  # a test naming its listeners owns them all
            cmd += ["--listen", f"{self.host}:{self.port}"]
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        cmd += self.args
        log = open(self.log_path, "a")  # noqa: SIM115 - handed to the child
        log.write(f"--- start {self.starts} ---\n")
        log.flush()
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=log, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        log.close()
        self.starts += 1
        assert self.proc.stdout is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        ready = threading.Event()

        def watch() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                if "ready on" in line:
                    ready.set()
            # keep draining so the child never blocks on a full pipe

        threading.Thread(target=watch, daemon=True).start()
        while not ready.wait(0.05):
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}; see {self.log_path}:\n"
                                   + self.log_text()[-3000:])
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"broker not ready after {READY_TIMEOUT_S}s; see {self.log_path}")
        return self


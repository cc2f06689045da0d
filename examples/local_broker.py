"""The examples' embedded broker: ``python -m eoslog broker`` as a child process.

Shared by ``roundtrip.py`` and ``payments_pipeline.py``: where the broker listens and keeps
its data (the embedded default, ``./eoslog-data`` on 127.0.0.1:9092; if that port is taken,
a free port and a throw-away data directory, because a second broker must never share a
data directory with one that may be running), starting it and waiting for its ready line,
and stopping it with SIGTERM and checking that it shut down cleanly.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

DEFAULT_DATA_DIR = Path("eoslog-data")
DEFAULT_LISTEN = "127.0.0.1:9092"
CLEAN_SHUTDOWN_MARKER = ".eoslog_cleanshutdown"  # written by LogManager.shutdown


class JobError(Exception):
    """The job cannot go on; the message says why."""


def port_is_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class LocalBroker:
    """The broker as a child process: started, awaited, stopped cleanly."""

    def __init__(self, data_dir: Path, host: str, port: int, log_path: Path,
                 overrides: Mapping[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.host = host
        self.port = port
        self.log_path = log_path
        self.overrides = dict(overrides or {})
        self.proc: subprocess.Popen[str] | None = None
        self.ready_line = ""
        self.temp_dir: Path | None = None  # a throw-away data directory to remove at the end

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout_s: float) -> float:
        """Start the broker and wait for its ready line; returns the seconds it took."""
        cmd = [sys.executable, "-m", "eoslog", "broker", "--data-dir", str(self.data_dir),
               "--listen", self.bootstrap]
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        started = time.monotonic()
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                # Its own session: a Ctrl-C at the terminal reaches only the job, which
                # then stops the broker with one SIGTERM (a second signal would make the
                # broker exit without its clean shutdown).
                start_new_session=True,
            )
        ready = threading.Event()

        def watch_stdout() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:  # drain to the end so the child never blocks
                if not ready.is_set() and "ready on" in line:
                    self.ready_line = line.strip()
                    ready.set()

        threading.Thread(target=watch_stdout, daemon=True).start()
        deadline = started + timeout_s
        while not ready.wait(0.05):
            if self.proc.poll() is not None:
                raise JobError(
                    f"the broker exited with status {self.proc.returncode} before it was ready"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise JobError(f"the broker was not ready after {timeout_s:.0f} s; "
                               f"see {self.log_path}")
        return time.monotonic() - started

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """SIGTERM and wait: the broker flushes its logs and writes its clean-shutdown marker."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                Console(stderr=True).print(f"[red]the broker did not stop within {timeout_s:.0f} s; killing it")
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def finish(self, console: Console, *, failed: bool) -> str | None:
        """Stop the broker (SIGTERM), say how it went, show the end of its log if anything
        failed, remove a throw-away data directory; a problem with the shutdown, or None."""
        was_running = self.proc is not None and self.proc.poll() is None
        rc = self.stop()
        problem = None
        if was_running:
            marker = (self.data_dir / CLEAN_SHUTDOWN_MARKER).exists()
            if rc == 0 and marker:
                console.print(f"[bold]broker[/]   stopped cleanly (SIGTERM, exit 0); logs flushed, clean-shutdown "
                              f"marker in {self.data_dir}")
            else:
                problem = f"broker stop: exit status {rc}, clean-shutdown marker {'present' if marker else 'missing'}"
        if failed or problem:
            if self.temp_dir is not None and self.log_path.exists():  # keep it: the directory goes
                kept = Path.cwd() / f"eoslog-broker-{self.port}.log"
                shutil.copyfile(self.log_path, kept)
                self.log_path = kept
            console.print(f"[bold]broker log[/] {self.log_path}, last lines:")
            console.print(self.log_tail(), markup=False, highlight=False)
        if self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
        return problem

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text().splitlines()[-lines:])
        except OSError:
            return "(no log)"


def plan_broker(console: Console, listen: str | None, data_dir: Path | None, temp_prefix: str,
                overrides: Mapping[str, str] | None = None) -> LocalBroker:
    """Where the broker listens and keeps its data: the embedded default unless told
    otherwise; a free port and a throw-away data directory when the default port is taken."""
    address = listen or DEFAULT_LISTEN
    host, _, port_text = address.rpartition(":")
    host, port = host or "127.0.0.1", int(port_text)
    directory: Path = data_dir or DEFAULT_DATA_DIR
    temp_dir: Path | None = None
    if port == 0:  # "any free port": chosen here, since the clients need the real one
        port = free_port(host)
    elif not port_is_free(host, port):
        if listen:
            raise JobError(f"{listen} is already in use; choose another --listen address")
        port = free_port(host)
        if data_dir is None:
            temp_dir = Path(tempfile.mkdtemp(prefix=temp_prefix))
            directory = temp_dir / "data"
        console.print(
            f"[yellow]{address} is already in use[/] (another broker or Kafka? "
            f"`ss -ltnp 'sport = :{port_text}'` shows which process).\n"
            f"Starting the broker on [bold]{host}:{port}[/] instead"
            + (f", with a temporary data directory {directory} (removed afterwards) so as "
               f"not to share ./{DEFAULT_DATA_DIR} with a broker that may be using it."
               if temp_dir else ".")
        )
    # With a temporary data directory the log goes too, unless the job fails (finish).
    log_path = temp_dir / "broker.log" if temp_dir else Path.cwd() / "eoslog-broker.log"
    broker = LocalBroker(directory, host, port, log_path, overrides)
    broker.temp_dir = temp_dir
    return broker


def print_verdict(console: Console, problems: Sequence[str], *, failed_title: str, ok_title: str,
                  ok_text: str) -> int:
    """The example's closing panel: the first 20 problems in red, or ``ok_text`` in green;
    the exit status."""
    if problems:
        body = "\n".join(problems[:20])
        if len(problems) > 20:
            body += f"\n... and {len(problems) - 20} more"
        console.print(Panel(escape(body), title=f"[bold red]{failed_title}", border_style="red"))
        return 1
    console.print(Panel(ok_text, title=f"[bold green]{ok_title}", border_style="green"))
    return 0


def exit_status(run: Callable[[], int]) -> int:
    """``run()``'s status; 130 (as a shell reports SIGINT) when interrupted with Ctrl-C."""
    try:
        return run()
    except KeyboardInterrupt:
        return 130

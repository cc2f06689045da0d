"""``eoslog cluster up``: a local development cluster — ZooKeeper and N brokers — in one command;
``eoslog cluster add-broker``: one more broker joining it; ``eoslog leader-election``:
ElectLeaders, like kafka-leader-election.sh.

ZooKeeper is Debian's (``eoslog.cluster.zookeeper_server``); each broker is an ``eoslog
broker`` process with ``broker.id`` 1..N on consecutive ports, its log in the cluster's data
directory. A ready line is printed per node as it comes up. Ctrl-C (or SIGTERM) stops the
brokers cleanly — each with a controlled shutdown — then ZooKeeper. The brokers run in
sessions of their own, so that the terminal's Ctrl-C reaches only this command, which then
signals each broker once. ``up`` writes where the cluster is (``cluster.json`` in its data
directory: ZooKeeper's address, the first broker's port) for ``add-broker`` to read.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from eoslog.cli.common import DEFAULT_BOOTSTRAP_SERVER, BootstrapServer, CommandConfig, app, open_admin, user_errors
from eoslog.client.errors import ElectionNotNeededError
from eoslog.cluster.zookeeper_server import ZooKeeperServer, ZooKeeperUnavailable

cluster_app = typer.Typer(help="A local development cluster: ZooKeeper and N brokers.", no_args_is_help=True)
app.add_typer(cluster_app, name="cluster")

READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
CLUSTER_FILE = "cluster.json"


class _Broker:
    def __init__(self, broker_id: int, port: int, data_dir: Path, zookeeper: str) -> None:
        self.broker_id = broker_id
        self.port = port
        self.data_dir = data_dir / f"broker-{broker_id}"
        self.log_path = data_dir / f"broker-{broker_id}.log"
        self.zookeeper = zookeeper
        self.proc: subprocess.Popen[str] | None = None
        self.ready_line: str | None = None
        self._ready = threading.Event()

    def start(self) -> None:
        cmd = [sys.executable, "-m", "eoslog", "broker", "--data-dir", str(self.data_dir),
               "--listen", f"127.0.0.1:{self.port}", "--override", f"broker.id={self.broker_id}",
               "--override", f"zookeeper.connect={self.zookeeper}"]
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True,
                                         start_new_session=True)
        threading.Thread(target=self._read_stdout, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            if "ready on" in line and self.ready_line is None:
                self.ready_line = line.strip()
                self._ready.set()

    def wait_ready(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not self._ready.wait(0.1):
            if self.proc is None or self.proc.poll() is not None or time.monotonic() > deadline:
                return False
        return True

    def ready_or_exit(self, console: Console) -> None:
        """Print its ready line, or its log's tail and exit 1 when it did not start."""
        if not self.wait_ready(READY_TIMEOUT_S):
            console.print(f"[red]broker {self.broker_id} did not start; its log {self.log_path}:[/red]")
            with contextlib.suppress(OSError):
                console.print(self.log_path.read_text()[-2000:], markup=False)
            raise typer.Exit(1)
        console.print(self.ready_line, markup=False)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def terminate(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGTERM)

    def wait_stopped(self, timeout_s: float) -> int | None:
        if self.proc is None:
            return 0
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            return None


def _stop_all(console: Console, brokers: list[_Broker], zookeeper: ZooKeeperServer) -> None:
    console.print("stopping the brokers (controlled shutdown) ...")
    for b in brokers:
        b.terminate()
    for b in brokers:
        code = b.wait_stopped(STOP_TIMEOUT_S)
        status = "stopped" if code == 0 else "killed after a timeout" if code is None else f"exited with {code}"
        console.print(f"broker {b.broker_id} {status}")
    zookeeper.stop()
    console.print("zookeeper stopped")


@cluster_app.command("up")
def up(
    brokers: Annotated[int, typer.Option("--brokers", min=1, max=9, help="Number of brokers")] = 3,
    data_dir: Annotated[Path, typer.Option("--data-dir", help="Where ZooKeeper and the brokers keep "
                                           "their data and logs")] = Path("./eoslog-cluster"),
    base_port: Annotated[int, typer.Option("--base-port", help="Port of broker 1; broker N uses "
                                           "base-port + N - 1")] = 9092,
    zookeeper_port: Annotated[int, typer.Option("--zookeeper-port", help="ZooKeeper's client port")] = 2181,
) -> None:
    """Run ZooKeeper and BROKERS brokers on this machine until Ctrl-C."""
    console = Console(highlight=False, soft_wrap=True)
    data_dir.mkdir(parents=True, exist_ok=True)
    zookeeper = ZooKeeperServer(data_dir / "zookeeper", port=zookeeper_port)
    try:
        zookeeper.start()
    except ZooKeeperUnavailable as e:
        typer.echo(f"eoslog cluster up: {e}", err=True)
        raise typer.Exit(2) from None
    console.print(f"zookeeper ready on {zookeeper.connect_string} (data: {zookeeper.data_dir})")
    (data_dir / CLUSTER_FILE).write_text(json.dumps({"zookeeper.connect": zookeeper.connect_string,
                                                     "base_port": base_port}) + "\n")
    nodes = [_Broker(i, base_port + i - 1, data_dir, zookeeper.connect_string) for i in range(1, brokers + 1)]
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        for node in nodes:
            node.start()
        for node in nodes:
            node.ready_or_exit(console)
        table = Table(box=box.SIMPLE_HEAVY, title="eoslog cluster")
        for column in ("broker", "address", "data", "log"):
            table.add_column(column)
        for node in nodes:
            table.add_row(str(node.broker_id), f"127.0.0.1:{node.port}", str(node.data_dir), str(node.log_path))
        console.print(table)
        console.print(f"bootstrap servers: {','.join(f'127.0.0.1:{n.port}' for n in nodes)}   (Ctrl-C stops all)")
        while not stop.wait(0.5):
            for node in nodes:
                if node.proc is not None and not node.alive() and node.ready_line is not None:
                    console.print(f"[red]broker {node.broker_id} exited ({node.proc.returncode}); "
                                  f"see {node.log_path}[/red]")
                    node.ready_line = None
    finally:
        _stop_all(console, nodes, zookeeper)


@cluster_app.command("add-broker")
def add_broker(
    broker_id: Annotated[int | None, typer.Option("--id", min=1, help="The new broker's id (default: one "
                                                  "more than the highest id in the data directory)")] = None,
    data_dir: Annotated[Path, typer.Option("--data-dir", help="The data directory of the running "
                                           "`eoslog cluster up`")] = Path("./eoslog-cluster"),
) -> None:
    """Start one more broker in the development cluster of DATA_DIR, until Ctrl-C (then it stops
    with a controlled shutdown). It holds no partition until a reassignment moves some there
    (``eoslog partitions reassign --generate`` proposes its share)."""
    console = Console(highlight=False, soft_wrap=True)
    try:
        found = json.loads((data_dir / CLUSTER_FILE).read_text())
        connect, base_port = str(found["zookeeper.connect"]), int(found["base_port"])
    except (OSError, ValueError, KeyError) as e:
        typer.echo(f"eoslog cluster add-broker: no development cluster in {data_dir} ({e}); start one with "
                   "`eoslog cluster up --data-dir DIR`", err=True)
        raise typer.Exit(2) from None
    known = [int(d.name.removeprefix("broker-")) for d in data_dir.glob("broker-*")
             if d.is_dir() and d.name.removeprefix("broker-").isdigit()]
    new_id = broker_id if broker_id is not None else max(known, default=0) + 1
    node = _Broker(new_id, base_port + new_id - 1, data_dir, connect)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    node.start()
    try:
        node.ready_or_exit(console)
        console.print(f"broker {new_id} joined the cluster of {connect}; give it partitions with `eoslog partitions "
                      "reassign --generate --output plan.json` and `--execute`   (Ctrl-C stops it)")
        while not stop.wait(0.5):
            if not node.alive():
                console.print(f"[red]broker {new_id} exited; see {node.log_path}[/red]")
                raise typer.Exit(1)
    finally:
        node.terminate()
        code = node.wait_stopped(STOP_TIMEOUT_S)
        console.print(f"broker {new_id} " + ("stopped" if code == 0 else "killed after a timeout" if code is None
                                             else f"exited with {code}"))


@app.command("leader-election")
def leader_election(
    unclean: Annotated[bool, typer.Option("--unclean/--preferred", help="Elect any live replica of a "
                                          "leaderless partition (may lose acknowledged records) instead "
                                          "of moving leadership back to the preferred replica")] = False,
    topic: Annotated[str | None, typer.Option("--topic", help="Only this topic")] = None,
    partition: Annotated[int | None, typer.Option("--partition", help="Only this partition of --topic")] = None,
    all_topic_partitions: Annotated[bool, typer.Option("--all-topic-partitions",
                                                       help="Every partition of every topic")] = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """Elect partition leaders, like kafka-leader-election.sh (ElectLeaders on the controller)."""
    from eoslog.client.admin import ElectionType
    from eoslog.client.types import TopicPartition

    if all_topic_partitions == (topic is not None):
        raise typer.BadParameter("give either --all-topic-partitions or --topic")
    if partition is not None and topic is None:
        raise typer.BadParameter("--partition needs --topic")
    kind = ElectionType.UNCLEAN if unclean else ElectionType.PREFERRED
    console = Console(highlight=False, soft_wrap=True)
    with user_errors("leader-election"), open_admin(bootstrap_server, command_config=command_config) as admin:
        partitions: list[TopicPartition] | None = None
        if topic is not None:
            if partition is not None:
                partitions = [TopicPartition(topic, partition)]
            else:
                described = admin.describe_topics([topic])[topic]
                partitions = [TopicPartition(topic, p.partition) for p in described.partitions]
        results = admin.elect_leaders(kind, partitions)
    table = Table(box=box.SIMPLE_HEAVY, title=f"{kind.name.lower()} leader election")
    for column in ("topic", "partition", "result"):
        table.add_column(column)
    for tp, error in sorted(results.items()):
        table.add_row(tp.topic, str(tp.partition), "elected" if error is None else str(error) or type(error).__name__)
    console.print(table if results else "no partition needed an election")
    if any(e is not None and not isinstance(e, ElectionNotNeededError) for e in results.values()):
        raise typer.Exit(1)

"""``eoslog cluster up``: ZooKeeper and the brokers come up with a ready line each, form one
cluster, ``eoslog cluster add-broker`` adds one more, and Ctrl-C stops every process cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from support.cluster_harness import metadata
from support.harness import free_port, wait_until
from support.zk_harness import start_zookeeper


def test_cluster_up_and_ctrl_c(tmp_path: Path) -> None:
    start_zookeeper(tmp_path / "probe").kill()  # fails the test, naming it, without ZooKeeper
    zk_port = free_port()
    base = _consecutive_free_ports(3)  # brokers 1 and 2, then the added broker 3
    proc = subprocess.Popen(
        [sys.executable, "-m", "eoslog", "cluster", "up", "--brokers", "2", "--data-dir", str(tmp_path / "c"),
         "--base-port", str(base), "--zookeeper-port", str(zk_port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "COLUMNS": "200"},
    )
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        lines.extend(proc.stdout)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        wait_until(lambda: any("bootstrap servers:" in line for line in lines) or proc.poll() is not None,
                   "the cluster's bootstrap line", 180)
        assert proc.poll() is None, "".join(lines)
        text = "".join(lines)
        assert f"zookeeper ready on 127.0.0.1:{zk_port}" in text
        assert f"eoslog broker 1 ready on 127.0.0.1:{base}" in text
        assert f"eoslog broker 2 ready on 127.0.0.1:{base + 1}" in text
        wait_until(lambda: metadata(f"127.0.0.1:{base}").brokers == (1, 2), "both brokers registered", 60)
        _add_broker(tmp_path / "c", base)
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(120)
        reader.join(10)
    text = "".join(lines)
    assert code == 0, text
    assert "broker 1 stopped" in text and "broker 2 stopped" in text and "zookeeper stopped" in text


def _add_broker(data_dir: Path, base: int) -> None:
    added = subprocess.Popen([sys.executable, "-m", "eoslog", "cluster", "add-broker", "--data-dir", str(data_dir)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(added.stdout or ()), daemon=True)
    reader.start()
    try:
        wait_until(lambda: any("joined the cluster" in line for line in lines) or added.poll() is not None,
                   "the added broker's ready line", 120)
        assert f"eoslog broker 3 ready on 127.0.0.1:{base + 2}" in "".join(lines), "".join(lines)
        wait_until(lambda: metadata(f"127.0.0.1:{base}").brokers == (1, 2, 3), "broker 3 registered", 60)
    finally:
        added.send_signal(signal.SIGINT)
        code = added.wait(120)
        reader.join(10)
    assert code == 0 and "broker 3 stopped" in "".join(lines), "".join(lines)


def _consecutive_free_ports(n: int) -> int:
    """The first of ``n`` consecutive ports that are free now."""
    for _ in range(50):
        base = free_port()
        ports = [base + i for i in range(n)]
        if all(_bindable(p) for p in ports):
            return base
    raise AssertionError(f"no {n} consecutive free ports")


def _bindable(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True

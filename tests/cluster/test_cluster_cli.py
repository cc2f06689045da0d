"""``eoslog cluster up``: ZooKeeper and the brokers come up with a ready line each, form one
cluster, and Ctrl-C stops every process cleanly."""

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
    base, zk_port = free_port(), free_port()
    second = free_port()
    if second != base + 1:  # broker 2 takes base + 1: find a free pair
        base = second - 1
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
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(120)
        reader.join(10)
    text = "".join(lines)
    assert code == 0, text
    assert "broker 1 stopped" in text and "broker 2 stopped" in text and "zookeeper stopped" in text

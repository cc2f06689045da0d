"""ZooKeeper for the cluster tests: eoslog's own launcher (eoslog.cluster.zookeeper_server)
on a free port with a throw-away data directory. A machine without ZooKeeper FAILS the test,
naming what to install (tests/deps.py), unless skips were explicitly allowed."""

from __future__ import annotations

from pathlib import Path

import deps
from eoslog.cluster.zookeeper_server import ZooKeeperServer, ZooKeeperUnavailable, find_zookeeper


def start_zookeeper(data_dir: Path, host: str = "127.0.0.1") -> ZooKeeperServer:
    try:
        install = find_zookeeper()
    except ZooKeeperUnavailable as e:
        problem = str(e)  # reported outside the handler: no chained traceback in the failure
    else:
        return ZooKeeperServer(data_dir, host=host, install=install).start()
    deps.missing("ZooKeeper", problem)

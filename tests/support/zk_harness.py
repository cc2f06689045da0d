"""ZooKeeper for the cluster tests: eoslog's own launcher (eoslog.cluster.zookeeper_server)
on a free port with a throw-away data directory. A machine without ZooKeeper FAILS the test,
naming what to install (tests/support/deps.py), unless skips were explicitly allowed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from eoslog.cluster.zookeeper_server import ZooKeeperServer, ZooKeeperUnavailable, find_zookeeper
from support import deps

if TYPE_CHECKING:
    from kazoo.client import KazooClient


def start_zookeeper(data_dir: Path, host: str = "127.0.0.1") -> ZooKeeperServer:
    try:
        install = find_zookeeper()
    except ZooKeeperUnavailable as e:
        problem = str(e)  # reported outside the handler: no chained traceback in the failure
    else:
        return ZooKeeperServer(data_dir, host=host, install=install).start()
    deps.missing("ZooKeeper", problem)


@contextmanager
def zookeeper_client(connect: str) -> Iterator[KazooClient]:
    """A kazoo client on ``connect`` (chroot included) for a test that reads or writes znodes
    itself, closed afterwards."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=connect)
    client.start(30)
    try:
        yield client
    finally:
        client.stop()
        client.close()

from __future__ import annotations

from collections.abc import Iterator

import pytest

from eoslog.cluster.zookeeper_server import ZooKeeperServer
from support.zk_harness import start_zookeeper


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One ZooKeeper server per test module (tests use their own chroot or znodes)."""
    server = start_zookeeper(tmp_path_factory.mktemp("zookeeper"))
    yield server
    server.kill()  # throw-away data: no need for a clean stop

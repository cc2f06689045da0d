from __future__ import annotations

from collections.abc import Iterator

import pytest

from eoslog.cluster.zookeeper_server import ZooKeeperServer
from eoslog.storage.fileio import fsync_dir
from support.cluster_harness import Cluster
from support.cutfs import CutFs
from support.zk_harness import start_zookeeper


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One ZooKeeper server per test module (tests use their own chroot or znodes)."""
    server = start_zookeeper(tmp_path_factory.mktemp("zookeeper"))
    yield server
    server.kill()  # throw-away data: no need for a clean stop


@pytest.fixture
def cluster_on_cutfs(cutfs: CutFs, zookeeper: ZooKeeperServer, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """Three brokers with their data on the module's cutfs mount (ZooKeeper's elsewhere), with
    the test's ``policy`` parameter as their log.flush.policy (test_cluster_power_cut.py,
    test_cluster_fsync_failure.py); ``auto`` sets none: the brokers' default."""
    policy = request.node.callspec.params["policy"]
    root = cutfs.mountpoint / f"{request.node.module.__name__}-{policy}"
    root.mkdir()
    fsync_dir(cutfs.mountpoint)
    overrides = {} if policy == "auto" else {"log.flush.policy": policy}
    cluster = Cluster(root, overrides=overrides, zookeeper=zookeeper).start()
    for i in cluster.brokers:  # the harness's own directories: durable before any cut
        fsync_dir(root / f"broker-{i}")
    fsync_dir(root)
    yield cluster
    cluster.stop()

"""Finalized features in a cluster (KIP-584 as Kafka ≤ 3.x kept them): the ``/feature`` znode,
Kafka's FeatureZNode JSON with the znode's version as the epoch, created with Kafka 4's default
by a new cluster; an update through any broker — eoslog's CLI at one, Kafka 4.4's
kafka-features.sh at another — reaches every broker through its watch; the levels outlive
every broker killed -9 at once; a cluster whose brokers knew no features (topics, no znode)
keeps nothing finalized.

Mutant (not committed): ``ZkFeatureStore.start`` without its watch — the update made at broker 2
was never seen by brokers 1 and 3 (wait_until gave up).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from eoslog.cluster.zookeeper_server import ZooKeeperServer
from eoslog.features import FEATURES, GROUP_VERSION, SHARE_VERSION, TRANSACTION_VERSION
from support import rawkafka
from support.cluster_harness import Cluster, create_topic
from support.harness import in_parallel, wait_until
from support.kafka_harness import run_tool
from support.zk_harness import zookeeper_client

TV_MAX = FEATURES[TRANSACTION_VERSION].max_supported
# A new cluster's levels: Kafka 4.4 finalizes the latest level of each feature it has (eoslog has
# group.version 1 and transaction.version 2 as Kafka 4.4; share.version 1 of Kafka's 2).
DEFAULT = {GROUP_VERSION: FEATURES[GROUP_VERSION].max_supported,
           SHARE_VERSION: FEATURES[SHARE_VERSION].max_supported, TRANSACTION_VERSION: TV_MAX}


def finalized(bootstrap: str) -> tuple[dict[str, int], int]:
    with rawkafka.RawClient(bootstrap) as c:
        r = c.call(rawkafka.api_versions_request(4))
    return {f.name: int(f.max_version_level) for f in r.finalized_features}, int(r.finalized_features_epoch)


def everyone_sees(cluster: Cluster, levels: dict[str, int], epoch: int) -> None:
    for i, b in cluster.brokers.items():
        wait_until(lambda b=b: finalized(b.bootstrap) == (levels, epoch),
                   f"broker {i} serving {levels} at epoch {epoch}", describe=lambda b=b: finalized(b.bootstrap))


@pytest.fixture
def cluster(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path / "features", zookeeper=zookeeper).start()
    yield c
    c.stop()


def znode(cluster: Cluster) -> tuple[dict[str, object], int]:
    assert cluster.zookeeper is not None
    with zookeeper_client(f"{cluster.zookeeper.connect_string}/{cluster.root.name}") as zk:
        data, stat = zk.get("/feature")
    return json.loads(data), stat.version


def test_an_update_at_any_broker_reaches_every_broker_and_outlives_them(cluster: Cluster, tmp_path: Path) -> None:
    assert znode(cluster) == ({"version": 2, "status": 1,
                               "features": {name: {"max_version_level": level} for name, level in DEFAULT.items()}}, 0)
    everyone_sees(cluster, DEFAULT, 0)
    down = subprocess.run([sys.executable, "-m", "eoslog", "features", "downgrade", "--feature",
                           f"{TRANSACTION_VERSION}=0", "--bootstrap-server", cluster.brokers[2].bootstrap],
                          capture_output=True, text=True, timeout=60)
    assert down.returncode == 0, down.stderr
    everyone_sees(cluster, {name: level for name, level in DEFAULT.items() if name != TRANSACTION_VERSION}, 1)
    out = run_tool("org.apache.kafka.tools.FeatureCommand", ["--bootstrap-server", cluster.brokers[3].bootstrap,
                   "upgrade", "--feature", f"{TRANSACTION_VERSION}={TV_MAX}"], tmp_path).stdout
    assert out.strip() == f"{TRANSACTION_VERSION} was upgraded to {TV_MAX}."
    everyone_sees(cluster, DEFAULT, 2)
    described = run_tool("org.apache.kafka.tools.FeatureCommand",
                         ["--bootstrap-server", cluster.brokers[1].bootstrap, "describe"], tmp_path).stdout
    assert re.search(rf"Feature: {re.escape(TRANSACTION_VERSION)}\s+SupportedMinVersion: 0\s+SupportedMaxVersion: "
                     rf"{TV_MAX}\s+FinalizedVersionLevel: {TV_MAX}\s+Epoch: 2", described), described
    in_parallel([b.kill for b in cluster.brokers.values()])
    cluster.restart_dead()
    everyone_sees(cluster, DEFAULT, 2)


def test_a_cluster_of_brokers_without_features_keeps_nothing_finalized(cluster: Cluster) -> None:
    create_topic(cluster.brokers[1].bootstrap, "old-cluster-data", 1, 3)
    cluster.stop()
    assert cluster.zookeeper is not None
    with zookeeper_client(f"{cluster.zookeeper.connect_string}/{cluster.root.name}") as zk:
        zk.delete("/feature")  # as brokers that knew no features left the cluster
    cluster.restart_dead()
    everyone_sees(cluster, {}, 0)
    assert znode(cluster) == ({"version": 2, "status": 1, "features": {}}, 0)

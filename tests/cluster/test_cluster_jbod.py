"""Issue 27, acceptance test 5 in a cluster (JBOD, KIP-112/113): three brokers, each with two log
directories — its own data directory and one on the fault file system (tests/support/cutfs.py).
Kafka 4.4's ``kafka-reassign-partitions.sh`` with ``log_dirs`` puts the partition ``cut-0`` on the
cutfs directory of its leader (AlterReplicaLogDirs in cluster mode, under writes) and ``kept-0``, a
partition only that broker holds, in its other directory. Then, under an idempotent acks=all
producer (group commit: acknowledged once fsynced on every ISR replica), the leader's fsync of
``cut-0`` fails with EIO (the file's unsynced writes lost, as Linux does): that directory goes
offline, the broker tells the controller through ``/log_dir_event_notification``, and the
controller gives ``cut-0`` a new leader from the ISR without it; the broker keeps running and
serving ``kept-0`` from its other directory, its log and ``kafka_log_logmanager_offlinelogdirectorycount``
say what failed, and the history checker (Jepsen's anomalies) finds no acknowledged record lost.

Mutant (not committed): ``Leadership.log_dir_failed`` not writing the notification — the broker
stays leader of an offline partition, the producer's writes get KAFKA_STORAGE_ERROR, and the test
fails waiting for a new leader."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from support.acked_writer import Writer
from support.cluster_harness import Cluster, create_topic, read_all
from support.cutfs import CutFs
from support.harness import free_ports, wait_until
from support.history import History, check
from support.kafka_harness import run_tool
from support.zk_harness import ZooKeeperServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
LEADER = 1  # the broker whose cutfs directory fails: cut-0's preferred leader


@pytest.fixture
def cluster(cutfs: CutFs, zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    (cutfs.mountpoint / "jbod").mkdir()
    metrics = dict(zip((1, 2, 3), free_ports(3), strict=True))
    c = Cluster(tmp_path / "jbod", overrides={"log.flush.policy": "group-commit"}, zookeeper=zookeeper,
                per_broker=lambda i, _port: {"metrics.listener": f"http://127.0.0.1:{metrics[i]}"},
                more_log_dirs=lambda i: [cutfs.mountpoint / "jbod" / f"broker-{i}"])
    c.metrics_ports = metrics  # type: ignore[attr-defined]
    c.start()
    yield c
    c.stop()


def cut_dir(cluster: Cluster, broker: int) -> str:
    return str(cluster.brokers[broker].log_dirs[1].resolve())


def own_dir(cluster: Cluster, broker: int) -> str:
    return str(cluster.brokers[broker].log_dirs[0].resolve())


def offline_dirs_metric(cluster: Cluster, broker: int) -> float:
    port = cluster.metrics_ports[broker]  # type: ignore[attr-defined]
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    [line] = [x for x in text.splitlines() if x.startswith("kafka_log_logmanager_offlinelogdirectorycount ")]
    return float(line.split()[1])


def test_a_failed_disk_moves_its_partitions_leadership_and_the_broker_serves_the_other(
        cutfs: CutFs, cluster: Cluster, tmp_path: Path) -> None:
    bootstrap = cluster.any_alive().bootstrap
    assert int(create_topic(bootstrap, "cut", assignment={0: [LEADER, 2, 3]},
                            configs={"min.insync.replicas": "2"}).error_code) == 0
    assert int(create_topic(bootstrap, "kept", assignment={0: [LEADER]}).error_code) == 0
    cluster.wait_for(lambda m: len(m.topics["cut"][0].isr) == 3 and m.topics["cut"][0].leader == LEADER
                     and m.topics["kept"][0].leader == LEADER, "cut-0 led by broker 1 with its ISR whole")
    history = History()
    with Writer(cluster, "cut", history) as writer:
        wait_until(lambda: writer.sent >= 500, "writes to cut-0", 120)
        # Kafka's tool: cut-0's replica on broker 1 to its cutfs directory, kept-0 to its own (cluster mode).
        plan = tmp_path / "dirs.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "cut", "partition": 0, "replicas": [LEADER, 2, 3], "log_dirs": [cut_dir(cluster, LEADER),
                                                                                     "any", "any"]},
            {"topic": "kept", "partition": 0, "replicas": [LEADER], "log_dirs": [own_dir(cluster, LEADER)]}]}))
        run_tool(REASSIGN, ["--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file", str(plan)],
                 tmp_path)
        on_cutfs = Path(cut_dir(cluster, LEADER)) / "cut-0"
        wait_until(lambda: on_cutfs.is_dir() and not list(on_cutfs.parent.glob("cut-0.*-future")),
                   "cut-0 moved to broker 1's cutfs directory", 120)
        wait_until(lambda: (Path(own_dir(cluster, LEADER)) / "kept-0").is_dir(), "kept-0 in broker 1's own directory",
                   120)
        sent = writer.sent
        wait_until(lambda: writer.sent > sent + 500, "writes after the move", 120)
        assert offline_dirs_metric(cluster, LEADER) == 0
        failed_before = len(cutfs.stats()["failed_fsyncs"])
        cutfs.fail_fsync(f"/jbod/broker-{LEADER}/cut-0/*.log")
        wait_until(lambda: len(cutfs.stats()["failed_fsyncs"]) > failed_before, "the leader's fsync to fail", 120)
        meta = cluster.wait_for(lambda m: m.topics["cut"][0].leader in (2, 3) and LEADER not in m.topics["cut"][0].isr,
                                "cut-0 led elsewhere, broker 1 out of its ISR", 120, via=2)
        at_move = writer.sent
        wait_until(lambda: writer.sent > at_move + 500, "acknowledged writes on the new leader", 120)
    broker = cluster.brokers[LEADER]
    assert broker.alive()  # one directory failed, not every one: no halt
    log_text = broker.log_text()
    assert "is offline" in log_text and "told the controller" in log_text
    assert offline_dirs_metric(cluster, LEADER) == 1
    # Broker 1 still serves kept-0 from its other directory.
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for i in range(20):
        p.produce("kept", b"kept-%d" % i, partition=0)
    assert p.flush(60) == 0
    assert [v for _, v in read_all(broker.bootstrap, "kept", settle=False)] == [b"kept-%d" % i for i in range(20)]
    new_leader = meta.topics["cut"][0].leader
    history.final_read(0, read_all(cluster.brokers[new_leader].bootstrap, "cut", timeout_s=120))
    report = check(history)
    print(report.summary())
    assert report.ok, report.summary()

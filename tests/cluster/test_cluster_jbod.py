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
A second test moves a follower's replica between its disks (throttled) under the same producer and
kills that broker with SIGKILL mid-copy: after its restart the copy resumes and completes, nothing
acknowledged is lost or doubled, and the moved replica is byte-identical to the leader's.

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

from eoslog.client.admin import Admin
from eoslog.client.errors import ReplicaNotAvailableError
from eoslog.client.types import TopicPartition
from support.acked_writer import Writer
from support.cluster_harness import Cluster, create_topic, read_all
from support.cutfs import CutFs
from support.harness import free_ports, wait_until
from support.history import History, check
from support.kafka_harness import JVM_POLL_S, run_tool
from support.zk_harness import ZooKeeperServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
LEADER = 1  # the broker whose cutfs directory fails: cut-0's preferred leader


@pytest.fixture
def cluster(cutfs: CutFs, zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    on_cutfs = cutfs.mountpoint / tmp_path.name  # (the mount is the module's: a directory per test)
    on_cutfs.mkdir()
    metrics = dict(zip((1, 2, 3), free_ports(3), strict=True))
    c = Cluster(tmp_path / "jbod", overrides={"log.flush.policy": "group-commit"}, zookeeper=zookeeper,
                per_broker=lambda i, _port: {"metrics.listener": f"http://127.0.0.1:{metrics[i]}"},
                more_log_dirs=lambda i: [on_cutfs / f"broker-{i}"])
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
        cutfs.fail_fsync(f"/{tmp_path.name}/broker-{LEADER}/cut-0/*.log")
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


def partition_bytes(cluster: Cluster, broker: int, topic: str) -> bytes:
    """The partition's segments on one broker, from whichever of its log directories holds it."""
    [directory] = [d / f"{topic}-0" for d in cluster.brokers[broker].log_dirs if (d / f"{topic}-0").is_dir()]
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


def test_a_follower_killed_mid_move_resumes_it_after_its_restart(cluster: Cluster, tmp_path: Path) -> None:
    bootstrap = cluster.any_alive().bootstrap
    mover = 2
    assert int(create_topic(bootstrap, "moving", assignment={0: [1, mover, 3]},
                            configs={"min.insync.replicas": "2"}).error_code) == 0
    cluster.wait_for(lambda m: len(m.topics["moving"][0].isr) == 3, "moving-0's ISR whole")
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
    for i in range(24_000):
        p.produce("moving", b"pre-%d-" % i + b"x" * 240, partition=0)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(120) == 0
    [(current, target)] = [(d, o) for d, o in ((own_dir(cluster, mover), cut_dir(cluster, mover)),
                                               (cut_dir(cluster, mover), own_dir(cluster, mover)))
                           if (Path(d) / "moving-0").is_dir()]
    history = History()
    with Writer(cluster, "moving", history) as writer:
        wait_until(lambda: writer.sent >= 500, "writes to moving-0", 120)
        plan = tmp_path / "move.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "moving", "partition": 0, "replicas": [1, mover, 3], "log_dirs": ["any", target, "any"]}]}))
        run_tool(REASSIGN, ["--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file", str(plan),
                            "--replica-alter-log-dirs-throttle", "200000"], tmp_path)
        futures = lambda: list(Path(target).glob("moving-0.*-future"))  # noqa: E731
        wait_until(lambda: futures() and sum(f.stat().st_size for f in futures()[0].glob("*.log")) > 0,
                   "the copy under way", 120)
        cluster.brokers[mover].kill()  # SIGKILL mid-copy
        assert futures() and (Path(current) / "moving-0").is_dir()
        cluster.brokers[mover].start()

        def done() -> bool:
            out = run_tool(REASSIGN, ["--bootstrap-server", bootstrap, "--verify", "--reassignment-json-file",
                                      str(plan)], tmp_path, check=False).stdout
            return "completed successfully" in out and "still in progress" not in out

        wait_until(done, "the move done after the restart", 240, interval_s=JVM_POLL_S)
        sent = writer.sent
        wait_until(lambda: writer.sent > sent + 500, "writes after the move", 120)
    assert (Path(target) / "moving-0").is_dir() and not (Path(current) / "moving-0").exists() and not futures()
    assert "resumes" in cluster.brokers[mover].log_text()
    leader = cluster.wait_for(lambda m: len(m.topics["moving"][0].isr) == 3, "the ISR whole again").topics[
        "moving"][0].leader
    history.final_read(0, read_all(cluster.brokers[leader].bootstrap, "moving", timeout_s=120))
    report = check(history)
    assert report.ok, report.summary()
    wait_until(lambda: partition_bytes(cluster, mover, "moving") == partition_bytes(cluster, leader, "moving"),
               "the moved replica byte-identical to the leader's", 120)


def test_a_replica_added_by_reassignment_is_made_in_the_log_dir_the_plan_names(cluster: Cluster,
                                                                               tmp_path: Path) -> None:
    """kafka-reassign-partitions.sh adding a replica on broker 3 with a log_dirs entry for it: broker
    3 holds nothing of the topic yet, so AlterReplicaLogDirs answers REPLICA_NOT_AVAILABLE (not
    UNKNOWN_TOPIC_OR_PARTITION, which would fail the tool) and remembers the directory; the tool
    retries until the replica is made — there (Kafka's preferred log directory)."""
    bootstrap = cluster.any_alive().bootstrap
    assert int(create_topic(bootstrap, "grow", assignment={0: [1]}).error_code) == 0
    cluster.wait_for(lambda m: m.topics["grow"][0].leader == 1, "grow-0 led by broker 1")
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        [answer] = admin.alter_replica_log_dirs({(TopicPartition("grow", 0), 3): cut_dir(cluster, 3)}).values()
    assert isinstance(answer, ReplicaNotAvailableError), answer
    plan = tmp_path / "grow.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "grow", "partition": 0, "replicas": [1, 3], "log_dirs": ["any", cut_dir(cluster, 3)]}]}))
    out = run_tool(REASSIGN, ["--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file", str(plan)],
                   tmp_path).stdout
    assert "Successfully started moving log directory" in out, out
    cluster.wait_for(lambda m: m.topics["grow"][0].isr == (1, 3), "broker 3 in grow-0's ISR")
    assert (Path(cut_dir(cluster, 3)) / "grow-0").is_dir() and not (Path(own_dir(cluster, 3)) / "grow-0").exists()
    assert "moving grow-0" not in cluster.brokers[3].log_text()  # made there, not moved there

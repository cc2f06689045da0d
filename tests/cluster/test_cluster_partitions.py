"""Issue 13, test 3: network partitions. Each broker runs in a network namespace of its own
(tests/support/netns.py), ZooKeeper on the test's side of the bridge. The leader of a partition is
cut off from the other brokers and ZooKeeper while a client on its side and a client on the
majority side keep writing with acks=all: the isolated leader acknowledges nothing that is
later lost (it cannot shrink its ISR without ZooKeeper, so its acks=all writes time out), the
majority elects a new leader and goes on, and after healing the old leader truncates what only
it had (among it an acks=1 record it took once deposed): every replica ends byte-identical.
The history checker runs over both clients' records and the final read."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.cluster_harness import Cluster, create_topic, find_coordinator, read_all, segment_bytes
from support.harness import wait_until
from support.history import History, check
from support.netns import Lab

WRITER = str(Path(__file__).parent.parent / "support" / "partition_writer.py")
# One acks=1 record, answered on the leader's own append (run on the isolated leader's side).
LONELY = """import sys
from eoslog.client import Producer
with Producer({"bootstrap.servers": sys.argv[1], "acks": "1", "enable.idempotence": False}) as p:
    print(p.send(sys.argv[2], b"lonely", partition=0).result(30).offset)
"""


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    lab = Lab().start()
    yield lab
    lab.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, lab: Lab) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("partitions"), lab=lab, overrides={"replica.lag.time.max.ms": "3000"}).start()
    yield c
    for host in c.hosts.values():
        lab.heal(host)
    c.stop()


_RUNNING: list[subprocess.Popen[bytes]] = []


@pytest.fixture(autouse=True)
def _no_writer_left() -> Iterator[None]:
    """A failed test must not leave its writers running (they never see their stop file)."""
    yield
    while _RUNNING:
        proc = _RUNNING.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


class Writer:
    def __init__(self, cluster: Cluster, tmp: Path, name: str, bootstrap: str, topic: str,
                 prefix: list[str] | None = None, transactional_id: str | None = None) -> None:
        self.out, self.stop_file = tmp / f"{name}.jsonl", tmp / f"{name}.stop"
        cmd = [*(prefix or []), sys.executable, WRITER, bootstrap, topic, name, str(self.out), str(self.stop_file)]
        if transactional_id:
            cmd += ["--transactional-id", transactional_id]
        self.log = open(tmp / f"{name}.log", "w")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        _RUNNING.append(self.proc)

    def records(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in self.out.read_text().splitlines()] if self.out.exists() else []

    def acknowledged_between(self, start: float, end: float, outcome: str) -> list[dict[str, object]]:
        return [r for r in self.records() if r.get("outcome") == outcome and start <= float(str(r["t"])) < end]

    def stop(self, history: History) -> None:
        self.stop_file.write_text("")
        try:
            self.proc.wait(90)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()
        for r in self.records():
            if "send" in r:
                history.send(str(r["send"]).encode(), str(r["outcome"]), r["txn"] and str(r["txn"]))
            else:
                history.txn(str(r["txn"]), str(r["outcome"]))


def test_isolated_leader_loses_no_acknowledged_write(cluster: Cluster, lab: Lab, tmp_path: Path) -> None:
    topic = "partitioned"
    create_topic(cluster.any_alive().bootstrap, topic, assignment={0: [1, 2, 3]}, configs={"min.insync.replicas": "2"})
    leader = cluster.brokers[1]
    isolated = Writer(cluster, tmp_path, "isolated", leader.bootstrap, topic, prefix=cluster.hosts[1].command())
    majority = Writer(cluster, tmp_path, "majority", cluster.bootstrap, topic)
    wait_until(lambda: len(isolated.records()) > 20 and len(majority.records()) > 20, "both writers writing", 60)
    lab.isolate(cluster.hosts[1])
    cut_at = time.time()
    try:
        cluster.wait_for(lambda m: m.topics[topic][0].leader in (2, 3), "a new leader on the majority side", 60, via=2)
        acked_before = sum(1 for r in majority.records() if r.get("outcome") == "ok")
        wait_until(lambda: sum(1 for r in majority.records() if r.get("outcome") == "ok") > acked_before + 20,
                   "the majority side writing on", 60)
        # What the isolated writer had in flight at the cut may have reached the followers with
        # their last fetch (CI: all three replicas had it; nothing to truncate). A record the
        # deposed leader takes now, with the new leader elected, only it can have.
        lonely = subprocess.run(cluster.hosts[1].command(sys.executable, "-c", LONELY, leader.bootstrap, topic),
                                capture_output=True, text=True, timeout=120)
        assert lonely.returncode == 0, lonely.stderr[-3000:]
        time.sleep(2)
    finally:
        healed_at = time.time()
        lab.heal(cluster.hosts[1])
    # Cut off from its followers and ZooKeeper, the leader acknowledged nothing (a batch
    # replicated just before the cut may still be answered in its first moments).
    assert isolated.acknowledged_between(cut_at + 1, healed_at, "ok") == []
    cluster.wait_for(lambda m: sorted(m.topics[topic][0].isr) == [1, 2, 3], "the old leader back in the ISR", 90, via=2)
    history = History()
    isolated.stop(history)
    majority.stop(history)
    wait_until(lambda: len({segment_bytes(b, topic) for b in cluster.brokers.values()}) == 1,
               "byte-identical replicas", 60)
    final = read_all(cluster.bootstrap, topic, settle=False)
    assert b"lonely" not in [v for _, v in final]  # past the new leader's epoch start: truncated away
    history.final_read(0, final)
    report = check(history)
    print(report.summary())
    assert report.ok, report.summary()
    assert "truncating" in leader.log_text()  # it had written what only it had


def test_isolated_coordinator_completes_no_transaction(cluster: Cluster, lab: Lab, tmp_path: Path) -> None:
    """The transaction coordinator of one writer is cut off with that writer; it can replicate
    no PrepareCommit, so it answers no commit and sends no marker, and the coordinator the
    majority elects aborts the transaction once it times out. Commits acknowledged on either
    side are all read, no record of an aborted transaction is, replicas end identical."""
    topic = "txn-partitioned"
    create_topic(cluster.any_alive().bootstrap, topic, assignment={0: [2, 3, 1]}, configs={"min.insync.replicas": "2"})
    ids = [f"isolated-{i}" for i in range(40)]
    coordinators = {i: find_coordinator(cluster, i) for i in ids}
    txn_id = next(i for i in ids if coordinators[i] == 1)  # led by broker 1, which the topic is not
    other = next(i for i in ids if coordinators[i] != 1)
    isolated = Writer(cluster, tmp_path, "txn-isolated", cluster.brokers[1].bootstrap, topic,
                      prefix=cluster.hosts[1].command(), transactional_id=txn_id)
    majority = Writer(cluster, tmp_path, "txn-majority", cluster.bootstrap, topic, transactional_id=other)
    wait_until(lambda: len(isolated.records()) > 12 and len(majority.records()) > 12, "both writers committing", 90)
    moved = _state_partition(cluster, txn_id)
    lab.isolate(cluster.hosts[1])
    cut_at = time.time()
    try:
        cluster.wait_for(lambda m: m.topics["__transaction_state"][moved].leader not in (1, -1),
                         "the coordinator moved to the majority side", 60, via=2)
        committed_before = sum(1 for r in majority.records() if r.get("outcome") == "commit")
        wait_until(lambda: sum(1 for r in majority.records() if r.get("outcome") == "commit") > committed_before + 2,
                   "the majority side committing on", 90)
        time.sleep(3)
    finally:
        healed_at = time.time()
        lab.heal(cluster.hosts[1])
    assert isolated.acknowledged_between(cut_at + 1, healed_at, "commit") == []  # no commit while deposed
    cluster.wait_for(lambda m: 1 in m.brokers, "broker 1 registered again", 90, via=2)
    history = History()
    isolated.stop(history)
    majority.stop(history)
    history.final_read(0, read_all(cluster.bootstrap, topic, timeout_s=120))
    report = check(history)
    print(report.summary())
    assert report.ok, report.summary()
    cluster.wait_for(lambda m: sorted(m.topics[topic][0].isr) == [1, 2, 3], "the ISR whole", 90, via=2)
    wait_until(lambda: len({segment_bytes(b, topic) for b in cluster.brokers.values()}) == 1,
               "byte-identical replicas", 60)


def _state_partition(cluster: Cluster, txn_id: str) -> int:
    from eoslog.coordinator.transaction.log import transaction_partition_for

    state = cluster.metadata(["__transaction_state"]).topics["__transaction_state"]
    return transaction_partition_for(txn_id, len(state))

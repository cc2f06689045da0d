"""Issue 27, acceptance test 1: a cluster that changes shape under an exactly-once load.

The copy test's ZooKeeper + 3-broker cluster (tests/chaos/test_copy.py: topics at replication
factor 3 / min.insync.replicas 2, librdkafka's transactional copiers and read_committed readers)
runs the copy, with an idempotent acks=all writer on a third topic beside it. Meanwhile:

1. a fourth broker joins (while the writer writes: before the copy begins, so that on a loaded
   machine the slow start of a broker does not use up the copy);
2. once the copy is under way, half the partitions — those of every topic, among them the
   ``__transaction_state`` partitions of both copiers' transactional ids and the
   ``__consumer_offsets`` partition of their group, whose coordinators hold the copiers' open
   transactions — are reassigned onto it with Kafka 4.4's ``kafka-reassign-partitions.sh
   --execute --throttle`` (each target drops the partition's leader, so leadership, and each
   coordinator, moves at the end: to broker 4, or away from it where it already led), and,
   once the controller lists none in progress, ``--verify`` says all are complete (and removes
   the throttles);
3. broker 1 is emptied with ``eoslog partitions reassign --generate --remove-broker 1`` and
   ``--execute --throttle``, and retired (a controlled shutdown; it is not started again).

Each step begins once the copy has made some progress and must end before it is done (else
the cluster did not change under load). Then the copy test's checks hold as always — every
input number exactly once in the output, nothing of an aborted transaction read, the history
checker's lost writes, duplicates and offsets — the writer's acknowledged records are all there,
and every partition's replicas are byte-identical on its final brokers.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from copier import CONFLUENT
from test_copy import GROUP, INPUT, OUTPUT, CopyRun, Scenario
from test_copy import test_transactional_copy_is_exactly_once as check_copy_run

from eoslog.client.admin import Admin
from eoslog.coordinator.partitioning import coordinator_partition_for
from support.acked_writer import Writer
from support.cluster_harness import Cluster, create_topic, read_all, segment_bytes
from support.harness import wait_until
from support.history import History, check
from support.kafka_harness import run_tool

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
WRITES = "grow-writes"
INTERNAL_PARTITIONS = 5  # test_copy's BROKER_OVERRIDES
THROTTLE = "2000000"
# Enough records that the copy outlasts the cluster's changes on two loaded cores (the changes
# take about half of it at load 18: JVM starts, broker starts, throttled copies).
SCENARIO = Scenario(CONFLUENT, 60_000, 2, 3, broker_kills=0, copier_kills=0, cluster=True, deadline_s=800.0)


class Grower(threading.Thread):
    """Changes the cluster's shape while the copy runs (the module doc's steps)."""

    def __init__(self, run: CopyRun, tmp: Path) -> None:
        super().__init__(daemon=True)
        self.run_, self.tmp = run, tmp
        assert run.cluster is not None
        self.cluster: Cluster = run.cluster
        self.error: BaseException | None = None
        self.progress_at: dict[str, float] = {}  # step -> share of the input copied when it ended
        self.moved_coordinators: list[str] = []

    def copied(self) -> float:
        return sum(c.position for c in self.run_.copiers) / SCENARIO.records if self.run_.copiers else 0.0

    def run(self) -> None:
        try:
            self._grow()
        except BaseException as e:
            self.error = e
            self.run_.note(f"grower failed: {e!r}")

    def _grow(self) -> None:
        wait_until(lambda: self.copied() >= 0.05, "the copy under way", 300)
        plan = self._half_onto_broker_4()
        bootstrap = self.cluster.any_alive().bootstrap
        executed = run_tool(REASSIGN, ["--bootstrap-server", bootstrap, "--reassignment-json-file", str(plan),
                                       "--execute", "--throttle", THROTTLE], self.tmp).stdout
        assert "Successfully started partition reassignments" in executed, executed
        self.run_.note(f"kafka-reassign-partitions.sh --execute at {self.copied():.0%}")
        with Admin({"bootstrap.servers": self.cluster.bootstrap}) as admin:
            wait_until(lambda: not admin.list_partition_reassignments(), "the reassignments done", 300)
        verified = run_tool(REASSIGN, ["--bootstrap-server", self.cluster.any_alive().bootstrap,
                                       "--reassignment-json-file", str(plan), "--verify"], self.tmp).stdout
        assert "still in progress" not in verified and "Clearing broker-level throttles" in verified, verified
        self.progress_at["reassigned"] = self.copied()
        self.run_.note(f"reassignment onto broker 4 verified at {self.copied():.0%}")

        wait_until(lambda: self.copied() >= 0.25, "the copy a quarter done", 300)
        drain = self.tmp / "drain.json"
        self._eoslog("partitions", "reassign", "--generate", "--remove-broker", "1", "--output", str(drain))
        out = self._eoslog("partitions", "reassign", "--execute", "--reassignment-json-file", str(drain),
                           "--throttle", THROTTLE)
        assert "is still in progress" not in out, out
        self.run_.note(f"broker 1 emptied at {self.copied():.0%}")
        self.run_.broker = self.cluster.brokers[2]  # where dump-log looks from now on
        self.cluster.retire(1)
        self.progress_at["retired"] = self.copied()
        self.run_.note(f"broker 1 retired at {self.copied():.0%}")

    def _half_onto_broker_4(self) -> Path:
        """Every other partition of each topic, and the copiers' coordinator partitions, each
        onto broker 4 in place of its leader."""
        with Admin({"bootstrap.servers": self.cluster.bootstrap}) as admin:
            topics = admin.describe_topics([INPUT, OUTPUT, WRITES, "__consumer_offsets", "__transaction_state"])
        coordinators = {("__transaction_state", coordinator_partition_for(c.transactional_id, INTERNAL_PARTITIONS))
                        for c in self.run_.copiers}
        coordinators.add(("__consumer_offsets", coordinator_partition_for(GROUP, INTERNAL_PARTITIONS)))
        entries = []
        for name, described in topics.items():
            for p in described.partitions:
                if p.partition % 2 == 0 or (name, p.partition) in coordinators:
                    target = _without_its_leader(p.replicas, p.leader)
                    entries.append({"topic": name, "partition": p.partition, "replicas": target})
                    if (name, p.partition) in coordinators:
                        self.moved_coordinators.append(f"{name}-{p.partition} (leader {p.leader} -> {target[0]})")
        plan = self.tmp / "onto-4.json"
        plan.write_text(json.dumps({"version": 1, "partitions": entries}))
        return plan

    def _eoslog(self, *args: str) -> str:
        out = subprocess.run([sys.executable, "-m", "eoslog", *args, "--bootstrap-server", self.cluster.bootstrap],
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, f"eoslog {' '.join(args)}:\n{out.stdout}\n{out.stderr}"
        return out.stdout


def _without_its_leader(replicas: tuple[int, ...], leader: int) -> list[int]:
    """The partition on broker 4 (or, when 4 leads it, on the broker it lacks), its leader
    dropped: the new first replica leads once the reassignment completes."""
    absent = [b for b in (1, 2, 3, 4) if b not in replicas]
    first = 4 if leader != 4 else absent[0]
    target = [first, *[r for r in replicas if r not in (leader, first)]]
    return target + [b for b in absent if b not in target][: len(replicas) - len(target)]


def test_add_reassign_and_retire_brokers_under_an_exactly_once_copy(tmp_path: Path) -> None:
    run = CopyRun(SCENARIO, tmp_path)
    try:
        assert run.cluster is not None
        create_topic(run.cluster.any_alive().bootstrap, WRITES, partitions=2, replication_factor=3,
                     configs={"min.insync.replicas": "2"})
        grower = Grower(run, tmp_path)
        history = History()
        with Writer(run.cluster, WRITES, history) as writer:
            run.cluster.add_broker(4)
            run.note("broker 4 added")
            grower.start()
            check_copy_run(run)  # seeds, copies while the grower works, checks exactly-once
            grower.join(600)
            assert not grower.is_alive(), "the cluster's changes did not end"
            if grower.error is not None:
                raise AssertionError(f"changing the cluster failed: {grower.error!r}\n{run.diagnosis()}")
            written = writer.sent
        print("\n".join(run.timeline), "\ncoordinators moved:", grower.moved_coordinators)
        # Under load: each step ended while the copy still had work (the copiers were in the
        # middle of transactions when their coordinators moved).
        assert grower.progress_at["retired"] < 1.0, f"the copy ended before the cluster changed: {run.timeline}"
        assert len(grower.moved_coordinators) == 3, grower.moved_coordinators
        history.final_read(0, read_all(run.cluster.bootstrap, WRITES))
        report = check(history)
        assert report.ok and written > 0, report.summary()
        _replicas_identical(run.cluster, [INPUT, OUTPUT, WRITES, "__transaction_state", "__consumer_offsets"])
    finally:
        run.close()


def _replicas_identical(cluster: Cluster, topics: list[str]) -> None:
    meta = cluster.wait_for(lambda m: all(sorted(p.isr) == sorted(p.replicas) and 1 not in p.replicas
                                          for t in topics for p in m.topics[t].values()),
                            "every replica in sync, none on broker 1")
    for t in topics:
        for p, m in meta.topics[t].items():
            wait_until(lambda t=t, p=p, m=m: len({segment_bytes(cluster.brokers[b], t, p) for b in m.replicas}) == 1,
                       f"the replicas of {t}-{p} on {m.replicas} byte-identical", 60)

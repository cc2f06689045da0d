"""A failed fsync on a partition's leader (issue 30): three brokers on one cutfs mount
(tests/support/cutfs.py), the leader's next fsync of the partition's segment fails with EIO and
loses the file's unsynced writes as Linux does. The leader's log directory goes offline — its
only one, so it closes its ZooKeeper session and halts (exit code 1), as Kafka halts a broker
whose every log directory failed — the controller elects a new leader from the ISR, the
producer's writes go on there, and every acks=all write acknowledged is in the new leader's log
at its offset. The halted broker then restarts and rejoins the ISR. (``cluster_on_cutfs``: tests/cluster/conftest.py.)

Under ``log.flush.policy=group-commit`` the leader fsyncs every round (the failure hits the
round the writes wait for); under Kafka's policy (the cluster default) the fsync that fails is
an explicit flush, here every 200 messages (``flush.messages``).

Mutant shown (not committed): with the failed round retried instead (the code before issue 30)
the leader goes on leading and acknowledging, and the test fails waiting for it to halt."""

from __future__ import annotations

import pytest
from test_cluster_power_cut import AckedWriter

from support.cluster_harness import Cluster, create_topic, read_all
from support.cutfs import CutFs
from support.harness import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

TOPIC = "cut"  # (AckedWriter's)
ACKED_BEFORE = 1000
HALT_EXIT_CODE = 1


@pytest.mark.parametrize("policy", ["group-commit", "kafka"])
def test_a_failed_fsync_on_the_leader_moves_leadership_and_loses_nothing(cutfs: CutFs, cluster_on_cutfs: Cluster,
                                                                        policy: str) -> None:
    cluster = cluster_on_cutfs
    configs = {"min.insync.replicas": "2", **({"flush.messages": "200"} if policy == "kafka" else {})}
    result = create_topic(cluster.any_alive().bootstrap, TOPIC, partitions=1, replication_factor=3, configs=configs)
    assert int(result.error_code) == 0, result
    meta = cluster.wait_for(lambda m: TOPIC in m.topics and len(m.topics[TOPIC][0].isr) == 3, "the ISR whole")
    old_leader = meta.topics[TOPIC][0].leader
    followers = [i for i in cluster.brokers if i != old_leader]
    writer = AckedWriter(cluster.bootstrap)
    wait_until(lambda: len(writer.acked) >= ACKED_BEFORE, f"{ACKED_BEFORE} acknowledged writes", 180)
    failed_before = len(cutfs.stats()["failed_fsyncs"])
    cutfs.fail_fsync(f"/{cluster.root.name}/broker-{old_leader}/data/{TOPIC}-0/*.log")
    wait_until(lambda: len(cutfs.stats()["failed_fsyncs"]) > failed_before, "the leader's fsync to fail", 120)
    leader = cluster.brokers[old_leader]
    wait_until(lambda: not leader.alive(), "the leader to halt on its failed fsync", 60)
    assert leader.proc is not None and leader.proc.returncode == HALT_EXIT_CODE, leader.log_text()[-3000:]
    assert "is offline" in leader.log_text()
    cluster.wait_for(lambda m: m.topics[TOPIC][0].leader in followers, "a follower leads", 120, via=followers[0])
    at_move = len(writer.acked)
    wait_until(lambda: len(writer.acked) > at_move + 500, "acknowledged writes on the new leader", 120)
    writer.finish()
    new_leader = cluster.metadata(via=followers[0]).topics[TOPIC][0].leader
    stored = dict(read_all(cluster.brokers[new_leader].bootstrap, TOPIC, settle=False))
    lost = [(v, at) for v, at in writer.acked.items() if stored.get(at) != v]
    report = (f"{policy}: {len(writer.acked)} acknowledged ({at_move} when leadership moved from {old_leader} to "
              f"{new_leader}), {len(stored)} stored; first lost {lost[:3]}")
    print(report)
    assert not lost, f"{len(lost)} acknowledged records lost\n{report}"
    # The halted broker starts again (an unclean start), follows and catches up.
    leader.start()
    cluster.wait_for(lambda m: len(m.topics[TOPIC][0].isr) == 3, "the halted broker back in the ISR", 120,
                     via=followers[0])

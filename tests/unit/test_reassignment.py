"""The pure part of a reassignment (KIP-455): Kafka's ReplicaAssignment arithmetic, the
controller's checks of a target, when it is complete and the state that ends it, and the
assignment znode's adding/removing replicas and ``/admin/reassign_partitions`` as Kafka wrote
them."""

from __future__ import annotations

import json
import uuid

import pytest

from eoslog.cluster import znodes
from eoslog.cluster.controller.reassignment import ReplicaAssignment, check_target, complete, is_complete
from eoslog.cluster.znodes import LeaderAndIsr, TopicAssignment
from eoslog.errors import Errors


def test_reassign_to_lists_the_target_first_then_the_original_replicas_it_drops() -> None:
    # Kafka's own example (KafkaController.onPartitionReassignment): ORS {1,2,3}, TRS {4,5,6}.
    moving = ReplicaAssignment((1, 2, 3)).reassign_to([4, 5, 6])
    assert moving == ReplicaAssignment((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))
    assert (moving.origin, moving.target, moving.being_reassigned) == ((1, 2, 3), (4, 5, 6), True)
    overlapping = ReplicaAssignment((1, 2, 3)).reassign_to([3, 4, 2])
    assert overlapping == ReplicaAssignment((3, 4, 2, 1), (4,), (1,))


def test_a_new_target_replaces_the_ongoing_one_and_keeps_the_original_replicas() -> None:
    moving = ReplicaAssignment((1, 2, 3)).reassign_to([4, 5, 6])
    again = moving.reassign_to([1, 7, 8])
    assert again == ReplicaAssignment((1, 7, 8, 2, 3), (7, 8), (2, 3))
    assert again.origin == (1, 2, 3)
    back = moving.cancelled()
    assert back == ReplicaAssignment((1, 2, 3)) and not back.being_reassigned
    same = ReplicaAssignment((1, 2)).reassign_to([1, 2])
    assert not same.being_reassigned


def test_check_target() -> None:
    current = ReplicaAssignment((1, 2))
    assert check_target([2, 3], current, {1, 2, 3}) is None
    refusals = {
        (): check_target([], current, {1, 2, 3}),
        (1, 1): check_target([1, 1], current, {1, 2, 3}),
        (1, -2): check_target([1, -2], current, {1, 2, 3}),
        (1, 4): check_target([1, 4], current, {1, 2, 3}),
    }
    assert {k: (r.error if r else None) for k, r in refusals.items()} == dict.fromkeys(
        refusals, Errors.INVALID_REPLICA_ASSIGNMENT)
    refused = refusals[(1, 4)]
    assert refused is not None and "not alive" in refused.message
    # A replica that is already there need not be alive (its broker may be down).
    assert check_target([1, 2], current, {1}) is None
    rf = check_target([1, 2, 3], current, {1, 2, 3}, allow_replication_factor_change=False)
    assert rf is not None and rf.error is Errors.INVALID_REPLICATION_FACTOR
    assert rf.message == "The replication factor is changed from 2 to 3"


def test_complete_when_every_target_replica_is_in_sync() -> None:
    moving = ReplicaAssignment((1, 2, 3)).reassign_to([3, 4])  # RS 3,4,1,2
    assert not is_complete(moving, (1, 2, 3))
    assert is_complete(moving, (1, 2, 3, 4))
    assert is_complete(ReplicaAssignment((1, 2)), ())


def test_a_removed_replica_may_rejoin_the_isr_until_the_reassignment_is_complete() -> None:
    """Kafka's leader counts every replica of RS until step B3: a replica being removed that
    fell out of the ISR (its broker restarted) may rejoin while an added one still copies, so
    min.insync.replicas can still be met; once every target replica is in sync it may not."""
    moving = ReplicaAssignment((1, 2)).reassign_to([3, 1])  # RS 3,1,2: adding 3, removing 2
    assert moving.may_join_isr(2, (1,))  # 3 still copying
    assert moving.may_join_isr(3, (1,)) and moving.may_join_isr(1, ())
    assert not moving.may_join_isr(2, (1, 3))  # complete: the controller is taking 2 out
    assert ReplicaAssignment((1, 2)).may_join_isr(2, (1,))


def test_the_ending_state_moves_leadership_into_the_target_and_drops_the_removed_replicas() -> None:
    moving = ReplicaAssignment((1, 2, 3)).reassign_to([3, 4])
    state = LeaderAndIsr(1, 7, (1, 2, 3, 4), 2, zk_version=9)
    ended = complete(moving, state, live={1, 2, 3, 4}, controller_epoch=5)
    assert ended == LeaderAndIsr(3, 8, (3, 4), 5, 9)  # the first live in-sync target replica, next epoch
    # A leader in the target stays, in its epoch; only the ISR loses the removed replicas.
    kept = complete(moving, LeaderAndIsr(4, 7, (4, 1, 3), 2, 9), live={1, 3, 4}, controller_epoch=5)
    assert kept == LeaderAndIsr(4, 7, (3, 4), 5, 9)
    # Nothing to change: the same state back.
    final = LeaderAndIsr(3, 8, (4, 3), 5, 10)
    assert complete(moving, final, live={3, 4}, controller_epoch=5) is final
    # No live in-sync target replica may lead: wait.
    assert complete(moving, LeaderAndIsr(1, 7, (1, 2, 3, 4), 2, 9), live={1, 2}, controller_epoch=5) is None
    # The leader in the target but dead: another target replica leads.
    dead = complete(moving, LeaderAndIsr(3, 7, (1, 3, 4), 2, 9), live={1, 4}, controller_epoch=5)
    assert dead == LeaderAndIsr(4, 8, (3, 4), 5, 9)


def test_the_assignment_znode_carries_adding_and_removing_replicas() -> None:
    topic_id = uuid.uuid4()
    a = TopicAssignment("t", topic_id, {0: (3, 4, 1, 2), 1: (2, 3)}, {0: (3, 4)}, {0: (1, 2)})
    doc = json.loads(a.encode())
    assert doc == {"version": 3, "topic_id": znodes.encode_topic_id(topic_id),
                   "partitions": {"0": [3, 4, 1, 2], "1": [2, 3]},
                   "adding_replicas": {"0": [3, 4]}, "removing_replicas": {"0": [1, 2]}}
    back = TopicAssignment.decode("t", a.encode(), 7)
    assert back == a and back.zk_version == 7 and back.reassigning == {0}
    done = back.with_partition(0, (3, 4))
    assert (dict(done.partitions), dict(done.adding), dict(done.removing)) == ({0: (3, 4), 1: (2, 3)}, {}, {})


def test_reassign_partitions_znode_as_kafka_3_wrote_it() -> None:
    # kafka-reassign-partitions.sh --zookeeper (Kafka <= 2.x) wrote log_dirs too.
    data = (b'{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1,2],"log_dirs":["any","any"]},'
            b'{"topic":"b","partition":3,"replicas":[3]}]}')
    assert znodes.decode_reassignments(data) == {("a", 0): (1, 2), ("b", 3): (3,)}
    assert znodes.decode_reassignments(znodes.encode_reassignments({("a", 0): (1, 2)})) == {("a", 0): (1, 2)}
    with pytest.raises(znodes.ZnodeDataError):
        znodes.decode_reassignments(b'{"version":1,"partitions":[{"topic":"a"}]}')

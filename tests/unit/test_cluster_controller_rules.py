"""The controller's pure rules: the partition state table, leader election per reason, and
Kafka's replica placement."""

from __future__ import annotations

from collections import Counter

import pytest

from eoslog.cluster.controller.assignment import AssignmentError, assign_replicas, validate_manual_assignment
from eoslog.cluster.controller.election import (
    Elected,
    controlled_shutdown_election,
    isr_without,
    offline_election,
    preferred_election,
)
from eoslog.cluster.controller.states import IllegalStateTransition, PartitionState, check_transition
from eoslog.cluster.metadata import ClusterMetadata
from eoslog.cluster.znodes import BrokerRegistration
from eoslog.errors import Errors

S = PartitionState


@pytest.mark.parametrize(("current", "target"), [
    (S.NON_EXISTENT, S.NEW), (S.NEW, S.ONLINE), (S.NEW, S.OFFLINE), (S.ONLINE, S.ONLINE),
    (S.ONLINE, S.OFFLINE), (S.OFFLINE, S.ONLINE), (S.OFFLINE, S.NON_EXISTENT),
])
def test_legal_transitions(current: PartitionState, target: PartitionState) -> None:
    check_transition("t-0", current, target)


@pytest.mark.parametrize(("current", "target"), [
    (S.NON_EXISTENT, S.ONLINE), (S.NON_EXISTENT, S.OFFLINE), (S.ONLINE, S.NEW), (S.ONLINE, S.NON_EXISTENT),
    (S.NEW, S.NON_EXISTENT), (S.OFFLINE, S.NEW),
])
def test_illegal_transitions(current: PartitionState, target: PartitionState) -> None:
    with pytest.raises(IllegalStateTransition, match="t-0"):
        check_transition("t-0", current, target)


def test_offline_election_prefers_the_isr_in_assignment_order() -> None:
    assert offline_election([1, 2, 3], isr=[3, 2], live={2, 3}, unclean_enabled=False) == Elected(2, (3, 2))
    # A live replica outside the ISR may miss acknowledged records: not without unclean election.
    assert offline_election([1, 2, 3], isr=[1], live={2, 3}, unclean_enabled=False) is None
    assert offline_election([1, 2, 3], isr=[1], live={2, 3}, unclean_enabled=True) == Elected(2, (2,), unclean=True)
    assert offline_election([1, 2], isr=[1, 2], live=set(), unclean_enabled=True) is None


def test_controlled_shutdown_and_preferred_elections() -> None:
    assert controlled_shutdown_election([1, 2, 3], [1, 2, 3], {1, 2, 3}, shutting_down={1}) == Elected(2, (2, 3))
    assert controlled_shutdown_election([1, 2], [1], {1, 2}, shutting_down={1}) is None  # 2 is behind
    assert preferred_election([1, 2, 3], [2, 1], {1, 2}) == Elected(1, (2, 1))
    assert preferred_election([1, 2, 3], [2, 3], {1, 2, 3}) is None  # preferred not caught up
    assert preferred_election([1, 2, 3], [2, 1], {2}) is None  # preferred not alive


def test_isr_keeps_its_last_member() -> None:
    assert isr_without((1, 2, 3), leader=1, gone={2}) == ((1, 3), 1)
    assert isr_without((1, 2), leader=1, gone={1}) == ((2,), -1)
    assert isr_without((3,), leader=3, gone={3}) == ((3,), -1)  # the one that may lead again


def test_placement_matches_kafkas() -> None:
    # The example in the doc comment of Kafka's AdminUtils.assignReplicasToBrokers: five
    # brokers, start index 0, shift 0.
    expected = {0: (0, 1, 2), 1: (1, 2, 3), 2: (2, 3, 4), 3: (3, 4, 0), 4: (4, 0, 1),
                5: (0, 2, 3), 6: (1, 3, 4), 7: (2, 4, 0), 8: (3, 0, 1), 9: (4, 1, 2)}
    assert assign_replicas([0, 1, 2, 3, 4], 10, 3, start=0, shift=0) == expected


def test_placement_spreads_leaders_and_validates() -> None:
    placed = assign_replicas([3, 1, 2], 6, 3)
    assert Counter(r[0] for r in placed.values()) == {1: 2, 2: 2, 3: 2}
    assert all(len(set(r)) == 3 for r in placed.values())
    assert list(assign_replicas([1, 2, 3], 2, 1, first_partition=4)) == [4, 5]
    with pytest.raises(AssignmentError, match="larger than available brokers: 3") as e:
        assign_replicas([1, 2, 3], 1, 4)
    assert e.value.error is Errors.INVALID_REPLICATION_FACTOR
    with pytest.raises(AssignmentError, match="broker 9"):
        validate_manual_assignment({0: [1, 9]}, [1, 2])
    with pytest.raises(AssignmentError, match="more than once"):
        validate_manual_assignment({0: [1, 1]}, [1, 2])
    with pytest.raises(AssignmentError, match="same number of replicas"):
        validate_manual_assignment({0: [1, 2], 1: [1]}, [1, 2])


def test_isr_eligibility_excludes_brokers_shutting_down() -> None:
    """KIP-841: a leader takes a caught-up follower back into the ISR only if it is registered
    and not in controlled shutdown (a request from an earlier registration is stale)."""
    meta = ClusterMetadata()
    meta.set_brokers({1: BrokerRegistration(1, "h", 1, epoch=10), 2: BrokerRegistration(2, "h", 2, epoch=11)})
    assert meta.isr_eligible(1) and meta.isr_eligible(2) and not meta.isr_eligible(3)
    meta.set_shutdown_requests({1: 10, 2: 7})
    assert not meta.isr_eligible(1)  # asked to shut down in its current registration
    assert meta.isr_eligible(2)  # the request is from an earlier registration

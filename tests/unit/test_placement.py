"""Proposals of ``tools/placement.py``: a fourth broker gets its share with the fewest copies,
a removed broker is emptied, racks are spread, leaders evened by reordering only."""

from __future__ import annotations

from collections import Counter

import pytest

from eoslog.client.types import TopicPartition
from eoslog.tools.placement import NOT_ALL_BROKERS_HAVE_RACKS, copies, moves, propose, racks_to_use


def _three_broker_topic(partitions: int = 12) -> dict[TopicPartition, tuple[int, ...]]:
    return {TopicPartition("t", p): tuple((p + i) % 3 + 1 for i in range(3)) for p in range(partitions)}


def _replicas_per_broker(a: dict[TopicPartition, tuple[int, ...]]) -> Counter[int]:
    return Counter(b for r in a.values() for b in r)


def test_a_new_broker_gets_its_share_and_nothing_else_moves() -> None:
    now = _three_broker_topic()
    after = propose(now, [1, 2, 3, 4])
    assert _replicas_per_broker(after) == {1: 9, 2: 9, 3: 9, 4: 9}
    assert copies(now, after) == 9  # 36 replicas over 4 brokers: exactly broker 4's 9 are copied
    assert all(len(set(r)) == 3 for r in after.values())
    leaders = Counter(r[0] for r in after.values())
    assert max(leaders.values()) - min(leaders.values()) <= 1 and set(leaders) == {1, 2, 3, 4}


def test_an_even_cluster_is_left_alone() -> None:
    now = _three_broker_topic()
    assert moves(now, propose(now, [1, 2, 3])) == {}


def test_a_removed_broker_is_emptied() -> None:
    now = propose(_three_broker_topic(), [1, 2, 3, 4])
    after = propose(now, [2, 3, 4])
    assert 1 not in _replicas_per_broker(after)
    assert copies(now, after) == _replicas_per_broker(now)[1]
    with pytest.raises(ValueError, match="replication factor 3 is larger than the 2 brokers"):
        propose(now, [2, 3])


def test_replicas_spread_over_racks() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    now = {TopicPartition("t", p): (1, 2, 3) for p in range(6)}  # two replicas in rack a each
    after = propose(now, racks.keys(), racks)
    for replicas in after.values():
        assert len({racks[b] for b in replicas}) == 3, after
    assert max(_replicas_per_broker(after).values()) - min(_replicas_per_broker(after).values()) <= 1


def test_leaders_are_evened_by_reordering_without_copies() -> None:
    now = {TopicPartition("t", p): (1, 2, 3) for p in range(6)}
    after = propose(now, [1, 2, 3])
    assert copies(now, after) == 0
    assert Counter(r[0] for r in after.values()) == {1: 2, 2: 2, 3: 2}


def test_new_partitions_are_placed_across_racks_as_kafka_places_them() -> None:
    """Kafka's AdminRackAwareTest: the rack-alternated broker list and the assignment it gives."""
    from eoslog.cluster.controller.assignment import _rack_alternated, assign_replicas

    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert _rack_alternated(racks) == [0, 3, 1, 5, 4, 2]
    assert _rack_alternated({b: r for b, r in racks.items() if b != 5}) == [0, 3, 1, 4, 2]
    assert assign_replicas(list(racks), 7, 3, start=0, shift=0, racks=racks) == {
        0: (0, 3, 1), 1: (3, 1, 5), 2: (1, 5, 4), 3: (5, 4, 2), 4: (4, 2, 0), 5: (2, 0, 3), 6: (0, 4, 2)}
    # Three racks of two: every partition on three racks, leaders and replicas even.
    six = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    placed = assign_replicas(list(six), 12, 3, racks=six)
    assert all(len({six[b] for b in replicas}) == 3 for replicas in placed.values())
    assert set(Counter(r[0] for r in placed.values()).values()) == {2}
    assert set(Counter(b for r in placed.values() for b in r).values()) == {6}
    # No broker with a rack: racks are not used.
    assert assign_replicas([1, 2, 3], 3, 3, start=0, shift=0, racks={1: None, 2: None, 3: None}) == {
        0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)}


def test_brokers_without_a_rack_count_as_one_rack_when_others_have_racks() -> None:
    """Kafka 4.4's StripedReplicaPlacer (run from .reference/lib with brokers a,a,b,b,-,- at RF
    3 it gave [2,4,5] [3,6,1] [5,2,4] [1,3,6] [4,5,2] [6,1,3]): the rackless brokers are one
    more rack, so every partition spans min(RF, racks + 1) of them; Kafka ≤ 3.x refused."""
    from eoslog.cluster.controller.assignment import assign_replicas

    racks: dict[int, str | None] = {1: "a", 2: "a", 3: "b", 4: "b", 5: None, 6: None}
    for start, shift in ((0, 0), (1, 2), (None, None)):
        placed = assign_replicas(list(racks), 12, 3, start=start, shift=shift, racks=racks)
        assert all(len({racks[b] for b in replicas}) == 3 for replicas in placed.values()), placed
        assert set(Counter(b for r in placed.values() for b in r).values()) == {6}, placed
    # Two racked brokers of one rack and two without: each partition on one of each.
    half: dict[int, str | None] = {1: "a", 2: "a", 3: None, 4: None}
    placed = assign_replicas(list(half), 12, 2, racks=half)
    assert all({half[b] for b in replicas} == {"a", None} for replicas in placed.values()), placed


def test_a_proposal_counts_brokers_without_a_rack_as_one_rack_as_new_topics_do() -> None:
    """The controller places a new topic's replicas with the rackless brokers as one rack
    (Kafka 4.4's StripedReplicaPlacer); a proposal keeps that spread and restores it. Before,
    ``propose`` took each rackless broker for a rack of its own: it left (3, 4) partitions
    with no replica in rack a, and evening the brokers of the placement below moved broker 1's
    replicas onto (2, 3) — the partitions lost rack a."""
    from eoslog.cluster.controller.assignment import assign_replicas

    half: dict[int, str | None] = {1: "a", 2: None, 3: None}
    placed = assign_replicas(list(half), 6, 2, start=0, shift=0, racks=half)
    assert all({half[b] for b in r} == {"a", None} for r in placed.values()), placed
    now = {TopicPartition("t", p): r for p, r in placed.items()}
    assert moves(now, propose(now, half.keys(), half)) == {}  # broker 1 holds 6, the others 3: racks first

    two: dict[int, str | None] = {1: "a", 2: "a", 3: None, 4: None}
    now = {TopicPartition("t", p): (3, 4) if p % 2 else (4, 3) for p in range(4)}
    after = propose(now, two.keys(), two)
    assert all({two[b] for b in r} == {"a", None} for r in after.values()), after
    assert copies(now, after) == 4 and set(_replicas_per_broker(after).values()) == {2}


def test_racks_to_use_refuses_a_mix_as_kafka_reassign_partitions_generate_does() -> None:
    """ReassignPartitionsCommand.getBrokerMetadata of Kafka 4.4: among the brokers to use (those
    registered), some with a rack and some without is refused with its message unless rack
    awareness is off (--disable-rack-aware), which places as if no broker had one."""
    racks: dict[int, str | None] = {1: "a", 2: "b", 3: None, 4: ""}
    with pytest.raises(ValueError) as refused:
        racks_to_use(racks, [1, 2, 3])
    assert str(refused.value) == ("Not all brokers have rack information. Add --disable-rack-aware in command "
                                  "line to make replica assignment without rack information.")
    assert str(refused.value) == NOT_ALL_BROKERS_HAVE_RACKS
    with pytest.raises(ValueError, match="Not all brokers have rack information"):
        racks_to_use(racks, [1, 4])  # an empty broker.rack is none
    assert racks_to_use(racks, [1, 2, 3], rack_aware=False) == {1: None, 2: None, 3: None}
    assert racks_to_use(racks, [1, 2]) == {1: "a", 2: "b"}  # rackless brokers not to be used do not count
    assert racks_to_use(racks, [3, 4]) == {3: None, 4: None}
    assert racks_to_use(racks, [1, 2, 9]) == {1: "a", 2: "b"}  # an unregistered one is left out, as Kafka does

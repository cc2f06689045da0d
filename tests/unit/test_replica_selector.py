"""KIP-392's replica selectors (``replica.selector``), as Kafka's RackAwareReplicaSelector chooses."""

from __future__ import annotations

import pytest

from eoslog.replica.selector import (
    LEADER_SELECTOR,
    RACK_AWARE_SELECTOR,
    ReplicaView,
    leader_select,
    rack_aware_select,
    selector_named,
)

LEADER = ReplicaView(1, "a", 100, 0)
B1 = ReplicaView(2, "b", 90, 0)
B2 = ReplicaView(3, "b", 95, 500)
B3 = ReplicaView(4, "b", 95, 100)
ALL = [LEADER, B1, B2, B3]


def test_the_rack_aware_selector_prefers_the_most_caught_up_replica_in_the_clients_rack() -> None:
    assert rack_aware_select("b", LEADER, ALL) == B3  # highest end offset, then caught up most recently
    assert rack_aware_select("", LEADER, ALL) == LEADER  # no rack named
    assert rack_aware_select("z", LEADER, ALL) == LEADER  # none in the client's rack
    assert rack_aware_select("a", LEADER, [*ALL, ReplicaView(5, "a", 100, 0)]) == LEADER  # the leader is there
    assert leader_select("b", LEADER, ALL) == LEADER


def test_replica_selector_class_names_kafkas_classes() -> None:
    assert selector_named("") is None
    assert selector_named(RACK_AWARE_SELECTOR) is rack_aware_select
    assert selector_named(LEADER_SELECTOR) is leader_select
    with pytest.raises(ValueError):
        selector_named("com.example.Mine")

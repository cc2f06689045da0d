"""The group state machine: the one table of legal moves, enforced by one function."""

from __future__ import annotations

import itertools

import pytest

from eoslog.coordinator.group.state import (
    VALID_PREVIOUS,
    GroupState,
    IllegalGroupStateTransition,
    transition,
)

# Kafka's GroupState.validPreviousStates, written out independently of the table.
KAFKA_LEGAL = {
    (GroupState.EMPTY, GroupState.PREPARING_REBALANCE),
    (GroupState.STABLE, GroupState.PREPARING_REBALANCE),
    (GroupState.COMPLETING_REBALANCE, GroupState.PREPARING_REBALANCE),
    (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE),
    (GroupState.COMPLETING_REBALANCE, GroupState.STABLE),
    (GroupState.PREPARING_REBALANCE, GroupState.EMPTY),
    *((s, GroupState.DEAD) for s in GroupState),
}


def test_table_covers_every_state() -> None:
    assert set(VALID_PREVIOUS) == set(GroupState)


@pytest.mark.parametrize("current,target", list(itertools.product(GroupState, GroupState)))
def test_transition_follows_kafka(current: GroupState, target: GroupState) -> None:
    if (current, target) in KAFKA_LEGAL:
        assert transition("g", current, target) is target
    else:
        with pytest.raises(IllegalGroupStateTransition) as e:
            transition("g", current, target)
        assert "g" in str(e.value) and current.value in str(e.value) and target.value in str(e.value)


def test_parse_is_case_insensitive() -> None:
    assert GroupState.parse("stable") is GroupState.STABLE
    assert GroupState.parse("PreparingRebalance") is GroupState.PREPARING_REBALANCE
    assert GroupState.parse("nope") is None

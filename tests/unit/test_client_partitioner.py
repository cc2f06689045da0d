"""Sticky partitioning of keyless records (KIP-480)."""

from __future__ import annotations

import itertools
from collections import Counter

from eoslog.client.partitioner import StickyPartitioner


def test_sticks_until_told_to_move_then_picks_another_available_partition() -> None:
    s = StickyPartitioner()
    first = s.partition("t", [0, 1, 2], 3)
    assert all(s.partition("t", [0, 1, 2], 3) == first for _ in range(100))
    moved = [s.next_partition("t", [0, 1, 2], 3, first)]
    assert moved[0] != first and s.partition("t", [0, 1, 2], 3) == moved[0]
    for _ in range(300):
        moved.append(s.next_partition("t", [0, 1, 2], 3, moved[-1]))
    assert all(a != b for a, b in itertools.pairwise(moved))
    assert set(Counter(moved)) == {0, 1, 2}


def test_only_partitions_with_a_leader_are_chosen() -> None:
    s = StickyPartitioner()
    picks = {s.next_partition("t", [1, 3], 4, None) for _ in range(100)}
    assert picks == {1, 3}
    assert s.next_partition("t", [2], 4, 2) == 2  # the only one left


def test_topics_are_independent_and_a_shrunk_topic_is_handled() -> None:
    s = StickyPartitioner()
    s.next_partition("a", [5], 6, None)
    assert s.partition("a", [5], 6) == 5
    assert s.partition("a", [0, 1], 2) in (0, 1)  # 5 no longer exists
    assert s.partition("b", [0], 1) == 0

"""The consumer's assignors against Java's documented results, and cooperative-sticky's
invariants over random membership changes; the consumer protocol's binary format."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from eoslog.client.consumer.assignors import (
    CooperativeStickyAssignor,
    Member,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    make_assignors,
    rebalance_protocol,
)
from eoslog.client.types import TopicPartition as TP
from eoslog.protocol.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

COOP = RebalanceProtocol.COOPERATIVE


def members(subs: Mapping[str, tuple[str, ...]], owned: Mapping[str, list[TP]] | None = None,
            generation: int = 1, instance: Mapping[str, str] | None = None) -> dict[str, Member]:
    owned = owned or {}
    instance = instance or {}
    return {m: Member(m, instance.get(m), Subscription(topics, None, tuple(owned.get(m, ())), generation))
            for m, topics in subs.items()}


def tps(topic: str, *partitions: int) -> list[TP]:
    return [TP(topic, p) for p in partitions]


# -- range / roundrobin: Java's javadoc examples ---------------------------------------------------


def test_range_as_javas_example() -> None:
    got = RangeAssignor().assign({"t0": 3, "t1": 3}, members({"C0": ("t0", "t1"), "C1": ("t0", "t1")}))
    assert got == {"C0": tps("t0", 0, 1) + tps("t1", 0, 1), "C1": tps("t0", 2) + tps("t1", 2)}


def test_roundrobin_as_javas_examples() -> None:
    got = RoundRobinAssignor().assign({"t0": 3, "t1": 3}, members({"C0": ("t0", "t1"), "C1": ("t0", "t1")}))
    assert got == {"C0": [TP("t0", 0), TP("t0", 2), TP("t1", 1)], "C1": [TP("t0", 1), TP("t1", 0), TP("t1", 2)]}
    got = RoundRobinAssignor().assign({"t0": 1, "t1": 2, "t2": 3},
                                      members({"C0": ("t0",), "C1": ("t0", "t1"), "C2": ("t0", "t1", "t2")}))
    assert got == {"C0": tps("t0", 0), "C1": tps("t1", 0), "C2": tps("t1", 1) + tps("t2", 0, 1, 2)}


def test_static_members_come_first_in_instance_id_order() -> None:
    subs = {"a-member": ("t",), "b-member": ("t",), "c-member": ("t",)}
    got = RangeAssignor().assign({"t": 4}, members(subs, instance={"c-member": "i-1", "b-member": "i-2"}))
    assert got == {"c-member": tps("t", 0, 1), "b-member": tps("t", 2), "a-member": tps("t", 3)}


def test_topics_nobody_subscribes_or_that_do_not_exist() -> None:
    got = RangeAssignor().assign({"t": 2}, members({"A": ("t", "missing"), "B": ("other",)}))
    assert got == {"A": tps("t", 0, 1), "B": []}


def test_the_rebalance_protocol_is_cooperative_only_if_every_assignor_is() -> None:
    assert rebalance_protocol(make_assignors(("cooperative-sticky",))) is COOP
    assert rebalance_protocol(make_assignors(("range", "cooperative-sticky"))) is RebalanceProtocol.EAGER


# -- cooperative-sticky -------------------------------------------------------------------------------


def test_cooperative_sticky_balances_a_new_group() -> None:
    got = CooperativeStickyAssignor().assign({"t": 6}, members({"A": ("t",), "B": ("t",), "C": ("t",)}), COOP)
    assert sorted(len(v) for v in got.values()) == [2, 2, 2]
    assert sorted(tp for v in got.values() for tp in v) == tps("t", *range(6))


def test_a_joining_member_gets_partitions_only_once_they_are_revoked() -> None:
    a = CooperativeStickyAssignor()
    owned = {"A": tps("t", 0, 1, 2), "B": tps("t", 3, 4, 5)}
    first = a.assign({"t": 6}, members({"A": ("t",), "B": ("t",), "C": ("t",)}, owned), COOP)
    # A and B keep two each; the partition each gives up goes to nobody in this round.
    assert len(first["A"]) == len(first["B"]) == 2 and first["C"] == []
    assert set(first["A"]) < set(owned["A"]) and set(first["B"]) < set(owned["B"])
    # They revoke it and rejoin owning what they kept: the second round hands it to C.
    second = a.assign({"t": 6}, members({"A": ("t",), "B": ("t",), "C": ("t",)}, first, generation=2), COOP)
    assert second["A"] == first["A"] and second["B"] == first["B"]
    assert sorted(second["C"]) == sorted(set(tps("t", *range(6))) - set(first["A"]) - set(first["B"]))
    # The eager protocol gets the whole target assignment at once.
    eager = a.assign({"t": 6}, members({"A": ("t",), "B": ("t",), "C": ("t",)}, owned), RebalanceProtocol.EAGER)
    assert sorted(len(v) for v in eager.values()) == [2, 2, 2]


def test_claims_of_the_newest_generation_win() -> None:
    subs = {"A": ("t",), "B": ("t",)}
    ms = members(subs, {"A": tps("t", 0, 1)})
    ms["B"] = Member("B", None, Subscription(("t",), None, tuple(tps("t", 0, 1)), generation_id=5))
    got = CooperativeStickyAssignor().assign({"t": 2}, ms, COOP)
    # B (generation 5) owns both; one is to move to A, so it goes to nobody this round.
    assert got["A"] == [] and len(got["B"]) == 1
    assert CooperativeStickyAssignor.current_owners({"t": 2}, [ms["A"], ms["B"]]) == {
        TP("t", 0): "B", TP("t", 1): "B"}
    same = members(subs, {"A": tps("t", 0), "B": tps("t", 0)})
    assert CooperativeStickyAssignor.current_owners({"t": 2}, list(same.values())) == {}


def test_the_generation_in_javas_user_data_counts_for_old_subscription_versions() -> None:
    a = CooperativeStickyAssignor()
    old = Member("A", None, Subscription(("t",), a.user_data(9), tuple(tps("t", 0)), -1, None, 1))
    new = Member("B", None, Subscription(("t",), None, tuple(tps("t", 0)), 4))
    assert a.current_owners({"t": 1}, [old, new]) == {TP("t", 0): "A"}


def test_owned_partitions_of_a_topic_no_longer_subscribed_are_not_kept() -> None:
    got = CooperativeStickyAssignor().assign(
        {"t": 2, "u": 2}, members({"A": ("u",), "B": ("t", "u")}, {"A": tps("t", 0, 1)}), COOP)
    assert set(got["B"]) >= set(tps("t", 0, 1))


@settings(max_examples=150, deadline=None)
@given(
    partitions=st.integers(min_value=1, max_value=24),
    before=st.integers(min_value=1, max_value=6),
    leaving=st.integers(min_value=0, max_value=3),
    joining=st.integers(min_value=0, max_value=3),
)
def test_cooperative_sticky_invariants(partitions: int, before: int, leaving: int, joining: int) -> None:
    """From a balanced group, some members leave and others join: members that stay keep
    what they can (no partition of theirs moves unless they are above the new quota), a
    partition never goes to a new owner while its old one holds it, and after the
    follow-up round the assignment is complete and balanced."""
    a = CooperativeStickyAssignor()
    topic_sizes = {"t": partitions}
    old_names = [f"m{i:02d}" for i in range(before)]
    start = a.assign(topic_sizes, members(dict.fromkeys(old_names, ("t",))), COOP)
    stay = old_names[: max(0, before - leaving)]
    names = stay + [f"n{i:02d}" for i in range(joining)]
    if not names:
        return
    owned = {m: start[m] for m in stay}
    first = a.assign(topic_sizes, members(dict.fromkeys(names, ("t",)), owned, generation=1), COOP)
    every = [tp for v in first.values() for tp in v]
    assert len(every) == len(set(every))
    for m, got in first.items():
        for tp in got:
            holder = next((o for o, held in owned.items() if tp in held), m)
            assert holder == m, f"{tp} given to {m} while {holder} still holds it"
    quota = partitions // len(names)
    for m in stay:
        assert len(set(first[m]) & set(owned[m])) >= min(len(owned[m]), quota)
        assert set(first[m]) >= set(owned[m]) or len(owned[m]) > quota
    second = a.assign(topic_sizes, members(dict.fromkeys(names, ("t",)), first, generation=2), COOP)
    for m in names:
        assert set(second[m]) >= set(first[m])  # the follow-up round revokes nothing
    final = sorted(tp for v in second.values() for tp in v)
    assert final == tps("t", *range(partitions))
    sizes = [len(v) for v in second.values()]
    assert max(sizes) - min(sizes) <= 1


# -- the consumer protocol's bytes ---------------------------------------------------------------------


def test_subscription_bytes_as_javas_consumer_protocol() -> None:
    data = encode_subscription(Subscription(("a",), None, (TP("a", 1),), 3, None))
    assert data == (b"\x00\x03" b"\x00\x00\x00\x01\x00\x01a" b"\xff\xff\xff\xff"
                    b"\x00\x00\x00\x01\x00\x01a\x00\x00\x00\x01\x00\x00\x00\x01" b"\x00\x00\x00\x03" b"\xff\xff")
    assert decode_subscription(data) == Subscription(("a",), None, (TP("a", 1),), 3, None, 3)
    v0 = b"\x00\x00" b"\x00\x00\x00\x02\x00\x01a\x00\x01b" b"\x00\x00\x00\x02ud"
    assert decode_subscription(v0) == Subscription(("a", "b"), b"ud", (), -1, None, 0)
    # A newer version is read as far as we know it.
    assert decode_subscription(b"\x00\x09" + data[2:] + b"more").topics == ("a",)


def test_assignment_bytes_round_trip() -> None:
    a = Assignment((TP("b", 0), TP("a", 2), TP("a", 1)), b"x")
    data = encode_assignment(a)
    assert data[:2] == b"\x00\x03"
    assert decode_assignment(data) == Assignment((TP("a", 1), TP("a", 2), TP("b", 0)), b"x", 3)
    assert decode_assignment(b"") == Assignment((), None, 0)

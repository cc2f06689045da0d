"""Partition assignors run by the group leader: ``range``, ``roundrobin`` and
``cooperative-sticky``, producing what Java's assignors of those names produce for the
same input, so that a group mixing eoslog, Java and librdkafka members gets one answer
whoever leads it.

- ``range`` (Java's RangeAssignor): per topic, the members subscribed to it in order,
  each a contiguous range; the first ``partitions % members`` get one more.
- ``roundrobin`` (RoundRobinAssignor): every subscribed partition, sorted by topic and
  partition, dealt to the members in order, skipping members not subscribed to its topic.
- ``cooperative-sticky`` (CooperativeStickyAssignor, KIP-429): members keep the partitions
  they own (``owned_partitions`` of their subscription; on a conflict the claim of the
  newest generation wins), the rest go to the least loaded member, then partitions move
  from the most to the least loaded member until no two differ by more than one. Under
  the cooperative protocol a partition that changes owner is left out of this round's
  assignment: its owner revokes it, rejoins, and the next round hands it over.

Members are ordered as Java's ``MemberInfo``: static members (group.instance.id) first,
by instance id, then dynamic ones by member id. What this module must never do: I/O.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar

from eoslog.client.types import TopicPartition
from eoslog.protocol.consumer_protocol import DEFAULT_GENERATION, Subscription

_GENERATION = struct.Struct(">i")


class RebalanceProtocol(IntEnum):
    EAGER = 0
    COOPERATIVE = 1


@dataclass(frozen=True)
class Member:
    member_id: str
    group_instance_id: str | None
    subscription: Subscription

    def sort_key(self) -> tuple[int, str]:
        if self.group_instance_id is not None:
            return (0, self.group_instance_id)
        return (1, self.member_id)


Assignment = dict[str, list[TopicPartition]]


def sorted_members(members: Mapping[str, Member]) -> list[Member]:
    return sorted(members.values(), key=Member.sort_key)


class Assignor:
    name: ClassVar[str]
    protocols: ClassVar[frozenset[RebalanceProtocol]] = frozenset({RebalanceProtocol.EAGER})

    def user_data(self, generation: int) -> bytes | None:
        """What this assignor wants in the member's subscription user data."""
        return None

    def assign(self, partitions_per_topic: Mapping[str, int], members: Mapping[str, Member],
               protocol: RebalanceProtocol = RebalanceProtocol.EAGER) -> Assignment:
        raise NotImplementedError


class RangeAssignor(Assignor):
    name = "range"

    def assign(self, partitions_per_topic: Mapping[str, int], members: Mapping[str, Member],
               protocol: RebalanceProtocol = RebalanceProtocol.EAGER) -> Assignment:
        out: Assignment = {m: [] for m in members}
        ordered = sorted_members(members)
        for topic in sorted(partitions_per_topic):
            subscribers = [m for m in ordered if topic in m.subscription.topics]
            if not subscribers:
                continue
            count = partitions_per_topic[topic]
            per, extra = divmod(count, len(subscribers))
            for i, m in enumerate(subscribers):
                start = per * i + min(i, extra)
                length = per + (1 if i < extra else 0)
                out[m.member_id].extend(TopicPartition(topic, p) for p in range(start, start + length))
        return out


class RoundRobinAssignor(Assignor):
    name = "roundrobin"

    def assign(self, partitions_per_topic: Mapping[str, int], members: Mapping[str, Member],
               protocol: RebalanceProtocol = RebalanceProtocol.EAGER) -> Assignment:
        out: Assignment = {m: [] for m in members}
        ordered = sorted_members(members)
        if not ordered:
            return out
        subscribed = {t for m in ordered for t in m.subscription.topics}
        i = 0
        for topic in sorted(subscribed & partitions_per_topic.keys()):
            for p in range(partitions_per_topic[topic]):
                while topic not in ordered[i % len(ordered)].subscription.topics:
                    i += 1
                out[ordered[i % len(ordered)].member_id].append(TopicPartition(topic, p))
                i += 1
        return out


def member_generation(s: Subscription) -> int:
    """The generation a member's owned partitions come from: the subscription's own field
    (v2+), else the int32 Java's CooperativeStickyAssignor puts in the user data."""
    if s.generation_id != DEFAULT_GENERATION:
        return s.generation_id
    if s.user_data is not None and len(s.user_data) == _GENERATION.size:
        return int(_GENERATION.unpack(s.user_data)[0])
    return DEFAULT_GENERATION


class CooperativeStickyAssignor(Assignor):
    name = "cooperative-sticky"
    protocols = frozenset({RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE})

    def user_data(self, generation: int) -> bytes | None:
        return _GENERATION.pack(generation)

    def assign(self, partitions_per_topic: Mapping[str, int], members: Mapping[str, Member],
               protocol: RebalanceProtocol = RebalanceProtocol.COOPERATIVE) -> Assignment:
        ordered = sorted_members(members)
        rank = {m.member_id: i for i, m in enumerate(ordered)}
        owners = self.current_owners(partitions_per_topic, ordered)
        out: Assignment = {m.member_id: [] for m in ordered}
        for tp, owner in owners.items():
            out[owner].append(tp)
        eligible: dict[str, list[str]] = {
            topic: [m.member_id for m in ordered if topic in m.subscription.topics] for topic in partitions_per_topic
        }

        def least_loaded(topic: str) -> str | None:
            candidates = eligible.get(topic) or []
            return min(candidates, key=lambda mid: (len(out[mid]), rank[mid]), default=None)

        for topic in sorted(partitions_per_topic):
            for p in range(partitions_per_topic[topic]):
                tp = TopicPartition(topic, p)
                if tp in owners:
                    continue
                target = least_loaded(topic)
                if target is not None:
                    out[target].append(tp)
        self._balance(out, eligible, rank)
        if protocol == RebalanceProtocol.COOPERATIVE:
            # A partition may go to its new owner only once the old one has revoked it.
            for mid, tps in out.items():
                out[mid] = [tp for tp in tps if owners.get(tp, mid) == mid]
        return {mid: sorted(tps) for mid, tps in out.items()}

    @staticmethod
    def current_owners(partitions_per_topic: Mapping[str, int], ordered: list[Member]) -> dict[TopicPartition, str]:
        """Each partition some member validly owns: it exists, the member still subscribes
        to its topic, and no other member claims it from the same or a newer generation."""
        claims: dict[TopicPartition, list[tuple[int, str]]] = defaultdict(list)
        for m in ordered:
            generation = member_generation(m.subscription)
            for tp in m.subscription.owned_partitions:
                if tp.topic in m.subscription.topics and 0 <= tp.partition < partitions_per_topic.get(tp.topic, 0):
                    claims[tp].append((generation, m.member_id))
        owners: dict[TopicPartition, str] = {}
        for tp, claimants in claims.items():
            newest = max(g for g, _ in claimants)
            at_newest = [mid for g, mid in claimants if g == newest]
            if len(at_newest) == 1:
                owners[tp] = at_newest[0]
        return owners

    @staticmethod
    def _balance(out: Assignment, eligible: Mapping[str, list[str]], rank: Mapping[str, int]) -> None:
        """Move partitions from the most to the least loaded eligible member until no move
        narrows the gap (each move lowers the sum of squared loads, so this ends)."""
        while True:
            moved = False
            for giver in sorted(out, key=lambda mid: (-len(out[mid]), rank[mid])):
                load = len(out[giver])
                for tp in sorted(out[giver], reverse=True):
                    takers = [mid for mid in eligible.get(tp.topic, ()) if len(out[mid]) < load - 1]
                    if takers:
                        taker = min(takers, key=lambda mid: (len(out[mid]), rank[mid]))
                        out[giver].remove(tp)
                        out[taker].append(tp)
                        moved = True
                        break
                if moved:
                    break
            if not moved:
                return


ASSIGNORS: dict[str, type[Assignor]] = {
    a.name: a for a in (RangeAssignor, RoundRobinAssignor, CooperativeStickyAssignor)
}


def make_assignors(names: tuple[str, ...]) -> list[Assignor]:
    return [ASSIGNORS[name]() for name in names]


def rebalance_protocol(assignors: list[Assignor]) -> RebalanceProtocol:
    """COOPERATIVE only when every configured assignor supports it (Java's ConsumerCoordinator)."""
    common = frozenset.intersection(*(a.protocols for a in assignors))
    return max(common)

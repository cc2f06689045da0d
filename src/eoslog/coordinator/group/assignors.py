"""The server-side assignors of consumer groups (``group.consumer.assignors``): ``uniform`` and
``range``, as Kafka 4.4's ``UniformAssignor`` and ``RangeAssignor`` compute them.

An assignor sees a ``GroupSpec`` — each member's subscribed topic ids, instance id, rack and
current target assignment — and the subscribed topics' partition counts, and returns every
member's new target. It is a pure function: the coordinator persists its result as the target
assignment.

- ``uniform`` (the default): as many partitions per member as possible, the difference at most one,
  moving as few as possible. With every member subscribed to the same topics (homogeneous) it is
  Kafka's ``UniformHomogeneousAssignmentBuilder`` step for step: members keep what they have up to
  their quota (the first ``total % members`` in Kafka's iteration order may have one more), the rest
  is handed out in order. Kafka iterates a ``java.util.HashMap`` of member ids and a ``HashSet`` of
  topic ids; ``member_order`` and ``topic_order`` reproduce those orders, so a group whose member ids
  are the client's (ConsumerGroupHeartbeat v1, KIP-1082) gets Kafka's assignment. With different
  subscriptions (heterogeneous) eoslog balances each topic over its subscribers, sticky, by its own
  simpler rule (Kafka's builder is a different, longer algorithm: docs/compatibility.md).
- ``range``: per topic, contiguous ranges of partitions to the subscribers sorted by instance id
  (static members first) then member id, the first ``partitions % subscribers`` getting one more —
  co-partitioned topics land together. Not sticky, as Kafka's.

Racks are passed in (rack-aware assignment input) and, as in Kafka's two built-in assignors, not
used to place partitions.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from eoslog.javahash import java_string_hash

Assignment = dict[uuid.UUID, frozenset[int]]


class PartitionAssignorError(Exception):
    """The assignor cannot assign (a subscribed topic that is not in the metadata)."""


@dataclass(frozen=True, slots=True)
class MemberSpec:
    subscribed_topic_ids: frozenset[uuid.UUID]
    instance_id: str | None = None
    rack_id: str | None = None
    assignment: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=dict)  # the current target


@dataclass(frozen=True, slots=True)
class GroupSpec:
    members: Mapping[str, MemberSpec]  # in Kafka's iteration order (member_order)
    homogeneous: bool
    partition_counts: Mapping[uuid.UUID, int]  # subscribed topics; absent: not in the metadata
    partition_racks: Mapping[tuple[uuid.UUID, int], frozenset[str]] = field(default_factory=dict)


Assignor = Callable[[GroupSpec], dict[str, Assignment]]


# -- Java's iteration orders --------------------------------------------------------------------


def _capacity(n: int) -> int:
    """A java.util.HashMap's table size after ``n`` puts into a new default map."""
    cap = 16
    while n > cap * 3 // 4:
        cap *= 2
    return cap


def _spread(h: int) -> int:
    h &= 0xFFFFFFFF
    return h ^ (h >> 16)


def member_order(member_ids: Iterable[str]) -> list[str]:
    """Member ids as Kafka's ``new HashMap<>()`` of them iterates (insertion order within a bucket)."""
    ids = list(member_ids)
    cap = _capacity(len(ids))
    return sorted(ids, key=lambda m: _spread(java_string_hash(m)) & (cap - 1))


def uuid_hash(u: uuid.UUID) -> int:
    """Kafka's ``Uuid.hashCode``."""
    most, least = u.int >> 64, u.int & ((1 << 64) - 1)
    xor = most ^ least
    return ((xor >> 32) ^ xor) & 0xFFFFFFFF


def topic_order(topic_ids: Iterable[uuid.UUID]) -> list[uuid.UUID]:
    """Topic ids as a ``new HashSet<>(collection)`` of them iterates."""
    ids = list(topic_ids)
    cap = 16
    while cap < int(len(ids) / 0.75) + 1:
        cap *= 2
    return sorted(ids, key=lambda t: _spread(uuid_hash(t)) & (cap - 1))


# -- uniform -------------------------------------------------------------------------------------


def _count(spec: GroupSpec, topic_id: uuid.UUID) -> int:
    count = spec.partition_counts.get(topic_id)
    if count is None:
        raise PartitionAssignorError(
            f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata.")
    return count


def uniform(spec: GroupSpec) -> dict[str, Assignment]:
    if not spec.members:
        return {}
    if spec.homogeneous:
        return _uniform_homogeneous(spec)
    return _uniform_heterogeneous(spec)


def _uniform_homogeneous(spec: GroupSpec) -> dict[str, Assignment]:
    first = next(iter(spec.members.values()))
    topics = topic_order(first.subscribed_topic_ids)
    if not topics:
        return {}
    owned = {(t, p) for m in spec.members.values() for t, ps in m.assignment.items() for p in ps}
    unassigned: list[tuple[uuid.UUID, int]] = []
    total = 0
    for t in topics:
        count = _count(spec, t)
        unassigned += [(t, p) for p in range(count) if (t, p) not in owned]
        total += count
    n = len(spec.members)
    quota_min, extra = divmod(total, n)
    out: dict[str, Assignment] = {}
    unfilled: list[tuple[str, int]] = []
    subscribed = set(topics)
    for member_id, member in spec.members.items():
        quota = quota_min
        if extra > 0:
            quota, extra = quota + 1, extra - 1
        new: dict[uuid.UUID, set[int]] = {}
        for t, ps in member.assignment.items():
            if t not in subscribed:
                continue  # the whole topic goes
            if len(ps) <= quota:
                quota -= len(ps)
                new[t] = set(ps)
                continue
            keep = set()
            for p in sorted(ps):
                if quota > 0:
                    quota -= 1
                    keep.add(p)
                else:
                    unassigned.append((t, p))
            if keep:
                new[t] = keep
        if quota > 0:
            unfilled.append((member_id, quota))
        out[member_id] = {t: frozenset(ps) for t, ps in new.items()}
    i = 0
    for member_id, quota in unfilled:
        grown = {t: set(ps) for t, ps in out[member_id].items()}
        for _ in range(quota):
            if i >= len(unassigned):
                break
            t, p = unassigned[i]
            i += 1
            grown.setdefault(t, set()).add(p)
        out[member_id] = {t: frozenset(ps) for t, ps in grown.items()}
    if i < len(unassigned):
        raise PartitionAssignorError("Partitions were left unassigned")
    return out


def _uniform_heterogeneous(spec: GroupSpec) -> dict[str, Assignment]:
    """Per topic, its partitions balanced over its subscribers, keeping current owners where the
    balance allows; topics with fewer subscribers first (they have fewer places to go)."""
    order = list(spec.members)
    held: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in order}
    load = dict.fromkeys(order, 0)
    topics = {t for m in spec.members.values() for t in m.subscribed_topic_ids}
    subscribers = {t: [m for m in order if t in spec.members[m].subscribed_topic_ids] for t in topics}
    for t in sorted(topics, key=lambda t: (len(subscribers[t]), str(t))):
        count = _count(spec, t)
        members = subscribers[t]
        # Each subscriber's fair share of this topic, given what it already carries elsewhere.
        kept: dict[str, list[int]] = {m: sorted(p for p in spec.members[m].assignment.get(t, ()) if p < count)
                                      for m in members}
        taken = {p for ps in kept.values() for p in ps}
        free = [p for p in range(count) if p not in taken]
        base, extra = divmod(count, len(members))
        ranked = sorted(members, key=lambda m: (load[m], order.index(m)))
        quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(ranked)}
        for m in members:
            surplus = kept[m][quota[m]:]
            kept[m] = kept[m][:quota[m]]
            free += surplus
        free.sort()
        for m in ranked:
            while len(kept[m]) < quota[m] and free:
                kept[m].append(free.pop(0))
        for m in members:
            if kept[m]:
                held[m][t] = set(kept[m])
                load[m] += len(kept[m])
    return {m: {t: frozenset(ps) for t, ps in held[m].items()} for m in order}


# -- range ---------------------------------------------------------------------------------------


def _range_order(spec: GroupSpec) -> list[str]:
    """Static members first, by instance id; then dynamic ones by member id."""
    def key(member_id: str) -> tuple[int, str]:
        instance = spec.members[member_id].instance_id
        return (0, instance) if instance is not None else (1, member_id)
    return sorted(spec.members, key=key)


def range_(spec: GroupSpec) -> dict[str, Assignment]:
    if not spec.members:
        return {}
    members = _range_order(spec)
    topics: dict[uuid.UUID, list[str]] = {}
    for m in members:
        for t in spec.members[m].subscribed_topic_ids:
            topics.setdefault(t, []).append(m)
    out: dict[str, Assignment] = {m: {} for m in members}
    for t, subscribers in topics.items():
        count = _count(spec, t)
        quota, extra = divmod(count, len(subscribers))
        start = 0
        for m in subscribers:
            n = quota + (1 if extra > 0 else 0)
            extra -= 1 if extra > 0 else 0
            end = min(start + n, count)
            if start < end:
                out[m][t] = frozenset(range(start, end))
            start = end
    return out


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}
# Kafka's class names for group.consumer.assignors, and their short names.
CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def parse_assignors(value: str) -> list[str]:
    """``group.consumer.assignors``: names or Kafka's class names, the first the default."""
    out = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        name = CLASS_NAMES.get(item, item)
        if name not in ASSIGNORS:
            raise ValueError(f"unknown consumer group assignor {item!r} (eoslog has: {', '.join(ASSIGNORS)})")
        out.append(name)
    if not out:
        raise ValueError("group.consumer.assignors lists no assignor")
    return out

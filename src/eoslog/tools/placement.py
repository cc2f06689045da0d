"""Where replicas should be: a proposal that evens replicas and leaders per broker (and spreads
each partition over racks) with the fewest moves. Pure: it takes the current assignment and
returns a new one; ``eoslog partitions reassign --generate/--remove-broker`` and ``eoslog cluster
rebalance`` show and execute what it proposes (``tools/reassign.py``).

Kafka's own ``--generate`` places every partition afresh (AdminUtils.assignReplicasToBrokers
from a random start), which moves most replicas even when one broker was added; like Cruise
Control's and Redpanda's balancers this moves only what it must:

1. a replica on a broker that is not to be used (one being removed) moves;
2. while a partition has two replicas in one rack and a rack it does not use has a broker, one
   of them moves there (KIP-36: a rack's loss takes one replica of a partition at most);
3. while some broker holds more replicas than its even share (the total over the brokers,
   rounded up), one replica moves from the fullest broker to the emptiest one that holds none
   of that partition and keeps its racks spread;
4. leaders (the preferred replica, listed first) are evened by reordering replicas within a
   partition, which moves no data: the first replica changes place with another of the same
   partition on a broker that leads fewer than its share.

Every move is one replica copied; step 3 makes only the moves needed to bring the fullest
brokers down to their share (each move lowers the excess by one), preferring the smallest
partitions when their sizes are given.

Racks are the controller's (``rack_of``): the brokers without a ``broker.rack`` are one rack
together, so a proposal spreads partitions as CreateTopics places them (Kafka 4.4's
StripedReplicaPlacer). Which racks to use is ``racks_to_use``: as kafka-reassign-partitions.sh
``--generate`` (ReassignPartitionsCommand.getBrokerMetadata), a mix of brokers with and without a
rack is refused unless rack awareness is turned off (``--disable-rack-aware``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping

from eoslog.client.types import TopicPartition
from eoslog.types import rack_of as _rack

Assignment = dict[TopicPartition, tuple[int, ...]]

NOT_ALL_BROKERS_HAVE_RACKS = ("Not all brokers have rack information. Add --disable-rack-aware in command line "
                              "to make replica assignment without rack information.")  # Kafka's, word for word


def racks_to_use(racks: Mapping[int, str | None], brokers: Collection[int], rack_aware: bool = True
                 ) -> dict[int, str | None]:
    """The racks of the registered ``brokers`` a proposal may use (``racks``: every registered
    broker's), None for each without rack awareness; ValueError with Kafka's message when some
    of them have a rack and others not."""
    use = {b: (racks[b] or None) if rack_aware else None for b in brokers if b in racks}
    rackless = sum(r is None for r in use.values())
    if rack_aware and 0 < rackless < len(use):
        raise ValueError(NOT_ALL_BROKERS_HAVE_RACKS)
    return use


def propose(current: Mapping[TopicPartition, tuple[int, ...]], brokers: Collection[int],
            racks: Mapping[int, str | None] | None = None,
            sizes: Mapping[TopicPartition, int] | None = None) -> Assignment:
    """The assignment to move to; partitions that need no change keep their replica lists."""
    use = sorted(set(brokers))
    if not use:
        raise ValueError("no broker to place replicas on")
    factor = max((len(r) for r in current.values()), default=0)
    if factor > len(use):
        raise ValueError(f"replication factor {factor} is larger than the {len(use)} brokers to use")
    racks = dict(racks or {})
    size = dict(sizes or {})
    plan = {tp: list(r) for tp, r in current.items()}
    load = Counter({b: 0 for b in use})
    for replicas in plan.values():
        load.update(r for r in replicas if r in load)
    order = sorted(plan, key=lambda tp: (size.get(tp, 0), tp))  # smallest partitions move first

    def rack_ok(replicas: list[int], broker: int, leaving: int) -> bool:
        """Would ``broker`` (replacing ``leaving``) keep the partition on distinct racks, as far
        as the racks in use allow?"""
        others = {_rack(racks, r) for r in replicas if r != leaving}
        return _rack(racks, broker) not in others or len({_rack(racks, b) for b in use}) <= len(others)

    def destination(replicas: list[int], leaving: int) -> int | None:
        candidates = [b for b in use if b not in replicas and rack_ok(replicas, b, leaving)]
        candidates = candidates or [b for b in use if b not in replicas]
        return min(candidates, key=lambda b: (load[b], b), default=None)

    def move(tp: TopicPartition, leaving: int, to: int) -> None:
        replicas = plan[tp]
        replicas[replicas.index(leaving)] = to
        load[to] += 1
        if leaving in load:
            load[leaving] -= 1

    # 1. off the brokers not to be used
    for tp in order:
        for r in [r for r in plan[tp] if r not in load]:
            to = destination(plan[tp], r)
            if to is None:
                raise ValueError(f"{tp.topic}-{tp.partition}: no broker left for a replica of {r}")
            move(tp, r, to)
    # 2. spread each partition over racks
    rack_count = len({_rack(racks, b) for b in use})
    for tp in order:
        replicas = plan[tp]
        per_rack = Counter(_rack(racks, r) for r in replicas)
        for r in sorted(replicas, key=lambda b: -load[b]):
            if per_rack[_rack(racks, r)] > 1 and len(per_rack) < min(rack_count, len(replicas)):
                to = destination(replicas, r)
                if to is not None and _rack(racks, to) not in per_rack:
                    per_rack[_rack(racks, r)] -= 1
                    per_rack[_rack(racks, to)] += 1
                    move(tp, r, to)
    # 3. even the replica counts
    total = sum(load.values())
    share = -(-total // len(use))  # rounded up
    while True:
        fullest = max(use, key=lambda b: (load[b], -b))
        if load[fullest] <= share and load[fullest] - min(load.values()) <= 1:
            break
        moved = False
        for tp in order:
            if fullest in plan[tp]:
                to = destination(plan[tp], fullest)
                if to is not None and load[to] < load[fullest] - 1 and rack_ok(plan[tp], to, fullest):
                    move(tp, fullest, to)
                    moved = True
                    break
        if not moved:
            break
    # 4. even the leaders by reordering
    leaders = Counter({b: 0 for b in use})
    leaders.update(r[0] for r in plan.values() if r)
    lead_share = -(-len(plan) // len(use))
    for tp in sorted(plan):
        replicas = plan[tp]
        if not replicas or leaders[replicas[0]] <= lead_share:
            continue
        under = [b for b in replicas[1:] if leaders[b] < lead_share]
        if under:
            b = min(under, key=lambda x: (leaders[x], x))
            i = replicas.index(b)
            leaders[replicas[0]] -= 1
            leaders[b] += 1
            replicas[0], replicas[i] = replicas[i], replicas[0]
    return {tp: tuple(r) for tp, r in plan.items()}


def moves(current: Mapping[TopicPartition, tuple[int, ...]], target: Mapping[TopicPartition, tuple[int, ...]]
          ) -> dict[TopicPartition, tuple[int, ...]]:
    """The partitions whose replica list changes (order included) between the two."""
    return {tp: r for tp, r in target.items() if tuple(current.get(tp, ())) != tuple(r)}


def copies(current: Mapping[TopicPartition, tuple[int, ...]], target: Mapping[TopicPartition, tuple[int, ...]]) -> int:
    """How many replicas the move from ``current`` to ``target`` copies."""
    return sum(len(set(r) - set(current.get(tp, ()))) for tp, r in target.items())

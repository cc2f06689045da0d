"""Which replica a consumer should fetch from (KIP-392), as Kafka's ``replica.selector.class``
chooses it.

Kafka's two selectors: ``LeaderSelector`` (the default: always the leader) and
``RackAwareReplicaSelector``: the leader when the client names no rack, when no replica is in
its rack, or when the leader is; otherwise, of the replicas in its rack, the one with the
highest log end offset (then the one caught up most recently). The leader asks for each
consumer fetch of a client that can be redirected (Fetch v11+, with its ``rack_id``) and, when
the answer is another replica, answers that partition empty with ``preferred_read_replica``;
the client then fetches from that replica, which serves it up to its own high watermark (its
last stable offset for read_committed), as the leader would (``replica.partition``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderSelector"
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """Kafka's ReplicaView: a replica the fetch offset is within."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_caught_up_ms: int


# (the client's rack, the leader, every candidate replica including the leader) -> the one to read from
ReplicaSelector = Callable[[str, ReplicaView, Sequence[ReplicaView]], ReplicaView]


def leader_select(client_rack: str, leader: ReplicaView, replicas: Sequence[ReplicaView]) -> ReplicaView:
    return leader


def rack_aware_select(client_rack: str, leader: ReplicaView, replicas: Sequence[ReplicaView]) -> ReplicaView:
    if not client_rack:
        return leader
    same_rack = [r for r in replicas if r.rack == client_rack]
    if not same_rack or leader in same_rack:
        return leader
    return max(same_rack, key=lambda r: (r.log_end_offset, -r.time_since_caught_up_ms))


def selector_named(class_name: str) -> ReplicaSelector | None:
    """The selector ``replica.selector.class`` names; None when unset (Kafka's default: consumers
    are never redirected). Raises ValueError for a class eoslog does not have."""
    if not class_name:
        return None
    known: dict[str, ReplicaSelector] = {LEADER_SELECTOR: leader_select, RACK_AWARE_SELECTOR: rack_aware_select}
    if class_name not in known:
        raise ValueError(f"replica.selector.class {class_name!r}: eoslog has {sorted(known)}")
    return known[class_name]

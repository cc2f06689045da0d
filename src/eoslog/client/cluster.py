"""The client's metadata cache: brokers, topics, partition leaders, coordinators.

What it owns: the last Metadata response, in the shapes the producer asks for on its
hot paths (a topic's partition count, a partition's leader, the partitions a broker
leads), a version counter bumped on every update, and the flag "an update is needed"
that errors set. What it must never do: I/O — ``AioClient`` fetches metadata and feeds
``update()``; nothing here imports kio types beyond reading the response's fields.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, NamedTuple

TopicPartition = tuple[str, int]
NO_LEADER = -1


class BrokerAddress(NamedTuple):
    node_id: int
    host: str
    port: int


class TopicMetadata:
    """One topic: ``leaders[p]`` is partition p's leader node id (-1 while unknown)."""

    __slots__ = ("available", "error", "leader_epochs", "leaders", "name", "topic_id")

    def __init__(self, name: str, error: int, leaders: list[int], leader_epochs: list[int],
                 topic_id: uuid.UUID | None = None) -> None:
        self.name = name
        self.topic_id = topic_id  # Metadata v10+
        self.error = error
        self.leaders = leaders
        self.leader_epochs = leader_epochs
        # Partitions with a known leader, for keyless records (Java's availablePartitionsForTopic).
        self.available = [p for p, leader in enumerate(leaders) if leader >= 0]

    @property
    def num_partitions(self) -> int:
        return len(self.leaders)


class ClusterMetadata:
    def __init__(self, bootstrap: list[tuple[str, int]]) -> None:
        # Bootstrap servers get negative node ids until the first Metadata names the brokers.
        self.bootstrap = [BrokerAddress(-1 - i, h, p) for i, (h, p) in enumerate(bootstrap)]
        self.brokers: dict[int, BrokerAddress] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.topic_errors: dict[str, int] = {}
        self.cluster_id: str | None = None
        self.controller_id = -1
        self.version = 0
        self.last_update = 0.0  # time.monotonic() of the last successful update
        self.need_update = True
        self._by_node: dict[int, list[TopicPartition]] = {}

    # -- queries (hot paths) -------------------------------------------------------------

    def topic(self, name: str) -> TopicMetadata | None:
        return self.topics.get(name)

    def leader(self, tp: TopicPartition) -> int:
        t = self.topics.get(tp[0])
        if t is None or tp[1] >= len(t.leaders):
            return NO_LEADER
        return t.leaders[tp[1]]

    def topic_names_by_id(self) -> dict[uuid.UUID, str]:
        """Topic id → name (share groups name topics by id)."""
        return {t.topic_id: t.name for t in self.topics.values() if t.topic_id is not None}

    def partitions_for_node(self, node_id: int) -> list[TopicPartition]:
        return self._by_node.get(node_id, [])

    def broker(self, node_id: int) -> BrokerAddress | None:
        address = self.brokers.get(node_id)
        if address is None:
            for b in self.bootstrap:
                if b.node_id == node_id:
                    return b
        return address

    def known_nodes(self) -> list[BrokerAddress]:
        """Brokers from the last metadata, or the bootstrap servers before there is any."""
        return list(self.brokers.values()) or list(self.bootstrap)

    # -- updates ---------------------------------------------------------------------------

    def request_update(self) -> None:
        self.need_update = True

    def add_broker(self, node_id: int, host: str, port: int) -> None:
        """A broker learnt outside Metadata (a FindCoordinator answer)."""
        self.brokers.setdefault(node_id, BrokerAddress(node_id, host, port))

    def update(self, response: Any, requested: set[str] | None = None) -> None:
        """Replace the cache with a Metadata response (any version).

        Topics that were requested but came back with an error are dropped from
        ``topics`` and their error kept in ``topic_errors``.
        """
        self.brokers = {
            int(b.node_id): BrokerAddress(int(b.node_id), str(b.host), int(b.port))
            for b in response.brokers
        }
        self.cluster_id = getattr(response, "cluster_id", None)
        self.controller_id = int(getattr(response, "controller_id", -1))
        topics: dict[str, TopicMetadata] = {}
        errors: dict[str, int] = {}
        for t in response.topics:
            name = str(t.name)
            code = int(t.error_code)
            if code != 0 and not t.partitions:
                errors[name] = code
                continue
            count = max((int(p.partition_index) for p in t.partitions), default=-1) + 1
            leaders = [NO_LEADER] * count
            epochs = [-1] * count
            for p in t.partitions:
                i = int(p.partition_index)
                if int(p.error_code) == 0 or int(p.leader_id) >= 0:
                    leaders[i] = int(p.leader_id)
                epochs[i] = int(getattr(p, "leader_epoch", -1))
            topics[name] = TopicMetadata(name, code, leaders, epochs, getattr(t, "topic_id", None))
        self.topics = topics
        self.topic_errors = errors
        by_node: dict[int, list[TopicPartition]] = {}
        for t in topics.values():
            for p, leader in enumerate(t.leaders):
                if leader >= 0:
                    by_node.setdefault(leader, []).append((t.name, p))
        self._by_node = by_node
        self.version += 1
        self.last_update = time.monotonic()
        self.need_update = any(
            leader < 0 for t in topics.values() for leader in t.leaders
        ) or bool(requested and requested - topics.keys() - errors.keys())

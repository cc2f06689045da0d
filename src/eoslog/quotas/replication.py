"""Replication throttles (KIP-73), as Kafka's ReplicationQuotaManager applies them.

Each broker has two: the leader's, bounding the bytes it sends to followers
(``leader.replication.throttled.rate``), and the follower's, bounding what it fetches
(``follower.replication.throttled.rate``), both dynamic broker configs in bytes/s. Only the
replicas a topic names are throttled: ``leader.replication.throttled.replicas`` lists
``partition:broker`` pairs whose broker leads (or may lead) the partition,
``follower.replication.throttled.replicas`` those whose broker follows it (or ``*`` for every
replica). A replica in the ISR is never held back, so a throttle cannot starve the acks=all
writes: it slows only replicas that are catching up (a reassignment's new ones, a broker
rebuilding its disk).

Measured as Kafka measures (``replication.quota.window.num`` windows of
``replication.quota.window.size.seconds``, ``rate.SampledRate``); when the measured rate is above
the bound, a leader leaves throttled partitions out of its answer to a follower's fetch and a
follower leaves them out of its fetch, until the rate falls back below.
"""

from __future__ import annotations

from collections.abc import Callable

from eoslog.quotas.rate import SampledRate

UNLIMITED = 2**63 - 1  # Kafka's Long.MAX_VALUE: no throttle
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"


def throttled_partitions(value: str, broker_id: int) -> frozenset[int] | None:
    """Kafka's parseThrottledPartitions: the partitions a ``*.replication.throttled.replicas``
    value throttles on ``broker_id``; None for every partition (``*``)."""
    items = [i.strip() for i in value.split(",") if i.strip()]
    if items == ["*"]:
        return None
    out = set()
    for item in items:
        partition, _, broker = item.partition(":")
        if broker.strip() == str(broker_id):
            out.add(int(partition))
    return frozenset(out)


class ReplicationQuota:
    """One direction's throttle on this broker."""

    def __init__(self, broker_id: int, bound: int, clock_ms: Callable[[], int],
                 num: int = 11, window_ms: int = 1000) -> None:
        self.broker_id = broker_id
        self.bound = bound
        self.clock_ms = clock_ms
        self.rate = SampledRate(num, window_ms)
        self._parsed: dict[str, frozenset[int] | None] = {}
        self.throttled_bytes = 0  # every byte recorded, for the metrics

    def update_bound(self, bound: int) -> None:
        self.bound = bound

    def is_throttled(self, replicas_value: str, partition: int) -> bool:
        """Does the topic's ``*.replication.throttled.replicas`` value throttle ``partition``
        on this broker?"""
        if not replicas_value:
            return False
        if replicas_value not in self._parsed:
            if len(self._parsed) > 1000:  # one entry per distinct value: bounded anyway
                self._parsed.clear()
            self._parsed[replicas_value] = throttled_partitions(replicas_value, self.broker_id)
        parsed = self._parsed[replicas_value]
        return parsed is None or partition in parsed

    def is_exceeded(self) -> bool:
        return self.bound < UNLIMITED and self.rate.measure(self.clock_ms()) > self.bound

    def record(self, size: int) -> None:
        if size > 0:
            self.rate.record(size, self.clock_ms())
            self.throttled_bytes += size

"""Per-topic traffic counters of the replica layer (Kafka's BrokerTopicStats).

Plain integers bumped on the produce and fetch paths, one dict update per partition of a
request; ``eoslog.metrics`` turns them into Prometheus counters when it is scraped, so the
hot path never touches a metrics library.
"""

from __future__ import annotations

from collections import defaultdict


class TopicStats:
    """Kafka's BytesInPerSec, MessagesInPerSec, BytesOutPerSec, ReplicationBytesOutPerSec and
    FailedProduceRequestsPerSec, per topic, as totals since start-up."""

    def __init__(self) -> None:
        self.bytes_in: defaultdict[str, int] = defaultdict(int)
        self.messages_in: defaultdict[str, int] = defaultdict(int)
        self.bytes_out: defaultdict[str, int] = defaultdict(int)
        self.replication_bytes_out: defaultdict[str, int] = defaultdict(int)
        self.failed_produce: defaultdict[str, int] = defaultdict(int)

    def appended(self, topic: str, size: int, messages: int) -> None:
        self.bytes_in[topic] += size
        self.messages_in[topic] += messages

    def fetched(self, topic: str, size: int, follower: bool) -> None:
        if size:
            (self.replication_bytes_out if follower else self.bytes_out)[topic] += size

    def forget(self, topic: str) -> None:
        """A deleted topic's series go (Kafka removes its BrokerTopicMetrics)."""
        for counts in (self.bytes_in, self.messages_in, self.bytes_out, self.replication_bytes_out,
                       self.failed_produce):
            counts.pop(topic, None)

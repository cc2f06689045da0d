"""Per-topic traffic counters of the replica layer (Kafka's BrokerTopicStats).

Plain integers bumped on the produce and fetch paths, one dict update per partition of a
request; ``eoslog.metrics`` turns them into Prometheus counters when it is scraped, so the
hot path never touches a metrics library.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from eoslog.stats import LatencyHistogram

ISOLATION_NAMES = ("read_uncommitted", "read_committed")  # by the protocol's isolation_level


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


class FetchWaitStats:
    """Consumer fetches that waited in the fetch purgatory (Kafka's DelayedFetchMetrics), per
    isolation level, so that one can see what ends a wait: ``woken`` — an append notified the
    partition and the fetch answered with records (for read_committed, records become readable
    only when the last stable offset passes them: a marker's append), with the time from that
    notification to the answer; ``expired`` — max_wait_ms passed first (Kafka's ExpiresPerSec);
    ``not_readable`` — an append notified it but nothing became readable (a transaction's own
    records, above the LSO), so it waited again."""

    def __init__(self) -> None:
        self.outcomes: Counter[tuple[str, str]] = Counter()  # (isolation, outcome) → waits
        self.wake_delay = {name: LatencyHistogram() for name in ISOLATION_NAMES}

    def woken(self, isolation: int, seconds: float) -> None:
        name = ISOLATION_NAMES[isolation]
        self.outcomes[name, "woken"] += 1
        self.wake_delay[name].observe(seconds)

    def ended(self, isolation: int, outcome: str) -> None:
        self.outcomes[ISOLATION_NAMES[isolation], outcome] += 1

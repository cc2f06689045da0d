"""Each topic's Metadata entry kept encoded (issue 28): at 5,000 partitions a full Metadata
request spent ~90 % of its time describing and encoding the same entries again (61 ms against
Kafka's 11).

An entry is kept per response version for the topic's version (``MetadataSupport.topic_version``)
and the authorized-operations value it carries: any change a Metadata response could show — a
new leader, ISR or leader epoch, a broker gone, partitions added, the topic deleted or made
again — gives the topic a new version, and its entry is described and encoded again at the next
request that includes it. What differs per request stays out of the cache: which topics the
principal may describe (checked before an entry is looked up), the brokers at the addresses of
the request's listener, the throttle time.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

from eoslog.broker.metadata_support import MetadataSupport, TopicDescription
from eoslog.errors import Errors


@dataclass(frozen=True, slots=True)
class EncodedTopic:
    """A topic's entry of a Metadata response, encoded for one version."""

    version: Hashable  # the topic's, when it was encoded
    operations: int  # its topic_authorized_operations
    data: bytes
    error_codes: tuple[int, ...]  # its partitions' non-zero error codes (the request metrics)


class TopicEntries:
    """The encoded entries of one broker's topics (``BrokerState.metadata_entries``)."""

    def __init__(self) -> None:
        self._entries: dict[tuple[int, str], EncodedTopic] = {}
        self._prune_at = 1024

    def entry(self, support: MetadataSupport, api_version: int, name: str, operations: int,
              encode: Callable[[TopicDescription], bytes]) -> EncodedTopic | None:
        """``name``'s entry as Metadata ``api_version`` answers it with ``operations``: the kept
        one while the topic is unchanged, else ``encode(description)`` (kept for later); None
        when there is no such topic."""
        version = support.topic_version(name)
        if version is None:
            return None
        key = (api_version, name)
        kept = self._entries.get(key)
        if kept is not None and kept.version == version and kept.operations == operations:
            return kept
        # Read on the same turn of the event loop as the version: they describe one state.
        topic = support.describe_topic(name)
        if topic is None:
            return None
        errors = tuple(p.error.value for p in topic.partitions if p.error is not Errors.NONE)
        encoded = self._entries[key] = EncodedTopic(version, operations, encode(topic), errors)
        if len(self._entries) > self._prune_at:
            self._prune(support)
        return encoded

    def _prune(self, support: MetadataSupport) -> None:
        """Forget the entries of topics that are gone (deleted topics would otherwise stay)."""
        self._entries = {key: e for key, e in self._entries.items() if support.topic_version(key[1]) is not None}
        self._prune_at = max(1024, 2 * len(self._entries))

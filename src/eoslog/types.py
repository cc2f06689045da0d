"""Small domain values every layer below the protocol shares (Kafka's ``common``)."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """One partition of a topic (a plain ``(topic, partition)`` tuple where storage keys by it)."""

    topic: str
    partition: int

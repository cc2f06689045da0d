"""Small domain values every layer below the protocol shares (Kafka's ``common``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple


class TopicPartition(NamedTuple):
    """One partition of a topic (a plain ``(topic, partition)`` tuple where storage keys by it)."""

    topic: str
    partition: int


OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_GROUP_STATE_TOPIC = "__share_group_state"
# Kafka's Topic.isInternal: reported internal by Metadata, and clients may not produce to them.
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC})
# Kafka's AdminUtils.ADMIN_CLIENT_ID: the one client id whose Produce may write internal topics.
ADMIN_CLIENT_ID = "__admin_client"

# The brokers without a broker.rack, one rack together (never a rack's name), as Kafka 4.4's
# StripedReplicaPlacer keys them: the controller's placement and the tools' proposals agree on it.
NO_RACK = ""


def rack_of(racks: Mapping[int, str | None], broker: int) -> str:
    """``broker``'s rack for placing replicas: its ``broker.rack``, or ``NO_RACK``."""
    return racks.get(broker) or NO_RACK

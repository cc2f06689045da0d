"""A share consumer (KIP-932): several members of one share group read the same partitions, each
record handed to one of them at a time and acknowledged one by one (Kafka as a queue).
``consumer.ShareConsumer`` / ``AIOShareConsumer`` are the API; ``membership`` the group
heartbeats; ``fetcher`` the share sessions, fetches and acknowledgements; ``config`` the settings."""

from eoslog.client.share.consumer import AcknowledgeType, AIOShareConsumer, ShareConsumer
from eoslog.client.share.fetcher import ShareRecord

__all__ = ["AIOShareConsumer", "AcknowledgeType", "ShareConsumer", "ShareRecord"]

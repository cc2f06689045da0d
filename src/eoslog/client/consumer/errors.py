"""The consumer's client-side exceptions (broker error codes are in ``eoslog.client.errors``)."""

from __future__ import annotations

from eoslog.client.errors import KafkaError


class CommitFailedError(KafkaError):
    """The commit cannot complete because the group has rebalanced and the partitions were
    given to another member (Java's CommitFailedException): the member was removed or its
    generation is over. The consumer rejoins on its next poll."""


class NoOffsetForPartitionError(KafkaError):
    """A partition has no committed offset and ``auto.offset.reset`` is ``none``."""


class OffsetOutOfRangeNoResetError(KafkaError):
    """A fetch position is out of range and ``auto.offset.reset`` is ``none`` (Java's
    OffsetOutOfRangeException); ``seek`` to a valid offset to go on."""

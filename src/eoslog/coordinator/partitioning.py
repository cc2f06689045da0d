"""Which partition of a coordinator's internal topic owns a key.

Kafka maps a group id to its ``__consumer_offsets`` partition and a transactional id to
its ``__transaction_state`` partition the same way: ``Utils.abs(key.hashCode) % partitions``
with Java's ``String.hashCode``. Clients and tools rely on the same answer.
"""

from __future__ import annotations

from eoslog.javahash import java_string_hash

__all__ = ["coordinator_partition_for", "java_string_hash"]


def coordinator_partition_for(key: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode) % num_partitions`` (abs(Integer.MIN_VALUE) is 0)."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions

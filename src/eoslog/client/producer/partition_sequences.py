"""One partition's idempotence bookkeeping (Java's TxnPartitionEntry): the producer id and
epoch its sequences belong to, the next sequence, the last acknowledged one, and the batches
in flight by base sequence. The transaction manager keeps one per partition written to."""

from __future__ import annotations

import bisect

from eoslog.client.producer.batch import ProducerBatch
from eoslog.client.producer.txn_state import ProducerIdAndEpoch

NO_LAST_ACKED = -1


class PartitionSequences:
    """Java's TxnPartitionEntry: one partition's sequence numbers."""

    __slots__ = ("in_flight", "last_acked_offset", "last_acked_sequence", "next_sequence", "on_wire", "producer")

    def __init__(self, producer: ProducerIdAndEpoch) -> None:
        self.producer = producer  # the id and epoch these sequences belong to
        self.next_sequence = 0
        self.last_acked_sequence = NO_LAST_ACKED
        self.last_acked_offset = -1
        self.in_flight: list[ProducerBatch] = []  # sent and not completed, by base sequence
        self.on_wire = 0  # of those, in a request not answered yet

    def add_in_flight(self, batch: ProducerBatch) -> None:
        bisect.insort(self.in_flight, batch, key=lambda b: b.base_sequence)

    def remove_in_flight(self, batch: ProducerBatch) -> None:
        if batch in self.in_flight:
            self.in_flight.remove(batch)

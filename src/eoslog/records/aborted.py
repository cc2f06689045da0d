"""Which batches of a read_committed read belong to aborted transactions (Kafka's
``CompletedFetch`` filter), shared by the consumer and the share-partition leader.

A fetch answers, for the range it read, (producer id, first offset) of each aborted
transaction. Walking the batches in offset order: before each batch of a producer, every
aborted transaction starting at or before the batch's last offset moves into the set of
aborted producer ids; a transactional batch of a producer in that set is skipped; the
producer's ABORT marker takes it out of the set again.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Iterable

from eoslog.records.batch import BatchHeader, ControlRecordType, decode_record_fields

_CONTROL_KEY = struct.Struct(">hh")  # version, type


def control_type(data: bytes, pos: int) -> ControlRecordType | None:
    """The type of the control batch at ``pos``; None for a type this code does not know."""
    _, records = decode_record_fields(data, pos)
    key = records[0][2] if records else None
    if key is None or len(key) < _CONTROL_KEY.size:
        return None
    try:
        return ControlRecordType(_CONTROL_KEY.unpack_from(key)[1])
    except ValueError:
        return None  # an unknown control type (KIP-890's markers come later): not an abort


class AbortedTransactions:
    __slots__ = ("_heap", "_pids")

    def __init__(self, aborted: Iterable[tuple[int, int]]) -> None:
        """``aborted``: (producer id, first offset) of each aborted transaction of the read."""
        self._heap: list[tuple[int, int]] = [(first, pid) for pid, first in aborted]
        heapq.heapify(self._heap)
        self._pids: set[int] = set()

    def skips(self, h: BatchHeader, data: bytes, pos: int) -> bool:
        """Whether the data batch ``h`` (at ``pos`` of ``data``) is of an aborted transaction;
        called for every batch in offset order (control batches too: an ABORT marker ends one)."""
        if h.producer_id < 0:
            return False
        heap = self._heap
        while heap and heap[0][0] <= h.last_offset:
            self._pids.add(heapq.heappop(heap)[1])
        if h.is_control:
            if control_type(data, pos) == ControlRecordType.ABORT:
                self._pids.discard(h.producer_id)
            return False
        return h.is_transactional and h.producer_id in self._pids

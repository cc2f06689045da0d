"""The transaction markers of a partition, read over the wire (Fetch, read_uncommitted), and
what transaction version 2 promises of them: each transaction of a producer ends under an epoch
above the one before (EndTxn v5 bumps it; KIP-890 part 2), where version 1 ends a producer's
transactions under one epoch until it is re-initialized.

Works against any broker (eoslog or Kafka, single node or the partition's leader in a cluster).
"""

from __future__ import annotations

from itertools import pairwise
from typing import NamedTuple

from eoslog.records import iter_batch_headers
from eoslog.records.batch import InvalidRecordError, control_marker
from support.rawkafka import RawClient, fetch_request


class Marker(NamedTuple):
    offset: int
    producer_id: int
    producer_epoch: int
    commit: bool
    batches_before: int  # the producer's data batches since its previous marker in the partition


def transaction_markers(bootstrap: str, topic: str, partition: int) -> list[Marker]:
    """Every COMMIT/ABORT marker of the partition up to its high watermark, in offset order."""
    markers: list[Marker] = []
    batches: dict[int, int] = {}
    offset = 0
    with RawClient(bootstrap) as client:
        while True:
            answer = client.call(fetch_request(topic, partition, offset, max_bytes=8 << 20))
            part = answer.responses[0].partitions[0]
            assert int(part.error_code) == 0, f"{topic}-{partition}: fetch error {int(part.error_code)}"
            data = bytes(part.records or b"")
            start = offset
            try:
                for pos, h in iter_batch_headers(data):
                    if h.is_control:
                        commit, _ = control_marker(data[pos:pos + h.size])
                        markers.append(Marker(h.base_offset, h.producer_id, h.producer_epoch, commit,
                                              batches.pop(h.producer_id, 0)))
                    elif h.is_transactional:
                        batches[h.producer_id] = batches.get(h.producer_id, 0) + 1
                    offset = h.next_offset
            except InvalidRecordError:
                pass  # a fetch may end inside a batch (Kafka's do): the next one starts there
            if offset >= int(part.high_watermark):
                return markers
            assert offset > start, f"{topic}-{partition}: no progress at offset {offset}"


def by_producer(markers: list[Marker]) -> dict[int, list[Marker]]:
    out: dict[int, list[Marker]] = {}
    for m in markers:
        out.setdefault(m.producer_id, []).append(m)
    return out


def epochs_not_advancing(markers: list[Marker]) -> list[tuple[Marker, Marker]]:
    """Version 2 promises none: each of a producer's transactions ends under an epoch above the
    one before. (The same marker again with no write between is the coordinator writing it once
    more after a failover — it cannot know which markers had landed — as Kafka's does.)"""
    return [(a, b) for ms in by_producer(markers).values() for a, b in pairwise(ms)
            if not (a.producer_epoch < b.producer_epoch
                    or (b.batches_before == 0 and (a.producer_epoch, a.commit) == (b.producer_epoch, b.commit)))]


def epoch_reused(markers: list[Marker]) -> bool:
    """Version 1: some producer ended two transactions with writes, one after the other, under
    the same epoch."""
    return any(a.producer_epoch == b.producer_epoch and b.batches_before > 0
               for ms in by_producer(markers).values() for a, b in pairwise(ms))

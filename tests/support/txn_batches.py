"""Transactions of a librdkafka producer, some committed and some aborted, for tests that check
what read_committed reads. An aborted transaction's records are flushed before the abort, so they
are in the log (librdkafka drops from its queue what it has not sent when told to abort)."""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import Producer


def produce(p: Producer, topic: str, value: bytes, key: bytes | None = None,
            on_delivery: Callable[[object, object], None] | None = None) -> None:
    """One record to partition 0, waiting for room in the client's queue."""
    while True:
        try:
            p.produce(topic, value, key=key, partition=0, on_delivery=on_delivery)
            return
        except BufferError:
            p.poll(0.05)


def write_transactions(p: Producer, topic: str, transactions: int, per_transaction: int,
                       aborted: Callable[[int], bool], value: Callable[[int, int], bytes],
                       timeout_s: float = 120) -> int:
    """Transaction n (keys ``b"n-i"``) aborted when ``aborted(n)``, else committed: the number of
    records committed."""
    committed = 0
    for n in range(transactions):
        p.begin_transaction()
        for i in range(per_transaction):
            produce(p, topic, value(n, i), key=b"%d-%d" % (n, i))
        if aborted(n):
            assert p.flush(timeout_s) == 0
            p.abort_transaction(timeout_s)
        else:
            p.commit_transaction(timeout_s)
            committed += per_transaction
    return committed

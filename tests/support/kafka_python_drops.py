"""kafka-python 3.0.12's dropped transactional requests, seen from outside.

Its Sender drops a transactional request (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn) when sending it to the coordinator fails (the coordinator just died): it looks the
coordinator up again but never re-enqueues the request, and whatever waits for it waits
forever (KafkaProducer's commit_transaction and send_offsets_to_transaction have no timeout).
That state is plain and lasting: something awaits the coordinator while no transactional
request is queued, in flight or held by the Sender's send loop. Used by tests/support/txn_clients.py
and tests/chaos/copier.py, which give such a call up after DROPPED_FOR_S instead of waiting
out their hang guard (each call given up so, observed on to the guard, never returned)."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

DROPPED_FOR_S = 2.0  # seen in that state this long (sampled every ~0.2 s): the request was dropped


def request_dropped(producer: Any, awaiting: bool) -> bool:
    """Whether kafka-python's KafkaProducer ``producer`` is in the dropped state now. ``awaiting``:
    the caller waits for a transactional request's answer (init, offsets, commit, abort);
    partitions waiting to be added to the transaction are awaited anyway (by a flush, a
    commit). An EndTxn queued behind them does not count as queued: it waits for their
    batches, which wait for the AddPartitionsToTxn. In an error state the Sender discards
    requests on purpose and the caller gets the error: never a drop."""
    from kafka.producer.transaction_manager import EndTxnHandler

    tm = producer._transaction_manager
    with tm._lock:
        if tm.has_error():
            return False
        pending_partitions = bool(tm._pending_partitions_in_transaction)
        queued = [h for _, _, h in tm._pending_requests
                  if not (pending_partitions and isinstance(h, EndTxnHandler))]
        idle = not (queued or tm._new_partitions_in_transaction or tm.has_in_flight_transactional_request())
    return (awaiting or pending_partitions) and idle and not _holding_request(producer._sender)


def _holding_request(sender: threading.Thread) -> bool:
    """Whether kafka-python's Sender has taken a transactional request off the queue and is
    sending it (connecting to the coordinator can take request_timeout_ms)."""
    frame = sys._current_frames().get(sender.ident or -1)
    while frame is not None:
        if frame.f_code.co_name == "_maybe_send_pending_request":
            return frame.f_locals.get("next_request_handler") is not None
        frame = frame.f_back
    return False


class DropWatch:
    """Samples of ``request_dropped``; ``lasting`` once they said so for DROPPED_FOR_S in a row."""

    def __init__(self) -> None:
        self.since: float | None = None

    def lasting(self, dropped: bool) -> bool:
        now = time.monotonic()
        self.since = (now if self.since is None else self.since) if dropped else None
        return self.since is not None and now - self.since >= DROPPED_FOR_S

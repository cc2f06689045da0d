"""The upstream service: writes payment events to ``payments`` in transactions.

It uses eoslog's transactional producer (``eoslog.client.Producer``). Each transaction
holds a few dozen events; a share of the transactions is aborted on purpose after its
records are already in the log (the service "failed half-way") and then retried as a new
transaction — so a reader that let aborted records through would count those payments
twice. The last transaction carries the end-of-stream event.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field

from eoslog.client.producer import Producer
from payments.events import Event

TRANSACTIONAL_ID = "payments-upstream"


@dataclass
class UpstreamStats:
    total: int
    sent: int = 0  # events in committed transactions
    committed_txns: int = 0
    aborted_txns: int = 0
    aborted_records: int = 0
    done: bool = False
    error: BaseException | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


class Upstream(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, events: list[Event], *, txn_size: int, abort_share: float,
                 seconds: float, seed: int) -> None:
        super().__init__(name="payments-upstream", daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
        self.events = events
        self.txn_size = txn_size
        self.abort_share = abort_share
        # Pace the transactions over about this many seconds: a live stream, not a bulk load.
        self.pause_s = seconds / max(1, len(events) // txn_size)
        self.rng = random.Random(seed + 1)
        self.stats = UpstreamStats(total=len(events))

    def run(self) -> None:
        try:
            self._run()
        except BaseException as e:  # reported by the pipeline
            self.stats.error = e
        finally:
            self.stats.done = True

    def _run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": TRANSACTIONAL_ID,
                             "client.id": "payments-upstream", "linger.ms": 5})
        try:
            producer.init_transactions(30)
            for start in range(0, len(self.events), self.txn_size):
                chunk = self.events[start : start + self.txn_size]
                if self.rng.random() < self.abort_share:
                    self._transaction(producer, chunk, commit=False)
                self._transaction(producer, chunk, commit=True)
                time.sleep(self.pause_s)
        finally:
            producer.close(30)

    def _transaction(self, producer: Producer, chunk: list[Event], *, commit: bool) -> None:
        producer.begin_transaction()
        for event in chunk:
            producer.send(self.topic, value=event.value, key=event.key)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.flush(30)  # the records reach the log; the ABORT marker hides them
            producer.abort_transaction(30)
        with self.stats.lock:
            if commit:
                self.stats.committed_txns += 1
                self.stats.sent += len(chunk)
            else:
                self.stats.aborted_txns += 1
                self.stats.aborted_records += len(chunk)

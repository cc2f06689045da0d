"""An idempotent acks=all producer (eoslog.client) writing numbered records to one partition
until stopped, every acknowledged record entered in a history (tests/support/history.py) for
the checker: the load a test keeps on a cluster while it changes it."""

from __future__ import annotations

import threading

from eoslog.client import Producer
from support.cluster_harness import Cluster
from support.history import OK, History


class Writer:
    """An idempotent acks=all producer writing numbered records to one partition until stopped;
    every acknowledged record goes into the history."""

    def __init__(self, cluster: Cluster, topic: str, history: History, partition: int = 0) -> None:
        self.cluster, self.topic, self.history, self.partition = cluster, topic, history, partition
        self.sent = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._guarded, daemon=True)

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(120)
        if self.error is not None:
            raise AssertionError(f"the writer to {self.topic} failed: {self.error!r}") from self.error

    def _guarded(self) -> None:
        try:
            self._run()
        except BaseException as e:  # the test reports it (an acks=all idempotent write must succeed)
            self.error = e

    def _run(self) -> None:
        with Producer({"bootstrap.servers": self.cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                       "linger.ms": 5, "delivery.timeout.ms": 120000}) as producer:
            while not self._stop.is_set():
                batch = [b"%s-%d" % (self.topic.encode(), self.sent + i) for i in range(50)]
                futures = [(v, producer.send(self.topic, v, partition=self.partition)) for v in batch]
                producer.flush(120)
                for value, future in futures:
                    future.result(0)  # acks=all, idempotent: every one must be acknowledged
                    self.history.send(value, OK)
                self.sent += len(batch)

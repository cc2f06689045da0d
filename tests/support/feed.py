"""Numbered records ("0", "1", ...) written to a topic by librdkafka (idempotent), keyed over its
partitions, until stopped: the input of the group tests that check every record is consumed once."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Producer


class Feed:
    def __init__(self, bootstrap: str, topic: str, first: int = 0) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
        self.topic = topic
        self.sent = first
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            self.producer.produce(self.topic, str(self.sent).encode(), key=str(self.sent).encode())
            self.sent += 1
            self.producer.poll(0)
            time.sleep(0.004)
        assert self.producer.flush(60) == 0, "records of the feed not written"

    def start(self) -> Feed:
        self.thread.start()
        return self

    def close(self) -> int:
        """Stop; the number of records written (every one acknowledged)."""
        self.stop.set()
        self.thread.join(90)
        return self.sent

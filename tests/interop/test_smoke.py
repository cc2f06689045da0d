"""The smallest proof: librdkafka produces and consumes through a real broker."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition


def test_confluent_roundtrip(broker) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for i in range(100):
        p.produce("smoke", key=b"k%d" % i, value=b"v%d" % i, headers=[("n", str(i).encode())])
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "smoke",
                  "enable.auto.commit": False})
    c.assign([TopicPartition("smoke", 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 100 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append((m.offset(), m.key(), m.value(), m.headers()))
    c.close()
    assert [g[0] for g in got] == list(range(100))
    assert all(g[1] == b"k%d" % i and g[2] == b"v%d" % i and g[3] == [("n", str(i).encode())]
               for i, g in enumerate(got))

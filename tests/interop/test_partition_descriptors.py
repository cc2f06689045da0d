"""Many partitions under a small descriptor limit (issue 28): a broker whose ``ulimit -n`` is
below its partition count — far below the three descriptors per partition (log, offset index,
time index) it once held for good — produces to and fetches from every partition, twice over (the
second time after the descriptor cache has evicted and must open segment files again), with
every record read back in order, never more than 1.2 descriptors per partition and no EMFILE.

Counted in /proc/PID/fd of the broker process (started under ``prlimit``, which execs it: the
same process id). Caught: the descriptor cache as it was before pinning (every evicted
descriptor closed on the loop's next turn) — one Fetch over the 300 partitions held all their
descriptors, hit EMFILE and took the log directory offline (records missing); mutant (not
committed) ``fd_cache._SHARE_OF_LIMIT`` = 4.0 (no eviction below the limit) — 168 records of the
first produce round undelivered.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from support.harness import BrokerProcess, wait_until

PARTITIONS = 300
LIMIT = 256  # below the partition count: one descriptor per partition held for good would not fit
TOPIC = "many"


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def soft_limit(pid: int) -> int:
    line = next(x for x in Path(f"/proc/{pid}/limits").read_text().splitlines() if x.startswith("Max open files"))
    return int(line.split()[3])


def produce_to_every_partition(bootstrap: str, round_: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    errors: list[str] = []
    for p in range(PARTITIONS):
        for i in range(2):
            producer.produce(TOPIC, f"{round_}-{p}-{i}".encode(), partition=p,
                             on_delivery=lambda err, _m: errors.append(str(err)) if err else None)
        producer.poll(0)
    assert producer.flush(60) == 0 and errors == []


def read_every_partition(bootstrap: str, rounds: int) -> dict[int, list[str]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "readers", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 50})
    consumer.assign([KafkaTopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    got: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    wanted = PARTITIONS * 2 * rounds
    deadline = time.monotonic() + 120
    n = 0
    while n < wanted and time.monotonic() < deadline:
        for m in consumer.consume(500, 0.5):
            if m.error() is None:
                got[m.partition()].append(m.value().decode())
                n += 1
    consumer.close()
    return got


def test_every_partition_is_served_under_a_descriptor_limit_below_one_per_partition(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", prefix=["prlimit", f"--nofile={LIMIT}:{LIMIT}", "--"]).start()
    try:
        assert broker.proc is not None
        pid = broker.proc.pid
        assert soft_limit(pid) == LIMIT
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(60)
        wait_until(lambda: len(admin.list_topics(TOPIC, timeout=30).topics[TOPIC].partitions) == PARTITIONS,
                   "every partition listed")
        before = open_descriptors(pid)
        most = before
        for round_ in range(2):
            produce_to_every_partition(broker.bootstrap, round_)
            most = max(most, open_descriptors(pid))
            got = read_every_partition(broker.bootstrap, round_ + 1)
            most = max(most, open_descriptors(pid))
            assert got == {p: [f"{r}-{p}-{i}" for r in range(round_ + 1) for i in range(2)]
                           for p in range(PARTITIONS)}, f"round {round_}: a record missing or out of order"
        assert most <= LIMIT
        assert (most - before) / PARTITIONS <= 1.2, f"{most - before} descriptors gained for {PARTITIONS} partitions"
        assert "Too many open files" not in broker.log_text()
    finally:
        broker.stop()

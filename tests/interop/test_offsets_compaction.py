"""Transactional offset commits (TxnOffsetCommit + COMMIT markers) do not make
``__consumer_offsets`` grow without bound: the log cleaner compacts committed transactional
records by key and drops markers whose transaction has no data left after
delete.retention.ms. The committed offsets survive a broker restart."""

from __future__ import annotations

from pathlib import Path

from clients import ensure_topic
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import TopicPartition as RdTopicPartition

from eoslog.client.producer import Producer
from support.harness import BrokerProcess, wait_until

SEGMENT_BYTES = 4096
COMMITS = 1500
GROUP, TOPIC = "bounded-offsets", "ctp-source"


def offsets_log_bytes(data_dir: Path) -> int:
    return sum(p.stat().st_size for p in data_dir.glob("__consumer_offsets-*/*.log"))


def committed(bootstrap: str) -> list[int]:
    c = RdConsumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        return [tp.offset for tp in c.committed([RdTopicPartition(TOPIC, p) for p in range(2)], timeout=30)]
    finally:
        c.close()


def test_transactional_offset_commits_stay_compacted(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = BrokerProcess(data, overrides={
        "offsets.topic.segment.bytes": str(SEGMENT_BYTES),
        "log.cleaner.backoff.ms": "100", "log.cleaner.delete.retention.ms": "100",
    }).start()
    try:
        ensure_topic(broker.bootstrap, TOPIC, 2)
        # Each AddOffsetsToTxn meets the previous commit's markers still being written
        # (CONCURRENT_TRANSACTIONS) and retries after retry.backoff.ms: 100 ms by default made
        # the 1500 transactions take ~130 s, 10 ms takes ~25 s (the cleaner sees the same log).
        with Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "bounded-offsets-1",
                       "retry.backoff.ms": 10}) as p:
            p.init_transactions()
            for i in range(1, COMMITS + 1):
                p.begin_transaction()
                p.send_offsets_to_transaction({(TOPIC, 0): i, (TOPIC, 1): 2 * i}, GROUP)
                p.commit_transaction()
        # Uncleaned, each transaction leaves two offset records and a marker (~40 KB per
        # hundred); cleaned, the last values, recent markers and the active segment remain.
        bound = 4 * SEGMENT_BYTES
        wait_until(lambda: offsets_log_bytes(data) <= bound,
                   f"__consumer_offsets cleaned below {bound} bytes", timeout_s=60)
        assert committed(broker.bootstrap) == [COMMITS, 2 * COMMITS]
        broker.stop()
        broker.start()
        assert committed(broker.bootstrap) == [COMMITS, 2 * COMMITS]
        # The producer's state survived too: the same transactional id commits again.
        with Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "bounded-offsets-1"}) as p:
            p.init_transactions()
            p.begin_transaction()
            p.send_offsets_to_transaction({(TOPIC, 0): COMMITS + 1}, GROUP)
            p.commit_transaction()
        assert committed(broker.bootstrap) == [COMMITS + 1, 2 * COMMITS]
    finally:
        if broker.alive():
            broker.stop()

"""DeleteRecords (API 21) through librdkafka's, kafka-python's, aiokafka's and eoslog's admin
clients against the real broker process.

Each client deletes the records before an offset of a topic written in small segments; the
effect is checked on the data, by other means than the client that deleted: ListOffsets
earliest answers the new start, a consumer reading from the beginning gets exactly the
records from it on, a fetch below it gets OFFSET_OUT_OF_RANGE, whole segment files below it
are gone from the data directory — and all of it again after a broker restart. Refusals
(an offset above the high watermark, a compacted topic) come back as Kafka's error codes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer as RdConsumer
from confluent_kafka import KafkaException, Producer
from confluent_kafka import TopicPartition as RdTopicPartition
from confluent_kafka.admin import AdminClient

from eoslog.client import Admin, Consumer, NewTopic, OffsetSpec, RecordsToDelete
from eoslog.client.consumer import OffsetOutOfRangeNoResetError
from eoslog.client.errors import OffsetOutOfRangeError, PolicyViolationError
from eoslog.client.types import TopicPartition
from support.harness import BrokerProcess, wait_until

TIMEOUT_S = 30.0
RECORDS = 40
CUT = 23  # delete the records before this offset
VALUE = b"x" * 200


def create_topic(broker: BrokerProcess, name: str, **configs: str) -> None:
    # ~10 records per segment, so the cut removes whole segments and leaves part of one.
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(name, 1, configs={"segment.bytes": "2600", **configs})])


def produce(broker: BrokerProcess, topic: str, n: int = RECORDS) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "acks": "all"})
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"%d:" % i + VALUE)
        p.poll(0)
        p.flush(TIMEOUT_S)  # one batch per record: predictable segment contents
    assert p.flush(TIMEOUT_S) == 0


def earliest(broker: BrokerProcess, topic: str) -> int:
    tp = TopicPartition(topic, 0)
    with Admin({"bootstrap.servers": broker.bootstrap}) as admin:
        return admin.list_offsets({tp: OffsetSpec.earliest()})[tp].offset


def read_all(broker: BrokerProcess, topic: str) -> list[tuple[int, bytes]]:
    """(offset, value) of every record librdkafka reads from the beginning."""
    c = RdConsumer({"bootstrap.servers": broker.bootstrap, "group.id": f"dr-{topic}",
                    "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([RdTopicPartition(topic, 0, -2)])  # OFFSET_BEGINNING: the log start offset
    out: list[tuple[int, bytes]] = []

    def more() -> bool:
        for m in c.consume(100, 0.2):
            assert m.error() is None, m.error()
            out.append((m.offset(), m.value()))
        return bool(out) and out[-1][0] == RECORDS - 1

    try:
        wait_until(more, f"librdkafka reading {topic} to its end")
    finally:
        c.close()
    return out


def fetch_below_start_fails(broker: BrokerProcess, topic: str, offset: int) -> bool:
    with Consumer({"bootstrap.servers": broker.bootstrap, "auto.offset.reset": "none"}) as c:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, offset)
        try:
            for _ in range(50):
                c.poll(0.2)
        except OffsetOutOfRangeNoResetError:
            return True
    return False


def segment_bases(broker: BrokerProcess, topic: str) -> list[int]:
    return sorted(int(p.stem) for p in (broker.data_dir / f"{topic}-0").glob("*.log"))


def check_cut(broker: BrokerProcess, topic: str, segments_before: list[int]) -> None:
    assert earliest(broker, topic) == CUT
    assert read_all(broker, topic) == [(o, b"%d:" % o + VALUE) for o in range(CUT, RECORDS)]
    assert fetch_below_start_fails(broker, topic, CUT - 1)
    kept = segment_bases(broker, topic)
    assert kept == [b for b in segments_before if b >= max(x for x in segments_before if x <= CUT)]
    assert kept[0] <= CUT < (kept[1] if len(kept) > 1 else RECORDS + 1)


# -- each client's delete_records: (bootstrap, topic, offset) → the low watermark -----------


def delete_confluent(bootstrap: str, topic: str, offset: int) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([RdTopicPartition(topic, 0, offset)], request_timeout=TIMEOUT_S)
    [future] = futures.values()
    try:
        return int(future.result(timeout=TIMEOUT_S).low_watermark)
    except KafkaException as e:
        raise RuntimeError(e.args[0].name()) from None


def delete_kafka_python(bootstrap: str, topic: str, offset: int) -> int:
    from kafka import TopicPartition as KpTopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import BrokerResponseError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        result = admin.delete_records({KpTopicPartition(topic, 0): offset})
        return int(result[KpTopicPartition(topic, 0)]["low_watermark"])
    except BrokerResponseError as e:
        raise RuntimeError(type(e).message) from None
    finally:
        admin.close()


def delete_aiokafka(bootstrap: str, topic: str, offset: int) -> int:
    from aiokafka import TopicPartition as AioTopicPartition
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import RecordsToDelete as AioRecordsToDelete
    from aiokafka.errors import KafkaError as AioKafkaError

    async def run() -> int:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            result = await admin.delete_records({AioTopicPartition(topic, 0): AioRecordsToDelete(offset)})
            return int(result[AioTopicPartition(topic, 0)])
        except AioKafkaError as e:
            raise RuntimeError(type(e).message) from None
        finally:
            await admin.close()

    return asyncio.run(run())


def delete_eoslog(bootstrap: str, topic: str, offset: int) -> int:
    tp = TopicPartition(topic, 0)
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        try:
            return admin.delete_records({tp: RecordsToDelete.before(offset)})[tp].low_watermark
        except (OffsetOutOfRangeError, PolicyViolationError) as e:
            raise RuntimeError(e.name) from None


CLIENTS: dict[str, Callable[[str, str, int], int]] = {
    "confluent": delete_confluent, "kafka-python": delete_kafka_python,
    "aiokafka": delete_aiokafka, "eoslog": delete_eoslog,
}


@pytest.mark.parametrize("client", list(CLIENTS))
def test_delete_records_cuts_the_log_and_the_cut_survives_a_restart(shared_broker: BrokerProcess, client: str) -> None:
    topic = f"dr-{client}"
    create_topic(shared_broker, topic)
    produce(shared_broker, topic)
    before = segment_bases(shared_broker, topic)
    assert len(before) >= 3, before

    assert CLIENTS[client](shared_broker.bootstrap, topic, CUT) == CUT
    check_cut(shared_broker, topic, before)
    # A lower offset later changes nothing and answers the current low watermark.
    assert CLIENTS[client](shared_broker.bootstrap, topic, 3) == CUT

    shared_broker.restart()
    check_cut(shared_broker, topic, before)


@pytest.mark.parametrize("client", list(CLIENTS))
def test_delete_records_refusals(shared_broker: BrokerProcess, client: str) -> None:
    delete = CLIENTS[client]
    topic, compacted = f"dr-refused-{client}", f"dr-compacted-{client}"
    create_topic(shared_broker, topic)
    create_topic(shared_broker, compacted, **{"cleanup.policy": "compact"})
    produce(shared_broker, topic, 5)
    produce(shared_broker, compacted, 5)

    def refusal(t: str, offset: int) -> str:
        with pytest.raises(RuntimeError) as e:
            delete(shared_broker.bootstrap, t, offset)
        return str(e.value)

    assert refusal(topic, 6) == "OFFSET_OUT_OF_RANGE"
    assert refusal(compacted, 1) == "POLICY_VIOLATION"
    assert earliest(shared_broker, topic) == 0 and earliest(shared_broker, compacted) == 0
    assert delete(shared_broker.bootstrap, topic, -1) == 5  # -1: up to the high watermark
    assert earliest(shared_broker, topic) == 5


def test_cli_topics_describe_shows_the_new_log_start(shared_broker: BrokerProcess, tmp_path: Path) -> None:
    import subprocess
    import sys

    topic = "dr-cli"
    create_topic(shared_broker, topic)
    produce(shared_broker, topic, 12)
    out = subprocess.run(
        [sys.executable, "-m", "eoslog", "topics", "delete-records", topic, "--offset", "0:9",
         "--bootstrap-server", shared_broker.bootstrap],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout
    assert "9" in out
    described = subprocess.run(
        [sys.executable, "-m", "eoslog", "topics", "describe", topic, "--bootstrap-server", shared_broker.bootstrap],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout
    row = next(line.split() for line in described.splitlines() if line.strip().startswith("0 "))
    assert row[-2:] == ["9", "12"]  # LogStartOffset, LogEndOffset
    assert earliest(shared_broker, topic) == 9

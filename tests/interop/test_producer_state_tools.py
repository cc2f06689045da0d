"""Producer state is visible to operators: DescribeProducers after idempotent produce."""

from __future__ import annotations

from clients import stored_batches
from confluent_kafka import Producer

from eoslog.coordinator.producer_id_manager import PID_BLOCK_SIZE
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import build, request_types
from eoslog.records import build_batch
from support.rawkafka import RawClient, create_topic, produce_request

DESCRIBE_PRODUCERS = 61


def describe_producers(bootstrap: str, topic: str, partitions: list[int]) -> dict[int, list]:
    with RawClient(bootstrap) as conn:
        m = request_types(DESCRIBE_PRODUCERS, 0)
        response = conn.call(build(m.DescribeProducersRequest, topics=(
            build(m.TopicRequest, name=topic, partition_indexes=tuple(partitions)),)))
    (t,) = response.topics
    return {int(p.partition_index): (p.error_code, list(p.active_producers)) for p in t.partitions}


def test_describe_producers_lists_idempotent_producers(broker) -> None:
    topic = "producers-described"
    producers = []
    for _ in range(2):
        p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 0})
        for i in range(10):
            p.produce(topic, b"x%d" % i, partition=0)
            p.flush(30)  # one batch per record: sequences 0..9
        producers.append(p)
    result = describe_producers(broker.bootstrap, topic, [0, 7])
    code, active = result[0]
    assert code == 0
    assert len(active) == 2
    assert len({a.producer_id for a in active}) == 2
    for a in active:
        assert (a.producer_epoch, a.last_sequence, a.current_txn_start_offset) == (0, 9, -1)
        assert a.last_timestamp > 0
    assert result[7][0] != 0  # partition 7 does not exist


def test_producer_ids_are_never_reissued_across_kill_9(broker) -> None:
    """Producer ids come from durable blocks: a broker restarted after kill -9 takes a new
    block (the rest of the old one is skipped, as nobody knows how much of it was handed
    out), so no id is issued twice."""
    issued: list[int] = []
    for round_ in range(3):
        p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
        p.produce("pid-blocks", b"r%d" % round_, partition=0)
        assert p.flush(30) == 0
        del p
        broker.restart(kill=True)
        (_, active), = describe_producers(broker.bootstrap, "pid-blocks", [0]).values()
        new = {a.producer_id for a in active} - set(issued)
        assert len(new) == 1, f"round {round_}: expected one new producer id, got {new} after {issued}"
        (pid,) = new
        if issued:
            assert pid // PID_BLOCK_SIZE > max(issued) // PID_BLOCK_SIZE, \
                f"round {round_}: id {pid} is not from a block after the one of {max(issued)}"
        issued.append(pid)
    # A reissued id (epoch 0, sequence 0 again) would make the broker take a later record for
    # a duplicate and acknowledge it unstored: each round's batch is in the log, under its id.
    assert [(h.producer_id, h.base_sequence) for h in stored_batches(broker.data_dir, "pid-blocks", 0)] \
        == [(pid, 0) for pid in issued]


def test_append_errors_carry_the_log_start_offset(broker) -> None:
    """Kafka answers OUT_OF_ORDER_SEQUENCE_NUMBER & co. with the partition's log start offset."""
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "errors-lso", 1)
        ok = build_batch([(None, b"x", ())], timestamp=1)
        c.call(produce_request("errors-lso", 0, ok))
        first = build_batch([(None, b"y", ())], timestamp=1, producer_id=999_999,
                            producer_epoch=0, base_sequence=5)
        c.call(produce_request("errors-lso", 0, first))  # unknown producer: any sequence starts it
        gap = build_batch([(None, b"z", ())], timestamp=1, producer_id=999_999,
                          producer_epoch=0, base_sequence=9)
        response = c.call(produce_request("errors-lso", 0, gap))
    (topic,) = response.responses
    (part,) = topic.partition_responses
    assert part.error_code == ErrorCode.out_of_order_sequence_number
    assert part.log_start_offset == 0

"""ProducerBatch and the hand-written Produce codec.

A batch built record by record must decode (with the broker's own reader) to exactly the
records appended, under every codec, with a valid CRC; splitting keeps order and sequences;
an epoch bump rewrites the producer fields with a valid CRC. The Produce request written by
hand must be byte-identical to kio's for every version, and the response reader must return
what kio encoded.
"""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.static.primitive import i32

from eoslog.client.producer.batch import ProducerBatch, encode_headers, increment_sequence
from eoslog.client.producer.futures import RecordFuture
from eoslog.client.producer.wire import MAX_VERSION, MIN_VERSION, decode_produce_response, encode_produce
from eoslog.protocol.codec import encode_request, encode_response
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import build, request_types, response_types
from eoslog.records import CompressionType, decode_records, read_batch_header, validate_produce_batches

records_strategy = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=40)),
        st.one_of(st.none(), st.binary(max_size=300)),
        st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=8))), max_size=2),
        st.integers(min_value=-5000, max_value=20000),
    ),
    min_size=1, max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(records=records_strategy, codec=st.sampled_from(list(CompressionType)))
def test_records_round_trip_through_the_brokers_reader(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]], codec: CompressionType,
) -> None:
    base = 1_700_000_000_000
    b = ProducerBatch("t", 0, 0.0, 1 << 30, codec)
    for key, value, headers, dt in records:
        assert b.try_append(base + dt, key, value, encode_headers(headers)) is not None
    b.set_producer_state(7, 2, 100, True)
    wire = bytes(b.close())
    validate_produce_batches(wire, 1 << 30)  # CRC, counts, layout as the broker checks them
    h = read_batch_header(wire)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional) == (7, 2, 100, True)
    assert h.compression == codec and h.records_count == len(records)
    assert h.base_timestamp == base + records[0][3]
    assert h.max_timestamp == max(base + r[3] for r in records)
    got = decode_records(wire)
    assert [(r.key, r.value, list(r.headers), r.timestamp) for r in got] == [
        (k, v, h_, base + dt) for k, v, h_, dt in records
    ]
    assert [r.offset for r in got] == list(range(len(records)))


def test_a_full_batch_refuses_the_next_record_but_never_the_first() -> None:
    b = ProducerBatch("t", 0, 0.0, 200)
    assert b.try_append(0, None, b"x" * 500) is not None  # larger than the limit, alone
    assert b.full and b.try_append(0, None, b"y") is None
    b = ProducerBatch("t", 0, 0.0, 200)
    n = 0
    while b.try_append(0, None, b"z" * 10) is not None:
        n += 1
    assert 5 < n < 20 and len(b.buf) <= 200


def test_split_keeps_order_sequences_and_futures() -> None:
    b = ProducerBatch("t", 3, 0.0, 1 << 20, CompressionType.LZ4)
    futures: list[RecordFuture] = [b.try_append(i, b"k%d" % i, b"v" * 100) for i in range(50)]  # type: ignore[misc]
    b.set_producer_state(9, 1, 1000, False)
    b.close()
    parts = b.split(2000, 0.0)
    assert len(parts) >= 2
    assert [p.base_sequence for p in parts] == [1000 + sum(q.count for q in parts[:i]) for i in range(len(parts))]
    values = [r.key for p in parts for r in decode_records(bytes(p.close()))]
    assert values == [b"k%d" % i for i in range(50)]
    # The original futures follow the split: complete the parts and read them back.
    for i, p in enumerate(parts):
        p.result.complete(base_offset=1000 * i)
    first_of_second = parts[0].count
    assert futures[0].result(0).offset == 0
    assert futures[first_of_second].result(0).offset == 1000
    assert futures[-1].result(0).offset == 1000 * (len(parts) - 1) + parts[-1].count - 1


def test_reset_producer_state_rewrites_a_closed_batch_with_a_valid_crc() -> None:
    b = ProducerBatch("t", 0, 0.0, 1 << 20)
    b.try_append(0, None, b"v")
    b.set_producer_state(5, 0, 10, False)
    before = b.close()
    b.reset_producer_state(5, 1, 0)
    wire = bytes(b.close())
    assert wire is not before
    validate_produce_batches(wire, 1 << 20)
    h = read_batch_header(wire)
    assert (h.producer_epoch, h.base_sequence) == (1, 0) and b.sequence_reset
    assert read_batch_header(before).base_sequence == 10  # bytes possibly on the wire are not touched


def test_sequence_wraps_at_int_max() -> None:
    assert increment_sequence(2**31 - 1, 1) == 0
    assert increment_sequence(2**31 - 3, 5) == 2
    assert increment_sequence(-1, 1) == 0


# -- the Produce codec -----------------------------------------------------------------------

def closed_batches() -> list[ProducerBatch]:
    out = []
    for topic, partition in (("a", 0), ("b", 1), ("a", 2)):
        b = ProducerBatch(topic, partition, 0.0, 1 << 20)
        b.try_append(1000, b"k", b"v" * partition)
        b.close()
        out.append(b)
    return out


@pytest.mark.parametrize("version", range(MIN_VERSION, MAX_VERSION + 1))
@pytest.mark.parametrize("txn", [None, "txn-1"])
def test_produce_request_is_byte_identical_to_kio(version: int, txn: str | None) -> None:
    batches = closed_batches()
    mine = b"".join(bytes(c) for c in encode_produce(version, 42, "client-1", txn, -1, 30000, batches))
    m = request_types(0, version)
    by_topic: dict[str, list[ProducerBatch]] = {}
    for b in batches:
        by_topic.setdefault(b.topic, []).append(b)
    request = build(
        m.ProduceRequest, transactional_id=txn, acks=-1, timeout=datetime.timedelta(milliseconds=30000),
        topic_data=tuple(build(m.TopicProduceData, name=t, partition_data=tuple(
            build(m.PartitionProduceData, index=b.partition, records=bytes(b.wire or b"")) for b in bs))
            for t, bs in by_topic.items()),
    )
    assert mine == encode_request(42, request, "client-1")


@pytest.mark.parametrize("version", range(MIN_VERSION, MAX_VERSION + 1))
def test_produce_response_reads_what_kio_wrote(version: int) -> None:
    m = response_types(0, version)
    when = datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC)
    partitions = [
        ("a", 0, ErrorCode.none, 17, when, 3, None),
        ("a", 2, ErrorCode.not_leader_or_follower, -1, None, -1, "moved"),
        ("b", 1, ErrorCode.message_too_large, -1, None, 0, None),
    ]
    by_topic: dict[str, list[object]] = {}
    # v10+: the tagged fields Apache Kafka fills with NOT_LEADER_OR_FOLLOWER (KIP-951): the
    # partition's CurrentLeader and the response's NodeEndpoints; a reader that skips a tagged
    # field one byte short misreads every field after it.
    tagged = version >= 10
    for t, p, code, offset, lat, lso, msg in partitions:
        leader = {"current_leader": m.LeaderIdAndEpoch(leader_id=m.BrokerId(2), leader_epoch=i32(7))} \
            if tagged and code == ErrorCode.not_leader_or_follower else {}
        entry = build(m.PartitionProduceResponse, index=p, error_code=code, base_offset=offset, log_append_time=lat,
                      log_start_offset=lso, record_errors=(), error_message=msg, **leader)
        by_topic.setdefault(t, []).append(entry)
    endpoints = {"node_endpoints": (m.NodeEndpoint(node_id=m.BrokerId(2), host="127.0.0.1", port=i32(9092),
                                                   rack=None),)} if tagged else {}
    response = build(m.ProduceResponse, responses=tuple(
        build(m.TopicProduceResponse, name=t, partition_responses=tuple(ps)) for t, ps in by_topic.items()),
        throttle_time=datetime.timedelta(milliseconds=7), **endpoints)
    frame = encode_response(99, response, 0)[4:]
    answer = decode_produce_response(frame, version)
    got = answer.partitions
    assert answer.throttle_ms == (7 if version >= 1 else 0)
    assert [(r.topic, r.partition, r.error_code, r.base_offset) for r in got] == [
        (t, p, int(code), o) for t, p, code, o, *_ in partitions
    ]
    assert got[0].log_append_time == int(when.timestamp() * 1000) and got[1].log_append_time == -1
    assert [r.log_start_offset for r in got] == ([3, -1, 0] if version >= 5 else [-1, -1, -1])
    assert got[1].error_message == ("moved" if version >= 8 else None)

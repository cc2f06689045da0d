"""The source's offset arithmetic and option parsing, without Spark or a broker: the
offsets JSON round trip, Spark's rate limit and range split, option mistakes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eoslog.client.types import TopicPartition as TP
from eoslog.spark.offsets import OffsetRange, from_json, rate_limit, split_ranges, to_json
from eoslog.spark.options import READ_COMMITTED, READ_UNCOMMITTED, OptionError, parse_options

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_offsets_json_is_spark_kafka_shape() -> None:
    offsets = {TP("b", 1): 7, TP("a", 10): 3, TP("a", 2): 0}
    assert to_json(offsets) == {"a": {"2": 0, "10": 3}, "b": {"1": 7}}
    assert from_json(to_json(offsets)) == offsets
    assert from_json({"payments": {"0": 123}}) == {TP("payments", 0): 123}


def test_split_leaves_ranges_alone_when_there_are_enough() -> None:
    ranges = [OffsetRange(TP("t", 0), 0, 100), OffsetRange(TP("t", 1), 5, 5), OffsetRange(TP("t", 2), 0, 1)]
    assert split_ranges(ranges, None) == [ranges[0], ranges[2]]  # the empty one dropped
    assert split_ranges(ranges, 2) == [ranges[0], ranges[2]]


def test_split_divides_large_ranges_as_spark_does() -> None:
    tp = TP("t", 0)
    assert split_ranges([OffsetRange(tp, 0, 10)], 3) == [
        OffsetRange(tp, 0, 3), OffsetRange(tp, 3, 6), OffsetRange(tp, 6, 10),
    ]
    # A small range stays whole and the large one takes the remaining parts (Spark's
    # KafkaOffsetRangeCalculator suite: sizes 1 and 10000 over 3 → 1 + 2 parts).
    small, big = OffsetRange(TP("t", 1), 0, 1), OffsetRange(TP("t", 2), 0, 10000)
    assert split_ranges([small, big], 3) == [small, OffsetRange(big.tp, 0, 5000), OffsetRange(big.tp, 5000, 10000)]


@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 5000)), min_size=1, max_size=6),
       st.integers(1, 40))
def test_split_covers_every_offset_once(spans: list[tuple[int, int]], min_partitions: int) -> None:
    ranges = [OffsetRange(TP("t", i), start, start + size) for i, (start, size) in enumerate(spans)]
    pieces = split_ranges(ranges, min_partitions)
    for r in ranges:
        mine = sorted((p for p in pieces if p.tp == r.tp), key=lambda p: p.start)
        covered = [o for p in mine for o in range(p.start, p.end)]
        assert covered == list(range(r.start, r.end))
    assert all(p.size > 0 for p in pieces)


def test_rate_limit_shares_in_proportion_and_never_starves() -> None:
    start = {TP("t", 0): 0, TP("t", 1): 100, TP("t", 2): 50}
    latest = {TP("t", 0): 1000, TP("t", 1): 101, TP("t", 2): 50}
    limited = rate_limit(10, start, latest)
    # 1000 and 1 offsets waiting: 10 * 1000/1001 → 9 (floor), 10 * 1/1001 → 1 (ceil: not starved).
    assert limited == {TP("t", 0): 9, TP("t", 1): 101, TP("t", 2): 50}
    assert rate_limit(10_000, start, latest) == latest
    assert rate_limit(5, latest, latest) == latest


@given(st.dictionaries(st.integers(0, 8), st.tuples(st.integers(0, 10**6), st.integers(0, 10**5)), min_size=1),
       st.integers(1, 10**5))
def test_rate_limit_stays_between_start_and_latest(parts: dict[int, tuple[int, int]], limit: int) -> None:
    start = {TP("t", p): s for p, (s, _) in parts.items()}
    latest = {TP("t", p): s + n for p, (s, n) in parts.items()}
    limited = rate_limit(limit, start, latest)
    assert all(start[tp] <= limited[tp] <= latest[tp] for tp in latest)
    moved = sum(limited[tp] - start[tp] for tp in latest)
    assert moved <= limit + len(parts)  # each partition's share is rounded up at most once


def test_options_with_spark_kafka_names() -> None:
    o = parse_options({**BOOT, "subscribe": "a, b", "maxOffsetsPerTrigger": "500", "MINPARTITIONS": "4",
                       "failOnDataLoss": "false", "includeHeaders": "true", "kafka.client.id": "me"}, "stream")
    assert o.subscription.topics == ("a", "b")
    assert (o.max_offsets_per_trigger, o.min_partitions) == (500, 4)
    assert (o.fail_on_data_loss, o.include_headers) == (False, True)
    assert (o.starting, o.ending, o.isolation_level) == ("latest", "latest", READ_COMMITTED)
    assert o.kafka == {"client.id": "me"}
    o = parse_options({"bootstrap.servers": "h:1", "assign": '{"t": [1, 0]}', "isolation.level": "read_uncommitted"},
                      "batch")
    assert o.subscription.partitions == (TP("t", 0), TP("t", 1))
    assert (o.bootstrap_servers, o.starting, o.isolation_level) == ("h:1", "earliest", READ_UNCOMMITTED)
    o = parse_options({**BOOT, "subscribePattern": "pay.*", "startingOffsets": '{"t": {"0": -2, "1": 5}}'}, "stream")
    assert o.subscription.matches("payments") and not o.subscription.matches("xpayments")
    assert o.starting == {TP("t", 0): -2, TP("t", 1): 5}


@pytest.mark.parametrize(("options", "mode", "message"), [
    ({"subscribe": "t"}, "batch", "kafka.bootstrap.servers"),
    ({**BOOT}, "batch", "exactly one of"),
    ({**BOOT, "subscribe": "t", "assign": '{"t":[0]}'}, "batch", "exactly one of"),
    ({**BOOT, "assign": "[0]"}, "batch", "for assign"),
    ({**BOOT, "subscribePattern": "("}, "batch", "not a valid regular expression"),
    ({**BOOT, "subscribe": "t", "startingOffsets": "latest"}, "batch", "can't be latest"),
    ({**BOOT, "subscribe": "t", "startingOffsets": '{"t":{"0":-1}}'}, "batch", "can't be latest"),
    ({**BOOT, "subscribe": "t", "endingOffsets": "earliest"}, "batch", "can't be earliest"),
    ({**BOOT, "subscribe": "t", "endingOffsets": "latest"}, "stream", "not valid in streaming"),
    ({**BOOT, "subscribe": "t", "startingOffsets": "{nope"}, "stream", "startingOffsets must be"),
    ({**BOOT, "subscribe": "t", "startingOffsets": '{"t":{"0":-3}}'}, "stream", "offsets must be >= 0"),
    ({**BOOT, "subscribe": "t", "maxOffsetsPerTrigger": "0"}, "stream", "positive integer"),
    ({**BOOT, "subscribe": "t", "failOnDataLoss": "yes"}, "stream", "true or false"),
    ({**BOOT, "subscribe": "t", "isolation.level": "dirty"}, "stream", "read_committed or read_uncommitted"),
    ({**BOOT, "subscribe": "t", "kafka.auto.offset.reset": "earliest"}, "stream", "use startingOffsets"),
])
def test_option_mistakes(options: dict[str, str], mode: str, message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_options(options, mode)  # type: ignore[arg-type]

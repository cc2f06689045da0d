"""Kafka's murmur2 partitioner, checked against the Java client's own test vectors.

The values are those of Kafka's ``UtilsTest.testMurmur2`` (clients module); the
interop test in tests/interop/test_cli.py checks the partitions against librdkafka's
``murmur2_random`` through a real broker.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eoslog.client.partitioner import RoundRobin, murmur2, partition_for_key, to_positive

JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), JAVA_MURMUR2.items())
def test_murmur2_matches_java_utils(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_to_positive_clears_the_sign_bit_like_java() -> None:
    assert to_positive(-973932308) == -973932308 & 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0  # abs() would overflow in Java; masking does not
    assert to_positive(479470107) == 479470107


@given(st.binary(max_size=64))
def test_murmur2_is_a_signed_32_bit_int(key: bytes) -> None:
    h = murmur2(key)
    assert -(2**31) <= h < 2**31


@given(st.binary(max_size=64), st.integers(min_value=1, max_value=1000))
def test_partition_is_in_range(key: bytes, n: int) -> None:
    assert 0 <= partition_for_key(key, n) < n


def test_round_robin_cycles_over_partitions() -> None:
    rr = RoundRobin()
    assert [rr.partition(3) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_no_partitions_is_an_error() -> None:
    with pytest.raises(ValueError):
        partition_for_key(b"k", 0)

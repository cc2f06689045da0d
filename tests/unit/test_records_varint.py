"""records.varint: the unsigned varints of the protocol's compact fields and the zigzag
varints of the record format, against known encodings and round trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eoslog.records.batch import _read_varint
from eoslog.records.varint import VarintError, decode_uvarint, encode_uvarint, encode_varint


def test_known_encodings() -> None:
    assert encode_uvarint(0) == b"\x00"
    assert encode_uvarint(127) == b"\x7f"
    assert encode_uvarint(300) == b"\xac\x02"
    assert encode_varint(-1) == b"\x01"
    assert encode_varint(1) == b"\x02"
    assert encode_varint(-(2**63)) == b"\xff" * 9 + b"\x01"


@given(st.integers(min_value=0, max_value=2**32 - 1), st.binary(max_size=3))
def test_uvarint_round_trip_at_a_position(n: int, before: bytes) -> None:
    data = before + encode_uvarint(n) + b"\xff"
    assert decode_uvarint(data, len(before)) == (n, len(data) - 1)


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_zigzag_varint_is_what_the_record_decoder_reads(n: int) -> None:
    data = encode_varint(n)
    assert _read_varint(data, 0) == (n, len(data))


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xff\xff", b"\x80\x80\x80\x80\x80\x01"])
def test_truncated_or_too_long_is_an_error(data: bytes) -> None:
    with pytest.raises(VarintError):
        decode_uvarint(data, 0)

"""``__transaction_state`` keys and values byte for byte as Kafka lays them out
(TransactionLogKey / TransactionLogValue v0), the flexible v1 Kafka 4 may write, and the
transactional id → partition mapping."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eoslog.coordinator.transaction.log import (
    TransactionLogFormatError,
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    transaction_partition_for,
)
from eoslog.coordinator.transaction.state import TxnState
from eoslog.types import TopicPartition


def test_key_layout() -> None:
    assert encode_key("tx-1") == b"\x00\x00\x00\x04tx-1"
    assert decode_key(b"\x00\x00\x00\x04tx-1") == "tx-1"
    assert decode_key(b"\x00\x01\x00\x01g") is None  # another coordinator record type


def test_value_v0_layout_field_by_field() -> None:
    value = TransactionLogValue(
        producer_id=1000, producer_epoch=5, timeout_ms=60000, state=TxnState.ONGOING,
        partitions=frozenset({TopicPartition("b", 2), TopicPartition("a", 0), TopicPartition("b", 1)}),
        last_update_ms=1_700_000_000_123, start_ms=1_700_000_000_000,
    )
    expected = (
        struct.pack(">hqhib", 0, 1000, 5, 60000, 1)
        + struct.pack(">i", 2)
        + struct.pack(">h", 1) + b"a" + struct.pack(">ii", 1, 0)
        + struct.pack(">h", 1) + b"b" + struct.pack(">iii", 2, 1, 2)
        + struct.pack(">qq", 1_700_000_000_123, 1_700_000_000_000)
    )
    assert encode_value(value) == expected
    assert decode_value(expected) == value


def test_empty_state_writes_null_partitions() -> None:
    value = TransactionLogValue(7, 0, 1000, TxnState.EMPTY, frozenset(), 5, -1)
    data = encode_value(value)
    assert data[17:21] == struct.pack(">i", -1)
    assert decode_value(data) == value
    with pytest.raises(TransactionLogFormatError):
        encode_value(TransactionLogValue(7, 0, 1000, TxnState.EMPTY,
                                         frozenset({TopicPartition("a", 0)}), 5, -1))


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def test_flexible_v1_with_tagged_fields() -> None:
    topic = b"orders"
    data = (
        struct.pack(">hqhib", 1, 42, 3, 900000, 2)
        + _uvarint(2) + _uvarint(len(topic) + 1) + topic + _uvarint(3) + struct.pack(">ii", 0, 4)
        + _uvarint(0)  # partition entry's tagged fields
        + struct.pack(">qq", 11, 10)
        + _uvarint(1) + _uvarint(2) + _uvarint(2) + b"\x00\x02"  # ClientTransactionVersion (int16) tag
    )
    value = decode_value(data)
    assert value.state is TxnState.PREPARE_COMMIT and value.producer_id == 42
    assert value.partitions == {TopicPartition("orders", 0), TopicPartition("orders", 4)}
    assert (value.last_update_ms, value.start_ms) == (11, 10)
    assert value.client_transaction_version == 2 and value.previous_producer_id == -1
    assert encode_value(value, 1) == data  # Kafka's bytes, field for field


def test_v1_tagged_fields_in_kafkas_order_each_only_when_set() -> None:
    """Kafka 4.4's TransactionLogValue v1 tags: 0 PreviousProducerId, 1 NextProducerId,
    2 ClientTransactionVersion, 3 NextProducerEpoch; a field at its default is not written."""
    value = TransactionLogValue(7, 3, 60000, TxnState.EMPTY, frozenset(), 5, -1, previous_producer_id=7)
    data = encode_value(value, 1)
    assert data.endswith(struct.pack(">qq", 5, -1) + _uvarint(1) + _uvarint(0) + _uvarint(8) + struct.pack(">q", 7))
    assert data[:2] == b"\x00\x01" and data[2 + 8 + 2 + 4 + 1] == 0  # version 1; null partitions (Empty)
    everything = TransactionLogValue(7, 3, 60000, TxnState.ONGOING, frozenset({TopicPartition("t", 1)}), 5, 4,
                                     next_producer_id=9, next_producer_epoch=0, previous_producer_id=7,
                                     client_transaction_version=2)
    tags = (_uvarint(4) + _uvarint(0) + _uvarint(8) + struct.pack(">q", 7) + _uvarint(1) + _uvarint(8)
            + struct.pack(">q", 9) + _uvarint(2) + _uvarint(2) + struct.pack(">h", 2)
            + _uvarint(3) + _uvarint(2) + struct.pack(">h", 0))
    assert encode_value(everything, 1).endswith(struct.pack(">qq", 5, 4) + tags)
    assert decode_value(encode_value(everything, 1)) == everything
    assert everything.is_kept and not TransactionLogValue(7, 3, 1, TxnState.PREPARE_COMMIT, frozenset(), 1, 1,
                                                          next_producer_id=9).is_kept


def test_version_0_unless_a_kept_transaction_needs_the_tags() -> None:
    plain = TransactionLogValue(7, 3, 60000, TxnState.EMPTY, frozenset(), 5, -1, previous_producer_id=7)
    assert encode_value(plain)[:2] == b"\x00\x00"
    assert decode_value(encode_value(plain)).previous_producer_id == -1  # v0 has no tags
    kept = TransactionLogValue(7, 3, 2**31 - 1, TxnState.ONGOING, frozenset({TopicPartition("t", 0)}), 5, 4,
                               next_producer_id=7, next_producer_epoch=4)
    assert encode_value(kept)[:2] == b"\x00\x01" and decode_value(encode_value(kept)) == kept


def test_eoslog_s_earlier_tag_for_the_next_epoch_is_still_read() -> None:
    kept = TransactionLogValue(7, 3, 2**31 - 1, TxnState.ONGOING, frozenset(), 5, 4,
                               next_producer_id=7, next_producer_epoch=4)
    data = encode_value(kept, 1)
    legacy = data.replace(_uvarint(3) + _uvarint(2) + struct.pack(">h", 4), _uvarint(100) + _uvarint(2)
                          + struct.pack(">h", 4))
    assert legacy != data and decode_value(legacy) == kept


def test_unknown_version_and_status_are_refused() -> None:
    with pytest.raises(TransactionLogFormatError, match="version 9"):
        decode_value(struct.pack(">hqhib", 9, 1, 1, 1, 0))
    with pytest.raises(TransactionLogFormatError, match="status 12"):
        decode_value(struct.pack(">hqhib", 0, 1, 1, 1, 12) + struct.pack(">iqq", -1, 0, 0))
    with pytest.raises(TransactionLogFormatError, match="ends at byte"):
        decode_value(struct.pack(">hqhib", 0, 1, 1, 1, 1) + struct.pack(">i", 3))


states = st.sampled_from([s for s in TxnState if s is not TxnState.EMPTY])
partitions = st.frozensets(st.builds(TopicPartition, st.text(min_size=1, max_size=20),
                                     st.integers(0, 2**31 - 1)), max_size=20)


@given(st.integers(0, 2**63 - 1), st.integers(0, 2**15 - 1), st.integers(1, 2**31 - 1), states,
       partitions, st.integers(-1, 2**62), st.integers(-1, 2**62))
def test_round_trip(pid: int, epoch: int, timeout: int, state: TxnState,
                    parts: frozenset[TopicPartition], update: int, start: int) -> None:
    value = TransactionLogValue(pid, epoch, timeout, state, parts, update, start)
    assert decode_value(encode_value(value)) == value


@given(st.integers(0, 2**63 - 1), st.integers(0, 2**15 - 1), states, partitions, st.integers(-1, 2**62),
       st.integers(-1, 2**62), st.integers(-1, 2**62), st.integers(-1, 2**15 - 1), st.integers(0, 2))
def test_round_trip_v1(pid: int, epoch: int, state: TxnState, parts: frozenset[TopicPartition], previous: int,
                       next_pid: int, start: int, next_epoch: int, client_version: int) -> None:
    value = TransactionLogValue(pid, epoch, 60000, state, parts, start + 1, start, next_pid, next_epoch, previous,
                                client_version)
    assert decode_value(encode_value(value, 1)) == value


def test_partition_for_is_javas_abs_hash_mod() -> None:
    # "my-txn".hashCode() == -1061187895 in Java (31-based over the chars, int32)
    assert transaction_partition_for("my-txn", 50) == 1061187895 % 50 == 45
    assert all(0 <= transaction_partition_for(f"t{i}", 50) < 50 for i in range(200))

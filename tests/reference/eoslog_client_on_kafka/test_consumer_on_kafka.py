"""tests/interop/test_eoslog_consumer.py's tests on Apache Kafka (see conftest.py)."""

from test_eoslog_consumer import (
    make_consumer,
    test_an_open_transaction_holds_the_position_at_its_first_offset,
    test_commit_and_committed,
    test_committed_under_read_committed_waits_for_an_open_transaction,
    test_consume_transform_produce,
    test_read_committed_returns_exactly_the_committed_records,
    test_records_read_back_exactly,
    test_seek_positions_and_offset_lookups,
)

__all__ = [
    "make_consumer",
    "test_an_open_transaction_holds_the_position_at_its_first_offset",
    "test_commit_and_committed",
    "test_committed_under_read_committed_waits_for_an_open_transaction",
    "test_consume_transform_produce",
    "test_read_committed_returns_exactly_the_committed_records",
    "test_records_read_back_exactly",
    "test_seek_positions_and_offset_lookups",
]

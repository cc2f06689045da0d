"""tests/interop/test_eoslog_interop.py's tests on Apache Kafka (see conftest.py):
eoslog.client's and librdkafka's transactions interleaved, each read by the other."""

from test_eoslog_interop import (
    members,
    test_both_readers_see_the_same_records_at_the_same_offsets,
    test_eoslog_transactions_read_committed_by_librdkafka,
    test_librdkafka_transactions_read_committed_by_eoslog,
    test_mixed_group_reads_a_transactional_topic_exactly_once,
    written,
)

__all__ = [
    "members",
    "test_both_readers_see_the_same_records_at_the_same_offsets",
    "test_eoslog_transactions_read_committed_by_librdkafka",
    "test_librdkafka_transactions_read_committed_by_eoslog",
    "test_mixed_group_reads_a_transactional_topic_exactly_once",
    "written",
]

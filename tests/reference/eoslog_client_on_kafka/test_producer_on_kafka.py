"""tests/interop/test_eoslog_producer.py's tests on Apache Kafka (see conftest.py)."""

from test_eoslog_producer import (
    test_a_second_instance_fences_the_first,
    test_committed_and_aborted_transactions_read_committed,
    test_keyed_records_go_where_librdkafkas_murmur2_partitioner_puts_them,
    test_offsets_sent_in_a_transaction_are_committed_only_with_it,
    test_records_and_offsets_read_back_by_librdkafka,
    test_send_outside_a_transaction_is_refused,
)

__all__ = [
    "test_a_second_instance_fences_the_first",
    "test_committed_and_aborted_transactions_read_committed",
    "test_keyed_records_go_where_librdkafkas_murmur2_partitioner_puts_them",
    "test_offsets_sent_in_a_transaction_are_committed_only_with_it",
    "test_records_and_offsets_read_back_by_librdkafka",
    "test_send_outside_a_transaction_is_refused",
]

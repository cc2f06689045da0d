"""tests/interop/test_eoslog_admin.py's tests on Apache Kafka (see conftest.py)."""

from test_eoslog_admin import (
    admin,
    test_consumer_group_is_listed_described_and_its_offsets_managed,
    test_features_are_described_and_checked,
    test_list_offsets,
    test_open_transaction_is_found_and_aborted,
    test_topics_are_created_listed_described_grown_and_deleted,
)

__all__ = [
    "admin",
    "test_consumer_group_is_listed_described_and_its_offsets_managed",
    "test_features_are_described_and_checked",
    "test_list_offsets",
    "test_open_transaction_is_found_and_aborted",
    "test_topics_are_created_listed_described_grown_and_deleted",
]

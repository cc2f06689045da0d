"""tests/interop/test_eoslog_consumer_groups.py's tests on Apache Kafka (see conftest.py)."""

from test_eoslog_consumer_groups import (
    test_a_restarted_static_member_gets_its_partitions_back_without_a_rebalance,
    test_cooperative_sticky_with_a_librdkafka_member,
    test_eoslog_and_librdkafka_members_share_a_group,
    test_transactional_offsets_with_a_group_members_metadata,
)

__all__ = [
    "test_a_restarted_static_member_gets_its_partitions_back_without_a_rebalance",
    "test_cooperative_sticky_with_a_librdkafka_member",
    "test_eoslog_and_librdkafka_members_share_a_group",
    "test_transactional_offsets_with_a_group_members_metadata",
]

"""``eoslog console`` against Apache Kafka (tests/support/kafka_harness.py's single KRaft broker): it uses
only the public admin client, so the transactions, partitions, producers and groups pages must
show Kafka's numbers as they show eoslog's (the same checks as test_console.py, whose hanging
transaction needs eoslog's data directory to lose coordinator state, and is not repeated here).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.console_harness import (
    Stack,
    check_actions,
    check_cluster_page,
    check_consumer_group,
    check_group_lag,
    check_owned_open_transaction,
    check_records_page,
    check_share_group,
    console_stack,
)
from support.kafka_harness import KafkaBroker


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("console-kafka")
    broker = KafkaBroker(root / "data").start()
    try:
        with console_stack("kafka", broker, root) as stack:
            yield stack
    finally:
        broker.kill()  # nothing is checked after: no controlled shutdown to wait for


def test_open_transaction_shows_its_owner_and_pins_the_lso_on_kafka(stack: Stack) -> None:
    check_owned_open_transaction(stack, "payments", metrics=False)


def test_group_lag_equals_the_admin_client_on_kafka(stack: Stack) -> None:
    check_group_lag(stack, "lagged", "console-billing")


def test_consumer_group_shows_its_type_and_epochs_on_kafka(stack: Stack) -> None:
    check_consumer_group(stack, "modern", "console-848")


def test_share_group_shows_its_start_offset_and_members(stack: Stack) -> None:
    check_share_group(stack, "queued", "console-workers", expect_start=None)


def test_records_page_flags_aborted_records_and_hides_them_under_read_committed_on_kafka(stack: Stack) -> None:
    check_records_page(stack, "ledger")


def test_delete_records_and_reset_a_group_offset_from_the_pages_on_kafka(stack: Stack) -> None:
    check_actions(stack, "trimmed", "console-trim")


def test_cluster_page_on_kafka(stack: Stack) -> None:
    check_cluster_page(stack, "unknown")  # Kafka's protocol carries no software version

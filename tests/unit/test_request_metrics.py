"""Kafka's ErrorsPerSec as eoslog counts it: every error code of a response, nested ones too."""

from __future__ import annotations

import datetime

from kio.schema.add_partitions_to_txn.v3 import response as add_partitions
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32, i32Timedelta

from eoslog.metrics.requests import error_counts


def test_add_partitions_to_txn_partition_errors_are_counted() -> None:
    """Its per-partition field is partition_error_code (the copy's CONCURRENT_TRANSACTIONS went uncounted)."""
    results = tuple(add_partitions.AddPartitionsToTxnPartitionResult(
        partition_index=i32(p), partition_error_code=code)
        for p, code in enumerate([ErrorCode.concurrent_transactions] * 2 + [ErrorCode.none]))
    response = add_partitions.AddPartitionsToTxnResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        results_by_topic_v3_and_below=(add_partitions.AddPartitionsToTxnTopicResult(
            name=TopicName("t"), results_by_partition=results),))
    assert error_counts(response) == {int(ErrorCode.concurrent_transactions): 2}

"""Appending to a PartitionLog as the leader of a single-replica partition, as the broker does.

Storage leaves the high watermark to the replica layer (``eoslog.replica``); these helpers
append through a leader ``Partition`` whose ISR is this broker alone, so the high watermark
and the last stable offset move exactly as they do in a single-node broker.
"""

from __future__ import annotations

from eoslog.records import ControlRecordType, build_control_batch
from eoslog.replica import Partition
from eoslog.storage import AppendInfo, AppendOrigin, PartitionLog
from eoslog.types import TopicPartition


def leader(lg: PartitionLog) -> Partition:
    partition = Partition(TopicPartition(lg.topic, lg.partition), lg, 0, lambda: 0)
    partition.make_leader(0, (0,), (0,))
    return partition


def append(lg: PartitionLog, records: bytes, origin: AppendOrigin = AppendOrigin.CLIENT) -> AppendInfo:
    return leader(lg).append_records_to_leader(records, origin, required_acks=1)


def append_marker(lg: PartitionLog, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                  commit: bool) -> AppendInfo:
    """A COMMIT or ABORT marker, written as the transaction coordinator writes it."""
    batch = build_control_batch(
        ControlRecordType.COMMIT if commit else ControlRecordType.ABORT, producer_id=producer_id,
        producer_epoch=producer_epoch, coordinator_epoch=coordinator_epoch, timestamp=lg._clock_ms(),
    )
    return append(lg, batch, AppendOrigin.COORDINATOR)

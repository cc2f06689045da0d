"""Rebuild the transactional ids of one ``__transaction_state`` partition from its log.

As Kafka's ``TransactionStateManager.loadTransactionsForTxnTopicPartition``: replay the
partition from its log start offset; the last value of each transactional id wins and a
tombstone removes it. Keys of other coordinator record types are skipped, and so is a
record that cannot be decoded (logged): one bad record must not cost every other id its
state. What to do with transactions found in PrepareCommit/PrepareAbort (send their
markers again) is the coordinator's job, not the loader's.

``load_partition`` is a generator: it yields after every chunk read so that the caller
can give the event loop a turn, and returns the loaded metadata.
"""

from __future__ import annotations

import logging
from collections.abc import Generator

from eoslog.coordinator.internal_topic import TRANSACTION_STATE_TOPIC, read_chunks
from eoslog.coordinator.transaction.log import (
    TransactionLogFormatError,
    TransactionLogValue,
    decode_key,
    decode_value,
)
from eoslog.coordinator.transaction.metadata import TransactionMetadata
from eoslog.coordinator.transaction.state import TxnState
from eoslog.coordinator.transaction.topic import TransactionStateTopic
from eoslog.records import decode_records
from eoslog.records.batch import InvalidRecordError

log = logging.getLogger(__name__)


def load_partition(
    topic: TransactionStateTopic, partition: int, chunk_bytes: int
) -> Generator[None, None, dict[str, TransactionMetadata]]:
    plog = topic.partition_log(partition)
    start, end = plog.log_start_offset, plog.log_end_offset
    values: dict[str, TransactionLogValue | None] = {}
    records = 0
    for chunk in read_chunks(topic, partition, chunk_bytes):
        for h, batch in chunk:
            if h.is_control:
                continue
            try:
                batch_records = decode_records(batch)
            except InvalidRecordError as e:
                log.error("%s-%d: skipping undecodable batch at offset %d: %s",
                          TRANSACTION_STATE_TOPIC, partition, h.base_offset, e)
                continue
            for rec in batch_records:
                if rec.key is None:
                    continue
                try:
                    transactional_id = decode_key(rec.key)
                    if transactional_id is None:
                        continue
                    values[transactional_id] = None if rec.value is None else decode_value(rec.value)
                    records += 1
                except TransactionLogFormatError as e:
                    log.error("%s-%d: skipping undecodable record at offset %d: %s",
                              TRANSACTION_STATE_TOPIC, partition, rec.offset, e)
        yield
    loaded = {
        txn_id: TransactionMetadata.from_log(txn_id, value)
        for txn_id, value in values.items()
        # Neither is ever written by a coordinator (a fence is logged as PrepareAbort, an
        # expiry as a tombstone); treat them as unknown rather than wedge the id.
        if value is not None and value.state not in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE)
    }
    log.log(
        logging.INFO if records else logging.DEBUG,
        "loaded %d transactional ids from %s-%d (%d records, offsets %d..%d)",
        len(loaded), TRANSACTION_STATE_TOPIC, partition, records, start, end,
    )
    return loaded

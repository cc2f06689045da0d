"""Rebuild the groups of one ``__consumer_offsets`` partition from its log.

Replays the partition from its log start offset as Kafka's
``GroupMetadataManager.loadGroupsAndOffsets`` does: the last GroupMetadataValue of each
group wins (a tombstone removes the group), the last plain OffsetCommitValue of each
(group, topic, partition) wins (a tombstone removes it), transactional offset commits
wait under their producer id for the transaction's marker (COMMIT materializes, ABORT
drops) and stay pending if the log holds no marker yet. Records of other key types (share
groups') are handed back in log order for their own replay; unknown ones are skipped.

``load_partition`` is a generator: it yields after every chunk read so that the caller
can give the event loop a turn, and returns the loaded groups.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from dataclasses import dataclass, field

from eoslog.coordinator.group.group import GroupMetadata
from eoslog.coordinator.group.offsets import CommitRecord, OffsetAndMetadata
from eoslog.coordinator.group.offsets_topic import OffsetsTopic
from eoslog.coordinator.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from eoslog.coordinator.group.state import GroupState
from eoslog.records import ControlRecordType, decode_records, iter_batch_headers, parse_control_record
from eoslog.records.batch import InvalidRecordError
from eoslog.types import TopicPartition

log = logging.getLogger(__name__)

GroupOffsetMap = dict[str, dict[TopicPartition, CommitRecord]]


def to_offset(value: OffsetCommitValue) -> OffsetAndMetadata:
    return OffsetAndMetadata(
        value.offset, value.leader_epoch, value.metadata, value.commit_timestamp,
        value.expire_timestamp,
    )


@dataclass
class _Replay:
    metadata: dict[str, GroupMetadataValue | None] = field(default_factory=dict)
    offsets: GroupOffsetMap = field(default_factory=dict)
    pending: dict[int, GroupOffsetMap] = field(default_factory=dict)  # producer id → ...
    records: int = 0

    def offset_record(self, batch_offset: int, transactional: bool, producer_id: int,
                      key: OffsetCommitKey, value: bytes | None) -> None:
        tp = TopicPartition(key.topic, key.partition)
        target = (
            self.pending.setdefault(producer_id, {}) if transactional else self.offsets
        ).setdefault(key.group, {})
        if value is None:
            target.pop(tp, None)
        else:
            # Kafka orders commits by the base offset of the batch that carried them.
            target[tp] = CommitRecord(batch_offset, to_offset(decode_offset_commit_value(value)))

    def marker(self, producer_id: int, kind: ControlRecordType) -> None:
        pending = self.pending.pop(producer_id, {})
        if kind is not ControlRecordType.COMMIT:
            return
        for group, tps in pending.items():
            committed = self.offsets.setdefault(group, {})
            for tp, record in tps.items():
                current = committed.get(tp)
                if current is None or current.older_than(record):
                    committed[tp] = record


def load_partition(
    topic: OffsetsTopic, partition: int, now_ms: int, chunk_bytes: int,
    others: list[tuple[bytes, bytes | None]] | None = None,
) -> Generator[None, None, dict[str, GroupMetadata]]:
    """``others``: gets, in log order, the records of key types the classic loader does not
    replay (share groups' records: ``coordinator.group.share_groups`` replays them)."""
    plog = topic.partition_log(partition)
    offset, end = plog.log_start_offset, plog.log_end_offset
    replay = _Replay()
    while offset < end:
        # (Looked up at each chunk: the partition may move to another log directory in between.)
        data = topic.partition_log(partition).read(offset, chunk_bytes, upper_bound=end).records
        if not data:
            break
        for pos, h in iter_batch_headers(data):
            if h.last_offset < offset:
                continue
            batch = data[pos : pos + h.size]
            offset = h.next_offset
            try:
                records = decode_records(batch)
                if h.is_control:
                    if records:
                        replay.marker(h.producer_id, parse_control_record(records[0])[0])
                    continue
                for rec in records:
                    if rec.key is None:
                        continue
                    key = decode_key(rec.key)
                    replay.records += 1
                    if isinstance(key, OffsetCommitKey):
                        replay.offset_record(
                            h.base_offset, h.is_transactional, h.producer_id, key, rec.value
                        )
                    elif isinstance(key, GroupMetadataKey):
                        replay.metadata[key.group] = (
                            decode_group_metadata_value(rec.value) if rec.value is not None else None
                        )
                    elif others is not None:
                        others.append((rec.key, rec.value))
            except (RecordFormatError, InvalidRecordError) as e:
                log.error(
                    "__consumer_offsets-%d: skipping undecodable batch at offset %d: %s",
                    partition, h.base_offset, e,
                )
        yield
    groups = _build_groups(replay, now_ms)
    log.log(
        logging.INFO if replay.records else logging.DEBUG,
        "loaded %d groups from __consumer_offsets-%d (%d records, offsets %d..%d)",
        len(groups), partition, replay.records, plog.log_start_offset, end,
    )
    return groups


def _build_groups(replay: _Replay, now_ms: int) -> dict[str, GroupMetadata]:
    groups: dict[str, GroupMetadata] = {}
    for group_id, value in replay.metadata.items():
        if value is not None:
            groups[group_id] = GroupMetadata.from_record(group_id, value, now_ms)
    # Offsets without live group metadata (standalone consumers, or a group whose
    # metadata was removed) belong to an empty group, as in Kafka.
    with_offsets = {g for g, tps in replay.offsets.items() if tps} | {
        g for p in replay.pending.values() for g, tps in p.items() if tps
    }
    for group_id in with_offsets:
        if group_id not in groups:
            groups[group_id] = GroupMetadata(group_id, GroupState.EMPTY, now_ms)
    for group_id, tps in replay.offsets.items():
        for tp, record in tps.items():  # (a group emptied by tombstones has no entries)
            groups[group_id].offsets.commit(tp, record)
    for producer_id, by_group in replay.pending.items():
        for group_id, tps in by_group.items():
            for tp, record in tps.items():
                groups[group_id].offsets.prepare_txn(producer_id, tp, record)
    return groups

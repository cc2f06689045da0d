"""What DescribeLogDirs reports: each log directory of this broker, whether it is usable, its
size on disk, and the replicas in it with their size and how far each is behind (Kafka's
ReplicaManager.describeLogDirs)."""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from eoslog.errors import Errors
from eoslog.storage import PartitionLog
from eoslog.types import TopicPartition

INVALID_OFFSET_LAG = -1


@dataclass(frozen=True, slots=True)
class ReplicaInDir:
    tp: TopicPartition
    size: int
    offset_lag: int  # the high watermark minus the log end offset, at least 0 (Kafka's getLogEndOffsetLag)
    is_future: bool = False  # a replica being moved here by AlterReplicaLogDirs


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    path: str
    error: Errors
    replicas: tuple[ReplicaInDir, ...]
    total_bytes: int = -1
    usable_bytes: int = -1


def describe_log_dir(directory: Path, logs: Mapping[tuple[str, int], PartitionLog],
                     wanted: Collection[TopicPartition] | None, error: Errors = Errors.NONE,
                     futures: Mapping[tuple[str, int], tuple[PartitionLog, int]] | None = None) -> LogDirDescription:
    """One directory: ``logs`` are the replicas it holds; ``wanted`` None means all of them.
    ``futures``: the future logs in it (replicas being moved here) with their current log's end
    offset, which their lag is measured against (Kafka's getLogEndOffsetLag, isFuture)."""
    path = str(directory.resolve())
    if error is not Errors.NONE:
        return LogDirDescription(path, error, ())
    replicas = tuple(
        ReplicaInDir(TopicPartition(*tp), log.size_bytes, max(log.high_watermark - log.log_end_offset, 0))
        for tp, log in sorted(logs.items()) if wanted is None or tp in wanted) + tuple(
        ReplicaInDir(TopicPartition(*tp), log.size_bytes, max(current_end - log.log_end_offset, 0), is_future=True)
        for tp, (log, current_end) in sorted((futures or {}).items()) if wanted is None or tp in wanted)
    try:
        st = os.statvfs(directory)
    except OSError:
        return LogDirDescription(path, Errors.KAFKA_STORAGE_ERROR, ())
    return LogDirDescription(path, Errors.NONE, replicas, st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize)

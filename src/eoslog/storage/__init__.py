"""Durable storage: segmented partition logs, their indexes, and the log manager.

Never imports the wire protocol: handlers translate requests into calls on
``LogManager`` / ``PartitionLog`` and their results back into responses.
"""

from eoslog.storage.log import AppendInfo, AppendOrigin, FetchInfo, OffsetOutOfRange, PartitionLog
from eoslog.storage.log_manager import LogManager, TopicError, TopicInfo

__all__ = [
    "AppendInfo",
    "AppendOrigin",
    "FetchInfo",
    "LogManager",
    "OffsetOutOfRange",
    "PartitionLog",
    "TopicError",
    "TopicInfo",
]

"""The group coordinator: classic consumer groups and their committed offsets.

``coordinator.GroupCoordinator`` is the entry point; ``state`` holds the state machine,
``rebalance`` the membership protocol, ``offsets`` the committed offsets, ``records`` the
``__consumer_offsets`` formats and ``loader`` the start-up replay. Nothing here imports
the wire protocol: handlers translate requests into these calls.
"""

from eoslog.coordinator.group.coordinator import FetchedOffset, GroupConfig, GroupCoordinator, ListedGroup
from eoslog.coordinator.group.member import JoinedMember, JoinResult, SyncResult
from eoslog.coordinator.group.offsets import OffsetAndMetadata
from eoslog.coordinator.group.offsets_topic import OFFSETS_TOPIC, OffsetsTopic, OffsetsTopicConfig
from eoslog.coordinator.group.rebalance import JoinRequest, SyncRequest
from eoslog.coordinator.group.state import GroupState
from eoslog.types import TopicPartition

__all__ = [
    "OFFSETS_TOPIC",
    "FetchedOffset",
    "GroupConfig",
    "GroupCoordinator",
    "GroupState",
    "JoinRequest",
    "JoinResult",
    "JoinedMember",
    "ListedGroup",
    "OffsetAndMetadata",
    "OffsetsTopic",
    "OffsetsTopicConfig",
    "SyncRequest",
    "SyncResult",
    "TopicPartition",
]

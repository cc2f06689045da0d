"""The share coordinator: the durable state of share-partitions in ``__share_group_state``.

``coordinator.ShareCoordinator`` is the entry point; ``state`` holds a share-partition's state
and how updates combine, ``records`` the ``__share_group_state`` formats and ``loader`` the
replay. Nothing here imports the wire protocol: handlers translate requests into these calls.
The share-partition leaders that read and write these states are ``eoslog.share``.
"""

from eoslog.coordinator.share.coordinator import (
    ShareCoordinator,
    ShareCoordinatorConfig,
    StateWrite,
    TransactionalWrite,
)
from eoslog.coordinator.share.state import (
    NO_OFFSET,
    DeliveryState,
    ShareGroupOffset,
    SharePartitionKey,
    StateBatch,
)

__all__ = [
    "NO_OFFSET",
    "DeliveryState",
    "ShareCoordinator",
    "ShareCoordinatorConfig",
    "ShareGroupOffset",
    "SharePartitionKey",
    "StateBatch",
    "StateWrite",
    "TransactionalWrite",
]

"""The controller's events (Kafka's ControllerEvent): watches and requests only enqueue
these; the controller task handles them one at a time, in order."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from eoslog.cluster.controller.reassignment import Refusal, ReplicaAssignment
from eoslog.errors import Errors
from eoslog.types import TopicPartition


def _future() -> asyncio.Future[Any]:
    return asyncio.get_running_loop().create_future()


@dataclass(frozen=True, slots=True)
class Startup:
    """This broker has just become controller."""


@dataclass(frozen=True, slots=True)
class BrokerChange:
    """The set of registrations (or one's broker epoch) changed."""


@dataclass(frozen=True, slots=True)
class TopicChange:
    """A topic's assignment appeared, changed (partitions added) or went away."""

    topic: str


@dataclass(frozen=True, slots=True)
class ControlledShutdownChange:
    """``/admin/controlled_shutdown`` changed: a broker asks to shut down cleanly."""


@dataclass(frozen=True, slots=True)
class TopicDeletion:
    """``/admin/delete_topics`` changed: topics to delete."""


@dataclass(frozen=True, slots=True)
class LogDirEventNotification:
    """``/log_dir_event_notification`` has children: brokers' log directories failed."""


@dataclass(frozen=True, slots=True)
class AutoPreferredElection:
    """The leader-imbalance timer fired."""


@dataclass(slots=True)
class ElectLeaders:
    """ElectLeaders, preferred or (``unclean``) KIP-460's unclean election; ``partitions``
    None means every partition. ``result`` gets partition → error."""

    partitions: tuple[TopicPartition, ...] | None
    unclean: bool
    result: asyncio.Future[dict[TopicPartition, Errors]] = field(default_factory=_future)


@dataclass(slots=True)
class AlterReassignments:
    """AlterPartitionReassignments (KIP-455): each partition's target replicas, None to cancel.
    ``result`` gets partition → the refusal, or None once the reassignment has begun."""

    targets: dict[TopicPartition, tuple[int, ...] | None]
    allow_replication_factor_change: bool = True
    result: asyncio.Future[dict[TopicPartition, Refusal | None]] = field(default_factory=_future)


@dataclass(slots=True)
class ListReassignments:
    """ListPartitionReassignments: ``partitions`` None means every partition being reassigned."""

    partitions: tuple[TopicPartition, ...] | None
    result: asyncio.Future[dict[TopicPartition, ReplicaAssignment]] = field(default_factory=_future)


@dataclass(frozen=True, slots=True)
class ZkReassignment:
    """``/admin/reassign_partitions`` changed (Kafka ≤ 3.x's way of asking)."""


@dataclass(frozen=True, slots=True)
class ReassignmentIsrChange:
    """The state of a partition being reassigned changed: it may be complete."""

    tp: TopicPartition


# Events a caller awaits: the controller sets their ``result`` (or its exception).
AnsweredEvent = ElectLeaders | AlterReassignments | ListReassignments

ControllerEvent = (Startup | BrokerChange | TopicChange | ControlledShutdownChange | TopicDeletion
                   | LogDirEventNotification | AutoPreferredElection | ZkReassignment | ReassignmentIsrChange
                   | AnsweredEvent)

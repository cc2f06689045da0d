"""The controller's events (Kafka's ControllerEvent): watches and requests only enqueue
these; the controller task handles them one at a time, in order."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from eoslog.errors import Errors
from eoslog.types import TopicPartition


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
class AutoPreferredElection:
    """The leader-imbalance timer fired."""


@dataclass(slots=True)
class ElectLeaders:
    """ElectLeaders, preferred or (``unclean``) KIP-460's unclean election; ``partitions``
    None means every partition. ``result`` gets partition → error."""

    partitions: tuple[TopicPartition, ...] | None
    unclean: bool
    result: asyncio.Future[dict[TopicPartition, Errors]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())


ControllerEvent = (Startup | BrokerChange | TopicChange | ControlledShutdownChange | TopicDeletion
                   | AutoPreferredElection | ElectLeaders)

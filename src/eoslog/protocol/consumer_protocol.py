"""The consumer protocol's group metadata: what a member sends in JoinGroup and receives in
SyncGroup, in Kafka's binary format (``ConsumerProtocolSubscription.json`` and
``ConsumerProtocolAssignment.json``), so that Java and librdkafka members share a group.

Both are non-flexible structs after an int16 version::

    Subscription  v0: topics [string], user_data nullable bytes
                  v1: + owned_partitions [topic string, partitions [int32]]
                  v2: + generation_id int32 (-1 when unknown)
                  v3: + rack_id nullable string
    Assignment    v0..v3: assigned_partitions [topic string, partitions [int32]], user_data nullable bytes

The structs are kio's generated ones. We write version 3, as Java's ConsumerProtocol does;
we read every version, and a newer one as far as we know it (fields are only ever
appended), as Java does.
It lives in ``protocol`` because both sides read it: eoslog.client's classic membership, and
the broker's group coordinator (a classic member's metadata in a consumer group, the online
upgrade and downgrade), which must not import the client.
What this module must never do: decide anything — assignors and the coordinator do.
"""

from __future__ import annotations

import importlib
import io
import struct
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kio.serial import entity_reader, entity_writer

from eoslog.protocol.messages import build
from eoslog.types import TopicPartition

CONSUMER_PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_VERSION = 3
ASSIGNMENT_VERSION = 3
DEFAULT_GENERATION = -1

_I16 = struct.Struct(">h")


class ProtocolError(ValueError):
    """Group metadata that is not a consumer protocol struct."""


@dataclass(frozen=True)
class Subscription:
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = DEFAULT_GENERATION
    rack_id: str | None = None
    version: int = SUBSCRIPTION_VERSION


@dataclass(frozen=True)
class Assignment:
    partitions: tuple[TopicPartition, ...] = ()
    user_data: bytes | None = None
    version: int = ASSIGNMENT_VERSION


def _kio(kind: str, version: int) -> ModuleType:
    return importlib.import_module(f"kio.schema.consumer_protocol_{kind}.v{version}.data")


def _by_topic(module: ModuleType, tps: Iterable[TopicPartition]) -> tuple[Any, ...]:
    if not hasattr(module, "TopicPartition"):
        return ()  # subscription v0: no owned partitions
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in tps:
        by_topic[topic].append(partition)
    return tuple(module.TopicPartition(topic=t, partitions=tuple(sorted(ps))) for t, ps in sorted(by_topic.items()))


def _flatten(topics: Iterable[Any]) -> tuple[TopicPartition, ...]:
    return tuple(TopicPartition(str(t.topic), int(p)) for t in topics for p in t.partitions)


def _encode(version: int, entity: Any) -> bytes:
    out = io.BytesIO()
    out.write(_I16.pack(version))
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


def _decode(kind: str, data: bytes, newest: int) -> tuple[int, Any]:
    if len(data) < _I16.size:
        raise ProtocolError(f"consumer protocol {kind} of {len(data)} bytes")
    version = _I16.unpack_from(data)[0]
    if version < 0:
        raise ProtocolError(f"consumer protocol {kind} version {version}")
    module = _kio(kind, min(version, newest))
    cls = module.ConsumerProtocolSubscription if kind == "subscription" else module.ConsumerProtocolAssignment
    try:
        entity, _ = entity_reader(cls)(memoryview(data), _I16.size)
    except Exception as e:  # kio raises several types on truncated input
        raise ProtocolError(f"undecodable consumer protocol {kind} v{version}: {e}") from e
    return version, entity


def encode_subscription(s: Subscription) -> bytes:
    m = _kio("subscription", s.version)
    return _encode(s.version, build(
        m.ConsumerProtocolSubscription, topics=s.topics, user_data=s.user_data,
        owned_partitions=_by_topic(m, s.owned_partitions), generation_id=s.generation_id, rack_id=s.rack_id,
    ))


def decode_subscription(data: bytes) -> Subscription:
    version, e = _decode("subscription", data, SUBSCRIPTION_VERSION)
    return Subscription(
        tuple(str(t) for t in e.topics), e.user_data, _flatten(getattr(e, "owned_partitions", ())),
        int(getattr(e, "generation_id", DEFAULT_GENERATION)), getattr(e, "rack_id", None), version,
    )


def encode_assignment(a: Assignment) -> bytes:
    m = _kio("assignment", a.version)
    return _encode(a.version, m.ConsumerProtocolAssignment(
        assigned_partitions=_by_topic(m, a.partitions), user_data=a.user_data))


def decode_assignment(data: bytes) -> Assignment:
    """An empty buffer is an empty assignment (what a coordinator sends a member the leader
    left out)."""
    if not data:
        return Assignment((), None, 0)
    version, e = _decode("assignment", data, ASSIGNMENT_VERSION)
    return Assignment(_flatten(e.assigned_partitions), e.user_data, version)

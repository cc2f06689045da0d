"""The znodes of a cluster: their paths and their JSON, as Kafka's ``ZkData`` writes them.

Pure data: encoding and decoding only, no ZooKeeper calls, so every shape is unit-tested
without a server. Kafka's field names, versions and quirks are kept (block ids as strings,
``brokerid`` without an underscore, the topic id as base64url without padding) so the layout
reads like a Kafka 3.x cluster's. docs/cluster.md lists the layout.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

CLUSTER_ID = "/cluster/id"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
# eoslog's own: the contenders of kazoo's Election recipe (docs/cluster.md).
CONTROLLER_ELECTION = "/controller_election"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
TOPIC_CONFIGS = "/config/topics"
DELETE_TOPICS = "/admin/delete_topics"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
# Reassignments asked for through ZooKeeper (Kafka ≤ 3.x's ReassignPartitionsZNode); the
# controller takes each partition out once its reassignment is done and deletes it when empty.
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
# eoslog's own: replaces Kafka's ControlledShutdown request (docs/cluster.md).
CONTROLLED_SHUTDOWN = "/admin/controlled_shutdown"
# The finalized features (KIP-584), FeatureZNode's JSON: eoslog.features encodes it.
FEATURE = "/feature"
# A broker's log directory failed (KIP-112): it creates a sequential child, the controller reads,
# acts on and deletes it (Kafka's LogDirEventNotificationZNode).
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = f"{LOG_DIR_EVENT_NOTIFICATION}/log_dir_event_"
LOG_DIR_FAILURE_EVENT = 1  # Kafka's LogDirEventNotificationHandler.LogDirFailureEvent

# Created at start-up by every broker (idempotently), as KafkaZkClient.createTopLevelPaths.
PERSISTENT_PATHS = ("/cluster", BROKER_IDS, TOPICS, TOPIC_CONFIGS, DELETE_TOPICS,
                    CONTROLLED_SHUTDOWN, CONTROLLER_ELECTION, LOG_DIR_EVENT_NOTIFICATION)

NO_LEADER = -1  # LeaderAndIsr.NoLeader
INITIAL_LEADER_EPOCH = 0
INITIAL_CONTROLLER_EPOCH = 0


class ZnodeDataError(ValueError):
    """A znode holds something that is not the expected JSON; the message names the path."""


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{TOPIC_CONFIGS}/{topic}"


def controlled_shutdown_path(broker_id: int) -> str:
    return f"{CONTROLLED_SHUTDOWN}/{broker_id}"


def _dumps(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def _loads(path: str, data: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise ZnodeDataError(f"{path}: not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise ZnodeDataError(f"{path}: expected a JSON object, got {data[:80]!r}")
    return doc


def _field(path: str, doc: Mapping[str, Any], key: str) -> Any:
    try:
        return doc[key]
    except KeyError:
        raise ZnodeDataError(f"{path}: no {key!r} in {dict(doc)}") from None


def encode_topic_id(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: base64url of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def decode_topic_id(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


# -- /cluster/id ------------------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str(_field(CLUSTER_ID, _loads(CLUSTER_ID, data), "id"))


# -- /brokers/ids/N ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    host: str
    port: int
    rack: str | None = None
    # The registration znode's czxid (Kafka's broker epoch): tells one life of a broker id
    # from the next. -1 until read back from ZooKeeper.
    epoch: int = -1
    # Every listener's advertised address (name → (host, port)); Metadata answers a client
    # with the addresses of the listener it came in on. Empty: the first one only (PLAINTEXT).
    listeners: dict[str, tuple[str, int]] = field(default_factory=dict, compare=False)

    def address(self, listener: str | None) -> tuple[str, int]:
        return self.listeners.get(listener or "", (self.host, self.port))

    def encode(self, timestamp_ms: int) -> bytes:
        listeners = self.listeners or {"PLAINTEXT": (self.host, self.port)}
        return _dumps({
            "version": 5, "host": self.host, "port": self.port,
            "endpoints": [f"{name}://{h}:{p}" for name, (h, p) in listeners.items()],
            "listener_security_protocol_map": {name: name for name in listeners},
            "jmx_port": -1, "rack": self.rack, "timestamp": str(timestamp_ms), "features": {},
        })

    @classmethod
    def decode(cls, broker_id: int, data: bytes, epoch: int = -1) -> BrokerRegistration:
        path = broker_path(broker_id)
        doc = _loads(path, data)
        listeners = {}
        for endpoint in doc.get("endpoints", []):
            name, _, address = str(endpoint).partition("://")
            h, _, p = address.rpartition(":")
            listeners[name] = (h, int(p))
        host, port = doc.get("host"), doc.get("port")
        if not host or port in (None, -1):
            # v2+ registrations may leave host/port empty and name only endpoints: the first one's.
            if not listeners:
                raise ZnodeDataError(f"{path}: neither host/port nor endpoints in {dict(doc)}")
            host, port = next(iter(listeners.values()))
        rack = doc.get("rack")
        return cls(broker_id, str(host), int(port), None if rack is None else str(rack), epoch, listeners)


# -- /log_dir_event_notification ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LogDirEvent:
    """Kafka's ``{"version":1,"broker":B,"event":1}``, with eoslog's additions: the broker epoch
    of the registration that failed, and its offline partitions (Kafka's controller learns them from
    the LeaderAndIsr answers it then asks for; eoslog's brokers send none)."""

    broker: int
    broker_epoch: int
    partitions: tuple[tuple[str, int], ...]

    def encode(self) -> bytes:
        return _dumps({"version": 1, "broker": self.broker, "event": LOG_DIR_FAILURE_EVENT,
                       "broker_epoch": self.broker_epoch,
                       "partitions": [{"topic": t, "partition": p} for t, p in self.partitions]})

    @classmethod
    def decode(cls, path: str, data: bytes) -> LogDirEvent:
        doc = _loads(path, data)
        try:
            return cls(int(_field(path, doc, "broker")), int(doc.get("broker_epoch", -1)),
                       tuple((str(p["topic"]), int(p["partition"])) for p in doc.get("partitions", ())))
        except (TypeError, KeyError, ValueError) as e:
            raise ZnodeDataError(f"{path}: {e}") from None


# -- /controller, /controller_epoch -----------------------------------------------------------


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return _dumps({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller(data: bytes) -> int:
    return int(_field(CONTROLLER, _loads(CONTROLLER, data), "brokerid"))


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    try:
        return int(data.decode())
    except (ValueError, UnicodeDecodeError):
        raise ZnodeDataError(f"{CONTROLLER_EPOCH}: not an integer: {data[:40]!r}") from None


# -- /brokers/topics/T ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """A topic's replica assignment: partition → replicas, the first one preferred leader.
    While a partition is reassigned (KIP-455) its replicas are the target's followed by the
    original ones not in the target, and ``adding`` / ``removing`` name the difference."""

    topic: str
    topic_id: uuid.UUID
    partitions: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    adding: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    # The znode's version this was read (or written) at; -1 when not known.
    zk_version: int = field(default=-1, compare=False)

    def encode(self) -> bytes:
        return _dumps({
            "version": 3, "topic_id": encode_topic_id(self.topic_id),
            "partitions": {str(p): list(r) for p, r in sorted(self.partitions.items())},
            "adding_replicas": {str(p): list(r) for p, r in sorted(self.adding.items()) if r},
            "removing_replicas": {str(p): list(r) for p, r in sorted(self.removing.items()) if r},
        })

    @classmethod
    def decode(cls, topic: str, data: bytes, zk_version: int = -1) -> TopicAssignment:
        path = topic_path(topic)
        doc = _loads(path, data)
        raw_id = doc.get("topic_id")

        def replica_map(key: str, required: bool) -> dict[int, tuple[int, ...]]:
            raw = _field(path, doc, key) if required else doc.get(key) or {}
            return {int(p): tuple(int(r) for r in replicas) for p, replicas in dict(raw).items()}

        try:
            # Version 1/2 assignments (written before topic ids) get an id from the name:
            # stable across brokers, which is all a reader needs.
            topic_id = decode_topic_id(str(raw_id)) if raw_id else uuid.uuid5(uuid.NAMESPACE_OID, topic)
            partitions = replica_map("partitions", True)
            adding = {p: r for p, r in replica_map("adding_replicas", False).items() if r}
            removing = {p: r for p, r in replica_map("removing_replicas", False).items() if r}
        except (ValueError, TypeError) as e:
            raise ZnodeDataError(f"{path}: malformed assignment ({e})") from None
        return cls(topic, topic_id, partitions, adding, removing, zk_version)

    def at_version(self, zk_version: int) -> TopicAssignment:
        return replace(self, zk_version=zk_version)

    def with_partition(self, partition: int, replicas: tuple[int, ...], adding: tuple[int, ...] = (),
                       removing: tuple[int, ...] = ()) -> TopicAssignment:
        """This assignment with one partition's replicas (and reassignment) replaced."""
        def put(m: Mapping[int, tuple[int, ...]], value: tuple[int, ...]) -> dict[int, tuple[int, ...]]:
            out = {p: r for p, r in m.items() if p != partition}
            if value:
                out[partition] = value
            return out

        return TopicAssignment(self.topic, self.topic_id, put(self.partitions, replicas),
                               put(self.adding, adding), put(self.removing, removing))

    @property
    def reassigning(self) -> frozenset[int]:
        """The partitions being reassigned."""
        return frozenset(self.adding) | frozenset(self.removing)


# -- /admin/reassign_partitions ---------------------------------------------------------------


def encode_reassignments(targets: Mapping[tuple[str, int], Sequence[int]]) -> bytes:
    """ReassignPartitionsZNode's JSON: the target replicas of each partition."""
    return _dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in sorted(targets.items())]})


def decode_reassignments(data: bytes) -> dict[tuple[str, int], tuple[int, ...]]:
    """(topic, partition) → target replicas. A ``log_dirs`` field is read past (eoslog moves
    replicas between a broker's directories with AlterReplicaLogDirs)."""
    doc = _loads(REASSIGN_PARTITIONS, data)
    out: dict[tuple[str, int], tuple[int, ...]] = {}
    try:
        for entry in list(_field(REASSIGN_PARTITIONS, doc, "partitions")):
            out[(str(entry["topic"]), int(entry["partition"]))] = tuple(int(r) for r in entry["replicas"])
    except (KeyError, ValueError, TypeError) as e:
        raise ZnodeDataError(f"{REASSIGN_PARTITIONS}: malformed entry ({e!r})") from None
    return out


# -- /brokers/topics/T/partitions/P/state -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """A partition's leadership as the controller (or, for the ISR, the leader) wrote it."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    # The state znode's version this was read at: the condition of the next update.
    zk_version: int = -1

    def encode(self) -> bytes:
        return _dumps({"controller_epoch": self.controller_epoch, "leader": self.leader,
                       "version": 1, "leader_epoch": self.leader_epoch, "isr": list(self.isr)})

    @classmethod
    def decode(cls, path: str, data: bytes, zk_version: int = -1) -> LeaderAndIsr:
        doc = _loads(path, data)
        try:
            return cls(int(_field(path, doc, "leader")), int(_field(path, doc, "leader_epoch")),
                       tuple(int(r) for r in _field(path, doc, "isr")),
                       int(_field(path, doc, "controller_epoch")), zk_version)
        except (ValueError, TypeError) as e:
            raise ZnodeDataError(f"{path}: malformed partition state ({e})") from None

    def new_leader(self, leader: int, isr: tuple[int, ...], controller_epoch: int) -> LeaderAndIsr:
        """A leader change: the epoch moves on, so every replica learns of it."""
        return LeaderAndIsr(leader, self.leader_epoch + 1, isr, controller_epoch, self.zk_version)

    def with_isr(self, isr: tuple[int, ...]) -> LeaderAndIsr:
        """An ISR change by the leader: same leader, same epoch (Kafka ≤ 2.6)."""
        return LeaderAndIsr(self.leader, self.leader_epoch, isr, self.controller_epoch, self.zk_version)


# -- /latest_producer_id_block ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """Producer ids ``first``..``last`` (inclusive) handed to ``broker``."""

    broker: int
    first: int
    last: int

    def encode(self) -> bytes:
        # Kafka writes the bounds as JSON strings (they are Longs).
        return _dumps({"version": 1, "broker": self.broker,
                       "block_start": str(self.first), "block_end": str(self.last)})

    @classmethod
    def decode(cls, data: bytes) -> ProducerIdBlock:
        doc = _loads(PRODUCER_ID_BLOCK, data)
        try:
            return cls(int(_field(PRODUCER_ID_BLOCK, doc, "broker")),
                       int(_field(PRODUCER_ID_BLOCK, doc, "block_start")),
                       int(_field(PRODUCER_ID_BLOCK, doc, "block_end")))
        except (ValueError, TypeError) as e:
            raise ZnodeDataError(f"{PRODUCER_ID_BLOCK}: malformed block ({e})") from None


# -- /config/topics/T -------------------------------------------------------------------------


def encode_topic_config(overrides: Mapping[str, Any]) -> bytes:
    return _dumps({"version": 1, "config": {k: str(v) for k, v in sorted(overrides.items())}})


def decode_topic_config(topic: str, data: bytes) -> dict[str, str]:
    if not data:
        return {}
    doc = _loads(topic_config_path(topic), data)
    return {str(k): str(v) for k, v in dict(doc.get("config") or {}).items()}

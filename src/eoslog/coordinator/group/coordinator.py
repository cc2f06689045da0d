"""The group coordinator: every classic group of this broker and their committed offsets.

Jobs (Kafka's ``GroupCoordinator`` + ``GroupMetadataManager``):

- own the ``__consumer_offsets`` partitions (all of them: one node) and load each one at
  start-up; a group whose partition is still loading answers COORDINATOR_LOAD_IN_PROGRESS;
- route the membership APIs to the ``Rebalancer`` and persist what it decides;
- commit, fetch, delete and expire offsets, including transactional commits that wait
  for their transaction's marker (``commit_transactional_offsets`` and
  ``complete_transaction`` are the transaction coordinator's entry points);
- describe, list and delete groups.

Everything runs on the broker's event loop; there are no locks. Results are Kafka's
errors (``Errors.NONE``, ``Errors.NOT_COORDINATOR``, ...); handlers map them to codes. Appends to
``__consumer_offsets`` are synchronous, so a commit is durable (in the OS) when the
call returns — what Kafka's acks=all gives a single-replica log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass

from eoslog.config import BrokerConfig
from eoslog.coordinator.group.assignors import parse_assignors
from eoslog.coordinator.group.consumer_group import ConsumerGroup, ConsumerGroupMember, ConsumerGroupState
from eoslog.coordinator.group.consumer_groups import ConsumerGroupCoordinator, ConsumerGroupSettings
from eoslog.coordinator.group.consumer_records import ClassicMetadata, is_consumer_key
from eoslog.coordinator.group.consumer_records import decode as decode_consumer_record
from eoslog.coordinator.group.group import GroupMetadata, GroupSummary
from eoslog.coordinator.group.loader import load_partition
from eoslog.coordinator.group.member import JoinCallback, JoinResult, MemberMetadata, SyncCallback, SyncResult
from eoslog.coordinator.group.offsets import CommitRecord, GroupOffsets, OffsetAndMetadata
from eoslog.coordinator.group.offsets_topic import (
    OFFSETS_TOPIC,
    CoordinatorAppendError,
    KeyValue,
    OffsetsTopic,
    OffsetsTopicConfig,
)
from eoslog.coordinator.group.rebalance import (
    JoinRequest,
    RebalanceConfig,
    Rebalancer,
    SyncRequest,
    validate_member,
)
from eoslog.coordinator.group.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    offsets_partition_for,
)
from eoslog.coordinator.group.share_groups import ShareGroupCoordinator, ShareGroupSettings
from eoslog.coordinator.group.share_records import decode as decode_share_record
from eoslog.coordinator.group.share_records import is_share_key
from eoslog.coordinator.group.state import GroupState
from eoslog.coordinator.internal_topic import drive_loader, finish_loader
from eoslog.coordinator.record_codec import CoordinatorRecordError
from eoslog.coordinator.timers import AsyncioScheduler, Scheduler
from eoslog.errors import Errors
from eoslog.protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ProtocolError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from eoslog.protocol.consumer_protocol import Assignment as ProtocolAssignment
from eoslog.records import CompressionType
from eoslog.replica import ReplicaManager
from eoslog.types import TopicPartition

log = logging.getLogger(__name__)

# Storage errors → what a client should see (Kafka's GroupMetadataManager mappings).
_STORE_GROUP_ERRORS = {
    Errors.UNKNOWN_TOPIC_OR_PARTITION: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_LEADER_OR_FOLLOWER: Errors.NOT_COORDINATOR,
    Errors.KAFKA_STORAGE_ERROR: Errors.NOT_COORDINATOR,
    Errors.MESSAGE_TOO_LARGE: Errors.UNKNOWN_SERVER_ERROR,
    Errors.RECORD_LIST_TOO_LARGE: Errors.UNKNOWN_SERVER_ERROR,
}
_STORE_OFFSETS_ERRORS = {
    **_STORE_GROUP_ERRORS,
    Errors.MESSAGE_TOO_LARGE: Errors.INVALID_COMMIT_OFFSET_SIZE,
    Errors.RECORD_LIST_TOO_LARGE: Errors.INVALID_COMMIT_OFFSET_SIZE,
}


def _constant(timestamp: int) -> Callable[[OffsetAndMetadata], int]:
    return lambda _: timestamp


_SHARE_DEFAULTS = ShareGroupSettings(45_000, 5_000, 200)
_CONSUMER_DEFAULTS = ConsumerGroupSettings()


@dataclass(frozen=True, slots=True)
class GroupConfig:
    rebalance: RebalanceConfig
    offsets_retention_ms: int
    offset_metadata_max_bytes: int
    load_buffer_bytes: int
    share: ShareGroupSettings = _SHARE_DEFAULTS  # the broker's; groups may override
    consumer: ConsumerGroupSettings = _CONSUMER_DEFAULTS  # the broker's; groups may override

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> GroupConfig:
        return cls(
            RebalanceConfig(
                int(config["group.min.session.timeout.ms"]),
                int(config["group.max.session.timeout.ms"]),
                int(config["group.initial.rebalance.delay.ms"]),
                int(config["group.max.size"]),
            ),
            offsets_retention_ms=int(config["offsets.retention.minutes"]) * 60_000,
            offset_metadata_max_bytes=int(config["offset.metadata.max.bytes"]),
            load_buffer_bytes=int(config["offsets.load.buffer.size"]),
            share=ShareGroupSettings(int(config["group.share.session.timeout.ms"]),
                                     int(config["group.share.heartbeat.interval.ms"]),
                                     int(config["group.share.max.size"])),
            consumer=consumer_settings(config, lambda key: config[f"group.{key}"]),
        )


def consumer_settings(config: BrokerConfig, value: Callable[[str], object]) -> ConsumerGroupSettings:
    """A consumer group's settings: ``value(key)`` gives a group config (``consumer.*``) — the
    group's own or the broker's ``group.consumer.*``; the rest are the broker's."""
    return ConsumerGroupSettings(
        session_timeout_ms=int(str(value("consumer.session.timeout.ms"))),
        heartbeat_interval_ms=int(str(value("consumer.heartbeat.interval.ms"))),
        max_size=int(config["group.consumer.max.size"]),
        assignors=tuple(parse_assignors(str(config["group.consumer.assignors"]))),
        assignment_interval_ms=int(str(value("consumer.assignment.interval.ms"))),
        migration_policy=str(config["group.consumer.migration.policy"]).lower(),
        classic_max_size=int(config["group.max.size"]),
    )


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: GroupState


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    tp: TopicPartition
    offset: OffsetAndMetadata | None
    error: Errors = Errors.NONE


class GroupCoordinator:
    def __init__(self, config: GroupConfig, topic: OffsetsTopic, scheduler: Scheduler) -> None:
        self.config = config
        self.topic = topic
        self.scheduler = scheduler
        self.rebalancer = Rebalancer(config.rebalance, scheduler, self)
        self.groups: dict[str, GroupMetadata] = {}
        self._owned: set[int] = set()  # loaded partitions this coordinator serves
        self._loading: set[int] = set()
        self._loading_epoch: dict[int, int] = {}  # cluster mode: the leader epoch being loaded
        self._active = True
        # Share groups (KIP-932): their own members and records, this coordinator's partitions.
        # The broker sets their settings (group configs), topic metadata and share state persister.
        self.share = ShareGroupCoordinator(topic, scheduler, self.partition_for, self._status,
                                           lambda _group_id: config.share, dict)
        # Consumer groups (KIP-848): the same shape, beside the classic groups.
        self.consumer = ConsumerGroupCoordinator(topic, scheduler, self.partition_for, self._status,
                                                 lambda _group_id: config.consumer, dict)
        self.consumer.other_group_type = self.other_group_type
        self.consumer.upgrade_classic = self._consumer_group_in_place_of
        self.consumer.on_classic_replaced = self._forget_classic_group
        self.consumer.on_member_fenced.append(self._maybe_downgrade)
        self.consumer.on_static_member_replaced = self._maybe_downgrade_on_replacement
        self.share.is_classic_group = lambda gid: gid in self.groups or gid in self.consumer.groups

    @classmethod
    def for_broker(
        cls, config: BrokerConfig, replicas: ReplicaManager, clock_ms: Callable[[], int]
    ) -> GroupCoordinator:
        """The coordinator of a running broker: its partitions, timers on the event loop.
        Markers written to ``__consumer_offsets`` complete its transactional offset commits."""
        topic = OffsetsTopic(
            replicas,
            OffsetsTopicConfig(
                int(config["offsets.topic.num.partitions"]),
                int(config["offsets.topic.segment.bytes"]),
                CompressionType(int(config["offsets.topic.compression.codec"])),
            ),
            clock_ms,
        )
        coordinator = cls(GroupConfig.from_broker_config(config), topic, AsyncioScheduler(clock_ms))
        replicas.on_txn_marker(OFFSETS_TOPIC, coordinator.complete_transaction)
        return coordinator

    def other_group_type(self, group_id: str) -> str | None:
        """Which kind of group other than a consumer one holds ``group_id`` ("classic", "share")."""
        if group_id in self.groups:
            return "classic"
        if group_id in self.share.groups:
            return "share"
        return None

    # -- an empty group of one protocol gives way to the other's (Kafka's maybeDeleteEmpty*Group) -----

    def _consumer_group_in_place_of(self, group_id: str,
                                    settings: ConsumerGroupSettings) -> tuple[ConsumerGroup, list[KeyValue]] | None:
        """A ConsumerGroupHeartbeat joining a classic group: a consumer group takes its place and its
        offsets — an empty one's (members all gone, or only offsets committed) always, one with members
        (the online upgrade) if group.consumer.migration.policy allows it and they use the consumer
        protocol; they stay, speaking JoinGroup/SyncGroup to the consumer group. The classic group's
        tombstone and the consumer group's records go in the batch of the joining member's.
        None: refused."""
        classic = self.groups.get(group_id)
        if classic is None:
            return None
        tombstone = self._tombstones(classic, (), with_group=True)
        if classic.is_(GroupState.EMPTY):
            group = ConsumerGroup(group_id)
            group.offsets = classic.offsets
            return group, tombstone
        if not settings.upgrade_enabled or classic.protocol_type != CONSUMER_PROTOCOL_TYPE \
                or classic.protocol_name is None or len(classic.members) > settings.max_size:
            return None
        members = []
        try:
            for m in classic.members.values():
                subscription = decode_subscription(m.metadata(classic.protocol_name))
                assigned = decode_assignment(m.assignment).partitions
                members.append((ConsumerGroupMember(
                    m.member_id, instance_id=m.group_instance_id, rack_id=subscription.rack_id,
                    rebalance_timeout_ms=m.rebalance_timeout_ms, client_id=m.client_id, client_host=m.client_host,
                    subscribed_topic_names=tuple(subscription.topics),
                    classic=ClassicMetadata(m.session_timeout_ms, tuple(m.protocols))), assigned))
        except (ProtocolError, KeyError) as e:
            log.warning("[GroupId %s] Cannot upgrade the classic group: its consumer protocol is malformed: %s",
                        group_id, e)
            return None
        group, records = self.consumer.from_classic_members(group_id, classic.generation_id, members)
        group.offsets = classic.offsets
        return group, tombstone + records

    def _forget_classic_group(self, group_id: str) -> None:
        classic = self.groups.pop(group_id, None)
        if classic is not None:
            log.info("[GroupId %s] Converted the classic group to a consumer group.", group_id)
            classic.transition_to(GroupState.DEAD, self.scheduler.now_ms())
            # Members waiting in a join or sync phase rejoin, now into the consumer group.
            self.rebalancer.unload(classic, Errors.REBALANCE_IN_PROGRESS)

    def _classic_group_in_place_of(self, consumer: ConsumerGroup) -> Errors:
        """A JoinGroup to an empty consumer group: its records become tombstones and a classic group
        takes its place and its offsets."""
        offsets = consumer.offsets
        error = self.consumer.remove(consumer)
        if error == Errors.NONE:
            log.info("[GroupId %s] Converted the empty consumer group to a classic group.", consumer.group_id)
            classic = self.groups[consumer.group_id] = GroupMetadata(
                consumer.group_id, GroupState.EMPTY, self.scheduler.now_ms())
            classic.offsets = offsets
        return error

    def _maybe_downgrade(self, consumer: ConsumerGroup, leaving: str) -> None:
        """Kafka's online downgrade: the last consumer-protocol member leaving a group whose others all
        use the classic protocol (group.consumer.migration.policy allowing it, group.max.size not
        exceeded) turns it into a classic group — its members with their target assignments at the
        group epoch, written in one batch with the consumer group's tombstones — which then rebalances."""
        settings = self.config.consumer
        others = [m for mid, m in consumer.members.items() if mid != leaving]
        if not others or any(m.classic is None for m in others) or not settings.downgrade_enabled \
                or len(others) > settings.classic_max_size:
            return
        self._convert_to_classic(consumer, others, rebalance=True)

    def _maybe_downgrade_on_replacement(self, consumer: ConsumerGroup) -> bool:
        """Kafka's downgrade when the last consumer-protocol member, a static one, was replaced by a
        classic JoinGroup with its group.instance.id: the group becomes a classic group at once —
        Stable, the joining member with the target it took over, no rebalance. True when it did."""
        settings = self.config.consumer
        members = list(consumer.members.values())
        if not members or any(m.classic is None for m in members) or not settings.downgrade_enabled \
                or len(members) > settings.classic_max_size:
            return False
        return self._convert_to_classic(consumer, members, rebalance=False)

    def _convert_to_classic(self, consumer: ConsumerGroup, others: list[ConsumerGroupMember], *,
                            rebalance: bool) -> bool:
        """A consumer group whose members (``others``) all use the classic protocol becomes a classic
        group at its group epoch, written with its tombstones in one batch (Kafka's convertToClassicGroup)."""
        gid, now = consumer.group_id, self.scheduler.now_ms()
        classic = GroupMetadata(gid, GroupState.STABLE, now)
        classic.generation_id = consumer.group_epoch
        for m in others:
            assert m.classic is not None
            classic.add(MemberMetadata(m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                                       m.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE, m.classic.protocols))
        classic.protocol_name = classic.select_protocol()
        names = {topic_id: name for name, (topic_id, _) in self.consumer.topics().items()}
        assignments: dict[str, bytes] = {}
        for m in others:
            try:
                version = decode_subscription(classic.get(m.member_id).metadata(classic.protocol_name)).version
            except (ProtocolError, KeyError):
                version = 0
            target = consumer.target.get(m.member_id, {})
            partitions = tuple(sorted(TopicPartition(names[t], p) for t, ps in target.items() if t in names
                                      for p in ps))
            assignments[m.member_id] = classic.get(m.member_id).assignment = encode_assignment(
                ProtocolAssignment(partitions, None, min(version, 3)))
        record = (encode_group_metadata_key(GroupMetadataKey(gid)),
                  encode_group_metadata_value(classic.to_record(assignments, now)))
        if self.consumer.remove(consumer, [record]) != Errors.NONE:
            return False  # stays a consumer group; the member is fenced from it as usual
        log.info("[GroupId %s] Converted the consumer group to a classic group.", gid)
        classic.offsets = consumer.offsets
        self.groups[gid] = classic
        for member in classic.members.values():
            self.rebalancer.schedule_heartbeat(classic, member)
        if rebalance:
            self.rebalancer.rebalance(classic, f"Downgrade group {gid} from consumer to classic.")
        return True

    def offsets_of(self, group_id: str) -> GroupOffsets | None:
        """The committed offsets of whichever group holds ``group_id``."""
        consumer = self.consumer.groups.get(group_id)
        if consumer is not None:
            return consumer.offsets
        classic = self.groups.get(group_id)
        return classic.offsets if classic is not None else None

    # -- partitions and loading ---------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return offsets_partition_for(group_id, self.topic.num_partitions)

    def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` on first use (FindCoordinator), as Kafka does; a
        new topic has nothing to load."""
        if self.topic.create():
            self._owned.update(range(self.topic.num_partitions))
            log.info("created %s with %d partitions", "__consumer_offsets", self.topic.num_partitions)

    def begin_loading(self) -> list[int]:
        """Mark every existing partition as loading (before the listener opens)."""
        if not self.topic.exists:
            return []
        self._loading = set(range(self.topic.num_partitions))
        return sorted(self._loading)

    def _loader(self, partition: int, others: list[tuple[bytes, bytes | None]]) -> Generator[
            None, None, dict[str, GroupMetadata]]:
        return load_partition(self.topic, partition, self.scheduler.now_ms(), self.config.load_buffer_bytes, others)

    def load_partition_now(self, partition: int) -> None:
        """Load one partition synchronously (tests, and the async loader's steps)."""
        others: list[tuple[bytes, bytes | None]] = []
        self._on_partition_loaded(partition, finish_loader(self._loader(partition, others)), others)

    async def load_all(self) -> None:
        """Load every partition marked by ``begin_loading``, yielding between chunks."""
        for partition in sorted(self._loading):
            others: list[tuple[bytes, bytes | None]] = []
            groups = await drive_loader(self._loader(partition, others), f"{self.topic.name}-{partition}")
            if groups is not None:
                self._on_partition_loaded(partition, groups, others)
            await asyncio.sleep(0)

    async def become_leader(self, partition: int, leader_epoch: int) -> None:
        """Cluster mode: load a ``__consumer_offsets`` partition this broker now leads
        (COORDINATOR_LOAD_IN_PROGRESS meanwhile), as Kafka's onElection."""
        self._owned.discard(partition)
        self._loading.add(partition)
        self._loading_epoch[partition] = leader_epoch
        others: list[tuple[bytes, bytes | None]] = []
        groups = await drive_loader(self._loader(partition, others), f"{self.topic.name}-{partition}")
        if groups is not None and self._loading_epoch.get(partition) == leader_epoch:
            del self._loading_epoch[partition]
            self._on_partition_loaded(partition, groups, others)

    def resign(self, partition: int) -> None:
        """Cluster mode: another broker leads the partition: its groups go, whoever waits in
        them gets NOT_COORDINATOR (Kafka's onResignation)."""
        self._owned.discard(partition)
        self._loading.discard(partition)
        self._loading_epoch.pop(partition, None)
        for group_id in [g for g in self.groups if self.partition_for(g) == partition]:
            self.rebalancer.unload(self.groups.pop(group_id), Errors.NOT_COORDINATOR)
        self.share.unload(partition)
        self.consumer.unload(partition)

    def _on_partition_loaded(self, partition: int, groups: dict[str, GroupMetadata],
                             others: Sequence[tuple[bytes, bytes | None]] = ()) -> None:
        if not self._active:
            return
        for key, value in others:
            try:
                if is_share_key(key):
                    self.share.replay(decode_share_record(key, value))
                elif is_consumer_key(key):
                    self.consumer.replay(decode_consumer_record(key, value))
            except CoordinatorRecordError as e:
                log.error("%s-%d: skipping an undecodable group record: %s", OFFSETS_TOPIC, partition, e)
        self.share.loaded(partition)
        for group_id in [g for g in groups if g in self.consumer.groups]:
            # A consumer group's offsets were replayed into a classic group without metadata.
            self.consumer.groups[group_id].offsets = groups.pop(group_id).offsets
        self.consumer.loaded(partition)
        for group_id, group in groups.items():
            self.groups[group_id] = group
            # Members stored as Stable must heartbeat within their session or go.
            for member in group.members.values():
                self.rebalancer.schedule_heartbeat(group, member)
        self._loading.discard(partition)
        self._owned.add(partition)

    @property
    def is_loading(self) -> bool:
        return bool(self._loading)

    def owns_partition(self, partition: int) -> bool:
        return partition in self._owned

    def serves(self, group_id: str) -> bool:
        return self._status(group_id, allow_empty_id=True) == Errors.NONE

    def _status(self, group_id: str, allow_empty_id: bool = False) -> Errors:
        """Can this coordinator serve ``group_id`` now? (Kafka's validateGroupStatus)."""
        if not group_id and not allow_empty_id:
            return Errors.INVALID_GROUP_ID
        if not self._active:
            return Errors.NOT_COORDINATOR
        if not self.topic.exists:
            return Errors.NOT_COORDINATOR
        partition = self.partition_for(group_id)
        if partition in self._loading:
            return Errors.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self._owned:
            return Errors.NOT_COORDINATOR
        return Errors.NONE

    # -- membership ---------------------------------------------------------------------

    def join_group(self, req: JoinRequest, callback: JoinCallback) -> None:
        error = self._status(req.group_id)
        if error == Errors.NONE and req.group_id in self.share.groups:
            error = Errors.INCONSISTENT_GROUP_PROTOCOL  # a share group's id, as Kafka answers
        consumer = self.consumer.groups.get(req.group_id)
        if error == Errors.NONE:
            error = self.rebalancer.check_session_timeout(req.session_timeout_ms)
        if error == Errors.NONE and consumer is not None and consumer.members:
            self.consumer.classic_join(consumer, req, callback)  # a classic member of a consumer group
            return
        if error == Errors.NONE and consumer is not None:
            error = self._classic_group_in_place_of(consumer)  # an empty one gives way
        if error != Errors.NONE:
            callback(JoinResult(error, req.member_id))
            return
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_id:
                callback(JoinResult(Errors.UNKNOWN_MEMBER_ID, req.member_id))
                return
            group = self.groups[req.group_id] = GroupMetadata(
                req.group_id, GroupState.EMPTY, self.scheduler.now_ms()
            )
        self.rebalancer.join(group, req, callback)

    def sync_group(self, req: SyncRequest, callback: SyncCallback) -> None:
        error = self._status(req.group_id)
        if error == Errors.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance in progress was lost with the old coordinator: rejoin.
            error = Errors.REBALANCE_IN_PROGRESS
        if error != Errors.NONE:
            callback(SyncResult(error))
            return
        consumer = self.consumer.groups.get(req.group_id)
        if consumer is not None:
            self.consumer.classic_sync(consumer, req, callback)
            return
        group = self.groups.get(req.group_id)
        if group is None:
            callback(SyncResult(Errors.UNKNOWN_MEMBER_ID))
            return
        self.rebalancer.sync(group, req, callback)

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> Errors:
        error = self._status(group_id)
        if error == Errors.COORDINATOR_LOAD_IN_PROGRESS:
            return Errors.NONE  # the group is loading: answer blindly, as Kafka does
        if error != Errors.NONE:
            return error
        consumer = self.consumer.groups.get(group_id)
        if consumer is not None:
            return self.consumer.classic_heartbeat(consumer, member_id, group_instance_id, generation_id)
        group = self.groups.get(group_id)
        if group is None:
            return Errors.UNKNOWN_MEMBER_ID
        return self.rebalancer.heartbeat(group, member_id, group_instance_id, generation_id)

    def leave_group(
        self, group_id: str, members: Iterable[tuple[str, str | None, str | None]]
    ) -> tuple[Errors, list[Errors]]:
        """(member id, group instance id, reason) per leaving member →
        (group error, one error per member)."""
        leaving = list(members)
        error = self._status(group_id)
        if error != Errors.NONE:
            return error, []
        consumer = self.consumer.groups.get(group_id)
        if consumer is not None:
            return Errors.NONE, [self.consumer.classic_leave(consumer, mid, iid) for mid, iid, _ in leaving]
        group = self.groups.get(group_id)
        if group is None:
            return Errors.NONE, [Errors.UNKNOWN_MEMBER_ID] * len(leaving)
        if group.is_(GroupState.DEAD):
            return Errors.COORDINATOR_NOT_AVAILABLE, []
        return Errors.NONE, [self.rebalancer.leave(group, mid, iid, reason) for mid, iid, reason in leaving]

    # -- persistence --------------------------------------------------------------------------

    def store_group(self, group: GroupMetadata, assignment: dict[str, bytes]) -> Errors:
        value = group.to_record(assignment, self.scheduler.now_ms())
        record = (
            encode_group_metadata_key(GroupMetadataKey(group.group_id)),
            encode_group_metadata_value(value),
        )
        try:
            self.topic.append(self.partition_for(group.group_id), [record])
        except CoordinatorAppendError as e:
            log.error("failed to store group %s generation %d: %s", group.group_id, group.generation_id, e)
            return _STORE_GROUP_ERRORS.get(e.error, e.error)
        return Errors.NONE

    def _append(self, group_id: str, records: list[KeyValue], *, producer_id: int = -1,
                producer_epoch: int = -1, transactional: bool = False) -> tuple[Errors, int]:
        """Append records of one group's partition → (error, base offset)."""
        try:
            base = self.topic.append(
                self.partition_for(group_id), records, producer_id=producer_id,
                producer_epoch=producer_epoch, transactional=transactional,
            )
        except CoordinatorAppendError as e:
            log.error("failed to append to __consumer_offsets for group %s: %s", group_id, e)
            return _STORE_OFFSETS_ERRORS.get(e.error, e.error), -1
        return Errors.NONE, base

    def _tombstones(self, group: GroupMetadata, tps: Iterable[TopicPartition],
                    with_group: bool) -> list[KeyValue]:
        out: list[KeyValue] = [
            (encode_offset_commit_key(OffsetCommitKey(group.group_id, tp.topic, tp.partition)), None)
            for tp in tps
        ]
        # A group that never completed a rebalance (generation 0) has no metadata record.
        if with_group and group.generation_id > 0:
            out.append((encode_group_metadata_key(GroupMetadataKey(group.group_id)), None))
        return out

    # -- offsets -------------------------------------------------------------------------------

    def _validate_offset_commit(self, group: GroupMetadata, member_id: str,
                                group_instance_id: str | None, generation_id: int) -> Errors:
        """Kafka's ClassicGroup.validateOffsetCommit."""
        if group.is_(GroupState.DEAD):
            return Errors.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_(GroupState.EMPTY):
            return Errors.NONE  # a standalone (assign()) consumer, using Kafka only to store offsets
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = validate_member(group, member_id, group_instance_id)
            if error != Errors.NONE:
                return error
            if generation_id != group.generation_id:
                return Errors.ILLEGAL_GENERATION
        elif not group.is_(GroupState.EMPTY):
            return Errors.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.COMPLETING_REBALANCE):
            return Errors.REBALANCE_IN_PROGRESS
        return Errors.NONE

    def _offset_records(
        self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata],
        errors: dict[TopicPartition, Errors],
    ) -> tuple[list[KeyValue], dict[TopicPartition, OffsetAndMetadata]]:
        records: list[KeyValue] = []
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, value in offsets.items():
            if len(value.metadata.encode()) > self.config.offset_metadata_max_bytes:
                errors[tp] = Errors.OFFSET_METADATA_TOO_LARGE
                continue
            valid[tp] = value
            records.append((
                encode_offset_commit_key(OffsetCommitKey(group_id, tp.topic, tp.partition)),
                encode_offset_commit_value(OffsetCommitValue(
                    value.offset, value.metadata, value.commit_timestamp, value.leader_epoch,
                    value.expire_timestamp,
                )),
            ))
        return records, valid

    def commit_offsets(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
        offsets: Mapping[TopicPartition, OffsetAndMetadata], api_version: int = 9,
    ) -> dict[TopicPartition, Errors]:
        """OffsetCommit → an error per partition."""
        error = self._status(group_id, allow_empty_id=True)
        if error == Errors.NONE and group_id in self.share.groups:
            error = Errors.GROUP_ID_NOT_FOUND  # share groups have no committed offsets
        consumer = self.consumer.groups.get(group_id)
        if error == Errors.NONE and consumer is not None:
            errors = self._check_consumer_commit(consumer, member_id, group_instance_id, generation_id, offsets,
                                                 False, api_version)
            return self._store_offsets(group_id, consumer.offsets, offsets, errors)
        group = self.groups.get(group_id)
        if error == Errors.NONE and group is None:
            if generation_id < 0:
                group = self.groups[group_id] = GroupMetadata(
                    group_id, GroupState.EMPTY, self.scheduler.now_ms()
                )
            else:
                error = Errors.ILLEGAL_GENERATION
        if error == Errors.NONE and group is not None:
            error = self._validate_offset_commit(group, member_id, group_instance_id, generation_id)
        if error != Errors.NONE or group is None:
            return dict.fromkeys(offsets, error)
        if member_id in group.members:
            self.rebalancer.schedule_heartbeat(group, group.get(member_id))
        return self._store_offsets(group_id, group.offsets, offsets, {})

    def _check_consumer_commit(self, group: ConsumerGroup, member_id: str, instance_id: str | None, epoch: int,
                               offsets: Mapping[TopicPartition, OffsetAndMetadata], transactional: bool,
                               api_version: int) -> dict[TopicPartition, Errors]:
        """KIP-848: a commit carries the member's epoch; a stale one is refused per partition
        (STALE_MEMBER_EPOCH), so a zombie that lost its partitions cannot commit."""
        error, _, check = group.validate_offset_commit(member_id, instance_id, epoch, transactional, api_version)
        if error != Errors.NONE:
            return dict.fromkeys(offsets, error)
        topics = self.consumer.topics()
        errors: dict[TopicPartition, Errors] = {}
        for tp in offsets:
            meta = topics.get(tp.topic)
            if meta is None:
                continue  # an unknown topic: the handler has answered it
            partition_error, _ = check(meta[0], tp.partition, tp.topic)
            if partition_error != Errors.NONE:
                errors[tp] = partition_error
        return errors

    def _store_offsets(self, group_id: str, holder: GroupOffsets, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                       errors: dict[TopicPartition, Errors], producer_id: int | None = None,
                       producer_epoch: int = -1) -> dict[TopicPartition, Errors]:
        """Append the offsets not refused in ``errors``; on success they are committed (or pending
        in the producer's transaction)."""
        wanted = {tp: v for tp, v in offsets.items() if tp not in errors}
        records, valid = self._offset_records(group_id, wanted, errors)
        if records:
            if producer_id is None:
                error, base = self._append(group_id, records)
            else:
                error, base = self._append(group_id, records, producer_id=producer_id,
                                           producer_epoch=producer_epoch, transactional=True)
            for tp, value in valid.items():
                errors[tp] = error
                if error != Errors.NONE:
                    continue
                if producer_id is None:
                    holder.commit(tp, CommitRecord(base, value))
                else:
                    holder.prepare_txn(producer_id, tp, CommitRecord(base, value))
        return errors

    def commit_transactional_offsets(
        self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
        group_instance_id: str | None, generation_id: int,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, Errors]:
        """TxnOffsetCommit: the offsets are written inside the producer's transaction and
        stay pending until ``complete_transaction`` sees its marker."""
        error = self._status(group_id, allow_empty_id=True)
        if error == Errors.NONE and group_id in self.share.groups:
            error = Errors.GROUP_ID_NOT_FOUND
        consumer = self.consumer.groups.get(group_id)
        if error == Errors.NONE and consumer is not None:
            errors = self._check_consumer_commit(consumer, member_id, group_instance_id, generation_id, offsets,
                                                 True, 5)
            return self._store_offsets(group_id, consumer.offsets, offsets, errors, producer_id, producer_epoch)
        group = self.groups.get(group_id)
        if error == Errors.NONE and group is None:
            group = self.groups[group_id] = GroupMetadata(group_id, GroupState.EMPTY, self.scheduler.now_ms())
        if error == Errors.NONE and group is not None:
            # KIP-447: the member and generation are checked only when the producer sent them.
            if group.is_(GroupState.DEAD):
                error = Errors.COORDINATOR_NOT_AVAILABLE
            elif group_instance_id is not None and group.static_member_id(group_instance_id) not in (
                None, member_id
            ):
                error = Errors.FENCED_INSTANCE_ID
            elif member_id and not group.has(member_id):
                error = Errors.UNKNOWN_MEMBER_ID
            elif generation_id >= 0 and generation_id != group.generation_id:
                error = Errors.ILLEGAL_GENERATION
        if error != Errors.NONE or group is None:
            return dict.fromkeys(offsets, error)
        return self._store_offsets(group_id, group.offsets, offsets, {}, producer_id, producer_epoch)

    def complete_transaction(self, offsets_partition: int, producer_id: int, committed: bool) -> None:
        """A COMMIT or ABORT marker of ``producer_id`` is now in ``__consumer_offsets-N``."""
        holders = [(g.group_id, g.offsets) for g in self.groups.values()]
        holders += [(g.group_id, g.offsets) for g in self.consumer.groups.values()]
        for group_id, offsets in holders:
            if self.partition_for(group_id) == offsets_partition and offsets.has_pending_from(producer_id):
                offsets.complete_txn(producer_id, committed)

    def fetch_offsets(
        self, group_id: str, tps: list[TopicPartition] | None, require_stable: bool,
        member_id: str | None = None, member_epoch: int = -1,
    ) -> tuple[Errors, list[FetchedOffset]]:
        """OffsetFetch → (group error, offsets); ``tps`` None means every committed offset. A
        member of a consumer group (OffsetFetch v9+) must give its current epoch."""
        error = self._status(group_id, allow_empty_id=True)
        if error != Errors.NONE:
            return error, []
        consumer = self.consumer.groups.get(group_id)
        if consumer is not None:
            error = consumer.validate_offset_fetch(member_id, member_epoch)
            if error != Errors.NONE:
                return error, []
            offsets = consumer.offsets
        else:
            group = self.groups.get(group_id)
            if group is None or group.is_(GroupState.DEAD):
                return Errors.NONE, [FetchedOffset(tp, None) for tp in tps or []]
            offsets = group.offsets
        wanted = tps if tps is not None else sorted(offsets.committed)
        out = []
        for tp in wanted:
            if require_stable and offsets.has_pending(tp):
                out.append(FetchedOffset(tp, None, Errors.UNSTABLE_OFFSET_COMMIT))
            else:
                out.append(FetchedOffset(tp, offsets.get(tp)))
        return Errors.NONE, out

    def delete_offsets(
        self, group_id: str, tps: list[TopicPartition]
    ) -> tuple[Errors, dict[TopicPartition, Errors]]:
        """OffsetDelete: only for an empty group, or for topics a consumer group no longer
        subscribes to."""
        error = self._status(group_id, allow_empty_id=True)
        if error != Errors.NONE:
            return error, {}
        consumer = self.consumer.groups.get(group_id)
        if consumer is not None:
            return Errors.NONE, self._delete_consumer_offsets(consumer, tps)
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return Errors.GROUP_ID_NOT_FOUND, {}
        errors: dict[TopicPartition, Errors] = {}
        if group.is_(GroupState.EMPTY):
            eligible = list(tps)
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            eligible = []
            for tp in tps:
                if group.is_subscribed_to(tp.topic):
                    errors[tp] = Errors.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    eligible.append(tp)
        else:
            return Errors.NON_EMPTY_GROUP, {}
        if eligible:
            self._remove_offsets(group, eligible)
            errors.update(dict.fromkeys(eligible, Errors.NONE))
        return Errors.NONE, errors

    def _delete_consumer_offsets(self, group: ConsumerGroup, tps: list[TopicPartition]) -> dict[TopicPartition, Errors]:
        """A consumer group's offsets of topics none of its members subscribes to (any, if empty)."""
        subscribed = group.subscribed_topic_names()
        errors = {tp: Errors.GROUP_SUBSCRIBED_TO_TOPIC for tp in tps if subscribed[tp.topic] > 0}
        eligible = [tp for tp in tps if tp not in errors]
        removed = group.offsets.remove(eligible)
        if removed:
            error, _ = self._append(group.group_id, self._offset_tombstones(group.group_id, removed))
            if error != Errors.NONE:
                log.warning("tombstones for group %s not written: %s", group.group_id, error)
        errors.update(dict.fromkeys(eligible, Errors.NONE))
        return errors

    def _offset_tombstones(self, group_id: str, tps: Iterable[TopicPartition]) -> list[KeyValue]:
        return [(encode_offset_commit_key(OffsetCommitKey(group_id, tp.topic, tp.partition)), None) for tp in tps]

    def _remove_offsets(self, group: GroupMetadata, tps: Iterable[TopicPartition]) -> int:
        """Drop offsets (writing tombstones); an empty group left without offsets dies."""
        removed = group.offsets.remove(tps)
        dead = group.is_(GroupState.EMPTY) and not group.offsets.has_offsets
        if dead:
            group.transition_to(GroupState.DEAD, self.scheduler.now_ms())
            self.rebalancer.unload(group, Errors.COORDINATOR_NOT_AVAILABLE)
            self.groups.pop(group.group_id, None)
            log.info("group %s has no members and no offsets left; removed", group.group_id)
        records = self._tombstones(group, removed, with_group=dead)
        if records:
            error, _ = self._append(group.group_id, records)
            if error != Errors.NONE:
                log.warning("tombstones for group %s not written: %s", group.group_id, error)
        return len(removed)

    def expire_offsets(self) -> int:
        """Offsets retention (offsets.retention.check.interval.ms); returns offsets removed."""
        now = self.scheduler.now_ms()
        retention = self.config.offsets_retention_ms
        removed = 0
        for group in list(self.groups.values()):
            if self.partition_for(group.group_id) not in self._owned:
                continue
            offsets = group.offsets
            if group.protocol_type is not None and group.is_(GroupState.EMPTY):
                expired = offsets.expired(now, retention, _constant(group.state_timestamp))
            elif (group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.is_(GroupState.STABLE)
                  and group.subscribed_topics is not None):
                expired = offsets.expired(now, retention, lambda v: v.commit_timestamp,
                                          group.subscribed_topics)
            elif group.protocol_type is None:
                expired = offsets.expired(now, retention, lambda v: v.commit_timestamp)
            else:
                expired = []
            if expired or (group.is_(GroupState.EMPTY) and not offsets.has_offsets
                           and not group.pending_members):
                removed += self._remove_offsets(group, expired)
        for consumer in list(self.consumer.groups.values()):
            if self.partition_for(consumer.group_id) not in self._owned:
                continue
            if consumer.state is ConsumerGroupState.EMPTY:
                expired = consumer.offsets.expired(now, retention, _constant(consumer.state_timestamp))
            else:
                expired = consumer.offsets.expired(now, retention, lambda v: v.commit_timestamp,
                                                   frozenset(consumer.subscribed_topic_names()))
            gone = consumer.offsets.remove(expired)
            if gone:
                removed += len(gone)
                self._append(consumer.group_id, self._offset_tombstones(consumer.group_id, gone))
            if consumer.state is ConsumerGroupState.EMPTY and not consumer.offsets.has_offsets:
                self.consumer.remove(consumer)  # Kafka deletes an empty consumer group without offsets
        if removed:
            log.info("removed %d expired offsets", removed)
        return removed

    # -- groups ---------------------------------------------------------------------------------

    def describe_group(self, group_id: str) -> tuple[Errors, GroupSummary]:
        error = self._status(group_id, allow_empty_id=True)
        group = self.groups.get(group_id)
        if error != Errors.NONE or group is None:
            return error, GroupSummary(group_id, GroupState.DEAD, "", "", ())
        return Errors.NONE, group.summary()

    def list_groups(self, states: set[GroupState] | None = None) -> tuple[Errors, list[ListedGroup]]:
        if not self._active:
            return Errors.COORDINATOR_NOT_AVAILABLE, []
        error = Errors.COORDINATOR_LOAD_IN_PROGRESS if self._loading else Errors.NONE
        return error, [
            ListedGroup(g.group_id, g.protocol_type or "", g.state)
            for g in self.groups.values()
            if self.partition_for(g.group_id) in self._owned and (not states or g.state in states)
        ]

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, Errors]:
        results: dict[str, Errors] = {}
        for group_id in group_ids:
            error = self._status(group_id, allow_empty_id=True)
            group = self.groups.get(group_id)
            consumer = self.consumer.groups.get(group_id)
            if error != Errors.NONE:
                results[group_id] = error
            elif consumer is not None:
                results[group_id] = self._delete_consumer_group(consumer)
            elif group is None or group.is_(GroupState.DEAD):
                results[group_id] = Errors.GROUP_ID_NOT_FOUND
            elif not group.is_(GroupState.EMPTY):
                results[group_id] = Errors.NON_EMPTY_GROUP
            else:
                tps = group.offsets.remove_all()
                group.transition_to(GroupState.DEAD, self.scheduler.now_ms())
                self.rebalancer.unload(group, Errors.COORDINATOR_NOT_AVAILABLE)
                del self.groups[group_id]
                error, _ = self._append(group_id, self._tombstones(group, tps, with_group=True))
                if error != Errors.NONE:
                    log.warning("tombstones for deleted group %s not written: %s", group_id, error)
                log.info("deleted group %s (%d offsets)", group_id, len(tps))
                results[group_id] = Errors.NONE
        return results

    def _delete_consumer_group(self, group: ConsumerGroup) -> Errors:
        if group.members:
            return Errors.NON_EMPTY_GROUP
        tps = group.offsets.remove_all()
        if tps:
            self._append(group.group_id, self._offset_tombstones(group.group_id, tps))
        log.info("deleted consumer group %s (%d offsets)", group.group_id, len(tps))
        return self.consumer.delete(group.group_id)

    def list_consumer_groups(self, states: set[str] | None = None) -> list[ConsumerGroup]:
        """The consumer groups this coordinator serves, in ``states`` (lower-case names) if given."""
        return [g for g in self.consumer.owned(self.owns_partition)
                if not states or g.state.value.lower() in states]

    # -- lifecycle ------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Give every group up: requests still waiting get NOT_COORDINATOR (clients look the
        coordinator up again and rejoin), timers stop."""
        self._active = False
        for group in self.groups.values():
            self.rebalancer.unload(group, Errors.NOT_COORDINATOR)
        self.share.shutdown()
        self.consumer.shutdown()
        self.scheduler.cancel_all()
        self.groups.clear()
        self._owned.clear()
        self._loading.clear()

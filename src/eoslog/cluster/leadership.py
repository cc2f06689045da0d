"""This broker's replicas follow the cluster's partition states (Kafka's
``ReplicaManager.becomeLeaderOrFollower``, driven by ZooKeeper watches instead of
LeaderAndIsr requests), and a leader's ISR changes are persisted (what Kafka's
AlterPartitionManager and controller do, as a conditional ZooKeeper update).

- A partition state naming this broker leader makes the local replica leader in that epoch
  (its fetcher stops); naming another broker makes it a follower fetching from there, after
  truncation; naming no leader stops fetching. A state is applied once per znode version.
- Replicas of partitions this broker is no longer assigned (a deleted topic) are deleted.
- As leader: the partition decides (``Partition.maybe_shrink_isr``, asked every half of
  ``replica.lag.time.max.ms``, Kafka's isr-expiration task; ``Partition.maybe_expand_isr``,
  asked after each follower fetch); here the change is written to the state znode
  conditionally on the version this broker last saw, and only once ZooKeeper accepted it does
  the partition use the new ISR (through the cache, as any state).
- ``on_leader`` / ``on_follower`` tell the coordinators when an internal partition moves.
- A log directory of this broker fails (``log_dir_failed``, KIP-112): the controller is told which
  replicas went offline through a ``/log_dir_event_notification/log_dir_event_`` sequential znode
  (Kafka's propagateLogDirEvent), and gives their partitions new leaders and ISRs without them.
  Named leader or ISR member of an offline replica later (the controller did not know yet), this
  broker takes no role and tells it again, as Kafka's broker answers such a LeaderAndIsr with
  KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from eoslog.cluster.fetcher import FetcherManager
from eoslog.cluster.metadata import Change, ClusterMetadata
from eoslog.cluster.registry import update_isr
from eoslog.cluster.zk import ZkSession
from eoslog.cluster.znodes import (
    LOG_DIR_EVENT_PREFIX,
    NO_LEADER,
    LeaderAndIsr,
    LogDirEvent,
    controlled_shutdown_path,
)
from eoslog.replica import Partition, ReplicaManager
from eoslog.storage import LogManager
from eoslog.types import INTERNAL_TOPICS, TopicPartition

log = logging.getLogger(__name__)

RoleListener = Callable[[TopicPartition, int], None]  # (partition, leader epoch)


class Leadership:
    def __init__(self, broker_id: int, zk: ZkSession, metadata: ClusterMetadata, logs: LogManager,
                 replicas: ReplicaManager, fetchers: FetcherManager, lag_time_max_ms: int,
                 clock_ms: Callable[[], int]) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.metadata = metadata
        self.logs = logs
        self.replicas = replicas
        self.fetchers = fetchers
        self.lag_time_max_ms = lag_time_max_ms
        self.clock_ms = clock_ms
        self.on_leader: list[RoleListener] = []
        self.on_follower: list[RoleListener] = []
        # (leader epoch, state znode version, replicas) last applied
        self._applied: dict[TopicPartition, tuple[int, int, tuple[int, ...]]] = {}
        self._isr_changes: set[TopicPartition] = set()  # one ZooKeeper update in flight each
        self._tasks: set[asyncio.Task[None]] = set()
        self._unsubscribe: Callable[[], None] | None = None

    def start(self) -> None:
        self._unsubscribe = self.metadata.subscribe(self._on_change)
        self.replicas.follower_fetch_listener = self._maybe_expand_isr
        self.logs.log_dir_failure_listeners.append(self.log_dir_failed)
        for topic in list(self.metadata.topics):
            self._apply_topic(topic)
        for topic in [t for t in self.logs.topics if t not in self.metadata.topics]:
            self._drop_topic(topic)  # deleted while this broker was down
        self._spawn(self._shrink_isr_forever())

    def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self.replicas.follower_fetch_listener = None
        if self.log_dir_failed in self.logs.log_dir_failure_listeners:
            self.logs.log_dir_failure_listeners.remove(self.log_dir_failed)
        for task in list(self._tasks):
            task.cancel()
        self.fetchers.stop_all()

    def _spawn(self, coro: object) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- states → roles ---------------------------------------------------------------------

    def _on_change(self, change: Change) -> None:
        kind, subject = change
        if kind == "state":
            assert isinstance(subject, TopicPartition)
            self._apply(subject)
        elif kind == "topic":
            assert isinstance(subject, str)
            if subject in self.metadata.topics:
                self._apply_topic(subject)
            else:
                self._drop_topic(subject)
        elif kind == "config":
            assert isinstance(subject, str)
            if subject in self.logs.topics:
                self.logs.alter_topic_config(subject, dict(self.metadata.topic_configs.get(subject, {})), stored=True)

    def _apply_topic(self, topic: str) -> None:
        assigned = {tp.partition for tp in self.metadata.partitions_of(topic)
                    if self.broker_id in self.metadata.replicas(tp)}
        local = self.logs.topics.get(topic)
        for partition in set(local.local_partitions() if local is not None else ()) - assigned:
            self._remove(TopicPartition(topic, partition))
        for tp in self.metadata.partitions_of(topic):
            self._apply(TopicPartition(tp.topic, tp.partition))

    def _drop_topic(self, topic: str) -> None:
        local = self.logs.topics.get(topic)
        for partition in list(local.local_partitions() if local is not None else ()):
            self._remove(TopicPartition(topic, partition))

    def _remove(self, tp: TopicPartition) -> None:
        self.fetchers.stop(tp)
        self._applied.pop(tp, None)
        for listener in self.on_follower:
            listener(tp, -1)
        self.logs.remove_replica(tp.topic, tp.partition)
        self.replicas.high_watermark_moved(tp)  # parked fetches and produces answer now
        log.info("%s: replica deleted", tp)

    def _apply(self, tp: TopicPartition) -> None:
        state = self.metadata.states.get(tp)
        replicas = self.metadata.replicas(tp)
        if state is None or self.broker_id not in replicas:
            return
        applied = self._applied.get(tp)
        if applied is not None and (state.leader_epoch, state.zk_version) <= applied[:2] and replicas == applied[2]:
            return
        assignment = self.metadata.topics[tp.topic]
        self.logs.ensure_replica(tp.topic, assignment.topic_id, len(assignment.partitions), tp.partition,
                                 dict(self.metadata.topic_configs.get(tp.topic, {})), tp.topic in INTERNAL_TOPICS)
        partition = self.replicas.get_partition(tp) or self.replicas.create_partition(tp)
        if partition.log.offline:
            self._applied[tp] = (state.leader_epoch, state.zk_version, replicas)
            self.fetchers.stop(tp)
            if state.leader == self.broker_id or self.broker_id in state.isr:
                log.warning("%s: named %s in epoch %d, but its log directory failed: telling the controller",
                            tp, "leader" if state.leader == self.broker_id else "in the ISR", state.leader_epoch)
                self._spawn(self._notify_log_dir_failure())
            return
        new_epoch = applied is None or state.leader_epoch != applied[0] or partition.leader_epoch != state.leader_epoch
        self._applied[tp] = (state.leader_epoch, state.zk_version, replicas)
        if state.leader == self.broker_id:
            if new_epoch or not partition.is_leader:
                self.fetchers.stop(tp)
                partition.make_leader(state.leader_epoch, state.isr, replicas)
                log.info("%s: leader in epoch %d, isr %s", tp, state.leader_epoch, list(state.isr))
                for listener in self.on_leader:
                    listener(tp, state.leader_epoch)
            else:
                # A reassignment adds or removes replicas in the same epoch (brokers watch the
                # assignment: no new epoch needs to carry it, as Kafka's LeaderAndIsr did).
                partition.update_replicas(replicas)
                partition.update_isr(state.isr)  # the high watermark may move: waiters look again
            self.replicas.high_watermark_moved(tp)
            return
        was_leader = partition.is_leader
        if new_epoch or was_leader:
            partition.make_follower(None if state.leader == NO_LEADER else state.leader, state.leader_epoch,
                                    state.isr, replicas)
            if state.leader == NO_LEADER:
                self.fetchers.stop(tp)
            else:
                self.fetchers.follow(tp, state.leader, state.leader_epoch)
            log.info("%s: follower of %d in epoch %d", tp, state.leader, state.leader_epoch)
            for listener in self.on_follower:
                listener(tp, state.leader_epoch)
            self.replicas.high_watermark_moved(tp)  # clients parked here get NOT_LEADER_OR_FOLLOWER
        else:
            partition.replicas = replicas

    # -- a failed log directory (KIP-112) -------------------------------------------------------

    def log_dir_failed(self, log_dir: Path) -> None:
        """``log_dir`` went offline (the log manager's listener, after the replica layer's)."""
        for tp, plog in self.logs.logs.items():
            if plog.log_dir.path == log_dir:
                self.fetchers.stop(TopicPartition(*tp))
        self._spawn(self._notify_log_dir_failure())

    async def _notify_log_dir_failure(self) -> None:
        """Every offline replica of this broker, in a new notification (Kafka's
        propagateLogDirEvent); retried while ZooKeeper is unreachable."""
        for attempt in range(10):
            registration = self.metadata.brokers.get(self.broker_id)
            offline = tuple(sorted((t, p) for (t, p), plog in self.logs.logs.items() if plog.offline))
            event = LogDirEvent(self.broker_id, registration.epoch if registration is not None else -1, offline)
            try:
                await self.zk.create(LOG_DIR_EVENT_PREFIX, event.encode(), sequence=True)
                log.warning("told the controller: replicas of %s are offline on broker %d",
                            ", ".join(f"{t}-{p}" for t, p in offline), self.broker_id)
                return
            except Exception as e:  # ZooKeeper unreachable for now
                log.warning("could not write the log directory event (attempt %d): %s", attempt + 1, e)
                await asyncio.sleep(1.0)
        log.error("the controller was not told of this broker's failed log directory")

    # -- the leader's ISR -------------------------------------------------------------------

    async def _shrink_isr_forever(self) -> None:
        """Kafka's isr-expiration task, every half of replica.lag.time.max.ms."""
        while True:
            await asyncio.sleep(self.lag_time_max_ms / 2000)
            now = self.clock_ms()
            for tp in list(self._applied):
                partition = self.replicas.get_partition(tp)
                isr = None if partition is None else partition.maybe_shrink_isr(now, self.lag_time_max_ms)
                if partition is not None and isr is not None:
                    self._propose_isr(tp, partition, isr)

    def _maybe_expand_isr(self, partition: Partition, replica_id: int) -> None:
        """A follower fetched: the partition says whether it joins the ISR."""
        assignment = self.metadata.assignment(partition.tp)

        def eligible(broker_id: int) -> bool:
            return (assignment.may_join_isr(broker_id, partition.isr)
                    and self.metadata.isr_eligible(broker_id))

        isr = partition.maybe_expand_isr(replica_id, eligible)
        if isr is not None:
            self._propose_isr(partition.tp, partition, isr)

    def _propose_isr(self, tp: TopicPartition, partition: Partition, isr: tuple[int, ...]) -> None:
        current = self.metadata.states.get(tp)
        if (tp in self._isr_changes or current is None or current.leader != self.broker_id
                or current.leader_epoch != partition.leader_epoch or set(isr) == set(current.isr)):
            return
        self._isr_changes.add(tp)
        self._spawn(self._write_isr(tp, current, isr))

    async def _write_isr(self, tp: TopicPartition, current: LeaderAndIsr, isr: tuple[int, ...]) -> None:
        try:
            joining = [r for r in isr if r not in current.isr]
            if joining and await self._asked_to_shut_down(joining):
                log.info("%s: %s not taken back into the ISR: asked to shut down", tp, joining)
                return
            accepted = await update_isr(self.zk, tp, current, isr)
        except Exception as e:  # ZooKeeper unreachable: the ISR stays as it is
            log.warning("%s: ISR change to %s not written: %s", tp, list(isr), e)
            accepted = None
        finally:
            self._isr_changes.discard(tp)
        if accepted is None:
            log.info("%s: ISR change to %s refused (the state moved on); waiting for the new state", tp, list(isr))
            return
        self.metadata.set_state(tp, accepted)  # applied through _apply, as every state

    async def _asked_to_shut_down(self, brokers: list[int]) -> bool:
        """Read from ZooKeeper, not the cache: the cache learns of a controlled-shutdown request
        by a refresh that can finish after the controller's ISR shrink it caused was applied
        here, and a fetch the shutting-down broker sent before it stopped fetching would then
        take it back into the ISR, where nothing takes it out again (its shutdown waits out
        its budget). This session has seen that shrink (it is the state being changed), so
        ZooKeeper's ordering shows it the request written before it; a shrink after this read
        fails the conditional write instead."""
        for broker_id in brokers:
            node = await self.zk.get(controlled_shutdown_path(broker_id))
            registration = self.metadata.brokers.get(broker_id)
            if node is not None and registration is not None and node.data.decode() == str(registration.epoch):
                return True
        return False

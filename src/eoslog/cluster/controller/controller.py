"""The controller: one task handling one event at a time (Kafka's ControllerEventManager).

Decisions read the metadata cache and are written to ZooKeeper in a transaction that first
checks ``/controller_epoch`` at the version this controller created it with: once another
broker has become controller, ZooKeeper refuses every write of this one (ControllerMoved)
and it steps down. Each partition-state write is also conditional on the state znode's
version; a lost race (the leader changed the ISR meanwhile) re-reads that znode and decides
again. The cache is updated with every accepted write at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from eoslog.cluster import znodes
from eoslog.cluster.controller.election import (
    controlled_shutdown_election,
    isr_without,
    offline_election,
    preferred_election,
)
from eoslog.cluster.controller.events import (
    AlterReassignments,
    AnsweredEvent,
    AutoPreferredElection,
    BrokerChange,
    ControlledShutdownChange,
    ControllerEvent,
    ElectLeaders,
    ListReassignments,
    LogDirEventNotification,
    ReassignmentIsrChange,
    Startup,
    TopicChange,
    TopicDeletion,
    ZkReassignment,
)
from eoslog.cluster.controller.reassignment import Refusal, ReplicaAssignment
from eoslog.cluster.controller.reassignments import Reassignments
from eoslog.cluster.controller.states import PartitionState, check_transition
from eoslog.cluster.metadata import Change, ClusterMetadata
from eoslog.cluster.registry import load_metadata, read_state
from eoslog.cluster.zk import Op, TransactionFailed, ZkSession
from eoslog.cluster.znodes import NO_LEADER, LeaderAndIsr, LogDirEvent, ZnodeDataError
from eoslog.errors import Errors
from eoslog.types import TopicPartition

log = logging.getLogger(__name__)

STATE_WRITE_ATTEMPTS = 10


class ControllerMoved(Exception):
    """ZooKeeper refused a write: ``/controller_epoch`` moved on, another broker controls."""


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    unclean_leader_election: bool = False
    auto_leader_rebalance: bool = True
    imbalance_check_interval_s: float = 300.0
    imbalance_percentage: int = 10


Decide = Callable[[LeaderAndIsr], LeaderAndIsr | None]


class Controller:
    def __init__(self, zk: ZkSession, metadata: ClusterMetadata, broker_id: int,
                 settings: ControllerSettings, on_deposed: Callable[[], None]) -> None:
        self.zk = zk
        self.metadata = metadata
        self.broker_id = broker_id
        self.settings = settings
        self._on_deposed = on_deposed
        self.epoch = -1
        self._epoch_version = -1
        self._queue: asyncio.Queue[ControllerEvent] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._unsubscribe: Callable[[], None] | None = None
        self.partition_states: dict[TopicPartition, PartitionState] = {}
        self._live: dict[int, int] = {}  # broker id → broker epoch, as last handled
        self.shutting_down: set[int] = set()
        # Replicas in a failed log directory of a live broker (Kafka's offline replicas, KIP-112):
        # broker id → its partitions that may neither lead nor stay in an ISR, until it restarts.
        self.offline_replicas: dict[int, set[TopicPartition]] = {}
        self.reassignments = Reassignments(self)

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        return bool(self._tasks)

    def activate(self, epoch: int, epoch_version: int) -> None:
        """This broker won the election with ``epoch`` (``/controller_epoch`` at ``epoch_version``)."""
        self.epoch, self._epoch_version = epoch, epoch_version
        self._queue = asyncio.Queue()
        self._unsubscribe = self.metadata.subscribe(self._on_metadata_change)
        self._queue.put_nowait(Startup())
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._run())]
        if self.settings.auto_leader_rebalance:
            self._tasks.append(loop.create_task(self._imbalance_timer()))
        log.info("broker %d is controller (epoch %d)", self.broker_id, epoch)

    def deactivate(self) -> None:
        if not self.active:
            return
        log.info("broker %d stops being controller (epoch %d)", self.broker_id, self.epoch)
        for task in self._tasks:
            task.cancel()
        self._tasks = []
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        while not self._queue.empty():
            event = self._queue.get_nowait()
            if isinstance(event, AnsweredEvent) and not event.result.done():
                event.result.set_exception(ControllerMoved())
        self.partition_states.clear()
        self._live.clear()
        self.shutting_down.clear()
        self.offline_replicas.clear()
        self.reassignments.clear()

    def enqueue(self, event: ControllerEvent) -> None:
        self._queue.put_nowait(event)

    async def elect_leaders(self, partitions: Iterable[TopicPartition] | None,
                            unclean: bool = False) -> dict[TopicPartition, Errors]:
        """ElectLeaders, answered once the controller task has handled it (ControllerMoved
        if this broker stops being controller first)."""
        event = ElectLeaders(None if partitions is None else tuple(partitions), unclean)
        self.enqueue(event)
        return await event.result

    async def alter_reassignments(self, targets: dict[TopicPartition, tuple[int, ...] | None],
                                  allow_replication_factor_change: bool) -> dict[TopicPartition, Refusal | None]:
        """AlterPartitionReassignments, answered once each reassignment has begun (or was
        refused); ControllerMoved if this broker stops being controller first."""
        event = AlterReassignments(dict(targets), allow_replication_factor_change)
        self.enqueue(event)
        return await event.result

    async def list_reassignments(self, partitions: Iterable[TopicPartition] | None
                                 ) -> dict[TopicPartition, ReplicaAssignment]:
        event = ListReassignments(None if partitions is None else tuple(partitions))
        self.enqueue(event)
        return await event.result

    def _on_metadata_change(self, change: Change) -> None:
        kind, subject = change
        if kind == "brokers":
            self.enqueue(BrokerChange())
        elif kind == "topic":
            assert isinstance(subject, str)
            self.enqueue(TopicChange(subject))
        elif kind == "shutdown":
            self.enqueue(ControlledShutdownChange())
        elif kind == "deletes":
            self.enqueue(TopicDeletion())
        elif kind == "reassignments":
            self.enqueue(ZkReassignment())
        elif kind == "log_dir_events":
            self.enqueue(LogDirEventNotification())
        elif kind == "state":
            # Partition states are not events (the controller reads them when it decides),
            # except for a partition being reassigned, which completes on an ISR change, and
            # one whose ISR names a replica it no longer has (see Reassignments.strays).
            assert isinstance(subject, TopicPartition)
            if subject in self.reassignments.in_progress or self.reassignments.strays(subject):
                self.enqueue(ReassignmentIsrChange(subject))

    async def _run(self) -> None:
        while True:
            event = await self._queue.get()
            try:
                await self._process(event)
            except ControllerMoved:
                log.warning("controller epoch %d was superseded; stepping down", self.epoch)
                if isinstance(event, AnsweredEvent) and not event.result.done():
                    event.result.set_exception(ControllerMoved())
                self.deactivate()
                self._on_deposed()
                return
            except Exception as e:
                log.exception("controller event %s failed", type(event).__name__)
                if isinstance(event, AnsweredEvent) and not event.result.done():
                    event.result.set_exception(e)

    async def _process(self, event: ControllerEvent) -> None:
        if isinstance(event, Startup):
            await self._startup()
        elif isinstance(event, BrokerChange):
            await self._broker_change()
        elif isinstance(event, TopicChange):
            await self._topic_change(event.topic)
        elif isinstance(event, ControlledShutdownChange):
            await self._controlled_shutdowns()
        elif isinstance(event, TopicDeletion):
            await self._delete_topics()
        elif isinstance(event, LogDirEventNotification):
            await self._log_dir_events()
        elif isinstance(event, AutoPreferredElection):
            await self._rebalance_leaders()
        elif isinstance(event, ZkReassignment):
            await self.reassignments.zk_requests_changed()
        elif isinstance(event, ReassignmentIsrChange):
            await self.reassignments.isr_changed(event.tp)
        elif isinstance(event, AlterReassignments):
            event.result.set_result(await self.reassignments.alter(event))
        elif isinstance(event, ListReassignments):
            event.result.set_result(self.reassignments.listed(event))
        else:
            tps = tuple(self.all_partitions()) if event.partitions is None else event.partitions
            elect = self._unclean if event.unclean else self._preferred
            event.result.set_result(await elect(tps))

    async def _imbalance_timer(self) -> None:
        while True:
            await asyncio.sleep(self.settings.imbalance_check_interval_s)
            self.enqueue(AutoPreferredElection())

    # -- partition states -----------------------------------------------------------------

    def _move(self, tp: TopicPartition, target: PartitionState) -> None:
        check_transition(tp, self.partition_states.get(tp, PartitionState.NON_EXISTENT), target)
        self.partition_states[tp] = target

    def candidates(self) -> set[int]:
        """Brokers that may lead: registered and not shutting down."""
        return set(self.metadata.brokers) - self.shutting_down

    def _offline_on(self, tp: TopicPartition) -> set[int]:
        return {b for b, tps in self.offline_replicas.items() if tp in tps}

    def candidates_for(self, tp: TopicPartition) -> set[int]:
        """Brokers that may lead ``tp``: candidates whose replica of it is not offline."""
        return self.candidates() - self._offline_on(tp)

    def all_partitions(self) -> list[TopicPartition]:
        return [tp for topic in sorted(self.metadata.topics) for tp in self.metadata.partitions_of(topic)]

    # -- events ---------------------------------------------------------------------------

    async def _startup(self) -> None:
        await load_metadata(self.zk, self.metadata)
        self._live = {b: reg.epoch for b, reg in self.metadata.brokers.items()}
        for tp in self.all_partitions():
            state = self.metadata.states.get(tp)
            if state is None:
                self._move(tp, PartitionState.NEW)
            else:
                self._move(tp, PartitionState.NEW)  # known to exist: enters through NEW
                online = state.leader in self.metadata.brokers
                self._move(tp, PartitionState.ONLINE if online else PartitionState.OFFLINE)
        await self._settle(self.all_partitions())
        await self._controlled_shutdowns()
        await self._log_dir_events()
        await self.reassignments.resume()
        await self._delete_topics()

    async def _broker_change(self) -> None:
        current = {b: reg.epoch for b, reg in self.metadata.brokers.items()}
        # A broker whose registration has a new epoch restarted: it failed, then started.
        gone = {b for b, epoch in self._live.items() if current.get(b) != epoch}
        started = {b for b, epoch in current.items() if self._live.get(b) != epoch}
        self._live = current
        if gone:
            log.info("brokers gone: %s", sorted(gone))
            self.shutting_down -= gone
            for broker in gone:
                self.offline_replicas.pop(broker, None)  # a restarted broker says again what failed
                await self.zk.delete(znodes.controlled_shutdown_path(broker))
        if started:
            log.info("brokers started: %s", sorted(started))
        if gone or started:
            await self._settle(self.all_partitions())
            await self.reassignments.brokers_changed()

    async def _topic_change(self, topic: str) -> None:
        tps = list(self.metadata.partitions_of(topic))
        if not tps:
            self._forget(topic)
            return
        for tp in tps:
            if tp not in self.partition_states:
                self._move(tp, PartitionState.NEW)
        await self._settle(tps)

    async def _settle(self, tps: list[TopicPartition]) -> None:
        """Bring each partition to a live leader if one may lead, and drop replicas that are
        gone from the ISRs (Kafka's onBrokerFailure / onBrokerStartup / onNewPartitionCreation)."""
        await asyncio.gather(*(self._settle_one(tp) for tp in tps))

    async def _settle_one(self, tp: TopicPartition) -> None:
        if self.partition_states.get(tp) is PartitionState.NEW and tp not in self.metadata.states:
            await self._initialize(tp)
            return
        # A replica in a failed log directory counts as gone (Kafka's OfflineReplica).
        live = set(self.metadata.brokers) - self._offline_on(tp)

        def decide(current: LeaderAndIsr) -> LeaderAndIsr | None:
            if current.leader in live and current.leader not in self.shutting_down:
                isr, _ = isr_without(current.isr, current.leader, set(current.isr) - live)
                return None if isr == current.isr else self._with_isr(current, isr)
            elected = offline_election(self.metadata.replicas(tp), current.isr, self.candidates_for(tp),
                                       self._unclean_enabled(tp.topic))
            if elected is None:
                if current.leader == NO_LEADER:
                    return None
                isr, _ = isr_without(current.isr, current.leader, set(current.isr) - live)
                return LeaderAndIsr(NO_LEADER, current.leader_epoch + 1, isr, self.epoch, current.zk_version)
            if elected.unclean:
                log.warning("%s: unclean election of %d (not in ISR %s): acknowledged records may be lost",
                            tp, elected.leader, list(current.isr))
            return current.new_leader(elected.leader, elected.isr, self.epoch)

        state = await self.update_state(tp, decide)
        if state is not None and tp in self.partition_states:
            online = state.leader != NO_LEADER
            self._move(tp, PartitionState.ONLINE if online else PartitionState.OFFLINE)

    def _unclean_enabled(self, topic: str) -> bool:
        """unclean.leader.election.enable: the topic's override (in ZooKeeper), else the broker's."""
        override = self.metadata.topic_configs.get(topic, {}).get("unclean.leader.election.enable")
        if override is None:
            return self.settings.unclean_leader_election
        return str(override).strip().lower() == "true"

    async def _initialize(self, tp: TopicPartition) -> None:
        """NewPartition → OnlinePartition: the live replicas are the ISR, the first one leads."""
        live = [r for r in self.metadata.replicas(tp) if r in self.candidates()]
        if not live:
            log.warning("%s: no replica of %s is alive; it stays new", tp, list(self.metadata.replicas(tp)))
            return
        state = LeaderAndIsr(live[0], znodes.INITIAL_LEADER_EPOCH, tuple(live), self.epoch)
        await self.zk.ensure_path(znodes.partition_path(*tp))
        try:
            await self.commit([Op("create", znodes.partition_state_path(*tp), state.encode())])
        except NodeExistsError:
            await self._reread(tp)
            await self._settle_one(tp)  # created by an earlier controller: settle what is there
            return
        self.metadata.set_state(tp, LeaderAndIsr(state.leader, state.leader_epoch, state.isr, self.epoch, 0))
        self._move(tp, PartitionState.ONLINE)

    async def _delete_topics(self) -> None:
        """Kafka's TopicDeletionManager, on watches: the topic's znodes go in one transaction
        (assignment, partition states, config, the request); each broker deletes its replicas
        when it sees the topic gone."""
        for topic in sorted(self.metadata.delete_requests):
            if self.reassignments.topic_busy(topic):
                log.info("topic %s is deleted once its partitions' reassignments end", topic)
                continue
            ops: list[Op] = []
            for name in await self.zk.children(znodes.partitions_path(topic)):
                partition = int(name)
                if await self.zk.get(znodes.partition_state_path(topic, partition)) is not None:
                    ops.append(Op("delete", znodes.partition_state_path(topic, partition)))
                ops.append(Op("delete", znodes.partition_path(topic, partition)))
            if await self.zk.get(znodes.partitions_path(topic)) is not None:
                ops.append(Op("delete", znodes.partitions_path(topic)))
            if await self.zk.get(znodes.topic_path(topic)) is not None:
                ops.append(Op("delete", znodes.topic_path(topic)))
            if await self.zk.get(znodes.topic_config_path(topic)) is not None:
                ops.append(Op("delete", znodes.topic_config_path(topic)))
            ops.append(Op("delete", f"{znodes.DELETE_TOPICS}/{topic}"))
            try:
                await self.commit(ops)
            except (NoNodeError, NotEmptyError) as e:  # changed meanwhile: the next event retries
                log.warning("deleting topic %s: %s; will retry", topic, type(e).__name__)
                continue
            self._forget(topic)
            self.metadata.set_topic(topic, None)
            log.info("deleted topic %s", topic)

    def deletion_ready(self) -> None:
        """A reassignment that held up a topic's deletion ended."""
        self.enqueue(TopicDeletion())

    def _forget(self, topic: str) -> None:
        """A deleted topic's partitions leave the state machine."""
        for tp in [tp for tp in self.partition_states if tp.topic == topic]:
            self._move(tp, PartitionState.OFFLINE)
            self._move(tp, PartitionState.NON_EXISTENT)
            del self.partition_states[tp]

    async def _log_dir_events(self) -> None:
        """Kafka's onBrokerLogDirFailure: each notification's broker has replicas offline; they
        leave the ISRs and the partitions they led get new leaders (``_settle``). Notifications
        are deleted once read; one of a registration that is gone (the broker restarted or died)
        is stale: a restarted broker notifies again, a dead one's replicas are offline anyway."""
        changed: set[TopicPartition] = set()
        for name in sorted(await self.zk.children(znodes.LOG_DIR_EVENT_NOTIFICATION)):
            path = f"{znodes.LOG_DIR_EVENT_NOTIFICATION}/{name}"
            node = await self.zk.get(path)
            if node is not None:
                try:
                    event = LogDirEvent.decode(path, node.data)
                except ZnodeDataError as e:
                    log.warning("ignoring %s", e)
                else:
                    registration = self.metadata.brokers.get(event.broker)
                    if registration is not None and registration.epoch == event.broker_epoch:
                        tps = {TopicPartition(t, p) for t, p in event.partitions}
                        known = self.offline_replicas.setdefault(event.broker, set())
                        changed |= tps - known
                        known |= tps
                        log.warning("broker %d: a log directory failed; its replicas of %s are offline",
                                    event.broker, ", ".join(sorted(f"{t}-{p}" for t, p in event.partitions))
                                    or "no partition")
            await self.zk.delete(path)
        if changed:
            await self._settle(sorted(tp for tp in changed if tp in self.partition_states))

    async def _controlled_shutdowns(self) -> None:
        for broker, epoch in sorted(self.metadata.shutdown_requests.items()):
            registration = self.metadata.brokers.get(broker)
            if registration is None or registration.epoch != epoch:
                await self.zk.delete(znodes.controlled_shutdown_path(broker))  # stale request
                continue
            self.shutting_down.add(broker)
        if not self.shutting_down:
            return
        led_or_followed = [tp for tp in self.all_partitions()
                           if (s := self.metadata.states.get(tp)) is not None
                           and self.shutting_down & (set(s.isr) | {s.leader})]
        log.info("controlled shutdown of %s: moving %d partitions", sorted(self.shutting_down), len(led_or_followed))
        await asyncio.gather(*(self._move_off_shutting_down(tp) for tp in led_or_followed))

    async def _move_off_shutting_down(self, tp: TopicPartition) -> None:
        def decide(current: LeaderAndIsr) -> LeaderAndIsr | None:
            if current.leader in self.shutting_down:
                elected = controlled_shutdown_election(self.metadata.replicas(tp), current.isr,
                                                       self.candidates(), self.shutting_down)
                return None if elected is None else current.new_leader(elected.leader, elected.isr, self.epoch)
            isr = tuple(r for r in current.isr if r not in self.shutting_down) or current.isr
            return None if isr == current.isr else self._with_isr(current, isr)

        await self.update_state(tp, decide)

    async def _preferred(self, tps: tuple[TopicPartition, ...]) -> dict[TopicPartition, Errors]:
        results: dict[TopicPartition, Errors] = {}

        async def elect(tp: TopicPartition) -> None:
            replicas = self.metadata.replicas(tp)
            current = self.metadata.states.get(tp)
            if not replicas or current is None:
                results[tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
                return
            if current.leader == replicas[0]:
                results[tp] = Errors.ELECTION_NOT_NEEDED
                return

            def decide(state: LeaderAndIsr) -> LeaderAndIsr | None:
                elected = preferred_election(replicas, state.isr, self.candidates())
                if elected is None or state.leader == elected.leader:
                    return None
                return state.new_leader(elected.leader, elected.isr, self.epoch)

            written = await self.update_state(tp, decide)
            ok = written is not None and written.leader == replicas[0]
            results[tp] = Errors.NONE if ok else Errors.PREFERRED_LEADER_NOT_AVAILABLE

        await asyncio.gather(*(elect(tp) for tp in tps))
        return results

    async def _unclean(self, tps: tuple[TopicPartition, ...]) -> dict[TopicPartition, Errors]:
        """KIP-460: a partition without a live leader gets one even from outside the ISR."""
        results: dict[TopicPartition, Errors] = {}

        async def elect(tp: TopicPartition) -> None:
            replicas = self.metadata.replicas(tp)
            if not replicas or tp not in self.metadata.states:
                results[tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
                return
            if self.metadata.leader(tp) != NO_LEADER:
                results[tp] = Errors.ELECTION_NOT_NEEDED
                return

            def decide(state: LeaderAndIsr) -> LeaderAndIsr | None:
                if state.leader in self.candidates_for(tp):
                    return None
                elected = offline_election(replicas, state.isr, self.candidates_for(tp), unclean_enabled=True)
                if elected is None:
                    return None
                if elected.unclean:
                    log.warning("%s: unclean election of %d asked for (ISR was %s)", tp, elected.leader,
                                list(state.isr))
                return state.new_leader(elected.leader, elected.isr, self.epoch)

            written = await self.update_state(tp, decide)
            ok = written is not None and written.leader in self.candidates()
            results[tp] = Errors.NONE if ok else Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE

        await asyncio.gather(*(elect(tp) for tp in tps))
        return results

    async def _rebalance_leaders(self) -> None:
        """Kafka's checkAndTriggerAutoLeaderRebalance: a broker leading too few of the
        partitions it is preferred for gets them back."""
        by_preferred: dict[int, list[TopicPartition]] = {}
        for tp in self.all_partitions():
            replicas = self.metadata.replicas(tp)
            if replicas:
                by_preferred.setdefault(replicas[0], []).append(tp)
        todo: list[TopicPartition] = []
        for broker, tps in by_preferred.items():
            if broker not in self.candidates():
                continue
            lost = [tp for tp in tps if (s := self.metadata.states.get(tp)) is not None
                    and s.leader != broker and broker in s.isr]
            if len(lost) * 100 > self.settings.imbalance_percentage * len(tps):
                todo += lost
        if todo:
            log.info("leader imbalance: moving %d partitions back to their preferred replica", len(todo))
            await self._preferred(tuple(todo))

    # -- ZooKeeper writes -----------------------------------------------------------------

    def _with_isr(self, current: LeaderAndIsr, isr: tuple[int, ...]) -> LeaderAndIsr:
        return LeaderAndIsr(current.leader, current.leader_epoch, isr, self.epoch, current.zk_version)

    async def commit(self, ops: list[Op]) -> list[Any]:
        """``ops`` after the controller-epoch check; ControllerMoved when the check fails,
        the failing operation's own error otherwise."""
        try:
            return await self.zk.commit([Op("check", znodes.CONTROLLER_EPOCH, version=self._epoch_version), *ops])
        except TransactionFailed as e:
            if e.index == 0:
                raise ControllerMoved() from None
            raise e.cause from None

    async def _reread(self, tp: TopicPartition) -> None:
        state = await read_state(self.zk, tp)
        if state is not None:
            self.metadata.set_state(tp, state)

    async def update_state(self, tp: TopicPartition, decide: Decide) -> LeaderAndIsr | None:
        """Apply ``decide`` to the partition's state and write the result conditionally on the
        state znode's version, deciding again after a lost race. The state in force after it
        (None if there is none)."""
        for _ in range(STATE_WRITE_ATTEMPTS):
            current = self.metadata.states.get(tp)
            if current is None:
                return None
            new = decide(current)
            if new is None:
                return current
            path = znodes.partition_state_path(*tp)
            try:
                results = await self.commit([Op("set", path, new.encode(), version=current.zk_version)])
            except BadVersionError:
                await self._reread(tp)
                continue
            except NoNodeError:
                return None
            stat = results[1]
            written = LeaderAndIsr(new.leader, new.leader_epoch, new.isr, new.controller_epoch,
                                   int(stat.version))
            self.metadata.set_state(tp, written)
            log.info("%s: leader %d epoch %d isr %s", tp, written.leader, written.leader_epoch, list(written.isr))
            return written
        log.warning("%s: gave up after %d conflicting state updates", tp, STATE_WRITE_ATTEMPTS)
        return None


async def register_controller(zk: ZkSession, broker_id: int, now_ms: int) -> tuple[int, int]:
    """Kafka's registerControllerAndIncrementControllerEpoch: create the ephemeral
    ``/controller`` and move ``/controller_epoch`` on by one in one transaction, conditional on
    the epoch read. The new (epoch, its znode version); NodeExistsError if another broker is
    controller, BadVersionError if another became controller in between."""
    node = await zk.get(znodes.CONTROLLER_EPOCH)
    if node is None:
        with contextlib.suppress(NodeExistsError):
            await zk.create(znodes.CONTROLLER_EPOCH, znodes.encode_controller_epoch(znodes.INITIAL_CONTROLLER_EPOCH))
        node = await zk.get(znodes.CONTROLLER_EPOCH)
        assert node is not None
    epoch = znodes.decode_controller_epoch(node.data) + 1
    try:
        results = await zk.commit([
            Op("create", znodes.CONTROLLER, znodes.encode_controller(broker_id, now_ms), ephemeral=True),
            Op("set", znodes.CONTROLLER_EPOCH, znodes.encode_controller_epoch(epoch), version=node.version),
        ])
    except TransactionFailed as e:
        raise e.cause from None
    return epoch, int(results[1].version)

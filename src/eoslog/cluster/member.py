"""A broker's membership of the cluster: its ZooKeeper session, registration, watches,
controller candidacy and clean departure.

Start-up runs in two steps because the log directory and the listener sit between them:
``connect`` (session, top-level znodes, the cluster id the logs are checked against) and
``join`` (once the listener is bound: registration, watches, a complete metadata cache,
producer-id blocks, candidacy). A new session after an expired one registers again.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError

from eoslog.cluster import znodes
from eoslog.cluster.channel import BrokerChannel
from eoslog.cluster.controller.assignment import assign_replicas
from eoslog.cluster.controller.controller import (
    Controller,
    ControllerMoved,
    ControllerSettings,
    register_controller,
)
from eoslog.cluster.controller.reassignment import Refusal, ReplicaAssignment
from eoslog.cluster.errors import ClusterError, TopicExists
from eoslog.cluster.fetcher import FetcherManager, FetcherSettings
from eoslog.cluster.leadership import Leadership, RoleListener
from eoslog.cluster.metadata import ClusterMetadata
from eoslog.cluster.producer_ids import ZkProducerIdManager
from eoslog.cluster.registry import (
    create_topic,
    ensure_cluster_id,
    load_metadata,
    read_brokers,
    read_shutdown_requests,
)
from eoslog.cluster.zk import SessionState, ZkSession, Znode
from eoslog.cluster.znodes import BrokerRegistration, LeaderAndIsr, TopicAssignment
from eoslog.config import BrokerConfig
from eoslog.errors import Errors, KafkaError
from eoslog.replica import ReplicaManager
from eoslog.security.listeners import inter_broker_security
from eoslog.storage import LogManager
from eoslog.types import TopicPartition

log = logging.getLogger(__name__)

REGISTRATION_RETRY_S = 0.5
ELECTION_RETRY_S = 0.5
CLOSE_TIMEOUT_S = 5.0


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class _Refresher:
    """Runs ``refresh`` again after every ``poke``, never two at once, so reads that a burst
    of watch events start cannot finish out of order."""

    def __init__(self, refresh: Callable[[], Awaitable[None]]) -> None:
        self._refresh = refresh
        self._dirty = False
        self._task: asyncio.Task[None] | None = None

    def poke(self) -> None:
        self._dirty = True
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while self._dirty:
            self._dirty = False
            try:
                await self._refresh()
            except Exception as e:  # the session is moving: the next event reads again
                log.warning("cluster metadata refresh failed: %s", e)


class ClusterMember:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id = config.node_id
        self.session_timeout_ms = int(config["zookeeper.session.timeout.ms"])
        self.zk = ZkSession(config.zookeeper_connect, self.session_timeout_ms,
                            config.zookeeper_connection_timeout_ms)
        self.metadata = ClusterMetadata()
        self.producer_ids = ZkProducerIdManager(self.zk, self.broker_id)
        self.controller = Controller(self.zk, self.metadata, self.broker_id, ControllerSettings(
            unclean_leader_election=bool(config["unclean.leader.election.enable"]),
            auto_leader_rebalance=bool(config["auto.leader.rebalance.enable"]),
            imbalance_check_interval_s=float(config["leader.imbalance.check.interval.seconds"]),
            imbalance_percentage=int(config["leader.imbalance.per.broker.percentage"]),
        ), on_deposed=self._end_controllership)
        self.registration: BrokerRegistration | None = None
        self._address: tuple[str, int] | None = None
        self._listeners: dict[str, tuple[str, int]] = {}
        self._watch_tokens: dict[str, object] = {}
        self._brokers = _Refresher(self._refresh_brokers)
        self._shutdowns = _Refresher(self._refresh_shutdown_requests)
        self._session_lost = False
        self._stopping = False
        self._elector: threading.Thread | None = None
        self._election: Any = None  # kazoo's Election (untyped)
        self._controllership_over: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # Inter-broker channels, each with its own connections as Kafka's fetcher threads and
        # marker channel manager have: a broker serves one request at a time per connection,
        # so a WriteTxnMarkers waiting for its markers' replication (group commit) must not sit
        # ahead of the follower fetches that replicate them. Both reach the others through
        # inter.broker.listener.name with the broker's own login.
        timeout_ms = int(config["replica.socket.timeout.ms"])
        listener, security = inter_broker_security(config)
        self.channel = BrokerChannel(self.metadata, self.broker_id, timeout_ms,  # markers, verification
                                     listener, security)
        self.fetch_channel = BrokerChannel(self.metadata, self.broker_id, timeout_ms,  # followers' fetches
                                           listener, security)
        self.internal_topic_creations: dict[str, asyncio.Task[None]] = {}
        self.fetchers: FetcherManager | None = None
        self.leadership: Leadership | None = None

    # -- start-up -------------------------------------------------------------------------

    async def connect(self, proposed_cluster_id: str) -> str:
        """Open the session; the cluster id (``proposed_cluster_id`` if this is the first
        broker of a new cluster)."""
        try:
            await self.zk.start(self._on_session_state)
        except Exception as e:
            raise ClusterError(f"cannot connect to ZooKeeper at {self.zk.hosts}: {e}") from None
        for path in znodes.PERSISTENT_PATHS:
            await self.zk.ensure_path(path)
        cluster_id = await ensure_cluster_id(self.zk, proposed_cluster_id)
        self.metadata.cluster_id = cluster_id
        return cluster_id

    async def join(self, host: str, port: int, listeners: dict[str, tuple[str, int]] | None = None) -> None:
        self._address = (host, port)
        self._listeners = dict(listeners or {})
        await self._register()
        await self._watch()
        await load_metadata(self.zk, self.metadata)
        self.producer_ids.start()
        self._elector = threading.Thread(target=self._elect_forever, name=f"controller-election-{self.broker_id}",
                                         daemon=True)
        self._elector.start()

    async def _register(self) -> None:
        assert self._address is not None
        rack = str(self.config["broker.rack"]) or None
        registration = BrokerRegistration(self.broker_id, *self._address, rack, listeners=self._listeners)
        path = znodes.broker_path(self.broker_id)
        # A broker restarted after kill -9 finds its old session's registration until
        # ZooKeeper expires it (zookeeper.session.timeout.ms); only then may it register.
        deadline = time.monotonic() + 2 * self.session_timeout_ms / 1000 + 5
        warned = False
        while True:
            try:
                await self.zk.create(path, registration.encode(_now_ms()), ephemeral=True)
                break
            except NodeExistsError:
                node = await self.zk.get(path)
                if node is not None and node.ephemeral_owner == self.zk.session_id:
                    break
                if time.monotonic() > deadline:
                    raise ClusterError(f"broker id {self.broker_id} is registered by another live broker "
                                       f"({path} belongs to another ZooKeeper session)") from None
                if not warned:
                    log.warning("%s still holds an earlier registration; waiting for its session to expire", path)
                    warned = True
                await asyncio.sleep(REGISTRATION_RETRY_S)
        node = await self.zk.get(path)
        assert node is not None
        self.registration = replace(registration, epoch=node.czxid)
        log.info("registered as broker %d at %s:%d (broker epoch %d)", self.broker_id, *self._address, node.czxid)

    # -- watches → metadata cache ---------------------------------------------------------

    async def _watch(self) -> None:
        await self.zk.watch_children(znodes.BROKER_IDS, lambda _path, _children: self._brokers.poke())
        await self.zk.watch_children(znodes.CONTROLLED_SHUTDOWN, lambda _path, _children: self._shutdowns.poke())
        await self.zk.watch_children(znodes.LOG_DIR_EVENT_NOTIFICATION,
                                     lambda _path, children: self.metadata.log_dir_events() if children else None)
        await self.zk.watch_children(znodes.DELETE_TOPICS,
                                     lambda _path, topics: self.metadata.set_delete_requests(frozenset(topics)))
        await self.zk.watch_data(znodes.REASSIGN_PARTITIONS, self._on_reassign_requests)
        await self.zk.watch_data(znodes.CONTROLLER, self._on_controller)
        await self.zk.watch_children(znodes.TOPICS, self._on_topics)

    async def _refresh_brokers(self) -> None:
        self.metadata.set_brokers(await read_brokers(self.zk))

    async def _refresh_shutdown_requests(self) -> None:
        self.metadata.set_shutdown_requests(await read_shutdown_requests(self.zk))

    def _on_controller(self, _path: str, node: Znode | None) -> None:
        controller = znodes.decode_controller(node.data) if node is not None and node.data else znodes.NO_LEADER
        self.metadata.set_controller(controller)
        if controller != self.broker_id and self.controller.active:
            log.warning("/controller names broker %d; broker %d stops being controller", controller, self.broker_id)
            self._end_controllership()

    def _on_reassign_requests(self, path: str, node: Znode | None) -> None:
        try:
            requests = znodes.decode_reassignments(node.data) if node is not None and node.data else {}
        except znodes.ZnodeDataError as e:
            log.warning("ignoring %s: %s", path, e)
            requests = {}
        self.metadata.set_reassign_requests(requests)

    def _on_topics(self, _path: str, topics: list[str]) -> None:
        for topic in topics:
            if topic not in self._watch_tokens:
                self._spawn(self._watch_topic(topic))
        for topic in set(self._watch_tokens) - set(topics):
            del self._watch_tokens[topic]  # its watches stop at their next event
            self.metadata.set_topic(topic, None)

    async def _watch_topic(self, topic: str) -> None:
        token = self._watch_tokens[topic] = object()
        watched: set[int] = set()

        def live() -> bool:
            return self._watch_tokens.get(topic) is token

        def on_assignment(path: str, node: Znode | None) -> None:
            if not live():
                return
            if node is None:
                self.metadata.set_topic(topic, None)
                return
            assignment = TopicAssignment.decode(topic, node.data, node.version)
            self.metadata.set_topic(topic, assignment)
            for p in sorted(set(assignment.partitions) - watched):
                watched.add(p)
                self._spawn(self.zk.watch_data(znodes.partition_state_path(topic, p), on_state, until=live))

        def on_state(path: str, node: Znode | None) -> None:
            if live() and node is not None:
                partition = int(path.split("/")[-2])
                self.metadata.set_state(TopicPartition(topic, partition),
                                        LeaderAndIsr.decode(path, node.data, node.version))

        def on_config(path: str, node: Znode | None) -> None:
            if live():
                self.metadata.set_topic_config(topic, znodes.decode_topic_config(topic, node.data if node else b""))

        await self.zk.watch_data(znodes.topic_path(topic), on_assignment, until=live)
        await self.zk.watch_data(znodes.topic_config_path(topic), on_config, until=live)

    def _spawn(self, coro: Awaitable[None]) -> None:
        async def run() -> None:
            try:
                await coro
            except Exception as e:
                log.warning("setting a ZooKeeper watch failed: %s", e)

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- session --------------------------------------------------------------------------

    def _on_session_state(self, state: SessionState) -> None:
        log.info("ZooKeeper session %s", state.value)
        if state is SessionState.LOST:
            # Registration and /controller went with the session; the others' controller
            # moves leadership away. Watches are set again by kazoo on the next session.
            self._session_lost = True
            self._end_controllership()
        elif state is SessionState.CONNECTED and self._session_lost and not self._stopping:
            self._session_lost = False
            self._spawn(self._rejoin())

    async def _rejoin(self) -> None:
        await self._register()
        await load_metadata(self.zk, self.metadata)

    # -- controller candidacy (kazoo's Election recipe, on a thread of its own) ------------

    def _elect_forever(self) -> None:
        while not self._stopping:
            election = self.zk.client.Election(znodes.CONTROLLER_ELECTION, str(self.broker_id))
            self._election = election
            try:
                election.run(self._lead)
            except Exception as e:  # the session is moving; contend again
                log.warning("controller election: %s", e)
            if not self._stopping:
                time.sleep(ELECTION_RETRY_S)

    def _lead(self) -> None:
        """Runs while this broker holds the election lock: controller until that ends."""
        future = asyncio.run_coroutine_threadsafe(self._be_controller(), self.zk.loop)
        try:
            future.result()
        except Exception as e:
            log.warning("controllership ended: %s", e)

    async def _be_controller(self) -> None:
        if self._stopping:
            return
        try:
            epoch, epoch_version = await register_controller(self.zk, self.broker_id, _now_ms())
        except (NodeExistsError, BadVersionError):
            return  # another broker is (or just became) controller: contend again
        self._controllership_over = asyncio.Event()
        # Known at once, as the controller's own state writes are (Kafka's activeControllerId):
        # its /controller watch may fire after it has already elected leaders.
        self.metadata.set_controller(self.broker_id)
        self.controller.activate(epoch, epoch_version)
        await self._controllership_over.wait()
        self.controller.deactivate()
        await self.zk.delete(znodes.CONTROLLER)  # let the next one in now (fails harmlessly if not ours)

    def _end_controllership(self) -> None:
        if self._controllership_over is not None:
            self._controllership_over.set()

    # -- replication (once the broker's logs and partitions exist) ------------------------

    def start_replication(self, logs: LogManager, replicas: ReplicaManager, clock_ms: Callable[[], int],
                          on_leader: RoleListener, on_follower: RoleListener) -> None:
        """Follow the partition states: lead, follow (fetchers), keep the ISR. ``on_leader``
        and ``on_follower`` hear of every role change (the coordinators' partitions)."""
        c = self.config
        self.fetchers = FetcherManager(self.fetch_channel, replicas, FetcherSettings(
            broker_id=self.broker_id, max_wait_ms=int(c["replica.fetch.wait.max.ms"]),
            min_bytes=int(c["replica.fetch.min.bytes"]), max_bytes=int(c["replica.fetch.response.max.bytes"]),
            partition_max_bytes=int(c["replica.fetch.max.bytes"]), backoff_s=int(c["replica.fetch.backoff.ms"]) / 1000,
        ))
        self.leadership = Leadership(self.broker_id, self.zk, self.metadata, logs, replicas, self.fetchers,
                                     int(c["replica.lag.time.max.ms"]), clock_ms)
        self.leadership.on_leader.append(on_leader)
        self.leadership.on_follower.append(on_follower)
        self.leadership.start()

    def stop_fetching(self) -> None:
        """Controlled shutdown's first step: a follower that keeps fetching would be taken
        back into the ISR."""
        if self.leadership is not None:
            self.leadership.stop()
        self.fetch_channel.close()
        self.channel.close()

    def partition_exists(self, tp: TopicPartition) -> bool:
        assignment = self.metadata.topics.get(tp.topic)
        return assignment is not None and tp.partition in assignment.partitions

    # -- topics (any broker writes the assignment; the controller elects the leaders) ------

    async def create_topic(self, topic: str, assignment: Mapping[int, tuple[int, ...]],
                           overrides: Mapping[str, str]) -> TopicAssignment:
        """Write a validated topic; raises TopicExists when the name is taken meanwhile."""
        try:
            created = await create_topic(self.zk, topic, assignment, overrides)
        except NodeExistsError:
            raise TopicExists(topic) from None
        self.metadata.set_topic(topic, created)
        self.metadata.set_topic_config(topic, dict(overrides))
        return created

    def topic_overrides(self, topic: str) -> dict[str, str] | None:
        """The topic's config overrides as ZooKeeper has them; None when there is no such topic."""
        if topic not in self.metadata.topics:
            return None
        return dict(self.metadata.topic_configs.get(topic, {}))

    async def alter_topic_config(self, topic: str, overrides: dict[str, str]) -> None:
        """Write the topic's overrides to /config/topics/T (Kafka's AdminZkClient.changeTopicConfig);
        this broker applies them at once, the others when their watch fires."""
        try:
            await self.zk.set(znodes.topic_config_path(topic), znodes.encode_topic_config(overrides), -1)
        except NoNodeError:
            raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist.") from None
        except KazooException as e:
            raise KafkaError(Errors.UNKNOWN_SERVER_ERROR, f"ZooKeeper refused the change: {e!r}") from None
        self.metadata.set_topic_config(topic, dict(overrides))

    def assign(self, partitions: int, replication_factor: int, first_partition: int = 0) -> dict[int, tuple[int, ...]]:
        """Kafka's placement over the live brokers (AssignmentError when too few)."""
        return assign_replicas(sorted(self.metadata.brokers), partitions, replication_factor, first_partition,
                               racks=self.broker_racks())

    def broker_racks(self) -> dict[int, str | None]:
        """Each live broker's ``broker.rack``, as it registered."""
        return {b: r.rack for b, r in self.metadata.brokers.items()}

    async def wait_for_leaders(self, topic: str, timeout_s: float) -> bool:
        """Until every partition of ``topic`` has a live leader (Kafka's DelayedCreatePartitions)."""
        def ready() -> bool:
            tps = list(self.metadata.partitions_of(topic))
            return bool(tps) and all(self.metadata.leader(tp) != znodes.NO_LEADER for tp in tps)

        return await self.metadata.wait_for(ready, timeout_s)

    async def elect_leaders(self, partitions: list[TopicPartition] | None,
                            unclean: bool) -> dict[TopicPartition, Errors]:
        """ElectLeaders on the controller; KafkaError(NOT_CONTROLLER) on any other broker."""
        try:
            return await self._controller().elect_leaders(partitions, unclean)
        except ControllerMoved:
            raise KafkaError(Errors.NOT_CONTROLLER, f"broker {self.broker_id} stopped being controller") from None

    def _controller(self) -> Controller:
        if not self.controller.active:
            raise KafkaError(Errors.NOT_CONTROLLER, f"broker {self.broker_id} is not the controller")
        return self.controller

    async def alter_reassignments(self, targets: dict[TopicPartition, tuple[int, ...] | None],
                                  allow_replication_factor_change: bool) -> dict[TopicPartition, Refusal | None]:
        """AlterPartitionReassignments on the controller; KafkaError(NOT_CONTROLLER) elsewhere."""
        try:
            return await self._controller().alter_reassignments(targets, allow_replication_factor_change)
        except ControllerMoved:
            raise KafkaError(Errors.NOT_CONTROLLER, f"broker {self.broker_id} stopped being controller") from None

    async def list_reassignments(self, partitions: list[TopicPartition] | None
                                 ) -> dict[TopicPartition, ReplicaAssignment]:
        try:
            return await self._controller().list_reassignments(partitions)
        except ControllerMoved:
            raise KafkaError(Errors.NOT_CONTROLLER, f"broker {self.broker_id} stopped being controller") from None

    # -- shut-down ------------------------------------------------------------------------

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Ask the controller to move leadership away and wait until this broker is in no ISR
        that has another eligible member: it leads nothing another replica could lead and no
        leader waits for it before answering acks=all (Kafka's controller does both before it
        answers ControlledShutdown). False when that did not happen within ``timeout_s``."""
        if self.registration is None:
            return True
        self.stop_fetching()
        path = znodes.controlled_shutdown_path(self.broker_id)
        data = str(self.registration.epoch).encode()
        try:
            await self.zk.create(path, data)
        except NodeExistsError:
            await self.zk.set(path, data, -1)
        if await self.metadata.wait_for(lambda: not self._isrs_others_can_carry(), timeout_s):
            return True
        held = self._isrs_others_can_carry()
        log.warning("still in the ISR of %d partitions others could carry: %s", len(held),
                    ", ".join(f"{tp.topic}-{tp.partition} {list(state.isr)}" for tp, state in held[:10]))
        return False

    def _isrs_others_can_carry(self) -> list[tuple[TopicPartition, LeaderAndIsr]]:
        # The leader is always in its ISR, so this covers the partitions this broker leads too.
        # Only eligible members count: when every other one is shutting down as well (a whole
        # cluster stopped at once) nothing can move, and waiting out the budget gains nothing.
        return [(tp, state) for tp, state in self.metadata.states.items()
                if self.broker_id in state.isr
                and any(r != self.broker_id and self.metadata.isr_eligible(r) for r in state.isr)]

    async def close(self) -> None:
        """Leave: no more candidacy, controller duties end, the session closes (which deletes
        the registration at once instead of after the session timeout)."""
        self._stopping = True
        self.stop_fetching()
        if self._election is not None:
            self._election.cancel()
        self._end_controllership()
        self.producer_ids.stop()
        for task in list(self._tasks):
            task.cancel()
        if self.controller.active:
            self.controller.deactivate()
        try:  # a broker cut off from ZooKeeper still stops
            await asyncio.wait_for(self.zk.delete(znodes.controlled_shutdown_path(self.broker_id)), CLOSE_TIMEOUT_S)
        except Exception as e:
            log.warning("could not remove the controlled-shutdown request: %s", e)
        await asyncio.wait_for(self.zk.close(), CLOSE_TIMEOUT_S)

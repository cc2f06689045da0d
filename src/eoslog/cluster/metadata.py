"""What a broker knows of the cluster: Kafka's MetadataCache, fed by ZooKeeper watches.

Live brokers, the controller, every topic's assignment and config overrides, every
partition's leadership. ``ClusterMember`` applies what its watches deliver; the controller
also applies its own successful writes at once, so its next decision does not read a state
it has itself replaced. A partition state is only replaced by a newer version of its znode
(a newer leader epoch always comes with one), so a late delivery never moves a broker back.
Listeners are told of each change, on the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from eoslog.cluster.controller.reassignment import ReplicaAssignment
from eoslog.cluster.znodes import NO_LEADER, BrokerRegistration, LeaderAndIsr, TopicAssignment
from eoslog.errors import Errors
from eoslog.types import TopicPartition


@dataclass(frozen=True, slots=True)
class PartitionView:
    """One partition as Metadata reports it."""

    partition: int
    leader: int  # -1 when there is none (or it is not alive)
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    error: Errors  # NONE or LEADER_NOT_AVAILABLE


# A change, for listeners: ("brokers", None), ("topic", name), ("state", TopicPartition),
# ("controller", None), ("config", name), ("shutdown", None), ("deletes", None),
# ("reassignments", None), ("log_dir_events", None).
Change = tuple[str, object]


class ClusterMetadata:
    def __init__(self) -> None:
        self.cluster_id = ""
        self.controller_id = NO_LEADER
        self.brokers: dict[int, BrokerRegistration] = {}
        self.topics: dict[str, TopicAssignment] = {}
        self.states: dict[TopicPartition, LeaderAndIsr] = {}
        self.topic_configs: dict[str, dict[str, str]] = {}
        # /admin/controlled_shutdown: broker id → the broker epoch it asked with.
        self.shutdown_requests: dict[int, int] = {}
        # /admin/delete_topics: topics whose deletion was asked for.
        self.delete_requests: frozenset[str] = frozenset()
        # /admin/reassign_partitions: (topic, partition) → target replicas asked for there.
        self.reassign_requests: dict[tuple[str, int], tuple[int, ...]] = {}
        self._listeners: list[Callable[[Change], None]] = []
        # What Metadata answers for a topic changes only with its assignment, its partitions'
        # states and which brokers are alive: a version for each, from one counter (a topic
        # deleted and made again never gets a version it had), for its encoded entry's cache.
        self._version = 0
        self._brokers_version = 0
        self._topic_versions: dict[str, int] = {}

    def subscribe(self, listener: Callable[[Change], None]) -> Callable[[], None]:
        """Call ``listener`` at each change; returns the function that unsubscribes it."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def _changed(self, change: Change) -> None:
        kind, subject = change
        if kind in ("brokers", "topic", "state"):
            self._version += 1
            if kind == "brokers":
                self._brokers_version = self._version
            elif isinstance(subject, TopicPartition):
                self._topic_versions[subject.topic] = self._version
            elif isinstance(subject, str):
                self._topic_versions[subject] = self._version
        for listener in list(self._listeners):
            listener(change)

    # -- updates (from watches, and from the controller's own writes) ----------------------

    def set_brokers(self, brokers: dict[int, BrokerRegistration]) -> None:
        if brokers != self.brokers:
            self.brokers = dict(brokers)
            self._changed(("brokers", None))

    def set_controller(self, controller_id: int) -> None:
        if controller_id != self.controller_id:
            self.controller_id = controller_id
            self._changed(("controller", None))

    def set_topic(self, topic: str, assignment: TopicAssignment | None) -> None:
        if assignment is None:
            if self.topics.pop(topic, None) is None:
                return
            for tp in [tp for tp in self.states if tp.topic == topic]:
                del self.states[tp]
            self.topic_configs.pop(topic, None)
        else:
            current = self.topics.get(topic)
            if (current is not None and current.topic_id == assignment.topic_id
                    and 0 <= assignment.zk_version < current.zk_version):
                return  # a read older than what the controller wrote and applied
            self.topics[topic] = assignment
            if current == assignment:
                return  # the same assignment (a newer version of it: kept for the check above)
        self._changed(("topic", topic))

    def set_state(self, tp: TopicPartition, state: LeaderAndIsr | None) -> bool:
        """Apply a partition state read (or written) at ``state.zk_version``; False when it is
        not newer than the one held."""
        current = self.states.get(tp)
        if state is None:
            if current is None:
                return False
            del self.states[tp]
        elif current is not None and state.zk_version <= current.zk_version:
            return False
        elif tp.topic not in self.topics:
            return False  # a late delivery for a deleted topic
        else:
            self.states[tp] = state
        self._changed(("state", tp))
        return True

    def log_dir_events(self) -> None:
        """``/log_dir_event_notification`` got children (only the controller reads them)."""
        self._changed(("log_dir_events", None))

    def set_shutdown_requests(self, requests: dict[int, int]) -> None:
        if requests != self.shutdown_requests:
            self.shutdown_requests = dict(requests)
            self._changed(("shutdown", None))

    def set_delete_requests(self, topics: frozenset[str]) -> None:
        if topics != self.delete_requests:
            self.delete_requests = topics
            self._changed(("deletes", None))

    def set_reassign_requests(self, requests: dict[tuple[str, int], tuple[int, ...]]) -> None:
        if requests != self.reassign_requests:
            self.reassign_requests = dict(requests)
            self._changed(("reassignments", None))

    def set_topic_config(self, topic: str, overrides: dict[str, str]) -> None:
        if self.topic_configs.get(topic, {}) != overrides:
            self.topic_configs[topic] = dict(overrides)
            self._changed(("config", topic))

    async def wait_for(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        """Until ``condition()`` holds after some change (True), or ``timeout_s`` passed (False)."""
        changed = asyncio.Event()
        unsubscribe = self.subscribe(lambda _change: changed.set())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        try:
            while not condition():
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return False
                changed.clear()
                try:
                    await asyncio.wait_for(changed.wait(), remaining)
                except TimeoutError:
                    return condition()
            return True
        finally:
            unsubscribe()

    # -- reads ----------------------------------------------------------------------------

    def topic_version(self, topic: str) -> tuple[int, int] | None:
        """Changes whenever ``view`` of any of the topic's partitions may (None: no such topic)."""
        if topic not in self.topics:
            return None
        return self._brokers_version, self._topic_versions.get(topic, 0)

    def is_alive(self, broker_id: int) -> bool:
        return broker_id in self.brokers

    def isr_eligible(self, broker_id: int) -> bool:
        """May join an ISR: registered, and not asking to shut down in its current
        registration (a request left from an earlier one is stale)."""
        registration = self.brokers.get(broker_id)
        return registration is not None and self.shutdown_requests.get(broker_id) != registration.epoch

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        assignment = self.topics.get(tp.topic)
        return () if assignment is None else tuple(assignment.partitions.get(tp.partition, ()))

    def assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        """The partition's replicas with the ones being added and removed (KIP-455)."""
        topic = self.topics.get(tp.topic)
        if topic is None:
            return ReplicaAssignment(())
        p = tp.partition
        return ReplicaAssignment(tuple(topic.partitions.get(p, ())), tuple(topic.adding.get(p, ())),
                                 tuple(topic.removing.get(p, ())))

    def partitions_of(self, topic: str) -> Iterator[TopicPartition]:
        assignment = self.topics.get(topic)
        if assignment is not None:
            for p in sorted(assignment.partitions):
                yield TopicPartition(topic, p)

    def leader(self, tp: TopicPartition) -> int:
        """The live leader's id, or -1."""
        state = self.states.get(tp)
        if state is None or not self.is_alive(state.leader):
            return NO_LEADER
        return state.leader

    def view(self, tp: TopicPartition) -> PartitionView:
        replicas = self.replicas(tp)
        state = self.states.get(tp)
        offline = tuple(r for r in replicas if not self.is_alive(r))
        if state is None:
            return PartitionView(tp.partition, NO_LEADER, -1, replicas, (), offline, Errors.LEADER_NOT_AVAILABLE)
        leader = self.leader(tp)
        return PartitionView(tp.partition, leader, state.leader_epoch, replicas, state.isr, offline,
                             Errors.NONE if leader != NO_LEADER else Errors.LEADER_NOT_AVAILABLE)

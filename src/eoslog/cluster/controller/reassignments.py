"""The controller's partition reassignments (KIP-455; Kafka's KafkaController.onPartitionReassignment
and its callers), run on the controller's one task.

A reassignment starts from AlterPartitionReassignments or from ``/admin/reassign_partitions``
(Kafka ≤ 3.x's znode; the latest request for a partition wins, so an API request takes the
partition out of the znode). Its steps, each a ZooKeeper write fenced by the controller epoch:

1. the topic's assignment gets RS = TRS + ORS, AR and RR (``adding_replicas`` /
   ``removing_replicas``); replicas that an earlier target added and this one does not keep
   leave the ISR. Brokers watch the assignment: an added replica is created and follows the
   leader, which counts it for nothing until it joins the ISR. A replica being removed that
   fell out of the ISR (its broker restarted) may rejoin it until the reassignment is complete
   (``ReplicaAssignment.may_join_isr``), as Kafka's leader counts the full replica set;
2. once every target replica is in the ISR (the leader's own ISR expansions, seen through the
   partition's state znode), one state write moves leadership into the target if it is not
   there (a new leader epoch: the coordinators of internal partitions move as on any election)
   and takes the removed replicas out of the ISR;
3. the assignment becomes TRS; the removed replicas' brokers see that and delete their logs;
   a removed replica the leader took back in meanwhile (a target replica fell out, so the
   leader no longer saw the reassignment complete) leaves the ISR again on the ISR change
   (``strays``); the partition leaves ``/admin/reassign_partitions``.

Nothing else is kept: a new controller resumes every partition whose assignment still names
adding or removing replicas. Cancelling is reassigning back to the original replicas.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from kazoo.exceptions import BadVersionError, NoNodeError

from eoslog.cluster import znodes
from eoslog.cluster.controller.events import AlterReassignments, ListReassignments
from eoslog.cluster.controller.reassignment import (
    Refusal,
    ReplicaAssignment,
    check_target,
    complete,
    is_complete,
)
from eoslog.cluster.zk import Op
from eoslog.cluster.znodes import NO_LEADER, LeaderAndIsr, TopicAssignment
from eoslog.errors import Errors
from eoslog.types import TopicPartition

if TYPE_CHECKING:
    from eoslog.cluster.controller.controller import Controller

log = logging.getLogger(__name__)

ASSIGNMENT_WRITE_ATTEMPTS = 10
NOT_FOUND = Refusal(Errors.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
NOT_IN_PROGRESS = Refusal(Errors.NO_REASSIGNMENT_IN_PROGRESS, "No reassignment is in progress for this partition.")


class Reassignments:
    def __init__(self, controller: Controller) -> None:
        self.controller = controller
        self.metadata = controller.metadata
        self.zk = controller.zk
        self.in_progress: set[TopicPartition] = set()  # Kafka's partitionsBeingReassigned

    def clear(self) -> None:
        self.in_progress.clear()

    # -- events ---------------------------------------------------------------------------

    async def resume(self) -> None:
        """A new controller: what ZooKeeper asks for, then every partition its assignment
        says is still moving (Kafka's initializePartitionReassignments)."""
        for tp in self.controller.all_partitions():
            if self.metadata.assignment(tp).being_reassigned:
                self.in_progress.add(tp)
        if self.in_progress:
            log.info("resuming the reassignments of %s",
                     sorted(f"{tp.topic}-{tp.partition}" for tp in self.in_progress))
        from_zk = await self.zk_requests_changed()
        for tp in sorted(self.in_progress - from_zk):
            await self.maybe_complete(tp)

    async def alter(self, event: AlterReassignments) -> dict[TopicPartition, Refusal | None]:
        """Kafka's processApiPartitionReassignment."""
        results: dict[TopicPartition, Refusal | None] = {}
        todo: dict[TopicPartition, ReplicaAssignment] = {}
        live = set(self.metadata.brokers)
        for tp, target in event.targets.items():
            current = self.metadata.assignment(tp)
            if not current.replicas or tp.topic in self.metadata.delete_requests:
                results[tp] = NOT_FOUND
            elif target is None:
                if current.being_reassigned:
                    todo[tp] = current.cancelled()
                else:
                    results[tp] = NOT_IN_PROGRESS
            elif (refused := check_target(target, current, live, event.allow_replication_factor_change)) is not None:
                results[tp] = refused
            else:
                todo[tp] = current.reassign_to(target)
        # The latest request for a partition wins: one made through the API leaves the znode.
        await self._remove_zk_requests(lambda tp, _target: tp in todo)
        for tp, assignment in todo.items():
            results[tp] = await self._start(tp, assignment)
        return results

    def listed(self, event: ListReassignments) -> dict[TopicPartition, ReplicaAssignment]:
        wanted = sorted(self.in_progress) if event.partitions is None else event.partitions
        return {tp: a for tp in wanted if (a := self.metadata.assignment(tp)).being_reassigned}

    async def zk_requests_changed(self) -> set[TopicPartition]:
        """Kafka's processZkPartitionReassignment: start what ``/admin/reassign_partitions``
        asks for; entries that cannot start leave it. The partitions started."""
        started: set[TopicPartition] = set()
        failed: dict[TopicPartition, Refusal] = {}
        live = set(self.metadata.brokers)
        for (topic, partition), target in sorted(self.metadata.reassign_requests.items()):
            tp = TopicPartition(topic, partition)
            current = self.metadata.assignment(tp)
            refused = (NOT_FOUND if not current.replicas or topic in self.metadata.delete_requests
                       else check_target(target, current, live))
            if refused is None:
                refused = await self._start(tp, current.reassign_to(target))
            if refused is None:
                started.add(tp)
            else:
                failed[tp] = refused
        if failed:
            log.warning("reassignments asked for in %s refused: %s", znodes.REASSIGN_PARTITIONS,
                        {f"{tp.topic}-{tp.partition}": f"{r.error.name}: {r.message}" for tp, r in failed.items()})
            await self._remove_zk_requests(lambda tp, _target: tp in failed)
        return started

    def strays(self, tp: TopicPartition) -> set[int]:
        """ISR members the assignment no longer names: a removed replica the leader took back
        in just as the reassignment completed (before it saw the final assignment)."""
        state, replicas = self.metadata.states.get(tp), self.metadata.assignment(tp).replicas
        if state is None or not replicas:  # a topic being deleted has no assignment left
            return set()
        return set(state.isr) - set(replicas)

    async def isr_changed(self, tp: TopicPartition) -> None:
        if tp in self.in_progress:
            await self.maybe_complete(tp)
        elif gone := self.strays(tp):
            await self._leave_isr(tp, gone, self.metadata.assignment(tp))

    async def brokers_changed(self) -> None:
        """A target replica that came back may now lead: look at every moving partition again."""
        for tp in sorted(self.in_progress):
            await self.maybe_complete(tp)

    def topic_busy(self, topic: str) -> bool:
        """A topic is not deleted while one of its partitions moves (Kafka marks it ineligible)."""
        return any(tp.topic == topic for tp in self.in_progress)

    # -- one partition ----------------------------------------------------------------------

    async def _start(self, tp: TopicPartition, assignment: ReplicaAssignment) -> Refusal | None:
        """Kafka's onPartitionReassignment from its first step (updateCurrentReassignment)."""
        current = self.metadata.assignment(tp)
        if current != assignment:
            if not await self._write_assignment(tp, assignment):
                return NOT_FOUND
            log.info("%s: reassigning from %s to %s (adding %s, removing %s)", tp, list(current.target),
                     list(assignment.target), list(assignment.adding), list(assignment.removing))
            # Replicas an earlier target added that this one does not keep (a cancellation's).
            unneeded = set(current.replicas) - set(assignment.replicas)
            if unneeded:
                await self._leave_isr(tp, unneeded, assignment)
        self.in_progress.add(tp)
        await self.maybe_complete(tp)
        return None

    async def maybe_complete(self, tp: TopicPartition) -> None:
        """Kafka's onPartitionReassignment, phase B, once every target replica is in the ISR."""
        assignment = self.metadata.assignment(tp)
        if not assignment.being_reassigned:
            await self._done(tp, assignment)
            return
        live = self.controller.candidates()

        def decide(current: LeaderAndIsr) -> LeaderAndIsr | None:
            if not is_complete(assignment, current.isr):
                return None
            new = complete(assignment, current, live, self.controller.epoch)
            return None if new is None or new is current else new

        state = await self.controller.update_state(tp, decide)
        target = assignment.target
        if (state is None or state.leader not in target or state.leader not in live
                or set(state.isr) != set(target)):
            return  # not yet: the ISR or the brokers will change
        final = ReplicaAssignment(target)
        if not await self._write_assignment(tp, final):
            return
        log.info("%s: reassignment to %s complete (leader %d, epoch %d)", tp, list(target), state.leader,
                 state.leader_epoch)
        await self._done(tp, final)

    async def _done(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        """Kafka's removePartitionFromReassigningPartitions."""
        self.in_progress.discard(tp)
        await self._remove_zk_requests(lambda t, target: t == tp and tuple(target) == assignment.replicas)
        if tp.topic in self.metadata.delete_requests:
            self.controller.deletion_ready()

    async def _leave_isr(self, tp: TopicPartition, gone: Collection[int], assignment: ReplicaAssignment) -> None:
        """Replicas dropped from the assignment leave the ISR (Kafka's OfflineReplica); a
        leader among them hands over to a live in-sync replica that stays, else none leads."""
        candidates = self.controller.candidates()

        def decide(current: LeaderAndIsr) -> LeaderAndIsr | None:
            isr = tuple(r for r in current.isr if r not in gone)
            if current.leader not in gone:
                return None if isr == current.isr else LeaderAndIsr(
                    current.leader, current.leader_epoch, isr, self.controller.epoch, current.zk_version)
            leader = next((r for r in assignment.replicas if r in candidates and r in isr), NO_LEADER)
            return current.new_leader(leader, isr or current.isr, self.controller.epoch)

        await self.controller.update_state(tp, decide)

    # -- ZooKeeper --------------------------------------------------------------------------

    async def _write_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> bool:
        """The topic's assignment with this partition's replaced, conditional on the topic
        znode's version read (a CreatePartitions meanwhile is not overwritten) and fenced by
        the controller epoch. False when the topic is gone."""
        path = znodes.topic_path(tp.topic)
        for _ in range(ASSIGNMENT_WRITE_ATTEMPTS):
            node = await self.zk.get(path)
            if node is None:
                return False
            topic = TopicAssignment.decode(tp.topic, node.data, node.version)
            if tp.partition not in topic.partitions:
                return False
            updated = topic.with_partition(tp.partition, assignment.replicas, assignment.adding, assignment.removing)
            try:
                results = await self.controller.commit([Op("set", path, updated.encode(), version=node.version)])
            except BadVersionError:
                continue
            except NoNodeError:
                return False
            self.metadata.set_topic(tp.topic, updated.at_version(int(results[1].version)))
            return True
        log.warning("%s: gave up writing the assignment after %d conflicting updates", tp, ASSIGNMENT_WRITE_ATTEMPTS)
        return False

    async def _remove_zk_requests(self, drop: Callable[[TopicPartition, tuple[int, ...]], bool]) -> None:
        """Kafka's maybeRemoveFromZkReassignment: the znode without the entries ``drop``
        names, deleted once empty; conditional on the version read, so an entry added
        meanwhile is not lost."""
        for _ in range(ASSIGNMENT_WRITE_ATTEMPTS):
            node = await self.zk.get(znodes.REASSIGN_PARTITIONS)
            if node is None:
                return
            try:
                requests = znodes.decode_reassignments(node.data)
            except znodes.ZnodeDataError as e:
                log.warning("%s; deleting it", e)
                requests = {}
            kept = {key: r for key, r in requests.items() if not drop(TopicPartition(*key), r)}
            if requests and kept == requests:
                return
            op = (Op("set", znodes.REASSIGN_PARTITIONS, znodes.encode_reassignments(kept), version=node.version)
                  if kept else Op("delete", znodes.REASSIGN_PARTITIONS, version=node.version))
            try:
                await self.controller.commit([op])
            except (BadVersionError, NoNodeError):
                continue
            self.metadata.set_reassign_requests(kept)
            return

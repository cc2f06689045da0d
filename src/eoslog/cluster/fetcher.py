"""Followers copying their leaders (Kafka's ReplicaFetcherManager / AbstractFetcherThread).

One fetcher task per leader broker, for all the partitions this broker follows there. A
partition that starts following (a new leader, a new epoch) first truncates: it asks the
leader with OffsetForLeaderEpoch where its own latest epoch ended there and cuts its log at
the answer (KIP-101, KIP-279; ``storage.leader_epoch.follower_truncation``), so that records
a deposed leader wrote and the new leader never had go. Then it fetches with its replica id
from its log end offset — which tells the leader how far it is — and appends what comes back
as it is (``Partition.append_records_to_follower``: offsets kept, producer state, open
transactions and the aborted-transaction index rebuilt from the batches), taking the leader's
high watermark. A partition whose follower throttle applies (``quotas.replication``: not in
the ISR, named in ``follower.replication.throttled.replicas``) is left out of the fetch while
``follower.replication.throttled.rate`` is exceeded. With ``log.flush.policy=group-commit``
the appends of a fetch are fsynced (one group-commit round) before the next fetch reports
them to the leader, so an acks=all write is acknowledged only once every ISR member that
counts has it on disk (markers come the same way). Errors back off for
``replica.fetch.backoff.ms``, cut short by a partition added meanwhile (as Kafka's fetcher
thread waits on a condition its addPartitions signals); a leader change arrives through the
metadata cache and moves the partition to another fetcher.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from dataclasses import dataclass
from typing import Any

from eoslog.client.errors import KafkaError as ClientError
from eoslog.client.versions import ApiVersionTable
from eoslog.cluster.channel import BrokerChannel
from eoslog.errors import Errors, KafkaError
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import from_code
from eoslog.protocol.messages import build, request_types
from eoslog.quotas.replication import FOLLOWER_REPLICAS
from eoslog.replica import Partition, ReplicaManager
from eoslog.storage.leader_epoch import follower_truncation
from eoslog.types import TopicPartition

log = logging.getLogger(__name__)

# Errors after which the leader will soon be another (or the same with another epoch): wait
# for the metadata cache to say so.
_WAIT_FOR_METADATA = frozenset({Errors.NOT_LEADER_OR_FOLLOWER, Errors.FENCED_LEADER_EPOCH,
                                Errors.UNKNOWN_LEADER_EPOCH, Errors.UNKNOWN_TOPIC_OR_PARTITION})
# The leader has not yet seen what our watch told us (it leads from this epoch, the topic
# exists): it will within milliseconds, so such a round is retried after LEADER_CATCHING_UP_S
# rather than replica.fetch.backoff.ms (1 s by default: a failover's first acks=all write
# waited for it whenever the follower learned of the election before the leader did).
_LEADER_BEHIND = frozenset({Errors.NOT_LEADER_OR_FOLLOWER, Errors.UNKNOWN_LEADER_EPOCH,
                            Errors.UNKNOWN_TOPIC_OR_PARTITION})
LEADER_CATCHING_UP_S = 0.05


@dataclass(frozen=True, slots=True)
class FetcherSettings:
    broker_id: int
    max_wait_ms: int  # replica.fetch.wait.max.ms
    min_bytes: int  # replica.fetch.min.bytes
    max_bytes: int  # replica.fetch.response.max.bytes
    partition_max_bytes: int  # replica.fetch.max.bytes
    backoff_s: float  # replica.fetch.backoff.ms


@dataclass(slots=True)
class _FetchState:
    leader_epoch: int
    truncating: bool = True


class ReplicaFetcher:
    """The partitions followed on one leader broker, and the task fetching them."""

    def __init__(self, leader_id: int, channel: BrokerChannel, replicas: ReplicaManager,
                 settings: FetcherSettings) -> None:
        self.leader_id = leader_id
        self.channel = channel
        self.replicas = replicas
        self.settings = settings
        self.partitions: dict[TopicPartition, _FetchState] = {}
        self._wake = asyncio.Event()
        self._leader_behind = False  # this round met _LEADER_BEHIND errors
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"replica-fetcher-{leader_id}")

    def add(self, tp: TopicPartition, leader_epoch: int) -> None:
        self.partitions[tp] = _FetchState(leader_epoch)
        self._wake.set()

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    def close(self) -> None:
        self._task.cancel()

    async def _run(self) -> None:
        while True:
            self._wake.clear()  # set by a partition added from here on: it cuts a back-off short
            if not self.partitions:
                await self._wake.wait()
                continue
            try:
                self._leader_behind = False
                truncating = [tp for tp, s in self.partitions.items() if s.truncating]
                progressed = await self._truncate(truncating) if truncating else False
                ready = {tp: s for tp, s in self.partitions.items() if not s.truncating}
                if ready:
                    progressed = await self._fetch(ready) or progressed
                if not progressed:  # every partition errored or waits for its leadership to settle
                    await self._back_off(LEADER_CATCHING_UP_S if self._leader_behind else self.settings.backoff_s)
            except (ClientError, OSError) as e:  # the leader is unreachable or went away
                log.debug("fetcher for leader %d: %s", self.leader_id, e)
                await self._back_off(self.settings.backoff_s)
            except KafkaError as e:  # a log directory of this broker failed (group commit's round)
                log.warning("fetcher for leader %d: %s", self.leader_id, e)
                await self._back_off(self.settings.backoff_s)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("fetcher for leader %d failed; backing off", self.leader_id)
                await self._back_off(self.settings.backoff_s)

    async def _back_off(self, seconds: float) -> None:
        """Kafka's partitionMapCond.await(fetchBackOffMs), which addPartitions signals: a
        partition added since this round began (a reassignment's new replica, a new leader
        epoch) ends the wait, so it does not wait out a back-off that was not its own."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)

    def _partition(self, tp: TopicPartition, state: _FetchState) -> Partition | None:
        """The local replica if it still follows this leader in that epoch."""
        if self.partitions.get(tp) is not state:
            return None
        partition = self.replicas.get_partition(tp)
        if (partition is None or partition.is_leader or partition.leader_epoch != state.leader_epoch
                or partition.log.offline):  # (its log directory failed: no offset of it is reported again)
            return None
        return partition

    # -- truncation (KIP-101 / KIP-279) --------------------------------------------------------

    async def _truncate(self, tps: list[TopicPartition]) -> bool:
        """False when no partition got an answer it could act on."""
        states = {tp: self.partitions[tp] for tp in tps}
        asked: dict[TopicPartition, int] = {}
        for tp, st in states.items():
            partition = self._partition(tp, st)
            if partition is not None:
                asked[tp] = partition.log.epochs.latest_epoch
        if not asked:
            return False

        def make(versions: ApiVersionTable) -> Any:
            m = request_types(ApiKey.OFFSET_FOR_LEADER_EPOCH, versions.pick(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, 3))
            by_topic: dict[str, list[Any]] = {}
            for tp, epoch in asked.items():
                by_topic.setdefault(tp.topic, []).append(build(
                    m.OffsetForLeaderPartition, partition=tp.partition,
                    current_leader_epoch=states[tp].leader_epoch, leader_epoch=epoch))
            return build(m.OffsetForLeaderEpochRequest, replica_id=self.settings.broker_id, topics=tuple(
                build(m.OffsetForLeaderTopic, topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()))

        response = await self.channel.send(self.leader_id, make)
        acted = False
        for t in response.topics:
            for p in t.partitions:
                tp = TopicPartition(str(t.topic), int(p.partition))
                state = states.get(tp)
                partition = None if state is None else self._partition(tp, state)
                if state is None or partition is None:
                    continue
                error = from_code(int(p.error_code))
                if error is not Errors.NONE:
                    log.debug("%s: OffsetForLeaderEpoch from %d: %s", tp, self.leader_id, error.name)
                    self._leader_behind |= error in _LEADER_BEHIND
                    continue
                plog = partition.log
                cut = follower_truncation(plog.epochs, plog.log_end_offset, plog.high_watermark,
                                          int(p.leader_epoch), int(p.end_offset))
                if cut.offset < plog.log_end_offset:
                    plog.truncate_to(cut.offset)
                state.truncating = not cut.complete
                acted = True
        return acted

    # -- fetching ----------------------------------------------------------------------------

    async def _fetch(self, ready: dict[TopicPartition, _FetchState]) -> bool:
        """One Fetch for every ready partition; False when it should back off."""
        offsets: dict[TopicPartition, int] = {}
        throttled: set[TopicPartition] = set()
        quota = self.replicas.follower_quota
        exceeded = quota.is_exceeded()
        for tp, st in ready.items():
            partition = self._partition(tp, st)
            if partition is None:
                continue
            if (self.settings.broker_id not in partition.isr
                    and quota.is_throttled(str(partition.log.config[FOLLOWER_REPLICAS]), tp.partition)):
                if exceeded:
                    continue  # Kafka's shouldFollowerThrottle: not fetched until the rate falls
                throttled.add(tp)
            offsets[tp] = partition.log.log_end_offset
        if not offsets:
            return False
        s = self.settings

        def make(versions: ApiVersionTable) -> Any:
            m = request_types(ApiKey.FETCH, versions.pick(ApiKey.FETCH, 12, 4))
            by_topic: dict[str, list[Any]] = {}
            for tp, offset in offsets.items():
                plog = self.replicas.get_partition(tp)
                by_topic.setdefault(tp.topic, []).append(build(
                    m.FetchPartition, partition=tp.partition, current_leader_epoch=ready[tp].leader_epoch,
                    fetch_offset=offset, last_fetched_epoch=-1,
                    log_start_offset=plog.log.log_start_offset if plog is not None else -1,
                    partition_max_bytes=s.partition_max_bytes))
            return build(m.FetchRequest, cluster_id=None, replica_id=s.broker_id,
                         max_wait=datetime.timedelta(milliseconds=s.max_wait_ms), min_bytes=s.min_bytes,
                         max_bytes=s.max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
                         topics=tuple(build(m.FetchTopic, topic=t, partitions=tuple(ps))
                                      for t, ps in by_topic.items()),
                         forgotten_topics_data=(), rack_id="")

        response = await self.channel.send(self.leader_id, make)
        healthy = False
        appended: list[Partition] = []
        for t in response.responses:
            for p in t.partitions:
                tp = TopicPartition(str(t.topic), int(p.partition_index))
                state = ready.get(tp)
                partition = None if state is None else self._partition(tp, state)
                if state is None or partition is None:
                    continue
                healthy |= self._handle_partition(tp, state, partition, p, offsets[tp])
                if partition.log.log_end_offset > offsets[tp]:
                    appended.append(partition)
                if tp in throttled:
                    quota.record(len(p.records or b""))
        group_commit = self.replicas.group_commit
        if appended and group_commit is not None:
            # log.flush.policy=group-commit: the next fetch offset moves the leader's high
            # watermark, so it waits for the fsync of what this one brought (one round for all).
            await group_commit.synced(appended)
        return healthy

    def _handle_partition(self, tp: TopicPartition, state: _FetchState, partition: Partition, p: Any,
                          fetched_from: int) -> bool:
        """False when the partition's answer was an error (the fetcher backs off when every
        partition's was)."""
        error = from_code(int(p.error_code))
        if error is Errors.NONE:
            if partition.log.log_end_offset != fetched_from:
                return True  # truncated meanwhile: the data is for an older position
            try:
                partition.append_records_to_follower(bytes(p.records or b""), int(p.high_watermark))
            except KafkaError as e:
                log.error("%s: cannot append what leader %d sent: %s", tp, self.leader_id, e)
                return False
            self.replicas.follower_appended(tp)
            return True
        if error is Errors.OFFSET_OUT_OF_RANGE:
            leader_start = int(p.log_start_offset)
            if leader_start > partition.log.log_end_offset:
                partition.log.truncate_fully_and_start_at(leader_start)  # far behind a trimmed leader
            else:
                state.truncating = True  # ahead of the leader: find where we diverged
            return True
        if error not in _WAIT_FOR_METADATA:
            log.warning("%s: fetch from leader %d: %s", tp, self.leader_id, error.name)
        self._leader_behind |= error in _LEADER_BEHIND
        return False


class FetcherManager:
    """Which leader each followed partition is fetched from (Kafka's ReplicaFetcherManager)."""

    def __init__(self, channel: BrokerChannel, replicas: ReplicaManager, settings: FetcherSettings) -> None:
        self.channel = channel
        self.replicas = replicas
        self.settings = settings
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._leader_of: dict[TopicPartition, int] = {}

    def follow(self, tp: TopicPartition, leader_id: int, leader_epoch: int) -> None:
        """Fetch ``tp`` from ``leader_id`` (after truncating) for ``leader_epoch``."""
        self.stop(tp)
        fetcher = self.fetchers.get(leader_id)
        if fetcher is None:
            fetcher = self.fetchers[leader_id] = ReplicaFetcher(leader_id, self.channel, self.replicas, self.settings)
        fetcher.add(tp, leader_epoch)
        self._leader_of[tp] = leader_id

    def stop(self, tp: TopicPartition) -> None:
        leader = self._leader_of.pop(tp, None)
        if leader is not None and leader in self.fetchers:
            self.fetchers[leader].remove(tp)

    def stop_all(self) -> None:
        for fetcher in self.fetchers.values():
            fetcher.close()
        self.fetchers.clear()
        self._leader_of.clear()

    def followed(self) -> dict[TopicPartition, int]:
        return dict(self._leader_of)


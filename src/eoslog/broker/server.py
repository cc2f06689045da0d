"""The broker process: ``startup`` → ``main_loop`` → ``shutdown``.

Start-up loads (and if needed recovers) every log before the listener opens, then
prints one ready line. SIGTERM or SIGINT begins a graceful shutdown: stop accepting,
let in-flight requests finish (bounded), flush every log, write the checkpoints and
the clean-shutdown marker. A second signal exits at once.

What differs between one node and a member of a ZooKeeper cluster (docs/cluster.md) is
chosen once, here, as the broker's ``MetadataSupport`` (metadata_support.py): a member opens
its ZooKeeper session and learns the cluster id before the logs load, registers once its
listener is bound, and on shutdown first asks the controller to move its leadership away
(``controlled.shutdown.enable``); one node loads its coordinators at start-up.

When every log directory has failed (a failed fsync or I/O error takes one offline:
``storage.log_dir_failure``) the broker halts with exit code 1, as Kafka's does: no flush, no
checkpoint, no clean-shutdown marker, so the next start recovers from what is on disk. First it
stops accepting, gives the answers already due (KAFKA_STORAGE_ERROR) a moment to leave, and a
cluster member closes its ZooKeeper session, so the controller moves its leadership at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eoslog.broker import gc_policy
from eoslog.broker.acceptor import Acceptor, bind
from eoslog.broker.connection import KafkaProtocol
from eoslog.broker.connection_quotas import ConnectionQuotas, check_connection_limits
from eoslog.broker.context import BrokerState, wall_clock_ms
from eoslog.broker.dispatcher import Dispatcher
from eoslog.broker.malloc import keep_freed_memory
from eoslog.broker.marker_sender import MarkerSender
from eoslog.broker.metadata_support import Advertised, MetadataSupport, SingleNode
from eoslog.broker.txn_verifier import LocalTransactionVerifier
from eoslog.config import BrokerConfig, throttle_rate
from eoslog.coordinator.group import GroupCoordinator
from eoslog.coordinator.group.coordinator import consumer_settings
from eoslog.coordinator.group.share_groups import ShareGroupSettings
from eoslog.coordinator.share import ShareCoordinator
from eoslog.coordinator.share.persister import LocalPersister, Persister
from eoslog.coordinator.timers import AsyncioScheduler
from eoslog.coordinator.transaction import TransactionCoordinator
from eoslog.features import SHARE_VERSION, Features
from eoslog.metrics.broker import broker_registry
from eoslog.metrics.collector import BrokerFacts
from eoslog.replica import ReplicaManager
from eoslog.replica.selector import selector_named
from eoslog.security.listeners import advertised_listeners, listeners, server_ssl_context, unprotected_settings
from eoslog.share.manager import HELD_CHECK_INTERVAL_S, SharePartitionManager
from eoslog.share.partition import ShareSettings
from eoslog.storage import LogManager, unsynced_witness
from eoslog.storage.cleaner import LogCleaner

if TYPE_CHECKING:
    from eoslog.metrics.server import MetricsServer

log = logging.getLogger(__name__)

SHUTDOWN_DRAIN_SECONDS = 5.0
CHECKPOINT_INTERVAL_S = 60.0
QUOTA_SENSOR_EXPIRY_CHECK_S = 60.0
# The idle-connection sweep yields to the loop after this many connections: 16,000 held at once
# took 14-18 ms in one piece.
IDLE_SWEEP_SLICE = 1000
WITNESS_RECHECK_S = 1.0  # how often the unsynced witness waits for the transactions marked at a loss to end
HALT_EXIT_CODE = 1  # Kafka's Exit.halt(1)
HALT_DRAIN_SECONDS = 1.0  # answers due when the last log directory failed: a moment to leave
HALT_CLOSE_SECONDS = 3.0  # a cluster member's ZooKeeper session close, at most


@dataclass
class BrokerStatus:
    host: str
    port: int
    data_dir: str


def metadata_support_for(config: BrokerConfig, logs: LogManager, advertised: Advertised,
                         features: Features) -> MetadataSupport:
    """The broker's one choice of mode: a ZooKeeper cluster when ``zookeeper.connect`` is set."""
    if config.zookeeper_connect:
        from eoslog.broker.zk_support import ZkSupport  # kazoo only in cluster mode

        return ZkSupport(config, logs, advertised, features)
    return SingleNode(config, logs, advertised, features)


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.logs = LogManager(
            config.log_dirs, config.topic_defaults(), wall_clock_ms, config.node_id,
            int(config["producer.id.expiration.ms"]), replicated=bool(config.zookeeper_connect),
            on_all_log_dirs_failed=self._all_log_dirs_failed,
        )
        self._halting = False
        self.advertised = Advertised()
        self.features = Features()
        # The one choice between a single node and a ZooKeeper cluster.
        self.metadata_support = metadata_support_for(config, self.logs, self.advertised, self.features)
        support = self.metadata_support
        # The partitions first (the coordinators append through them), then the coordinators,
        # then the state handlers share: nothing in it is ever missing.
        self.replicas = ReplicaManager(config.node_id, self.logs, wall_clock_ms,
                                       leads_every_local_log=support.leads_every_local_log,
                                       group_commit=config.group_commit,
                                       quota_windows=(int(config["replication.quota.window.num"]),
                                                      int(config["replication.quota.window.size.seconds"]) * 1000))
        self.replicas.replica_selector = selector_named(str(config["replica.selector.class"]))
        self.replicas.broker_racks = lambda: {b.node_id: b.rack for b in support.live_brokers()}
        self.replicas.log_dir_mover.topic_exists = lambda topic: support.topic_id(topic) is not None
        self.groups = GroupCoordinator.for_broker(config, self.replicas, wall_clock_ms)
        self.txns = TransactionCoordinator.for_broker(
            config, self.replicas, wall_clock_ms, support.producer_ids.generate_producer_id,
            MarkerSender(self.replicas, support.marker_channel), self.groups.partition_for,
            leader_for=support.leader_for, features=self.features,
        )
        # Share groups (KIP-932): the share coordinator of __share_group_state, and the leaders'
        # share-partitions, which reach it through the persister.
        self.shares = ShareCoordinator.for_broker(config, self.replicas, wall_clock_ms)
        persister: Persister = LocalPersister(self.shares)
        if support.marker_channel is not None:  # a cluster: the coordinator of a key may be another broker
            from eoslog.broker.share_persister import ClusterPersister

            persister = ClusterPersister(self.shares, support, support.marker_channel, config.node_id,
                                         int(config["share.coordinator.write.timeout.ms"]))
        self.share_partitions = SharePartitionManager(
            self.replicas, persister, self._share_settings, self._topic_id, AsyncioScheduler(wall_clock_ms),
            int(config["group.share.max.share.sessions"]))
        self.groups.share.persister = persister
        self.groups.share.settings = self._share_group_settings
        self.groups.share.on_member_removed.append(self.share_partitions.release_member)
        self.shares.outcome_listeners.append(self.share_partitions.transaction_decided)
        support.bind(self.replicas, self.groups, self.txns, self.shares)
        self.replicas.verifier = support.transaction_verifier(LocalTransactionVerifier(self.txns))
        if support.leads_every_local_log and config.group_commit:
            # One node under group commit: a transaction's writes are made durable before its
            # PrepareCommit rather than each before its answer (docs/architecture.md, Recovery).
            self.txns.durable_before_prepare = self.replicas.wait_producer_durable
        self.state = BrokerState(
            config=config, logs=self.logs, producer_ids=support.producer_ids, replicas=self.replicas,
            group_coordinator=self.groups, txn_coordinator=self.txns, share_coordinator=self.shares,
            share_partitions=self.share_partitions, metadata_support=support, features=self.features,
            advertised=self.advertised,
        )
        self.groups.share.topics = self.state.topic_ids
        support.watch_entity_configs(self.state.config_admin.store)
        self.groups.consumer.topics = self.state.topic_ids
        self.groups.consumer.settings = lambda group_id: consumer_settings(
            config, lambda key: self.state.config_admin.group_value(group_id, key))
        # share.version downgraded to 0: the leaders drop their share sessions and partitions (Kafka's
        # SharePartitionManager.onShareVersionToggle).
        self.features.on_change(lambda finalized: None if finalized.level(SHARE_VERSION) >= 1
                                else self.share_partitions.shutdown())
        self.cleaner = LogCleaner(self.logs, wall_clock_ms, int(config["log.cleaner.dedupe.buffer.size"]))
        self.state.config_admin.on_broker_change.append(
            lambda: self.cleaner.set_dedupe_buffer(int(config["log.cleaner.dedupe.buffer.size"])))
        self._apply_replication_throttles()
        self.state.config_admin.on_broker_change.append(self._apply_replication_throttles)
        self.connections: set[KafkaProtocol] = set()
        # metrics.listener set: requests are observed and the registry is served at start-up.
        self.metrics_facts = BrokerFacts(self._connections_by_listener)
        self.metrics_server: MetricsServer | None = None
        request_metrics = None
        if str(config["metrics.listener"]).strip():
            from eoslog.metrics.server import MetricsServer, parse_metrics_listener  # uvicorn only when asked

            registry, request_metrics = broker_registry(self.state, self.metrics_facts)
            self.metrics_server = MetricsServer(registry, *parse_metrics_listener(str(config["metrics.listener"])),
                                                not_ready=self._not_ready)
        self.dispatcher = Dispatcher(self.state, metrics=request_metrics)
        self._acceptors: list[Acceptor] = []
        self.bound: dict[str, int] = {}  # listener name → bound port
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[None]] = set()
        self._signals = 0

    def _apply_replication_throttles(self) -> None:
        self.replicas.leader_quota.update_bound(throttle_rate(self.config, "leader.replication.throttled.rate"))
        self.replicas.follower_quota.update_bound(throttle_rate(self.config, "follower.replication.throttled.rate"))
        self.replicas.alter_log_dirs_quota.update_bound(
            throttle_rate(self.config, "replica.alter.log.dirs.io.max.bytes.per.second"))

    def _share_settings(self, group_id: str) -> ShareSettings:
        """A share group's settings for its share-partitions: its group configs over the broker's."""
        def value(key: str) -> Any:
            return self.state.config_admin.group_value(group_id, key)
        return ShareSettings(int(value("share.record.lock.duration.ms")), int(value("share.delivery.count.limit")),
                             int(value("share.partition.max.record.locks")),
                             value("share.isolation.level") == "read_committed", str(value("share.auto.offset.reset")))

    def _share_group_settings(self, group_id: str) -> ShareGroupSettings:
        value = self.state.config_admin.group_value
        return ShareGroupSettings(int(value(group_id, "share.session.timeout.ms")),
                                  int(value(group_id, "share.heartbeat.interval.ms")),
                                  int(self.config["group.share.max.size"]))

    def _topic_id(self, topic: str) -> uuid.UUID | None:
        return self.metadata_support.topic_id(topic)

    async def startup(self) -> BrokerStatus:
        cluster_id = await self.metadata_support.connect(self.state.security)
        self.logs.startup(cluster_id)
        if self.replicas.group_commit is not None and not self.logs.had_clean_shutdown:
            # What recovery kept is shown only once it is on disk (a second cut must not undo a read).
            self.logs.flush_all()
            # A transaction's writes are answered before they are durable: if any write no fsync
            # covered was lost (a power cut, not a kill -9), none open at the stop may commit
            # (TransactionCoordinator._mark_open_after_lost_writes).
            if self.txns.durable_before_prepare is not None and not self.logs.was_empty:
                self.txns.unsynced_writes_lost = not unsynced_witness.survived(self.logs.log_dirs)
        self.metadata_support.begin_loading()
        self.replicas.log_dir_mover.resume()  # moves between log directories a restart interrupted
        for lg in self.logs.all_logs():
            for path, result in lg.recovery_results:
                log.warning("recovered %s: cut %d bytes (%s)", path, result.truncated_bytes, result.reason)
        await self._open_listeners()
        loop = asyncio.get_running_loop()
        if self.metrics_server is not None:
            await self.metrics_server.start()
        await self.metadata_support.join()
        self.state.serving.set()
        self._tasks = [
            loop.create_task(self._every(int(self.config["log.retention.check.interval.ms"]) / 1000,
                                         self.logs.run_retention)),
            loop.create_task(self._every(int(self.config["log.flush.scheduler.interval.ms"]) / 1000,
                                         self.logs.run_time_flush)),
            # file.delete.delay.ms is honoured to this interval (1 s by default).
            loop.create_task(self._every(int(self.config["log.flush.scheduler.interval.ms"]) / 1000,
                                         self.logs.delete_due_files)),
            loop.create_task(self._every(CHECKPOINT_INTERVAL_S, self.logs.checkpoint)),
            loop.create_task(self._every(int(self.config["replica.high.watermark.checkpoint.interval.ms"]) / 1000,
                                         self.logs.checkpoint_high_watermarks)),
            loop.create_task(self._every(int(self.config["producer.id.expiration.check.interval.ms"]) / 1000,
                                         self.logs.run_producer_expiration)),
            loop.create_task(self._every(self._idle_check_s, self._close_idle_connections)),
            # Client quota rates of clients idle for an hour go (Kafka's inactive sensor expiry).
            loop.create_task(self._every(QUOTA_SENSOR_EXPIRY_CHECK_S, self.state.client_quotas.expire_inactive)),
            loop.create_task(self._load_coordinators_then_clean()),
            loop.create_task(self.txns.markers.run()),
            loop.create_task(self._every(int(self.config["offsets.retention.check.interval.ms"]) / 1000,
                                         self.groups.expire_offsets)),
            loop.create_task(self._every(int(self.config["share.coordinator.state.topic.prune.interval.ms"]) / 1000,
                                         self.shares.prune)),
            loop.create_task(self._every(HELD_CHECK_INTERVAL_S, self.share_partitions.check_held)),
        ]
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, self._on_signal, sig)
        return BrokerStatus(*self.advertised.default, str(self.config.log_dir))

    async def _open_listeners(self) -> None:
        """Bind every listener (docs/security.md); the first one is the broker's default
        address (the ready line, cluster registration)."""
        bound = listeners(self.config)
        self.state.security.check_listeners(bound)
        for warning in unprotected_settings(self.config, bound):
            log.warning(warning)
        advertised = advertised_listeners(self.config)
        max_bytes = int(self.config["socket.request.max.bytes"])
        check_connection_limits(self.config)
        inter_broker = str(self.config["inter.broker.listener.name"]) or bound[0].name
        quotas = ConnectionQuotas(self.config, (lst.name for lst in bound), inter_broker)
        for lst in bound:
            tls = server_ssl_context(self.config, lst.name) if lst.protocol.uses_tls else None
            make = functools.partial(KafkaProtocol, self.dispatcher, max_bytes, self.connections, lst, quotas)
            acceptors = [Acceptor(sock, lst.name, make, quotas, tls) for sock in bind(lst.host, lst.port, 1024)]
            for acceptor in acceptors:
                acceptor.start()
            self._acceptors += acceptors
            bound_port = acceptors[0].port
            adv_host, adv_port = advertised.get(lst.name, (lst.host, 0))
            host = adv_host if adv_host not in ("0.0.0.0", "::", "") else "127.0.0.1"
            self.advertised.by_listener[lst.name] = (host, adv_port or bound_port)
            self.bound[lst.name] = bound_port
        self.advertised.default = self.advertised.by_listener[bound[0].name]

    def _connections_by_listener(self) -> dict[str, int]:
        counts = dict.fromkeys(self.bound, 0)
        for conn in self.connections:
            counts[conn.listener.name] = counts.get(conn.listener.name, 0) + 1
        return counts

    @property
    def _idle_check_s(self) -> float:
        # Kafka looks at every poll; a tenth of the limit (at most 30 s) closes a connection
        # within 10% of connections.max.idle.ms late.
        return min(int(self.config["connections.max.idle.ms"]) / 10_000, 30.0)

    async def _close_idle_connections(self) -> None:
        now, max_idle_s = time.monotonic(), int(self.config["connections.max.idle.ms"]) / 1000
        for i, conn in enumerate(list(self.connections), 1):
            conn.close_if_idle(now, max_idle_s)
            if i % IDLE_SWEEP_SLICE == 0:
                await asyncio.sleep(0)

    async def _load_coordinators_then_clean(self) -> None:
        """__consumer_offsets first: markers the transaction loader sends again may complete
        transactional offset commits, which needs their groups loaded. The cleaner starts
        last: it must not rewrite a log that a loader is half-way through."""
        # One node loads them here; in a cluster they load as their partitions' leadership arrives.
        self.metrics_facts.load_seconds.update(await self.metadata_support.load_coordinators())
        if self.txns.durable_before_prepare is not None:
            self._tasks.append(asyncio.get_running_loop().create_task(self._write_unsynced_witness()))
        self.txns.startup()
        if self.config["log.cleaner.enable"]:
            # log.cleaner.backoff.ms is dynamic: read before each pause.
            await self._every(lambda: int(self.config["log.cleaner.backoff.ms"]) / 1000, self.cleaner.run)

    async def _write_unsynced_witness(self) -> None:
        """storage.unsynced_witness, once no transaction open when writes were lost is still open:
        until then a crash, even a kill -9, must find the loss again (their commits stay refused)."""
        while self.txns.open_after_lost_writes():
            await asyncio.sleep(WITNESS_RECHECK_S)
        unsynced_witness.write(self.logs.live_log_dirs)

    async def _every(self, seconds: float | Callable[[], float], job: object) -> None:
        assert callable(job)
        while True:
            await asyncio.sleep(seconds() if callable(seconds) else seconds)
            try:
                if inspect.isawaitable(ran := job()):
                    await ran
            except Exception:
                log.exception("background job %s failed", getattr(job, "__name__", job))

    def _not_ready(self) -> str | None:
        """Why the broker is not ready (the metrics listener's ``/ready``), or None."""
        if self.logs.offline_log_dirs:
            return "log directories offline: " + ", ".join(map(str, self.logs.offline_log_dirs))
        if not self.state.serving.is_set():
            return "starting"
        return None

    def _all_log_dirs_failed(self) -> None:
        """No log directory is left online: halt (module docstring)."""
        if self._halting:
            return
        self._halting = True
        log.critical("halting broker %d: every log directory (%s) has failed; the next start recovers "
                     "from what is on disk", self.config.node_id, ", ".join(map(str, self.logs.offline_log_dirs)))
        try:
            asyncio.get_running_loop().create_task(self._halt())
        except RuntimeError:  # not serving yet
            self._exit_now()

    async def _halt(self) -> None:
        for acceptor in self._acceptors:
            acceptor.close()
        loop = asyncio.get_running_loop()
        leaving = loop.create_task(self.metadata_support.close())  # a cluster member's registration goes now
        deadline = loop.time() + HALT_DRAIN_SECONDS
        while any(not c.idle for c in self.connections) and loop.time() < deadline:
            await asyncio.sleep(0.02)
        try:
            await asyncio.wait_for(leaving, max(HALT_CLOSE_SECONDS - HALT_DRAIN_SECONDS, 0.1))
        except Exception as e:  # halting anyway: the session then ends at its timeout
            log.warning("could not close the ZooKeeper session before halting: %r", e)
        self._exit_now()

    def _exit_now(self) -> None:
        log.critical("halted (exit code %d)", HALT_EXIT_CODE)
        sys.stderr.flush()
        os._exit(HALT_EXIT_CODE)

    def _on_signal(self, sig: int) -> None:
        self._signals += 1
        if self._signals > 1:
            log.warning("second signal: exiting without a clean shutdown")
            os._exit(1)
        log.info("received %s: shutting down", signal.Signals(sig).name)
        self._stop.set()

    async def main_loop(self) -> None:
        await self._stop.wait()

    def stop(self) -> None:
        self._stop.set()

    async def shutdown(self) -> None:
        await self.metadata_support.controlled_shutdown()
        for acceptor in self._acceptors:
            acceptor.close()
        # Answers JoinGroup/SyncGroup requests still waiting, so their connections drain.
        self.groups.shutdown()
        self.share_partitions.shutdown()
        self.shares.shutdown()
        self.txns.shutdown()
        deadline = asyncio.get_running_loop().time() + SHUTDOWN_DRAIN_SECONDS
        while any(not c.idle for c in self.connections):
            if asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.02)
        for conn in list(self.connections):
            conn.close()
        for task in self._tasks:
            task.cancel()
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        await self.metadata_support.close()
        if self.replicas.group_commit is not None:
            self.replicas.group_commit.stop()
            stats = self.replicas.group_commit.stats
            log.info("group commit: %d fsync rounds, %d files synced, %d offsets made durable", stats.rounds,
                     stats.files_synced, stats.offsets_synced)
        self.replicas.log_dir_mover.shutdown()
        self.logs.shutdown()
        log.info("clean shutdown complete")


async def _serve(config: BrokerConfig) -> None:
    broker = Broker(config)
    status = await broker.startup()
    gc_policy.after_startup()
    joined = broker.metadata_support.ready_note(broker.state.cluster_id)
    others = ", ".join(f"{name}://{host}:{port}" for name, (host, port)
                       in broker.advertised.by_listener.items())
    print(
        f"eoslog broker {config.node_id} ready on {status.host}:{status.port} "
        f"(data: {status.data_dir}{joined}; listeners {others})",
        flush=True,
    )
    try:
        await broker.main_loop()
    finally:
        await broker.shutdown()


def run_broker(config: BrokerConfig) -> None:
    logging.basicConfig(
        level=os.environ.get("EOSLOG_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    keep_freed_memory()  # before the first large request frame is allocated
    try:
        import uvloop

        uvloop.run(_serve(config))
    except ImportError:
        asyncio.run(_serve(config))

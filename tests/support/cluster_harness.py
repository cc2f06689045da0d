"""A real cluster for tests: one ZooKeeper and N eoslog brokers as processes on free ports.

``Cluster`` starts them, reads the cluster's metadata with a raw Metadata v12 request (leader
epochs and offline replicas included), and kills, stops and restarts brokers. Brokers use a
short ZooKeeper session so that a ``kill -9`` is noticed in seconds, and small internal
topics so that start-up stays cheap on a 2-core machine.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kio.static.primitive import i16, i32

from eoslog.cluster.zookeeper_server import ZooKeeperServer
from eoslog.protocol.messages import build
from support.harness import BrokerProcess, free_ports, in_parallel, wait_until
from support.netns import Host, Lab
from support.rawkafka import RawClient, coordinator_id, request_module
from support.zk_harness import start_zookeeper, zookeeper_client

METADATA, CREATE_TOPICS = 3, 19
SESSION_TIMEOUT_MS = 4000
BROKER_OVERRIDES = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "controlled.shutdown.retry.backoff.ms": "1000",
    "auto.leader.rebalance.enable": "false",  # tests move leaders and look at where they are
}


@dataclass(frozen=True)
class PartitionMeta:
    error: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]


@dataclass(frozen=True)
class ClusterMeta:
    cluster_id: str
    controller: int
    brokers: tuple[int, ...]
    topics: dict[str, dict[int, PartitionMeta]]
    topic_errors: dict[str, int]


# Opens a client on a broker's first listener, logged in where it needs it (a cluster without
# a PLAINTEXT listener): RawClient(bootstrap) by default.
Connect = Callable[[str], RawClient]


def metadata(bootstrap: str, topics: list[str] | None = None, connect: Connect | None = None) -> ClusterMeta:
    m = request_module(METADATA, 12)
    wanted = None if topics is None else tuple(build(m.MetadataRequestTopic, name=t, topic_id=None) for t in topics)
    with (connect or (lambda b: RawClient(b, timeout_s=10)))(bootstrap) as client:
        resp = client.call(build(m.MetadataRequest, topics=wanted, allow_auto_topic_creation=False,
                                 include_topic_authorized_operations=False))
    return ClusterMeta(
        str(resp.cluster_id), int(resp.controller_id), tuple(sorted(int(b.node_id) for b in resp.brokers)),
        {t.name: {int(p.partition_index): PartitionMeta(
            int(p.error_code), int(p.leader_id), int(p.leader_epoch), tuple(map(int, p.replica_nodes)),
            tuple(map(int, p.isr_nodes)), tuple(map(int, p.offline_replicas))) for p in t.partitions}
         for t in resp.topics},
        {t.name: int(t.error_code) for t in resp.topics},
    )


def create_topic(bootstrap: str, name: str, partitions: int = -1, replication_factor: int = -1,
                 assignment: dict[int, list[int]] | None = None, configs: dict[str, str] | None = None) -> Any:
    """The CreatableTopicResult of one CreateTopics v7."""
    import datetime

    m = request_module(CREATE_TOPICS, 7)
    topic = m.CreatableTopic(
        name=name, num_partitions=i32(partitions), replication_factor=i16(replication_factor),
        assignments=tuple(m.CreatableReplicaAssignment(partition_index=i32(p), broker_ids=tuple(map(i32, b)))
                          for p, b in (assignment or {}).items()),
        configs=tuple(m.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()),
    )
    with RawClient(bootstrap, timeout_s=60) as client:
        resp = client.call(m.CreateTopicsRequest(topics=(topic,), timeout=datetime.timedelta(seconds=30),
                                                 validate_only=False))
    return resp.topics[0]


class Cluster:
    def __init__(self, root: Path, size: int = 3, overrides: dict[str, str] | None = None,
                 zookeeper: ZooKeeperServer | None = None, lab: Lab | None = None,
                 per_broker: Callable[[int, int], dict[str, str]] | None = None,
                 connect: Connect | None = None, more_log_dirs: Callable[[int], list[Path]] | None = None) -> None:
        """``zookeeper``: one the module already runs (the cluster then uses a chroot of its own).
        ``per_broker(broker id, its first listener's port)``: overrides of one broker (listeners).
        ``lab``: each broker in a network namespace of its own (tests/support/netns.py), ZooKeeper in
        the test's namespace on the lab's bridge. ``connect``: how the harness's own requests
        reach a broker's first listener (TLS, a SASL login), when it is not PLAINTEXT.
        ``more_log_dirs(broker id)``: its log directories after its own data directory (JBOD)."""
        self.more_log_dirs = more_log_dirs
        self.connect = connect
        self.root = root
        self.lab = lab
        self.hosts: dict[int, Host] = {}
        self.size = size
        self.overrides = {**BROKER_OVERRIDES, **(overrides or {})}
        self.zookeeper = zookeeper
        self._own_zookeeper = zookeeper is None
        self.brokers: dict[int, BrokerProcess] = {}
        self.per_broker = per_broker
        self.ports: dict[int, int] = {}  # broker id -> its first listener's port

    def start(self) -> Cluster:
        if self.zookeeper is None:
            host = self.lab.gateway if self.lab is not None else "127.0.0.1"
            self.zookeeper = start_zookeeper(self.root / "zookeeper", host=host)
            connect = self.zookeeper.connect_string
        else:
            connect = f"{self.zookeeper.connect_string}/{self.root.name}"
            _create_chroot(self.zookeeper.connect_string, self.root.name)
        self.zookeeper_connect = connect
        # Every broker's first port before any per_broker call, which may pick more (free_ports(avoid=...)).
        self.ports = dict(zip(range(1, self.size + 1), free_ports(self.size), strict=True))
        for i in range(1, self.size + 1):
            self._make_broker(i)
        in_parallel([b.start for b in self.brokers.values()])
        self.wait_for_every_broker(lambda m: len(m.brokers) == self.size and m.controller > 0, "all brokers registered")
        return self

    def _make_broker(self, i: int) -> BrokerProcess:
        (self.root / f"broker-{i}").mkdir(parents=True, exist_ok=True)
        placement: dict[str, Any] = {}
        if self.lab is not None:
            host = self.hosts[i] = self.lab.add_host(f"b{i}")
            placement = {"host": host.address, "prefix": host.command()}
        port = self.ports[i]
        self.brokers[i] = BrokerProcess(self.root / f"broker-{i}" / "data", port, overrides={
            **self.overrides, "broker.id": str(i), "zookeeper.connect": self.zookeeper_connect,
            **(self.per_broker(i, port) if self.per_broker else {})},
            more_log_dirs=self.more_log_dirs(i) if self.more_log_dirs else None, **placement)
        return self.brokers[i]

    def add_broker(self, broker_id: int | None = None) -> BrokerProcess:
        """A new broker (the next id unless given) joins the running cluster; returns once
        every running broker's Metadata lists it."""
        i = broker_id if broker_id is not None else max(self.brokers, default=0) + 1
        self.ports[i] = free_ports(1, avoid=set(self.ports.values()))[0]
        broker = self._make_broker(i)
        self.size += 1
        broker.start()
        self.wait_for_every_broker(lambda m: i in m.brokers, f"broker {i} registered")
        return broker

    def retire(self, broker_id: int) -> None:
        """Stop a broker (a controlled shutdown) and leave it out of the cluster from now on."""
        broker = self.brokers.pop(broker_id)
        if broker.alive():
            broker.stop()
        self.size -= 1
        self.wait_for_every_broker(lambda m: broker_id not in m.brokers, f"broker {broker_id} gone")

    @property
    def bootstrap(self) -> str:
        # Over a copy: another thread (a test's writer) may read it while brokers are added.
        return ",".join(b.bootstrap for b in list(self.brokers.values()) if b.alive())

    def any_alive(self) -> BrokerProcess:
        return next(b for b in list(self.brokers.values()) if b.alive())

    def metadata(self, topics: list[str] | None = None, via: int | None = None) -> ClusterMeta:
        broker = self.brokers[via] if via is not None else self.any_alive()
        return metadata(broker.bootstrap, topics, self.connect)

    def wait_for(self, condition: Any, what: str, timeout_s: float = 60.0, via: int | None = None) -> ClusterMeta:
        """Poll Metadata until ``condition(meta)`` holds; the metadata that satisfied it. A
        condition that looks up a topic the broker has not learned of yet (KeyError: its
        watch has not fired) does not hold yet."""
        seen: list[ClusterMeta] = []

        def check() -> bool:
            try:
                meta = self.metadata(via=via)
            except OSError:
                return False
            seen[:] = [meta]
            try:
                return bool(condition(meta))
            except KeyError:
                return False

        wait_until(check, what, timeout_s, describe=lambda: seen[0] if seen else None)
        return seen[0]

    def wait_for_every_broker(self, condition: Any, what: str) -> None:
        """Until every running broker's Metadata satisfies ``condition``: each learns of the
        others' registrations from its own watch."""
        for i, broker in self.brokers.items():
            if broker.alive():
                self.wait_for(condition, f"{what} (as broker {i} sees it)", via=i)

    def controller(self) -> int:
        """The controller, once every running broker's Metadata names the same one (each
        learns a new controller from its own watch)."""
        named: list[set[int]] = []

        def agreed() -> bool:
            named[:] = [{self.metadata(via=i).controller for i, b in self.brokers.items() if b.alive()}]
            return len(named[0]) == 1 and min(named[0]) > 0

        wait_until(agreed, "every broker naming the same controller", describe=lambda: named)
        return min(named[0])

    def restart_dead(self) -> None:
        """Start every broker that is not running, and wait until all are registered."""
        in_parallel([b.start for b in self.brokers.values() if not b.alive()])
        self.wait_for_every_broker(lambda m: len(m.brokers) == self.size, "all brokers registered again")

    def heal(self) -> None:
        """Resume every paused broker (SIGSTOP) and start every dead one: the next test starts
        with the whole cluster."""
        for b in self.brokers.values():
            if b.proc is not None and b.alive():
                os.kill(b.proc.pid, signal.SIGCONT)
        self.restart_dead()

    def stop(self) -> None:
        in_parallel([b.stop for b in self.brokers.values() if b.alive()])
        if self.zookeeper is not None and self._own_zookeeper:
            self.zookeeper.kill()


def _create_chroot(connect: str, name: str) -> None:
    with zookeeper_client(connect) as client:
        client.ensure_path(f"/{name}")


def settled(bootstrap: str, topic: str, partition: int = 0, timeout_s: float = 60.0,
            config: dict[str, str] | None = None) -> None:
    """Until no transaction is open on the partition (its last stable offset reached the high
    watermark): a commit is answered before its markers are written. ``config``: the admin
    client's other settings (a SASL login)."""
    from eoslog.client.admin import Admin, IsolationLevel, OffsetSpec
    from eoslog.client.types import TopicPartition

    tp = TopicPartition(topic, partition)
    with Admin({**(config or {}), "bootstrap.servers": bootstrap}) as admin:
        def done() -> bool:
            committed = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=IsolationLevel.READ_COMMITTED)
            uncommitted = admin.list_offsets({tp: OffsetSpec.latest()})
            return committed[tp].offset == uncommitted[tp].offset

        wait_until(done, f"{topic}-{partition} without an open transaction", timeout_s)


def read_all(bootstrap: str, topic: str, partition: int = 0, timeout_s: float = 60.0,
             settle: bool = True) -> list[tuple[int, bytes]]:
    """(offset, value) of every record a read_committed consumer sees in one partition, read
    from the log start until its position reached the end offset (the last stable offset;
    with ``settle``, once no transaction is open there)."""
    import time

    from eoslog.client import Consumer
    from eoslog.client.types import TopicPartition

    if settle:
        settled(bootstrap, topic, partition, timeout_s)
    tp = TopicPartition(topic, partition)
    with Consumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed",
                   "enable.auto.commit": False, "group.id": f"read-all-{topic}"}) as consumer:
        consumer.assign([tp])
        consumer.seek_to_beginning([tp])
        end = consumer.end_offsets([tp], timeout_s)[tp]
        out: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + timeout_s
        while consumer.position(tp) < end:
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}-{partition}: read {len(out)} records, stuck at "
                                     f"{consumer.position(tp)} < {end}")
            out += [(r.offset, r.value or b"") for r in consumer.poll(1.0)]
        return out


def segment_bytes(broker: BrokerProcess, topic: str, partition: int = 0) -> bytes:
    """The partition's log on one broker, every segment concatenated (replicas must match)."""
    directory = broker.data_dir / f"{topic}-{partition}"
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


def find_coordinator(cluster: Cluster, key: str, key_type: int = 1, via: int | None = None) -> int:
    """The broker coordinating a transactional id (key type 1) or a group (0), once there is one."""
    found: list[int] = []

    def ask() -> bool:
        broker = cluster.brokers[via] if via is not None else cluster.any_alive()
        node = coordinator_id(broker.bootstrap, key, key_type)
        if node is not None:
            found[:] = [node]
        return bool(found)

    wait_until(ask, f"the coordinator of {key}", 60)
    return found[0]

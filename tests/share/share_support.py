"""What the share-group tests share: a broker set up for short locks and sessions, topics, group
configs, records, share members run as processes of their own (``share_member.py``), and the
broker's own view of a share group (DescribeShareGroupOffsets on the wire)."""

from __future__ import annotations

import atexit
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from eoslog.client import Admin, TopicPartition
from eoslog.client.errors import KafkaError
from support.harness import wait_until

HERE = Path(__file__).parent
# Broker settings letting groups ask for short locks, sessions and heartbeats, small in-flight
# windows and few internal partitions (a test waits seconds, not Kafka's defaults).
BROKER_OVERRIDES = {
    "offsets.topic.num.partitions": "3",
    "share.coordinator.state.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.min.session.timeout.ms": "2000",
    "group.share.min.heartbeat.interval.ms": "500",
    "group.share.heartbeat.interval.ms": "1000",
    "group.share.min.partition.max.record.locks": "10",
}


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def group_configs(bootstrap: str, group: str, **configs: str | int) -> None:
    """Set share-group configs (``share_auto_offset_reset="earliest"`` → share.auto.offset.reset)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(k.replace("_", "."), str(v), incremental_operation=AlterConfigOpType.SET)
               for k, v in configs.items()]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def produce(bootstrap: str, topic: str, values: Iterable[str], partition: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for v in values:
        p.produce(topic, value=v.encode(), partition=partition)
    assert p.flush(30) == 0


def high_watermark(bootstrap: str, topic: str, partition: int = 0) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "share-tests-watermarks"})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)[1])
    finally:
        c.close()


@dataclass
class Member:
    """A share_member.py process and what it printed (one dict per record)."""

    name: str
    proc: subprocess.Popen[str]
    records: list[dict[str, Any]] = field(default_factory=list)
    acks: list[dict[str, Any]] = field(default_factory=list)  # {"offsets", "ok", "t"} after each commit
    ready: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def got(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.records)

    def offsets(self) -> list[int]:
        return [r["offset"] for r in self.got()]

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        """SIGSTOP: the process holds its connections open and does nothing."""
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)


def start_member(bootstrap: str, group: str, topic: str, name: str, log_dir: Path, *, client: str = "confluent",
                 ack: str = "accept", max_records: int = 50, sleep_ms: float = 0.0, limit: int = 0) -> Member:
    cmd = [sys.executable, str(HERE / "share_member.py"), "--bootstrap", bootstrap, "--group", group,
           "--topic", topic, "--member", name, "--client", client, "--ack", ack, "--max-records", str(max_records),
           "--sleep-ms", str(sleep_ms), "--limit", str(limit)]
    stderr = open(log_dir / f"member-{name}.log", "a")  # noqa: SIM115 - the child's
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr, text=True)
    stderr.close()
    member = Member(name, proc)

    def follow() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            event = json.loads(line)
            if event.get("ev") == "ready":
                member.ready.set()
            elif event.get("ev") == "acked":
                with member.lock:
                    member.acks.append(event)
            elif event.get("ev") is None:
                with member.lock:
                    member.records.append(event)

    threading.Thread(target=follow, daemon=True).start()
    wait_until(member.ready.is_set, f"member {name} to subscribe", timeout_s=60)
    return member


@dataclass(frozen=True)
class ShareOffset:
    start_offset: int
    lag: int
    error: int


_ADMINS: dict[str, Admin] = {}  # one per bootstrap for the tests' whole run


def share_offsets(bootstrap: str, group: str, topic: str, partition: int = 0) -> ShareOffset:
    """The share-partition's start offset and lag as the group's coordinator answers
    DescribeShareGroupOffsets (eoslog's admin client routes it there); -1 while unknown."""
    admin = _ADMINS.get(bootstrap)
    if admin is None:
        admin = _ADMINS[bootstrap] = Admin({"bootstrap.servers": bootstrap, "default.api.timeout.ms": 10000})
        atexit.register(admin.close)
    try:
        offsets = admin.list_share_group_offsets(group, [TopicPartition(topic, partition)])
    except KafkaError as e:
        return ShareOffset(-1, -1, int(getattr(e, "error_code", -1)))
    info = offsets.get(TopicPartition(topic, partition))
    if info is None:
        return ShareOffset(-1, -1, 0)
    return ShareOffset(info.start_offset, -1 if info.lag is None else info.lag, 0)


def wait_for_offsets(members: Iterable[Member], wanted: set[int], what: str, timeout: float = 120.0) -> None:
    group = list(members)
    wait_until(lambda: wanted <= {o for m in group for o in m.offsets()}, what, timeout_s=timeout)


def until(condition: Any, what: str, timeout: float = 60.0, describe: Any = None) -> None:
    wait_until(condition, what, timeout_s=timeout, describe=describe)


def now() -> float:
    return time.monotonic()

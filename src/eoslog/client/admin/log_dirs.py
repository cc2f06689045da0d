"""Log directories: ``describe_log_dirs`` (DescribeLogDirs, sent to each broker asked about, as
Java's Admin.describeLogDirs): every log directory of a broker, whether it is usable, its
volume's size, and the replicas in it with their sizes; ``alter_replica_log_dirs``
(AlterReplicaLogDirs to each broker named, as Java's Admin.alterReplicaLogDirs): move replicas
to another log directory of their broker."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from eoslog.client.admin.core import AdminCore, raise_for
from eoslog.client.admin.types import LogDirDescription, ReplicaInfo
from eoslog.client.errors import error_for
from eoslog.client.types import TopicPartition
from eoslog.client.versions import ApiVersionTable
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.messages import build, request_types


class LogDirAdmin(AdminCore):
    async def describe_log_dirs(self, brokers: Iterable[int], *,
                                timeout_ms: int | None = None) -> dict[int, dict[str, LogDirDescription]]:
        """Broker id → log directory path → what is in it."""

        def make(versions: ApiVersionTable) -> Any:
            m = request_types(ApiKey.DESCRIBE_LOG_DIRS, versions.pick(ApiKey.DESCRIBE_LOG_DIRS, 4, 1))
            return build(m.DescribeLogDirsRequest, topics=None)

        def handle(_: int | None, response: Any) -> dict[str, LogDirDescription]:
            raise_for(getattr(response, "error_code", 0), "DescribeLogDirs")
            out = {}
            for r in response.results:
                code = int(r.error_code)
                out[str(r.log_dir)] = LogDirDescription(
                    None if code == 0 else error_for(code, None),
                    {TopicPartition(str(t.name), int(p.partition_index)): ReplicaInfo(
                        int(p.partition_size), int(p.offset_lag), bool(p.is_future_key))
                     for t in r.topics for p in t.partitions},
                    int(getattr(r, "total_bytes", -1)), int(getattr(r, "usable_bytes", -1)))
            return out

        async def describe(broker: int) -> dict[str, LogDirDescription]:
            return await self._call("describe_log_dirs", make, handle, node=self._broker(broker, or_any=False),
                                    timeout_ms=timeout_ms)

        return await self._each(brokers, describe)

    async def alter_replica_log_dirs(
        self, moves: Mapping[tuple[TopicPartition, int], str], *, timeout_ms: int | None = None,
    ) -> dict[tuple[TopicPartition, int], Exception | None]:
        """(partition, broker id) → the log directory to move that replica to. Each replica's
        outcome: None once its move is under way (or done), else the broker's error
        (ReplicaNotAvailableError: not on that broker yet, LogDirNotFoundError, ...)."""
        by_broker: dict[int, dict[TopicPartition, str]] = {}
        for (tp, broker), path in moves.items():
            by_broker.setdefault(broker, {})[tp] = path

        def make_for(wanted: dict[TopicPartition, str]) -> Any:
            def make(versions: ApiVersionTable) -> Any:
                m = request_types(ApiKey.ALTER_REPLICA_LOG_DIRS, versions.pick(ApiKey.ALTER_REPLICA_LOG_DIRS, 2, 1))
                dirs: dict[str, dict[str, list[int]]] = {}
                for tp, path in wanted.items():
                    dirs.setdefault(path, {}).setdefault(tp.topic, []).append(tp.partition)
                return build(m.AlterReplicaLogDirsRequest, dirs=tuple(
                    build(m.AlterReplicaLogDir, path=path, topics=tuple(
                        build(m.AlterReplicaLogDirTopic, name=t, partitions=tuple(ps)) for t, ps in topics.items()))
                    for path, topics in dirs.items()))
            return make

        def handle(_: int | None, response: Any) -> dict[TopicPartition, Exception | None]:
            return {TopicPartition(str(t.topic_name), int(p.partition_index)):
                    None if int(p.error_code) == 0 else error_for(int(p.error_code), None)
                    for t in response.results for p in t.partitions}

        async def alter(broker: int) -> dict[TopicPartition, Exception | None]:
            return await self._call("alter_replica_log_dirs", make_for(by_broker[broker]), handle,
                                    node=self._broker(broker, or_any=False), timeout_ms=timeout_ms)

        answers = await self._each(by_broker, alter)
        return {(tp, broker): answers[broker].get(tp) for tp, broker in moves}

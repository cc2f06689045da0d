"""Log directories: ``describe_log_dirs`` (DescribeLogDirs, sent to each broker asked about, as
Java's Admin.describeLogDirs): every log directory of a broker, whether it is usable, its
volume's size, and the replicas in it with their sizes."""

from __future__ import annotations

from collections.abc import Iterable
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

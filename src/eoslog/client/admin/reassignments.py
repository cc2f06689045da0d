"""Partition reassignments (KIP-455): ``alter_partition_reassignments`` and
``list_partition_reassignments``, both answered by the controller, as Java's
Admin.alterPartitionReassignments / listPartitionReassignments.

Altering answers once each reassignment has begun (the new replicas then catch up); a target
of None cancels the partition's reassignment. Each partition's outcome is reported, not
raised: a request about several partitions is handled for all of them by the controller.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from eoslog.client.admin.core import AdminCore, raise_for
from eoslog.client.admin.types import PartitionReassignment
from eoslog.client.errors import KafkaProtocolError, error_for
from eoslog.client.types import TopicPartition
from eoslog.client.versions import ApiVersionTable
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.messages import build, request_types


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in partitions:
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


class ReassignmentAdmin(AdminCore):
    async def alter_partition_reassignments(
            self, targets: Mapping[TopicPartition, Sequence[int] | None], *,
            allow_replication_factor_change: bool = True,
            timeout_ms: int | None = None) -> dict[TopicPartition, KafkaProtocolError | None]:
        """Move each partition to its target replicas (None: cancel its reassignment). Per
        partition None once the reassignment has begun, else its error."""
        wanted = {TopicPartition(str(t), int(p)): None if r is None else tuple(int(b) for b in r)
                  for (t, p), r in targets.items()}
        server_timeout = datetime.timedelta(milliseconds=self.config.request_timeout_ms)

        def make(versions: ApiVersionTable) -> Any:
            # v1 (KIP-860) only when the replication factor must stay: v0 always allows a change.
            lowest = 0 if allow_replication_factor_change else 1
            version = versions.pick(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 1, lowest)
            m = request_types(ApiKey.ALTER_PARTITION_REASSIGNMENTS, version)
            topics: dict[str, list[Any]] = {}
            for tp, replicas in wanted.items():
                topics.setdefault(tp.topic, []).append(build(
                    m.ReassignablePartition, partition_index=tp.partition, replicas=replicas))
            return build(m.AlterPartitionReassignmentsRequest, timeout=server_timeout,
                         allow_replication_factor_change=allow_replication_factor_change,
                         topics=tuple(build(m.ReassignableTopic, name=t, partitions=tuple(ps))
                                      for t, ps in topics.items()))

        def handle(_: int | None, response: Any) -> dict[TopicPartition, KafkaProtocolError | None]:
            raise_for(response.error_code, response.error_message or "AlterPartitionReassignments")
            return {TopicPartition(str(t.name), int(p.partition_index)):
                    None if int(p.error_code) == 0 else error_for(int(p.error_code), p.error_message)
                    for t in response.responses for p in t.partitions}

        if not wanted:
            return {}
        return await self._call("alter_partition_reassignments", make, handle, node=self._controller,
                                timeout_ms=timeout_ms)

    async def list_partition_reassignments(
            self, partitions: Iterable[TopicPartition] | None = None, *,
            timeout_ms: int | None = None) -> dict[TopicPartition, PartitionReassignment]:
        """The reassignments in progress (of ``partitions``; None: every one)."""
        wanted = None if partitions is None else list(dict.fromkeys(
            TopicPartition(str(t), int(p)) for t, p in partitions))

        def make(versions: ApiVersionTable) -> Any:
            key = ApiKey.LIST_PARTITION_REASSIGNMENTS
            m = request_types(key, versions.pick(key, 0))
            return build(m.ListPartitionReassignmentsRequest,
                         timeout=datetime.timedelta(milliseconds=self.config.request_timeout_ms),
                         topics=None if wanted is None else tuple(
                             build(m.ListPartitionReassignmentsTopics, name=t, partition_indexes=tuple(ps))
                             for t, ps in _by_topic(wanted).items()))

        def handle(_: int | None, response: Any) -> dict[TopicPartition, PartitionReassignment]:
            raise_for(response.error_code, response.error_message or "ListPartitionReassignments")
            return {TopicPartition(str(t.name), int(p.partition_index)): PartitionReassignment(
                tuple(map(int, p.replicas)), tuple(map(int, p.adding_replicas)), tuple(map(int, p.removing_replicas)))
                for t in response.topics for p in t.partitions}

        return await self._call("list_partition_reassignments", make, handle, node=self._controller,
                                timeout_ms=timeout_ms)

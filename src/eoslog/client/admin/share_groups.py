"""Share groups (KIP-932): ListGroups with the share type, ShareGroupDescribe,
DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets, with Java's Admin
names (``listShareGroups``-style ``list_share_groups``, ``describe_share_groups``,
``list_share_group_offsets``, ``alter_share_group_offsets``, ``delete_share_group_offsets``).
Deleting a share group is ``delete_groups``, as for any group.

ListGroups goes to every broker; the rest to the group's coordinator. Altering or deleting a
share group's offsets needs the group empty (GroupNotEmptyError/NonEmptyGroupError otherwise, as
Kafka answers).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from eoslog.client.admin.core import GROUP_KEY_TYPE, AdminCore, raise_for
from eoslog.client.admin.types import (
    GroupListing,
    ShareGroupDescription,
    ShareMemberDescription,
    SharePartitionOffsetInfo,
)
from eoslog.client.errors import UnsupportedVersionError
from eoslog.client.types import TopicPartition
from eoslog.client.versions import ApiVersionTable
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.messages import build, request_types

SHARE_GROUP_TYPE = "share"


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        out.setdefault(topic, []).append(partition)
    return out


class ShareGroupAdmin(AdminCore):
    async def list_share_groups(self, states: Iterable[str] | None = None, *,
                                timeout_ms: int | None = None) -> list[GroupListing]:
        """Every share group of the cluster (ListGroups v5 with the share type, on each broker)."""
        state_filter = tuple(states or ())

        def make(versions: ApiVersionTable) -> Any:
            version = versions.pick(ApiKey.LIST_GROUPS, 5)
            if version < 5:
                raise UnsupportedVersionError("listing share groups needs ListGroups v5")
            m = request_types(ApiKey.LIST_GROUPS, version)
            return build(m.ListGroupsRequest, states_filter=state_filter, types_filter=(SHARE_GROUP_TYPE,))

        def handle(_: int | None, response: Any) -> list[GroupListing]:
            raise_for(response.error_code, "ListGroups")
            return [GroupListing(str(g.group_id), str(g.protocol_type), g.group_state, g.group_type)
                    for g in response.groups]

        listed = await self._on_every_broker("list_share_groups", make, handle, timeout_ms)
        return sorted(listed, key=lambda g: g.group_id)

    async def describe_share_groups(self, group_ids: Iterable[str], *,
                                    timeout_ms: int | None = None) -> dict[str, ShareGroupDescription]:
        """State, epochs and members (their subscriptions and assigned partitions) of each share group."""

        async def describe(group_id: str) -> ShareGroupDescription:
            def make(versions: ApiVersionTable) -> Any:
                m = request_types(ApiKey.SHARE_GROUP_DESCRIBE, versions.pick(ApiKey.SHARE_GROUP_DESCRIBE, 1, 1))
                return build(m.ShareGroupDescribeRequest, group_ids=(group_id,), include_authorized_operations=False)

            def handle(node_id: int | None, response: Any) -> ShareGroupDescription:
                g = response.groups[0]
                raise_for(g.error_code, g.error_message or f"share group {group_id}")
                members = tuple(ShareMemberDescription(
                    str(m.member_id), str(m.client_id), str(m.client_host), m.rack_id, int(m.member_epoch),
                    tuple(m.subscribed_topic_names),
                    tuple(TopicPartition(str(t.topic_name), int(p)) for t in m.assignment.topic_partitions
                          for p in t.partitions)) for m in g.members)
                return ShareGroupDescription(group_id, str(g.group_state), int(g.group_epoch),
                                             int(g.assignment_epoch), str(g.assignor_name), members,
                                             self.node(node_id))

            return await self._call("describe_share_groups", make, handle,
                                    node=self._coordinator_of(GROUP_KEY_TYPE, group_id), timeout_ms=timeout_ms)

        return await self._each(group_ids, describe)

    async def list_share_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None, *, timeout_ms: int | None = None,
    ) -> dict[TopicPartition, SharePartitionOffsetInfo]:
        """Each share-partition's start offset and lag (``partitions`` None: every one the group
        has a state for)."""
        wanted = None if partitions is None else _by_topic(partitions)

        def make(versions: ApiVersionTable) -> Any:
            version = versions.pick(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1)
            m = request_types(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, version)
            topics = None if wanted is None else tuple(
                build(m.DescribeShareGroupOffsetsRequestTopic, topic_name=t, partitions=tuple(ps))
                for t, ps in wanted.items())
            return build(m.DescribeShareGroupOffsetsRequest, groups=(build(
                m.DescribeShareGroupOffsetsRequestGroup, group_id=group_id, topics=topics),))

        def handle(_: int | None, response: Any) -> dict[TopicPartition, SharePartitionOffsetInfo]:
            g = response.groups[0]
            raise_for(g.error_code, g.error_message or f"share group {group_id}")
            out = {}
            for t in g.topics:
                for p in t.partitions:
                    raise_for(p.error_code, f"share group {group_id}, {t.topic_name}-{int(p.partition_index)}")
                    epoch, lag = int(p.leader_epoch), int(getattr(p, "lag", -1))
                    out[TopicPartition(str(t.topic_name), int(p.partition_index))] = SharePartitionOffsetInfo(
                        int(p.start_offset), epoch if epoch >= 0 else None, lag if lag >= 0 else None)
            return out

        return await self._call("list_share_group_offsets", make, handle,
                                node=self._coordinator_of(GROUP_KEY_TYPE, group_id), timeout_ms=timeout_ms)

    async def alter_share_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int], *,
                                        timeout_ms: int | None = None) -> None:
        """Start each share-partition again at the given offset (the group must be empty)."""
        wanted = _by_topic(offsets)

        def make(versions: ApiVersionTable) -> Any:
            m = request_types(ApiKey.ALTER_SHARE_GROUP_OFFSETS, versions.pick(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0))
            return build(m.AlterShareGroupOffsetsRequest, group_id=group_id, topics=tuple(
                build(m.AlterShareGroupOffsetsRequestTopic, topic_name=t, partitions=tuple(
                    build(m.AlterShareGroupOffsetsRequestPartition, partition_index=p,
                          start_offset=offsets[TopicPartition(t, p)]) for p in ps)) for t, ps in wanted.items()))

        def handle(_: int | None, response: Any) -> None:
            raise_for(response.error_code, response.error_message or f"share group {group_id}")
            for t in response.responses:
                for p in t.partitions:
                    raise_for(p.error_code, f"share group {group_id}, {t.topic_name}-{int(p.partition_index)}")

        if wanted:
            await self._call("alter_share_group_offsets", make, handle,
                             node=self._coordinator_of(GROUP_KEY_TYPE, group_id), timeout_ms=timeout_ms)

    async def delete_share_group_offsets(self, group_id: str, topics: Iterable[str], *,
                                         timeout_ms: int | None = None) -> None:
        """Forget the group's share-partition states of whole topics (the group must be empty):
        its next members start where share.auto.offset.reset says."""
        names = sorted(set(topics))

        def make(versions: ApiVersionTable) -> Any:
            m = request_types(ApiKey.DELETE_SHARE_GROUP_OFFSETS, versions.pick(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0))
            return build(m.DeleteShareGroupOffsetsRequest, group_id=group_id, topics=tuple(
                build(m.DeleteShareGroupOffsetsRequestTopic, topic_name=t) for t in names))

        def handle(_: int | None, response: Any) -> None:
            raise_for(response.error_code, response.error_message or f"share group {group_id}")
            for t in response.responses:
                raise_for(t.error_code, f"share group {group_id}, topic {t.topic_name}")

        if names:
            await self._call("delete_share_group_offsets", make, handle,
                             node=self._coordinator_of(GROUP_KEY_TYPE, group_id), timeout_ms=timeout_ms)

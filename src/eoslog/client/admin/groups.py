"""Consumer groups: ListGroups, DescribeGroups, OffsetFetch, OffsetCommit (as an admin:
no member, generation -1), OffsetDelete and DeleteGroups.

ListGroups goes to every broker (each lists the groups it coordinates); the rest to the
group's coordinator. A group that does not exist is described as ``Dead`` (Kafka's
classic DescribeGroups answer) and has no committed offsets; deleting it, or its
offsets, raises GroupIdNotFoundError. Only an empty group takes an admin's offsets
(otherwise UnknownMemberIdError) or lets them be deleted (NonEmptyGroupError /
GroupSubscribedToTopicError).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from eoslog.client.admin.core import GROUP_KEY_TYPE, AdminCore, MakeRequest, raise_for
from eoslog.client.admin.types import GroupDescription, GroupListing, MemberDescription
from eoslog.client.errors import UnsupportedVersionError
from eoslog.client.types import OffsetAndMetadata, TopicPartition
from eoslog.client.versions import ApiVersionTable
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE, decode_assignment
from eoslog.protocol.messages import build, request_types

DESCRIBE_GROUPS, LIST_GROUPS, OFFSET_DELETE, DELETE_GROUPS = 15, 16, 47, 42
if TYPE_CHECKING:
    from eoslog.protocol.requests import (
        DeleteGroupsRequest,
        DescribeGroupsRequest,
        ListGroupsRequest,
        OffsetCommitRequest,
        OffsetDeleteRequest,
        OffsetFetchRequest,
    )
    from eoslog.protocol.responses import (
        DeleteGroupsResponse,
        DescribeGroupsResponse,
        ListGroupsResponse,
        OffsetCommitResponse,
        OffsetDeleteResponse,
        OffsetFetchResponse,
    )

T = TypeVar("T")
R = TypeVar("R")

def assignment_partitions(data: bytes) -> tuple[TopicPartition, ...]:
    """The partitions of a ConsumerProtocolAssignment (none when it is shorter than a version)."""
    return decode_assignment(data).partitions if len(data) >= 2 else ()


def _raise_partition_errors(group_id: str, topics: Any) -> None:
    for t in topics:
        for p in t.partitions:
            raise_for(p.error_code, f"group {group_id}, partition {t.name}-{int(p.partition_index)}")


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in partitions:
        out.setdefault(topic, []).append(partition)
    return out


_GROUP_ID_NOT_FOUND, _UNSUPPORTED_VERSION = 69, 35  # ConsumerGroupDescribe: not a consumer group, protocol off

class GroupAdmin(AdminCore):
    async def _group_call(self, what: str, group_id: str, make: MakeRequest,
                          handle: Callable[[int | None, R], T], timeout_ms: int | None) -> T:
        """A request to the group's coordinator, with retries."""
        return await self._call(what, make, handle, node=self._coordinator_of(GROUP_KEY_TYPE, group_id),
                                timeout_ms=timeout_ms)

    async def list_groups(self, states: Iterable[str] | None = None, *,
                          timeout_ms: int | None = None) -> list[GroupListing]:
        """Every group of the cluster (ListGroups on each broker), optionally only those in
        ``states`` (``Stable``, ``Empty``, ...; ListGroups v4+)."""
        state_filter = tuple(states or ())

        def make(versions: ApiVersionTable) -> ListGroupsRequest:
            version = versions.pick(LIST_GROUPS, 5)
            if state_filter and version < 4:
                raise UnsupportedVersionError("filtering groups by state needs ListGroups v4")
            m = request_types(LIST_GROUPS, version)
            return cast("ListGroupsRequest", build(m.ListGroupsRequest, states_filter=state_filter, types_filter=()))

        def handle(_: int | None, response: ListGroupsResponse) -> list[GroupListing]:
            raise_for(response.error_code, "ListGroups")
            return [GroupListing(str(g.group_id), str(g.protocol_type), getattr(g, "group_state", None),
                                 getattr(g, "group_type", None)) for g in response.groups]

        listed = await self._on_every_broker("list_groups", make, handle, timeout_ms)
        return sorted(listed, key=lambda g: g.group_id)

    async def _describe_consumer_group(self, group_id: str, timeout_ms: int | None) -> GroupDescription | None:
        """A KIP-848 consumer group by ConsumerGroupDescribe; None when the group is of another kind (or
        the broker has no such API), as Kafka's admin falls back to DescribeGroups then."""
        def make(versions: ApiVersionTable) -> Any:
            if not versions.supports(ApiKey.CONSUMER_GROUP_DESCRIBE):
                raise UnsupportedVersionError("no ConsumerGroupDescribe")
            m = request_types(ApiKey.CONSUMER_GROUP_DESCRIBE, versions.pick(ApiKey.CONSUMER_GROUP_DESCRIBE, 1))
            return build(m.ConsumerGroupDescribeRequest, group_ids=(group_id,), include_authorized_operations=False)

        def parts(assignment: Any) -> tuple[TopicPartition, ...]:
            return tuple(TopicPartition(str(t.topic_name), int(p)) for t in assignment.topic_partitions
                         for p in t.partitions)

        def handle(node_id: int | None, response: Any) -> GroupDescription | None:
            g = response.groups[0]
            if int(g.error_code) in (_GROUP_ID_NOT_FOUND, _UNSUPPORTED_VERSION):
                return None
            raise_for(g.error_code, g.error_message or f"group {group_id}")
            members = tuple(MemberDescription(str(m.member_id), m.instance_id, str(m.client_id), str(m.client_host),
                                              parts(m.assignment), int(m.member_epoch), parts(m.target_assignment))
                            for m in g.members)
            return GroupDescription(group_id, str(g.group_state), CONSUMER_PROTOCOL_TYPE, str(g.assignor_name),
                                    members, self.node(node_id), "consumer", int(g.group_epoch))

        try:
            result: GroupDescription | None = await self._group_call(
                "describe_consumer_group", group_id, make, handle, timeout_ms)
        except UnsupportedVersionError:
            return None
        return result

    async def describe_groups(self, group_ids: Iterable[str], *,
                              timeout_ms: int | None = None) -> dict[str, GroupDescription]:
        """State, protocol and members (with their assigned partitions) of each group: a KIP-848 consumer
        group by ConsumerGroupDescribe, any other by DescribeGroups (Kafka's admin does the same)."""

        async def describe(group_id: str) -> GroupDescription:
            consumer = await self._describe_consumer_group(group_id, timeout_ms)
            if consumer is not None:
                return consumer

            def make(versions: ApiVersionTable) -> DescribeGroupsRequest:
                m = request_types(DESCRIBE_GROUPS, versions.pick(DESCRIBE_GROUPS, 5))
                return cast("DescribeGroupsRequest", build(
                    m.DescribeGroupsRequest, groups=(group_id,), include_authorized_operations=False))

            def handle(node_id: int | None, response: DescribeGroupsResponse) -> GroupDescription:
                g = response.groups[0]
                raise_for(g.error_code, f"group {group_id}")
                consumer = str(g.protocol_type) in (CONSUMER_PROTOCOL_TYPE, "")
                members = tuple(
                    MemberDescription(str(m.member_id), getattr(m, "group_instance_id", None), str(m.client_id),
                                      str(m.client_host),
                                      assignment_partitions(bytes(m.member_assignment)) if consumer else ())
                    for m in g.members
                )
                return GroupDescription(group_id, str(g.group_state), str(g.protocol_type), str(g.protocol_data),
                                        members, self.node(node_id))

            return await self._group_call("describe_groups", group_id, make, handle, timeout_ms)

        return await self._each(group_ids, describe)

    async def list_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None, *, require_stable: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (OffsetFetch): of ``partitions``, or of every
        partition it committed. Partitions without a committed offset are left out;
        ``require_stable`` waits out offsets a transaction has not committed yet."""
        wanted = None if partitions is None else _by_topic(TopicPartition(str(t), int(p)) for t, p in partitions)

        def make(versions: ApiVersionTable) -> OffsetFetchRequest:
            version = versions.pick(ApiKey.OFFSET_FETCH, 7, 7 if require_stable else 2 if wanted is None else 1)
            m = request_types(ApiKey.OFFSET_FETCH, version)
            topics = None if wanted is None else tuple(
                build(m.OffsetFetchRequestTopic, name=t, partition_indexes=tuple(ps)) for t, ps in wanted.items())
            return cast("OffsetFetchRequest", build(
                m.OffsetFetchRequest, group_id=group_id, topics=topics, require_stable=require_stable))

        def handle(_: int | None, response: OffsetFetchResponse) -> dict[TopicPartition, OffsetAndMetadata]:
            raise_for(getattr(response, "error_code", 0), f"group {group_id}")
            out: dict[TopicPartition, OffsetAndMetadata] = {}
            assert hasattr(response, "topics")  # make sends v1-v7; v8+ answer per group
            for t in response.topics:
                for p in t.partitions:
                    tp = TopicPartition(str(t.name), int(p.partition_index))
                    raise_for(p.error_code, f"group {group_id}, partition {tp.topic}-{tp.partition}")
                    if int(p.committed_offset) >= 0:
                        out[tp] = OffsetAndMetadata(int(p.committed_offset), p.metadata,
                                                    int(getattr(p, "committed_leader_epoch", -1)))
            return dict(sorted(out.items()))

        return await self._group_call("list_consumer_group_offsets", group_id, make, handle, timeout_ms)

    async def alter_consumer_group_offsets(self, group_id: str,
                                           offsets: Mapping[TopicPartition, OffsetAndMetadata | int], *,
                                           timeout_ms: int | None = None) -> None:
        """Commit offsets for a group without active members (OffsetCommit, generation -1)."""
        wanted = {TopicPartition(str(tp[0]), int(tp[1])): o if isinstance(o, OffsetAndMetadata)
                  else OffsetAndMetadata(int(o)) for tp, o in offsets.items()}

        def make(versions: ApiVersionTable) -> OffsetCommitRequest:
            m = request_types(ApiKey.OFFSET_COMMIT, versions.pick(ApiKey.OFFSET_COMMIT, 8, 2))
            return cast("OffsetCommitRequest", build(
                m.OffsetCommitRequest, group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
                group_instance_id=None, retention_time_ms=-1,
                topics=tuple(
                    build(m.OffsetCommitRequestTopic, name=topic, partitions=tuple(
                        build(m.OffsetCommitRequestPartition, partition_index=p,
                              committed_offset=wanted[TopicPartition(topic, p)].offset,
                              committed_leader_epoch=wanted[TopicPartition(topic, p)].leader_epoch,
                              committed_metadata=wanted[TopicPartition(topic, p)].metadata or "")
                        for p in parts))
                    for topic, parts in _by_topic(wanted).items()
                ),
            ))

        def handle(_: int | None, response: OffsetCommitResponse) -> None:
            _raise_partition_errors(group_id, response.topics)

        if wanted:
            await self._group_call("alter_consumer_group_offsets", group_id, make, handle, timeout_ms)

    async def delete_consumer_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition], *,
                                            timeout_ms: int | None = None) -> None:
        """Delete a group's committed offsets (OffsetDelete)."""
        wanted = _by_topic(dict.fromkeys(TopicPartition(str(t), int(p)) for t, p in partitions))

        def make(versions: ApiVersionTable) -> OffsetDeleteRequest:
            m = request_types(OFFSET_DELETE, versions.pick(OFFSET_DELETE, 0))
            return cast("OffsetDeleteRequest", build(m.OffsetDeleteRequest, group_id=group_id, topics=tuple(
                build(m.OffsetDeleteRequestTopic, name=t, partitions=tuple(
                    build(m.OffsetDeleteRequestPartition, partition_index=p) for p in ps))
                for t, ps in wanted.items())))

        def handle(_: int | None, response: OffsetDeleteResponse) -> None:
            raise_for(response.error_code, f"group {group_id}")
            _raise_partition_errors(group_id, response.topics)

        if wanted:
            await self._group_call("delete_consumer_group_offsets", group_id, make, handle, timeout_ms)

    async def delete_groups(self, group_ids: Iterable[str], *, timeout_ms: int | None = None) -> None:
        """Delete groups without active members, with their offsets (DeleteGroups)."""

        async def delete(group_id: str) -> None:
            def make(versions: ApiVersionTable) -> DeleteGroupsRequest:
                m = request_types(DELETE_GROUPS, versions.pick(DELETE_GROUPS, 2))
                return cast("DeleteGroupsRequest", build(m.DeleteGroupsRequest, groups_names=(group_id,)))

            def handle(_: int | None, response: DeleteGroupsResponse) -> None:
                for r in response.results:
                    raise_for(r.error_code, f"group {group_id}")

            await self._group_call("delete_groups", group_id, make, handle, timeout_ms)

        await self._each(group_ids, delete)

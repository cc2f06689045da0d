"""Topics, the cluster and offsets: CreateTopics, DeleteTopics, Metadata, CreatePartitions,
DescribeCluster, ListOffsets and DeleteRecords.

Topic changes go to the controller (on KRaft any broker forwards them), ListOffsets and
DeleteRecords to each partition's leader. A request about several topics reports each
topic's outcome; the call raises the first failure in the order the caller gave, after
every other topic of the request was handled (created, deleted) by the broker — as each of
Java's per-topic futures would.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

from eoslog.client.admin.core import AdminCore, MakeRequest, raise_first, raise_for
from eoslog.client.admin.types import (
    ClusterDescription,
    CreatedTopic,
    DeletedRecords,
    ElectionType,
    IsolationLevel,
    ListOffsetsResultInfo,
    NewPartitions,
    NewTopic,
    Node,
    OffsetSpec,
    RecordsToDelete,
    TopicDescription,
    TopicListing,
    TopicPartitionInfo,
)
from eoslog.client.errors import KafkaProtocolError, UnsupportedVersionError, error_for
from eoslog.client.types import TopicPartition
from eoslog.client.versions import ApiVersionTable
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.messages import build, request_types

if TYPE_CHECKING:
    from eoslog.protocol.requests import (
        CreatePartitionsRequest,
        CreateTopicsRequest,
        DeleteRecordsRequest,
        DeleteTopicsRequest,
        DescribeClusterRequest,
        ElectLeadersRequest,
        ListOffsetsRequest,
        MetadataRequest,
    )
    from eoslog.protocol.responses import (
        CreatePartitionsResponse,
        CreateTopicsResponse,
        DeleteRecordsResponse,
        DeleteTopicsResponse,
        DescribeClusterResponse,
        ElectLeadersResponse,
        ListOffsetsResponse,
        MetadataResponse,
    )

DELETE_RECORDS, CREATE_PARTITIONS, ELECT_LEADERS, DESCRIBE_CLUSTER = 21, 37, 43, 60
NO_TOPIC_ID = uuid.UUID(int=0)


def _topic_id(value: object) -> uuid.UUID | None:
    return value if isinstance(value, uuid.UUID) and value != NO_TOPIC_ID else None


def topic_description(t: Any) -> TopicDescription:  # a Metadata topic of any version (kio has no union)
    return TopicDescription(
        str(t.name), _topic_id(getattr(t, "topic_id", None)), bool(getattr(t, "is_internal", False)),
        tuple(sorted(
            (TopicPartitionInfo(int(p.partition_index), int(p.leader_id), tuple(int(r) for r in p.replica_nodes),
                                tuple(int(r) for r in p.isr_nodes), int(getattr(p, "leader_epoch", -1)),
                                tuple(int(r) for r in getattr(p, "offline_replicas", ()))) for p in t.partitions),
            key=lambda p: p.partition,
        )),
    )


class TopicAdmin(AdminCore):
    # -- topics -------------------------------------------------------------------------------

    async def create_topics(self, new_topics: Iterable[NewTopic], *, validate_only: bool = False,
                            timeout_ms: int | None = None) -> dict[str, CreatedTopic]:
        """Create topics (CreateTopics); ``validate_only`` checks without creating.
        Raises e.g. TopicAlreadyExistsError, InvalidConfigError, InvalidPartitionsError."""
        topics = list(new_topics)
        server_timeout = datetime.timedelta(milliseconds=self.config.request_timeout_ms)

        def make(versions: ApiVersionTable) -> CreateTopicsRequest:
            version = versions.pick(ApiKey.CREATE_TOPICS, 7, 2)
            if version < 4 and any(t.num_partitions < 0 or t.replication_factor < 0
                                   for t in topics if t.replica_assignment is None):
                raise UnsupportedVersionError("the broker's defaults for partitions and replication factor need "
                                              "CreateTopics v4")
            m = request_types(ApiKey.CREATE_TOPICS, version)
            return cast("CreateTopicsRequest", build(
                m.CreateTopicsRequest, timeout=server_timeout, validate_only=validate_only, topics=tuple(
                build(
                    m.CreatableTopic, name=t.name,
                    num_partitions=-1 if t.replica_assignment is not None else t.num_partitions,
                    replication_factor=-1 if t.replica_assignment is not None else t.replication_factor,
                    assignments=tuple(
                        build(m.CreatableReplicaAssignment, partition_index=p, broker_ids=tuple(brokers))
                        for p, brokers in sorted((t.replica_assignment or {}).items())
                    ),
                    configs=tuple(build(m.CreatableTopicConfig, name=k, value=v) for k, v in t.configs.items()),
                )
                for t in topics
            )))

        def handle(_: int | None, response: CreateTopicsResponse) -> dict[str, CreatedTopic]:
            errors: dict[str, tuple[int, str | None]] = {}
            created: dict[str, CreatedTopic] = {}
            for r in response.topics:
                name = str(r.name)
                if int(r.error_code) != 0:
                    errors[name] = (int(r.error_code), r.error_message or f"topic {name}")
                    continue
                created[name] = CreatedTopic(
                    name, _topic_id(getattr(r, "topic_id", None)), int(getattr(r, "num_partitions", -1)),
                    int(getattr(r, "replication_factor", -1)),
                    {str(c.name): c.value for c in getattr(r, "configs", ())},
                )
            raise_first(errors, (t.name for t in topics))
            return created

        return await self._call("create_topics", make, handle, node=self._controller, timeout_ms=timeout_ms)

    async def delete_topics(self, names: Iterable[str], *, timeout_ms: int | None = None) -> None:
        """Delete topics (DeleteTopics); an unknown one raises UnknownTopicOrPartitionError."""
        wanted = list(dict.fromkeys(names))
        server_timeout = datetime.timedelta(milliseconds=self.config.request_timeout_ms)

        def make(versions: ApiVersionTable) -> DeleteTopicsRequest:
            version = versions.pick(ApiKey.DELETE_TOPICS, 6, 1)
            m = request_types(ApiKey.DELETE_TOPICS, version)
            if version >= 6:
                return cast("DeleteTopicsRequest", build(m.DeleteTopicsRequest, timeout=server_timeout,
                             topics=tuple(build(m.DeleteTopicState, name=n, topic_id=None) for n in wanted)))
            return cast("DeleteTopicsRequest", build(
                m.DeleteTopicsRequest, timeout=server_timeout, topic_names=tuple(wanted)))

        def handle(_: int | None, response: DeleteTopicsResponse) -> None:
            raise_first({str(r.name): (int(r.error_code), getattr(r, "error_message", None) or f"topic {r.name}")
                          for r in response.responses if int(r.error_code) != 0}, wanted)

        if wanted:
            await self._call("delete_topics", make, handle, node=self._controller, timeout_ms=timeout_ms)

    async def list_topics(self, *, internal: bool = False, timeout_ms: int | None = None) -> dict[str, TopicListing]:
        """Every topic, by name; internal ones (``__consumer_offsets``, ...) with ``internal=True``."""
        response = await self._retrying("list_topics", lambda: self._metadata(None), timeout_ms)
        listings = {
            str(t.name): TopicListing(str(t.name), _topic_id(getattr(t, "topic_id", None)),
                                      bool(getattr(t, "is_internal", False)))
            for t in response.topics if int(t.error_code) == 0
        }
        return {n: listings[n] for n in sorted(listings) if internal or not listings[n].is_internal}

    async def describe_topics(self, names: Iterable[str], *,
                              timeout_ms: int | None = None) -> dict[str, TopicDescription]:
        """Partitions, leaders, replicas and ISR of each topic (Metadata)."""
        wanted = list(dict.fromkeys(names))

        async def attempt() -> dict[str, TopicDescription]:
            response = await self._metadata(wanted)
            found = {str(t.name): t for t in response.topics}
            raise_first({n: (int(t.error_code), f"topic {n}") for n, t in found.items() if int(t.error_code) != 0},
                         wanted)
            return {n: topic_description(found[n]) for n in wanted}

        return await self._retrying("describe_topics", attempt, timeout_ms) if wanted else {}

    async def create_partitions(self, new_partitions: Mapping[str, NewPartitions | int], *,
                                validate_only: bool = False, timeout_ms: int | None = None) -> None:
        """Grow topics to a new partition count (CreatePartitions)."""
        wanted = {t: p if isinstance(p, NewPartitions) else NewPartitions(int(p)) for t, p in new_partitions.items()}
        server_timeout = datetime.timedelta(milliseconds=self.config.request_timeout_ms)

        def make(versions: ApiVersionTable) -> CreatePartitionsRequest:
            m = request_types(CREATE_PARTITIONS, versions.pick(CREATE_PARTITIONS, 3))
            return cast("CreatePartitionsRequest", build(
                m.CreatePartitionsRequest, timeout=server_timeout, validate_only=validate_only, topics=tuple(
                build(m.CreatePartitionsTopic, name=t, count=p.total_count, assignments=None
                      if p.new_assignments is None else tuple(
                          build(m.CreatePartitionsAssignment, broker_ids=tuple(a)) for a in p.new_assignments))
                for t, p in wanted.items()
            )))

        def handle(_: int | None, response: CreatePartitionsResponse) -> None:
            raise_first({str(r.name): (int(r.error_code), r.error_message or f"topic {r.name}")
                          for r in response.results if int(r.error_code) != 0}, wanted)

        if wanted:
            await self._call("create_partitions", make, handle, node=self._controller, timeout_ms=timeout_ms)

    async def elect_leaders(self, election_type: ElectionType = ElectionType.PREFERRED,
                            partitions: Iterable[TopicPartition] | None = None, *,
                            timeout_ms: int | None = None) -> dict[TopicPartition, KafkaProtocolError | None]:
        """Elect leaders (ElectLeaders, answered by the controller). Per partition None when a
        leader was elected, else its error (ElectionNotNeededError when the preferred replica
        leads already, ...). ``partitions`` None: every partition, and only those an election
        was tried for are reported, as Kafka's Admin.electLeaders."""
        wanted = None if partitions is None else list(dict.fromkeys(
            TopicPartition(str(t), int(p)) for t, p in partitions))
        server_timeout = datetime.timedelta(milliseconds=self.config.request_timeout_ms)

        def make(versions: ApiVersionTable) -> ElectLeadersRequest:
            version = versions.pick(ELECT_LEADERS, 2, 1 if election_type is ElectionType.UNCLEAN else 0)
            m = request_types(ELECT_LEADERS, version)
            by_topic: dict[str, list[int]] = {}
            for tp in wanted or ():
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            return cast("ElectLeadersRequest", build(
                m.ElectLeadersRequest, election_type=int(election_type), timeout=server_timeout,
                         topic_partitions=None if wanted is None else tuple(
                             build(m.TopicPartitions, topic=t, partitions=tuple(ps)) for t, ps in by_topic.items())))

        def handle(_: int | None, response: ElectLeadersResponse) -> dict[TopicPartition, KafkaProtocolError | None]:
            raise_for(getattr(response, "error_code", 0), "ElectLeaders")
            return {TopicPartition(str(r.topic), int(p.partition_id)):
                    None if int(p.error_code) == 0 else error_for(int(p.error_code), p.error_message)
                    for r in response.replica_election_results for p in r.partition_result}

        return await self._call("elect_leaders", make, handle, node=self._controller, timeout_ms=timeout_ms)

    # -- the cluster ----------------------------------------------------------------------------

    async def describe_cluster(self, *, timeout_ms: int | None = None) -> ClusterDescription:
        """Cluster id, controller and brokers (DescribeCluster; Metadata where a broker lacks it)."""

        def make(versions: ApiVersionTable) -> DescribeClusterRequest | MetadataRequest:
            if versions.supports(DESCRIBE_CLUSTER):
                m = request_types(DESCRIBE_CLUSTER, versions.pick(DESCRIBE_CLUSTER, 2))
                return cast("DescribeClusterRequest", build(
                    m.DescribeClusterRequest, include_cluster_authorized_operations=False,
                             endpoint_type=1, include_fenced_brokers=False))
            m = request_types(ApiKey.METADATA, versions.pick(ApiKey.METADATA, 12, 1))
            return cast("MetadataRequest", build(m.MetadataRequest, topics=(), allow_auto_topic_creation=False,
                         include_cluster_authorized_operations=False, include_topic_authorized_operations=False))

        def handle(_: int | None, response: DescribeClusterResponse | MetadataResponse) -> ClusterDescription:
            if hasattr(response, "error_code"):  # DescribeCluster
                described = cast("DescribeClusterResponse", response)
                raise_for(described.error_code, described.error_message)
                nodes = {int(b.broker_id): Node(int(b.broker_id), str(b.host), int(b.port), b.rack)
                         for b in described.brokers}
                return ClusterDescription(described.cluster_id, nodes.get(int(described.controller_id)),
                                          tuple(nodes[n] for n in sorted(nodes)))
            # Metadata v1+ (make asks for no older): cluster_id arrived in v2.
            nodes = {int(b.node_id): Node(int(b.node_id), str(b.host), int(b.port), getattr(b, "rack", None))
                     for b in response.brokers}
            return ClusterDescription(getattr(response, "cluster_id", None),
                                      nodes.get(int(getattr(response, "controller_id", -1))),
                                      tuple(nodes[n] for n in sorted(nodes)))

        return await self._call("describe_cluster", make, handle, timeout_ms=timeout_ms)

    # -- offsets ---------------------------------------------------------------------------------

    async def list_offsets(self, specs: Mapping[TopicPartition, OffsetSpec], *,
                           isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
                           timeout_ms: int | None = None) -> dict[TopicPartition, ListOffsetsResultInfo]:
        """Offsets by spec (ListOffsets at each partition's leader): earliest, latest (the
        last stable offset under READ_COMMITTED), max timestamp, or the first offset whose
        timestamp is at or after a given one (offset -1 when there is none)."""
        wanted = {TopicPartition(str(tp[0]), int(tp[1])): s for tp, s in specs.items()}
        min_version = 7 if any(s.timestamp == OffsetSpec.MAX_TIMESTAMP for s in wanted.values()) \
            else 2 if isolation_level is IsolationLevel.READ_COMMITTED else 1

        def make(batch: list[TopicPartition]) -> MakeRequest:
            by_topic: dict[str, list[TopicPartition]] = {}
            for tp in batch:
                by_topic.setdefault(tp.topic, []).append(tp)

            def build_request(versions: ApiVersionTable) -> ListOffsetsRequest:
                m = request_types(ApiKey.LIST_OFFSETS, versions.pick(ApiKey.LIST_OFFSETS, 7, min_version))
                return cast("ListOffsetsRequest", build(
                    m.ListOffsetsRequest, replica_id=-1, isolation_level=int(isolation_level), topics=tuple(
                    build(m.ListOffsetsTopic, name=topic, partitions=tuple(
                        build(m.ListOffsetsPartition, partition_index=tp.partition, current_leader_epoch=-1,
                              timestamp=wanted[tp].timestamp) for tp in tps))
                    for topic, tps in by_topic.items()
                )))
            return build_request

        def handle(_: int, response: ListOffsetsResponse) -> dict[TopicPartition, ListOffsetsResultInfo]:
            out: dict[TopicPartition, ListOffsetsResultInfo] = {}
            for t in response.topics:
                for p in t.partitions:
                    tp = TopicPartition(str(t.name), int(p.partition_index))
                    raise_for(p.error_code, f"partition {tp.topic}-{tp.partition}")
                    epoch = int(getattr(p, "leader_epoch", -1))
                    out[tp] = ListOffsetsResultInfo(int(p.offset), int(getattr(p, "timestamp", -1)),
                                                    epoch if epoch >= 0 else None)
            return out

        return await self._per_leader("list_offsets", wanted, make, handle, timeout_ms)

    async def delete_records(self, records_to_delete: Mapping[TopicPartition, RecordsToDelete | int], *,
                             timeout_ms: int | None = None) -> dict[TopicPartition, DeletedRecords]:
        """Delete every record before an offset (DeleteRecords at each partition's leader):
        the partition's log start offset moves there, and its whole segments below it are
        deleted. Returns each partition's new low watermark. An offset above the high
        watermark raises OffsetOutOfRangeError, a compact-only topic PolicyViolationError."""
        wanted = {TopicPartition(str(tp[0]), int(tp[1])):
                  r if isinstance(r, RecordsToDelete) else RecordsToDelete(int(r))
                  for tp, r in records_to_delete.items()}
        server_timeout = datetime.timedelta(milliseconds=self.config.request_timeout_ms)

        def make(batch: list[TopicPartition]) -> MakeRequest:
            by_topic: dict[str, list[TopicPartition]] = {}
            for tp in batch:
                by_topic.setdefault(tp.topic, []).append(tp)

            def build_request(versions: ApiVersionTable) -> DeleteRecordsRequest:
                m = request_types(DELETE_RECORDS, versions.pick(DELETE_RECORDS, 2))
                return cast("DeleteRecordsRequest", build(m.DeleteRecordsRequest, timeout=server_timeout, topics=tuple(
                    build(m.DeleteRecordsTopic, name=topic, partitions=tuple(
                        build(m.DeleteRecordsPartition, partition_index=tp.partition,
                              offset=wanted[tp].before_offset) for tp in tps))
                    for topic, tps in by_topic.items()
                )))
            return build_request

        def handle(_: int, response: DeleteRecordsResponse) -> dict[TopicPartition, DeletedRecords]:
            out: dict[TopicPartition, DeletedRecords] = {}
            errors: dict[TopicPartition, tuple[int, str | None]] = {}
            for t in response.topics:
                for p in t.partitions:
                    tp = TopicPartition(str(t.name), int(p.partition_index))
                    if int(p.error_code) != 0:
                        errors[tp] = (int(p.error_code), f"partition {tp.topic}-{tp.partition}")
                    else:
                        out[tp] = DeletedRecords(int(p.low_watermark))
            raise_first(errors, wanted)
            return out

        return await self._per_leader("delete_records", wanted, make, handle, timeout_ms)


"""kio's response classes of every version a handler serves, as one type per API (generated
from the handler registry's version ranges by ``scripts/typegen.py``): what each handler
returns. Types only, imported under ``TYPE_CHECKING``; eoslog's own copy of a class kio reads
too strictly (``protocol/messages.py``) stands in for kio's."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kio.schema.add_offsets_to_txn.v0.response import AddOffsetsToTxnResponse as _AddOffsetsToTxnResponseV0
    from kio.schema.add_offsets_to_txn.v1.response import AddOffsetsToTxnResponse as _AddOffsetsToTxnResponseV1
    from kio.schema.add_offsets_to_txn.v2.response import AddOffsetsToTxnResponse as _AddOffsetsToTxnResponseV2
    from kio.schema.add_offsets_to_txn.v3.response import AddOffsetsToTxnResponse as _AddOffsetsToTxnResponseV3
    from kio.schema.add_offsets_to_txn.v4.response import AddOffsetsToTxnResponse as _AddOffsetsToTxnResponseV4
    from kio.schema.add_partitions_to_txn.v0.response import AddPartitionsToTxnResponse as _AddPartitionsToTxnResponseV0
    from kio.schema.add_partitions_to_txn.v1.response import AddPartitionsToTxnResponse as _AddPartitionsToTxnResponseV1
    from kio.schema.add_partitions_to_txn.v2.response import AddPartitionsToTxnResponse as _AddPartitionsToTxnResponseV2
    from kio.schema.add_partitions_to_txn.v3.response import AddPartitionsToTxnResponse as _AddPartitionsToTxnResponseV3
    from kio.schema.add_partitions_to_txn.v4.response import AddPartitionsToTxnResponse as _AddPartitionsToTxnResponseV4
    from kio.schema.add_partitions_to_txn.v5.response import AddPartitionsToTxnResponse as _AddPartitionsToTxnResponseV5
    from kio.schema.alter_client_quotas.v0.response import AlterClientQuotasResponse as _AlterClientQuotasResponseV0
    from kio.schema.alter_client_quotas.v1.response import AlterClientQuotasResponse as _AlterClientQuotasResponseV1
    from kio.schema.alter_configs.v0.response import AlterConfigsResponse as _AlterConfigsResponseV0
    from kio.schema.alter_configs.v1.response import AlterConfigsResponse as _AlterConfigsResponseV1
    from kio.schema.alter_configs.v2.response import AlterConfigsResponse as _AlterConfigsResponseV2
    from kio.schema.alter_partition_reassignments.v0.response import (
        AlterPartitionReassignmentsResponse as _AlterPartitionReassignmentsResponseV0,
    )
    from kio.schema.alter_partition_reassignments.v1.response import (
        AlterPartitionReassignmentsResponse as _AlterPartitionReassignmentsResponseV1,
    )
    from kio.schema.alter_replica_log_dirs.v1.response import (
        AlterReplicaLogDirsResponse as _AlterReplicaLogDirsResponseV1,
    )
    from kio.schema.alter_replica_log_dirs.v2.response import (
        AlterReplicaLogDirsResponse as _AlterReplicaLogDirsResponseV2,
    )
    from kio.schema.alter_share_group_offsets.v0.response import (
        AlterShareGroupOffsetsResponse as _AlterShareGroupOffsetsResponseV0,
    )
    from kio.schema.alter_user_scram_credentials.v0.response import (
        AlterUserScramCredentialsResponse as _AlterUserScramCredentialsResponseV0,
    )
    from kio.schema.api_versions.v0.response import ApiVersionsResponse as _ApiVersionsResponseV0
    from kio.schema.api_versions.v1.response import ApiVersionsResponse as _ApiVersionsResponseV1
    from kio.schema.api_versions.v2.response import ApiVersionsResponse as _ApiVersionsResponseV2
    from kio.schema.api_versions.v3.response import ApiVersionsResponse as _ApiVersionsResponseV3
    from kio.schema.api_versions.v4.response import ApiVersionsResponse as _ApiVersionsResponseV4
    from kio.schema.consumer_group_describe.v0.response import (
        ConsumerGroupDescribeResponse as _ConsumerGroupDescribeResponseV0,
    )
    from kio.schema.consumer_group_describe.v1.response import (
        ConsumerGroupDescribeResponse as _ConsumerGroupDescribeResponseV1,
    )
    from kio.schema.consumer_group_heartbeat.v0.response import (
        ConsumerGroupHeartbeatResponse as _ConsumerGroupHeartbeatResponseV0,
    )
    from kio.schema.consumer_group_heartbeat.v1.response import (
        ConsumerGroupHeartbeatResponse as _ConsumerGroupHeartbeatResponseV1,
    )
    from kio.schema.create_acls.v1.response import CreateAclsResponse as _CreateAclsResponseV1
    from kio.schema.create_acls.v2.response import CreateAclsResponse as _CreateAclsResponseV2
    from kio.schema.create_acls.v3.response import CreateAclsResponse as _CreateAclsResponseV3
    from kio.schema.create_partitions.v0.response import CreatePartitionsResponse as _CreatePartitionsResponseV0
    from kio.schema.create_partitions.v1.response import CreatePartitionsResponse as _CreatePartitionsResponseV1
    from kio.schema.create_partitions.v2.response import CreatePartitionsResponse as _CreatePartitionsResponseV2
    from kio.schema.create_partitions.v3.response import CreatePartitionsResponse as _CreatePartitionsResponseV3
    from kio.schema.create_topics.v2.response import CreateTopicsResponse as _CreateTopicsResponseV2
    from kio.schema.create_topics.v3.response import CreateTopicsResponse as _CreateTopicsResponseV3
    from kio.schema.create_topics.v4.response import CreateTopicsResponse as _CreateTopicsResponseV4
    from kio.schema.create_topics.v5.response import CreateTopicsResponse as _CreateTopicsResponseV5
    from kio.schema.create_topics.v6.response import CreateTopicsResponse as _CreateTopicsResponseV6
    from kio.schema.create_topics.v7.response import CreateTopicsResponse as _CreateTopicsResponseV7
    from kio.schema.delete_acls.v1.response import DeleteAclsResponse as _DeleteAclsResponseV1
    from kio.schema.delete_acls.v2.response import DeleteAclsResponse as _DeleteAclsResponseV2
    from kio.schema.delete_acls.v3.response import DeleteAclsResponse as _DeleteAclsResponseV3
    from kio.schema.delete_groups.v0.response import DeleteGroupsResponse as _DeleteGroupsResponseV0
    from kio.schema.delete_groups.v1.response import DeleteGroupsResponse as _DeleteGroupsResponseV1
    from kio.schema.delete_groups.v2.response import DeleteGroupsResponse as _DeleteGroupsResponseV2
    from kio.schema.delete_records.v0.response import DeleteRecordsResponse as _DeleteRecordsResponseV0
    from kio.schema.delete_records.v1.response import DeleteRecordsResponse as _DeleteRecordsResponseV1
    from kio.schema.delete_records.v2.response import DeleteRecordsResponse as _DeleteRecordsResponseV2
    from kio.schema.delete_share_group_offsets.v0.response import (
        DeleteShareGroupOffsetsResponse as _DeleteShareGroupOffsetsResponseV0,
    )
    from kio.schema.delete_share_group_state.v0.response import (
        DeleteShareGroupStateResponse as _DeleteShareGroupStateResponseV0,
    )
    from kio.schema.delete_topics.v1.response import DeleteTopicsResponse as _DeleteTopicsResponseV1
    from kio.schema.delete_topics.v2.response import DeleteTopicsResponse as _DeleteTopicsResponseV2
    from kio.schema.delete_topics.v3.response import DeleteTopicsResponse as _DeleteTopicsResponseV3
    from kio.schema.delete_topics.v4.response import DeleteTopicsResponse as _DeleteTopicsResponseV4
    from kio.schema.delete_topics.v5.response import DeleteTopicsResponse as _DeleteTopicsResponseV5
    from kio.schema.delete_topics.v6.response import DeleteTopicsResponse as _DeleteTopicsResponseV6
    from kio.schema.describe_acls.v1.response import DescribeAclsResponse as _DescribeAclsResponseV1
    from kio.schema.describe_acls.v2.response import DescribeAclsResponse as _DescribeAclsResponseV2
    from kio.schema.describe_acls.v3.response import DescribeAclsResponse as _DescribeAclsResponseV3
    from kio.schema.describe_client_quotas.v0.response import (
        DescribeClientQuotasResponse as _DescribeClientQuotasResponseV0,
    )
    from kio.schema.describe_client_quotas.v1.response import (
        DescribeClientQuotasResponse as _DescribeClientQuotasResponseV1,
    )
    from kio.schema.describe_cluster.v0.response import DescribeClusterResponse as _DescribeClusterResponseV0
    from kio.schema.describe_cluster.v1.response import DescribeClusterResponse as _DescribeClusterResponseV1
    from kio.schema.describe_cluster.v2.response import DescribeClusterResponse as _DescribeClusterResponseV2
    from kio.schema.describe_configs.v1.response import DescribeConfigsResponse as _DescribeConfigsResponseV1
    from kio.schema.describe_configs.v2.response import DescribeConfigsResponse as _DescribeConfigsResponseV2
    from kio.schema.describe_configs.v3.response import DescribeConfigsResponse as _DescribeConfigsResponseV3
    from kio.schema.describe_configs.v4.response import DescribeConfigsResponse as _DescribeConfigsResponseV4
    from kio.schema.describe_groups.v0.response import DescribeGroupsResponse as _DescribeGroupsResponseV0
    from kio.schema.describe_groups.v1.response import DescribeGroupsResponse as _DescribeGroupsResponseV1
    from kio.schema.describe_groups.v2.response import DescribeGroupsResponse as _DescribeGroupsResponseV2
    from kio.schema.describe_groups.v3.response import DescribeGroupsResponse as _DescribeGroupsResponseV3
    from kio.schema.describe_groups.v4.response import DescribeGroupsResponse as _DescribeGroupsResponseV4
    from kio.schema.describe_groups.v5.response import DescribeGroupsResponse as _DescribeGroupsResponseV5
    from kio.schema.describe_log_dirs.v1.response import DescribeLogDirsResponse as _DescribeLogDirsResponseV1
    from kio.schema.describe_log_dirs.v2.response import DescribeLogDirsResponse as _DescribeLogDirsResponseV2
    from kio.schema.describe_log_dirs.v3.response import DescribeLogDirsResponse as _DescribeLogDirsResponseV3
    from kio.schema.describe_log_dirs.v4.response import DescribeLogDirsResponse as _DescribeLogDirsResponseV4
    from kio.schema.describe_log_dirs.v5.response import DescribeLogDirsResponse as _DescribeLogDirsResponseV5
    from kio.schema.describe_producers.v0.response import DescribeProducersResponse as _DescribeProducersResponseV0
    from kio.schema.describe_share_group_offsets.v0.response import (
        DescribeShareGroupOffsetsResponse as _DescribeShareGroupOffsetsResponseV0,
    )
    from kio.schema.describe_share_group_offsets.v1.response import (
        DescribeShareGroupOffsetsResponse as _DescribeShareGroupOffsetsResponseV1,
    )
    from kio.schema.describe_user_scram_credentials.v0.response import (
        DescribeUserScramCredentialsResponse as _DescribeUserScramCredentialsResponseV0,
    )
    from kio.schema.elect_leaders.v0.response import ElectLeadersResponse as _ElectLeadersResponseV0
    from kio.schema.elect_leaders.v1.response import ElectLeadersResponse as _ElectLeadersResponseV1
    from kio.schema.elect_leaders.v2.response import ElectLeadersResponse as _ElectLeadersResponseV2
    from kio.schema.end_txn.v0.response import EndTxnResponse as _EndTxnResponseV0
    from kio.schema.end_txn.v1.response import EndTxnResponse as _EndTxnResponseV1
    from kio.schema.end_txn.v2.response import EndTxnResponse as _EndTxnResponseV2
    from kio.schema.end_txn.v3.response import EndTxnResponse as _EndTxnResponseV3
    from kio.schema.end_txn.v4.response import EndTxnResponse as _EndTxnResponseV4
    from kio.schema.end_txn.v5.response import EndTxnResponse as _EndTxnResponseV5
    from kio.schema.fetch.v4.response import FetchResponse as _FetchResponseV4
    from kio.schema.fetch.v5.response import FetchResponse as _FetchResponseV5
    from kio.schema.fetch.v6.response import FetchResponse as _FetchResponseV6
    from kio.schema.fetch.v7.response import FetchResponse as _FetchResponseV7
    from kio.schema.fetch.v8.response import FetchResponse as _FetchResponseV8
    from kio.schema.fetch.v9.response import FetchResponse as _FetchResponseV9
    from kio.schema.fetch.v10.response import FetchResponse as _FetchResponseV10
    from kio.schema.fetch.v11.response import FetchResponse as _FetchResponseV11
    from kio.schema.fetch.v12.response import FetchResponse as _FetchResponseV12
    from kio.schema.find_coordinator.v0.response import FindCoordinatorResponse as _FindCoordinatorResponseV0
    from kio.schema.find_coordinator.v1.response import FindCoordinatorResponse as _FindCoordinatorResponseV1
    from kio.schema.find_coordinator.v2.response import FindCoordinatorResponse as _FindCoordinatorResponseV2
    from kio.schema.find_coordinator.v3.response import FindCoordinatorResponse as _FindCoordinatorResponseV3
    from kio.schema.find_coordinator.v4.response import FindCoordinatorResponse as _FindCoordinatorResponseV4
    from kio.schema.heartbeat.v0.response import HeartbeatResponse as _HeartbeatResponseV0
    from kio.schema.heartbeat.v1.response import HeartbeatResponse as _HeartbeatResponseV1
    from kio.schema.heartbeat.v2.response import HeartbeatResponse as _HeartbeatResponseV2
    from kio.schema.heartbeat.v3.response import HeartbeatResponse as _HeartbeatResponseV3
    from kio.schema.heartbeat.v4.response import HeartbeatResponse as _HeartbeatResponseV4
    from kio.schema.incremental_alter_configs.v0.response import (
        IncrementalAlterConfigsResponse as _IncrementalAlterConfigsResponseV0,
    )
    from kio.schema.incremental_alter_configs.v1.response import (
        IncrementalAlterConfigsResponse as _IncrementalAlterConfigsResponseV1,
    )
    from kio.schema.init_producer_id.v0.response import InitProducerIdResponse as _InitProducerIdResponseV0
    from kio.schema.init_producer_id.v1.response import InitProducerIdResponse as _InitProducerIdResponseV1
    from kio.schema.init_producer_id.v2.response import InitProducerIdResponse as _InitProducerIdResponseV2
    from kio.schema.init_producer_id.v3.response import InitProducerIdResponse as _InitProducerIdResponseV3
    from kio.schema.init_producer_id.v4.response import InitProducerIdResponse as _InitProducerIdResponseV4
    from kio.schema.init_producer_id.v5.response import InitProducerIdResponse as _InitProducerIdResponseV5
    from kio.schema.init_producer_id.v6.response import InitProducerIdResponse as _InitProducerIdResponseV6
    from kio.schema.initialize_share_group_state.v0.response import (
        InitializeShareGroupStateResponse as _InitializeShareGroupStateResponseV0,
    )
    from kio.schema.join_group.v0.response import JoinGroupResponse as _JoinGroupResponseV0
    from kio.schema.join_group.v1.response import JoinGroupResponse as _JoinGroupResponseV1
    from kio.schema.join_group.v2.response import JoinGroupResponse as _JoinGroupResponseV2
    from kio.schema.join_group.v3.response import JoinGroupResponse as _JoinGroupResponseV3
    from kio.schema.join_group.v4.response import JoinGroupResponse as _JoinGroupResponseV4
    from kio.schema.join_group.v5.response import JoinGroupResponse as _JoinGroupResponseV5
    from kio.schema.join_group.v6.response import JoinGroupResponse as _JoinGroupResponseV6
    from kio.schema.join_group.v7.response import JoinGroupResponse as _JoinGroupResponseV7
    from kio.schema.join_group.v8.response import JoinGroupResponse as _JoinGroupResponseV8
    from kio.schema.join_group.v9.response import JoinGroupResponse as _JoinGroupResponseV9
    from kio.schema.leave_group.v0.response import LeaveGroupResponse as _LeaveGroupResponseV0
    from kio.schema.leave_group.v1.response import LeaveGroupResponse as _LeaveGroupResponseV1
    from kio.schema.leave_group.v2.response import LeaveGroupResponse as _LeaveGroupResponseV2
    from kio.schema.leave_group.v3.response import LeaveGroupResponse as _LeaveGroupResponseV3
    from kio.schema.leave_group.v4.response import LeaveGroupResponse as _LeaveGroupResponseV4
    from kio.schema.leave_group.v5.response import LeaveGroupResponse as _LeaveGroupResponseV5
    from kio.schema.list_groups.v0.response import ListGroupsResponse as _ListGroupsResponseV0
    from kio.schema.list_groups.v1.response import ListGroupsResponse as _ListGroupsResponseV1
    from kio.schema.list_groups.v2.response import ListGroupsResponse as _ListGroupsResponseV2
    from kio.schema.list_groups.v3.response import ListGroupsResponse as _ListGroupsResponseV3
    from kio.schema.list_groups.v4.response import ListGroupsResponse as _ListGroupsResponseV4
    from kio.schema.list_groups.v5.response import ListGroupsResponse as _ListGroupsResponseV5
    from kio.schema.list_offsets.v1.response import ListOffsetsResponse as _ListOffsetsResponseV1
    from kio.schema.list_offsets.v2.response import ListOffsetsResponse as _ListOffsetsResponseV2
    from kio.schema.list_offsets.v3.response import ListOffsetsResponse as _ListOffsetsResponseV3
    from kio.schema.list_offsets.v4.response import ListOffsetsResponse as _ListOffsetsResponseV4
    from kio.schema.list_offsets.v5.response import ListOffsetsResponse as _ListOffsetsResponseV5
    from kio.schema.list_offsets.v6.response import ListOffsetsResponse as _ListOffsetsResponseV6
    from kio.schema.list_offsets.v7.response import ListOffsetsResponse as _ListOffsetsResponseV7
    from kio.schema.list_partition_reassignments.v0.response import (
        ListPartitionReassignmentsResponse as _ListPartitionReassignmentsResponseV0,
    )
    from kio.schema.list_transactions.v0.response import ListTransactionsResponse as _ListTransactionsResponseV0
    from kio.schema.list_transactions.v1.response import ListTransactionsResponse as _ListTransactionsResponseV1
    from kio.schema.list_transactions.v2.response import ListTransactionsResponse as _ListTransactionsResponseV2
    from kio.schema.metadata.v0.response import MetadataResponse as _MetadataResponseV0
    from kio.schema.metadata.v1.response import MetadataResponse as _MetadataResponseV1
    from kio.schema.metadata.v2.response import MetadataResponse as _MetadataResponseV2
    from kio.schema.metadata.v3.response import MetadataResponse as _MetadataResponseV3
    from kio.schema.metadata.v4.response import MetadataResponse as _MetadataResponseV4
    from kio.schema.metadata.v5.response import MetadataResponse as _MetadataResponseV5
    from kio.schema.metadata.v6.response import MetadataResponse as _MetadataResponseV6
    from kio.schema.metadata.v7.response import MetadataResponse as _MetadataResponseV7
    from kio.schema.metadata.v8.response import MetadataResponse as _MetadataResponseV8
    from kio.schema.metadata.v9.response import MetadataResponse as _MetadataResponseV9
    from kio.schema.metadata.v10.response import MetadataResponse as _MetadataResponseV10
    from kio.schema.metadata.v11.response import MetadataResponse as _MetadataResponseV11
    from kio.schema.metadata.v12.response import MetadataResponse as _MetadataResponseV12
    from kio.schema.offset_commit.v2.response import OffsetCommitResponse as _OffsetCommitResponseV2
    from kio.schema.offset_commit.v3.response import OffsetCommitResponse as _OffsetCommitResponseV3
    from kio.schema.offset_commit.v4.response import OffsetCommitResponse as _OffsetCommitResponseV4
    from kio.schema.offset_commit.v5.response import OffsetCommitResponse as _OffsetCommitResponseV5
    from kio.schema.offset_commit.v6.response import OffsetCommitResponse as _OffsetCommitResponseV6
    from kio.schema.offset_commit.v7.response import OffsetCommitResponse as _OffsetCommitResponseV7
    from kio.schema.offset_commit.v8.response import OffsetCommitResponse as _OffsetCommitResponseV8
    from kio.schema.offset_commit.v9.response import OffsetCommitResponse as _OffsetCommitResponseV9
    from kio.schema.offset_delete.v0.response import OffsetDeleteResponse as _OffsetDeleteResponseV0
    from kio.schema.offset_fetch.v1.response import OffsetFetchResponse as _OffsetFetchResponseV1
    from kio.schema.offset_fetch.v2.response import OffsetFetchResponse as _OffsetFetchResponseV2
    from kio.schema.offset_fetch.v3.response import OffsetFetchResponse as _OffsetFetchResponseV3
    from kio.schema.offset_fetch.v4.response import OffsetFetchResponse as _OffsetFetchResponseV4
    from kio.schema.offset_fetch.v5.response import OffsetFetchResponse as _OffsetFetchResponseV5
    from kio.schema.offset_fetch.v6.response import OffsetFetchResponse as _OffsetFetchResponseV6
    from kio.schema.offset_fetch.v7.response import OffsetFetchResponse as _OffsetFetchResponseV7
    from kio.schema.offset_fetch.v8.response import OffsetFetchResponse as _OffsetFetchResponseV8
    from kio.schema.offset_fetch.v9.response import OffsetFetchResponse as _OffsetFetchResponseV9
    from kio.schema.offset_for_leader_epoch.v2.response import (
        OffsetForLeaderEpochResponse as _OffsetForLeaderEpochResponseV2,
    )
    from kio.schema.offset_for_leader_epoch.v3.response import (
        OffsetForLeaderEpochResponse as _OffsetForLeaderEpochResponseV3,
    )
    from kio.schema.offset_for_leader_epoch.v4.response import (
        OffsetForLeaderEpochResponse as _OffsetForLeaderEpochResponseV4,
    )
    from kio.schema.produce.v3.response import ProduceResponse as _ProduceResponseV3
    from kio.schema.produce.v4.response import ProduceResponse as _ProduceResponseV4
    from kio.schema.produce.v5.response import ProduceResponse as _ProduceResponseV5
    from kio.schema.produce.v6.response import ProduceResponse as _ProduceResponseV6
    from kio.schema.produce.v7.response import ProduceResponse as _ProduceResponseV7
    from kio.schema.produce.v8.response import ProduceResponse as _ProduceResponseV8
    from kio.schema.produce.v9.response import ProduceResponse as _ProduceResponseV9
    from kio.schema.produce.v10.response import ProduceResponse as _ProduceResponseV10
    from kio.schema.produce.v11.response import ProduceResponse as _ProduceResponseV11
    from kio.schema.produce.v12.response import ProduceResponse as _ProduceResponseV12
    from kio.schema.read_share_group_state.v0.response import (
        ReadShareGroupStateResponse as _ReadShareGroupStateResponseV0,
    )
    from kio.schema.read_share_group_state_summary.v0.response import (
        ReadShareGroupStateSummaryResponse as _ReadShareGroupStateSummaryResponseV0,
    )
    from kio.schema.read_share_group_state_summary.v1.response import (
        ReadShareGroupStateSummaryResponse as _ReadShareGroupStateSummaryResponseV1,
    )
    from kio.schema.sasl_authenticate.v0.response import SaslAuthenticateResponse as _SaslAuthenticateResponseV0
    from kio.schema.sasl_authenticate.v1.response import SaslAuthenticateResponse as _SaslAuthenticateResponseV1
    from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse as _SaslAuthenticateResponseV2
    from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse as _SaslHandshakeResponseV1
    from kio.schema.share_acknowledge.v1.response import ShareAcknowledgeResponse as _ShareAcknowledgeResponseV1
    from kio.schema.share_acknowledge.v2.response import ShareAcknowledgeResponse as _ShareAcknowledgeResponseV2
    from kio.schema.share_fetch.v1.response import ShareFetchResponse as _ShareFetchResponseV1
    from kio.schema.share_fetch.v2.response import ShareFetchResponse as _ShareFetchResponseV2
    from kio.schema.share_group_describe.v1.response import ShareGroupDescribeResponse as _ShareGroupDescribeResponseV1
    from kio.schema.share_group_heartbeat.v1.response import (
        ShareGroupHeartbeatResponse as _ShareGroupHeartbeatResponseV1,
    )
    from kio.schema.sync_group.v0.response import SyncGroupResponse as _SyncGroupResponseV0
    from kio.schema.sync_group.v1.response import SyncGroupResponse as _SyncGroupResponseV1
    from kio.schema.sync_group.v2.response import SyncGroupResponse as _SyncGroupResponseV2
    from kio.schema.sync_group.v3.response import SyncGroupResponse as _SyncGroupResponseV3
    from kio.schema.sync_group.v4.response import SyncGroupResponse as _SyncGroupResponseV4
    from kio.schema.sync_group.v5.response import SyncGroupResponse as _SyncGroupResponseV5
    from kio.schema.txn_offset_commit.v0.response import TxnOffsetCommitResponse as _TxnOffsetCommitResponseV0
    from kio.schema.txn_offset_commit.v1.response import TxnOffsetCommitResponse as _TxnOffsetCommitResponseV1
    from kio.schema.txn_offset_commit.v2.response import TxnOffsetCommitResponse as _TxnOffsetCommitResponseV2
    from kio.schema.txn_offset_commit.v3.response import TxnOffsetCommitResponse as _TxnOffsetCommitResponseV3
    from kio.schema.txn_offset_commit.v4.response import TxnOffsetCommitResponse as _TxnOffsetCommitResponseV4
    from kio.schema.txn_offset_commit.v5.response import TxnOffsetCommitResponse as _TxnOffsetCommitResponseV5
    from kio.schema.update_features.v0.response import UpdateFeaturesResponse as _UpdateFeaturesResponseV0
    from kio.schema.update_features.v1.response import UpdateFeaturesResponse as _UpdateFeaturesResponseV1
    from kio.schema.update_features.v2.response import UpdateFeaturesResponse as _UpdateFeaturesResponseV2
    from kio.schema.write_share_group_state.v0.response import (
        WriteShareGroupStateResponse as _WriteShareGroupStateResponseV0,
    )
    from kio.schema.write_share_group_state.v1.response import (
        WriteShareGroupStateResponse as _WriteShareGroupStateResponseV1,
    )
    from kio.schema.write_txn_markers.v1.response import WriteTxnMarkersResponse as _WriteTxnMarkersResponseV1
    from kio.schema.write_txn_markers.v2.response import WriteTxnMarkersResponse as _WriteTxnMarkersResponseV2

    from eoslog.protocol.describe_transactions_v0 import DescribeTransactionsResponse as _DescribeTransactionsResponseV0

    MetadataResponse = (
        _MetadataResponseV0 | _MetadataResponseV1 | _MetadataResponseV2 | _MetadataResponseV3 | _MetadataResponseV4
        | _MetadataResponseV5 | _MetadataResponseV6 | _MetadataResponseV7 | _MetadataResponseV8 | _MetadataResponseV9
        | _MetadataResponseV10 | _MetadataResponseV11 | _MetadataResponseV12
    )
    ProduceResponse = (
        _ProduceResponseV3 | _ProduceResponseV4 | _ProduceResponseV5 | _ProduceResponseV6 | _ProduceResponseV7
        | _ProduceResponseV8 | _ProduceResponseV9 | _ProduceResponseV10 | _ProduceResponseV11 | _ProduceResponseV12
    )
    FetchResponse = (
        _FetchResponseV4 | _FetchResponseV5 | _FetchResponseV6 | _FetchResponseV7 | _FetchResponseV8 | _FetchResponseV9
        | _FetchResponseV10 | _FetchResponseV11 | _FetchResponseV12
    )
    ListOffsetsResponse = (
        _ListOffsetsResponseV1 | _ListOffsetsResponseV2 | _ListOffsetsResponseV3 | _ListOffsetsResponseV4
        | _ListOffsetsResponseV5 | _ListOffsetsResponseV6 | _ListOffsetsResponseV7
    )
    InitProducerIdResponse = (
        _InitProducerIdResponseV0 | _InitProducerIdResponseV1 | _InitProducerIdResponseV2 | _InitProducerIdResponseV3
        | _InitProducerIdResponseV4 | _InitProducerIdResponseV5 | _InitProducerIdResponseV6
    )
    AddPartitionsToTxnResponse = (
        _AddPartitionsToTxnResponseV0 | _AddPartitionsToTxnResponseV1 | _AddPartitionsToTxnResponseV2
        | _AddPartitionsToTxnResponseV3 | _AddPartitionsToTxnResponseV4 | _AddPartitionsToTxnResponseV5
    )
    AddOffsetsToTxnResponse = (
        _AddOffsetsToTxnResponseV0 | _AddOffsetsToTxnResponseV1 | _AddOffsetsToTxnResponseV2
        | _AddOffsetsToTxnResponseV3 | _AddOffsetsToTxnResponseV4
    )
    EndTxnResponse = (
        _EndTxnResponseV0 | _EndTxnResponseV1 | _EndTxnResponseV2 | _EndTxnResponseV3 | _EndTxnResponseV4
        | _EndTxnResponseV5
    )
    WriteTxnMarkersResponse = _WriteTxnMarkersResponseV1 | _WriteTxnMarkersResponseV2
    TxnOffsetCommitResponse = (
        _TxnOffsetCommitResponseV0 | _TxnOffsetCommitResponseV1 | _TxnOffsetCommitResponseV2
        | _TxnOffsetCommitResponseV3 | _TxnOffsetCommitResponseV4 | _TxnOffsetCommitResponseV5
    )
    DescribeProducersResponse = _DescribeProducersResponseV0
    DescribeTransactionsResponse = _DescribeTransactionsResponseV0
    ListTransactionsResponse = _ListTransactionsResponseV0 | _ListTransactionsResponseV1 | _ListTransactionsResponseV2
    CreateTopicsResponse = (
        _CreateTopicsResponseV2 | _CreateTopicsResponseV3 | _CreateTopicsResponseV4 | _CreateTopicsResponseV5
        | _CreateTopicsResponseV6 | _CreateTopicsResponseV7
    )
    DeleteTopicsResponse = (
        _DeleteTopicsResponseV1 | _DeleteTopicsResponseV2 | _DeleteTopicsResponseV3 | _DeleteTopicsResponseV4
        | _DeleteTopicsResponseV5 | _DeleteTopicsResponseV6
    )
    CreatePartitionsResponse = (
        _CreatePartitionsResponseV0 | _CreatePartitionsResponseV1 | _CreatePartitionsResponseV2
        | _CreatePartitionsResponseV3
    )
    DescribeConfigsResponse = (
        _DescribeConfigsResponseV1 | _DescribeConfigsResponseV2 | _DescribeConfigsResponseV3
        | _DescribeConfigsResponseV4
    )
    AlterConfigsResponse = _AlterConfigsResponseV0 | _AlterConfigsResponseV1 | _AlterConfigsResponseV2
    IncrementalAlterConfigsResponse = _IncrementalAlterConfigsResponseV0 | _IncrementalAlterConfigsResponseV1
    DescribeClusterResponse = _DescribeClusterResponseV0 | _DescribeClusterResponseV1 | _DescribeClusterResponseV2
    ElectLeadersResponse = _ElectLeadersResponseV0 | _ElectLeadersResponseV1 | _ElectLeadersResponseV2
    FindCoordinatorResponse = (
        _FindCoordinatorResponseV0 | _FindCoordinatorResponseV1 | _FindCoordinatorResponseV2
        | _FindCoordinatorResponseV3 | _FindCoordinatorResponseV4
    )
    JoinGroupResponse = (
        _JoinGroupResponseV0 | _JoinGroupResponseV1 | _JoinGroupResponseV2 | _JoinGroupResponseV3 | _JoinGroupResponseV4
        | _JoinGroupResponseV5 | _JoinGroupResponseV6 | _JoinGroupResponseV7 | _JoinGroupResponseV8
        | _JoinGroupResponseV9
    )
    HeartbeatResponse = (
        _HeartbeatResponseV0 | _HeartbeatResponseV1 | _HeartbeatResponseV2 | _HeartbeatResponseV3 | _HeartbeatResponseV4
    )
    LeaveGroupResponse = (
        _LeaveGroupResponseV0 | _LeaveGroupResponseV1 | _LeaveGroupResponseV2 | _LeaveGroupResponseV3
        | _LeaveGroupResponseV4 | _LeaveGroupResponseV5
    )
    SyncGroupResponse = (
        _SyncGroupResponseV0 | _SyncGroupResponseV1 | _SyncGroupResponseV2 | _SyncGroupResponseV3 | _SyncGroupResponseV4
        | _SyncGroupResponseV5
    )
    DescribeGroupsResponse = (
        _DescribeGroupsResponseV0 | _DescribeGroupsResponseV1 | _DescribeGroupsResponseV2 | _DescribeGroupsResponseV3
        | _DescribeGroupsResponseV4 | _DescribeGroupsResponseV5
    )
    ListGroupsResponse = (
        _ListGroupsResponseV0 | _ListGroupsResponseV1 | _ListGroupsResponseV2 | _ListGroupsResponseV3
        | _ListGroupsResponseV4 | _ListGroupsResponseV5
    )
    DeleteGroupsResponse = _DeleteGroupsResponseV0 | _DeleteGroupsResponseV1 | _DeleteGroupsResponseV2
    OffsetCommitResponse = (
        _OffsetCommitResponseV2 | _OffsetCommitResponseV3 | _OffsetCommitResponseV4 | _OffsetCommitResponseV5
        | _OffsetCommitResponseV6 | _OffsetCommitResponseV7 | _OffsetCommitResponseV8 | _OffsetCommitResponseV9
    )
    OffsetFetchResponse = (
        _OffsetFetchResponseV1 | _OffsetFetchResponseV2 | _OffsetFetchResponseV3 | _OffsetFetchResponseV4
        | _OffsetFetchResponseV5 | _OffsetFetchResponseV6 | _OffsetFetchResponseV7 | _OffsetFetchResponseV8
        | _OffsetFetchResponseV9
    )
    OffsetDeleteResponse = _OffsetDeleteResponseV0
    DeleteRecordsResponse = _DeleteRecordsResponseV0 | _DeleteRecordsResponseV1 | _DeleteRecordsResponseV2
    OffsetForLeaderEpochResponse = (
        _OffsetForLeaderEpochResponseV2 | _OffsetForLeaderEpochResponseV3 | _OffsetForLeaderEpochResponseV4
    )
    ConsumerGroupHeartbeatResponse = _ConsumerGroupHeartbeatResponseV0 | _ConsumerGroupHeartbeatResponseV1
    ConsumerGroupDescribeResponse = _ConsumerGroupDescribeResponseV0 | _ConsumerGroupDescribeResponseV1
    SaslHandshakeResponse = _SaslHandshakeResponseV1
    SaslAuthenticateResponse = _SaslAuthenticateResponseV0 | _SaslAuthenticateResponseV1 | _SaslAuthenticateResponseV2
    DescribeAclsResponse = _DescribeAclsResponseV1 | _DescribeAclsResponseV2 | _DescribeAclsResponseV3
    CreateAclsResponse = _CreateAclsResponseV1 | _CreateAclsResponseV2 | _CreateAclsResponseV3
    DeleteAclsResponse = _DeleteAclsResponseV1 | _DeleteAclsResponseV2 | _DeleteAclsResponseV3
    DescribeUserScramCredentialsResponse = _DescribeUserScramCredentialsResponseV0
    AlterUserScramCredentialsResponse = _AlterUserScramCredentialsResponseV0
    ShareGroupHeartbeatResponse = _ShareGroupHeartbeatResponseV1
    ShareGroupDescribeResponse = _ShareGroupDescribeResponseV1
    DescribeShareGroupOffsetsResponse = _DescribeShareGroupOffsetsResponseV0 | _DescribeShareGroupOffsetsResponseV1
    AlterShareGroupOffsetsResponse = _AlterShareGroupOffsetsResponseV0
    DeleteShareGroupOffsetsResponse = _DeleteShareGroupOffsetsResponseV0
    ShareFetchResponse = _ShareFetchResponseV1 | _ShareFetchResponseV2
    ShareAcknowledgeResponse = _ShareAcknowledgeResponseV1 | _ShareAcknowledgeResponseV2
    InitializeShareGroupStateResponse = _InitializeShareGroupStateResponseV0
    ReadShareGroupStateResponse = _ReadShareGroupStateResponseV0
    WriteShareGroupStateResponse = _WriteShareGroupStateResponseV0 | _WriteShareGroupStateResponseV1
    DeleteShareGroupStateResponse = _DeleteShareGroupStateResponseV0
    ReadShareGroupStateSummaryResponse = _ReadShareGroupStateSummaryResponseV0 | _ReadShareGroupStateSummaryResponseV1
    UpdateFeaturesResponse = _UpdateFeaturesResponseV0 | _UpdateFeaturesResponseV1 | _UpdateFeaturesResponseV2
    AlterPartitionReassignmentsResponse = (
        _AlterPartitionReassignmentsResponseV0 | _AlterPartitionReassignmentsResponseV1
    )
    ListPartitionReassignmentsResponse = _ListPartitionReassignmentsResponseV0
    DescribeLogDirsResponse = (
        _DescribeLogDirsResponseV1 | _DescribeLogDirsResponseV2 | _DescribeLogDirsResponseV3
        | _DescribeLogDirsResponseV4 | _DescribeLogDirsResponseV5
    )
    AlterReplicaLogDirsResponse = _AlterReplicaLogDirsResponseV1 | _AlterReplicaLogDirsResponseV2
    DescribeClientQuotasResponse = _DescribeClientQuotasResponseV0 | _DescribeClientQuotasResponseV1
    AlterClientQuotasResponse = _AlterClientQuotasResponseV0 | _AlterClientQuotasResponseV1
    ApiVersionsResponse = (
        _ApiVersionsResponseV0 | _ApiVersionsResponseV1 | _ApiVersionsResponseV2 | _ApiVersionsResponseV3
        | _ApiVersionsResponseV4
    )

"""kio's request classes of every version a handler serves, as one type per API (generated
from the handler registry's version ranges by ``scripts/typegen.py``): a handler typed with
it has each field it reads checked against every version (a field some versions lack is read with
``getattr`` and a default). Types only: handlers import them under ``TYPE_CHECKING``, so the
broker does not load every version's module at start-up."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kio.schema.add_offsets_to_txn.v0.request import AddOffsetsToTxnRequest as _AddOffsetsToTxnRequestV0
    from kio.schema.add_offsets_to_txn.v1.request import AddOffsetsToTxnRequest as _AddOffsetsToTxnRequestV1
    from kio.schema.add_offsets_to_txn.v2.request import AddOffsetsToTxnRequest as _AddOffsetsToTxnRequestV2
    from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest as _AddOffsetsToTxnRequestV3
    from kio.schema.add_offsets_to_txn.v4.request import AddOffsetsToTxnRequest as _AddOffsetsToTxnRequestV4
    from kio.schema.add_partitions_to_txn.v0.request import AddPartitionsToTxnRequest as _AddPartitionsToTxnRequestV0
    from kio.schema.add_partitions_to_txn.v1.request import AddPartitionsToTxnRequest as _AddPartitionsToTxnRequestV1
    from kio.schema.add_partitions_to_txn.v2.request import AddPartitionsToTxnRequest as _AddPartitionsToTxnRequestV2
    from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest as _AddPartitionsToTxnRequestV3
    from kio.schema.add_partitions_to_txn.v4.request import AddPartitionsToTxnRequest as _AddPartitionsToTxnRequestV4
    from kio.schema.add_partitions_to_txn.v5.request import AddPartitionsToTxnRequest as _AddPartitionsToTxnRequestV5
    from kio.schema.alter_client_quotas.v0.request import AlterClientQuotasRequest as _AlterClientQuotasRequestV0
    from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest as _AlterClientQuotasRequestV1
    from kio.schema.alter_configs.v0.request import AlterConfigsRequest as _AlterConfigsRequestV0
    from kio.schema.alter_configs.v1.request import AlterConfigsRequest as _AlterConfigsRequestV1
    from kio.schema.alter_configs.v2.request import AlterConfigsRequest as _AlterConfigsRequestV2
    from kio.schema.alter_partition_reassignments.v0.request import (
        AlterPartitionReassignmentsRequest as _AlterPartitionReassignmentsRequestV0,
    )
    from kio.schema.alter_partition_reassignments.v1.request import (
        AlterPartitionReassignmentsRequest as _AlterPartitionReassignmentsRequestV1,
    )
    from kio.schema.alter_replica_log_dirs.v1.request import AlterReplicaLogDirsRequest as _AlterReplicaLogDirsRequestV1
    from kio.schema.alter_replica_log_dirs.v2.request import AlterReplicaLogDirsRequest as _AlterReplicaLogDirsRequestV2
    from kio.schema.alter_share_group_offsets.v0.request import (
        AlterShareGroupOffsetsRequest as _AlterShareGroupOffsetsRequestV0,
    )
    from kio.schema.alter_user_scram_credentials.v0.request import (
        AlterUserScramCredentialsRequest as _AlterUserScramCredentialsRequestV0,
    )
    from kio.schema.api_versions.v0.request import ApiVersionsRequest as _ApiVersionsRequestV0
    from kio.schema.api_versions.v1.request import ApiVersionsRequest as _ApiVersionsRequestV1
    from kio.schema.api_versions.v2.request import ApiVersionsRequest as _ApiVersionsRequestV2
    from kio.schema.api_versions.v3.request import ApiVersionsRequest as _ApiVersionsRequestV3
    from kio.schema.api_versions.v4.request import ApiVersionsRequest as _ApiVersionsRequestV4
    from kio.schema.consumer_group_describe.v0.request import (
        ConsumerGroupDescribeRequest as _ConsumerGroupDescribeRequestV0,
    )
    from kio.schema.consumer_group_describe.v1.request import (
        ConsumerGroupDescribeRequest as _ConsumerGroupDescribeRequestV1,
    )
    from kio.schema.consumer_group_heartbeat.v0.request import (
        ConsumerGroupHeartbeatRequest as _ConsumerGroupHeartbeatRequestV0,
    )
    from kio.schema.consumer_group_heartbeat.v1.request import (
        ConsumerGroupHeartbeatRequest as _ConsumerGroupHeartbeatRequestV1,
    )
    from kio.schema.create_acls.v1.request import CreateAclsRequest as _CreateAclsRequestV1
    from kio.schema.create_acls.v2.request import CreateAclsRequest as _CreateAclsRequestV2
    from kio.schema.create_acls.v3.request import CreateAclsRequest as _CreateAclsRequestV3
    from kio.schema.create_partitions.v0.request import CreatePartitionsRequest as _CreatePartitionsRequestV0
    from kio.schema.create_partitions.v1.request import CreatePartitionsRequest as _CreatePartitionsRequestV1
    from kio.schema.create_partitions.v2.request import CreatePartitionsRequest as _CreatePartitionsRequestV2
    from kio.schema.create_partitions.v3.request import CreatePartitionsRequest as _CreatePartitionsRequestV3
    from kio.schema.create_topics.v2.request import CreateTopicsRequest as _CreateTopicsRequestV2
    from kio.schema.create_topics.v3.request import CreateTopicsRequest as _CreateTopicsRequestV3
    from kio.schema.create_topics.v4.request import CreateTopicsRequest as _CreateTopicsRequestV4
    from kio.schema.create_topics.v5.request import CreateTopicsRequest as _CreateTopicsRequestV5
    from kio.schema.create_topics.v6.request import CreateTopicsRequest as _CreateTopicsRequestV6
    from kio.schema.create_topics.v7.request import CreateTopicsRequest as _CreateTopicsRequestV7
    from kio.schema.delete_acls.v1.request import DeleteAclsRequest as _DeleteAclsRequestV1
    from kio.schema.delete_acls.v2.request import DeleteAclsRequest as _DeleteAclsRequestV2
    from kio.schema.delete_acls.v3.request import DeleteAclsRequest as _DeleteAclsRequestV3
    from kio.schema.delete_groups.v0.request import DeleteGroupsRequest as _DeleteGroupsRequestV0
    from kio.schema.delete_groups.v1.request import DeleteGroupsRequest as _DeleteGroupsRequestV1
    from kio.schema.delete_groups.v2.request import DeleteGroupsRequest as _DeleteGroupsRequestV2
    from kio.schema.delete_records.v0.request import DeleteRecordsRequest as _DeleteRecordsRequestV0
    from kio.schema.delete_records.v1.request import DeleteRecordsRequest as _DeleteRecordsRequestV1
    from kio.schema.delete_records.v2.request import DeleteRecordsRequest as _DeleteRecordsRequestV2
    from kio.schema.delete_share_group_offsets.v0.request import (
        DeleteShareGroupOffsetsRequest as _DeleteShareGroupOffsetsRequestV0,
    )
    from kio.schema.delete_share_group_state.v0.request import (
        DeleteShareGroupStateRequest as _DeleteShareGroupStateRequestV0,
    )
    from kio.schema.delete_topics.v1.request import DeleteTopicsRequest as _DeleteTopicsRequestV1
    from kio.schema.delete_topics.v2.request import DeleteTopicsRequest as _DeleteTopicsRequestV2
    from kio.schema.delete_topics.v3.request import DeleteTopicsRequest as _DeleteTopicsRequestV3
    from kio.schema.delete_topics.v4.request import DeleteTopicsRequest as _DeleteTopicsRequestV4
    from kio.schema.delete_topics.v5.request import DeleteTopicsRequest as _DeleteTopicsRequestV5
    from kio.schema.delete_topics.v6.request import DeleteTopicsRequest as _DeleteTopicsRequestV6
    from kio.schema.describe_acls.v1.request import DescribeAclsRequest as _DescribeAclsRequestV1
    from kio.schema.describe_acls.v2.request import DescribeAclsRequest as _DescribeAclsRequestV2
    from kio.schema.describe_acls.v3.request import DescribeAclsRequest as _DescribeAclsRequestV3
    from kio.schema.describe_client_quotas.v0.request import (
        DescribeClientQuotasRequest as _DescribeClientQuotasRequestV0,
    )
    from kio.schema.describe_client_quotas.v1.request import (
        DescribeClientQuotasRequest as _DescribeClientQuotasRequestV1,
    )
    from kio.schema.describe_cluster.v0.request import DescribeClusterRequest as _DescribeClusterRequestV0
    from kio.schema.describe_cluster.v1.request import DescribeClusterRequest as _DescribeClusterRequestV1
    from kio.schema.describe_cluster.v2.request import DescribeClusterRequest as _DescribeClusterRequestV2
    from kio.schema.describe_configs.v1.request import DescribeConfigsRequest as _DescribeConfigsRequestV1
    from kio.schema.describe_configs.v2.request import DescribeConfigsRequest as _DescribeConfigsRequestV2
    from kio.schema.describe_configs.v3.request import DescribeConfigsRequest as _DescribeConfigsRequestV3
    from kio.schema.describe_configs.v4.request import DescribeConfigsRequest as _DescribeConfigsRequestV4
    from kio.schema.describe_groups.v0.request import DescribeGroupsRequest as _DescribeGroupsRequestV0
    from kio.schema.describe_groups.v1.request import DescribeGroupsRequest as _DescribeGroupsRequestV1
    from kio.schema.describe_groups.v2.request import DescribeGroupsRequest as _DescribeGroupsRequestV2
    from kio.schema.describe_groups.v3.request import DescribeGroupsRequest as _DescribeGroupsRequestV3
    from kio.schema.describe_groups.v4.request import DescribeGroupsRequest as _DescribeGroupsRequestV4
    from kio.schema.describe_groups.v5.request import DescribeGroupsRequest as _DescribeGroupsRequestV5
    from kio.schema.describe_log_dirs.v1.request import DescribeLogDirsRequest as _DescribeLogDirsRequestV1
    from kio.schema.describe_log_dirs.v2.request import DescribeLogDirsRequest as _DescribeLogDirsRequestV2
    from kio.schema.describe_log_dirs.v3.request import DescribeLogDirsRequest as _DescribeLogDirsRequestV3
    from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest as _DescribeLogDirsRequestV4
    from kio.schema.describe_log_dirs.v5.request import DescribeLogDirsRequest as _DescribeLogDirsRequestV5
    from kio.schema.describe_producers.v0.request import DescribeProducersRequest as _DescribeProducersRequestV0
    from kio.schema.describe_share_group_offsets.v0.request import (
        DescribeShareGroupOffsetsRequest as _DescribeShareGroupOffsetsRequestV0,
    )
    from kio.schema.describe_share_group_offsets.v1.request import (
        DescribeShareGroupOffsetsRequest as _DescribeShareGroupOffsetsRequestV1,
    )
    from kio.schema.describe_transactions.v0.request import (
        DescribeTransactionsRequest as _DescribeTransactionsRequestV0,
    )
    from kio.schema.describe_user_scram_credentials.v0.request import (
        DescribeUserScramCredentialsRequest as _DescribeUserScramCredentialsRequestV0,
    )
    from kio.schema.elect_leaders.v0.request import ElectLeadersRequest as _ElectLeadersRequestV0
    from kio.schema.elect_leaders.v1.request import ElectLeadersRequest as _ElectLeadersRequestV1
    from kio.schema.elect_leaders.v2.request import ElectLeadersRequest as _ElectLeadersRequestV2
    from kio.schema.end_txn.v0.request import EndTxnRequest as _EndTxnRequestV0
    from kio.schema.end_txn.v1.request import EndTxnRequest as _EndTxnRequestV1
    from kio.schema.end_txn.v2.request import EndTxnRequest as _EndTxnRequestV2
    from kio.schema.end_txn.v3.request import EndTxnRequest as _EndTxnRequestV3
    from kio.schema.end_txn.v4.request import EndTxnRequest as _EndTxnRequestV4
    from kio.schema.end_txn.v5.request import EndTxnRequest as _EndTxnRequestV5
    from kio.schema.fetch.v4.request import FetchRequest as _FetchRequestV4
    from kio.schema.fetch.v5.request import FetchRequest as _FetchRequestV5
    from kio.schema.fetch.v6.request import FetchRequest as _FetchRequestV6
    from kio.schema.fetch.v7.request import FetchRequest as _FetchRequestV7
    from kio.schema.fetch.v8.request import FetchRequest as _FetchRequestV8
    from kio.schema.fetch.v9.request import FetchRequest as _FetchRequestV9
    from kio.schema.fetch.v10.request import FetchRequest as _FetchRequestV10
    from kio.schema.fetch.v11.request import FetchRequest as _FetchRequestV11
    from kio.schema.fetch.v12.request import FetchRequest as _FetchRequestV12
    from kio.schema.find_coordinator.v0.request import FindCoordinatorRequest as _FindCoordinatorRequestV0
    from kio.schema.find_coordinator.v1.request import FindCoordinatorRequest as _FindCoordinatorRequestV1
    from kio.schema.find_coordinator.v2.request import FindCoordinatorRequest as _FindCoordinatorRequestV2
    from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest as _FindCoordinatorRequestV3
    from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest as _FindCoordinatorRequestV4
    from kio.schema.heartbeat.v0.request import HeartbeatRequest as _HeartbeatRequestV0
    from kio.schema.heartbeat.v1.request import HeartbeatRequest as _HeartbeatRequestV1
    from kio.schema.heartbeat.v2.request import HeartbeatRequest as _HeartbeatRequestV2
    from kio.schema.heartbeat.v3.request import HeartbeatRequest as _HeartbeatRequestV3
    from kio.schema.heartbeat.v4.request import HeartbeatRequest as _HeartbeatRequestV4
    from kio.schema.incremental_alter_configs.v0.request import (
        IncrementalAlterConfigsRequest as _IncrementalAlterConfigsRequestV0,
    )
    from kio.schema.incremental_alter_configs.v1.request import (
        IncrementalAlterConfigsRequest as _IncrementalAlterConfigsRequestV1,
    )
    from kio.schema.init_producer_id.v0.request import InitProducerIdRequest as _InitProducerIdRequestV0
    from kio.schema.init_producer_id.v1.request import InitProducerIdRequest as _InitProducerIdRequestV1
    from kio.schema.init_producer_id.v2.request import InitProducerIdRequest as _InitProducerIdRequestV2
    from kio.schema.init_producer_id.v3.request import InitProducerIdRequest as _InitProducerIdRequestV3
    from kio.schema.init_producer_id.v4.request import InitProducerIdRequest as _InitProducerIdRequestV4
    from kio.schema.init_producer_id.v5.request import InitProducerIdRequest as _InitProducerIdRequestV5
    from kio.schema.init_producer_id.v6.request import InitProducerIdRequest as _InitProducerIdRequestV6
    from kio.schema.initialize_share_group_state.v0.request import (
        InitializeShareGroupStateRequest as _InitializeShareGroupStateRequestV0,
    )
    from kio.schema.join_group.v0.request import JoinGroupRequest as _JoinGroupRequestV0
    from kio.schema.join_group.v1.request import JoinGroupRequest as _JoinGroupRequestV1
    from kio.schema.join_group.v2.request import JoinGroupRequest as _JoinGroupRequestV2
    from kio.schema.join_group.v3.request import JoinGroupRequest as _JoinGroupRequestV3
    from kio.schema.join_group.v4.request import JoinGroupRequest as _JoinGroupRequestV4
    from kio.schema.join_group.v5.request import JoinGroupRequest as _JoinGroupRequestV5
    from kio.schema.join_group.v6.request import JoinGroupRequest as _JoinGroupRequestV6
    from kio.schema.join_group.v7.request import JoinGroupRequest as _JoinGroupRequestV7
    from kio.schema.join_group.v8.request import JoinGroupRequest as _JoinGroupRequestV8
    from kio.schema.join_group.v9.request import JoinGroupRequest as _JoinGroupRequestV9
    from kio.schema.leave_group.v0.request import LeaveGroupRequest as _LeaveGroupRequestV0
    from kio.schema.leave_group.v1.request import LeaveGroupRequest as _LeaveGroupRequestV1
    from kio.schema.leave_group.v2.request import LeaveGroupRequest as _LeaveGroupRequestV2
    from kio.schema.leave_group.v3.request import LeaveGroupRequest as _LeaveGroupRequestV3
    from kio.schema.leave_group.v4.request import LeaveGroupRequest as _LeaveGroupRequestV4
    from kio.schema.leave_group.v5.request import LeaveGroupRequest as _LeaveGroupRequestV5
    from kio.schema.list_groups.v0.request import ListGroupsRequest as _ListGroupsRequestV0
    from kio.schema.list_groups.v1.request import ListGroupsRequest as _ListGroupsRequestV1
    from kio.schema.list_groups.v2.request import ListGroupsRequest as _ListGroupsRequestV2
    from kio.schema.list_groups.v3.request import ListGroupsRequest as _ListGroupsRequestV3
    from kio.schema.list_groups.v4.request import ListGroupsRequest as _ListGroupsRequestV4
    from kio.schema.list_groups.v5.request import ListGroupsRequest as _ListGroupsRequestV5
    from kio.schema.list_offsets.v1.request import ListOffsetsRequest as _ListOffsetsRequestV1
    from kio.schema.list_offsets.v2.request import ListOffsetsRequest as _ListOffsetsRequestV2
    from kio.schema.list_offsets.v3.request import ListOffsetsRequest as _ListOffsetsRequestV3
    from kio.schema.list_offsets.v4.request import ListOffsetsRequest as _ListOffsetsRequestV4
    from kio.schema.list_offsets.v5.request import ListOffsetsRequest as _ListOffsetsRequestV5
    from kio.schema.list_offsets.v6.request import ListOffsetsRequest as _ListOffsetsRequestV6
    from kio.schema.list_offsets.v7.request import ListOffsetsRequest as _ListOffsetsRequestV7
    from kio.schema.list_partition_reassignments.v0.request import (
        ListPartitionReassignmentsRequest as _ListPartitionReassignmentsRequestV0,
    )
    from kio.schema.list_transactions.v0.request import ListTransactionsRequest as _ListTransactionsRequestV0
    from kio.schema.list_transactions.v1.request import ListTransactionsRequest as _ListTransactionsRequestV1
    from kio.schema.list_transactions.v2.request import ListTransactionsRequest as _ListTransactionsRequestV2
    from kio.schema.metadata.v0.request import MetadataRequest as _MetadataRequestV0
    from kio.schema.metadata.v1.request import MetadataRequest as _MetadataRequestV1
    from kio.schema.metadata.v2.request import MetadataRequest as _MetadataRequestV2
    from kio.schema.metadata.v3.request import MetadataRequest as _MetadataRequestV3
    from kio.schema.metadata.v4.request import MetadataRequest as _MetadataRequestV4
    from kio.schema.metadata.v5.request import MetadataRequest as _MetadataRequestV5
    from kio.schema.metadata.v6.request import MetadataRequest as _MetadataRequestV6
    from kio.schema.metadata.v7.request import MetadataRequest as _MetadataRequestV7
    from kio.schema.metadata.v8.request import MetadataRequest as _MetadataRequestV8
    from kio.schema.metadata.v9.request import MetadataRequest as _MetadataRequestV9
    from kio.schema.metadata.v10.request import MetadataRequest as _MetadataRequestV10
    from kio.schema.metadata.v11.request import MetadataRequest as _MetadataRequestV11
    from kio.schema.metadata.v12.request import MetadataRequest as _MetadataRequestV12
    from kio.schema.offset_commit.v2.request import OffsetCommitRequest as _OffsetCommitRequestV2
    from kio.schema.offset_commit.v3.request import OffsetCommitRequest as _OffsetCommitRequestV3
    from kio.schema.offset_commit.v4.request import OffsetCommitRequest as _OffsetCommitRequestV4
    from kio.schema.offset_commit.v5.request import OffsetCommitRequest as _OffsetCommitRequestV5
    from kio.schema.offset_commit.v6.request import OffsetCommitRequest as _OffsetCommitRequestV6
    from kio.schema.offset_commit.v7.request import OffsetCommitRequest as _OffsetCommitRequestV7
    from kio.schema.offset_commit.v8.request import OffsetCommitRequest as _OffsetCommitRequestV8
    from kio.schema.offset_commit.v9.request import OffsetCommitRequest as _OffsetCommitRequestV9
    from kio.schema.offset_delete.v0.request import OffsetDeleteRequest as _OffsetDeleteRequestV0
    from kio.schema.offset_fetch.v1.request import OffsetFetchRequest as _OffsetFetchRequestV1
    from kio.schema.offset_fetch.v2.request import OffsetFetchRequest as _OffsetFetchRequestV2
    from kio.schema.offset_fetch.v3.request import OffsetFetchRequest as _OffsetFetchRequestV3
    from kio.schema.offset_fetch.v4.request import OffsetFetchRequest as _OffsetFetchRequestV4
    from kio.schema.offset_fetch.v5.request import OffsetFetchRequest as _OffsetFetchRequestV5
    from kio.schema.offset_fetch.v6.request import OffsetFetchRequest as _OffsetFetchRequestV6
    from kio.schema.offset_fetch.v7.request import OffsetFetchRequest as _OffsetFetchRequestV7
    from kio.schema.offset_fetch.v8.request import OffsetFetchRequest as _OffsetFetchRequestV8
    from kio.schema.offset_fetch.v9.request import OffsetFetchRequest as _OffsetFetchRequestV9
    from kio.schema.offset_for_leader_epoch.v2.request import (
        OffsetForLeaderEpochRequest as _OffsetForLeaderEpochRequestV2,
    )
    from kio.schema.offset_for_leader_epoch.v3.request import (
        OffsetForLeaderEpochRequest as _OffsetForLeaderEpochRequestV3,
    )
    from kio.schema.offset_for_leader_epoch.v4.request import (
        OffsetForLeaderEpochRequest as _OffsetForLeaderEpochRequestV4,
    )
    from kio.schema.produce.v3.request import ProduceRequest as _ProduceRequestV3
    from kio.schema.produce.v4.request import ProduceRequest as _ProduceRequestV4
    from kio.schema.produce.v5.request import ProduceRequest as _ProduceRequestV5
    from kio.schema.produce.v6.request import ProduceRequest as _ProduceRequestV6
    from kio.schema.produce.v7.request import ProduceRequest as _ProduceRequestV7
    from kio.schema.produce.v8.request import ProduceRequest as _ProduceRequestV8
    from kio.schema.produce.v9.request import ProduceRequest as _ProduceRequestV9
    from kio.schema.produce.v10.request import ProduceRequest as _ProduceRequestV10
    from kio.schema.produce.v11.request import ProduceRequest as _ProduceRequestV11
    from kio.schema.produce.v12.request import ProduceRequest as _ProduceRequestV12
    from kio.schema.read_share_group_state.v0.request import ReadShareGroupStateRequest as _ReadShareGroupStateRequestV0
    from kio.schema.read_share_group_state_summary.v0.request import (
        ReadShareGroupStateSummaryRequest as _ReadShareGroupStateSummaryRequestV0,
    )
    from kio.schema.read_share_group_state_summary.v1.request import (
        ReadShareGroupStateSummaryRequest as _ReadShareGroupStateSummaryRequestV1,
    )
    from kio.schema.sasl_authenticate.v0.request import SaslAuthenticateRequest as _SaslAuthenticateRequestV0
    from kio.schema.sasl_authenticate.v1.request import SaslAuthenticateRequest as _SaslAuthenticateRequestV1
    from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest as _SaslAuthenticateRequestV2
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest as _SaslHandshakeRequestV1
    from kio.schema.share_fetch.v1.request import ShareFetchRequest as _ShareFetchRequestV1
    from kio.schema.share_fetch.v2.request import ShareFetchRequest as _ShareFetchRequestV2
    from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest as _ShareGroupDescribeRequestV1
    from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest as _ShareGroupHeartbeatRequestV1
    from kio.schema.sync_group.v0.request import SyncGroupRequest as _SyncGroupRequestV0
    from kio.schema.sync_group.v1.request import SyncGroupRequest as _SyncGroupRequestV1
    from kio.schema.sync_group.v2.request import SyncGroupRequest as _SyncGroupRequestV2
    from kio.schema.sync_group.v3.request import SyncGroupRequest as _SyncGroupRequestV3
    from kio.schema.sync_group.v4.request import SyncGroupRequest as _SyncGroupRequestV4
    from kio.schema.sync_group.v5.request import SyncGroupRequest as _SyncGroupRequestV5
    from kio.schema.txn_offset_commit.v0.request import TxnOffsetCommitRequest as _TxnOffsetCommitRequestV0
    from kio.schema.txn_offset_commit.v1.request import TxnOffsetCommitRequest as _TxnOffsetCommitRequestV1
    from kio.schema.txn_offset_commit.v2.request import TxnOffsetCommitRequest as _TxnOffsetCommitRequestV2
    from kio.schema.txn_offset_commit.v3.request import TxnOffsetCommitRequest as _TxnOffsetCommitRequestV3
    from kio.schema.txn_offset_commit.v4.request import TxnOffsetCommitRequest as _TxnOffsetCommitRequestV4
    from kio.schema.txn_offset_commit.v5.request import TxnOffsetCommitRequest as _TxnOffsetCommitRequestV5
    from kio.schema.update_features.v0.request import UpdateFeaturesRequest as _UpdateFeaturesRequestV0
    from kio.schema.update_features.v1.request import UpdateFeaturesRequest as _UpdateFeaturesRequestV1
    from kio.schema.update_features.v2.request import UpdateFeaturesRequest as _UpdateFeaturesRequestV2
    from kio.schema.write_share_group_state.v0.request import (
        WriteShareGroupStateRequest as _WriteShareGroupStateRequestV0,
    )
    from kio.schema.write_txn_markers.v1.request import WriteTxnMarkersRequest as _WriteTxnMarkersRequestV1
    from kio.schema.write_txn_markers.v2.request import WriteTxnMarkersRequest as _WriteTxnMarkersRequestV2

    from eoslog.protocol.share_transactions import ShareAcknowledgeRequestV1 as _ShareAcknowledgeRequestV1
    from eoslog.protocol.share_transactions import ShareAcknowledgeRequestV2 as _ShareAcknowledgeRequestV2
    from eoslog.protocol.share_transactions import WriteShareGroupStateRequestV1 as _WriteShareGroupStateRequestV1

    MetadataRequest = (
        _MetadataRequestV0 | _MetadataRequestV1 | _MetadataRequestV2 | _MetadataRequestV3 | _MetadataRequestV4
        | _MetadataRequestV5 | _MetadataRequestV6 | _MetadataRequestV7 | _MetadataRequestV8 | _MetadataRequestV9
        | _MetadataRequestV10 | _MetadataRequestV11 | _MetadataRequestV12
    )
    ProduceRequest = (
        _ProduceRequestV3 | _ProduceRequestV4 | _ProduceRequestV5 | _ProduceRequestV6 | _ProduceRequestV7
        | _ProduceRequestV8 | _ProduceRequestV9 | _ProduceRequestV10 | _ProduceRequestV11 | _ProduceRequestV12
    )
    FetchRequest = (
        _FetchRequestV4 | _FetchRequestV5 | _FetchRequestV6 | _FetchRequestV7 | _FetchRequestV8 | _FetchRequestV9
        | _FetchRequestV10 | _FetchRequestV11 | _FetchRequestV12
    )
    ListOffsetsRequest = (
        _ListOffsetsRequestV1 | _ListOffsetsRequestV2 | _ListOffsetsRequestV3 | _ListOffsetsRequestV4
        | _ListOffsetsRequestV5 | _ListOffsetsRequestV6 | _ListOffsetsRequestV7
    )
    InitProducerIdRequest = (
        _InitProducerIdRequestV0 | _InitProducerIdRequestV1 | _InitProducerIdRequestV2 | _InitProducerIdRequestV3
        | _InitProducerIdRequestV4 | _InitProducerIdRequestV5 | _InitProducerIdRequestV6
    )
    AddPartitionsToTxnRequest = (
        _AddPartitionsToTxnRequestV0 | _AddPartitionsToTxnRequestV1 | _AddPartitionsToTxnRequestV2
        | _AddPartitionsToTxnRequestV3 | _AddPartitionsToTxnRequestV4 | _AddPartitionsToTxnRequestV5
    )
    AddOffsetsToTxnRequest = (
        _AddOffsetsToTxnRequestV0 | _AddOffsetsToTxnRequestV1 | _AddOffsetsToTxnRequestV2 | _AddOffsetsToTxnRequestV3
        | _AddOffsetsToTxnRequestV4
    )
    EndTxnRequest = (
        _EndTxnRequestV0 | _EndTxnRequestV1 | _EndTxnRequestV2 | _EndTxnRequestV3 | _EndTxnRequestV4 | _EndTxnRequestV5
    )
    WriteTxnMarkersRequest = _WriteTxnMarkersRequestV1 | _WriteTxnMarkersRequestV2
    TxnOffsetCommitRequest = (
        _TxnOffsetCommitRequestV0 | _TxnOffsetCommitRequestV1 | _TxnOffsetCommitRequestV2 | _TxnOffsetCommitRequestV3
        | _TxnOffsetCommitRequestV4 | _TxnOffsetCommitRequestV5
    )
    DescribeProducersRequest = _DescribeProducersRequestV0
    DescribeTransactionsRequest = _DescribeTransactionsRequestV0
    ListTransactionsRequest = _ListTransactionsRequestV0 | _ListTransactionsRequestV1 | _ListTransactionsRequestV2
    CreateTopicsRequest = (
        _CreateTopicsRequestV2 | _CreateTopicsRequestV3 | _CreateTopicsRequestV4 | _CreateTopicsRequestV5
        | _CreateTopicsRequestV6 | _CreateTopicsRequestV7
    )
    DeleteTopicsRequest = (
        _DeleteTopicsRequestV1 | _DeleteTopicsRequestV2 | _DeleteTopicsRequestV3 | _DeleteTopicsRequestV4
        | _DeleteTopicsRequestV5 | _DeleteTopicsRequestV6
    )
    CreatePartitionsRequest = (
        _CreatePartitionsRequestV0 | _CreatePartitionsRequestV1 | _CreatePartitionsRequestV2
        | _CreatePartitionsRequestV3
    )
    DescribeConfigsRequest = (
        _DescribeConfigsRequestV1 | _DescribeConfigsRequestV2 | _DescribeConfigsRequestV3 | _DescribeConfigsRequestV4
    )
    AlterConfigsRequest = _AlterConfigsRequestV0 | _AlterConfigsRequestV1 | _AlterConfigsRequestV2
    IncrementalAlterConfigsRequest = _IncrementalAlterConfigsRequestV0 | _IncrementalAlterConfigsRequestV1
    DescribeClusterRequest = _DescribeClusterRequestV0 | _DescribeClusterRequestV1 | _DescribeClusterRequestV2
    ElectLeadersRequest = _ElectLeadersRequestV0 | _ElectLeadersRequestV1 | _ElectLeadersRequestV2
    FindCoordinatorRequest = (
        _FindCoordinatorRequestV0 | _FindCoordinatorRequestV1 | _FindCoordinatorRequestV2 | _FindCoordinatorRequestV3
        | _FindCoordinatorRequestV4
    )
    JoinGroupRequest = (
        _JoinGroupRequestV0 | _JoinGroupRequestV1 | _JoinGroupRequestV2 | _JoinGroupRequestV3 | _JoinGroupRequestV4
        | _JoinGroupRequestV5 | _JoinGroupRequestV6 | _JoinGroupRequestV7 | _JoinGroupRequestV8 | _JoinGroupRequestV9
    )
    HeartbeatRequest = (
        _HeartbeatRequestV0 | _HeartbeatRequestV1 | _HeartbeatRequestV2 | _HeartbeatRequestV3 | _HeartbeatRequestV4
    )
    LeaveGroupRequest = (
        _LeaveGroupRequestV0 | _LeaveGroupRequestV1 | _LeaveGroupRequestV2 | _LeaveGroupRequestV3 | _LeaveGroupRequestV4
        | _LeaveGroupRequestV5
    )
    SyncGroupRequest = (
        _SyncGroupRequestV0 | _SyncGroupRequestV1 | _SyncGroupRequestV2 | _SyncGroupRequestV3 | _SyncGroupRequestV4
        | _SyncGroupRequestV5
    )
    DescribeGroupsRequest = (
        _DescribeGroupsRequestV0 | _DescribeGroupsRequestV1 | _DescribeGroupsRequestV2 | _DescribeGroupsRequestV3
        | _DescribeGroupsRequestV4 | _DescribeGroupsRequestV5
    )
    ListGroupsRequest = (
        _ListGroupsRequestV0 | _ListGroupsRequestV1 | _ListGroupsRequestV2 | _ListGroupsRequestV3 | _ListGroupsRequestV4
        | _ListGroupsRequestV5
    )
    DeleteGroupsRequest = _DeleteGroupsRequestV0 | _DeleteGroupsRequestV1 | _DeleteGroupsRequestV2
    OffsetCommitRequest = (
        _OffsetCommitRequestV2 | _OffsetCommitRequestV3 | _OffsetCommitRequestV4 | _OffsetCommitRequestV5
        | _OffsetCommitRequestV6 | _OffsetCommitRequestV7 | _OffsetCommitRequestV8 | _OffsetCommitRequestV9
    )
    OffsetFetchRequest = (
        _OffsetFetchRequestV1 | _OffsetFetchRequestV2 | _OffsetFetchRequestV3 | _OffsetFetchRequestV4
        | _OffsetFetchRequestV5 | _OffsetFetchRequestV6 | _OffsetFetchRequestV7 | _OffsetFetchRequestV8
        | _OffsetFetchRequestV9
    )
    OffsetDeleteRequest = _OffsetDeleteRequestV0
    DeleteRecordsRequest = _DeleteRecordsRequestV0 | _DeleteRecordsRequestV1 | _DeleteRecordsRequestV2
    OffsetForLeaderEpochRequest = (
        _OffsetForLeaderEpochRequestV2 | _OffsetForLeaderEpochRequestV3 | _OffsetForLeaderEpochRequestV4
    )
    ConsumerGroupHeartbeatRequest = _ConsumerGroupHeartbeatRequestV0 | _ConsumerGroupHeartbeatRequestV1
    ConsumerGroupDescribeRequest = _ConsumerGroupDescribeRequestV0 | _ConsumerGroupDescribeRequestV1
    SaslHandshakeRequest = _SaslHandshakeRequestV1
    SaslAuthenticateRequest = _SaslAuthenticateRequestV0 | _SaslAuthenticateRequestV1 | _SaslAuthenticateRequestV2
    DescribeAclsRequest = _DescribeAclsRequestV1 | _DescribeAclsRequestV2 | _DescribeAclsRequestV3
    CreateAclsRequest = _CreateAclsRequestV1 | _CreateAclsRequestV2 | _CreateAclsRequestV3
    DeleteAclsRequest = _DeleteAclsRequestV1 | _DeleteAclsRequestV2 | _DeleteAclsRequestV3
    DescribeUserScramCredentialsRequest = _DescribeUserScramCredentialsRequestV0
    AlterUserScramCredentialsRequest = _AlterUserScramCredentialsRequestV0
    ShareGroupHeartbeatRequest = _ShareGroupHeartbeatRequestV1
    ShareGroupDescribeRequest = _ShareGroupDescribeRequestV1
    DescribeShareGroupOffsetsRequest = _DescribeShareGroupOffsetsRequestV0 | _DescribeShareGroupOffsetsRequestV1
    AlterShareGroupOffsetsRequest = _AlterShareGroupOffsetsRequestV0
    DeleteShareGroupOffsetsRequest = _DeleteShareGroupOffsetsRequestV0
    ShareFetchRequest = _ShareFetchRequestV1 | _ShareFetchRequestV2
    ShareAcknowledgeRequest = _ShareAcknowledgeRequestV1 | _ShareAcknowledgeRequestV2
    InitializeShareGroupStateRequest = _InitializeShareGroupStateRequestV0
    ReadShareGroupStateRequest = _ReadShareGroupStateRequestV0
    WriteShareGroupStateRequest = _WriteShareGroupStateRequestV0 | _WriteShareGroupStateRequestV1
    DeleteShareGroupStateRequest = _DeleteShareGroupStateRequestV0
    ReadShareGroupStateSummaryRequest = _ReadShareGroupStateSummaryRequestV0 | _ReadShareGroupStateSummaryRequestV1
    UpdateFeaturesRequest = _UpdateFeaturesRequestV0 | _UpdateFeaturesRequestV1 | _UpdateFeaturesRequestV2
    AlterPartitionReassignmentsRequest = _AlterPartitionReassignmentsRequestV0 | _AlterPartitionReassignmentsRequestV1
    ListPartitionReassignmentsRequest = _ListPartitionReassignmentsRequestV0
    DescribeLogDirsRequest = (
        _DescribeLogDirsRequestV1 | _DescribeLogDirsRequestV2 | _DescribeLogDirsRequestV3 | _DescribeLogDirsRequestV4
        | _DescribeLogDirsRequestV5
    )
    AlterReplicaLogDirsRequest = _AlterReplicaLogDirsRequestV1 | _AlterReplicaLogDirsRequestV2
    DescribeClientQuotasRequest = _DescribeClientQuotasRequestV0 | _DescribeClientQuotasRequestV1
    AlterClientQuotasRequest = _AlterClientQuotasRequestV0 | _AlterClientQuotasRequestV1
    ApiVersionsRequest = (
        _ApiVersionsRequestV0 | _ApiVersionsRequestV1 | _ApiVersionsRequestV2 | _ApiVersionsRequestV3
        | _ApiVersionsRequestV4
    )

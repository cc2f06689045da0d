"""broker/audit.py: which requests reach the broker log and what their lines hide.

The console's actions are checked end to end in tests/observability/test_console.py (the real
broker's log file); here the cases those actions cannot reach: WriteTxnMarkers from another
broker of a cluster and a group member's OffsetCommit stay out of the log, a config's secret
value never enters it. The broker state is a stand-in: audit reads only its cluster membership.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any, cast

import pytest

from eoslog.broker import audit
from eoslog.broker.context import BrokerState, RequestContext
from eoslog.broker.metadata_support import BrokerEndpoint
from eoslog.broker.zk_support import ZkSupport
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.messages import build, request_types, response_types
from eoslog.security.listeners import Listener, SecurityProtocol
from eoslog.security.session import ANONYMOUS, Session


class _ClusterSupport:
    """Brokers 1 and 2 of a cluster: ZkSupport's own rule over them (only what audit reads)."""

    def live_brokers(self, listener: str | None = None) -> list[BrokerEndpoint]:
        return [BrokerEndpoint(1, "127.0.0.1", 9092), BrokerEndpoint(2, "127.0.0.1", 9093)]

    is_inter_broker = ZkSupport.is_inter_broker


class _ClusterState:
    metadata_support = _ClusterSupport()


def _ctx(api_key: ApiKey, version: int, client_id: str, session: Session | None = None) -> RequestContext:
    return RequestContext(api_key, version, 7, client_id, ANONYMOUS, "127.0.0.1:50000",
                          cast("BrokerState", _ClusterState()), session)


def _connection() -> Session:
    return Session(Listener("PLAINTEXT", SecurityProtocol.PLAINTEXT, "127.0.0.1", 9092), ANONYMOUS, "127.0.0.1")


def _logged(caplog: pytest.LogCaptureFixture, ctx: RequestContext, request: Any, response: Any) -> list[str]:
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="eoslog.audit"):
        audit.record(ctx, request, response)
    return [r.getMessage() for r in caplog.records if r.name == "eoslog.audit"]


def _markers() -> tuple[Any, Any]:
    q, r = request_types(ApiKey.WRITE_TXN_MARKERS, 1), response_types(ApiKey.WRITE_TXN_MARKERS, 1)
    request = build(q.WriteTxnMarkersRequest, markers=(build(
        q.WritableTxnMarker, producer_id=5, producer_epoch=1, transaction_result=False, coordinator_epoch=0,
        topics=(build(q.WritableTxnMarkerTopic, name="orders", partition_indexes=(0,)),)),))
    response = build(r.WriteTxnMarkersResponse, markers=(build(
        r.WritableTxnMarkerResult, producer_id=5, topics=(build(
            r.WritableTxnMarkerTopicResult, name="orders", partitions=(build(
                r.WritableTxnMarkerPartitionResult, partition_index=0, error_code=0),)),)),))
    return request, response


def test_markers_from_another_broker_are_not_logged_an_admins_are(caplog: pytest.LogCaptureFixture) -> None:
    request, response = _markers()
    assert _logged(caplog, _ctx(ApiKey.WRITE_TXN_MARKERS, 1, "broker-2"), request, response) == []
    assert _logged(caplog, _ctx(ApiKey.WRITE_TXN_MARKERS, 1, "eoslog-console"), request, response) == [
        "WriteTxnMarkers by client.id=eoslog-console principal=User:ANONYMOUS peer=127.0.0.1:50000: "
        "write ABORT marker for producer 5 epoch 1 on orders-0: NONE"]


def _commit(generation: int, member: str, group: str = "billing") -> tuple[Any, Any]:
    q, r = request_types(ApiKey.OFFSET_COMMIT, 8), response_types(ApiKey.OFFSET_COMMIT, 8)
    request = build(q.OffsetCommitRequest, group_id=group, generation_id_or_member_epoch=generation,
                    member_id=member, group_instance_id=None, topics=(build(
                        q.OffsetCommitRequestTopic, name="orders", partitions=(build(
                            q.OffsetCommitRequestPartition, partition_index=0, committed_offset=7,
                            committed_leader_epoch=-1, committed_metadata=""),)),))
    response = build(r.OffsetCommitResponse, throttle_time=datetime.timedelta(0), topics=(build(
        r.OffsetCommitResponseTopic, name="orders", partitions=(build(
            r.OffsetCommitResponsePartition, partition_index=0, error_code=25),)),))
    return request, response


def test_a_members_commit_is_not_logged_an_admin_reset_is(caplog: pytest.LogCaptureFixture) -> None:
    ctx = _ctx(ApiKey.OFFSET_COMMIT, 8, "tool")
    assert _logged(caplog, ctx, *_commit(3, "member-1")) == []
    (line,) = _logged(caplog, ctx, *_commit(-1, ""))
    assert line.endswith("commit offsets of group billing (no generation) orders-0 to 7: "
                         "orders-0 UNKNOWN_MEMBER_ID")


def test_a_standalone_consumers_later_commits_are_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    """A connection's first no-generation commit to a group at INFO (an admin tool's reset), its
    later ones to that group at DEBUG (a standalone consumer committing as it goes); a new
    connection, or another group, is logged at INFO again."""
    first = _connection()
    commit = _commit(-1, "")
    assert len(_logged(caplog, _ctx(ApiKey.OFFSET_COMMIT, 8, "consumer", first), *commit)) == 1
    assert _logged(caplog, _ctx(ApiKey.OFFSET_COMMIT, 8, "consumer", first), *commit) == []
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="eoslog.audit"):
        audit.record(_ctx(ApiKey.OFFSET_COMMIT, 8, "consumer", first), *commit)
    assert [(r.levelno, r.getMessage().endswith("orders-0 to 7: orders-0 UNKNOWN_MEMBER_ID"))
            for r in caplog.records] == [(logging.DEBUG, True)]
    assert len(_logged(caplog, _ctx(ApiKey.OFFSET_COMMIT, 8, "tool", _connection()), *commit)) == 1
    assert len(_logged(caplog, _ctx(ApiKey.OFFSET_COMMIT, 8, "consumer", first), *_commit(-1, "", "payroll"))) == 1


def test_a_secret_configs_value_is_hidden(caplog: pytest.LogCaptureFixture) -> None:
    q, r = request_types(ApiKey.ALTER_CONFIGS, 2), response_types(ApiKey.ALTER_CONFIGS, 2)
    request = build(q.AlterConfigsRequest, validate_only=False, resources=(build(
        q.AlterConfigsResource, resource_type=4, resource_name="1", configs=(
            build(q.AlterableConfig, name="ssl.keystore.password", value="hunter2"),
            build(q.AlterableConfig, name="log.retention.ms", value="1000"))),))
    response = build(r.AlterConfigsResponse, throttle_time=datetime.timedelta(0), responses=(build(
        r.AlterConfigsResourceResponse, error_code=0, error_message=None, resource_type=4, resource_name="1"),))
    (line,) = _logged(caplog, _ctx(ApiKey.ALTER_CONFIGS, 2, "tool"), request, response)
    assert "ssl.keystore.password=[hidden], log.retention.ms=1000: NONE" in line
    assert "hunter2" not in line

"""How the transaction coordinator's COMMIT/ABORT markers reach the partitions' leaders.

The coordinator's marker channel speaks in domain values (``TxnMarker``) and asks one
``MarkerSender`` call per leader broker. For this broker's own partitions that is a direct
call into the replica layer (``ReplicaManager.write_txn_marker``, the same path a
WriteTxnMarkers request from another broker takes); another broker's partitions get a
WriteTxnMarkers request over the inter-broker channel (cluster mode). A destination that
cannot be reached answers NETWORK_EXCEPTION for its partitions: the marker channel tries
again after its back-off, with the leaders it knows then.

Test hook: armed with ``between_markers`` (``eoslog.faults``), the local path writes the
first partition's marker alone, waits for its acknowledgement (fsynced with group commit),
then SIGKILLs the broker: a crash between markers, the others never written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from eoslog.client.errors import KafkaError as ClientError
from eoslog.client.versions import ApiVersionTable
from eoslog.coordinator.transaction import TxnMarker
from eoslog.coordinator.transaction.coordinator import CRASH_POINTS, MARKER_WRITE_TIMEOUT_MS
from eoslog.errors import Errors
from eoslog.faults import CrashPoints
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import from_code
from eoslog.protocol.messages import build, request_types
from eoslog.replica import ReplicaManager, TxnMarkerWrite
from eoslog.types import TopicPartition

if TYPE_CHECKING:
    from eoslog.cluster.channel import BrokerChannel


class MarkerSender:
    """The coordinator's ``MarkerSender``: node id, markers → one result per marker."""

    def __init__(self, replicas: ReplicaManager, channel: BrokerChannel | None = None,
                 crash_points: CrashPoints | None = None, write_timeout_ms: int = MARKER_WRITE_TIMEOUT_MS) -> None:
        self.replicas = replicas
        self.channel = channel
        self.write_timeout_ms = write_timeout_ms  # the coordinator's marker_write_timeout_ms
        self.crash_points = crash_points or CrashPoints.from_env(CRASH_POINTS)

    async def __call__(self, node_id: int, markers: Sequence[TxnMarker]) -> list[dict[TopicPartition, Errors]]:
        if node_id == self.replicas.node_id:
            writes = [TxnMarkerWrite(tp, m.producer_id, m.producer_epoch, m.coordinator_epoch, m.commit,
                                     m.transaction_version)
                      for m in markers for tp in m.partitions]
            if "between_markers" in self.crash_points.armed and len(writes) > 1:
                await self.replicas.write_txn_markers(writes[:1], self.write_timeout_ms)
                self.crash_points.reached("between_markers")
            errors = iter(await self.replicas.write_txn_markers(writes, self.write_timeout_ms))
            return [{tp: next(errors) for tp in m.partitions} for m in markers]
        if self.channel is None:
            raise RuntimeError(f"no inter-broker channel to node {node_id}")
        try:
            response = await self.channel.send(node_id, lambda versions: _request(versions, markers))
        except (ClientError, OSError):
            return [dict.fromkeys(m.partitions, Errors.NETWORK_EXCEPTION) for m in markers]
        results: list[dict[TopicPartition, Errors]] = []
        for m, answer in zip(markers, response.markers, strict=True):
            got = {TopicPartition(str(t.name), int(p.partition_index)): from_code(int(p.error_code))
                   for t in answer.topics for p in t.partitions}
            results.append({tp: got.get(tp, Errors.UNKNOWN_SERVER_ERROR) for tp in m.partitions})
        return results


def _request(versions: ApiVersionTable, markers: Sequence[TxnMarker]) -> Any:
    m = request_types(ApiKey.WRITE_TXN_MARKERS, versions.pick(ApiKey.WRITE_TXN_MARKERS, 2, 1))
    entries = []
    for marker in markers:
        by_topic: dict[str, list[int]] = {}
        for tp in marker.partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        entries.append(build(
            m.WritableTxnMarker, producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
            transaction_result=marker.commit, coordinator_epoch=marker.coordinator_epoch,
            transaction_version=marker.transaction_version,
            topics=tuple(build(m.WritableTxnMarkerTopic, name=t, partition_indexes=tuple(ps))
                         for t, ps in by_topic.items())))
    return build(m.WriteTxnMarkersRequest, markers=tuple(entries))

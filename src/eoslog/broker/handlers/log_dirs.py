"""DescribeLogDirs (key 35): this broker's log directories and the replicas in each, as
Kafka's KafkaApis answers it (DESCRIBE on the cluster; a null topic list means every replica);
what it reports is the replica layer's (``replica/log_dirs.py``). AlterReplicaLogDirs (key 34):
move replicas to another log directory of this broker (ALTER on the cluster), which the replica
layer does (``replica/alter_log_dirs.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import NO_THROTTLE, ApiSpec, build, response_types
from eoslog.errors import Errors
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import error_code
from eoslog.replica.log_dirs import LogDirDescription
from eoslog.security.acls import AclOperation
from eoslog.types import TopicPartition

if TYPE_CHECKING:
    from eoslog.protocol.requests import AlterReplicaLogDirsRequest, DescribeLogDirsRequest
    from eoslog.protocol.responses import AlterReplicaLogDirsResponse, DescribeLogDirsResponse


async def handle_describe_log_dirs(ctx: RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    module = response_types(ctx)
    error, dirs = Errors.NONE, []
    if not ctx.allowed_on_cluster(AclOperation.DESCRIBE):
        error = Errors.CLUSTER_AUTHORIZATION_FAILED
    else:
        wanted = None if request.topics is None else {
            TopicPartition(str(t.topic), int(p)) for t in request.topics for p in t.partitions}
        dirs = ctx.state.replicas.describe_log_dirs(wanted)
    return cast("DescribeLogDirsResponse", build(
        module.DescribeLogDirsResponse, throttle_time=NO_THROTTLE, error_code=error_code(error),
        results=tuple(_result(module, d) for d in dirs)))


def _result(module: Any, d: LogDirDescription) -> Any:
    by_topic: dict[str, list[Any]] = {}
    for r in d.replicas:
        by_topic.setdefault(r.tp.topic, []).append(build(
            module.DescribeLogDirsPartition, partition_index=r.tp.partition, partition_size=r.size,
            offset_lag=r.offset_lag, is_future_key=r.is_future))
    return build(module.DescribeLogDirsResult, error_code=error_code(d.error), log_dir=d.path,
                 topics=tuple(build(module.DescribeLogDirsTopic, name=t, partitions=tuple(ps))
                              for t, ps in by_topic.items()),
                 total_bytes=d.total_bytes, usable_bytes=d.usable_bytes, is_cordoned=False)


async def handle_alter_replica_log_dirs(ctx: RequestContext, request: AlterReplicaLogDirsRequest
                                        ) -> AlterReplicaLogDirsResponse:
    module = response_types(ctx)
    targets = {TopicPartition(str(t.name), int(p)): str(d.path) for d in request.dirs for t in d.topics
               for p in t.partitions}
    if ctx.allowed_on_cluster(AclOperation.ALTER):
        results = ctx.state.replicas.alter_replica_log_dirs(targets)
    else:
        results = dict.fromkeys(targets, Errors.CLUSTER_AUTHORIZATION_FAILED)
    by_topic: dict[str, list[Any]] = {}
    for tp, error in results.items():
        by_topic.setdefault(tp.topic, []).append(build(
            module.AlterReplicaLogDirPartitionResult, partition_index=tp.partition, error_code=error_code(error)))
    return cast("AlterReplicaLogDirsResponse", build(
        module.AlterReplicaLogDirsResponse, throttle_time=NO_THROTTLE,
        results=tuple(build(module.AlterReplicaLogDirTopicResult, topic_name=t, partitions=tuple(ps))
                      for t, ps in by_topic.items())))


APIS = [ApiSpec(ApiKey.DESCRIBE_LOG_DIRS, "DescribeLogDirs", 1, 5, handle_describe_log_dirs),
        ApiSpec(ApiKey.ALTER_REPLICA_LOG_DIRS, "AlterReplicaLogDirs", 1, 2, handle_alter_replica_log_dirs)]

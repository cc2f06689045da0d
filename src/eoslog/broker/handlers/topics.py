"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37), by Kafka's KRaft rules.

Kafka checks a new topic in this order, and so does ``_plan_topic``: name (legal, no
'.'/'_' collision with an existing topic), existence, config values (null, unknown,
invalid → INVALID_CONFIG), then the manual assignment or the partition count and
replication factor. Every topic of a request is checked before any is created, and a
request that would write more than the controller's 10,000 metadata records in one
operation is refused whole (POLICY_VIOLATION), as Kafka refuses it.

One node (id 0) holds every replica: a replication factor above 1 cannot be met
(INVALID_REPLICATION_FACTOR with Kafka's message) and a manual assignment may name
node 0 only. In a cluster (docs/cluster.md) the registered brokers take their place: the
topic is written to ZooKeeper with Kafka's replica placement (or the manual assignment), the
controller elects the first leaders, and the answer waits for them up to the request's
timeout. Names repeated in one request get INVALID_REQUEST, each once.

Each topic created or deleted and each partition added counts its partitions against the
client's ``controller_mutation_rate`` (KIP-599; not for validate_only): CreateTopics v6+,
DeleteTopics v5+ and CreatePartitions v3+ refuse a topic with THROTTLING_QUOTA_EXCEEDED once it
is exceeded, older versions are let through; either way the response carries the throttle time.

Expected refusals are values (``Refusal``), not exceptions; storage failures arrive
as ``TopicError`` and are turned into one as well.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import NO_THROTTLE, ApiSpec, build, response_types, versioned
from eoslog.broker.handlers.configs import topic_config_entries
from eoslog.cluster.controller.assignment import check_partition_replicas
from eoslog.config import ConfigError, check_topic_config
from eoslog.errors import KafkaError
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import ErrorCode, error_code
from eoslog.quotas.client import MutationQuota, QuotaType
from eoslog.security.acls import AclOperation, ResourceType
from eoslog.storage import TopicError, TopicInfo
from eoslog.storage.log_manager import validate_topic_name

if TYPE_CHECKING:
    from eoslog.protocol.requests import CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest
    from eoslog.protocol.responses import CreatePartitionsResponse, CreateTopicsResponse, DeleteTopicsResponse

CLUSTER_METADATA_TOPIC = "__cluster_metadata"
# QuorumController.MAX_RECORDS_PER_USER_OP: one TopicRecord per topic, one ConfigRecord
# per override and one PartitionRecord per partition count against it.
MAX_RECORDS_PER_USER_OP = 10_000
TOO_LARGE_MESSAGE = "Unable to perform excessively large batch operation."
REPLICATION_FACTOR = 1  # one node holds every partition


@dataclass(frozen=True, slots=True)
class Refusal:
    error: ErrorCode
    message: str | None


@dataclass(frozen=True, slots=True)
class TopicPlan:
    name: str
    num_partitions: int
    overrides: dict[str, str]
    replication_factor: int = REPLICATION_FACTOR
    assignment: dict[int, tuple[int, ...]] | None = None  # a manual one

    @property
    def records(self) -> int:
        return 1 + len(self.overrides) + self.num_partitions


_K = TypeVar("_K")


def _duplicates(keys: Iterable[_K]) -> list[_K]:
    """Keys given more than once, in order of first appearance."""
    counts = Counter(keys)
    return [n for n in counts if counts[n] > 1]


def _registered(ctx: RequestContext) -> list[int]:
    return [b.node_id for b in ctx.state.live_brokers()]


def _topic_names(ctx: RequestContext) -> Iterable[str]:
    return ctx.state.metadata_support.topic_names()


def _assignment_refusal(ctx: RequestContext, broker_ids: Sequence[int], replicas: int | None) -> Refusal | None:
    """Kafka's validateManualPartitionAssignment against the registered brokers."""
    try:
        check_partition_replicas(broker_ids, _registered(ctx), replicas)
    except KafkaError as e:
        return Refusal(error_code(e.error), str(e))
    return None


def _config_refusal(ctx: RequestContext, configs: Sequence[Any]) -> Refusal | dict[str, str]:
    nulls = [c.name for c in configs if c.value is None]
    if nulls:
        return Refusal(ErrorCode.invalid_config, "Null value not supported for topic configs: " + ",".join(nulls))
    overrides = {c.name: c.value for c in configs}
    try:
        check_topic_config(ctx.state.logs.topic_defaults, overrides)
    except ConfigError as e:
        return Refusal(ErrorCode.invalid_config, str(e))
    return overrides


@dataclass(frozen=True, slots=True)
class Placement:
    num_partitions: int
    replication_factor: int
    assignment: dict[int, tuple[int, ...]] | None = None


def _placement(ctx: RequestContext, topic: Any) -> Refusal | Placement:
    if topic.assignments:
        if topic.replication_factor != -1:
            return Refusal(ErrorCode.invalid_request, "A manual partition assignment was specified, "
                           "but replication factor was not set to -1.")
        if topic.num_partitions != -1:
            return Refusal(ErrorCode.invalid_request, "A manual partition assignment was specified, "
                           "but numPartitions was not set to -1.")
        seen: dict[int, tuple[int, ...]] = {}
        replicas = None
        for a in topic.assignments:
            index = int(a.partition_index)
            if index in seen:
                return Refusal(ErrorCode.invalid_replica_assignment,
                               f"Found multiple manual partition assignments for partition {index}")
            refusal = _assignment_refusal(ctx, [int(b) for b in a.broker_ids], replicas)
            if refusal is not None:
                return refusal
            replicas = len(a.broker_ids)
            seen[index] = tuple(int(b) for b in a.broker_ids)
        if set(seen) != set(range(len(seen))):
            return Refusal(ErrorCode.invalid_replica_assignment,
                           "partitions should be a consecutive 0-based integer sequence")
        return Placement(len(seen), replicas or 0, seen)
    factor, count = int(topic.replication_factor), int(topic.num_partitions)
    if factor < -1 or factor == 0:
        return Refusal(ErrorCode.invalid_replication_factor,
                       "Replication factor must be larger than 0, or -1 to use the default value.")
    if count < -1 or count == 0:
        return Refusal(ErrorCode.invalid_partitions, "Number of partitions was set to an invalid non-positive value.")
    config = ctx.state.config
    if factor == -1:
        factor = int(config["default.replication.factor"])
    registered = len(_registered(ctx))
    if factor > registered:
        return Refusal(ErrorCode.invalid_replication_factor,
                       f"Unable to replicate the partition {factor} time(s): The target replication factor "
                       f"of {factor} cannot be reached because only {registered} broker(s) are registered.")
    return Placement(int(config["num.partitions"]) if count == -1 else count, factor)


def _plan_topic(ctx: RequestContext, topic: Any) -> Refusal | TopicPlan:
    name = topic.name
    if not (ctx.allowed_on_cluster(AclOperation.CREATE) or ctx.allowed(AclOperation.CREATE, ResourceType.TOPIC, name)):
        return Refusal(ErrorCode.topic_authorization_failed, "Authorization failed.")  # Kafka's check comes first
    if name == CLUSTER_METADATA_TOPIC:
        return Refusal(ErrorCode.invalid_request, f"Creation of internal topic {name} is prohibited.")
    try:
        validate_topic_name(name)
    except TopicError as e:
        return Refusal(error_code(e.error), str(e))
    existing_names = _topic_names(ctx)
    if name in existing_names:
        return Refusal(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
    if "." in name or "_" in name:
        # '.' and '_' map to the same metric name, so Kafka lets only one of them exist.
        unified = name.replace(".", "_")
        for existing in existing_names:
            if existing.replace(".", "_") == unified:
                return Refusal(ErrorCode.invalid_topic_exception,
                               f"Topic '{name}' collides with existing topic: {existing}")
    overrides = _config_refusal(ctx, topic.configs)
    if isinstance(overrides, Refusal):
        return overrides
    placement = _placement(ctx, topic)
    if isinstance(placement, Refusal):
        return placement
    return TopicPlan(name, placement.num_partitions, overrides, placement.replication_factor, placement.assignment)


def _mutation_refusal(quota: MutationQuota, partitions: int) -> Refusal | None:
    """Record a topic's partitions against the controller-mutation quota (KIP-599); a strict
    quota that is exceeded refuses the topic."""
    try:
        quota.record(partitions)
    except KafkaError as e:
        return Refusal(error_code(e.error), str(e))
    return None


async def _create(ctx: RequestContext, plan: TopicPlan, validate_only: bool, timeout_s: float) -> Refusal | TopicInfo:
    try:
        return await ctx.state.metadata_support.create_topic(
            plan.name, plan.num_partitions, plan.overrides, plan.replication_factor, plan.assignment,
            validate_only, timeout_s)
    except KafkaError as e:
        return Refusal(error_code(e.error), str(e))


async def create_with_defaults(ctx: RequestContext, name: str) -> ErrorCode | None:
    """Auto-creation (Metadata, FindCoordinator): ``num.partitions`` and
    ``default.replication.factor`` (capped at the live brokers, as Kafka's auto-creation of
    internal topics is). None when created (or created meanwhile by another request)."""
    config = ctx.state.config
    factor = min(int(config["default.replication.factor"]), max(len(_registered(ctx)), 1))
    plan = TopicPlan(name, int(config["num.partitions"]), {}, factor)
    try:
        validate_topic_name(name)
    except TopicError as e:
        return error_code(e.error)
    outcome = await _create(ctx, plan, False, 0)
    if isinstance(outcome, Refusal) and outcome.error != ErrorCode.topic_already_exists:
        return outcome.error
    return None


def _created_result(ctx: RequestContext, module: ModuleType, info: TopicInfo, replication_factor: int) -> Any:
    config_cls = getattr(module, "CreatableTopicConfigs", None)  # v5+
    configs = () if config_cls is None else tuple(
        build(config_cls, name=e.name, value=e.value, read_only=e.read_only,
              config_source=int(e.source), is_sensitive=e.is_sensitive)
        for e in topic_config_entries(ctx.state.config, info.config)
    )
    return build(
        module.CreatableTopicResult,
        name=info.name, topic_id=info.topic_id, error_code=ErrorCode.none, error_message=None,
        topic_config_error_code=0, num_partitions=info.num_partitions,
        replication_factor=replication_factor, configs=configs,
    )


def _refused_result(module: ModuleType, name: str, refusal: Refusal) -> Any:
    return build(
        module.CreatableTopicResult,
        name=name, topic_id=None, error_code=refusal.error, error_message=refusal.message,
        topic_config_error_code=0, num_partitions=-1, replication_factor=-1, configs=(),
    )


async def handle_create_topics(ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    module = response_types(ctx)
    duplicates = _duplicates(t.name for t in request.topics)
    plans: dict[str, Refusal | TopicPlan] = {
        t.name: _plan_topic(ctx, t) for t in request.topics if t.name not in duplicates
    }
    if sum(p.records for p in plans.values() if isinstance(p, TopicPlan)) > MAX_RECORDS_PER_USER_OP:
        too_large = Refusal(ErrorCode.policy_violation, TOO_LARGE_MESSAGE)
        plans = dict.fromkeys(plans, too_large)
        plans.update(dict.fromkeys(duplicates, too_large))
        duplicates = []
    results = []
    quota = ctx.mutation_quota(strict_since=6)
    for name, plan in plans.items():
        if isinstance(plan, Refusal):
            results.append(_refused_result(module, name, plan))
            continue
        refused = None if request.validate_only else _mutation_refusal(quota, plan.num_partitions)
        if refused is not None:
            results.append(_refused_result(module, name, refused))
            continue
        outcome = await _create(ctx, plan, bool(request.validate_only), request.timeout.total_seconds())
        if isinstance(outcome, Refusal):
            results.append(_refused_result(module, name, outcome))
        else:
            results.append(_created_result(ctx, module, outcome, plan.replication_factor))
    duplicate = Refusal(ErrorCode.invalid_request, "Duplicate topic name.")
    results += [_refused_result(module, name, duplicate) for name in duplicates]
    ctx.throttled(QuotaType.CONTROLLER_MUTATION, quota.throttle_ms())
    return cast("CreateTopicsResponse", build(
        module.CreateTopicsResponse, throttle_time=NO_THROTTLE, topics=tuple(results)))


# -- DeleteTopics -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeleteOutcome:
    name: str | None
    topic_id: uuid.UUID | None
    error: ErrorCode
    message: str | None = None


def _topic_id(ctx: RequestContext, name: str) -> uuid.UUID | None:
    return ctx.state.metadata_support.topic_id(name)


def _topic_named(ctx: RequestContext, topic_id: uuid.UUID) -> str | None:
    return ctx.state.metadata_support.topic_named(topic_id)


async def _delete(ctx: RequestContext, name: str, topic_id: uuid.UUID, timeout_s: float) -> DeleteOutcome:
    try:
        await ctx.state.metadata_support.delete_topic(name, timeout_s)
    except KafkaError as e:
        return DeleteOutcome(name, topic_id, error_code(e.error), str(e))
    return DeleteOutcome(name, topic_id, ErrorCode.none)


async def _delete_topics(ctx: RequestContext, wanted: list[tuple[str | None, uuid.UUID | None]],
                         timeout_s: float) -> list[DeleteOutcome]:
    """ControllerApis.deleteTopics: sort out names and ids, then delete what remains."""
    out: list[DeleteOutcome] = []
    names: list[str] = []
    ids: list[uuid.UUID] = []
    for name, topic_id in wanted:
        if name is None and topic_id is None:
            out.append(DeleteOutcome(None, None, ErrorCode.invalid_request,
                                     "Neither topic name nor id were specified."))
        elif name is not None and topic_id is not None:
            out.append(DeleteOutcome(name, topic_id, ErrorCode.invalid_request,
                                     "You may not specify both topic name and topic id."))
        elif name is not None:
            names.append(name)
        elif topic_id is not None:
            ids.append(topic_id)
    dup_names, dup_ids = _duplicates(names), set(_duplicates(ids))
    out += [DeleteOutcome(n, None, ErrorCode.invalid_request, "Duplicate topic name.") for n in dup_names]
    out += [DeleteOutcome(None, i, ErrorCode.invalid_request, "Duplicate topic id.") for i in dup_ids]
    to_delete: dict[uuid.UUID, str] = {}
    for topic_id in dict.fromkeys(i for i in ids if i not in dup_ids):
        named = _topic_named(ctx, topic_id)
        if named is not None and not ctx.allowed(AclOperation.DELETE, ResourceType.TOPIC, named):
            out.append(DeleteOutcome(None, topic_id, ErrorCode.topic_authorization_failed, "Authorization failed."))
        elif named is None:
            out.append(DeleteOutcome(None, topic_id, ErrorCode.unknown_topic_id,
                                     "This server does not host this topic ID."))
        else:
            to_delete[topic_id] = named
    for name in dict.fromkeys(n for n in names if n not in dup_names):
        id_of_name = _topic_id(ctx, name)
        if not ctx.allowed(AclOperation.DELETE, ResourceType.TOPIC, name):
            # Kafka: TOPIC_AUTHORIZATION_FAILED whether or not the topic exists (nothing leaks).
            out.append(DeleteOutcome(name, None, ErrorCode.topic_authorization_failed, "Authorization failed."))
        elif id_of_name is None:
            out.append(DeleteOutcome(name, None, ErrorCode.unknown_topic_or_partition,
                                     "This server does not host this topic-partition."))
        elif id_of_name in to_delete or id_of_name in dup_ids:
            to_delete.pop(id_of_name, None)
            dup_ids.add(id_of_name)
            out.append(DeleteOutcome(name, id_of_name, ErrorCode.invalid_request,
                                     "The provided topic name maps to an ID that was already supplied."))
        else:
            to_delete[id_of_name] = name
    quota = ctx.mutation_quota(strict_since=5)
    for topic_id, name in to_delete.items():
        refused = _mutation_refusal(quota, _partition_count(ctx, name) or 0)
        out.append(await _delete(ctx, name, topic_id, timeout_s) if refused is None
                   else DeleteOutcome(name, topic_id, refused.error, refused.message))
    ctx.throttled(QuotaType.CONTROLLER_MUTATION, quota.throttle_ms())
    return out


async def handle_delete_topics(ctx: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    module = response_types(ctx)
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in versioned(request).topics]
    else:
        wanted = [(name, None) for name in versioned(request).topic_names]
    if not ctx.state.config["delete.topic.enable"]:
        # Kafka fails the whole request; before v3 there was no dedicated code.
        code = ErrorCode.invalid_request if ctx.api_version < 3 else ErrorCode.topic_deletion_disabled
        outcomes = [DeleteOutcome(name, topic_id, code) for name, topic_id in wanted]
    else:
        outcomes = await _delete_topics(ctx, wanted, request.timeout.total_seconds())
    responses = tuple(
        build(module.DeletableTopicResult, name=o.name, topic_id=o.topic_id, error_code=o.error,
              error_message=o.message)
        for o in outcomes
    )
    return cast("DeleteTopicsResponse", build(
        module.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=responses))


# -- CreatePartitions ---------------------------------------------------------------


def _partition_count(ctx: RequestContext, name: str) -> int | None:
    return ctx.state.metadata_support.partition_count(name)


async def _grow(ctx: RequestContext, topic: Any, validate_only: bool, timeout_s: float,
                quota: MutationQuota) -> Refusal | None:
    """ReplicationControlManager.createPartitions for one topic."""
    current_count = _partition_count(ctx, topic.name)
    if current_count is None:
        return Refusal(ErrorCode.unknown_topic_or_partition, None)
    current, count = current_count, int(topic.count)
    if count == current:
        return Refusal(ErrorCode.invalid_partitions, f"Topic already has {current} partition(s).")
    if count < current:
        return Refusal(ErrorCode.invalid_partitions, f"The topic {topic.name} currently has {current} "
                       f"partition(s); {count} would not be an increase.")
    additional = count - current
    if topic.assignments is not None and len(topic.assignments) != additional:
        return Refusal(ErrorCode.invalid_replica_assignment, f"Attempted to add {additional} additional "
                       f"partition(s), but only {len(topic.assignments)} assignment(s) were specified.")
    assignments = None if topic.assignments is None else [[int(b) for b in a.broker_ids] for a in topic.assignments]
    refused = None if validate_only else _mutation_refusal(quota, additional)
    if refused is not None:
        return refused
    try:
        await ctx.state.metadata_support.add_partitions(topic.name, count, assignments, validate_only, timeout_s)
    except KafkaError as e:
        return Refusal(error_code(e.error), str(e))
    return None


async def handle_create_partitions(ctx: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    module = response_types(ctx)
    duplicates = _duplicates(t.name for t in request.topics)
    outcomes: dict[str, Refusal | None] = dict.fromkeys(duplicates, Refusal(ErrorCode.invalid_request,
                                                                           "Duplicate topic name."))
    unique = [t for t in request.topics if t.name not in duplicates]
    # Assignments are checked again in _grow; counting here only needs the sizes.
    counts = {t.name: _partition_count(ctx, t.name) for t in unique}
    added = sum(max(0, int(t.count) - n) for t in unique if (n := counts[t.name]) is not None)
    quota = ctx.mutation_quota(strict_since=3)
    for t in unique:
        if not ctx.allowed(AclOperation.ALTER, ResourceType.TOPIC, t.name):
            outcomes[t.name] = Refusal(ErrorCode.topic_authorization_failed, "Authorization failed.")
        elif added > MAX_RECORDS_PER_USER_OP:
            outcomes[t.name] = Refusal(ErrorCode.policy_violation, TOO_LARGE_MESSAGE)
        else:
            outcomes[t.name] = await _grow(ctx, t, bool(request.validate_only), request.timeout.total_seconds(),
                                           quota)
    ctx.throttled(QuotaType.CONTROLLER_MUTATION, quota.throttle_ms())
    results = tuple(
        build(module.CreatePartitionsTopicResult, name=name,
              error_code=o.error if o else ErrorCode.none, error_message=o.message if o else None)
        for name, o in outcomes.items()
    )
    return cast("CreatePartitionsResponse", build(
        module.CreatePartitionsResponse, throttle_time=NO_THROTTLE, results=results))


APIS = [
    ApiSpec(ApiKey.CREATE_TOPICS, "CreateTopics", 2, 7, handle_create_topics),
    ApiSpec(ApiKey.DELETE_TOPICS, "DeleteTopics", 1, 6, handle_delete_topics),
    ApiSpec(ApiKey.CREATE_PARTITIONS, "CreatePartitions", 0, 3, handle_create_partitions),
]

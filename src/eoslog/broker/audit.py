"""The broker log's line for each administrative mutation, with who asked for it.

Kafka's brokers log such changes at INFO (records deleted, offsets reset, groups deleted,
configs altered, a transaction's markers written by an admin client): an operator reading the
log after the fact sees what changed and which client (client.id, principal, peer) changed it.
The dispatcher calls ``record`` after each handler; the handlers themselves only translate.

Not logged: a WriteTxnMarkers from another broker (the coordinator's routine markers) and an
OffsetCommit from a group member (generation >= 0). A commit with generation -1 and no member
is an admin's offset reset (AlterConsumerGroupOffsets) or a standalone consumer's commit, which
the request cannot tell apart; an admin tool commits once on its connection, a standalone
consumer commits as it goes, so a connection's first such commit to a group is logged at INFO
and its later ones at DEBUG (a line per commit was 2,000 lines a second for 200 standalone
groups, 17 % of the event loop's samples; the console logs each of its own actions besides).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import from_code

if TYPE_CHECKING:
    from eoslog.broker.context import RequestContext
    from eoslog.protocol.requests import (
        AlterConfigsRequest,
        DeleteGroupsRequest,
        DeleteRecordsRequest,
        DeleteTopicsRequest,
        IncrementalAlterConfigsRequest,
        OffsetCommitRequest,
        OffsetDeleteRequest,
        WriteTxnMarkersRequest,
    )

log = logging.getLogger("eoslog.audit")

# Config values that are secrets: their names are logged, their values not (Kafka's
# ConfigDef.Type.PASSWORD configs; sasl.jaas.config holds passwords too).
_SECRET_MARKERS = ("password", "jaas", "secret")


def _outcome(codes: list[tuple[str, int]]) -> str:
    """``NONE`` when every part succeeded, else each failed part with its error's name."""
    failed = [f"{what} {from_code(code).name}" for what, code in codes if code]
    return "NONE" if not failed else ", ".join(failed)


def _partition_codes(response: Any) -> list[tuple[str, int]]:
    return [(f"{t.name}-{p.partition_index}", int(p.error_code)) for t in response.topics for p in t.partitions]


def _delete_records(ctx: RequestContext, request: DeleteRecordsRequest, response: Any) -> str:
    asked = ", ".join(f"{t.name}-{p.partition_index} before offset {p.offset}"
                      for t in request.topics for p in t.partitions)
    return f"delete records {asked}: {_outcome(_partition_codes(response))}"


def _write_txn_markers(ctx: RequestContext, request: WriteTxnMarkersRequest, response: Any) -> str | None:
    if _inter_broker(ctx):
        return None
    asked = "; ".join(
        f"{'COMMIT' if m.transaction_result else 'ABORT'} marker for producer {m.producer_id} "
        f"epoch {m.producer_epoch} on " + ", ".join(f"{t.name}-{p}" for t in m.topics for p in t.partition_indexes)
        for m in request.markers)
    codes = [(f"{t.name}-{p.partition_index}", int(p.error_code))
             for m in response.markers for t in m.topics for p in t.partitions]
    return f"write {asked}: {_outcome(codes)}"


def _members_commit(request: OffsetCommitRequest) -> bool:
    """A group member's commit (generation or member id): the group's own business."""
    return request.generation_id_or_member_epoch >= 0 or bool(request.member_id)


def _offset_commit(ctx: RequestContext, request: OffsetCommitRequest, response: Any) -> str | None:
    if _members_commit(request):
        return None
    asked = ", ".join(f"{t.name}-{p.partition_index} to {p.committed_offset}"
                      for t in request.topics for p in t.partitions)
    return f"commit offsets of group {request.group_id} (no generation) {asked}: {_outcome(_partition_codes(response))}"


def _offset_delete(ctx: RequestContext, request: OffsetDeleteRequest, response: Any) -> str:
    asked = ", ".join(f"{t.name}-{p.partition_index}" for t in request.topics for p in t.partitions)
    codes = [("group", int(response.error_code)), *_partition_codes(response)]
    return f"delete committed offsets of group {request.group_id} for {asked}: {_outcome(codes)}"


def _delete_groups(ctx: RequestContext, request: DeleteGroupsRequest, response: Any) -> str:
    codes = [(str(r.group_id), int(r.error_code)) for r in response.results]
    return f"delete groups {', '.join(request.groups_names)}: {_outcome(codes)}"


def _delete_topics(ctx: RequestContext, request: DeleteTopicsRequest, response: Any) -> str:
    # v6 names topics in ``topics`` (a name or a topic id), v1-v5 in ``topic_names``
    names = [str(n) for n in getattr(request, "topic_names", ())] or [
        str(t.name or t.topic_id) for t in getattr(request, "topics", ())]
    codes = [(str(r.name), int(r.error_code)) for r in response.responses]
    return f"delete topics {', '.join(names)}: {_outcome(codes)}"


def _config_value(name: str, value: str | None) -> str:
    return "[hidden]" if any(m in name for m in _SECRET_MARKERS) else str(value)


def _alter_configs(ctx: RequestContext, request: AlterConfigsRequest | IncrementalAlterConfigsRequest,
                   response: Any) -> str:
    incremental = ctx.api_key == ApiKey.INCREMENTAL_ALTER_CONFIGS
    asked = "; ".join(
        f"resource type {r.resource_type} {r.resource_name!r}: " + ", ".join(
            (f"op {getattr(c, 'config_operation', 0)} " if incremental else "")
            + f"{c.name}={_config_value(c.name, c.value)}" for c in r.configs)
        for r in request.resources)
    codes = [(repr(r.resource_name), int(r.error_code)) for r in response.responses]
    validate = " (validate only)" if request.validate_only else ""
    return f"alter configs{validate} {asked}: {_outcome(codes)}"


_AUDITED: dict[int, Callable[[RequestContext, Any, Any], str | None]] = {
    ApiKey.DELETE_RECORDS: _delete_records,
    ApiKey.WRITE_TXN_MARKERS: _write_txn_markers,
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.OFFSET_DELETE: _offset_delete,
    ApiKey.DELETE_GROUPS: _delete_groups,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.ALTER_CONFIGS: _alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _alter_configs,
}


# What the dispatcher checks before calling ``record``: Produce, Fetch and the rest pay one
# set lookup.
AUDITED_APIS = frozenset(_AUDITED)


def _inter_broker(ctx: RequestContext) -> bool:
    """A request from another broker of this cluster (the channel's client.id)."""
    return ctx.state.metadata_support.is_inter_broker(ctx.client_id)


def _level(ctx: RequestContext, request: Any) -> int:
    """INFO; DEBUG for a no-generation OffsetCommit to a group this connection already had one
    audited for (a standalone consumer committing as it goes)."""
    if ctx.api_key != ApiKey.OFFSET_COMMIT or ctx.session is None or _members_commit(request):
        return logging.INFO
    seen = ctx.session.audited_commit_groups
    if request.group_id in seen:
        return logging.DEBUG
    seen.add(request.group_id)
    return logging.INFO


def record(ctx: RequestContext, request: Any, response: Any) -> None:
    """Log ``request`` (answered with ``response``) when it is an audited mutation."""
    describe = _AUDITED.get(ctx.api_key)
    if describe is None or response is None or not log.isEnabledFor(logging.INFO):
        return  # not audited, or the audit logger is off: no line is built
    level = _level(ctx, request)
    if level != logging.INFO and not log.isEnabledFor(level):
        return
    line = describe(ctx, request, response)
    if line is not None:
        log.log(level, "%s by client.id=%s principal=%s peer=%s: %s", _api_name(ctx.api_key), ctx.client_id,
                ctx.principal, ctx.client_address, line)


def _api_name(api_key: int) -> str:
    return "".join(part.capitalize() for part in ApiKey(api_key).name.split("_"))

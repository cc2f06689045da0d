"""One handler class per coordinator request of the producer (KIP-98's request order):
FindCoordinator → InitProducerId → AddPartitionsToTxn → (Produce) → AddOffsetsToTxn →
TxnOffsetCommit → EndTxn.

Each handler builds its request for the broker's versions (``build``) and reads the
response (``handle_response``), updating the transaction manager and completing its
result; it answers the sender with an ``Outcome``: done, retry after a back-off, or find
the coordinator again and retry. Errors are dispatched through each handler's table of
error code → ``Action`` (``ERRORS``); a code not in the table is retried when it is
retriable and otherwise gets the handler's ``DEFAULT``. The actions follow Kafka's
TransactionManager handlers and KIP-98's classification of the error codes.

What a handler must never do: I/O or sleeping — the sender sends, waits and backs off.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from enum import Enum, auto
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, cast

from eoslog.client.errors import KafkaError, ProducerFencedError, error_for
from eoslog.client.producer.txn_state import (
    CoordinatorType,
    ProducerIdAndEpoch,
    TopicPartition,
    TransactionView,
    TxnResult,
)
from eoslog.client.types import ConsumerGroupMetadata, OffsetAndMetadata
from eoslog.client.versions import ApiVersionTable
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import build, request_types

if TYPE_CHECKING:
    from eoslog.protocol.requests import (
        AddOffsetsToTxnRequest,
        AddPartitionsToTxnRequest,
        EndTxnRequest,
        FindCoordinatorRequest,
        InitProducerIdRequest,
        TxnOffsetCommitRequest,
    )
    from eoslog.protocol.responses import (
        AddOffsetsToTxnResponse,
        AddPartitionsToTxnResponse,
        EndTxnResponse,
        FindCoordinatorResponse,
        InitProducerIdResponse,
        TxnOffsetCommitResponse,
    )

E = ErrorCode


class Outcome(Enum):
    DONE = auto()
    RETRY = auto()
    LOOKUP = auto()  # the coordinator moved or is unknown: find it, then retry


class Action(Enum):
    RETRY = auto()
    LOOKUP_COORDINATOR = auto()
    FENCED = auto()  # fatal, reported as ProducerFencedError whatever the code
    FATAL = auto()
    ABORTABLE = auto()
    # Java's abortableErrorIfPossible: the coordinator no longer knows this producer id (the
    # transactional id expired, KIP-360); abortable, and the abort gets a new id or epoch.
    ABORTABLE_BUMP = auto()
    IGNORE = auto()  # a partition-level code that says nothing about this request


# Shared by the transaction coordinator's requests.
_COORDINATOR_ERRORS: dict[int, Action] = {
    E.not_coordinator: Action.LOOKUP_COORDINATOR,
    E.coordinator_not_available: Action.LOOKUP_COORDINATOR,
    E.coordinator_load_in_progress: Action.RETRY,
    E.concurrent_transactions: Action.RETRY,
    E.invalid_producer_epoch: Action.FENCED,
    E.producer_fenced: Action.FENCED,
    E.transactional_id_authorization_failed: Action.FATAL,
    E.cluster_authorization_failed: Action.FATAL,
    E.unsupported_version: Action.FATAL,
}


class TxnRequestHandler:
    api_key: ClassVar[int]
    max_version: ClassVar[int]
    min_version: ClassVar[int] = 0
    priority: ClassVar[int]  # lower goes first (Java's FIND_COORDINATOR < INIT < ADD < END)
    coordinator_type: CoordinatorType | None = CoordinatorType.TRANSACTION
    ERRORS: ClassVar[Mapping[int, Action]] = _COORDINATOR_ERRORS
    DEFAULT: ClassVar[Action] = Action.FATAL

    def __init__(self, tm: TransactionView, result: TxnResult) -> None:
        self.tm = tm
        self.result = result
        self.backoff_s: float | None = None  # overrides retry.backoff.ms for the next retry
        # A request to queue once this one is done (AddOffsetsToTxn → TxnOffsetCommit): the
        # sender queues it, so handlers never reach into the manager's queue.
        self.follow_up: TxnRequestHandler | None = None

    def __repr__(self) -> str:
        return type(self).__name__

    def coordinator_key(self) -> str:
        return self.tm.transactional_id or ""

    def build(self, versions: ApiVersionTable) -> object:
        version = versions.pick(self.api_key, self.max_version, self.min_version)
        return self.request(request_types(self.api_key, version), version)

    def request(self, m: ModuleType, version: int) -> object:
        raise NotImplementedError

    def handle_response(self, response: Any) -> Outcome:
        """``response``: kio's answer to ``build``'s request; each handler names its union."""
        raise NotImplementedError

    # -- error dispatch -----------------------------------------------------------------------

    def action_for(self, code: int) -> Action:
        action = self.ERRORS.get(code)
        if action is not None:
            return action
        return Action.RETRY if error_for(code).retriable else self.DEFAULT

    def on_error(self, code: int, message: str | None = None) -> Outcome:
        return _ACTIONS[self.action_for(code)](self, code, message)

    def fatal(self, error: BaseException) -> Outcome:
        self.tm.transition_to_fatal(error)
        self.result.fail(error)
        return Outcome.DONE

    def abortable(self, error: BaseException, *, bump: bool = False) -> Outcome:
        if isinstance(error, KafkaError):
            error.txn_requires_abort = True
        if bump and not self.tm.transaction_v2:  # under version 2 the abort's EndTxn bumps
            self.tm.epoch_bump_required = True
        self.tm.transition_to_abortable(error)
        self.result.fail(error)
        return Outcome.DONE

    def producer_fields(self) -> dict[str, str | int | None]:
        return {
            "transactional_id": self.tm.transactional_id,
            "producer_id": self.tm.producer.producer_id,
            "producer_epoch": self.tm.producer.epoch,
        }


def _fenced(h: TxnRequestHandler, code: int, message: str | None) -> Outcome:
    return h.fatal(ProducerFencedError(
        message or f"There is a newer producer with the same transactional.id {h.tm.transactional_id!r} "
                   f"(the coordinator answered {E(code).name.upper()}): this one is fenced"
    ))


_ACTIONS: dict[Action, Callable[[TxnRequestHandler, int, str | None], Outcome]] = {
    Action.RETRY: lambda h, code, message: Outcome.RETRY,
    Action.LOOKUP_COORDINATOR: lambda h, code, message: Outcome.LOOKUP,
    Action.FENCED: _fenced,
    Action.FATAL: lambda h, code, message: h.fatal(error_for(code, message or f"{h!r}")),
    Action.ABORTABLE: lambda h, code, message: h.abortable(error_for(code, message or f"{h!r}")),
    Action.ABORTABLE_BUMP: lambda h, code, message: h.abortable(error_for(code, message or f"{h!r}"), bump=True),
    Action.IGNORE: lambda h, code, message: Outcome.DONE,
}


class FindCoordinatorHandler(TxnRequestHandler):
    api_key = ApiKey.FIND_COORDINATOR
    max_version = 4
    min_version = 1  # key_type arrived in v1
    priority = 0
    coordinator_type = None
    ERRORS = {
        E.coordinator_not_available: Action.RETRY,
        E.not_coordinator: Action.RETRY,
        E.transactional_id_authorization_failed: Action.FATAL,
        E.group_authorization_failed: Action.ABORTABLE,
    }

    def __init__(self, tm: TransactionView, result: TxnResult, kind: CoordinatorType, key: str,
                 on_found: Callable[[int, str, int], None]) -> None:
        super().__init__(tm, result)
        self.kind = kind
        self.key = key
        self.on_found = on_found

    def request(self, m: ModuleType, version: int) -> FindCoordinatorRequest:
        return cast("FindCoordinatorRequest", build(
            m.FindCoordinatorRequest, key=self.key, key_type=self.kind.value, coordinator_keys=(self.key,)))

    def handle_response(self, response: FindCoordinatorResponse) -> Outcome:
        entry = response.coordinators[0] if hasattr(response, "coordinators") else response
        code = int(entry.error_code)
        if code != 0:
            return self.on_error(code, getattr(entry, "error_message", None))  # (v0, which min_version skips, lacks it)
        node_id = int(entry.node_id)
        self.on_found(node_id, str(entry.host), int(entry.port))
        self.tm.set_coordinator(self.kind, self.key, node_id)
        return Outcome.DONE


class InitProducerIdHandler(TxnRequestHandler):
    api_key = ApiKey.INIT_PRODUCER_ID
    max_version = 6
    priority = 1

    def __init__(self, tm: TransactionView, result: TxnResult, *, epoch_bump: bool) -> None:
        super().__init__(tm, result)
        self.epoch_bump = epoch_bump
        if not tm.transactional:
            # An idempotent producer's id comes from any broker (Kafka's TransactionCoordinator
            # hands one out to an InitProducerId without a transactional id).
            self.coordinator_type = None

    def build(self, versions: ApiVersionTable) -> InitProducerIdRequest:
        # Bumping the epoch of an existing producer id needs v3 (KIP-360); two-phase
        # commit v6 (KIP-939): an older broker gets no request, and we fail (UnsupportedVersion).
        two_pc = self.tm.transactional and self.tm.enable_2pc
        version = versions.pick(self.api_key, self.max_version, 6 if two_pc else 3 if self.epoch_bump else 0)
        return self.request(request_types(self.api_key, version), version)

    def request(self, m: ModuleType, version: int) -> InitProducerIdRequest:
        tm = self.tm
        producer = tm.producer if self.epoch_bump else ProducerIdAndEpoch(-1, -1)
        two_pc = tm.transactional and tm.enable_2pc
        return cast("InitProducerIdRequest", build(
            m.InitProducerIdRequest,
            transactional_id=tm.transactional_id,
            transaction_timeout=datetime.timedelta(milliseconds=tm.transaction_timeout_ms),
            producer_id=producer.producer_id,
            producer_epoch=producer.epoch,
            enable2_pc=two_pc,
            keep_prepared_txn=two_pc and tm.keep_prepared_txn and not self.epoch_bump,
        ))

    def handle_response(self, response: InitProducerIdResponse) -> Outcome:
        code = int(response.error_code)
        if code != 0:
            return self.on_error(code)
        tm = self.tm
        producer = ProducerIdAndEpoch(int(response.producer_id), int(response.producer_epoch))
        if self.epoch_bump:
            tm.on_epoch_bumped(producer)
        else:
            ongoing = ProducerIdAndEpoch(int(getattr(response, "ongoing_txn_producer_id", -1)),
                                         int(getattr(response, "ongoing_txn_producer_epoch", -1)))
            tm.on_initialized(producer, ongoing)
        self.result.succeed()
        return Outcome.DONE


class AddPartitionsToTxnHandler(TxnRequestHandler):
    api_key = ApiKey.ADD_PARTITIONS_TO_TXN
    max_version = 3  # v4+ batch several transactions: brokers only (KIP-890)
    priority = 2
    ERRORS = {
        **_COORDINATOR_ERRORS,
        E.unknown_topic_or_partition: Action.RETRY,
        E.invalid_producer_id_mapping: Action.ABORTABLE_BUMP,
        E.invalid_txn_state: Action.FATAL,
        E.topic_authorization_failed: Action.ABORTABLE,
        E.unknown_producer_id: Action.ABORTABLE_BUMP,
        E.operation_not_attempted: Action.IGNORE,
    }
    DEFAULT = Action.ABORTABLE

    def __init__(self, tm: TransactionView, result: TxnResult, partitions: set[TopicPartition]) -> None:
        super().__init__(tm, result)
        self.partitions = partitions

    def request(self, m: ModuleType, version: int) -> AddPartitionsToTxnRequest:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(self.partitions):
            by_topic.setdefault(topic, []).append(partition)
        tm = self.tm
        return cast("AddPartitionsToTxnRequest", build(
            m.AddPartitionsToTxnRequest,
            v3_and_below_transactional_id=tm.transactional_id,
            v3_and_below_producer_id=tm.producer.producer_id,
            v3_and_below_producer_epoch=tm.producer.epoch,
            v3_and_below_topics=tuple(
                build(m.AddPartitionsToTxnTopic, name=t, partitions=tuple(ps)) for t, ps in by_topic.items()
            ),
        ))

    def handle_response(self, response: AddPartitionsToTxnResponse) -> Outcome:
        assert hasattr(response, "results_by_topic_v3_and_below")  # max_version 3
        codes = [
            int(p.partition_error_code)
            for t in response.results_by_topic_v3_and_below
            for p in t.results_by_partition
        ]
        worst = _most_severe(self, codes)
        if worst is None:
            self.tm.partitions_added(self.partitions)
            self.result.succeed()
            return Outcome.DONE
        if worst == E.concurrent_transactions:
            # The previous transaction is still completing; Java retries sooner than usual.
            self.backoff_s = 0.02
        outcome = self.on_error(worst)
        if outcome is Outcome.DONE:
            self.tm.partitions_not_added(self.partitions)
        return outcome


class AddOffsetsToTxnHandler(TxnRequestHandler):
    api_key = ApiKey.ADD_OFFSETS_TO_TXN
    max_version = 4
    priority = 2
    ERRORS = {
        **_COORDINATOR_ERRORS,
        E.group_authorization_failed: Action.ABORTABLE,
        E.unknown_producer_id: Action.ABORTABLE_BUMP,
        E.invalid_producer_id_mapping: Action.ABORTABLE_BUMP,
        E.invalid_txn_state: Action.FATAL,
    }

    def __init__(self, tm: TransactionView, result: TxnResult,
                 offsets: dict[TopicPartition, OffsetAndMetadata], group: ConsumerGroupMetadata) -> None:
        super().__init__(tm, result)
        self.offsets = offsets
        self.group = group

    def request(self, m: ModuleType, version: int) -> AddOffsetsToTxnRequest:
        return cast("AddOffsetsToTxnRequest", build(
            m.AddOffsetsToTxnRequest, group_id=self.group.group_id, **self.producer_fields()))

    def handle_response(self, response: AddOffsetsToTxnResponse) -> Outcome:
        code = int(response.error_code)
        if code != 0:
            return self.on_error(code)
        # The __consumer_offsets partition is in the transaction; now the offsets themselves.
        self.tm.transaction_started = True
        self.follow_up = TxnOffsetCommitHandler(self.tm, self.result, self.offsets, self.group)
        return Outcome.DONE


class TxnOffsetCommitHandler(TxnRequestHandler):
    api_key = ApiKey.TXN_OFFSET_COMMIT
    max_version = 5  # v5: the group coordinator adds the partition itself (transaction version 2)
    priority = 2
    coordinator_type = CoordinatorType.GROUP
    ERRORS = {
        E.coordinator_not_available: Action.LOOKUP_COORDINATOR,
        E.not_coordinator: Action.LOOKUP_COORDINATOR,
        E.request_timed_out: Action.LOOKUP_COORDINATOR,
        E.coordinator_load_in_progress: Action.RETRY,
        E.unknown_topic_or_partition: Action.RETRY,
        E.concurrent_transactions: Action.RETRY,
        E.unstable_offset_commit: Action.RETRY,
        E.group_authorization_failed: Action.ABORTABLE,
        E.unknown_member_id: Action.ABORTABLE,
        E.illegal_generation: Action.ABORTABLE,
        # A consumer-protocol member's stale epoch (a zombie of a KIP-848 group): abortable, as Kafka 4.4's
        # TxnOffsetCommitHandler makes it (with GROUP_ID_NOT_FOUND).
        E.stale_member_epoch: Action.ABORTABLE,
        E.group_id_not_found: Action.ABORTABLE,
        E.fenced_instance_id: Action.ABORTABLE,
        E.rebalance_in_progress: Action.ABORTABLE,
        E.invalid_producer_epoch: Action.FENCED,
        E.producer_fenced: Action.FENCED,
        E.transactional_id_authorization_failed: Action.FATAL,
        E.unsupported_for_message_format: Action.FATAL,
    }

    def __init__(self, tm: TransactionView, result: TxnResult,
                 offsets: dict[TopicPartition, OffsetAndMetadata], group: ConsumerGroupMetadata,
                 *, transaction_v2: bool = False) -> None:
        super().__init__(tm, result)
        self.pending = dict(offsets)
        self.group = group
        self.transaction_v2 = transaction_v2

    def coordinator_key(self) -> str:
        return self.group.group_id

    def build(self, versions: ApiVersionTable) -> object:
        # v5 only under transaction version 2 (it would add the partition on a version 1 one).
        version = versions.pick(self.api_key, self.max_version if self.transaction_v2 else 4)
        return self.request(request_types(self.api_key, version), version)

    def request(self, m: ModuleType, version: int) -> TxnOffsetCommitRequest:
        by_topic: dict[str, list[object]] = {}
        for (topic, partition), offset in sorted(self.pending.items()):
            by_topic.setdefault(topic, []).append(build(
                m.TxnOffsetCommitRequestPartition, partition_index=partition, committed_offset=offset.offset,
                committed_leader_epoch=offset.leader_epoch, committed_metadata=offset.metadata,
            ))
        g = self.group
        return cast("TxnOffsetCommitRequest", build(
            m.TxnOffsetCommitRequest, group_id=g.group_id, generation_id=g.generation_id, member_id=g.member_id,
            group_instance_id=g.group_instance_id,
            topics=tuple(build(m.TxnOffsetCommitRequestTopic, name=t, partitions=tuple(ps))
                         for t, ps in by_topic.items()),
            **self.producer_fields(),
        ))

    def handle_response(self, response: TxnOffsetCommitResponse) -> Outcome:
        codes = []
        for t in response.topics:
            for p in t.partitions:
                code = int(p.error_code)
                codes.append(code)
                if code == 0:
                    self.pending.pop((str(t.name), int(p.partition_index)), None)
        worst = _most_severe(self, codes)
        if worst is None:
            self.result.succeed()
            return Outcome.DONE
        return self.on_error(worst)


class EndTxnHandler(TxnRequestHandler):
    api_key = ApiKey.END_TXN
    max_version = 5  # v5: transaction version 2, the coordinator bumps the epoch and says so
    priority = 3
    ERRORS = {**_COORDINATOR_ERRORS, E.invalid_txn_state: Action.FATAL,
              E.unknown_producer_id: Action.ABORTABLE_BUMP, E.invalid_producer_id_mapping: Action.ABORTABLE_BUMP}

    def __init__(self, tm: TransactionView, result: TxnResult, *, commit: bool, transaction_v2: bool = False) -> None:
        super().__init__(tm, result)
        self.commit = commit
        self.transaction_v2 = transaction_v2

    def build(self, versions: ApiVersionTable) -> object:
        version = versions.pick(self.api_key, self.max_version if self.transaction_v2 else 4)
        return self.request(request_types(self.api_key, version), version)

    def request(self, m: ModuleType, version: int) -> EndTxnRequest:
        return cast("EndTxnRequest", build(m.EndTxnRequest, committed=self.commit, **self.producer_fields()))

    def handle_response(self, response: EndTxnResponse) -> Outcome:
        code = int(response.error_code)
        if code == E.invalid_producer_id_mapping and not self.commit and self.transaction_v2:
            # The coordinator forgot the transactional id (it expires only with no transaction
            # open), so nothing of this one was written: every Produce v12 needed the coordinator
            # to add its partition. The abort is done; the next transaction starts under a new
            # producer id (InitProducerId), as after version 1's refused AddPartitionsToTxn.
            self.tm.epoch_bump_required = True
            self.tm.complete_transaction(self.result)
            return Outcome.DONE
        if code != 0:
            return self.on_error(code)
        producer = ProducerIdAndEpoch(int(getattr(response, "producer_id", -1)),  # v5+
                                      int(getattr(response, "producer_epoch", -1)))
        if producer.valid:
            self.tm.on_end_txn_epoch(producer)
        self.tm.complete_transaction(self.result)
        return Outcome.DONE


# When a response carries several partition errors, the most severe decides (in Java's
# handlers a lookup or a retry returns before the abortable errors are acted on).
_SEVERITY = {a: i for i, a in enumerate(
    (Action.FENCED, Action.FATAL, Action.LOOKUP_COORDINATOR, Action.RETRY, Action.ABORTABLE_BUMP, Action.ABORTABLE,
     Action.IGNORE)
)}


def _most_severe(handler: TxnRequestHandler, codes: list[int]) -> int | None:
    """The non-zero code whose action is the most severe; None when every code is 0 or ignored."""
    worst: tuple[int, int] | None = None
    for code in codes:
        if code == 0:
            continue
        rank = _SEVERITY[handler.action_for(code)]
        if rank < _SEVERITY[Action.IGNORE] and (worst is None or rank < worst[1]):
            worst = (code, rank)
    return worst[0] if worst is not None else None

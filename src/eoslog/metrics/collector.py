"""The broker's state as Prometheus metrics, read when Prometheus scrapes (a custom
Collector): nothing here runs on the request path.

Names follow Kafka's JMX metrics as Prometheus' JMX exporter spells them
(``kafka.log:type=Log,name=LogEndOffset`` → ``kafka_log_log_logendoffset``); metrics Kafka
has no JMX name for are ``eoslog_*`` (the high watermark and LSO of a partition, its open
transactions) or follow kafka_exporter (``kafka_consumergroup_lag``). docs/operations.md
lists them all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

import eoslog
from eoslog.coordinator.group import GroupCoordinator
from eoslog.coordinator.group.state import GroupState
from eoslog.coordinator.transaction import TransactionCoordinator
from eoslog.coordinator.transaction.state import TxnState
from eoslog.quotas.client import ClientQuotas
from eoslog.replica import ReplicaManager
from eoslog.replica.stats import ISOLATION_NAMES
from eoslog.storage import LogManager
from eoslog.types import TopicPartition

TWO_PHASE_COMMIT_TIMEOUT_MS = 2**31 - 1  # KIP-939: such a transaction has no timeout
_OPEN = frozenset({TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT})
_PARTITION = ["topic", "partition"]


class BrokerView(Protocol):
    """The broker's shared state as the collector reads it (``broker.context.BrokerState``):
    described here, so metrics sits below the broker that builds it and imports nothing of it."""

    @property
    def node_id(self) -> int: ...
    @property
    def clock_ms(self) -> Callable[[], int]: ...
    @property
    def logs(self) -> LogManager: ...
    @property
    def replicas(self) -> ReplicaManager: ...
    @property
    def group_coordinator(self) -> GroupCoordinator: ...
    @property
    def txn_coordinator(self) -> TransactionCoordinator: ...
    @property
    def client_quotas(self) -> ClientQuotas: ...


@dataclass
class BrokerFacts:
    """What the collector reads besides the shared state: live connections per listener
    and the coordinators' last partition load times (seconds, set by the broker)."""

    connections: Callable[[], Mapping[str, int]]
    load_seconds: dict[str, float] = field(default_factory=dict)


def _quota_families(quotas: ClientQuotas, replicas: ReplicaManager) -> Iterator[Metric]:
    """Kafka's per-client quota metrics (kafka.server:type=Produce|Fetch|Request|ControllerMutation,
    user=..,client-id=..: byte-rate / request-time / mutation-rate and throttle-time), and the
    replication throttles' bytes (LeaderReplication / FollowerReplication byte-rate)."""
    rate = _gauge("kafka_server_quota_rate", "what a client moved per second, as its quota measures it "
                  "(bytes, percent of a thread, partition mutations)", ["quota", "user", "client_id"])
    limit = _gauge("kafka_server_quota_limit", "the quota that applies to the client", ["quota", "user", "client_id"])
    throttled = CounterMetricFamily("kafka_server_quota_throttle_time_ms", "time the client's responses asked it "
                                    "to wait and its connection was muted", labels=["quota", "user", "client_id"])
    for qtype, user, client_id, measured, bound, throttle_ms in quotas.rates():
        labels = [qtype.value, user, client_id]
        rate.add_metric(labels, measured)
        if bound is not None:
            limit.add_metric(labels, bound)
        throttled.add_metric(labels, throttle_ms)
    replication = CounterMetricFamily("kafka_server_replication_throttled_bytes", "bytes of throttled replicas "
                                      "sent as leader or fetched as follower", labels=["side"])
    replication.add_metric(["leader"], replicas.leader_quota.throttled_bytes)
    replication.add_metric(["follower"], replicas.follower_quota.throttled_bytes)
    yield from (rate, limit, throttled, replication)


def _gauge(name: str, doc: str, labels: Iterable[str] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=list(labels))


class BrokerCollector(Collector):
    def __init__(self, state: BrokerView, facts: BrokerFacts) -> None:
        self.state = state
        self.facts = facts

    def collect(self) -> Iterator[Metric]:
        now_ms = self.state.clock_ms()
        yield from self._partitions(now_ms)
        yield from self._topics()
        yield from self._fetch_waits()
        yield from self._transactions(now_ms)
        yield from self._groups()
        yield from self._quotas()
        conns = _gauge("kafka_server_socket_server_metrics_connection_count",
                       "open client connections (Kafka: socket-server-metrics connection-count)", ["listener"])
        for listener, n in sorted(self.facts.connections().items()):
            conns.add_metric([listener], n)
        yield conns
        load = _gauge("eoslog_coordinator_partition_load_time_max_seconds",
                      "time the coordinator took to load its partitions at start-up (Kafka: "
                      "group-coordinator-metrics / transaction-coordinator-metrics partition-load-time-max)",
                      ["coordinator"])
        for coordinator, seconds in sorted(self.facts.load_seconds.items()):
            load.add_metric([coordinator], seconds)
        yield load
        info = _gauge("kafka_server_app_info", "1, labelled with this broker's id and software version "
                      "(Kafka: kafka.server:type=app-info Version)", ["id", "version"])
        info.add_metric([str(self.state.node_id), eoslog.__version__], 1)
        yield info

    def _partitions(self, now_ms: int) -> Iterator[Metric]:
        leo = _gauge("kafka_log_log_logendoffset", "log end offset (Kafka: Log LogEndOffset)", _PARTITION)
        lso_start = _gauge("kafka_log_log_logstartoffset", "log start offset (Kafka: Log LogStartOffset)", _PARTITION)
        size = _gauge("kafka_log_log_size", "bytes in the partition's segments (Kafka: Log Size)", _PARTITION)
        segments = _gauge("kafka_log_log_numlogsegments", "segments (Kafka: Log NumLogSegments)", _PARTITION)
        hw = _gauge("eoslog_partition_highwatermark", "high watermark (no Kafka JMX metric)", _PARTITION)
        lso = _gauge("eoslog_partition_laststableoffset", "last stable offset: read_committed consumers read "
                     "below it (no Kafka JMX metric)", _PARTITION)
        lso_lag = _gauge("kafka_cluster_partition_laststableoffsetlag", "high watermark minus last stable offset "
                         "(Kafka: Partition LastStableOffsetLag)", _PARTITION)
        open_txns = _gauge("eoslog_partition_open_transactions", "transactions open in the partition", _PARTITION)
        oldest = _gauge("eoslog_partition_oldest_open_transaction_age_seconds", "age of the partition's oldest "
                        "open transaction, from its first batch's timestamp (only partitions with one)", _PARTITION)
        under = _gauge("kafka_cluster_partition_underreplicated", "1 when the ISR is smaller than the replicas "
                       "(Kafka: Partition UnderReplicated)", _PARTITION)
        producers = leaders = under_total = 0
        logs = self.state.logs.logs
        for (topic, p), plog in sorted(logs.items()):
            labels = [topic, str(p)]
            leo.add_metric(labels, plog.log_end_offset)
            lso_start.add_metric(labels, plog.log_start_offset)
            size.add_metric(labels, plog.size_bytes)
            segments.add_metric(labels, len(plog.segments))
            hw.add_metric(labels, plog.high_watermark)
            stable = plog.last_stable_offset
            lso.add_metric(labels, stable)
            lso_lag.add_metric(labels, plog.high_watermark - stable)
            ongoing = plog.producer_state.ongoing
            open_txns.add_metric(labels, len(ongoing))
            if ongoing:
                started = plog.batch_timestamp(min(ongoing.values()))
                if started is not None:
                    oldest.add_metric(labels, max(0, now_ms - started) / 1000)
            producers += len(plog.producer_state.producers)
            partition = self.state.replicas.get_partition(TopicPartition(topic, p))
            if partition is not None and partition.is_leader:
                leaders += 1
                lagging = int(len(partition.isr) < len(partition.replicas))
                under.add_metric(labels, lagging)
                under_total += lagging
        yield from (leo, lso_start, size, segments, hw, lso, lso_lag, open_txns, oldest, under)
        for name, doc, value in (
            ("kafka_server_replicamanager_partitioncount", "partitions on this broker (Kafka: ReplicaManager "
             "PartitionCount)", len(logs)),
            ("kafka_server_replicamanager_leadercount", "partitions led here (Kafka: ReplicaManager LeaderCount)",
             leaders),
            ("kafka_server_replicamanager_underreplicatedpartitions", "led partitions whose ISR is smaller than "
             "their replicas (Kafka: ReplicaManager UnderReplicatedPartitions)", under_total),
            ("kafka_server_replicamanager_produceridcount", "producer ids with state in the partitions (Kafka: "
             "ReplicaManager ProducerIdCount)", producers),
        ):
            g = _gauge(name, doc)
            g.add_metric([], value)
            yield g

    def _topics(self) -> Iterator[Metric]:
        stats = self.state.replicas.stats
        for name, doc, counts in (
            ("kafka_server_brokertopicmetrics_bytesin", "bytes produced by clients (Kafka: BrokerTopicMetrics "
             "BytesInPerSec)", stats.bytes_in),
            ("kafka_server_brokertopicmetrics_messagesin", "records produced by clients (Kafka: BrokerTopicMetrics "
             "MessagesInPerSec)", stats.messages_in),
            ("kafka_server_brokertopicmetrics_bytesout", "bytes fetched by consumers (Kafka: BrokerTopicMetrics "
             "BytesOutPerSec)", stats.bytes_out),
            ("kafka_server_brokertopicmetrics_replicationbytesout", "bytes fetched by followers (Kafka: "
             "BrokerTopicMetrics ReplicationBytesOutPerSec)", stats.replication_bytes_out),
            ("kafka_server_brokertopicmetrics_failedproducerequests", "partition appends refused (Kafka: "
             "BrokerTopicMetrics FailedProduceRequestsPerSec)", stats.failed_produce),
        ):
            c = CounterMetricFamily(name, doc, labels=["topic"])
            for topic, n in sorted(counts.items()):
                c.add_metric([topic], n)
            yield c

    def _fetch_waits(self) -> Iterator[Metric]:
        replicas = self.state.replicas
        size = _gauge("kafka_server_delayedoperationpurgatory_purgatorysize", "(request, partition) pairs "
                      "waiting in a purgatory now (Kafka: DelayedOperationPurgatory PurgatorySize)",
                      ["delayedoperation"])
        size.add_metric(["Fetch"], replicas.fetch_purgatory.waiting())
        size.add_metric(["Produce"], replicas.produce_purgatory.waiting())
        yield size
        waits = replicas.fetch_waits
        ended = CounterMetricFamily("eoslog_fetch_delayed_waits", "consumer fetches' waits in the fetch "
                                    "purgatory by how they ended: woken (records readable), expired (max_wait_ms; "
                                    "Kafka: DelayedFetchMetrics ExpiresPerSec), not_readable (woken, waited again)",
                                    labels=["isolation", "outcome"])
        for isolation in ISOLATION_NAMES:
            for outcome in ("woken", "expired", "not_readable"):
                ended.add_metric([isolation, outcome], waits.outcomes[isolation, outcome])
        yield ended
        delay = HistogramMetricFamily("eoslog_fetch_delayed_wake_seconds", "from the append that made a waiting "
                                      "fetch's records readable (for read_committed, the LSO advance) to its answer",
                                      labels=["isolation"])
        for isolation, h in waits.wake_delay.items():
            delay.add_metric([isolation], h.cumulative(), h.total)
        yield delay

    def _transactions(self, now_ms: int) -> Iterator[Metric]:
        coordinator = self.state.txn_coordinator
        by_state: Counter[str] = Counter()
        oldest_s = 0.0
        past_timeout = 0
        for m in coordinator.state.owned_transactions():
            if m.state is TxnState.DEAD:
                continue
            by_state[m.state.kafka_name] += 1
            if m.state in _OPEN:
                age_ms = max(0, now_ms - m.txn_start_timestamp)
                oldest_s = max(oldest_s, age_ms / 1000)
                if m.txn_timeout_ms != TWO_PHASE_COMMIT_TIMEOUT_MS and age_ms > m.txn_timeout_ms:
                    past_timeout += 1
        states = _gauge("eoslog_transaction_coordinator_transactions", "transactional ids this coordinator owns, "
                        "by state", ["state"])
        for state in TxnState:
            if state is not TxnState.DEAD:
                states.add_metric([state.kafka_name], by_state[state.kafka_name])
        yield states
        oldest = _gauge("eoslog_transaction_coordinator_oldest_open_seconds",
                        "age of the oldest open transaction this coordinator owns (0: none)")
        oldest.add_metric([], oldest_s)
        yield oldest
        late = _gauge("eoslog_transaction_coordinator_open_past_timeout", "open transactions older than their "
                      "timeout (two-phase-commit ones excepted): the abort scan has not caught them yet")
        late.add_metric([], past_timeout)
        yield late
        counts = coordinator.counts
        completed = CounterMetricFamily("eoslog_transaction_coordinator_completed", "transactions completed "
                                        "(CompleteCommit / CompleteAbort written)", labels=["result"])
        completed.add_metric(["committed"], counts.committed)
        completed.add_metric(["aborted"], counts.aborted)
        yield completed
        timed_out = CounterMetricFamily("eoslog_transaction_coordinator_timed_out", "transactions the coordinator "
                                        "aborted because they outlived their timeout")
        timed_out.add_metric([], counts.timed_out)
        yield timed_out
        phases = HistogramMetricFamily(
            "eoslog_transaction_coordinator_end_phase_seconds", "an ended transaction's second phase: the "
            "PREPARE_* append (prepare), PREPARE_* appended to every marker written (markers), the COMPLETE_* "
            "append (complete)", labels=["phase"])
        for phase, h in counts.end_phases.items():
            phases.add_metric([phase], h.cumulative(), h.total)
        yield phases
        concurrent = CounterMetricFamily(
            "eoslog_transaction_coordinator_concurrent_transactions", "CONCURRENT_TRANSACTIONS answered (after "
            "any hold), per request and what of the id was under way (PrepareCommit>CompleteCommit: its "
            "markers)", labels=["request", "state"])
        for (api, under_way), n in sorted(counts.concurrent.items()):
            concurrent.add_metric([api, under_way], n)
        yield concurrent
        held = HistogramMetricFamily(
            "eoslog_transaction_coordinator_held_seconds", "requests held until their transactional id's "
            "previous step ended, instead of CONCURRENT_TRANSACTIONS (transaction.concurrent.hold.ms)",
            labels=["request"])
        for api, h in sorted(counts.held.items()):
            held.add_metric([api], h.cumulative(), h.total)
        yield held

    def _quotas(self) -> Iterator[Metric]:
        return _quota_families(self.state.client_quotas, self.state.replicas)

    def _groups(self) -> Iterator[Metric]:
        groups = self.state.group_coordinator.groups
        by_state: Counter[GroupState] = Counter(g.state for g in groups.values())
        num = _gauge("kafka_coordinator_group_groupmetadatamanager_numgroups",
                     "groups (Kafka: GroupMetadataManager NumGroups)")
        num.add_metric([], sum(n for s, n in by_state.items() if s is not GroupState.DEAD))
        yield num
        per_state = _gauge("kafka_coordinator_group_groupmetadatamanager_numgroupsbystate", "groups by state "
                           "(Kafka: GroupMetadataManager NumGroupsStable, NumGroupsEmpty, ...)", ["state"])
        for state in GroupState:
            per_state.add_metric([state.value], by_state[state])
        yield per_state
        offsets = _gauge("kafka_coordinator_group_groupmetadatamanager_numoffsets",
                         "committed offsets (Kafka: GroupMetadataManager NumOffsets)")
        current = _gauge("kafka_consumergroup_current_offset", "a group's committed offset (the Kafka exporter's name)",
                         ["consumergroup", *_PARTITION])
        lag = _gauge("kafka_consumergroup_lag", "high watermark minus the committed offset (the Kafka exporter's name)",
                     ["consumergroup", *_PARTITION])
        stable_lag = _gauge("eoslog_consumergroup_lag_stable", "last stable offset minus the committed offset: "
                            "what a read_committed consumer can still read", ["consumergroup", *_PARTITION])
        total = 0
        logs = self.state.logs.logs
        for group_id, group in sorted(groups.items()):
            for tp, record in sorted(group.offsets.committed.items()):
                total += 1
                labels = [group_id, tp.topic, str(tp.partition)]
                committed = record.value.offset
                current.add_metric(labels, committed)
                plog = logs.get((tp.topic, tp.partition))
                if plog is not None:
                    lag.add_metric(labels, max(0, plog.high_watermark - committed))
                    stable_lag.add_metric(labels, max(0, plog.last_stable_offset - committed))
        offsets.add_metric([], total)
        yield from (offsets, current, lag, stable_lag)

"""What each console page shows, gathered through the admin client.

Every function takes the ``Cluster`` of ``eoslog transactions`` (eoslog.tools.transactions:
the blocking admin client plus leader look-ups) over the session's own clients, and returns
plain rows; nothing here renders. Offsets come
from ListOffsets: the log start (earliest), the high watermark (latest, read_uncommitted)
and the last stable offset (latest, read_committed) — the same numbers a consumer sees.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families

from eoslog.client.admin import ConfigResource, ConfigResourceType, IsolationLevel, OffsetSpec
from eoslog.client.errors import KafkaError
from eoslog.client.types import ConsumerRecord, TopicPartition
from eoslog.console.sessions import Clients
from eoslog.tools.transactions import (
    OPEN_STATES,
    Cluster,
    OpenTransaction,
    TransactionDescription,
    candidate_open_transactions,
    describe_transactions,
    hanging_transactions,
    list_transactions,
)

TP = tuple[str, int]


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class PartitionRow:
    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    log_start: int
    last_stable: int
    high_watermark: int
    log_end: int | None  # from the metrics endpoint, when given
    size: int | None

    @property
    def held_back(self) -> int:
        """Records read_committed consumers cannot read yet (high watermark - LSO)."""
        return self.high_watermark - self.last_stable


@dataclass(frozen=True, slots=True)
class OpenTxnRow:
    """A transaction open in one partition, as its leader sees it, and who owns it."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    start_offset: int
    last_write_age_s: float
    partition_lso: int
    partition_hw: int
    owner: str | None  # the transactional id a coordinator lists with this producer id
    status: str  # "hanging", "open", "two-phase commit: awaiting its external coordinator"
    coordinator_state: str | None
    open_for_s: float | None  # since the coordinator's start of the transaction (unknown when hanging)

    @property
    def pins_lso(self) -> bool:
        return self.start_offset == self.partition_lso

    @property
    def held_back(self) -> int:
        """Records from the transaction's first offset to the high watermark: read_committed
        consumers wait for them until it ends."""
        return max(0, self.partition_hw - self.start_offset)

    @property
    def hanging(self) -> bool:
        return self.status == "hanging"


@dataclass(frozen=True, slots=True)
class TxnRow:
    """A transactional id as its coordinator describes it."""

    transactional_id: str
    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    age_s: float | None  # None: no transaction in progress (Ongoing or Prepare*)
    partitions: tuple[TP, ...]
    two_phase_commit: bool

    @property
    def past_timeout(self) -> bool:
        return (self.age_s is not None and not self.two_phase_commit and self.state in OPEN_STATES
                and self.age_s * 1000 > self.timeout_ms)


@dataclass(frozen=True, slots=True)
class GroupPartitionRow:
    topic: str
    partition: int
    committed: int
    high_watermark: int
    last_stable: int

    @property
    def lag(self) -> int:
        return max(0, self.high_watermark - self.committed)

    @property
    def lag_stable(self) -> int:
        """What a read_committed consumer of the group can still read."""
        return max(0, self.last_stable - self.committed)


@dataclass(frozen=True, slots=True)
class GroupRow:
    group_id: str
    state: str
    protocol: str
    members: tuple[tuple[str, str, tuple[TP, ...]], ...]  # (member id, client id, assignment)
    partitions: tuple[GroupPartitionRow, ...]
    type: str = "classic"  # "consumer": a KIP-848 group
    group_epoch: int | None = None  # a KIP-848 group's
    member_epochs: tuple[tuple[str, int], ...] = ()  # (client id, member epoch) of a KIP-848 group's members

    @property
    def lag(self) -> int:
        return sum(p.lag for p in self.partitions)

    @property
    def lag_stable(self) -> int:
        return sum(p.lag_stable for p in self.partitions)


@dataclass(frozen=True, slots=True)
class SharePartitionRow:
    topic: str
    partition: int
    start_offset: int  # every record below is done with (acknowledged or archived)
    high_watermark: int
    lag: int | None  # records not done with, as the broker counts them (None: it does not say)


@dataclass(frozen=True, slots=True)
class ShareGroupRow:
    group_id: str
    state: str
    members: tuple[tuple[str, str, tuple[TP, ...]], ...]  # (member id, client id, assignment)
    partitions: tuple[SharePartitionRow, ...]


@dataclass(frozen=True, slots=True)
class ProducerRow:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    open_txn_start: int | None


# -- metrics endpoint -----------------------------------------------------------------------------


def _scrape(url: str | None) -> list[Metric]:
    """Every metric family an eoslog broker's endpoint serves; none without one."""
    if not url:
        return []
    with urllib.request.urlopen(url, timeout=10) as r:
        return list(text_string_to_metric_families(r.read().decode()))


def scrape_partition_gauges(url: str | None) -> dict[str, dict[TP, float]]:
    """``kafka_log_log_logendoffset`` and ``kafka_log_log_size`` per partition from an eoslog
    broker's metrics endpoint; empty without one (Kafka's protocol does not carry them)."""
    wanted = {"kafka_log_log_logendoffset": "log_end", "kafka_log_log_size": "size"}
    out: dict[str, dict[TP, float]] = {v: {} for v in wanted.values()}
    for family in _scrape(url):
        key = wanted.get(family.name)
        if key is not None:
            for s in family.samples:
                out[key][(s.labels["topic"], int(s.labels["partition"]))] = s.value
    return out


# -- pages -----------------------------------------------------------------------------------------


def topics(cluster: Cluster, internal: bool = False) -> list[str]:
    return sorted(t for t, listing in cluster.admin.list_topics(internal=internal).items()
                  if internal or not listing.is_internal)


def partitions(cluster: Cluster, metrics_url: str | None = None) -> list[PartitionRow]:
    names = topics(cluster)
    if not names:
        return []
    described = cluster.admin.describe_topics(names)
    tps = [TopicPartition(t.name, p.partition) for t in described.values() for p in t.partitions]
    offsets = offsets_of(cluster, tps)
    gauges = scrape_partition_gauges(metrics_url)
    rows = []
    for t in described.values():
        for p in t.partitions:
            start, lso, hw = offsets[(t.name, p.partition)]
            leo, size = gauges["log_end"].get((t.name, p.partition)), gauges["size"].get((t.name, p.partition))
            rows.append(PartitionRow(t.name, p.partition, p.leader, tuple(p.replicas), tuple(p.isr), start, lso, hw,
                                     None if leo is None else int(leo), None if size is None else int(size)))
    return sorted(rows, key=lambda r: (r.topic, r.partition))


def offsets_of(cluster: Cluster, tps: Iterable[TopicPartition]) -> dict[TP, tuple[int, int, int]]:
    """(log start, last stable offset, high watermark) of each partition, by ListOffsets."""
    wanted = list(tps)
    if not wanted:
        return {}
    admin = cluster.admin
    earliest = admin.list_offsets(dict.fromkeys(wanted, OffsetSpec.earliest()))
    latest = admin.list_offsets(dict.fromkeys(wanted, OffsetSpec.latest()))
    stable = admin.list_offsets(dict.fromkeys(wanted, OffsetSpec.latest()),
                                isolation_level=IsolationLevel.READ_COMMITTED)
    return {(tp.topic, tp.partition): (earliest[tp].offset, stable[tp].offset, latest[tp].offset) for tp in wanted}


def transactions(cluster: Cluster) -> list[TxnRow]:
    listings = list_transactions(cluster)
    described = describe_transactions(cluster, [x.transactional_id for x in listings]) if listings else {}
    now = now_ms()
    rows = []
    for x in listings:
        d = described.get(x.transactional_id)
        if not isinstance(d, TransactionDescription):
            continue  # gone since it was listed (expired)
        in_progress = d.start_time_ms is not None and d.state in OPEN_STATES
        rows.append(TxnRow(d.transactional_id, d.coordinator_id, d.state, d.producer_id, d.producer_epoch,
                           d.timeout_ms, max(0, now - (d.start_time_ms or 0)) / 1000 if in_progress else None,
                           tuple(d.partitions), d.two_phase_commit))
    return rows


def open_transactions(cluster: Cluster, txns: list[TxnRow]) -> list[OpenTxnRow]:
    """Every transaction open in a partition (DescribeProducers at each leader), with its
    owner from the coordinators, flagged hanging as ``eoslog transactions find-hanging``
    decides: no coordinator counts that partition in a transaction of that producer id."""
    leaders = cluster.leaders(None)
    if not leaders:
        return []
    now = now_ms()
    candidates = candidate_open_transactions(cluster, leaders, None, -1, now)  # -1: every open one
    if not candidates:
        return []
    hanging, prepared = hanging_transactions(cluster, candidates)
    hanging_keys = {_key(c) for c in hanging}
    prepared_keys = {_key(c) for c, _ in prepared}
    offsets = offsets_of(cluster, sorted({TopicPartition(c.topic, c.partition) for c in candidates}))
    owners = {t.producer_id: t for t in txns}
    rows = []
    for c in candidates:
        owner = owners.get(c.producer.producer_id)
        _, lso, hw = offsets[(c.topic, c.partition)]
        status = ("hanging" if _key(c) in hanging_keys
                  else "two-phase commit: awaiting its external coordinator" if _key(c) in prepared_keys
                  else "open")
        owned = owner if owner is not None and status != "hanging" else None
        rows.append(OpenTxnRow(
            c.topic, c.partition, c.producer.producer_id, c.producer.producer_epoch, c.producer.coordinator_epoch,
            c.producer.current_txn_start_offset or 0, max(0, now - c.producer.last_timestamp) / 1000, lso, hw,
            None if owned is None else owned.transactional_id, status,
            None if owned is None else owned.state, None if owned is None else owned.age_s,
        ))
    return sorted(rows, key=lambda r: (r.topic, r.partition, r.start_offset))


def _key(c: OpenTransaction) -> tuple[str, int, int]:
    return c.topic, c.partition, c.producer.producer_id


def groups(cluster: Cluster) -> list[GroupRow]:
    admin = cluster.admin
    listed = [g for g in admin.list_groups() if g.type != "share"]  # share groups: share_groups()
    if not listed:
        return []
    described = admin.describe_groups([g.group_id for g in listed])
    committed = {g.group_id: admin.list_consumer_group_offsets(g.group_id) for g in listed}
    tps = sorted({tp for offsets in committed.values() for tp in offsets})
    offsets = offsets_of(cluster, tps)
    rows = []
    for g in listed:
        d = described[g.group_id]
        parts = tuple(
            GroupPartitionRow(tp.topic, tp.partition, o.offset, offsets[(tp.topic, tp.partition)][2],
                              offsets[(tp.topic, tp.partition)][1])
            for tp, o in sorted(committed[g.group_id].items())
        )
        members = tuple((m.member_id, m.client_id, tuple((tp.topic, tp.partition) for tp in m.assignment))
                        for m in d.members)
        epochs = tuple((m.client_id, m.member_epoch) for m in d.members if m.member_epoch is not None)
        rows.append(GroupRow(g.group_id, d.state, d.partition_assignor, members, parts, d.type, d.group_epoch, epochs))
    return sorted(rows, key=lambda r: r.group_id)


def share_groups(cluster: Cluster) -> list[ShareGroupRow]:
    """Share groups (KIP-932): members and each share-partition's start offset and lag."""
    admin = cluster.admin
    listed = admin.list_share_groups()
    if not listed:
        return []
    described = admin.describe_share_groups([g.group_id for g in listed])
    starts = {g.group_id: admin.list_share_group_offsets(g.group_id) for g in listed}
    offsets = offsets_of(cluster, sorted({tp for s in starts.values() for tp in s}))
    rows = []
    for g in listed:
        d = described[g.group_id]
        parts = tuple(SharePartitionRow(tp.topic, tp.partition, o.start_offset, offsets[(tp.topic, tp.partition)][2],
                                        o.lag) for tp, o in sorted(starts[g.group_id].items()))
        members = tuple((m.member_id, m.client_id, tuple((tp.topic, tp.partition) for tp in m.assignment))
                        for m in d.members)
        rows.append(ShareGroupRow(g.group_id, d.state, members, parts))
    return sorted(rows, key=lambda r: r.group_id)


def producers(cluster: Cluster) -> list[ProducerRow]:
    leaders = cluster.leaders(None)
    if not leaders:
        return []
    found = cluster.admin.describe_producers([TopicPartition(t, p) for t, p in sorted(leaders)])
    return [
        ProducerRow(tp.topic, tp.partition, s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp,
                    -1 if s.coordinator_epoch is None else s.coordinator_epoch, s.current_transaction_start_offset)
        for tp, states in sorted(found.items()) for s in states
    ]


@dataclass(frozen=True, slots=True)
class BrokerRow:
    id: int
    host: str  # the advertised endpoint Metadata/DescribeCluster give clients
    port: int
    rack: str | None
    listeners: str  # the broker's ``listeners`` config, "unknown" where DescribeConfigs is refused
    advertised_listeners: str
    version: str


UNKNOWN = "unknown"


def cluster_info(cluster: Cluster, metrics_url: str | None = None) -> Mapping[str, object]:
    """Cluster id, controller and each broker with its listeners and version. The Kafka protocol
    carries no software version: it is read from an eoslog broker's metrics endpoint
    (``kafka_server_app_info``, Kafka's app-info MBean) for the broker that serves it, else unknown."""
    d = cluster.admin.describe_cluster()
    versions = {int(s.labels["id"]): s.labels["version"]
                for family in _scrape(metrics_url) if family.name == "kafka_server_app_info"
                for s in family.samples}
    rows = []
    for n in sorted(d.nodes, key=lambda n: n.id):
        configs = broker_configs(cluster, n.id)
        rows.append(BrokerRow(n.id, n.host, n.port, n.rack, configs.get("listeners") or UNKNOWN,
                              configs.get("advertised.listeners") or configs.get("listeners") or UNKNOWN,
                              versions.get(n.id, UNKNOWN)))
    return {"cluster_id": d.cluster_id, "controller": d.controller, "nodes": rows}


def broker_configs(cluster: Cluster, node_id: int) -> dict[str, str]:
    """The broker's listener configs (DescribeConfigs); empty when it refuses (no permission)."""
    resource = ConfigResource(ConfigResourceType.BROKER, str(node_id))
    try:
        entries = cluster.admin.describe_configs([resource])[resource]
    except KafkaError:
        return {}
    return {k: str(entries[k].value) for k in ("listeners", "advertised.listeners")
            if k in entries and entries[k].value}


# -- records ----------------------------------------------------------------------------------------

RECORDS_PAGE = 50
FORMATS = ("text", "json", "hex")


@dataclass(frozen=True, slots=True)
class RecordRow:
    offset: int
    status: str  # "committed", "aborted", "undecided" (at or past the LSO), "no record" (a gap)
    timestamp: int | None
    key: str
    value: str
    headers: tuple[tuple[str, str], ...]


def show_bytes(data: bytes | None, fmt: str) -> str:
    if data is None:
        return "null"
    if fmt == "hex":
        return data.hex(" ")
    text = data.decode("utf-8", errors="replace")
    if fmt == "json":
        try:
            return json.dumps(json.loads(text), indent=1, sort_keys=True)
        except ValueError:
            return text
    return text


def _read(clients: Clients, tp: TopicPartition, start: int, end: int, isolation: str,
          limit: int) -> list[ConsumerRecord]:
    """Records of ``tp`` from ``start`` (below ``end``, at most ``limit``) as a consumer with that
    isolation level reads them: the session's consumer (no group), one page at a time."""
    if start >= end:
        return []
    out: list[ConsumerRecord] = []
    with clients.lock:
        consumer = clients.consumer(isolation)
        consumer.assign([tp])
        consumer.seek(tp, start)
        deadline = time.monotonic() + 15
        while len(out) < limit and time.monotonic() < deadline and consumer.position(tp) < end:
            out += [r for r in consumer.poll(0.5) if r.partition == tp.partition and r.topic == tp.topic
                    and start <= r.offset < end]
        consumer.assign([])
    return out[:limit]


def records(cluster: Cluster, client: Clients, topic: str, partition: int, start: int, isolation: str,
            fmt: str) -> tuple[list[RecordRow], tuple[int, int, int]]:
    """A page of a partition's records from ``start``, and (log start, LSO, high watermark).

    read_committed: what such a consumer reads (below the LSO, aborted records dropped).
    read_uncommitted: every record up to the high watermark, each marked as a read_committed
    consumer decides it — committed (it reads it), aborted (below the LSO, it does not), or
    undecided (at or past the LSO: its transaction is open) — and each offset without a record
    shown as a gap: a transaction marker (COMMIT/ABORT), or a record compaction removed."""
    tp = TopicPartition(topic, partition)
    log_start, lso, hw = offsets_of(cluster, [tp])[(topic, partition)]
    start = max(start, log_start)
    committed = _read(client, tp, start, lso, "read_committed", RECORDS_PAGE)

    def row(r: ConsumerRecord, status: str) -> RecordRow:
        return RecordRow(r.offset, status, r.timestamp, show_bytes(r.key, fmt), show_bytes(r.value, fmt),
                         tuple((k, show_bytes(v, fmt)) for k, v in r.headers))

    if isolation == "read_committed":
        return [row(r, "committed") for r in committed], (log_start, lso, hw)
    visible = {r.offset for r in committed}
    rows: list[RecordRow] = []
    expected = start
    read = _read(client, tp, start, hw, "read_uncommitted", RECORDS_PAGE)
    for r in read:
        rows += _gaps(expected, r.offset)
        rows.append(row(r, "committed" if r.offset in visible else "undecided" if r.offset >= lso else "aborted"))
        expected = r.offset + 1
    if len(read) < RECORDS_PAGE:  # read up to the high watermark: markers at the end too
        rows += _gaps(expected, hw)
    return rows, (log_start, lso, hw)


def _gaps(start: int, end: int) -> list[RecordRow]:
    return [RecordRow(o, "no record", None, "", "", ()) for o in range(start, end)]


# -- the Spark connector's decisions -----------------------------------------------------------------

SPARK_DECISIONS_TOPIC = "__eoslog_spark_commits"  # eoslog.spark.sink_options.DEFAULT_DECISIONS_TOPIC


@dataclass(frozen=True, slots=True)
class DecisionRow:
    """A query's latest commit decision (eoslog.spark.decisions) and where its transactions are."""

    key: str  # the query id, or batch-<uuid>
    batch: int
    run: str
    decided_at_ms: int
    transactions: tuple[tuple[str, str, str], ...]  # (transactional id, "producerId:epoch", coordinator state)

    @property
    def completed(self) -> bool:
        return all(state == "CompleteCommit" for _, _, state in self.transactions)


def spark_decisions(cluster: Cluster, client: Clients,
                    topic: str = SPARK_DECISIONS_TOPIC) -> tuple[list[DecisionRow], list[str]]:
    """Each query's latest decision in the sink's decisions topic (read_committed, as the sink
    reads it) with the coordinators' state of each transaction it names; and the records that
    are not decisions."""
    from eoslog.spark.decisions import Decision, DecisionFormatError  # pyspark: only for this page

    if topic not in cluster.admin.list_topics(internal=True):
        return [], []
    latest: dict[str, Decision] = {}
    bad: list[str] = []
    for p in cluster.leaders([topic]):
        tp = TopicPartition(*p)
        log_start, lso, _ = offsets_of(cluster, [tp])[p]
        for r in _read(client, tp, log_start, lso, "read_committed", 10_000):
            try:
                d = Decision.decode(r.key, r.value)
            except DecisionFormatError as e:
                bad.append(f"{tp.topic}-{tp.partition}@{r.offset}: {e}")
                continue
            latest[d.key] = d
    ids = sorted({tid for d in latest.values() for tid, _ in d.transactions})
    described = describe_transactions(cluster, ids) if ids else {}
    rows = []
    for key, d in sorted(latest.items()):
        states = []
        for tid, prepared in d.transactions:
            found = described.get(tid)
            state = found.state if isinstance(found, TransactionDescription) else "unknown to the coordinators"
            states.append((tid, prepared.to_string(), state))
        rows.append(DecisionRow(key, d.batch_id, d.run_id, d.decided_at_ms, tuple(states)))
    return rows, bad

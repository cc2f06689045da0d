"""The one place where the Spark connector talks to brokers to read: ``LogReader``.

What it owns: the few client operations the source needs — which partitions a topic has,
the earliest and latest offsets of partitions (the latest is the last stable offset under
read_committed: ListOffsets with isolation level 1), and reading one partition's records
in ``[start, end)`` in chunks, stopping as soon as the position reaches ``end`` (the end
may be a transaction marker's offset, which yields no record). What it must never do:
know about Spark, or filter records itself once ``eoslog.client``'s consumer does: the
aborted-transaction filtering belongs to the consumer.

Interim: until ``eoslog.client.Consumer`` lands, this module speaks ListOffsets, Metadata
and Fetch through a blocking ``BrokerConnection`` to the bootstrap broker (eoslog has one
node, which leads every partition) and drops aborted transactions as Kafka's consumer
does. Switching to the consumer replaces the body of this module and nothing else.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import Any, NamedTuple, Self

from eoslog.client.connection import ApiKey, BrokerConnection, bootstrap, build, raise_for_error, request_types
from eoslog.client.errors import KafkaError, error_for
from eoslog.client.types import TopicPartition
from eoslog.protocol.errors import ErrorCode
from eoslog.records.batch import (
    BATCH_HEADER_SIZE,
    TimestampType,
    decode_records,
    iter_batch_headers,
    read_batch_header,
)
from eoslog.spark.offsets import EARLIEST, LATEST

FETCH_MAX_WAIT_MS = 500
FETCH_MAX_BYTES = 50 * 1024 * 1024  # Kafka's fetch.max.bytes
PARTITION_MAX_BYTES = 1024 * 1024  # max.partition.fetch.bytes; the broker returns at least one batch


class ConsumedRecord(NamedTuple):
    offset: int
    timestamp: int  # ms since the epoch
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime (Kafka's TimestampType ids)
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class OffsetOutOfRange(KafkaError):
    """The range starts before the log start offset (retention deleted it) or past the end."""

    def __init__(self, tp: TopicPartition, offset: int) -> None:
        super().__init__(f"offset {offset} of {tp.topic}-{tp.partition} is out of range")
        self.tp = tp
        self.offset = offset


class ReadTimeout(KafkaError):
    pass


class LogReader:
    """Read access to a cluster's partitions for one Spark driver call or one Spark task."""

    def __init__(self, bootstrap_servers: str, *, isolation_level: int, client_id: str = "eoslog-spark",
                 request_timeout_ms: int = 30000) -> None:
        self.isolation_level = isolation_level
        self._conn: BrokerConnection = bootstrap(bootstrap_servers, client_id=client_id,
                                                 timeout_s=request_timeout_ms / 1000)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- metadata ----------------------------------------------------------------------

    def topics(self, names: Iterable[str] | None = None) -> dict[str, int]:
        """Partition counts of ``names`` (None: every non-internal topic); a topic that does
        not exist is left out (never auto-created)."""
        conn = self._conn
        m = request_types(ApiKey.METADATA, conn.pick_version(ApiKey.METADATA, 12, wanted_min=1))
        wanted = None if names is None else tuple(build(m.MetadataRequestTopic, name=n, topic_id=None)
                                                  for n in names)
        response = conn.send(build(m.MetadataRequest, topics=wanted, allow_auto_topic_creation=False,
                                   include_cluster_authorized_operations=False,
                                   include_topic_authorized_operations=False))
        out: dict[str, int] = {}
        for t in response.topics:
            code = int(t.error_code)
            if code == ErrorCode.unknown_topic_or_partition:
                continue
            raise_for_error(code, f"topic {t.name}")
            if not getattr(t, "is_internal", False):
                out[str(t.name)] = len(t.partitions)
        return out

    # -- offsets -----------------------------------------------------------------------

    def beginning_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list_offsets(tps, EARLIEST)

    def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """High watermarks, or last stable offsets under read_committed."""
        return self._list_offsets(tps, LATEST)

    def _list_offsets(self, tps: Iterable[TopicPartition], timestamp: int) -> dict[TopicPartition, int]:
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        if not by_topic:
            return {}
        conn = self._conn
        m = request_types(ApiKey.LIST_OFFSETS, conn.pick_version(ApiKey.LIST_OFFSETS, 7, wanted_min=2))
        request = build(
            m.ListOffsetsRequest, replica_id=-1, isolation_level=self.isolation_level,
            topics=tuple(
                build(m.ListOffsetsTopic, name=topic, partitions=tuple(
                    build(m.ListOffsetsPartition, partition_index=p, timestamp=timestamp, current_leader_epoch=-1)
                    for p in sorted(ps)))
                for topic, ps in sorted(by_topic.items())
            ),
        )
        out: dict[TopicPartition, int] = {}
        for t in conn.send(request).topics:
            for p in t.partitions:
                raise_for_error(p.error_code, f"ListOffsets {t.name}-{p.partition_index}")
                out[TopicPartition(str(t.name), int(p.partition_index))] = int(p.offset)
        return out

    # -- records -----------------------------------------------------------------------

    def read(self, tp: TopicPartition, start: int, end: int, *, poll_timeout_ms: int) -> Iterator[list[ConsumedRecord]]:
        """The records of ``tp`` in ``[start, end)`` in fetch-sized chunks. Raises
        OffsetOutOfRange when ``start`` is no longer (or not yet) in the log, ReadTimeout
        when no progress is made for ``poll_timeout_ms``."""
        conn = self._conn
        m = request_types(ApiKey.FETCH, conn.pick_version(ApiKey.FETCH, 12, wanted_min=4))
        read_committed = self.isolation_level == 1
        position = start
        aborted_ahead: list[tuple[int, int]] = []  # (first offset, producer id), sorted
        aborted_producers: set[int] = set()
        progress_deadline = time.monotonic() + poll_timeout_ms / 1000
        while position < end:
            pd = self._fetch_one(m, tp, position)
            code = int(pd.error_code)
            if code == ErrorCode.offset_out_of_range:
                raise OffsetOutOfRange(tp, position)
            if code != ErrorCode.none:
                raise error_for(code, f"Fetch {tp.topic}-{tp.partition} at offset {position}")
            if read_committed and pd.aborted_transactions:
                aborted_ahead = sorted((int(a.first_offset), int(a.producer_id)) for a in pd.aborted_transactions)
            records = bytes(pd.records or b"")
            chunk: list[ConsumedRecord] = []
            moved = position
            for pos, h in iter_batch_headers(_whole_batches(records), verify_crc=True):
                if h.last_offset < position:
                    continue
                if h.base_offset >= end:
                    break
                while aborted_ahead and aborted_ahead[0][0] <= h.last_offset:
                    aborted_producers.add(aborted_ahead.pop(0)[1])
                skip = h.is_control or (h.is_transactional and h.producer_id in aborted_producers)
                if h.is_control:
                    # The marker closes the producer's transaction (an ABORT ends its aborted range).
                    aborted_producers.discard(h.producer_id)
                if not skip:
                    log_append = h.timestamp_type is TimestampType.LOG_APPEND_TIME
                    for r in decode_records(records[pos : pos + h.size]):
                        if position <= r.offset < end:
                            chunk.append(ConsumedRecord(
                                r.offset, h.max_timestamp if log_append else r.timestamp,
                                int(h.timestamp_type), r.key, r.value, r.headers,
                            ))
                moved = max(moved, h.next_offset)
            progressed = moved > position
            position = max(moved, position)
            if chunk:
                yield chunk
            if progressed:
                progress_deadline = time.monotonic() + poll_timeout_ms / 1000
            elif time.monotonic() > progress_deadline:
                raise ReadTimeout(
                    f"cannot fetch records of {tp.topic}-{tp.partition} at offset {position} "
                    f"(reading up to {end}) in {poll_timeout_ms} ms"
                )

    def _fetch_one(self, m: Any, tp: TopicPartition, offset: int) -> Any:
        request = build(
            m.FetchRequest, replica_id=-1, max_wait=datetime.timedelta(milliseconds=FETCH_MAX_WAIT_MS),
            min_bytes=1, max_bytes=FETCH_MAX_BYTES, isolation_level=self.isolation_level,
            session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="",
            topics=(build(m.FetchTopic, topic=tp.topic, partitions=(
                build(m.FetchPartition, partition=tp.partition, fetch_offset=offset,
                      partition_max_bytes=PARTITION_MAX_BYTES, log_start_offset=-1,
                      current_leader_epoch=-1, last_fetched_epoch=-1),
            )),),
        )
        response = self._conn.send(request, timeout_s=self._conn.timeout_s + FETCH_MAX_WAIT_MS / 1000)
        raise_for_error(response.error_code, "Fetch")
        return response.responses[0].partitions[0]


def _whole_batches(records: bytes) -> memoryview:
    """``records`` without a partial batch at the end (the broker may cut the last one)."""
    pos = 0
    view = memoryview(records)
    while len(records) - pos >= BATCH_HEADER_SIZE:
        size = read_batch_header(records, pos).size
        if pos + size > len(records):
            break
        pos += size
    return view[:pos]

"""A scripted stand-in for a broker, for the errors a real broker cannot be made to return.

It speaks the Kafka protocol on a loopback port inside the test's event loop (kio decodes
requests and encodes responses) and plays one node that leads every partition and
coordinates every transaction. Produce is idempotent in the broker's way — per partition
and producer: a producer it has no state for may start at any sequence (Kafka's leniency since
KIP-360), a new epoch starts at sequence 0, a duplicate of a recent batch returns its
original offset, a gap is OUT_OF_ORDER_SEQUENCE_NUMBER — unless a test's hook decides
otherwise. Hooks (``produce_hook``, ``txn_hook``) get the request and return an error code
to answer with, or None for the normal path; ``hold_produce`` delays the answers.

``log[(topic, partition)]`` keeps (producer id, epoch, base sequence, record count, values)
per appended batch, so tests can check exactly what was written.
"""

from __future__ import annotations

import asyncio
import datetime
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eoslog.protocol.codec import decode_request, encode_response, read_prefix
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import build, response_types
from eoslog.records import decode_records, read_batch_header

_SIZE = struct.Struct(">i")
NODE = 0
# What the double advertises: (min, max) per API key.
VERSIONS = {0: (3, 9), 3: (1, 12), 10: (1, 4), 18: (0, 3), 22: (0, 4), 24: (0, 3), 25: (0, 3), 26: (0, 3),
            28: (0, 3)}
ZERO = datetime.timedelta(0)


@dataclass
class Appended:
    producer_id: int
    epoch: int
    base_sequence: int
    count: int
    values: list[bytes | None]
    offset: int


@dataclass
class _ProducerEntry:
    epoch: int
    last_sequence: int
    recent: list[tuple[int, int, int]] = field(default_factory=list)  # (first seq, last seq, offset)


ProduceHook = Callable[[str, int, Any], int | None]  # topic, partition, batch header → error code
TxnHook = Callable[[int, Any], int | None]  # api key, request → error code


class BrokerDouble:
    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = dict(topics)
        self.port = 0
        self.requests: list[int] = []  # api keys, in arrival order
        self.log: dict[tuple[str, int], list[Appended]] = {}
        self.produce_hook: ProduceHook | None = None
        self.txn_hook: TxnHook | None = None
        self.hold_produce = 0.0  # seconds to wait before answering a Produce
        self.answer_produce = True
        self._producers: dict[tuple[str, int, int], _ProducerEntry] = {}
        self._next_pid = 1000
        self._epochs: dict[str, tuple[int, int]] = {}
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> BrokerDouble:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in list(self._writers):
            w.close()

    def count(self, api_key: int) -> int:
        return self.requests.count(api_key)

    def values(self, topic: str, partition: int = 0) -> list[bytes | None]:
        return [v for a in self.log.get((topic, partition), []) for v in a.values]

    # -- serving ------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                frame = await reader.readexactly(size)
                prefix = read_prefix(frame)
                self.requests.append(prefix.api_key)
                request, _ = decode_request(frame, prefix)
                response = await self._handle(prefix.api_key, prefix.api_version, request)
                if response is None:
                    continue
                writer.write(encode_response(prefix.correlation_id, response, prefix.api_key))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _handle(self, api_key: int, version: int, request: Any) -> Any:
        m = response_types(api_key, version)
        if api_key == 18:
            return build(m.ApiVersionsResponse, error_code=ErrorCode.none, throttle_time=ZERO, api_keys=tuple(
                build(m.ApiVersion, api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in VERSIONS.items()),
                supported_features=(), finalized_features_epoch=-1, finalized_features=(), zk_migration_ready=False)
        if api_key == 3:
            return self._metadata(m, request)
        if api_key == 0:
            if self.hold_produce:
                await asyncio.sleep(self.hold_produce)
            if not self.answer_produce:
                return None
            return self._produce(m, request)
        code = self.txn_hook(api_key, request) if self.txn_hook is not None else None
        error = ErrorCode(code) if code is not None else ErrorCode.none
        if api_key == 10:
            keys = getattr(request, "coordinator_keys", None) or (request.key,)
            return build(m.FindCoordinatorResponse, throttle_time=ZERO, error_code=error, error_message=None,
                         node_id=NODE, host="127.0.0.1", port=self.port, coordinators=tuple(
                             build(m.Coordinator, key=k, node_id=NODE, host="127.0.0.1", port=self.port,
                                   error_code=error, error_message=None) for k in keys))
        if api_key == 22:
            pid, epoch = self._init_producer(request)
            if code is not None:
                pid, epoch = -1, -1
            return build(m.InitProducerIdResponse, throttle_time=ZERO, error_code=error, producer_id=pid,
                         producer_epoch=epoch)
        if api_key == 24:
            return build(m.AddPartitionsToTxnResponse, throttle_time=ZERO, results_by_topic_v3_and_below=tuple(
                build(m.AddPartitionsToTxnTopicResult, name=t.name, results_by_partition=tuple(
                    build(m.AddPartitionsToTxnPartitionResult, partition_index=p, partition_error_code=error)
                    for p in t.partitions)) for t in request.v3_and_below_topics))
        if api_key in (25, 26):
            cls = m.AddOffsetsToTxnResponse if api_key == 25 else m.EndTxnResponse
            return build(cls, throttle_time=ZERO, error_code=error)
        if api_key == 28:
            return build(m.TxnOffsetCommitResponse, throttle_time=ZERO, topics=tuple(
                build(m.TxnOffsetCommitResponseTopic, name=t.name, partitions=tuple(
                    build(m.TxnOffsetCommitResponsePartition, partition_index=p.partition_index, error_code=error)
                    for p in t.partitions)) for t in request.topics))
        raise AssertionError(f"the double does not serve api key {api_key}")

    def _metadata(self, m: Any, request: Any) -> Any:
        names = [t.name for t in request.topics] if request.topics is not None else list(self.topics)
        return build(
            m.MetadataResponse, throttle_time=ZERO, cluster_id="double", controller_id=NODE,
            brokers=(build(m.MetadataResponseBroker, node_id=NODE, host="127.0.0.1", port=self.port, rack=None),),
            topics=tuple(
                build(m.MetadataResponseTopic, error_code=ErrorCode.none if n in self.topics
                      else ErrorCode.unknown_topic_or_partition, name=n, topic_id=None, is_internal=False,
                      topic_authorized_operations=-(2**31), partitions=tuple(
                          build(m.MetadataResponsePartition, error_code=ErrorCode.none, partition_index=p,
                                leader_id=NODE, leader_epoch=0, replica_nodes=(NODE,), isr_nodes=(NODE,),
                                offline_replicas=()) for p in range(self.topics.get(n, 0))))
                for n in names),
        )

    def _init_producer(self, request: Any) -> tuple[int, int]:
        txn_id = request.transactional_id
        if txn_id is None:
            self._next_pid += 1
            return self._next_pid, 0
        pid, epoch = self._epochs.get(txn_id, (-1, -1))
        if pid < 0:
            self._next_pid += 1
            pid, epoch = self._next_pid, 0
        else:
            epoch += 1
        self._epochs[txn_id] = (pid, epoch)
        return pid, epoch

    def _produce(self, m: Any, request: Any) -> Any:
        topics = []
        for t in request.topic_data:
            parts = []
            for p in t.partition_data:
                code, offset = self._append(t.name, int(p.index), bytes(p.records))
                parts.append(build(m.PartitionProduceResponse, index=p.index, error_code=ErrorCode(code),
                                   base_offset=offset, log_append_time=None, log_start_offset=0,
                                   record_errors=(), error_message=None))
            topics.append(build(m.TopicProduceResponse, name=t.name, partition_responses=tuple(parts)))
        return build(m.ProduceResponse, responses=tuple(topics), throttle_time=ZERO)

    def _append(self, topic: str, partition: int, records: bytes) -> tuple[int, int]:
        h = read_batch_header(records)
        if self.produce_hook is not None:
            code = self.produce_hook(topic, partition, h)
            if code is not None:
                return code, -1
        log = self.log.setdefault((topic, partition), [])
        next_offset = log[-1].offset + log[-1].count if log else 0
        if h.producer_id >= 0:
            key = (topic, partition, h.producer_id)
            entry = self._producers.get(key)
            last_seq = h.base_sequence + h.records_count - 1
            if entry is not None and entry.epoch == h.producer_epoch:
                for first, last, offset in entry.recent:
                    if (first, last) == (h.base_sequence, last_seq):
                        return 0, offset  # a duplicate: its original offset, nothing appended
                if h.base_sequence != entry.last_sequence + 1:
                    return ErrorCode.out_of_order_sequence_number, -1
            elif entry is not None and h.producer_epoch < entry.epoch:
                return ErrorCode.invalid_producer_epoch, -1
            elif h.base_sequence != 0 and entry is not None:
                return ErrorCode.out_of_order_sequence_number, -1
            # A producer the partition holds no state for may start at any sequence, as in
            # Kafka's ProducerAppendInfo.checkSequence (and eoslog's producer_state).
            if entry is None or entry.epoch != h.producer_epoch:
                entry = self._producers[key] = _ProducerEntry(h.producer_epoch, -1)
            entry.last_sequence = last_seq
            entry.recent = [*entry.recent[-4:], (h.base_sequence, last_seq, next_offset)]
        values = [r.value for r in decode_records(records)]
        log.append(Appended(h.producer_id, h.producer_epoch, h.base_sequence, h.records_count, values, next_offset))
        return 0, next_offset

"""One partition's data from a Fetch response, turned into records as poll() asks for them
(Kafka's CompletedFetch).

What it owns: walking the record batches (whole batches only: a truncated one at the end
is where the next fetch starts), checking CRCs (``check.crcs``), decoding a batch only when
its records are wanted (every codec, through ``records``), and ``next_fetch_offset``, the
position after what was handed out. Records below the fetch offset inside the first batch
are skipped; a batch that ends below it is skipped whole.

read_committed, exactly as Kafka's CompletedFetch: the response lists the aborted
transactions (producer id, first offset) overlapping the range, and a transactional batch
of one of them is skipped whole (``records.aborted``). Control batches (COMMIT/ABORT
markers) are never returned but move the position past them.

What it must never do: I/O, or touch the consumer's positions — the fetcher does that with
``next_fetch_offset`` if the partition's position still is the offset fetched from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from eoslog.client.errors import CorruptMessageError
from eoslog.client.types import ConsumerRecord, TopicPartition
from eoslog.records import batch as record_batch
from eoslog.records.aborted import AbortedTransactions
from eoslog.records.batch import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    BatchHeader,
    InvalidRecordError,
    TimestampType,
    batch_body,
    compute_crc,
    decode_record_fields,
    read_batch_header,
)

Buffer = bytes | bytearray | memoryview
Deserializer = Callable[[bytes | None], Any]


class CompletedFetch:
    __slots__ = ("_aborted", "_batches", "_buffer", "_check_crcs", "_key_deserializer",
                 "_last_next_offset", "_pending", "_pending_pos", "_read_committed", "_value_deserializer", "bytes",
                 "fetch_offset", "high_watermark", "last_stable_offset", "log_start_offset", "next_fetch_offset",
                 "records_read", "tp")

    def __init__(
        self,
        tp: TopicPartition,
        fetch_offset: int,
        records: Buffer | None,
        *,
        aborted_transactions: Iterable[tuple[int, int]] | None = None,
        read_committed: bool = False,
        check_crcs: bool = True,
        high_watermark: int = -1,
        last_stable_offset: int = -1,
        log_start_offset: int = -1,
        key_deserializer: Deserializer | None = None,
        value_deserializer: Deserializer | None = None,
    ) -> None:
        self.tp = tp
        self.fetch_offset = fetch_offset
        self.next_fetch_offset = fetch_offset
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset
        # bytes, so that uncompressed batches are decoded in place (records.decode_record_fields).
        self._buffer = records if isinstance(records, bytes) else bytes(records or b"")
        self.bytes = len(self._buffer)
        self._read_committed = read_committed
        self._check_crcs = check_crcs
        self._key_deserializer = key_deserializer
        self._value_deserializer = value_deserializer
        self._aborted = AbortedTransactions(aborted_transactions or ())
        self._batches = self._iter_batches()
        self._pending: list[ConsumerRecord] = []
        self._pending_pos = 0
        self._last_next_offset = -1
        self.records_read = 0

    def _iter_batches(self) -> Any:
        buf = self._buffer
        end = len(buf)
        pos = 0
        while end - pos >= BATCH_HEADER_SIZE:
            h = read_batch_header(buf, pos)
            if h.size > end - pos:
                return  # a partial batch at the end of the response: fetched again next time
            if h.magic != MAGIC_V2:
                raise CorruptMessageError(f"{self.tp}: record batch magic {h.magic} at offset {h.base_offset}; "
                                          "only magic 2 is supported")
            if h.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
                raise CorruptMessageError(f"{self.tp}: record batch at offset {h.base_offset} is too short")
            yield h, pos
            pos += h.size

    @property
    def drained(self) -> bool:
        return self._batches is None and self._pending_pos >= len(self._pending)

    def drain(self) -> None:
        self._batches = None
        self._pending = []
        self._pending_pos = 0

    def take(self, max_records: int) -> list[ConsumerRecord]:
        """Up to ``max_records`` records after ``next_fetch_offset``, advancing it."""
        out: list[ConsumerRecord] = []
        while len(out) < max_records:
            if self._pending_pos < len(self._pending):
                n = min(max_records - len(out), len(self._pending) - self._pending_pos)
                chunk = self._pending[self._pending_pos : self._pending_pos + n]
                self._pending_pos += n
                out.extend(chunk)
                self.next_fetch_offset = chunk[-1].offset + 1
                continue
            if self._batches is None:
                break
            try:
                h, pos = next(self._batches)
            except StopIteration:
                self._batches = None
                # Compaction may have removed a batch's last records; its last offset still
                # says where the next batch starts (Kafka: currentBatch.nextOffset()).
                if self._last_next_offset > self.next_fetch_offset:
                    self.next_fetch_offset = self._last_next_offset
                break
            except InvalidRecordError as e:
                self.drain()
                raise CorruptMessageError(f"{self.tp}: {e}") from e
            self._last_next_offset = h.next_offset
            self._pending = self._batch_records(h, pos)
            self._pending_pos = 0
            if not self._pending and h.next_offset > self.next_fetch_offset:
                # Nothing to hand out (a marker, an aborted batch): the position still moves
                # past it, so the next fetch does not return it again.
                self.next_fetch_offset = h.next_offset
        self.records_read += len(out)
        return out

    def _batch_records(self, h: BatchHeader, pos: int) -> list[ConsumerRecord]:
        if self._check_crcs:
            actual = compute_crc(self._buffer, pos, h.size)
            if actual != h.crc:
                self.drain()
                raise CorruptMessageError(f"{self.tp}: record batch at offset {h.base_offset} has CRC "
                                          f"{h.crc:#010x}, computed {actual:#010x}")
        if self._read_committed and self._aborted.skips(h, self._buffer, pos):
            return []
        if h.is_control or h.next_offset <= self.next_fetch_offset:
            return []  # a marker, or wholly before the position
        return self._decode(h, pos)

    def _decode(self, h: BatchHeader, pos: int) -> list[ConsumerRecord]:
        topic, partition = self.tp
        ts_type = int(h.timestamp_type)
        epoch = h.partition_leader_epoch if h.partition_leader_epoch >= 0 else None
        start = self.next_fetch_offset
        batch_ts = h.max_timestamp if ts_type == TimestampType.LOG_APPEND_TIME else None
        kd, vd = self._key_deserializer, self._value_deserializer
        try:
            _, body, begin, end = batch_body(self._buffer, pos)
            if record_batch.speedups is not None and kd is None and vd is None:
                # The C decoder builds the ConsumerRecords themselves: no per-record Python code.
                built: list[ConsumerRecord] = record_batch.speedups.decode_consumer_records(
                    body, begin, end, h.records_count, h.base_offset, h.base_timestamp, start, ConsumerRecord,
                    topic, partition, ts_type, epoch, batch_ts)
                return built
            _, fields = decode_record_fields(self._buffer, pos)
        except (InvalidRecordError, ValueError) as e:
            self.drain()
            raise CorruptMessageError(f"{self.tp}: record batch at offset {h.base_offset}: {e}") from e
        if kd is not None or vd is not None:
            fields = [(o, ts, k if kd is None else kd(k), v if vd is None else vd(v), hs) for o, ts, k, v, hs in fields]
        new = tuple.__new__  # ConsumerRecord without its Python-level __new__: this runs per record
        if batch_ts is not None:
            return [new(ConsumerRecord, (topic, partition, o, batch_ts, ts_type, k, v, hs, epoch))
                    for o, _, k, v, hs in fields if o >= start]
        return [new(ConsumerRecord, (topic, partition, o, ts, ts_type, k, v, hs, epoch))
                for o, ts, k, v, hs in fields if o >= start]

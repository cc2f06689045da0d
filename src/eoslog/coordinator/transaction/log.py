"""Keys and values of ``__transaction_state`` records, in Kafka's exact on-disk formats.

Kafka's tools (``kafka-dump-log.sh --transaction-log-decoder``) and a Kafka broker reading
an eoslog data directory decode these, so the layouts are Kafka's field by field
(``TransactionLogKey.json``, ``TransactionLogValue.json``)::

    TransactionLogKey    int16 0 (the coordinator record type TRANSACTION_LOG), transactional_id string
    TransactionLogValue  int16 version (0)
                         producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
                         transaction_status int8 (TxnState id),
                         transaction_partitions [topic string, partition_ids [int32]] (null when Empty),
                         transaction_last_update_timestamp_ms int64, transaction_start_timestamp_ms int64

Version 0 is non-flexible (int16-length strings, int32-count arrays, big-endian); it is what
Kafka writes while ``transaction.version`` is 0. From transaction.version 1 on Kafka writes
version 1 (flexible: compact strings and arrays, tagged fields), and so does eoslog
(``encode_value(value, version)``: the caller picks by the finalized level). Its tagged fields,
as Kafka 4.4's ``TransactionLogValue`` numbers them, each written only when not at its default:
tag 0 ``PreviousProducerId`` (the producer id before this transition), tag 1 ``NextProducerId``,
tag 2 ``ClientTransactionVersion`` (the transaction protocol the client speaks: 2 for KIP-890
part 2's requests) and tag 3 ``NextProducerEpoch``.

NextProducerId has two uses. Under transaction version 2 it is the producer id a transaction
moves to when its commit or abort exhausted the epochs (the PREPARE_* record carries it, so a
coordinator that fails over completes the transaction with it). For a two-phase-commit
transaction kept by ``InitProducerId(keep_prepared_txn)`` (KIP-939) it is, with
NextProducerEpoch, the pair handed to the new client. A kept transaction is therefore one with
both tags; it is always written as version 1. Earlier eoslog versions wrote NextProducerEpoch
under tag 100 (before Kafka fixed tag 3): still read. Readers skip tags they do not know.
A null value is a tombstone: the transactional id expired.

A two-phase-commit transaction is recognised as Kafka does: its timeout is
``TWO_PHASE_COMMIT_TIMEOUT_MS`` (Integer.MAX_VALUE), so the flag survives restarts in the
v0 layout.

Also here: which ``__transaction_state`` partition a transactional id lives in.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from eoslog.coordinator.partitioning import coordinator_partition_for
from eoslog.coordinator.transaction.state import TxnState
from eoslog.records.varint import VarintError, decode_uvarint, encode_uvarint
from eoslog.types import TopicPartition

TRANSACTION_LOG_KEY_TYPE = 0
VALUE_VERSION = 0
FLEXIBLE_VALUE_VERSION = 1
_MAX_VALUE_VERSION = 1
PREVIOUS_PRODUCER_ID_TAG = 0
NEXT_PRODUCER_ID_TAG = 1
CLIENT_TRANSACTION_VERSION_TAG = 2
NEXT_PRODUCER_EPOCH_TAG = 3
LEGACY_NEXT_PRODUCER_EPOCH_TAG = 100  # eoslog's before Kafka 4.4 fixed tag 3
# Kafka's TransactionMetadata.isDistributedTwoPhaseCommitTxn: the timeout says "never".
TWO_PHASE_COMMIT_TIMEOUT_MS = 2**31 - 1


class TransactionLogFormatError(ValueError):
    """A ``__transaction_state`` record this broker cannot decode."""


def transaction_partition_for(transactional_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions``:
    the same mapping as a group id to its ``__consumer_offsets`` partition."""
    return coordinator_partition_for(transactional_id, num_partitions)


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    last_update_ms: int
    start_ms: int
    # TV2's producer id after an epoch overflow, or (with the epoch) KIP-939's pair handed to
    # the client that kept this transaction.
    next_producer_id: int = -1
    next_producer_epoch: int = -1
    previous_producer_id: int = -1  # v1: the producer id before this transition
    client_transaction_version: int = 0  # v1: the transaction protocol of the client's requests

    @property
    def is_kept(self) -> bool:
        """A KIP-939 transaction kept for a newer client (both of its pair are set)."""
        return self.next_producer_id >= 0 and self.next_producer_epoch >= 0


# -- encoding -----------------------------------------------------------------------------


def _string(v: str) -> bytes:
    data = v.encode()
    if len(data) > 0x7FFF:
        raise TransactionLogFormatError(f"string of {len(data)} bytes does not fit an int16 length")
    return struct.pack(">h", len(data)) + data


def _compact_string(v: str) -> bytes:
    data = v.encode()
    return encode_uvarint(len(data) + 1) + data


def encode_key(transactional_id: str) -> bytes:
    return struct.pack(">h", TRANSACTION_LOG_KEY_TYPE) + _string(transactional_id)


def _group_by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return by_topic


def encode_value(value: TransactionLogValue, version: int = VALUE_VERSION) -> bytes:
    """``value`` as Kafka writes it at value ``version`` (partitions are null for an Empty
    transaction); a kept KIP-939 transaction is written as version 1 whatever is asked, as
    version 0 cannot carry it."""
    if value.state is TxnState.EMPTY and value.partitions:
        raise TransactionLogFormatError(f"an Empty transaction has no partitions: {value}")
    flexible = version >= FLEXIBLE_VALUE_VERSION or value.is_kept
    out = bytearray(struct.pack(">hqhib", FLEXIBLE_VALUE_VERSION if flexible else VALUE_VERSION,
                                value.producer_id, value.producer_epoch, value.timeout_ms, value.state.value))
    by_topic = None if value.state is TxnState.EMPTY else _group_by_topic(value.partitions)
    if not flexible:
        out += struct.pack(">i", -1 if by_topic is None else len(by_topic))
        for topic, ids in (by_topic or {}).items():
            out += _string(topic) + struct.pack(f">i{len(ids)}i", len(ids), *ids)
        out += struct.pack(">qq", value.last_update_ms, value.start_ms)
        return bytes(out)
    out += encode_uvarint(0 if by_topic is None else len(by_topic) + 1)
    for topic, ids in (by_topic or {}).items():
        out += _compact_string(topic) + encode_uvarint(len(ids) + 1) + struct.pack(f">{len(ids)}i", *ids) + b"\x00"
    out += struct.pack(">qq", value.last_update_ms, value.start_ms)
    tagged = [(tag, struct.pack(fmt, v)) for tag, fmt, v, default in (
        (PREVIOUS_PRODUCER_ID_TAG, ">q", value.previous_producer_id, -1),
        (NEXT_PRODUCER_ID_TAG, ">q", value.next_producer_id, -1),
        (CLIENT_TRANSACTION_VERSION_TAG, ">h", value.client_transaction_version, 0),
        (NEXT_PRODUCER_EPOCH_TAG, ">h", value.next_producer_epoch, -1),
    ) if v != default]
    out += encode_uvarint(len(tagged))
    for tag, data in tagged:
        out += encode_uvarint(tag) + encode_uvarint(len(data)) + data
    return bytes(out)


# -- decoding -----------------------------------------------------------------------------


class _Reader:
    __slots__ = ("data", "flexible", "pos")

    def __init__(self, data: bytes, flexible: bool = False) -> None:
        self.data = data
        self.pos = 0
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise TransactionLogFormatError(
                f"record ends at byte {len(self.data)}, field needs bytes {self.pos}..{self.pos + n}"
            )
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str) -> tuple[int, ...]:
        s = struct.Struct(fmt)
        return tuple(int(x) for x in s.unpack(self._take(s.size)))

    def uvarint(self) -> int:
        try:
            value, self.pos = decode_uvarint(self.data, self.pos)
        except VarintError as e:
            raise TransactionLogFormatError(str(e)) from None
        return value

    def length(self, int_fmt: str) -> int:
        """A string or array length; -1 for null."""
        return self.uvarint() - 1 if self.flexible else self.unpack(int_fmt)[0]

    def string(self) -> str:
        n = self.length(">h")
        if n < 0:
            raise TransactionLogFormatError(f"null where a string is required at byte {self.pos}")
        return self._take(n).decode("utf-8", "replace")

    def skip_tagged_fields(self) -> None:
        self.tagged_fields()

    def tagged_fields(self) -> dict[int, bytes]:
        """The tagged fields of a flexible structure (none in a non-flexible one)."""
        fields: dict[int, bytes] = {}
        if self.flexible:
            for _ in range(self.uvarint()):
                tag = self.uvarint()
                fields[tag] = self._take(self.uvarint())
        return fields


def decode_key(data: bytes) -> str | None:
    """The transactional id, or None for a key of another coordinator record type."""
    r = _Reader(data)
    (record_type,) = r.unpack(">h")
    if record_type != TRANSACTION_LOG_KEY_TYPE:
        return None
    return r.string()


def decode_value(data: bytes) -> TransactionLogValue:
    (version,) = _Reader(data).unpack(">h")
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise TransactionLogFormatError(f"unknown transaction log value version {version}")
    r = _Reader(data, flexible=version >= 1)
    r.pos = 2
    producer_id, epoch, timeout, status = r.unpack(">qhib")
    try:
        state = TxnState(status)
    except ValueError:
        raise TransactionLogFormatError(f"unknown transaction status {status}") from None
    partitions: set[TopicPartition] = set()
    for _ in range(max(r.length(">i"), 0)):
        topic = r.string()
        count = r.length(">i")
        partitions.update(TopicPartition(topic, p) for p in r.unpack(f">{max(count, 0)}i"))
        r.skip_tagged_fields()
    last_update, start = r.unpack(">qq")
    tagged = r.tagged_fields()
    next_epoch = _tagged_int(tagged, NEXT_PRODUCER_EPOCH_TAG, ">h")
    if next_epoch < 0:
        next_epoch = _tagged_int(tagged, LEGACY_NEXT_PRODUCER_EPOCH_TAG, ">h")
    if state is TxnState.EMPTY:
        partitions.clear()  # Kafka ignores them too
    return TransactionLogValue(producer_id, epoch, timeout, state, frozenset(partitions), last_update, start,
                               _tagged_int(tagged, NEXT_PRODUCER_ID_TAG, ">q"), next_epoch,
                               _tagged_int(tagged, PREVIOUS_PRODUCER_ID_TAG, ">q"),
                               _tagged_int(tagged, CLIENT_TRANSACTION_VERSION_TAG, ">h", 0))


def _tagged_int(tagged: dict[int, bytes], tag: int, fmt: str, default: int = -1) -> int:
    data = tagged.get(tag)
    if data is None:
        return default
    if len(data) != struct.calcsize(fmt):
        raise TransactionLogFormatError(f"tagged field {tag} has {len(data)} bytes, expected {struct.calcsize(fmt)}")
    return int(struct.unpack(fmt, data)[0])

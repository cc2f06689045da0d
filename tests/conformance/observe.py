"""What a session observed, as plain trees that compare field by field.

A kio response becomes a dict of its fields (nested messages and arrays likewise), error codes
become their Kafka names, durations milliseconds, and a record set the list of its batches, each
with its header fields and decoded records. Values a broker chooses freely but consistently
(producer ids, member ids, topic ids, fetch session ids) are replaced by symbols numbered in
order of first appearance within one session's run, so ``pid#1`` on one broker meets ``pid#1``
on the other whatever the numbers were, and reusing an id still shows.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import uuid
from typing import Any

from eoslog.records import decode_records, iter_batch_headers, parse_control_record
from eoslog.records.batch import InvalidRecordError, compute_crc

# field name -> symbol prefix: ids the broker allocates; compared by identity within a run.
ALIASED_FIELDS = {
    "producer_id": "pid",
    "member_id": "member",
    "leader": "member",
    "topic_id": "topic-id",
    "session_id": "fetch-session",
}
# Lists whose order carries no meaning, compared as maps by their elements' names.
KEYED_BY_NAME = {"configs"}
# What is compared without its order, and why (listed in docs/compatibility.md).
UNORDERED = [
    ("config entries", "compared by name"),
    ("per-partition results (elements with a partition_index)", "Kafka builds them from hash maps"),
    ("group members (elements with a member_id)", "Kafka lists them from a hash map"),
]
NO_ID = {-1, "", None, uuid.UUID(int=0)}


class Aliases:
    def __init__(self) -> None:
        self._symbols: dict[tuple[str, object], str] = {}

    def symbol(self, prefix: str, value: object) -> object:
        if value in NO_ID or (isinstance(value, int) and value < 0) or (prefix == "fetch-session" and value == 0):
            return value
        key = (prefix, value)
        if key not in self._symbols:
            n = sum(1 for p, _ in self._symbols if p == prefix) + 1
            self._symbols[key] = f"{prefix}#{n}"
        return self._symbols[key]


def batches(data: bytes | None, aliases: Aliases) -> object:
    """A record set as its batches: header fields, and each record's offset, timestamp, key,
    value and headers. A control batch (transaction marker) keeps the broker's clock apart in
    ``marker_time``."""
    if data is None:
        return None
    out: list[dict[str, object]] = []
    try:
        for pos, h in iter_batch_headers(data):
            raw = data[pos:pos + h.size]
            records = decode_records(raw)
            batch: dict[str, object] = {
                "base_offset": h.base_offset, "last_offset_delta": h.last_offset_delta,
                "partition_leader_epoch": h.partition_leader_epoch, "magic": h.magic,
                "attributes": h.attributes, "producer_id": aliases.symbol("pid", h.producer_id),
                "producer_epoch": h.producer_epoch, "base_sequence": h.base_sequence,
                "records_count": h.records_count,
            }
            # The CRC covers the producer id, so it is compared as "valid or not".
            clock = {"crc_valid": compute_crc(raw, 0, h.size) == h.crc,
                     "base_timestamp": h.base_timestamp, "max_timestamp": h.max_timestamp}
            if h.is_control:
                kind, coordinator_epoch = parse_control_record(records[0])
                batch["marker"] = {"type": kind.name, "coordinator_epoch": coordinator_epoch}
                batch["marker_time"] = clock
            else:
                batch.update(clock)
                batch["records"] = [
                    {"offset": r.offset, "timestamp": r.timestamp, "key": r.key, "value": r.value,
                     "headers": [list(x) for x in r.headers]}
                    for r in records]
            out.append(batch)
    except InvalidRecordError as e:  # a partial batch at the end of a size-limited fetch
        out.append({"unparsed_tail": e.error.name})
    return out


def tree(value: Any, aliases: Aliases, field: str = "") -> object:
    """A kio message (or any value in it) as nested dicts, lists and scalars."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: tree(getattr(value, f.name), aliases, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, dict):  # a session's own summary of a response
        return {str(k): tree(v, aliases, str(k)) for k, v in value.items()}
    if isinstance(value, tuple | list):
        if field in KEYED_BY_NAME and all(hasattr(v, "name") for v in value):
            return {str(v.name): tree(v, aliases) for v in value}
        if value and all(hasattr(v, "partition_index") for v in value):
            value = sorted(value, key=lambda v: int(v.partition_index))
        if field == "partitions" and all(isinstance(v, int) for v in value):
            value = sorted(value)  # a set of partition numbers (DescribeTransactions: Kafka's HashSet order)
        items = [tree(v, aliases, field) for v in value]
        if items and all(isinstance(v, dict) and "member_id" in v for v in items):
            items.sort(key=lambda v: str(v["member_id"]))  # by symbol: member#1 first
        return items
    if field == "records" and isinstance(value, bytes | bytearray | memoryview | type(None)):
        return batches(None if value is None else bytes(value), aliases)
    if isinstance(value, enum.Enum):
        return value.name.upper()
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if field in ALIASED_FIELDS:
        return aliases.symbol(ALIASED_FIELDS[field], value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bool) or value is None or isinstance(value, str | float):
        return value
    if isinstance(value, int):
        return int(value)
    return repr(value)

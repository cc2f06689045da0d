"""The eoslog source's rows: Spark's Kafka source schema, and records → Arrow batches.

What it owns: the schema (exactly the Kafka source's: key binary, value binary, topic
string, partition int, offset long, timestamp timestamp, timestampType int, and headers
array<struct<key string, value binary>> only with ``includeHeaders=true``), its Arrow
twin, and turning a chunk of consumed records into one ``pyarrow.RecordBatch`` — the
reader yields Arrow batches rather than tuples, which is several times faster for Spark
to take in. What it must never do: read from brokers or decide which records to keep.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from eoslog.client.types import ConsumerRecord

_BASE_FIELDS = [
    StructField("key", BinaryType(), True),
    StructField("value", BinaryType(), True),
    StructField("topic", StringType(), True),
    StructField("partition", IntegerType(), True),
    StructField("offset", LongType(), True),
    StructField("timestamp", TimestampType(), True),
    StructField("timestampType", IntegerType(), True),
]
_HEADERS_FIELD = StructField(
    "headers",
    ArrayType(StructType([StructField("key", StringType(), True), StructField("value", BinaryType(), True)]), True),
    True,
)

_ARROW_HEADER = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
_ARROW_BASE = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    # Spark's TimestampType is an instant in microseconds; Arrow needs a zone to say so.
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]
_ARROW_HEADERS = pa.field("headers", pa.list_(_ARROW_HEADER))


def source_schema(include_headers: bool = False) -> StructType:
    """The rows of ``spark.read[Stream].format("eoslog")``, as Spark's Kafka source."""
    return StructType([*_BASE_FIELDS, _HEADERS_FIELD] if include_headers else list(_BASE_FIELDS))


def arrow_schema(include_headers: bool = False) -> pa.Schema:
    return pa.schema([*_ARROW_BASE, _ARROW_HEADERS] if include_headers else _ARROW_BASE)


def to_record_batch(topic: str, partition: int, records: Sequence[ConsumerRecord],
                    include_headers: bool = False) -> pa.RecordBatch:
    """One Arrow batch with a row per record, columns in the schema's order."""
    n = len(records)
    columns = [
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array([r.offset for r in records], pa.int64()),
        pa.array([r.timestamp * 1000 for r in records], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        pa.array([r.timestamp_type for r in records], pa.int32()),
    ]
    if include_headers:
        columns.append(pa.array(
            [[{"key": k, "value": v} for k, v in r.headers] for r in records], pa.list_(_ARROW_HEADER)
        ))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))

"""Record batch format v2: parsing, validation and building, shared by storage and clients."""

from eoslog.records.batch import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    ControlRecordType,
    InvalidRecordError,
    Record,
    RecordChecks,
    RecordValidationError,
    TimestampType,
    assign_offsets,
    build_batch,
    build_control_batch,
    decode_records,
    iter_batch_headers,
    parse_control_record,
    read_batch_header,
    validate_produce_batches,
    validate_records,
)
from eoslog.records.compression import CompressionType

__all__ = [
    "BATCH_HEADER_SIZE",
    "BatchHeader",
    "CompressionType",
    "ControlRecordType",
    "InvalidRecordError",
    "Record",
    "RecordChecks",
    "RecordValidationError",
    "TimestampType",
    "assign_offsets",
    "build_batch",
    "build_control_batch",
    "decode_records",
    "iter_batch_headers",
    "parse_control_record",
    "read_batch_header",
    "validate_produce_batches",
    "validate_records",
]

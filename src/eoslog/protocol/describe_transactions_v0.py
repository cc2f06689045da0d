"""DescribeTransactions v0 response classes, as kio generates them except for one field.

Kafka's DescribeTransactionsResponse declares ``TransactionStartTimeMs`` a plain int64 and its
coordinator answers -1 for every transactional id with no transaction in progress (Empty, the
Complete* states, and whatever a new epoch left behind). kio 0.6.5 types it as a non-nullable
``datetime_i64`` and refuses to read -1 ("Cannot parse negative timestamp"). Here the field is
nullable: -1 reads as None and None writes -1, so the bytes on the wire are unchanged and every
reader (broker, client, tests) goes through kio with one class. ``eoslog.protocol.messages``
serves this module in place of kio's for API 65 v0 responses.

No ``from __future__ import annotations``: kio reads the field types at run time.
"""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.describe_transactions.v0.response import TopicData
from kio.schema.errors import ErrorCode
from kio.schema.response_header.v1.header import ResponseHeader
from kio.schema.types import ProducerId, TransactionalId
from kio.static.constants import EntityType
from kio.static.primitive import TZAware, i16, i32Timedelta

__all__ = ["DescribeTransactionsResponse", "TopicData", "TransactionState"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(65)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    transactional_id: TransactionalId = field(metadata={"kafka_type": "string"})
    transaction_state: str = field(metadata={"kafka_type": "string"})
    transaction_timeout: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    transaction_start_time: TZAware | None = field(metadata={"kafka_type": "datetime_i64"})
    """None (-1 on the wire): no transaction in progress."""
    producer_id: ProducerId = field(metadata={"kafka_type": "int64"})
    producer_epoch: i16 = field(metadata={"kafka_type": "int16"})
    topics: tuple[TopicData, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeTransactionsResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(65)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    transaction_states: tuple[TransactionState, ...]

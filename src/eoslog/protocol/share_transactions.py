"""eoslog's extension of two of Kafka's messages for exactly-once queue processing: a share
consumer's acknowledgements made inside a producer's transaction (docs/consumer.md).

On the wire:

- ShareAcknowledge v1-v2: the acknowledge type ``TRANSACTIONAL_ACCEPT`` (100) for every record
  acknowledged inside the transaction, and the transaction in the tagged field
  ``TRANSACTION_TAG`` of the request (transactional id, producer id, producer epoch). The type is
  outside Kafka's 0-4, so a Kafka broker refuses it (INVALID_REQUEST, the records stay acquired)
  instead of accepting them outside the transaction; a type without the tag (a proxy that
  rewrote the request and dropped the tag) is refused by eoslog the same way. A Kafka client
  never sends either, and sees Kafka's messages byte for byte.
- WriteShareGroupState v1 (broker to broker): the same tagged field, when a share-partition
  leader asks the share coordinator of another broker to write inside the transaction.

The classes are kio's with the tagged field added (kio's reader refuses a tag it does not know);
``eoslog.protocol.messages`` serves them in place of kio's for those versions' requests.

No ``from __future__ import annotations``: kio reads the field types at run time.
"""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.share_acknowledge.v1 import request as share_acknowledge_v1
from kio.schema.share_acknowledge.v2 import request as share_acknowledge_v2
from kio.schema.types import ProducerId, TransactionalId
from kio.schema.write_share_group_state.v1 import request as write_share_group_state_v1
from kio.static.constants import EntityType
from kio.static.primitive import i16

TRANSACTIONAL_ACCEPT = 100
TRANSACTION_TAG = 10000


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareTransaction:
    """The producer whose open transaction the acknowledgements (or the state write) belong to;
    ``transactional_id`` None (the default, not written): none."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(79)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    transactional_id: TransactionalId | None = field(metadata={"kafka_type": "string"}, default=None)
    producer_id: ProducerId = field(metadata={"kafka_type": "int64"}, default=ProducerId(-1))
    producer_epoch: i16 = field(metadata={"kafka_type": "int16"}, default=i16(-1))


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareAcknowledgeRequestV1(share_acknowledge_v1.ShareAcknowledgeRequest):
    eoslog_transaction: ShareTransaction = field(metadata={"tag": TRANSACTION_TAG}, default=ShareTransaction())


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareAcknowledgeRequestV2(share_acknowledge_v2.ShareAcknowledgeRequest):
    eoslog_transaction: ShareTransaction = field(metadata={"tag": TRANSACTION_TAG}, default=ShareTransaction())


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteShareGroupStateRequestV1(write_share_group_state_v1.WriteShareGroupStateRequest):
    eoslog_transaction: ShareTransaction = field(metadata={"tag": TRANSACTION_TAG}, default=ShareTransaction())


# (api key, version) → the names of kio's request module that eoslog's classes replace.
REQUESTS: dict[tuple[int, int], dict[str, type]] = {
    (79, 1): {"ShareAcknowledgeRequest": ShareAcknowledgeRequestV1},
    (79, 2): {"ShareAcknowledgeRequest": ShareAcknowledgeRequestV2},
    (85, 1): {"WriteShareGroupStateRequest": WriteShareGroupStateRequestV1},
}

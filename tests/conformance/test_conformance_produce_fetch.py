"""Produce and fetch edge cases, ListOffsets and DeleteRecords: eoslog against Apache Kafka."""

from __future__ import annotations

import struct

import crc32c

from conformance.session import Broker, Catalogue, Target, i8, i32, i64, ms
from conformance.steps import (
    DELETE_RECORDS,
    DESCRIBE_CONFIGS,
    EARLIEST,
    LATEST,
    MAX_TIMESTAMP,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    TS,
    batch,
    call,
    create_topic,
    fetch,
    list_offsets,
    metadata,
    produce,
)

CATALOGUE = Catalogue("produce-fetch")
session = CATALOGUE.session


def test_session(session_name: str, brokers: tuple[Broker, Broker]) -> None:
    CATALOGUE.run(session_name, brokers)


@session("acks", "acks=1 and acks=all answers, the records fetched back, high watermark")
def _acks(t: Target) -> None:
    create_topic(t, "acks", record=True)
    produce(t, "acks", 0, batch([b"a", b"b"]), acks=1)
    produce(t, "acks", 0, batch([b"c"], keys=[b"k"]), acks=-1)
    fetch(t, "acks", 0, 0)


@session("acks-0", "acks=0: no answer, the records are stored")
def _acks0(t: Target) -> None:
    create_topic(t, "acks0")
    produce(t, "acks0", 0, batch([b"x"]), acks=0)
    # Nothing orders an unanswered produce before a later request: wait until it is in.
    t.until("the acks=0 record", lambda: list_offsets(t, "acks0", 0, LATEST, record=False)
            .topics[0].partitions[0].offset, lambda end: end == 1)
    fetch(t, "acks0", 0, 0)


@session("empty-records", "Produce with an empty record set")
def _empty(t: Target) -> None:
    create_topic(t, "empty")
    produce(t, "empty", 0, b"")
    fetch(t, "empty", 0, 0)


@session("null-records", "Produce with a null record set")
def _null(t: Target) -> None:
    create_topic(t, "nullrecords")
    t.conn("unanswered", timeout_s=5)
    produce(t, "nullrecords", 0, None, conn="unanswered")
    fetch(t, "nullrecords", 0, 0)


@session("oversized-batch", "a batch over the topic's max.message.bytes")
def _oversized(t: Target) -> None:
    create_topic(t, "oversized", configs={"max.message.bytes": "1000"})
    produce(t, "oversized", 0, batch([b"v" * 2000]))
    produce(t, "oversized", 0, batch([b"v" * 100]))
    fetch(t, "oversized", 0, 0)


@session("bad-crc", "a batch whose CRC does not match")
def _bad_crc(t: Target) -> None:
    create_topic(t, "badcrc")
    good = bytearray(batch([b"payload"]))
    good[-1] ^= 0xFF
    produce(t, "badcrc", 0, bytes(good))
    fetch(t, "badcrc", 0, 0)


@session("unknown-topic-partition", "produce, fetch and ListOffsets on an unknown topic and partition")
def _unknown(t: Target) -> None:
    create_topic(t, "known")
    produce(t, "no-such-topic", 0, batch([b"x"]))
    produce(t, "known", 7, batch([b"x"]))
    fetch(t, "no-such-topic", 0, 0)
    fetch(t, "known", 7, 0)
    list_offsets(t, "no-such-topic", 0, LATEST)
    list_offsets(t, "known", 7, LATEST)


@session("internal-topic-produce", "a client's produce to __consumer_offsets and __transaction_state")
def _internal_topics(t: Target) -> None:
    produce(t, "__consumer_offsets", 0, batch([b"not a group record"]))
    produce(t, "__transaction_state", 0, batch([b"not a transaction record"]), acks=1)


@session("offset-out-of-range", "fetch above the log end and below the log start")
def _out_of_range(t: Target) -> None:
    create_topic(t, "oor")
    produce(t, "oor", 0, batch([b"a", b"b"]))
    fetch(t, "oor", 0, 3)
    fetch(t, "oor", 0, -5)
    fetch(t, "oor", 0, 2)  # at the high watermark: empty, no error


@session("max-bytes-below-first-batch", "max_bytes smaller than the first batch still returns it")
def _max_bytes(t: Target) -> None:
    create_topic(t, "maxbytes")
    produce(t, "maxbytes", 0, batch([b"x" * 300]))
    produce(t, "maxbytes", 0, batch([b"y" * 300]))
    fetch(t, "maxbytes", 0, 0, max_bytes=10)
    fetch(t, "maxbytes", 0, 0, max_bytes=1 << 20, partition_max_bytes=10)
    fetch(t, "maxbytes", 0, 0, max_bytes=500)


@session("records-keys-headers", "keys, null values, headers and per-record timestamps round trip")
def _records(t: Target) -> None:
    create_topic(t, "records")
    produce(t, "records", 0, batch([b"v1", None, b""], keys=[b"k1", None, b"k3"],
                                   headers=(("h", b"1"), ("n", None)),
                                   timestamps=[TS, TS + 5, TS - 3]))
    fetch(t, "records", 0, 0)


@session("future-timestamp", "a record timestamp far in the future (message.timestamp.after.max.ms)")
def _future(t: Target) -> None:
    create_topic(t, "future")
    produce(t, "future", 0, batch([b"x"], ts=4_000_000_000_000))
    produce(t, "future", 0, batch([b"ok", b"late"], timestamps=[TS, 4_000_000_000_000]))
    create_topic(t, "past", configs={"message.timestamp.before.max.ms": "86400000"})
    produce(t, "past", 0, batch([b"old"], ts=TS))
    fetch(t, "future", 0, 0)


@session("list-offsets", "ListOffsets earliest, latest, max-timestamp and by timestamp, both isolation levels")
def _list_offsets(t: Target) -> None:
    create_topic(t, "lo")
    produce(t, "lo", 0, batch([b"a", b"b"], timestamps=[TS, TS + 10]))
    produce(t, "lo", 0, batch([b"c"], ts=TS + 5))
    for isolation in (READ_UNCOMMITTED, READ_COMMITTED):
        for ts in (EARLIEST, LATEST, MAX_TIMESTAMP, TS - 1, TS + 1, TS + 6, TS + 11):
            list_offsets(t, "lo", 0, ts, isolation=isolation)


@session("list-offsets-empty", "ListOffsets on an empty partition")
def _list_offsets_empty(t: Target) -> None:
    create_topic(t, "loempty")
    for ts in (EARLIEST, LATEST, MAX_TIMESTAMP, TS):
        list_offsets(t, "loempty", 0, ts)


@session("metadata", "Metadata of a topic with three partitions and of an unknown topic")
def _metadata(t: Target) -> None:
    create_topic(t, "meta", 3, record=True)
    metadata(t, ["meta", "no-such-meta"])


@session("delete-records", "DeleteRecords, then fetch and ListOffsets below and at the new log start")
def _delete_records(t: Target) -> None:
    create_topic(t, "delrec")
    for v in (b"a", b"b", b"c"):
        produce(t, "delrec", 0, batch([v]))
    m = t.types(DELETE_RECORDS, t.v(DELETE_RECORDS))
    for offset in (2, 10, -1):
        call(t, DELETE_RECORDS, "DeleteRecordsRequest", timeout=ms(10000), topics=(
            m.DeleteRecordsTopic(name="delrec", partitions=(
                m.DeleteRecordsPartition(partition_index=i32(0), offset=i64(offset)),)),))
        if offset == 2:
            fetch(t, "delrec", 0, 0)
            fetch(t, "delrec", 0, 2)
            list_offsets(t, "delrec", 0, EARLIEST)


@session("compressed", "gzip and zstd batches kept as the producer sent them")
def _compressed(t: Target) -> None:
    from eoslog.records import CompressionType, build_batch
    create_topic(t, "compressed")
    for codec in (CompressionType.GZIP, CompressionType.ZSTD):
        produce(t, "compressed", 0, build_batch([(None, b"z" * 50, ())] * 3, timestamp=TS, compression=codec))
    fetch(t, "compressed", 0, 0)


@session("produce-versions", "the same produce at every Produce version both brokers speak from v3")
def _produce_versions(t: Target) -> None:
    create_topic(t, "pversions")
    for v in range(3, t.v(0) + 1):
        produce(t, "pversions", 0, batch([struct.pack(">i", v)]), version=v, label=f"produce v{v}")


@session("record-errors", "KIP-467: keyless records to a compacted topic, timestamps out of range, a producer's "
         "LogAppendTime, a compressed record over max.decompressed.message.bytes")
def _record_errors(t: Target) -> None:
    from eoslog.records import CompressionType, build_batch
    create_topic(t, "recerr", configs={"cleanup.policy": "compact"})
    create_topic(t, "recerr-ts", configs={"cleanup.policy": "compact", "message.timestamp.before.max.ms": "86400000"})
    create_topic(t, "recerr-lat", configs={"message.timestamp.type": "LogAppendTime"})
    create_topic(t, "recerr-dec", configs={"max.decompressed.message.bytes": "100"})
    keys = [None if i % 10 == 0 else b"k%d" % i for i in range(100)]
    produce(t, "recerr", 0, batch([b"v"] * 100, keys=keys), label="keyless")
    produce(t, "recerr", 0, build_batch([(None if i % 2 else b"k", b"v", ()) for i in range(4)], timestamp=TS,
                                        compression=CompressionType.GZIP), label="keyless gzip")
    produce(t, "recerr", 0, batch([b"v"], keys=[b"k"]), label="keyed")
    # The key is judged first; a timestamp error among key errors makes the partition's INVALID_TIMESTAMP.
    produce(t, "recerr-ts", 0, batch([b"a", b"b"], keys=[None, b"k"]), label="keyless and too old")
    lat = bytearray(batch([b"v"], keys=[b"k"]))
    lat[22] |= 0x08  # attributes: the producer claims LogAppendTime
    struct.pack_into(">I", lat, 17, crc32c.crc32c(bytes(lat[21:])))
    produce(t, "recerr-lat", 0, bytes(lat), label="producer LogAppendTime")
    for size in (93, 94):  # a record body of 100 and 101 bytes
        produce(t, "recerr-dec", 0, build_batch([(None, b"x" * size, ())], timestamp=TS,
                                                compression=CompressionType.GZIP), label=f"decompressed {size}")
    produce(t, "recerr-dec", 0, batch([b"x" * 500]), label="uncompressed 500")
    fetch(t, "recerr", 0, 0)


@session("describe-configs", "DescribeConfigs of a topic with overrides, with synonyms, and of an unknown topic")
def _describe_configs(t: Target) -> None:
    create_topic(t, "described", configs={"retention.ms": "3600000", "cleanup.policy": "compact",
                                          "max.message.bytes": "2000"})
    m = t.types(DESCRIBE_CONFIGS, t.v(DESCRIBE_CONFIGS))
    for synonyms in (False, True):
        call(t, DESCRIBE_CONFIGS, "DescribeConfigsRequest", label=f"synonyms={synonyms}",
             include_synonyms=synonyms, include_documentation=False,
             resources=(m.DescribeConfigsResource(resource_type=i8(2), resource_name="described",
                                                  configuration_keys=None),
                        m.DescribeConfigsResource(resource_type=i8(2), resource_name="no-such-described",
                                                  configuration_keys=None)))
    call(t, DESCRIBE_CONFIGS, "DescribeConfigsRequest", label="some keys", include_synonyms=False,
         include_documentation=False, resources=(m.DescribeConfigsResource(
             resource_type=i8(2), resource_name="described", configuration_keys=("retention.ms", "segment.bytes")),))

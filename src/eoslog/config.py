"""Broker and topic configuration, under Apache Kafka's names and defaults.

A broker is configured by a Kafka-style properties file (``key=value`` lines) and by
flags; flags win, except on a security setting given differently by two sources, which
refuses to start (``merge_sources``). Topic configs fall back to the broker's ``log.*`` defaults exactly as
Kafka maps them (``log.segment.bytes`` → ``segment.bytes`` …).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eoslog.kafka_configs import BROKER as KAFKA_BROKER

LONG_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message says which and why."""


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: type
    default: Any
    doc: str
    # Broker property that supplies the default for a topic config, if any.
    broker_default: str | None = None
    valid: tuple[Any, ...] | None = None
    # Kafka's ConfigDef.Range: the least and the greatest value accepted (None: unbounded).
    at_least: int | float | None = None
    at_most: int | float | None = None
    # Kafka's ConfigDef.defineInternal: settable, but DescribeConfigs lists it only where it was set.
    internal: bool = False


def _defs(*items: ConfigDef) -> dict[str, ConfigDef]:
    return {d.name: d for d in items}


# Kafka 4.4's topic configs (LogConfig's, as DescribeConfigs lists them), with Kafka's defaults,
# broker synonyms and ranges; tests/unit/test_kafka_configs.py holds them against Kafka's jars.
# What each does in eoslog: docs/compatibility.md, "Topic configs".
TOPIC_CONFIGS: dict[str, ConfigDef] = _defs(
    ConfigDef("cleanup.policy", str, "delete", "delete, compact, or both",
              "log.cleanup.policy", ("delete", "compact", "compact,delete", "delete,compact")),
    ConfigDef("segment.bytes", int, 1073741824, "segment size before roll", "log.segment.bytes"),
    ConfigDef("segment.ms", int, 604800000, "segment age before roll", "log.roll.ms", at_least=1),
    ConfigDef("segment.jitter.ms", int, 0, "a random part of segment.ms taken off each segment's roll age, "
              "so that segments of many partitions do not roll at once", "log.roll.jitter.ms", at_least=0),
    ConfigDef("retention.ms", int, 604800000, "time to keep data, -1 forever", "log.retention.ms", at_least=-1),
    ConfigDef("retention.bytes", int, -1, "bytes to keep per partition, -1 no limit",
              "log.retention.bytes"),
    ConfigDef("max.message.bytes", int, 1048588, "largest batch accepted", "message.max.bytes", at_least=0),
    ConfigDef("max.decompressed.message.bytes", int, 2147483639,
              "largest record (its body, decompressed) accepted in a compressed batch",
              "max.decompressed.message.bytes", at_least=1, at_most=2147483639),
    ConfigDef("message.timestamp.type", str, "CreateTime", "CreateTime or LogAppendTime",
              "log.message.timestamp.type", ("CreateTime", "LogAppendTime")),
    ConfigDef("message.timestamp.before.max.ms", int, LONG_MAX,
              "how far in the past a CreateTime record's timestamp may be",
              "log.message.timestamp.before.max.ms", at_least=0),
    ConfigDef("message.timestamp.after.max.ms", int, 3600000,
              "how far in the future a CreateTime record's timestamp may be (Kafka 4's default: 1 h)",
              "log.message.timestamp.after.max.ms", at_least=0),
    ConfigDef("flush.messages", int, LONG_MAX, "fsync after this many messages",
              "log.flush.interval.messages", at_least=1),
    ConfigDef("flush.ms", int, LONG_MAX, "fsync after this many ms", "log.flush.interval.ms", at_least=0),
    ConfigDef("index.interval.bytes", int, 4096, "bytes between offset index entries",
              "log.index.interval.bytes", at_least=0),
    ConfigDef("segment.index.bytes", int, 10485760, "maximum index size",
              "log.index.size.max.bytes", at_least=4),
    ConfigDef("preallocate", bool, False, "reserve segment.bytes of disk when a segment is created "
              "(the file keeps its size: the blocks are reserved, not written)", "log.preallocate"),
    ConfigDef("file.delete.delay.ms", int, 60000, "how long a segment deleted by retention or compaction "
              "stays on disk as .deleted before it is removed", "log.segment.delete.delay.ms", at_least=0),
    ConfigDef("min.insync.replicas", int, 1, "replicas that must ack acks=all",
              "min.insync.replicas", at_least=1),
    ConfigDef("unclean.leader.election.enable", bool, False,
              "let a replica outside the ISR become this topic's leader (may lose acknowledged records)",
              "unclean.leader.election.enable"),
    ConfigDef("compression.type", str, "producer", "producer keeps the producer's codec",
              "compression.type", ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    ConfigDef("compression.gzip.level", int, -1, "gzip level of batches the broker compresses (-1: gzip's default)",
              "compression.gzip.level", (-1, *range(1, 10))),
    ConfigDef("compression.lz4.level", int, 9, "lz4 level of batches the broker compresses",
              "compression.lz4.level", at_least=1, at_most=17),
    ConfigDef("compression.zstd.level", int, 3, "zstd level of batches the broker compresses",
              "compression.zstd.level", at_least=-131072, at_most=22),
    ConfigDef("delete.retention.ms", int, 86400000, "how long tombstones are kept",
              "log.cleaner.delete.retention.ms", at_least=0),
    ConfigDef("min.compaction.lag.ms", int, 0, "minimum age before compaction",
              "log.cleaner.min.compaction.lag.ms", at_least=0),
    ConfigDef("max.compaction.lag.ms", int, LONG_MAX, "maximum time a record stays uncompacted: a log "
              "whose dirty part is older is cleaned whatever its dirty ratio",
              "log.cleaner.max.compaction.lag.ms", at_least=1),
    ConfigDef("min.cleanable.dirty.ratio", float, 0.5, "dirty ratio that triggers cleaning",
              "log.cleaner.min.cleanable.ratio", at_least=0, at_most=1),
    ConfigDef("leader.replication.throttled.replicas", str, "",
              "replicas whose replication is throttled on the leader side ('*' or partition:broker,...)"),
    ConfigDef("follower.replication.throttled.replicas", str, "",
              "replicas whose replication is throttled on the follower side ('*' or partition:broker,...)"),
    ConfigDef("errors.deadletterqueue.group.enable", bool, False,
              "whether groups may use this topic as a dead-letter queue"),
    # Tiered storage (KIP-405). eoslog has no remote storage, as a Kafka broker with
    # remote.log.storage.system.enable=false: remote.storage.enable=true is refused as Kafka
    # refuses it there; the others are accepted and kept, with nothing to act on.
    ConfigDef("remote.storage.enable", bool, False, "tiered storage for this topic (refused: no remote storage)"),
    ConfigDef("local.retention.ms", int, -2, "local retention under tiered storage (-2: retention.ms)",
              "log.local.retention.ms", at_least=-2),
    ConfigDef("local.retention.bytes", int, -2, "local retention under tiered storage (-2: retention.bytes)",
              "log.local.retention.bytes", at_least=-2),
    ConfigDef("remote.log.copy.disable", bool, False, "stop copying segments to remote storage"),
    ConfigDef("remote.log.delete.on.disable", bool, False, "delete remote data when tiering is turned off"),
    ConfigDef("remote.copy.lag.ms", int, 0, "delay before a segment is copied to remote storage",
              "log.remote.copy.lag.ms", at_least=-1),
    ConfigDef("remote.copy.lag.bytes", int, -1, "bytes held back from remote storage", "log.remote.copy.lag.bytes",
              at_least=-1),
)

# Kafka's topic configs of type INT (any other int one is LONG), and of type LIST.
TOPIC_INT_CONFIGS = frozenset({
    "segment.bytes", "max.message.bytes", "index.interval.bytes", "segment.index.bytes", "min.insync.replicas",
    "max.decompressed.message.bytes", "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
})
TIERED_STORAGE_REFUSED = ("Tiered Storage functionality is disabled in the broker. "
                          "Topic cannot be configured with remote log storage.")


BROKER_CONFIGS: dict[str, ConfigDef] = _defs(
    ConfigDef("node.id", int, 0, "this broker's id"),
    ConfigDef("log.dirs", str, "./eoslog-data", "directories holding partition logs, comma-separated"),
    ConfigDef("listeners", str, "PLAINTEXT://127.0.0.1:9092", "where to accept connections"),
    ConfigDef("advertised.listeners", str, "", "address given to clients (default: listeners)"),
    ConfigDef("metrics.listener", str, "", "http://HOST:PORT serving Prometheus metrics at /metrics (empty: off)"),
    ConfigDef("num.partitions", int, 1, "partitions of an auto-created topic"),
    ConfigDef("default.replication.factor", int, 1, "replication factor of new topics"),
    ConfigDef("auto.create.topics.enable", bool, True, "create topics on first use"),
    ConfigDef("delete.topic.enable", bool, True, "allow DeleteTopics"),
    ConfigDef("socket.request.max.bytes", int, 104857600, "largest request frame accepted"),
    ConfigDef("log.retention.check.interval.ms", int, 300000, "how often retention runs"),
    ConfigDef("log.flush.scheduler.interval.ms", int, 1000, "how often flush.ms is checked"),
    ConfigDef("log.segment.bytes", int, 1073741824, "default segment.bytes"),
    ConfigDef("log.roll.ms", int, 604800000, "default segment.ms"),
    ConfigDef("log.retention.ms", int, 604800000, "default retention.ms"),
    ConfigDef("log.retention.bytes", int, -1, "default retention.bytes"),
    ConfigDef("message.max.bytes", int, 1048588, "default max.message.bytes"),
    ConfigDef("log.message.timestamp.type", str, "CreateTime", "default message.timestamp.type"),
    ConfigDef("log.message.timestamp.before.max.ms", int, LONG_MAX,
              "default message.timestamp.before.max.ms"),
    ConfigDef("log.message.timestamp.after.max.ms", int, 3600000,
              "default message.timestamp.after.max.ms"),
    # eoslog's own (Kafka has no such setting): when an acknowledged write is on disk.
    ConfigDef("log.flush.policy", str, "auto",
              "group-commit: acks=all writes and coordinator writes are answered, and shown to "
              "consumers, once fsynced (one fsync round shared by all requests; in a cluster on the "
              "leader and every ISR follower); kafka: Kafka's behaviour, only flush.messages/flush.ms "
              "fsync; auto: group-commit, on a single node and in a cluster alike",
              valid=("auto", "group-commit", "kafka")),
    ConfigDef("log.flush.interval.messages", int, LONG_MAX, "default flush.messages"),
    ConfigDef("log.flush.interval.ms", int, LONG_MAX, "default flush.ms"),
    ConfigDef("log.index.interval.bytes", int, 4096, "default index.interval.bytes"),
    ConfigDef("log.index.size.max.bytes", int, 10485760, "default segment.index.bytes"),
    ConfigDef("log.cleanup.policy", str, "delete", "default cleanup.policy"),
    ConfigDef("log.cleaner.delete.retention.ms", int, 86400000, "default delete.retention.ms"),
    ConfigDef("log.cleaner.min.compaction.lag.ms", int, 0, "default min.compaction.lag.ms"),
    ConfigDef("log.cleaner.min.cleanable.ratio", float, 0.5, "default min.cleanable.dirty.ratio"),
    ConfigDef("log.cleaner.max.compaction.lag.ms", int, LONG_MAX, "default max.compaction.lag.ms"),
    ConfigDef("log.roll.jitter.ms", int, 0, "default segment.jitter.ms"),
    ConfigDef("log.segment.delete.delay.ms", int, 60000, "default file.delete.delay.ms"),
    ConfigDef("log.preallocate", bool, False, "default preallocate"),
    ConfigDef("compression.gzip.level", int, -1, "default compression.gzip.level"),
    ConfigDef("compression.lz4.level", int, 9, "default compression.lz4.level"),
    ConfigDef("compression.zstd.level", int, 3, "default compression.zstd.level"),
    ConfigDef("max.decompressed.message.bytes", int, 2147483639, "default max.decompressed.message.bytes"),
    ConfigDef("log.local.retention.ms", int, -2, "default local.retention.ms"),
    ConfigDef("log.local.retention.bytes", int, -2, "default local.retention.bytes"),
    ConfigDef("log.remote.copy.lag.ms", int, 0, "default remote.copy.lag.ms"),
    ConfigDef("log.remote.copy.lag.bytes", int, -1, "default remote.copy.lag.bytes"),
    ConfigDef("min.insync.replicas", int, 1, "default min.insync.replicas"),
    ConfigDef("compression.type", str, "producer", "default compression.type"),
    ConfigDef("fetch.max.bytes", int, 57671680, "cap on a fetch response"),
    ConfigDef("producer.id.expiration.ms", int, 86400000, "idle time after which producer state expires"),
    ConfigDef("producer.id.expiration.check.interval.ms", int, 600000, "how often producer expiry runs"),
    ConfigDef("group.initial.rebalance.delay.ms", int, 3000, "delay of a new group's first rebalance"),
    # Group coordinator and __consumer_offsets (Kafka's GroupCoordinatorConfig names).
    ConfigDef("group.min.session.timeout.ms", int, 6000, "smallest session timeout a member may ask for"),
    ConfigDef("group.max.session.timeout.ms", int, 1800000, "largest session timeout a member may ask for"),
    ConfigDef("group.max.size", int, 2147483647, "most members a classic group may have"),
    # KIP-848 consumer groups and KIP-932 share groups (GroupCoordinatorConfig, ShareGroupConfig):
    # the defaults of the group configs below and the bounds an altered group config must keep.
    ConfigDef("group.consumer.session.timeout.ms", int, 45000,
              "the timeout to detect client failures when using the consumer group protocol"),
    ConfigDef("group.consumer.min.session.timeout.ms", int, 45000, "smallest consumer.session.timeout.ms"),
    ConfigDef("group.consumer.max.session.timeout.ms", int, 60000, "largest consumer.session.timeout.ms"),
    ConfigDef("group.consumer.heartbeat.interval.ms", int, 5000,
              "the heartbeat interval given to the members of a consumer group"),
    ConfigDef("group.consumer.min.heartbeat.interval.ms", int, 5000, "smallest consumer.heartbeat.interval.ms"),
    ConfigDef("group.consumer.max.heartbeat.interval.ms", int, 15000, "largest consumer.heartbeat.interval.ms"),
    ConfigDef("group.consumer.max.size", int, 2147483647, "most members a consumer group (KIP-848) may have"),
    ConfigDef("group.consumer.assignors", str, "uniform,range",
              "the server-side assignors of consumer groups (names or Kafka's class names), the first the default"),
    ConfigDef("group.consumer.migration.policy", str, "bidirectional",
              "online conversions between classic and consumer groups: disabled, upgrade, downgrade, bidirectional",
              None, ("disabled", "upgrade", "downgrade", "bidirectional")),
    ConfigDef("group.consumer.assignment.interval.ms", int, 1000,
              "the least time between two target assignments of a consumer group (KIP-1263)"),
    ConfigDef("group.consumer.min.assignment.interval.ms", int, 0, "smallest consumer.assignment.interval.ms"),
    ConfigDef("group.consumer.max.assignment.interval.ms", int, 15000, "largest consumer.assignment.interval.ms"),
    ConfigDef("group.consumer.assignor.offload.enable", bool, True,
              "Kafka runs assignors on a background thread; eoslog runs them on its loop (accepted, no effect)"),
    ConfigDef("group.coordinator.rebalance.protocols", str, "classic,consumer,streams",
              "the group protocols served: consumer serves KIP-848 consumer groups (with group.version >= 1)"),
    ConfigDef("group.share.session.timeout.ms", int, 45000,
              "the timeout to detect client failures when using the share group protocol"),
    ConfigDef("group.share.min.session.timeout.ms", int, 45000, "smallest share.session.timeout.ms"),
    ConfigDef("group.share.max.session.timeout.ms", int, 60000, "largest share.session.timeout.ms"),
    ConfigDef("group.share.heartbeat.interval.ms", int, 5000,
              "the heartbeat interval given to the members of a share group"),
    ConfigDef("group.share.min.heartbeat.interval.ms", int, 5000, "smallest share.heartbeat.interval.ms"),
    ConfigDef("group.share.max.heartbeat.interval.ms", int, 15000, "largest share.heartbeat.interval.ms"),
    ConfigDef("group.share.record.lock.duration.ms", int, 30000,
              "the record acquisition lock duration in milliseconds for share groups"),
    ConfigDef("group.share.min.record.lock.duration.ms", int, 15000, "smallest share.record.lock.duration.ms"),
    ConfigDef("group.share.max.record.lock.duration.ms", int, 60000, "largest share.record.lock.duration.ms"),
    ConfigDef("group.share.delivery.count.limit", int, 5,
              "deliveries of a record after which it is archived instead of handed out again"),
    ConfigDef("group.share.min.delivery.count.limit", int, 2, "smallest share.delivery.count.limit"),
    ConfigDef("group.share.max.delivery.count.limit", int, 10, "largest share.delivery.count.limit"),
    ConfigDef("group.share.partition.max.record.locks", int, 2000,
              "in-flight (acquired) records a share-partition may hold at once"),
    ConfigDef("group.share.min.partition.max.record.locks", int, 100, "smallest share.partition.max.record.locks"),
    ConfigDef("group.share.max.partition.max.record.locks", int, 4000, "largest share.partition.max.record.locks"),
    ConfigDef("group.share.max.share.sessions", int, 2000, "share sessions this broker keeps"),
    ConfigDef("group.share.max.size", int, 200, "most members a share group may have"),
    # Share coordinator and __share_group_state (Kafka's ShareCoordinatorConfig names).
    ConfigDef("share.coordinator.state.topic.num.partitions", int, 50, "partitions of __share_group_state"),
    ConfigDef("share.coordinator.state.topic.replication.factor", int, 3,
              "replication factor of __share_group_state (capped at the live brokers)"),
    ConfigDef("share.coordinator.state.topic.min.isr", int, 2, "min.insync.replicas of __share_group_state"),
    ConfigDef("share.coordinator.state.topic.segment.bytes", int, 104857600, "segment.bytes of __share_group_state"),
    ConfigDef("share.coordinator.snapshot.update.records.per.snapshot", int, 500,
              "update records of a share-partition after which its whole state is written as a snapshot"),
    ConfigDef("share.coordinator.write.timeout.ms", int, 5000,
              "how long a share state write waits to be replicated"),
    ConfigDef("share.coordinator.load.buffer.size", int, 5242880,
              "bytes read per step when loading share-partition states"),
    ConfigDef("share.coordinator.state.topic.prune.interval.ms", int, 300000,
              "how often __share_group_state is pruned below the oldest snapshot still needed"),
    # Connections (SocketServerConfigs).
    ConfigDef("connections.max.idle.ms", int, 600000,
              "idle connections are closed after this long (checked about every tenth of it)"),
    ConfigDef("max.connections", int, 2147483647,
              "connections the broker serves at once (listener.name.<name>.max.connections per listener); "
              "beyond it a new connection waits unread, except on the inter-broker listener", at_least=0),
    ConfigDef("max.connections.per.ip", int, 2147483647,
              "connections from one address; a connection beyond it is closed at once (0: only the overrides')",
              at_least=0),
    ConfigDef("max.connections.per.ip.overrides", str, "",
              "host:count pairs overriding max.connections.per.ip, e.g. hostName:100,127.0.0.1:200"),
    # Security (docs/security.md): Kafka's listener, TLS, SASL and authorizer names.
    ConfigDef("listener.security.protocol.map", str,
              "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
              "listener name to security protocol"),
    ConfigDef("inter.broker.listener.name", str, "", "listener brokers use to reach each other "
              "(empty: each broker's first listener); the broker's own SASL login is "
              "listener.name.<name>.<mechanism>.sasl.jaas.config"),
    ConfigDef("sasl.mechanism.inter.broker.protocol", str, "GSSAPI",
              "SASL mechanism of inter-broker connections (PLAIN, SCRAM-SHA-256/512 served)"),
    ConfigDef("ssl.keystore.type", str, "PEM", "only PEM: a certificate chain and its private key",
              valid=("PEM",)),
    ConfigDef("ssl.keystore.location", str, "", "PEM file with this broker's certificate chain and key"),
    ConfigDef("ssl.key.password", str, "", "password of the keystore's private key, if encrypted"),
    ConfigDef("ssl.truststore.type", str, "PEM", "only PEM: CA certificates", valid=("PEM",)),
    ConfigDef("ssl.truststore.location", str, "", "PEM file of the CAs client certificates must chain to"),
    ConfigDef("ssl.client.auth", str, "none", "client certificates: required, requested or none",
              valid=("required", "requested", "none")),
    ConfigDef("ssl.principal.mapping.rules", str, "DEFAULT",
              "RULE:pattern/replacement/[LU] rules mapping a certificate's DN to a user name"),
    ConfigDef("ssl.enabled.protocols", str, "TLSv1.2,TLSv1.3", "TLS versions accepted (1.2 at least)"),
    ConfigDef("sasl.enabled.mechanisms", str, "GSSAPI",
              "SASL mechanisms offered: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (GSSAPI is not served)"),
    ConfigDef("connections.max.reauth.ms", int, 0,
              "SASL session lifetime (KIP-368): re-authenticate within it or be disconnected; 0: forever"),
    ConfigDef("connection.failed.authentication.delay.ms", int, 100,
              "delay before answering a failed authentication (slows password guessing)"),
    ConfigDef("authorizer.class.name", str, "",
              "StandardAuthorizer (or AclAuthorizer) enables ACLs; empty: everything is allowed"),
    ConfigDef("super.users", str, "", "principals allowed everything, separated by ';' (User:admin;User:CN=x)"),
    ConfigDef("allow.everyone.if.no.acl.found", bool, False, "allow access to a resource no ACL matches"),
    ConfigDef("authorizer.log.level", str, "DEBUG",
              "level of the authorizer decision log (denials are logged at INFO at least)",
              valid=("DEBUG", "INFO", "WARNING")),
    ConfigDef("offsets.topic.num.partitions", int, 50, "partitions of __consumer_offsets"),
    ConfigDef("offsets.topic.segment.bytes", int, 104857600, "segment.bytes of __consumer_offsets"),
    ConfigDef("offsets.topic.compression.codec", int, 0,
              "codec of offset commit batches (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)"),
    ConfigDef("offsets.load.buffer.size", int, 5242880, "bytes read per step when loading groups"),
    ConfigDef("offsets.retention.minutes", int, 10080,
              "how long offsets of an empty group (or a standalone consumer) are kept"),
    ConfigDef("offsets.retention.check.interval.ms", int, 600000, "how often expired offsets are removed"),
    ConfigDef("offset.metadata.max.bytes", int, 4096, "largest metadata string of a committed offset"),
    # Transaction coordinator and __transaction_state (Kafka's TransactionStateManagerConfigs
    # and TransactionLogConfigs names).
    ConfigDef("transaction.max.timeout.ms", int, 900000, "largest transaction timeout a producer may ask for"),
    ConfigDef("transaction.state.log.num.partitions", int, 50, "partitions of __transaction_state"),
    ConfigDef("transaction.state.log.segment.bytes", int, 104857600, "segment.bytes of __transaction_state"),
    ConfigDef("transaction.state.log.load.buffer.size", int, 5242880,
              "bytes read per step when loading transactional ids"),
    ConfigDef("transactional.id.expiration.ms", int, 604800000,
              "idle time after which a transactional id with no open transaction is forgotten"),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", int, 10000,
              "how often transactions past their timeout are aborted"),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", int, 3600000,
              "how often expired transactional ids are removed"),
    ConfigDef("transaction.two.phase.commit.enable", bool, False,
              "let producers take part in two-phase commit (KIP-939): their transactions never time out"),
    # eoslog's own (Kafka answers at once): docs/architecture.md, "Held CONCURRENT_TRANSACTIONS".
    ConfigDef("transaction.concurrent.hold.ms", int, 5000,
              "how long the transaction coordinator holds a request it would answer CONCURRENT_TRANSACTIONS "
              "while the id's own previous step (markers, CompleteCommit) finishes, then handles it as a "
              "retry would; 0: Kafka's behaviour, answer at once (the client backs off retry.backoff.ms)"),
    # Log cleaner (compaction of cleanup.policy=compact topics).
    ConfigDef("log.cleaner.enable", bool, True, "run the log cleaner"),
    ConfigDef("log.cleaner.backoff.ms", int, 15000, "pause between cleaner passes with nothing to clean"),
    ConfigDef("log.cleaner.dedupe.buffer.size", int, 134217728,
              "memory for the key→offset map of one cleaning pass (24 bytes per key, as Kafka)"),
    # Cluster mode (docs/cluster.md): set zookeeper.connect to join a cluster; without it the
    # broker is the single node it always was and the settings below are not used.
    ConfigDef("broker.id", int, -1, "this broker's id in a ZooKeeper cluster (-1: node.id)"),
    ConfigDef("broker.rack", str, "", "rack of this broker (reported in Metadata, used to place replicas)"),
    ConfigDef("replica.selector.class", str, "", "which replica a consumer is sent to fetch from (KIP-392)",
              valid=("", "org.apache.kafka.common.replica.LeaderSelector",
                     "org.apache.kafka.common.replica.RackAwareReplicaSelector")),
    ConfigDef("zookeeper.connect", str, "", "HOST:PORT[,HOST:PORT][/chroot] of ZooKeeper: cluster mode"),
    ConfigDef("zookeeper.session.timeout.ms", int, 18000,
              "ZooKeeper session timeout: how long a silent broker stays registered"),
    ConfigDef("zookeeper.connection.timeout.ms", int, -1,
              "how long to wait for a connection at start-up (-1: zookeeper.session.timeout.ms)"),
    ConfigDef("zookeeper.change.notification.expiration.ms", int, 900000,
              "change notifications (/config/changes, /kafka-acl-changes) older than this are deleted "
              "after the next change is processed (Kafka's ZooKeeper-era listener: a fixed 15 min)"),
    ConfigDef("offsets.topic.replication.factor", int, 3,
              "replication factor of __consumer_offsets (capped at the live brokers)"),
    ConfigDef("transaction.state.log.replication.factor", int, 3,
              "replication factor of __transaction_state (capped at the live brokers)"),
    ConfigDef("transaction.state.log.min.isr", int, 2, "min.insync.replicas of __transaction_state"),
    ConfigDef("replica.lag.time.max.ms", int, 30000,
              "a follower that has not caught up for this long leaves the ISR"),
    ConfigDef("replica.fetch.max.bytes", int, 1048576, "bytes a follower asks per partition"),
    ConfigDef("replica.fetch.response.max.bytes", int, 10485760, "bytes a follower asks per fetch"),
    ConfigDef("replica.fetch.wait.max.ms", int, 500, "how long a follower's fetch may wait for data"),
    ConfigDef("replica.fetch.min.bytes", int, 1, "bytes a follower's fetch waits for"),
    ConfigDef("quota.window.num", int, 11, "windows client quotas are measured over"),
    ConfigDef("quota.window.size.seconds", int, 1, "length of one client quota window"),
    ConfigDef("controller.quota.window.num", int, 11, "windows a controller mutation quota's burst spans"),
    ConfigDef("controller.quota.window.size.seconds", int, 1, "length of one controller mutation quota window"),
    ConfigDef("replication.quota.window.num", int, 11, "windows the replication throttles measure over"),
    ConfigDef("replication.quota.window.size.seconds", int, 1, "length of one replication throttle window"),
    ConfigDef("replica.fetch.backoff.ms", int, 1000, "pause after a failed follower fetch"),
    ConfigDef("replica.socket.timeout.ms", int, 30000, "timeout of a follower's requests"),
    ConfigDef("replica.high.watermark.checkpoint.interval.ms", int, 5000,
              "how often high watermarks are written to replication-offset-checkpoint"),
    ConfigDef("num.replica.fetchers", int, 1, "fetcher tasks per leader broker"),
    ConfigDef("unclean.leader.election.enable", bool, False,
              "let a replica outside the ISR become leader (may lose acknowledged records)"),
    ConfigDef("controlled.shutdown.enable", bool, True, "move leadership away before shutting down"),
    ConfigDef("controlled.shutdown.max.retries", int, 3, "attempts of a controlled shutdown"),
    ConfigDef("controlled.shutdown.retry.backoff.ms", int, 5000, "pause between those attempts"),
    ConfigDef("auto.leader.rebalance.enable", bool, True, "move leadership back to preferred replicas"),
    ConfigDef("leader.imbalance.check.interval.seconds", int, 300, "how often the controller checks"),
    ConfigDef("leader.imbalance.per.broker.percentage", int, 10,
              "non-preferred leaders a broker may have before a rebalance"),
)


# Kafka 4.4's group configs (GroupConfig) of the group kinds eoslog serves, settable per group with
# IncrementalAlterConfigs; each defaults to the broker config it names. They steer KIP-848 consumer
# groups and share groups; classic groups read none of them, as in Kafka.
GROUP_CONFIGS: dict[str, ConfigDef] = _defs(
    ConfigDef("consumer.session.timeout.ms", int, 45000,
              "the timeout to detect client failures when using the consumer group protocol",
              "group.consumer.session.timeout.ms"),
    ConfigDef("consumer.heartbeat.interval.ms", int, 5000,
              "the heartbeat interval given to the members of a consumer group",
              "group.consumer.heartbeat.interval.ms"),
    ConfigDef("consumer.assignment.interval.ms", int, 1000,
              "the least time between two target assignments of the consumer group",
              "group.consumer.assignment.interval.ms"),
    ConfigDef("consumer.assignor.offload.enable", bool, True,
              "whether Kafka runs the group's assignor on a background thread (eoslog: no effect)",
              "group.consumer.assignor.offload.enable", internal=True),
    ConfigDef("share.session.timeout.ms", int, 45000,
              "the timeout to detect client failures when using the share group protocol",
              "group.share.session.timeout.ms"),
    ConfigDef("share.heartbeat.interval.ms", int, 5000,
              "the heartbeat interval given to the members of a share group", "group.share.heartbeat.interval.ms"),
    ConfigDef("share.record.lock.duration.ms", int, 30000,
              "the record acquisition lock duration in milliseconds for share groups",
              "group.share.record.lock.duration.ms"),
    ConfigDef("share.auto.offset.reset", str, "latest", "the strategy to initialize the share-partition start offset",
              None, ("latest", "earliest")),
    ConfigDef("share.delivery.count.limit", int, 5,
              "deliveries of a record after which it is archived instead of handed out again",
              "group.share.delivery.count.limit"),
    ConfigDef("share.partition.max.record.locks", int, 2000,
              "in-flight (acquired) records a share-partition may hold at once",
              "group.share.partition.max.record.locks"),
    ConfigDef("share.isolation.level", str, "read_uncommitted",
              "read_committed: share consumers get only committed records, up to the last stable offset",
              None, ("read_uncommitted", "read_committed")),
)

# Configs of type LIST (APPEND and SUBTRACT apply to these only).
LIST_CONFIGS = frozenset({"cleanup.policy", "log.cleanup.policy", "leader.replication.throttled.replicas",
                          "follower.replication.throttled.replicas"})

def is_secret(name: str) -> bool:
    """Kafka's PASSWORD-typed configs (never reported, never logged): ssl.key.password, any
    listener-prefixed one, sasl.jaas.config, and every other Kafka defines as PASSWORD."""
    if name.endswith(("ssl.key.password", "ssl.keystore.password", "ssl.truststore.password", "sasl.jaas.config")):
        return True
    kafka = KAFKA_BROKER.get(name)
    return kafka is not None and kafka[0] == "PASSWORD"


# Broker names that stand in for another (BrokerConfig.load converts them), in the
# precedence Kafka gives them; the first name of each chain is the primary one.
BROKER_SYNONYMS: dict[str, tuple[str, ...]] = {
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.roll.ms": ("log.roll.ms", "log.roll.hours"),
    "log.roll.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
}
_UNIT_FACTORS = {"minutes": 60000, "hours": 3600000}
SYNONYM_CHAIN: dict[str, tuple[str, ...]] = {n: chain for chain in BROKER_SYNONYMS.values() for n in chain}

# Broker configs that IncrementalAlterConfigs may change while the broker runs, each taking
# effect at once (Kafka's DynamicBrokerConfig.AllDynamicConfigs, as far as eoslog has them):
# the topic defaults and the log cleaner's settings. Kafka's dynamic listeners are not here:
# eoslog cannot re-bind its listener at run time, so it reports them read-only.
# The hour/minute aliases are not: Kafka 4.4 lists them read-only and refuses to change them.
# Kafka's DynamicConfig.Broker: dynamic-only broker configs (no static default, not listed by
# DescribeConfigs until set), bytes per second; unset means no throttle.
REPLICATION_THROTTLE_CONFIGS = frozenset({
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
})
DYNAMIC_BROKER_CONFIGS = frozenset(
    {d.broker_default for d in TOPIC_CONFIGS.values() if d.broker_default}
    | {"log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size"}
    | REPLICATION_THROTTLE_CONFIGS
)


def throttle_rate(config: BrokerConfig, name: str) -> int:
    """A replication throttle's bytes/s (Long.MAX_VALUE, no throttle, when unset)."""
    return int(config.values.get(name, 2**63 - 1))


def _coerce(defn: ConfigDef, raw: Any) -> Any:
    try:
        if defn.type is bool:
            if isinstance(raw, bool):
                value: Any = raw
            elif str(raw).strip().lower() in ("true", "false"):
                value = str(raw).strip().lower() == "true"
            else:
                raise ValueError(raw)
        elif defn.type is int:
            value = int(raw)
        elif defn.type is float:
            value = float(raw)
        else:
            value = str(raw)
    except (TypeError, ValueError):
        why = {bool: "Expected value to be either true or false",
               int: f"Not a number of type {'INT' if defn.name in TOPIC_INT_CONFIGS else 'LONG'}",
               float: "Not a number of type DOUBLE"}.get(defn.type, f"Not a {defn.type.__name__}")
        raise ConfigError(f"Invalid value {raw} for configuration {defn.name}: {why}") from None
    if defn.valid is not None and value not in defn.valid:
        if defn.type is int:  # compression.gzip.level, Kafka's CompressionType validator
            raise ConfigError(f"Invalid value {raw} for configuration {defn.name}: Value must be between "
                              f"{defn.valid[1]} and {defn.valid[-1]} or equal to {defn.valid[0]}")
        raise ConfigError(f"Invalid value {raw} for configuration {defn.name}: String must be one of: "
                          f"{', '.join(map(str, defn.valid))}")
    if defn.at_least is not None and value < defn.at_least:
        raise ConfigError(f"Invalid value {raw} for configuration {defn.name}: Value must be at least {defn.at_least}")
    if defn.at_most is not None and value > defn.at_most:
        raise ConfigError(f"Invalid value {raw} for configuration {defn.name}: Value must be no more than "
                          f"{defn.at_most}")
    return value


def convert(defn: ConfigDef, raw: Any, *, at_least: int | None = None) -> Any:
    """``raw`` as ``defn``'s type, refused (ConfigError) outside its valid values or below
    ``at_least`` (Kafka's ConfigDef.Range.atLeast)."""
    value = _coerce(defn, raw)
    if at_least is not None and value < at_least:
        raise ConfigError(f"Invalid value {raw} for configuration {defn.name}: Value must be at least {at_least}")
    return value


def config_string(value: Any) -> str | None:
    """A value as Kafka's ConfigDef.convertToString writes it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_properties(text: str) -> dict[str, str]:
    """Parse a Java-style properties file (``key=value``, ``#`` comments)."""
    props: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            raise ConfigError(f"line {lineno}: expected key=value, got {line!r}")
        props[line[:sep].strip()] = line[sep + 1 :].strip()
    return props


@dataclass
class BrokerConfig:
    """A broker's configuration in Kafka's layers, highest first: dynamic for this broker,
    dynamic cluster-wide default (both set with IncrementalAlterConfigs, see
    ``broker/config_admin.py``), static (the properties file and flags), Kafka's default.
    ``values`` holds the effective values."""

    values: dict[str, Any] = field(default_factory=dict)
    # Keys set by the properties file or flags (Kafka's static broker configs), as
    # opposed to defaults; DescribeConfigs reports the two with different sources.
    explicit: frozenset[str] = frozenset()
    static: dict[str, Any] = field(default_factory=dict)
    dynamic_default: dict[str, str] = field(default_factory=dict)
    dynamic_broker: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(
        cls, path: Path | None = None, overrides: Mapping[str, Any] | None = None,
        *, flags: Sequence[tuple[str, Mapping[str, Any]]] = (),
    ) -> BrokerConfig:
        """The file, then ``overrides``, then each named flag (``("--listen", {...})``), merged
        by ``merge_sources``: a later source wins, except on a security setting."""
        sources: list[tuple[str, Mapping[str, Any]]] = []
        if path is not None:
            sources.append((f"--config {path}", parse_properties(path.read_text())))
        if overrides:
            sources.append(("an override", {k: v for k, v in overrides.items() if v is not None}))
        raw = merge_sources([*sources, *flags])
        return cls(resolve_broker_values(raw), frozenset(raw), raw)

    def with_dynamic(self, default: Mapping[str, str], broker: Mapping[str, str]) -> dict[str, Any]:
        """The effective values with these dynamic layers (ConfigError if one is invalid)."""
        return resolve_broker_values({**self.static, **default, **broker})

    def set_dynamic(self, default: Mapping[str, str], broker: Mapping[str, str]) -> None:
        self.values = self.with_dynamic(default, broker)
        self.dynamic_default, self.dynamic_broker = dict(default), dict(broker)

    def static_value(self, key: str) -> Any:
        """What the properties file or a flag set ``key`` to, as Kafka would convert it."""
        defn = BROKER_CONFIGS.get(key)
        raw = self.static[key]
        return _coerce(defn, raw) if defn is not None else raw

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @property
    def node_id(self) -> int:
        return int(self.values["node.id"])

    @property
    def zookeeper_connect(self) -> str:
        """Empty in single-node mode."""
        return str(self.values["zookeeper.connect"]).strip()

    @property
    def group_commit(self) -> bool:
        """log.flush.policy resolved: fsync before acknowledging (the default; in a cluster too
        since issue 28, so that a power cut of every replica at once loses nothing acknowledged)."""
        return str(self.values["log.flush.policy"]) != "kafka"

    @property
    def zookeeper_connection_timeout_ms(self) -> int:
        timeout = int(self.values["zookeeper.connection.timeout.ms"])
        return timeout if timeout > 0 else int(self.values["zookeeper.session.timeout.ms"])

    @property
    def log_dirs(self) -> list[Path]:
        """``log.dirs``, comma-separated (JBOD): each holds partitions, the first the metadata."""
        return [Path(d.strip()) for d in str(self.values["log.dirs"]).split(",") if d.strip()]

    @property
    def log_dir(self) -> Path:
        """The first of ``log.dirs``: the metadata directory (topics.json and the broker's other files)."""
        return self.log_dirs[0]

    def listener(self) -> tuple[str, int]:
        return parse_listener(str(self.values["listeners"]))

    def advertised(self) -> tuple[str, int]:
        adv = str(self.values.get("advertised.listeners") or "")
        return parse_listener(adv) if adv else self.listener()

    def topic_defaults(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, d in TOPIC_CONFIGS.items():
            if d.broker_default and d.broker_default in self.values:
                out[name] = _coerce(d, self.values[d.broker_default])
            else:
                out[name] = d.default
        return out


# The settings that decide who may connect and what they may do, and where the ACLs and
# credentials are kept (log.dirs, zookeeper.connect): docs/security.md, "One value per setting".
SECURITY_SETTINGS = frozenset({
    "listeners", "advertised.listeners", "listener.security.protocol.map", "inter.broker.listener.name",
    "log.dirs", "zookeeper.connect", "authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found",
    "connections.max.reauth.ms", "connection.failed.authentication.delay.ms",
})
_SECURITY_PREFIXES = ("ssl.", "sasl.", "listener.name.")


def is_security_setting(name: str) -> bool:
    return name in SECURITY_SETTINGS or name.startswith(_SECURITY_PREFIXES)


def _comparable(name: str, value: Any) -> object:
    """A value as it takes effect, so that two spellings of one thing are not a conflict:
    ``127.0.0.1:9092`` and ``PLAINTEXT://127.0.0.1:9092``, ``./data`` and ``data``."""
    text = str(value).strip()
    if name in ("listeners", "advertised.listeners"):
        items = [i.strip() for i in text.split(",") if i.strip()]
        return sorted((i.split("://", 1)[0].upper() if "://" in i else "PLAINTEXT", i.rsplit("://", 1)[-1])
                      for i in items)
    if name == "log.dirs":
        return [os.path.abspath(d.strip()) for d in text.split(",") if d.strip()]
    return text.lower() if text.lower() in ("true", "false") else text


def merge_sources(sources: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """One broker configuration from its sources, lowest first (the properties file, then the
    flags in the order given). The rule (README, docs/security.md): a later source wins, as
    Kafka's ``--override`` over its file, except on a security setting (``is_security_setting``):
    two sources that give one differently refuse to start, naming both, so that no flag can
    silently drop a security protocol, an authorizer or the directory holding the ACLs."""
    raw: dict[str, Any] = {}
    given_by: dict[str, str] = {}
    for source, values in sources:
        for key, value in values.items():
            if (key in raw and is_security_setting(key)
                    and _comparable(key, raw[key]) != _comparable(key, value)):
                raise ConfigError(
                    f"{key} is given twice, differently: {given_by[key]} sets {raw[key]!r}, {source} sets "
                    f"{value!r}. A security setting is never overridden silently: give it once")
            raw[key], given_by[key] = value, source
    return raw


# The internal topics' replication settings a single node (no zookeeper.connect) defaults to,
# as Kafka's own single-node server.properties sets them: one broker cannot hold three replicas.
SINGLE_NODE_DEFAULTS = {"offsets.topic.replication.factor": 1, "transaction.state.log.replication.factor": 1,
                        "transaction.state.log.min.isr": 1}


def resolve_broker_values(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Kafka's defaults overlaid with ``raw`` (name → value as written), converted."""
    values = {name: d.default for name, d in BROKER_CONFIGS.items()}
    for key, val in raw.items():
        defn = BROKER_CONFIGS.get(key)
        if defn is None:
            # Unknown keys are kept (Kafka warns and ignores them); they may be
            # topic-level defaults or settings of a later version.
            values[key] = val
            continue
        values[key] = _coerce(defn, val)
    # broker.id (ZooKeeper mode's name) and node.id (KRaft's) name the same thing.
    if int(values["broker.id"]) == -1:
        values["broker.id"] = values["node.id"]
    elif "node.id" not in raw:
        values["node.id"] = values["broker.id"]
    elif values["node.id"] != values["broker.id"]:
        raise ConfigError(f"node.id={values['node.id']} and broker.id={values['broker.id']} "
                          "differ; set one of them")
    if not str(values["zookeeper.connect"]).strip():
        values.update({k: v for k, v in SINGLE_NODE_DEFAULTS.items() if k not in raw})
    # Kafka's hour/minute variants of the time settings.
    for primary, chain in BROKER_SYNONYMS.items():
        for alias in chain[1:]:
            if alias in raw and primary not in raw:
                factor = _UNIT_FACTORS[alias.rsplit(".", 1)[1]]
                values[primary] = _coerce(ConfigDef(alias, int, None, ""), raw[alias]) * factor
                break
    return values


def parse_listener(spec: str) -> tuple[str, int]:
    """``PLAINTEXT://host:port`` or ``host:port`` → (host, port)."""
    first = spec.split(",")[0].strip()
    if "://" in first:
        first = first.split("://", 1)[1]
    host, sep, port = first.rpartition(":")
    if not sep:
        raise ConfigError(f"listener {spec!r} must be HOST:PORT or PLAINTEXT://HOST:PORT")
    try:
        return (host.strip("[]") or "0.0.0.0", int(port))
    except ValueError:
        raise ConfigError(f"listener {spec!r}: port {port!r} is not a number") from None


class TopicConfig:
    """Effective configuration of one topic: its overrides over the broker defaults."""

    __slots__ = ("_defaults", "_values", "overrides")

    def __init__(self, defaults: Mapping[str, Any], overrides: Mapping[str, Any] | None = None):
        self._defaults = dict(defaults)
        self.overrides: dict[str, Any] = {}
        for key, val in (overrides or {}).items():
            defn = TOPIC_CONFIGS.get(key)
            if defn is None:
                raise ConfigError(f"unknown topic config {key!r}")
            self.overrides[key] = _coerce(defn, val)
        self._values = {**self._defaults, **self.overrides}

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def items(self) -> list[tuple[str, Any]]:
        return sorted(self._values.items())

    # Hot-path accessors, named as Kafka names the configs.
    @property
    def segment_bytes(self) -> int:
        return int(self._values["segment.bytes"])

    @property
    def segment_ms(self) -> int:
        return int(self._values["segment.ms"])

    @property
    def retention_ms(self) -> int:
        return int(self._values["retention.ms"])

    @property
    def retention_bytes(self) -> int:
        return int(self._values["retention.bytes"])

    @property
    def max_message_bytes(self) -> int:
        return int(self._values["max.message.bytes"])

    @property
    def log_append_time(self) -> bool:
        return str(self._values["message.timestamp.type"]) == "LogAppendTime"

    @property
    def timestamp_before_max_ms(self) -> int:
        return int(self._values["message.timestamp.before.max.ms"])

    @property
    def timestamp_after_max_ms(self) -> int:
        return int(self._values["message.timestamp.after.max.ms"])

    @property
    def flush_messages(self) -> int:
        return int(self._values["flush.messages"])

    @property
    def flush_ms(self) -> int:
        return int(self._values["flush.ms"])

    @property
    def index_interval_bytes(self) -> int:
        return int(self._values["index.interval.bytes"])

    @property
    def min_insync_replicas(self) -> int:
        return int(self._values["min.insync.replicas"])

    @property
    def compact(self) -> bool:
        return "compact" in str(self._values["cleanup.policy"])

    @property
    def delete(self) -> bool:
        return "delete" in str(self._values["cleanup.policy"])

    @property
    def segment_jitter_ms(self) -> int:
        return int(self._values["segment.jitter.ms"])

    @property
    def max_segment_ms(self) -> int:
        """The age at which a segment rolls: segment.ms, or max.compaction.lag.ms if smaller on a
        compacted topic, so that the active segment's records become cleanable in time (KIP-354,
        Kafka's LogConfig.maxSegmentMs)."""
        if self.compact:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def max_compaction_lag_ms(self) -> int:
        return int(self._values["max.compaction.lag.ms"])

    @property
    def file_delete_delay_ms(self) -> int:
        return int(self._values["file.delete.delay.ms"])

    @property
    def preallocate(self) -> bool:
        return bool(self._values["preallocate"])

    @property
    def max_decompressed_message_bytes(self) -> int:
        return int(self._values["max.decompressed.message.bytes"])

    @property
    def unclean_leader_election(self) -> bool:
        return bool(self._values["unclean.leader.election.enable"])


_THROTTLED = ("must be the literal '*' or a list of replicas in the following format: "
              "[partitionId]:[brokerId],[partitionId]:[brokerId],...")


def _throttled_replicas_ok(value: str) -> bool:
    """Kafka's ThrottledReplicaListValidator: '*' or partition:broker pairs."""
    items = [i.strip() for i in value.split(",") if i.strip()]
    if items == ["*"]:
        return True
    return all(len(p := i.split(":")) == 2 and p[0].isdigit() and p[1].isdigit() for i in items)


def check_topic_config(defaults: Mapping[str, Any], overrides: Mapping[str, Any]) -> TopicConfig:
    """A topic's configuration as CreateTopics and AlterConfigs accept it, in Kafka's order
    (LogConfig.validate): every name known, every value of its type and range, the values'
    relations (LogConfig.validateValues), and tiered storage, which this broker does not have
    (Kafka's answer when remote.log.storage.system.enable is false). Raises ConfigError with
    Kafka's message."""
    for key in overrides:
        if key not in TOPIC_CONFIGS:
            raise ConfigError(f"Unknown topic config name: {key}")
    config = TopicConfig(defaults, overrides)
    for key in ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas"):
        if not _throttled_replicas_ok(str(config[key])):
            raise ConfigError(f"Invalid value [{config[key]}] for configuration {key}: {key} {_THROTTLED}")
    low, high = int(config["min.compaction.lag.ms"]), config.max_compaction_lag_ms
    if low > high:
        raise ConfigError(f"conflict topic config setting min.compaction.lag.ms ({low}) > "
                          f"max.compaction.lag.ms ({high})")
    if config["remote.storage.enable"]:
        raise ConfigError(TIERED_STORAGE_REFUSED)
    return config

"""All partition logs of the log directories (``log.dirs``, JBOD: KIP-112), plus the topic
metadata that names them.

Files in each of ``log.dirs`` (Kafka's names where Kafka has the same file):

- ``meta.properties``: node id and cluster id (the same in every directory);
- ``recovery-point-offset-checkpoint`` / ``log-start-offset-checkpoint`` /
  ``replication-offset-checkpoint``: Kafka's checkpoint format (version, count,
  ``topic partition offset`` lines), of the partitions in that directory;
- ``.eoslog_cleanshutdown``: written last on a clean shutdown, removed at start-up.
  Without it the segments after each partition's recovery point are re-validated.
- ``.lock``: one broker per directory;
- ``<topic>-<partition>/``: the segments; a new partition goes to the online directory holding
  the fewest partitions (Kafka's LogManager.nextLogDirs), or to the one AlterReplicaLogDirs
  named for it before it existed (Kafka's preferred log directory);
- ``<topic>-<partition>.<uuid>-future/``: a future log, the copy of a partition being moved here
  from another directory of this broker (AlterReplicaLogDirs, KIP-113). The replica layer copies
  the current log into it and then ``replace_current_with_future`` swaps them: the current
  directory is renamed ``.deleted`` first, then the future one takes the partition's name. So at
  start-up a future log whose partition has no current log anywhere was cut between those two
  renames and is completed (Kafka's recoverAbandonedFutureLogs); one beside its current log is
  recovered like any log and its copy resumes; one of a partition no longer held goes.

The first directory is also the metadata directory: ``topics.json`` (topic name → topic id,
partition count, config overrides; KRaft keeps this in ``__cluster_metadata``, one node needs no
quorum) and the broker's other files (dynamic configs, ACLs, credentials) are there.

Files are replaced atomically (write temp, fsync, rename, fsync directory).

A failed fsync or I/O error in the directory takes it offline (``log_dir_failure``): its logs
answer KAFKA_STORAGE_ERROR, the listeners (the replica layer) are told, checkpoints and the
clean-shutdown marker are no longer written, and with no log directory left online
``on_all_log_dirs_failed`` runs (the broker halts, as Kafka's LogManager.handleLogDirFailure
does). The state is per directory: with several, one goes offline alone and the others keep
serving; the metadata directory offline refuses topic changes.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eoslog.config import ConfigError, TopicConfig
from eoslog.errors import Errors, KafkaError
from eoslog.faults import CrashPoints
from eoslog.storage.checkpoint import read_checkpoint, write_checkpoint
from eoslog.storage.fileio import atomic_write, fsync_dir
from eoslog.storage.leader_epoch import write_first_checkpoint
from eoslog.storage.log import (
    SINGLE_NODE_LEADER_EPOCH,
    OffsetOutOfRange,
    PartitionLog,
    future_dir_name,
    parse_future_dir,
    parse_partition_dir,
    partition_dir_name,
)
from eoslog.storage.log_dir_failure import LOG_DIR_FAILURES, LogDirState

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".eoslog_cleanshutdown"
LOCK_FILE = ".lock"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"
HIGH_WATERMARK_FILE = "replication-offset-checkpoint"  # Kafka's name
TOPICS_FILE = "topics.json"
META_FILE = "meta.properties"
# Test fault points (faults.py): the swap of a moved replica killed between its two renames.
MOVE_CRASH_POINTS = ("log_dir_move_between_renames",)

# DeleteRecords' offset meaning "up to the high watermark" (DeleteRecordsRequest.HIGH_WATERMARK).
HIGH_WATERMARK = -1

# Logs made between two turns of the event loop when a topic is created (create_topic_async):
# about 10 ms of work, so other clients' requests wait no longer than that.
_CREATE_SLICE = 64

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME = 249


class LogDirLockedError(OSError):
    """The log directory is held by another broker."""


class InconsistentClusterIdError(OSError):
    pass


class TopicError(KafkaError):
    """A topic operation refused; ``error`` is the Kafka error."""


def validate_topic_name(name: str) -> None:
    if not name:
        raise TopicError(Errors.INVALID_TOPIC_EXCEPTION, "topic name is empty")
    if name in (".", ".."):
        raise TopicError(Errors.INVALID_TOPIC_EXCEPTION, f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME:
        raise TopicError(Errors.INVALID_TOPIC_EXCEPTION, f"topic name longer than {MAX_TOPIC_NAME} characters")
    if not _LEGAL_TOPIC.match(name):
        raise TopicError(
            Errors.INVALID_TOPIC_EXCEPTION,
            f"topic name {name!r} has characters other than ASCII letters, digits, '.', '_', '-'",
        )


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    num_partitions: int
    config: TopicConfig
    internal: bool = False
    # Cluster mode: the partitions this broker holds a replica of (None: all of them, as on
    # a single node).
    held: tuple[int, ...] | None = None

    def local_partitions(self) -> range | tuple[int, ...]:
        return range(self.num_partitions) if self.held is None else self.held


class LogManager:
    def __init__(
        self, log_dir: Path | Sequence[Path], topic_defaults: dict[str, Any], clock_ms: Callable[[], int],
        node_id: int = 0, producer_id_expiration_ms: int = 86_400_000, *, replicated: bool = False,
        on_all_log_dirs_failed: Callable[[], None] | None = None,
    ) -> None:
        """``replicated`` (cluster mode): logs start at their checkpointed high watermarks,
        since other replicas may lack what lies above; a single node's start at their end.
        ``on_all_log_dirs_failed``: what to do when no log directory is left (the broker halts).
        ``log_dir``: one directory, or ``log.dirs``' several (the first holds the metadata)."""
        self.log_dirs = [log_dir] if isinstance(log_dir, Path) else list(dict.fromkeys(log_dir))
        self.log_dir = self.log_dirs[0]
        # Watched from now on: a failed fsync of any file under one takes it offline.
        self.dir_states = {d: LOG_DIR_FAILURES.watch(d, self._log_dir_failed) for d in self.log_dirs}
        self.log_dir_state = self.dir_states[self.log_dir]
        self.log_dir_failure_listeners: list[Callable[[Path], None]] = []
        self._on_all_log_dirs_failed = on_all_log_dirs_failed
        self.replicated = replicated
        self.topic_defaults = topic_defaults
        self._clock_ms = clock_ms
        self.node_id = node_id
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.cluster_id = ""
        self.topics: dict[str, TopicInfo] = {}
        self.logs: dict[tuple[str, int], PartitionLog] = {}
        # Partitions being moved to another log directory: their future logs (KIP-113).
        self.futures: dict[tuple[str, int], PartitionLog] = {}
        # Where AlterReplicaLogDirs asked a partition not held yet to be made (Kafka's preferredLogDirs).
        self.preferred_log_dirs: dict[tuple[str, int], Path] = {}
        self.had_clean_shutdown = False
        self.was_empty = True  # no topic was ever made here before this start
        self._lock_fds: list[int] = []
        self._creating: set[str] = set()  # topics whose logs are being made (create_topic_async)
        self._topics_lock = threading.Lock()
        self._topics_version = self._topics_written = 0
        self._crash_points = CrashPoints.from_env(MOVE_CRASH_POINTS)

    # -- start-up and shut-down ---------------------------------------------------

    def startup(self, cluster_id: str | None = None) -> None:
        for d in self.log_dirs:
            if not d.exists():
                d.mkdir(parents=True)
                fsync_dir(d.parent)  # a power cut must not take the whole log directory
        self._lock_log_dirs()
        self._load_meta(cluster_id)
        markers = [d / CLEAN_SHUTDOWN_FILE for d in self.log_dirs]
        unclean = [m.parent for m in markers if not m.exists()]
        # Every directory's marker: one without its own was not shut down cleanly.
        self.had_clean_shutdown = not unclean
        for m in markers:
            if m.exists():
                m.unlink()
                # Durably: a power cut later must not find a stale marker and trust the indexes.
                fsync_dir(m.parent)
        self.was_empty = not (self.log_dir / TOPICS_FILE).exists()
        if unclean and not self.was_empty:
            log.warning(
                "no clean-shutdown marker in %s: re-validating segments past each partition's "
                "recovery point", ", ".join(map(str, unclean)),
            )
        self._load_topics()
        self._complete_interrupted_moves()
        found = self._partition_dirs()
        checkpoints = {d: (read_checkpoint(d / RECOVERY_POINT_FILE), read_checkpoint(d / LOG_START_FILE),
                           read_checkpoint(d / HIGH_WATERMARK_FILE) if self.replicated else {})
                       for d in self.log_dirs}
        for topic in self.topics.values():
            for p in topic.local_partitions():
                tp = (topic.name, p)
                d = found.get(tp) or self._next_log_dir()
                recovery, starts, high_watermarks = checkpoints[d]
                self.logs[tp] = PartitionLog(
                    d / partition_dir_name(*tp), topic.config, self._clock_ms,
                    log_start_offset=starts.get(tp, 0),
                    recovery_point=recovery.get(tp, 0),
                    clean_shutdown=self.had_clean_shutdown,
                    producer_id_expiration_ms=self.producer_id_expiration_ms,
                    high_watermark=high_watermarks.get(tp, 0) if self.replicated else None,
                    log_dir=self.dir_states[d],
                )
        self._load_future_logs(checkpoints)
        self._remove_stray_dirs()
        self.checkpoint()

    def _holds(self, tp: tuple[str, int]) -> bool:
        info = self.topics.get(tp[0])
        return info is not None and tp[1] in info.local_partitions()

    def _future_dirs(self) -> list[tuple[tuple[str, int], Path]]:
        return [(parsed, child) for d in self.log_dirs for child in sorted(d.iterdir())
                if child.is_dir() and (parsed := parse_future_dir(child.name)) is not None]

    def _complete_interrupted_moves(self) -> None:
        """A future log of a held partition with no current log in any directory: the swap was cut
        after it renamed the current log away (``replace_current_with_future``), when the future
        log had everything; it becomes the current log (Kafka's recoverAbandonedFutureLogs)."""
        current = self._partition_dirs()
        for tp, path in self._future_dirs():
            if tp in current or not self._holds(tp):
                continue
            log.warning("completing the move of %s-%d to %s, which a crash interrupted", *tp, path.parent)
            os.replace(path, path.with_name(partition_dir_name(*tp)))
            fsync_dir(path.parent)
            current[tp] = path.parent

    def _load_future_logs(self, checkpoints: Mapping[Path, tuple[dict[tuple[str, int], int], ...]]) -> None:
        """Future logs beside their current log (a move a restart interrupted): recovered like any
        log, their copy resumes once the replica layer runs (Kafka's ZooKeeper-mode broker resumes
        them at its LeaderAndIsr). Others are strays."""
        for tp, path in self._future_dirs():
            current = self.logs.get(tp)
            if current is None or tp in self.futures or current.log_dir.path == path.parent:
                continue
            recovery, starts, high_watermarks = checkpoints[path.parent]
            self.futures[tp] = PartitionLog(
                path, current.config, self._clock_ms, log_start_offset=starts.get(tp, 0),
                recovery_point=recovery.get(tp, 0), clean_shutdown=self.had_clean_shutdown,
                producer_id_expiration_ms=self.producer_id_expiration_ms,
                high_watermark=high_watermarks.get(tp, 0) if self.replicated else None,
                log_dir=self.dir_states[path.parent],
            )
            log.info("the move of %s-%d from %s to %s resumes", *tp, current.log_dir.path, path.parent)

    def _partition_dirs(self) -> dict[tuple[str, int], Path]:
        """Which log directory holds each partition directory found (the first, if in several)."""
        found: dict[tuple[str, int], Path] = {}
        for d in reversed(self.log_dirs):
            for child in d.iterdir():
                parsed = parse_partition_dir(child.name) if child.is_dir() else None
                if parsed is not None:
                    found[parsed] = d
        return found

    def _next_log_dir(self) -> Path:
        """Kafka's nextLogDirs: the online directory with the fewest partitions, the first
        among equals."""
        return self._place((0,))[0]

    def _place(self, partitions: Iterable[int]) -> list[Path]:
        """A directory for each new partition, one after the other as ``_next_log_dir`` would
        choose it with the ones placed before it counted: the partitions are counted once (not
        once per new partition: 5,000 new partitions took seconds of the event loop)."""
        counts = {d: 0 for d in self.log_dirs if self.dir_states[d].offline is None}
        if not counts:
            self.log_dir_state.check_online("placing a partition")  # raises: every directory is offline
        for lg in self.logs.values():
            if lg.log_dir.path in counts:
                counts[lg.log_dir.path] += 1
        order = {d: i for i, d in enumerate(self.log_dirs)}
        placed: list[Path] = []
        for _ in partitions:
            d = min(counts, key=lambda d: (counts[d], order[d]))
            counts[d] += 1
            placed.append(d)
        return placed

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        lg = self.logs.get((topic, partition))
        return None if lg is None else lg.log_dir.path

    def stored_cluster_id(self, directory: Path | None = None) -> str:
        """The cluster id in ``meta.properties`` (of the metadata directory unless ``directory``;
        "" when there is none yet)."""
        path = (directory or self.log_dir) / META_FILE
        if not path.exists():
            return ""
        props = dict(
            line.split("=", 1) for line in path.read_text().splitlines()
            if "=" in line and not line.startswith("#")
        )
        return props.get("cluster.id", "").strip()

    def _load_meta(self, cluster_id: str | None) -> None:
        """``cluster_id`` is the cluster's (from ZooKeeper) in cluster mode: a log directory of
        another cluster is refused, as Kafka's InconsistentClusterIdException."""
        self.cluster_id = self.stored_cluster_id()
        if cluster_id and self.cluster_id and cluster_id != self.cluster_id:
            raise InconsistentClusterIdError(
                f"{self.log_dir} belongs to cluster {self.cluster_id}, but ZooKeeper's cluster is "
                f"{cluster_id}: wrong zookeeper.connect, or a log directory from another cluster")
        if not self.cluster_id:
            self.cluster_id = cluster_id or uuid.uuid4().hex[:22]
        meta = f"version=1\nnode.id={self.node_id}\ncluster.id={self.cluster_id}\n".encode()
        for d in self.log_dirs:
            stored = self.stored_cluster_id(d)
            if stored and stored != self.cluster_id:
                raise InconsistentClusterIdError(
                    f"{d} belongs to cluster {stored}, but {self.log_dir} to {self.cluster_id}: "
                    f"log directories of two clusters")
            if not stored:
                atomic_write(d / META_FILE, meta)

    def _load_topics(self) -> None:
        path = self.log_dir / TOPICS_FILE
        if not path.exists():
            return
        for entry in json.loads(path.read_text())["topics"]:
            held = entry.get("held")
            self.topics[entry["name"]] = TopicInfo(
                entry["name"], uuid.UUID(entry["id"]), int(entry["partitions"]),
                self.stored_topic_config(entry["name"], entry.get("config", {})),
                bool(entry.get("internal", False)), None if held is None else tuple(held),
            )

    def stored_topic_config(self, topic: str, overrides: dict[str, Any]) -> TopicConfig:
        """A topic's overrides as stored (topics.json, or ZooKeeper in a cluster), which an earlier
        eoslog may have accepted: its
        compression.type=none is Kafka's "uncompressed"; an override the checks now refuse (a
        value out of Kafka's range) is dropped for the default, with a warning naming it, rather
        than stopping the broker."""
        kept = {k: ("uncompressed" if (k, v) == ("compression.type", "none") else v) for k, v in overrides.items()}
        for key in list(kept):
            try:
                TopicConfig(self.topic_defaults, {key: kept[key]})
            except ConfigError as e:
                log.warning("topic %s: ignoring its stored %s=%r (%s); the default applies", topic, key, kept[key], e)
                del kept[key]
        return TopicConfig(self.topic_defaults, kept)

    def _save_topics(self) -> None:
        self._write_topics(*self._topics_document())

    def _topics_document(self) -> tuple[bytes, int]:
        """``topics.json``'s contents as the topics are now, and their version (later calls, later
        versions)."""
        self.log_dir_state.check_online(f"writing {TOPICS_FILE}")
        doc = {
            "version": 1,
            "topics": [
                {"name": t.name, "id": str(t.topic_id), "partitions": t.num_partitions,
                 "config": t.config.overrides, "internal": t.internal,
                 **({} if t.held is None else {"held": list(t.held)})}
                for t in self.topics.values()
            ],
        }
        self._topics_version += 1
        return json.dumps(doc, indent=1).encode(), self._topics_version

    def _write_topics(self, data: bytes, version: int) -> None:
        """Replace ``topics.json`` (from the event loop or a worker thread): a version older than
        the one written is dropped, since a later document holds every change an earlier one held,
        so the file never goes back."""
        with self._topics_lock:
            if version <= self._topics_written:
                return
            atomic_write(self.log_dir / TOPICS_FILE, data)
            self._topics_written = version

    def _remove_stray_dirs(self) -> None:
        """Partition directories of deleted topics (a delete cut short by a crash), and copies of a
        partition in a directory other than the one its log is in."""
        for d in (child for log_dir in self.log_dirs for child in log_dir.iterdir()):
            if not d.is_dir():
                continue
            name = d.name.removesuffix(".deleted")
            future = parse_future_dir(name)
            parsed = parse_partition_dir(name) or future
            if parsed is None:
                continue
            kept = self.futures if future is not None else self.logs
            if d.name.endswith(".deleted") or parsed not in kept or kept[parsed].dir != d:
                log.info("removing stray partition directory %s", d)
                _rmtree(d)

    # -- offline log directories (Kafka's LogManager.handleLogDirFailure) ----------------------

    @property
    def live_log_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if self.dir_states[d].offline is None]

    @property
    def offline_log_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if self.dir_states[d].offline is not None]

    def _log_dir_failed(self, state: LogDirState) -> None:
        """``state``'s directory went offline (called on the event loop once the failing call
        returned): tell the listeners (the replica layer answers what waits on its partitions),
        then halt when no log directory is left."""
        offline = sorted(f"{t}-{p}" for (t, p), lg in self.logs.items() if lg.log_dir is state)
        log.warning("stopping serving logs in %s: partitions %s are offline", state.path, ", ".join(offline))
        for tp, future in list(self.futures.items()):
            if future.log_dir is state or self.logs[tp].log_dir is state:
                # The move stops (Kafka's removeOfflineLogs of futureLogs); the next start resumes
                # or drops it.
                log.warning("the move of %s-%d to %s stops: %s is offline", *tp, future.log_dir.path, state.path)
                del self.futures[tp]
        for listener in self.log_dir_failure_listeners:
            listener(state.path)
        if not self.live_log_dirs:
            log.critical("every log directory (%s) has failed", ", ".join(map(str, self.log_dirs)))
            if self._on_all_log_dirs_failed is not None:
                self._on_all_log_dirs_failed()

    def _logs_by_dir(self) -> dict[Path, dict[tuple[str, int], PartitionLog]]:
        """The online directories and the logs in each (an offline one's files are no longer
        written: Kafka drops an offline directory's checkpoints)."""
        by_dir: dict[Path, dict[tuple[str, int], PartitionLog]] = {d: {} for d in self.live_log_dirs}
        # (A partition's future log is in another directory than its current one.)
        for tp, lg in [*self.logs.items(), *self.futures.items()]:
            if lg.log_dir.path in by_dir:
                by_dir[lg.log_dir.path][tp] = lg
        return by_dir

    def checkpoint(self) -> None:
        for d, logs in self._logs_by_dir().items():
            write_checkpoint(d / RECOVERY_POINT_FILE, {tp: lg.recovery_point for tp, lg in logs.items()})
            write_checkpoint(d / LOG_START_FILE, {tp: lg.log_start_offset for tp, lg in logs.items()})
        self.checkpoint_high_watermarks()

    def checkpoint_high_watermarks(self) -> None:
        """``replication-offset-checkpoint`` (also every replica.high.watermark.checkpoint.interval.ms)."""
        for d, logs in self._logs_by_dir().items():
            write_checkpoint(d / HIGH_WATERMARK_FILE, {tp: lg.high_watermark for tp, lg in logs.items()})

    def shutdown(self) -> None:
        for d in self.offline_log_dirs:
            # No flush, no checkpoint, no clean-shutdown marker: the next start recovers from what
            # is on disk.
            log.warning("%s is offline: not shut down cleanly", d)
        self._sync_partition_dir_entries()
        for lg in [*self.all_logs(), *self._online_futures()]:
            lg.flush()
            lg.snapshot_producer_state()
        self.checkpoint()
        for lg in [*self.logs.values(), *self.futures.values()]:
            lg.close()
        for d in self.live_log_dirs:
            atomic_write(d / CLEAN_SHUTDOWN_FILE, b"")
        self.release_log_dir_lock()

    def _lock_log_dirs(self) -> None:
        """Kafka's ``.lock``: one broker per log directory. A second one would append to the
        same segments and write a clean-shutdown marker under a running broker."""
        for d in self.log_dirs:
            fd = os.open(d / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                self.release_log_dir_lock()
                raise LogDirLockedError(
                    f"{d} is in use by another broker process (its {LOCK_FILE} is locked)"
                ) from None
            self._lock_fds.append(fd)

    def release_log_dir_lock(self) -> None:
        while self._lock_fds:
            os.close(self._lock_fds.pop())  # closing releases the flock

    # -- topics -------------------------------------------------------------------

    def create_topic(
        self, name: str, num_partitions: int, overrides: dict[str, Any] | None = None,
        *, internal: bool = False, validate_only: bool = False,
    ) -> TopicInfo:
        """Create a topic and its logs, on the caller's thread (``create_topic_async`` does the
        same without holding the event loop). TopicError: Kafka's refusals."""
        info = self._plan_topic(name, num_partitions, overrides, internal)
        if validate_only:
            return info
        partitions = range(num_partitions)
        dirs = self._place(partitions)
        self._make_partition_dirs(name, partitions, dirs, self._first_epoch)
        self._add_topic(info, {p: self._new_log(info, p, d) for p, d in zip(partitions, dirs, strict=True)})
        self._save_topics()
        log.info("created topic %s with %d partitions", name, num_partitions)
        return info

    async def create_topic_async(
        self, name: str, num_partitions: int, overrides: dict[str, Any] | None = None,
        *, internal: bool = False, validate_only: bool = False,
    ) -> TopicInfo:
        """``create_topic`` without stalling the event loop's other work while thousands of
        partitions are made: the directories are made in a worker thread, the logs in slices
        between which the loop serves other requests, and ``topics.json`` is written in a worker
        thread. The topic exists for requests (Metadata, Produce) once all of its logs do."""
        info = self._plan_topic(name, num_partitions, overrides, internal)
        if validate_only:
            return info
        self._creating.add(name)
        try:
            partitions = range(num_partitions)
            dirs = self._place(partitions)
            await asyncio.to_thread(self._make_partition_dirs, name, partitions, dirs, self._first_epoch)
            logs: dict[int, PartitionLog] = {}
            for p, d in zip(partitions, dirs, strict=True):
                logs[p] = self._new_log(info, p, d)
                if p % _CREATE_SLICE == _CREATE_SLICE - 1:
                    await asyncio.sleep(0)
            self._add_topic(info, logs)
        finally:
            self._creating.discard(name)
        await asyncio.to_thread(self._write_topics, *self._topics_document())
        log.info("created topic %s with %d partitions", name, num_partitions)
        return info

    def _plan_topic(self, name: str, num_partitions: int, overrides: dict[str, Any] | None,
                    internal: bool) -> TopicInfo:
        validate_topic_name(name)
        if name in self.topics or name in self._creating:
            raise TopicError(Errors.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        if num_partitions < 1:
            raise TopicError(Errors.INVALID_PARTITIONS, f"number of partitions must be >= 1, got {num_partitions}")
        try:
            config = TopicConfig(self.topic_defaults, overrides or {})
        except ValueError as e:
            raise TopicError(Errors.INVALID_CONFIG, str(e)) from None
        self.log_dir_state.check_online(f"creating topic {name}")
        return TopicInfo(name, uuid.uuid4(), num_partitions, config, internal)

    @property
    def _first_epoch(self) -> int | None:
        """The leader epoch a new log starts in: a single node leads it in epoch 0 from the start
        (as Kafka's makeLeader, it is recorded when the partition is made); in a cluster the
        controller's epoch, recorded when the partition becomes leader or follower."""
        return None if self.replicated else SINGLE_NODE_LEADER_EPOCH

    def _make_partition_dirs(self, name: str, partitions: Iterable[int], dirs: Sequence[Path],
                             first_epoch: int | None = None) -> None:
        """The new partitions' directories, unsynced, with their first leader-epoch checkpoint
        when ``first_epoch`` is known: a new log's directory entry is made durable by its first
        flush or group-commit round, before any record in it counts (a crash before that loses
        nothing: the topic's partitions start empty again). A leftover directory of the same name (a
        creation that failed part way) is emptied."""
        for p, log_dir in zip(partitions, dirs, strict=True):
            d = log_dir / partition_dir_name(name, p)
            try:
                d.mkdir()
            except FileExistsError:
                _rmtree(d)
                d.mkdir()
            if first_epoch is not None:
                write_first_checkpoint(d, first_epoch, 0)

    def _new_log(self, info: TopicInfo, partition: int, log_dir: Path) -> PartitionLog:
        """A new, empty log in its directory just made by ``_make_partition_dirs``."""
        return PartitionLog(
            log_dir / partition_dir_name(info.name, partition), info.config, self._clock_ms,
            producer_id_expiration_ms=self.producer_id_expiration_ms, log_dir=self.dir_states[log_dir], new=True,
            first_epoch=self._first_epoch,
        )

    def _add_topic(self, info: TopicInfo, logs: dict[int, PartitionLog]) -> None:
        self.topics[info.name] = info
        for p, lg in logs.items():
            self.logs[(info.name, p)] = lg

    def delete_topic(self, name: str) -> None:
        info = self.topics.pop(name, None)
        if info is None:
            raise TopicError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        self._save_topics()  # the delete is decided once the metadata no longer names it
        for p in info.local_partitions():
            self._delete_log(name, p)
        self.checkpoint()
        log.info("deleted topic %s", name)

    def _delete_log(self, name: str, partition: int) -> None:
        self.remove_future_log(name, partition)
        self.preferred_log_dirs.pop((name, partition), None)
        lg = self.logs.pop((name, partition), None)
        if lg is None:
            return
        lg.retired = "its replica was deleted from this broker"
        lg.close()
        target = lg.dir.with_name(lg.dir.name + ".deleted")
        os.replace(lg.dir, target)
        _rmtree(target)

    # -- cluster mode: replicas of some partitions of a topic ----------------------------

    def ensure_replica(self, name: str, topic_id: uuid.UUID, num_partitions: int, partition: int,
                       overrides: dict[str, Any], internal: bool) -> PartitionLog:
        """This broker's replica of one partition, created if needed (Kafka's getOrCreateLog).
        A local topic of that name with another id was deleted and recreated meanwhile: its
        replicas go first."""
        info = self.topics.get(name)
        if info is not None and info.topic_id != topic_id:
            log.info("topic %s was recreated (id %s → %s): deleting the old replicas", name, info.topic_id, topic_id)
            self.delete_topic(name)
            info = None
        if info is None:
            info = self.topics[name] = TopicInfo(name, topic_id, num_partitions,
                                                 self.stored_topic_config(name, overrides), internal, ())
        info.num_partitions = max(info.num_partitions, num_partitions)
        plog = self.logs.get((name, partition))
        if plog is None:
            self.log_dir_state.check_online(f"creating a log of {name}")  # topics.json is written
            preferred = self.preferred_log_dirs.pop((name, partition), None)
            [log_dir] = ([preferred] if preferred is not None and self.dir_states[preferred].offline is None
                         else self._place((partition,)))
            self._make_partition_dirs(name, (partition,), [log_dir], self._first_epoch)
            plog = self.logs[(name, partition)] = self._new_log(info, partition, log_dir)
            info.held = tuple(sorted({*(info.held or ()), partition}))
            self._save_topics()
        return plog

    def remove_replica(self, name: str, partition: int) -> None:
        """Delete this broker's replica of one partition (its topic was deleted, or the
        replica moved away); the topic goes when it holds no replica any more."""
        info = self.topics.get(name)
        if info is None:
            return
        info.held = tuple(p for p in (info.held or ()) if p != partition)
        if not info.held:
            del self.topics[name]
        self._save_topics()
        self._delete_log(name, partition)
        self.checkpoint()

    def create_partitions(self, name: str, total: int, validate_only: bool = False) -> None:
        info = self.topics.get(name)
        if info is None:
            raise TopicError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        if total <= info.num_partitions:
            raise TopicError(
                Errors.INVALID_PARTITIONS,
                f"topic {name!r} has {info.num_partitions} partitions; the new count "
                f"{total} must be larger",
            )
        if validate_only:
            return
        partitions = range(info.num_partitions, total)
        dirs = self._place(partitions)
        self._make_partition_dirs(name, partitions, dirs, self._first_epoch)
        for p, d in zip(partitions, dirs, strict=True):
            self.logs[(name, p)] = self._new_log(info, p, d)
        info.num_partitions = total
        self._save_topics()

    def alter_topic_config(self, name: str, overrides: dict[str, Any], *, stored: bool = False) -> None:
        """Replace a topic's config overrides; in effect at once (every partition log reads
        its TopicConfig on each append, roll, retention and cleaning pass) and kept in
        topics.json. TopicError: UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG. ``stored``: the
        overrides as ZooKeeper holds them, taken as ``stored_topic_config`` takes them."""
        info = self.topics.get(name)
        if info is None:
            raise TopicError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        try:
            config = (self.stored_topic_config(name, overrides) if stored
                      else TopicConfig(self.topic_defaults, overrides))
        except ValueError as e:
            raise TopicError(Errors.INVALID_CONFIG, str(e)) from None
        old = info.config
        self._set_config(info, config)
        try:
            self._save_topics()
        except OSError:
            self._set_config(info, old)
            raise
        log.info("topic %s config overrides now %s", name, config.overrides)

    def update_topic_defaults(self, defaults: dict[str, Any]) -> None:
        """New broker-level topic defaults (a dynamic broker config changed): every topic's
        effective config is rebuilt over them, its overrides kept."""
        self.topic_defaults = dict(defaults)
        for info in self.topics.values():
            self._set_config(info, TopicConfig(self.topic_defaults, info.config.overrides))

    def _set_config(self, info: TopicInfo, config: TopicConfig) -> None:
        info.config = config
        for p in info.local_partitions():
            plog = self.logs.get((info.name, p))
            if plog is not None:
                plog.config = config

    def delete_records(self, topic: str, partition: int, offset: int, *, allow_internal: bool = False) -> int:
        """DeleteRecords on one partition (Kafka's Partition.deleteRecordsOnLeader): move
        its log start offset to ``offset`` (-1: the high watermark) and return the new low
        watermark. The checkpoint is written before any segment goes, so a crash cannot
        make deleted records readable again. Refusals raise TopicError with Kafka's error
        name and message. ``allow_internal``: the share coordinator pruning its own topic."""
        info = self.topics.get(topic)
        plog = self.logs.get((topic, partition))
        if info is None or plog is None:
            raise TopicError(Errors.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        if info.internal and not allow_internal:
            raise TopicError(Errors.INVALID_TOPIC_EXCEPTION, f"Cannot delete records of internal topic {topic}")
        tp = f"{topic}-{partition}"
        if not info.config.delete:
            raise TopicError(Errors.POLICY_VIOLATION,
                             f"Records of partition {tp} can not be deleted due to the configured policy")
        target = plog.high_watermark if offset == HIGH_WATERMARK else offset
        if target < 0:
            raise TopicError(Errors.OFFSET_OUT_OF_RANGE, f"The offset {target} for partition {tp} is not valid")
        try:
            advanced = plog.advance_log_start_offset(target)
        except OffsetOutOfRange as e:
            raise TopicError(Errors.OFFSET_OUT_OF_RANGE, str(e)) from None
        if advanced:
            self.checkpoint()
            plog.delete_segments_below_log_start()
        return plog.log_start_offset

    # -- moving a replica between log directories (AlterReplicaLogDirs, KIP-113) -------------

    def _online_futures(self) -> list[PartitionLog]:
        return [lg for lg in self.futures.values() if lg.log_dir.offline is None]

    def create_future_log(self, topic: str, partition: int, target: Path) -> PartitionLog:
        """An empty future log of a held partition in ``target`` (another online directory), which
        the replica layer fills from the current log (Kafka's getOrCreateLog(isFuture=true))."""
        tp = (topic, partition)
        current = self.logs[tp]
        if tp in self.futures or current.log_dir.path == target:
            raise ValueError(f"{topic}-{partition} already has a future log or is in {target}")
        self.dir_states[target].check_online(f"moving {topic}-{partition} to")
        d = target / future_dir_name(topic, partition)
        d.mkdir()
        future = self.futures[tp] = PartitionLog(
            d, current.config, self._clock_ms, producer_id_expiration_ms=self.producer_id_expiration_ms,
            log_dir=self.dir_states[target], new=True)
        log.info("moving %s-%d from %s to %s: future log %s", topic, partition, current.log_dir.path, target, d.name)
        return future

    def remove_future_log(self, topic: str, partition: int) -> None:
        """Drop a partition's future log (the move cancelled or sent elsewhere, the replica deleted).
        Renamed ``.deleted`` before its files go, so that a crash never leaves a partial copy that
        a restart would take for a future log to resume."""
        future = self.futures.pop((topic, partition), None)
        if future is None:
            return
        future.close()
        if future.log_dir.offline is not None:
            return  # its files stay until a start finds it (a stray then)
        target = future.dir.with_name(future.dir.name + ".deleted")
        os.replace(future.dir, target)
        _rmtree(target)
        log.info("removed the future log of %s-%d in %s", topic, partition, future.log_dir.path)

    def replace_current_with_future(self, topic: str, partition: int) -> PartitionLog:
        """Swap a partition's current log for its future log, which has every offset of it (the
        caller checked the log end offsets, with no append in between): the future log is flushed
        and closed, the current directory renamed ``.deleted`` (then deleted), the future directory
        renamed to the partition's name, and the log reopened there. A crash between the two renames
        leaves the future log alone, which the next start completes (``_complete_interrupted_moves``);
        before the first, the next start resumes the copy. Kafka's replaceCurrentWithFutureLog
        renames in the other order and refuses to start with both directories named alike."""
        tp = (topic, partition)
        source, future = self.logs[tp], self.futures[tp]
        if future.log_end_offset != source.log_end_offset:
            raise ValueError(f"the future log of {topic}-{partition} ends at {future.log_end_offset}, "
                             f"the current log at {source.log_end_offset}")
        for entry in source.epochs.entries:  # (the current log's epoch that has no batch yet too)
            future.epochs.assign(entry.epoch, entry.start_offset)
        future.flush()
        future.snapshot_producer_state()
        future.close()
        source.close()  # (its index files are written out by path, before the directory is renamed)
        deleted = source.dir.with_name(source.dir.name + ".deleted")
        try:
            os.replace(source.dir, deleted)
            fsync_dir(source.dir.parent)
        except OSError as e:
            raise source.io_failed("moving", e) from e
        source.retired = "it moved to another log directory"
        del self.futures[tp]
        self._crash_points.reached("log_dir_move_between_renames")
        target = future.dir.with_name(partition_dir_name(topic, partition))
        try:
            os.replace(future.dir, target)
            fsync_dir(target.parent)
        except OSError as e:
            raise future.io_failed("moving", e) from e
        moved = self.logs[tp] = PartitionLog(
            target, source.config, self._clock_ms,
            log_start_offset=max(source.log_start_offset, future.log_start_offset),
            recovery_point=future.log_end_offset, producer_id_expiration_ms=self.producer_id_expiration_ms,
            high_watermark=source.high_watermark, log_dir=future.log_dir,
        )
        moved.leader_epoch = source.leader_epoch
        # The copy's own producer state, exactly as its appends and high watermarks built it (the
        # ended transactions whose markers the high watermark has not passed too, which no
        # snapshot holds).
        future.producer_state.dir = target
        moved.producer_state = future.producer_state
        self.checkpoint()
        _rmtree(deleted)
        log.info("%s-%d moved from %s to %s at offset %d", topic, partition, source.log_dir.path,
                 moved.log_dir.path, moved.log_end_offset)
        return moved

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get((topic, partition))

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        for t in self.topics.values():
            if t.topic_id == topic_id:
                return t
        return None

    def all_logs(self) -> Iterator[PartitionLog]:
        """The online logs (background jobs: retention, flushes, expiration, the cleaner)."""
        return iter([lg for lg in self.logs.values() if lg.log_dir.offline is None])

    # -- background work ------------------------------------------------------------

    def run_retention(self) -> int:
        deleted = sum(lg.delete_old_segments() for lg in self.all_logs())
        if deleted:
            self.checkpoint()
        return deleted

    def delete_due_files(self) -> None:
        """Remove retired segments whose file.delete.delay.ms has passed."""
        now = self._clock_ms()
        for lg in self.all_logs():
            lg.delete_due_files(now)

    def run_producer_expiration(self) -> None:
        now = self._clock_ms()
        for lg in self.all_logs():
            lg.producer_state.remove_expired(now)

    def flush_all(self) -> None:
        """fsync every log (after an unclean start-up, before a durable broker shows what it
        recovered: a consumer must not read what a second power cut could take away)."""
        self._sync_partition_dir_entries()
        for lg in self.all_logs():
            lg.flush()

    def _sync_partition_dir_entries(self) -> None:
        """One fsync of each log directory makes every partition directory's name durable (before
        flushing them all: one fsync per directory, not one per log)."""
        for d in self.live_log_dirs:
            fsync_dir(d)
        for lg in [*self.all_logs(), *self._online_futures()]:
            lg.parent_entry_synced()

    def run_time_flush(self) -> None:
        now = self._clock_ms()
        for lg in self.all_logs():
            lg.maybe_flush_on_time(now)


def _rmtree(path: Path) -> None:
    for child in path.iterdir():
        if child.is_dir():
            _rmtree(child)
        else:
            child.unlink(missing_ok=True)
    path.rmdir()

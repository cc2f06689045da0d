"""The one place where the Spark connector reads from brokers: ``LogReader``.

What it owns: the few client operations the source needs, on eoslog's own clients —
which partitions topics have (the admin client's Metadata), the earliest and latest
offsets of partitions (the consumer's ``beginning_offsets``/``end_offsets``: the latest
is the last stable offset under read_committed), and reading one partition's records in
``[start, end)`` with an assigned consumer, in chunks, stopping as soon as the consumer's
position reaches ``end`` (the end may be a transaction marker's offset, which yields no
record; the position moves past markers and aborted batches).

What it must never do: know about Spark, or look inside record batches. Which records a
read_committed reader may see is decided by the consumer alone (its aborted-transaction
filter), never here.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from types import TracebackType
from typing import Self

from eoslog.client.admin import Admin
from eoslog.client.consumer import Consumer, OffsetOutOfRangeNoResetError
from eoslog.client.errors import KafkaError
from eoslog.client.security import security_settings
from eoslog.client.types import ConsumerRecord, TopicPartition

POLL_S = 0.5
# Records per poll: a task hands Spark Arrow batches of a few thousand rows.
MAX_POLL_RECORDS = 4096
# Consumer settings the reader decides itself (Spark's Kafka source manages these too).
_MANAGED = ("bootstrap.servers", "isolation.level", "group.id", "enable.auto.commit", "auto.offset.reset",
            "max.poll.records")


class OffsetOutOfRange(KafkaError):
    """The range starts before the log start offset (retention deleted it) or past the end."""

    def __init__(self, tp: TopicPartition, offset: int) -> None:
        super().__init__(f"offset {offset} of {tp.topic}-{tp.partition} is out of range")
        self.tp = tp
        self.offset = offset


class ReadTimeout(KafkaError):
    pass


class LogReader:
    """Read access to a cluster's partitions for one Spark driver call or one Spark task.

    ``settings`` are further consumer settings under Kafka's names (the source's
    ``kafka.*`` options): ``client.id``, ``request.timeout.ms``, ``fetch.max.bytes``…"""

    def __init__(self, bootstrap_servers: str, *, read_committed: bool, settings: Mapping[str, str] | None = None,
                 max_poll_records: int = MAX_POLL_RECORDS) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.settings = {k: v for k, v in (settings or {}).items() if k not in _MANAGED}
        self._consumer = Consumer({
            **self.settings,
            "bootstrap.servers": bootstrap_servers,
            "isolation.level": "read_committed" if read_committed else "read_uncommitted",
            "enable.auto.commit": False,
            "auto.offset.reset": "none",  # a range out of the log is data loss, for the source to report
            "max.poll.records": max_poll_records,
        })
        self._admin: Admin | None = None

    def close(self) -> None:
        try:
            self._consumer.close()
        finally:
            if self._admin is not None:
                self._admin.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- metadata ----------------------------------------------------------------------

    def topics(self, names: Iterable[str] | None = None) -> dict[str, int]:
        """Partition counts of ``names`` (None: every non-internal topic); a topic that does
        not exist is left out (never auto-created)."""
        if self._admin is None:
            client_id = self.settings.get("client.id")
            self._admin = Admin({"bootstrap.servers": self.bootstrap_servers, **security_settings(self.settings),
                                 **({"client.id": client_id} if client_id else {})})
        existing = set(self._admin.list_topics())
        wanted = sorted(existing if names is None else existing.intersection(names))
        return {name: len(d.partitions) for name, d in self._admin.describe_topics(wanted).items()}

    # -- offsets -----------------------------------------------------------------------

    def beginning_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        wanted = list(tps)
        return self._consumer.beginning_offsets(wanted) if wanted else {}

    def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """High watermarks, or last stable offsets under read_committed."""
        wanted = list(tps)
        return self._consumer.end_offsets(wanted) if wanted else {}

    # -- records -----------------------------------------------------------------------

    def read(self, tp: TopicPartition, start: int, end: int, *, poll_timeout_ms: int) -> Iterator[list[ConsumerRecord]]:
        """The records of ``tp`` in ``[start, end)`` in poll-sized chunks. Raises
        OffsetOutOfRange when ``start`` is no longer (or not yet) in the log, ReadTimeout
        when the position does not move for ``poll_timeout_ms``."""
        consumer = self._consumer
        consumer.assign([tp])
        consumer.seek(tp, start)
        position = start
        deadline = time.monotonic() + poll_timeout_ms / 1000
        while position < end:
            try:
                records = consumer.poll(POLL_S)
            except OffsetOutOfRangeNoResetError:
                raise OffsetOutOfRange(tp, position) from None
            chunk = [r for r in records if r.offset < end]
            if chunk:
                yield chunk
            moved = consumer.position(tp)
            if moved > position:
                position = moved
                deadline = time.monotonic() + poll_timeout_ms / 1000
            elif time.monotonic() > deadline:
                raise ReadTimeout(f"cannot fetch records of {tp.topic}-{tp.partition} at offset {position} "
                                  f"(reading up to {end}) in {poll_timeout_ms} ms")

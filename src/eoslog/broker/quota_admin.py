"""Client quotas as AlterClientQuotas (49) and DescribeClientQuotas (48) change and read them
(KIP-546), and the one ``ClientQuotas`` that enforces them.

Each entity's quotas are kept in the broker's ``ConfigStore`` under its Kafka path (one node: the
data directory's dynamic configs; a cluster: that store is the cache of ZooKeeper's
``/config/users`` and ``/config/clients``, which ``cluster/quota_store.py`` fills, and a change is
written there first). Every change of the store is applied to the quota managers at once.
Entity and value checks are Kafka's (``quotas/entities.py``); an entry is refused whole.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from eoslog.errors import Errors, KafkaError
from eoslog.quotas.client import ClientQuotas
from eoslog.quotas.entities import Component, QuotaEntity, altered, decode_values, describe, encode_values
from eoslog.storage.config_store import QUOTA, ConfigStore

log = logging.getLogger(__name__)


class QuotaWriter(Protocol):
    def alter_client_quotas(self, entity: QuotaEntity, values: dict[str, float]) -> Awaitable[None] | None:
        """Share an entity's quotas with the other brokers: the write to await (None on one node)."""


@dataclass(frozen=True, slots=True)
class Alteration:
    parts: tuple[tuple[str, str | None], ...]  # (entity type, name or None for the default)
    ops: tuple[tuple[str, float | None], ...]  # (key, value or None to remove)


class QuotaAdmin:
    def __init__(self, store: ConfigStore, writer: QuotaWriter, clock_ms: Callable[[], int],
                 windows: tuple[int, int] = (11, 1000), mutation_windows: tuple[int, int] = (11, 1000)) -> None:
        """``windows``: quota.window.num and its size in ms; ``mutation_windows``: controller.quota.*."""
        self.store = store
        self.writer = writer
        self.quotas = ClientQuotas(clock_ms, *windows, *mutation_windows)
        store.listeners.append(self._stored)
        self._apply()

    def _stored(self, kind: str, _name: str) -> None:
        if kind == QUOTA:
            self._apply()

    def _apply(self) -> None:
        self.quotas.update(self.all())

    def all(self) -> dict[QuotaEntity, dict[str, float]]:
        out = {}
        for path in self.store.names(QUOTA):
            try:
                out[QuotaEntity.from_path(path)] = decode_values(self.store.get(QUOTA, path))
            except ValueError as e:
                log.error("ignoring stored quotas: %s", e)
        return out

    def describe(self, components: Iterable[Component], strict: bool) -> dict[QuotaEntity, dict[str, float]]:
        """Raises KafkaError (INVALID_REQUEST, UNSUPPORTED_VERSION) for a bad filter."""
        return describe(self.all(), components, strict)

    async def alter(self, entries: Sequence[Alteration], validate_only: bool) -> list[tuple[Errors, str | None]]:
        """Each entry's outcome; one refused leaves the others as they are."""
        out: list[tuple[Errors, str | None]] = []
        for entry in entries:
            try:
                entity = QuotaEntity.of(entry.parts)
                values = altered(decode_values(self.store.get(QUOTA, entity.path)), entry.ops)
                if not validate_only:
                    pending = self.writer.alter_client_quotas(entity, values)
                    if pending is not None:
                        await pending
                    self.store.put(QUOTA, entity.path, encode_values(values))
                    log.info("client quotas of %s now %s", entity.path, values)
            except KafkaError as e:
                out.append((e.error, str(e)))
            except Exception as e:  # ZooKeeper unreachable
                out.append((Errors.UNKNOWN_SERVER_ERROR, f"the quotas could not be stored: {e!r}"))
            else:
                out.append((Errors.NONE, None))
        return out

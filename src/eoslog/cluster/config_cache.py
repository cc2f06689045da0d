"""A broker's local copy of one kind of entity configs kept in ZooKeeper's ``/config`` (group
configs, client quotas): loaded at start and again on every ``/config/changes`` notification,
into the broker's ``ConfigStore``, which is what the broker reads. Entities gone from ZooKeeper
are emptied. ZooKeeper is the consensus; nothing here decides an order."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

from eoslog.cluster.security_store import CONFIG_CHANGES
from eoslog.cluster.zk import ZkSession
from eoslog.storage.config_store import ConfigStore


class ZkConfigCache:
    def __init__(self, zk: ZkSession, store: ConfigStore, kind: str, paths: Iterable[str],
                 read: Callable[[ZkSession], Awaitable[dict[str, dict[str, str]]]]) -> None:
        """``read``: every entity of ``kind`` in ZooKeeper (its name in the store → its configs);
        ``paths``: the znodes it reads under, created if missing."""
        self.zk, self.store, self.kind, self.read = zk, store, kind, read
        self.paths = (*paths, CONFIG_CHANGES)
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        for path in self.paths:
            await self.zk.ensure_path(path)
        await self.zk.watch_children(CONFIG_CHANGES, self._changed)
        await self.load()

    def _changed(self, _path: str, _children: list[str]) -> None:
        task = asyncio.get_running_loop().create_task(self.load())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def load(self) -> None:
        async with self._lock:
            found = await self.read(self.zk)
            for name in self.store.names(self.kind):
                if name not in found and self.store.get(self.kind, name):
                    self.store.put(self.kind, name, {})
            for name, config in found.items():
                if self.store.get(self.kind, name) != config:
                    self.store.put(self.kind, name, config)

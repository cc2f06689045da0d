"""Group configs (``share.auto.offset.reset``, ``share.record.lock.duration.ms``, ...) cluster-wide:
every broker applies what one broker was told (IncrementalAlterConfigs of a GROUP resource),
as Kafka's cluster metadata makes them. Kafka's ZooKeeper era had no group configs; eoslog keeps
them where that era kept an entity's dynamic configs:

- ``/config/groups/<group>``: ``{"version":1,"config":{"share.auto.offset.reset":"earliest"}}``,
  announced by a sequential ``/config/changes/config_change_`` znode
  ``{"version":2,"entity_path":"groups/<group>"}`` (the notifications SCRAM credentials use;
  ``security_store`` purges the old ones).

Every broker watches the change path and reloads every group's configs into its local
``ConfigStore`` (its cache of them); the broker that wrote applies the change at once, before
answering. ZooKeeper is the consensus; nothing here decides an order.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any
from urllib.parse import quote, unquote

from eoslog.cluster.security_store import CONFIG_CHANGES
from eoslog.cluster.zk import ZkSession
from eoslog.storage.config_store import GROUP, ConfigStore

log = logging.getLogger(__name__)

GROUPS = "/config/groups"


async def write_group_config(zk: ZkSession, group: str, configs: dict[str, str]) -> None:
    """``/config/groups/<group>`` holding exactly ``configs`` (deleted when empty), then the change
    notification every broker's watch reloads on."""
    path = f"{GROUPS}/{quote(group, safe='')}"
    node = await zk.get(path)
    if not configs:
        if node is not None:
            await zk.delete(path)
    else:
        data = json.dumps({"version": 1, "config": configs}).encode()
        if node is None:
            await zk.create(path, data, makepath=True)
        else:
            await zk.set(path, data, node.version)
    await zk.create(f"{CONFIG_CHANGES}/config_change_", json.dumps(
        {"version": 2, "entity_path": f"groups/{group}"}).encode(), sequence=True, makepath=True)


class ZkGroupConfigs:
    def __init__(self, zk: ZkSession, store: ConfigStore) -> None:
        self.zk = zk
        self.store = store
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        await self.zk.ensure_path(GROUPS)
        await self.zk.ensure_path(CONFIG_CHANGES)
        await self.zk.watch_children(CONFIG_CHANGES, self._changed)
        await self.load()

    def _changed(self, _path: str, _children: list[str]) -> None:
        task = asyncio.get_running_loop().create_task(self.load())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def load(self) -> None:
        """Every group's configs from ZooKeeper into the local store (groups gone: emptied)."""
        async with self._lock:
            found: dict[str, dict[str, str]] = {}
            for child in await self.zk.children(GROUPS):
                node = await self.zk.get(f"{GROUPS}/{child}")
                if node is None:
                    continue
                try:
                    config: Any = json.loads(node.data)["config"]
                except (ValueError, KeyError, TypeError) as e:
                    log.error("ignoring unreadable %s/%s: %s", GROUPS, child, e)
                    continue
                found[unquote(child)] = {str(k): str(v) for k, v in config.items()}
            for group in self.store.names(GROUP):
                if group not in found and self.store.get(GROUP, group):
                    self.store.put(GROUP, group, {})
            for group, config in found.items():
                if self.store.get(GROUP, group) != config:
                    self.store.put(GROUP, group, config)

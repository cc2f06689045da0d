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

import json
import logging
from typing import Any
from urllib.parse import quote, unquote

from eoslog.cluster.config_cache import ZkConfigCache
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


async def read_group_configs(zk: ZkSession) -> dict[str, dict[str, str]]:
    """Every group with configs in ZooKeeper → its configs."""
    found: dict[str, dict[str, str]] = {}
    for child in await zk.children(GROUPS):
        node = await zk.get(f"{GROUPS}/{child}")
        if node is None:
            continue
        try:
            config: Any = json.loads(node.data)["config"]
        except (ValueError, KeyError, TypeError) as e:
            log.error("ignoring unreadable %s/%s: %s", GROUPS, child, e)
            continue
        found[unquote(child)] = {str(k): str(v) for k, v in config.items()}
    return found


def zk_group_configs(zk: ZkSession, store: ConfigStore) -> ZkConfigCache:
    """``store``'s group configs kept as ZooKeeper has them."""
    return ZkConfigCache(zk, store, GROUP, [GROUPS], read_group_configs)

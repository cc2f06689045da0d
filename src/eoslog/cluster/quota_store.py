"""Client quotas in ZooKeeper, as Kafka's ZooKeeper era kept them (AdminZkClient.changeConfigs),
so that every broker enforces what one broker was told (AlterClientQuotas):

- ``/config/users/<user>`` (with the user's SCRAM credentials, which stay as they are),
  ``/config/users/<user>/clients/<client-id>``, ``/config/clients/<client-id>``, ``<default>``
  for a default, names sanitized: ``{"version":1,"config":{"producer_byte_rate":"1048576"}}``,
  announced by a sequential ``/config/changes/config_change_`` znode
  ``{"version":2,"entity_path":"users/<user>/clients/<client-id>"}``.

Every broker watches the change path and reloads every entity's quotas into its local
``ConfigStore`` (its cache of them, which the quota managers read); the broker that wrote applies
the change at once, before answering. ZooKeeper is the consensus; nothing here decides an order.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError

from eoslog.cluster.config_cache import ZkConfigCache
from eoslog.cluster.security_store import CONFIG_CHANGES
from eoslog.cluster.zk import ZkSession
from eoslog.quotas.entities import QUOTA_KEYS, QuotaEntity, decode_values, encode_values
from eoslog.storage.config_store import QUOTA, ConfigStore

log = logging.getLogger(__name__)

CONFIG = "/config"
WRITE_ATTEMPTS = 10


def _config(data: bytes) -> dict[str, str]:
    try:
        config: Any = json.loads(data or b"{}").get("config") or {}
        return {str(k): str(v) for k, v in config.items()}
    except (ValueError, AttributeError) as e:
        raise ValueError(f"not an entity config: {e}") from None


async def write_quotas(zk: ZkSession, entity: QuotaEntity, values: dict[str, float]) -> None:
    """The entity's znode with exactly ``values`` as its quotas (its other configs kept),
    conditional on the version read, then the change notification."""
    path = f"{CONFIG}/{entity.path}"
    for _ in range(WRITE_ATTEMPTS):
        node = await zk.get(path)
        config = {k: v for k, v in (_config(node.data) if node is not None else {}).items() if k not in QUOTA_KEYS}
        data = json.dumps({"version": 1, "config": {**config, **encode_values(values)}}).encode()
        try:
            if node is None:
                await zk.create(path, data, makepath=True)
            else:
                await zk.set(path, data, node.version)
            break
        except (BadVersionError, NodeExistsError):
            continue  # another writer (a SCRAM credential, another broker) got there first: read again
    else:
        raise RuntimeError(f"{path}: gave up after {WRITE_ATTEMPTS} conflicting writes")
    await zk.create(f"{CONFIG_CHANGES}/config_change_", json.dumps(
        {"version": 2, "entity_path": entity.path}).encode(), sequence=True, makepath=True)


async def read_quotas(zk: ZkSession) -> dict[str, dict[str, str]]:
    """Every entity path with quotas → its quotas as stored."""
    found: dict[str, dict[str, str]] = {}

    async def take(path: str) -> None:
        node = await zk.get(f"{CONFIG}/{path}")
        if node is None:
            return
        try:
            values = decode_values(_config(node.data))
        except ValueError as e:
            log.error("ignoring unreadable %s/%s: %s", CONFIG, path, e)
            return
        if values:
            found[QuotaEntity.from_path(path).path] = encode_values(values)

    for user in await zk.children(f"{CONFIG}/users"):
        await take(f"users/{user}")
        for client in await zk.children(f"{CONFIG}/users/{user}/clients"):
            await take(f"users/{user}/clients/{client}")
    for client in await zk.children(f"{CONFIG}/clients"):
        await take(f"clients/{client}")
    return found


def zk_quotas(zk: ZkSession, store: ConfigStore) -> ZkConfigCache:
    """``store``'s client quotas kept as ZooKeeper has them."""
    return ZkConfigCache(zk, store, QUOTA, [f"{CONFIG}/users", f"{CONFIG}/clients"], read_quotas)

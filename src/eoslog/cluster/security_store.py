"""SCRAM credentials and ACLs in ZooKeeper, as Kafka's ZooKeeper era kept them, so every
broker of a cluster sees what one broker was told (docs/security.md, "Cluster mode").

- ``/config/users/<user>``: ``{"version":1,"config":{"SCRAM-SHA-512":"salt=..,stored_key=..,
  server_key=..,iterations=N"}}`` (salted keys only), announced by a sequential
  ``/config/changes/config_change_`` znode ``{"version":2,"entity_path":"users/<user>"}``.
- ``/kafka-acl/<ResourceType>/<name>`` (LITERAL) and ``/kafka-acl-extended/prefixed/<ResourceType>/
  <name>`` (PREFIXED): ``{"version":1,"acls":[{"principal","permissionType","operation","host"}]}``,
  announced by a sequential ``/kafka-acl-changes/acl_changes_`` znode (``Type:PATTERN:name``).

Every broker watches the two change paths and reloads the whole set on a change (it is small),
then deletes the change znodes older than ``zookeeper.change.notification.expiration.ms`` (as
Kafka's ZkNodeChangeNotificationListener purged them after 15 min; every broker may, a znode
already gone is fine) so the change paths do not grow forever;
the broker that wrote applies the new set at once, before answering. ``set_user_credential``
writes one credential without a broker (``eoslog users set-password --zookeeper``, as
``kafka-configs.sh --zookeeper`` did), so the first super user exists before the first start.
The local files (acls.json, scram-credentials.json) stay as each broker's cache of what it
last loaded.
The znodes' contents are encoded by ``security/zk_codec.py``.
ZooKeeper is the consensus; nothing here decides an order beyond its znode versions.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any
from urllib.parse import quote, unquote

from eoslog.cluster.zk import ZkSession
from eoslog.protocol.scram import Mechanism
from eoslog.quotas.entities import sanitize
from eoslog.security.acls import AclBinding, PatternType
from eoslog.security.authorizer import Security
from eoslog.security.scram import ScramCredential
from eoslog.security.zk_codec import (
    acl_change,
    resource_acls,
    resource_acls_data,
    resource_type_name,
    user_config,
    user_credentials,
)

log = logging.getLogger(__name__)

USERS = "/config/users"
CONFIG_CHANGES = "/config/changes"
ACLS = {PatternType.LITERAL: "/kafka-acl", PatternType.PREFIXED: "/kafka-acl-extended/prefixed"}
ACL_CHANGES = "/kafka-acl-changes"
ZK_TIMEOUT_MS = 18000  # zookeeper.session.timeout.ms's default: the CLI's connection and session timeout


async def write_user(zk: ZkSession, user: str, credentials: dict[Mechanism, ScramCredential]) -> None:
    """``/config/users/<user>`` holding exactly ``credentials``, then the change notification
    every broker's watch reloads on."""
    path = f"{USERS}/{sanitize(user)}"
    node = await zk.get(path)
    await _put(zk, path, user_config(credentials, node.data if node is not None else b""))
    await zk.create(f"{CONFIG_CHANGES}/config_change_", json.dumps(
        {"version": 2, "entity_path": f"users/{user}"}).encode(), sequence=True, makepath=True)


async def set_user_credential(connect: str, user: str, mechanism: Mechanism, credential: ScramCredential,
                              timeout_ms: int = ZK_TIMEOUT_MS) -> None:
    """Add or replace one of ``user``'s credentials in the ZooKeeper of ``connect``
    (HOST:PORT[,...][/chroot], a cluster's zookeeper.connect), keeping its others. A chroot
    not made yet is made (this may run before the cluster's first start)."""
    hosts, slash, chroot = connect.partition("/")
    if slash and chroot.strip("/"):
        zk = ZkSession(hosts, timeout_ms, timeout_ms)
        await zk.start()
        try:
            await zk.ensure_path(f"/{chroot.strip('/')}")
        finally:
            await zk.close()
    zk = ZkSession(connect, timeout_ms, timeout_ms)
    await zk.start()
    try:
        node = await zk.get(f"{USERS}/{sanitize(user)}")
        credentials = user_credentials(node.data) if node is not None else {}
        await write_user(zk, user, {**credentials, mechanism: credential})
    finally:
        await zk.close()


async def _put(zk: ZkSession, path: str, data: bytes) -> None:
    node = await zk.get(path)
    if node is None:
        await zk.create(path, data, makepath=True)
    else:
        await zk.set(path, data, node.version)


def obsolete(created_ms: dict[str, int], now_ms: int, expiration_ms: int) -> list[str]:
    """The change notifications (name -> creation time) older than ``expiration_ms`` at ``now_ms``."""
    return sorted(name for name, ctime in created_ms.items() if now_ms - ctime > expiration_ms)


class ZkSecurityStore:
    def __init__(self, zk: ZkSession, security: Security, change_expiration_ms: int = 900000) -> None:
        self.zk = zk
        self.security = security
        self.change_expiration_ms = change_expiration_ms
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        for path in (USERS, CONFIG_CHANGES, ACL_CHANGES, *ACLS.values()):
            await self.zk.ensure_path(path)
        await self.zk.watch_children(CONFIG_CHANGES,
                                     lambda p, c: self._spawn(self._changed(self.load_credentials, p, c)))
        await self.zk.watch_children(ACL_CHANGES, lambda p, c: self._spawn(self._changed(self.load_acls, p, c)))
        await self.load_credentials()
        await self.load_acls()
        self.security.remote = self

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)  # kept until done: the loop holds tasks weakly
        task.add_done_callback(self._tasks.discard)

    async def _changed(self, load: Callable[[], Awaitable[None]], path: str, notifications: list[str]) -> None:
        await load()
        created: dict[str, int] = {}
        for name in notifications:
            node = await self.zk.get(f"{path}/{name}")
            if node is not None:
                created[name] = node.ctime_ms
        for name in obsolete(created, int(time.time() * 1000), self.change_expiration_ms):
            log.debug("purging change notification %s/%s", path, name)
            await self.zk.delete(f"{path}/{name}")

    # -- reading ---------------------------------------------------------------------------

    async def load_credentials(self) -> None:
        async with self._lock:
            users: dict[str, dict[Mechanism, ScramCredential]] = {}
            for child in await self.zk.children(USERS):
                node = await self.zk.get(f"{USERS}/{child}")
                mechs = user_credentials(node.data) if node is not None else {}
                if mechs:
                    users[unquote(child)] = mechs
            store = self.security.credentials
            current = store.users()
            store.apply([(u, m, c) for u, ms in users.items() for m, c in ms.items()],
                        [(u, m) for u, ms in current.items() for m in ms if m not in users.get(u, {})])

    async def load_acls(self) -> None:
        async with self._lock:
            acls: list[AclBinding] = []
            for pattern, root in ACLS.items():
                for rtype in await self.zk.children(root):
                    for name in await self.zk.children(f"{root}/{rtype}"):
                        node = await self.zk.get(f"{root}/{rtype}/{name}")
                        if node is not None:
                            acls.extend(resource_acls(node.data, pattern, rtype, unquote(name)))
            self.security.acl_store.replace(acls)

    # -- writing (then applied here at once; the other brokers follow their watch) -----------

    async def store_credentials(self, upserts: list[tuple[str, Mechanism, ScramCredential]],
                                deletions: list[tuple[str, Mechanism]]) -> None:
        users = self.security.credentials.users()
        touched = {u for u, _m, _c in upserts} | {u for u, _m in deletions}
        for user, mech in deletions:
            users.get(user, {}).pop(mech, None)
        for user, mech, cred in upserts:
            users.setdefault(user, {})[mech] = cred
        for user in sorted(touched):
            await write_user(self.zk, user, users.get(user, {}))
        await self.load_credentials()

    async def store_acls(self, acls: Iterable[AclBinding]) -> None:
        new = tuple(dict.fromkeys(acls))
        old = self.security.acl_store.acls
        resources = {(a.pattern_type, a.resource_type, a.resource_name) for a in (*old, *new)}
        for pattern, rtype, name in sorted(resources):
            before = [a for a in old if (a.pattern_type, a.resource_type, a.resource_name) == (pattern, rtype, name)]
            after = [a for a in new if (a.pattern_type, a.resource_type, a.resource_name) == (pattern, rtype, name)]
            if before == after:
                continue
            await _put(self.zk, f"{ACLS[pattern]}/{resource_type_name(rtype)}/{quote(name, safe='')}",
                       resource_acls_data(after))
            await self.zk.create(f"{ACL_CHANGES}/acl_changes_", acl_change(rtype, pattern, name), sequence=True)
        await self.load_acls()

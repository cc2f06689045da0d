"""The admin client's public API: ``AIOAdmin`` (asyncio) and ``Admin`` (blocking).

``AIOAdmin`` puts together the API families — topics, cluster and offsets (``topics``),
configs (``configs``), consumer groups (``groups``), share groups (``share_groups``),
transactions (``transactions``), features (``features``), partition reassignments
(``reassignments``), log directories (``log_dirs``) — over the routing and retries of
``core``. ``Admin`` runs an AIOAdmin on an event loop in a thread
of its own (``eoslog.client.sync.LoopThread``, Java's ``kafka-admin-client-thread``):
each method hops onto that loop and waits, with the same arguments and results.

Example::

    from eoslog.client import Admin, NewTopic

    with Admin({"bootstrap.servers": "127.0.0.1:9092"}) as admin:
        admin.create_topics([NewTopic("orders", num_partitions=3)])
        print(admin.describe_topics(["orders"])["orders"].partitions)
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Concatenate, ParamSpec, TypeVar

from eoslog.client.admin.configs import ConfigAdmin
from eoslog.client.admin.features import FeatureAdmin
from eoslog.client.admin.groups import GroupAdmin
from eoslog.client.admin.log_dirs import LogDirAdmin
from eoslog.client.admin.reassignments import ReassignmentAdmin
from eoslog.client.admin.security import SecurityAdmin
from eoslog.client.admin.share_groups import ShareGroupAdmin
from eoslog.client.admin.topics import TopicAdmin
from eoslog.client.admin.transactions import TransactionAdmin
from eoslog.client.sync import BlockingFacade

P = ParamSpec("P")
T = TypeVar("T")


class AIOAdmin(TopicAdmin, ConfigAdmin, GroupAdmin, ShareGroupAdmin, TransactionAdmin, SecurityAdmin, FeatureAdmin,
               ReassignmentAdmin, LogDirAdmin):
    """An asyncio admin client. ``settings`` take Kafka's AdminClientConfig names
    (``{"bootstrap.servers": ...}``), keyword arguments the same with underscores.

    Use ``async with AIOAdmin(...) as admin`` or ``await admin.start()`` / ``close()``.
    Every call retries retriable errors within ``default.api.timeout.ms`` (or its own
    ``timeout_ms``) and raises the typed exception of a Kafka error code otherwise."""


def _blocking(method: Callable[Concatenate[AIOAdmin, P], Coroutine[Any, Any, T]]) -> Callable[Concatenate[Admin, P], T]:
    """The blocking twin of an AIOAdmin method: run it on the admin's loop and wait."""

    def call(admin: Admin, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return admin._call(method(admin._aio, *args, **kwargs))

    call.__name__, call.__qualname__ = method.__name__, f"Admin.{method.__name__}"
    call.__doc__ = method.__doc__
    return call


class Admin(BlockingFacade):
    """The blocking admin client: an AIOAdmin on an event loop in a background thread."""

    def __init__(self, settings: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self._aio = AIOAdmin(settings, **kwargs)
        self.config = self._aio.config
        self._start_loop(f"eoslog-admin-client-thread | {self.config.client_id}",
                         "a blocking admin call from the admin client's own thread would deadlock",
                         self._aio.start())

    def close(self) -> None:
        self._close_once(lambda: self._call(self._aio.close()))

    create_topics = _blocking(AIOAdmin.create_topics)
    delete_topics = _blocking(AIOAdmin.delete_topics)
    list_topics = _blocking(AIOAdmin.list_topics)
    describe_topics = _blocking(AIOAdmin.describe_topics)
    create_partitions = _blocking(AIOAdmin.create_partitions)
    describe_configs = _blocking(AIOAdmin.describe_configs)
    alter_configs = _blocking(AIOAdmin.alter_configs)
    incremental_alter_configs = _blocking(AIOAdmin.incremental_alter_configs)
    describe_cluster = _blocking(AIOAdmin.describe_cluster)
    elect_leaders = _blocking(AIOAdmin.elect_leaders)
    alter_partition_reassignments = _blocking(AIOAdmin.alter_partition_reassignments)
    list_partition_reassignments = _blocking(AIOAdmin.list_partition_reassignments)
    describe_log_dirs = _blocking(AIOAdmin.describe_log_dirs)
    alter_replica_log_dirs = _blocking(AIOAdmin.alter_replica_log_dirs)
    list_offsets = _blocking(AIOAdmin.list_offsets)
    delete_records = _blocking(AIOAdmin.delete_records)
    list_groups = _blocking(AIOAdmin.list_groups)
    describe_groups = _blocking(AIOAdmin.describe_groups)
    list_consumer_group_offsets = _blocking(AIOAdmin.list_consumer_group_offsets)
    alter_consumer_group_offsets = _blocking(AIOAdmin.alter_consumer_group_offsets)
    delete_consumer_group_offsets = _blocking(AIOAdmin.delete_consumer_group_offsets)
    delete_groups = _blocking(AIOAdmin.delete_groups)
    list_share_groups = _blocking(AIOAdmin.list_share_groups)
    describe_share_groups = _blocking(AIOAdmin.describe_share_groups)
    list_share_group_offsets = _blocking(AIOAdmin.list_share_group_offsets)
    alter_share_group_offsets = _blocking(AIOAdmin.alter_share_group_offsets)
    delete_share_group_offsets = _blocking(AIOAdmin.delete_share_group_offsets)
    list_transactions = _blocking(AIOAdmin.list_transactions)
    describe_transactions = _blocking(AIOAdmin.describe_transactions)
    describe_producers = _blocking(AIOAdmin.describe_producers)
    abort_transaction = _blocking(AIOAdmin.abort_transaction)
    create_acls = _blocking(AIOAdmin.create_acls)
    describe_acls = _blocking(AIOAdmin.describe_acls)
    delete_acls = _blocking(AIOAdmin.delete_acls)
    describe_user_scram_credentials = _blocking(AIOAdmin.describe_user_scram_credentials)
    alter_user_scram_credentials = _blocking(AIOAdmin.alter_user_scram_credentials)
    describe_features = _blocking(AIOAdmin.describe_features)
    update_features = _blocking(AIOAdmin.update_features)


__all__ = ["AIOAdmin", "Admin"]

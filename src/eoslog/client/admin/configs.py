"""Configs of topics, brokers and groups: DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs.

A broker's resource (named by its node id) goes to that broker, every other resource to
any broker (on KRaft it forwards the change to the controller), as Java's Admin sends them.
Each resource is answered on its own; the call raises the first failure in the order the
caller gave, after the broker handled every resource of the request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

from eoslog.client.admin.core import AdminCore, MakeRequest, raise_first
from eoslog.client.admin.types import (
    AlterConfigOp,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
)
from eoslog.client.versions import ApiVersionTable
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.messages import build, request_types

if TYPE_CHECKING:
    from eoslog.protocol.requests import AlterConfigsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest
    from eoslog.protocol.responses import (
        AlterConfigsResponse,
        DescribeConfigsResponse,
        IncrementalAlterConfigsResponse,
    )

ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 33, 44


def _by_node(resources: Iterable[ConfigResource]) -> dict[int | None, list[ConfigResource]]:
    """A broker's resource → its node; the others → None (any broker)."""
    out: dict[int | None, list[ConfigResource]] = {}
    for r in resources:
        node = int(r.name) if r.type is ConfigResourceType.BROKER and r.name.isdigit() else None
        out.setdefault(node, []).append(r)
    return out


def _resource(result: Any) -> ConfigResource:  # a result of (Incremental)AlterConfigs, any version
    return ConfigResource(ConfigResourceType(int(result.resource_type)), str(result.resource_name))


class ConfigAdmin(AdminCore):
    async def describe_configs(self, resources: Iterable[ConfigResource], *, include_synonyms: bool = False,
                               include_documentation: bool = False,
                               timeout_ms: int | None = None) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        """Every config of each topic or broker, by name (DescribeConfigs). A broker's
        resource goes to that broker, the others to any broker. Unknown topics raise
        UnknownTopicOrPartitionError, unknown broker ids InvalidRequestError."""
        wanted = list(dict.fromkeys(resources))
        by_node = _by_node(wanted)

        def make_for(batch: list[ConfigResource]) -> MakeRequest:
            def make(versions: ApiVersionTable) -> DescribeConfigsRequest:
                m = request_types(ApiKey.DESCRIBE_CONFIGS, versions.pick(ApiKey.DESCRIBE_CONFIGS, 4, 1))
                return cast("DescribeConfigsRequest", build(m.DescribeConfigsRequest, include_synonyms=include_synonyms,
                             include_documentation=include_documentation, resources=tuple(
                                 build(m.DescribeConfigsResource, resource_type=int(r.type), resource_name=r.name,
                                       configuration_keys=None) for r in batch)))
            return make

        def handle(_: int | None, response: DescribeConfigsResponse) -> dict[ConfigResource, dict[str, ConfigEntry]]:
            out: dict[ConfigResource, dict[str, ConfigEntry]] = {}
            errors: dict[ConfigResource, tuple[int, str | None]] = {}
            for result in response.results:
                resource = ConfigResource(ConfigResourceType(int(result.resource_type)), str(result.resource_name))
                if int(result.error_code) != 0:
                    errors[resource] = (int(result.error_code), result.error_message or f"{resource}")
                    continue
                out[resource] = {str(c.name): _config_entry(c) for c in result.configs}
            raise_first(errors, wanted)
            return out

        async def describe(node: int | None) -> dict[ConfigResource, dict[str, ConfigEntry]]:
            # A broker id no broker has is asked of any broker, which refuses it (INVALID_REQUEST).
            return await self._call("describe_configs", make_for(by_node[node]), handle,
                                    node=self._broker(node, or_any=True),
                                    timeout_ms=timeout_ms)

        found: dict[ConfigResource, dict[str, ConfigEntry]] = {}
        for part in (await self._each(by_node, describe)).values():
            found.update(part)
        return {r: found[r] for r in wanted}

    async def alter_configs(self, configs: Mapping[ConfigResource, Mapping[str, str]], *,
                            validate_only: bool = False, timeout_ms: int | None = None) -> None:
        """Replace every dynamic config of each resource with the given ones (AlterConfigs,
        deprecated by Kafka in favour of ``incremental_alter_configs``: a config left out is
        reset to its default)."""
        wanted = {r: dict(c) for r, c in configs.items()}

        def make(batch: list[ConfigResource], versions: ApiVersionTable) -> AlterConfigsRequest:
            m = request_types(ALTER_CONFIGS, versions.pick(ALTER_CONFIGS, 2))
            return cast("AlterConfigsRequest", build(
                m.AlterConfigsRequest, validate_only=validate_only, resources=tuple(
                build(m.AlterConfigsResource, resource_type=int(r.type), resource_name=r.name, configs=tuple(
                    build(m.AlterableConfig, name=k, value=v) for k, v in wanted[r].items()))
                for r in batch)))

        await self._alter("alter_configs", list(wanted), make, timeout_ms)

    async def incremental_alter_configs(self, configs: Mapping[ConfigResource, Iterable[AlterConfigOp]], *,
                                        validate_only: bool = False, timeout_ms: int | None = None) -> None:
        """Change configs one by one (IncrementalAlterConfigs): SET a value, DELETE an
        override, APPEND to or SUBTRACT from a LIST config; the others keep their values.
        Raises InvalidConfigError (a bad name or value), UnknownTopicOrPartitionError,
        InvalidRequestError (e.g. a broker config that cannot change at run time)."""
        wanted = {r: list(ops) for r, ops in configs.items()}

        def make(batch: list[ConfigResource], versions: ApiVersionTable) -> IncrementalAlterConfigsRequest:
            m = request_types(INCREMENTAL_ALTER_CONFIGS, versions.pick(INCREMENTAL_ALTER_CONFIGS, 1))
            return cast("IncrementalAlterConfigsRequest", build(
                m.IncrementalAlterConfigsRequest, validate_only=validate_only, resources=tuple(
                build(m.AlterConfigsResource, resource_type=int(r.type), resource_name=r.name, configs=tuple(
                    build(m.AlterableConfig, name=o.name, config_operation=int(o.op_type),
                          value=None if o.op_type is AlterConfigOpType.DELETE else o.value)
                    for o in wanted[r]))
                for r in batch)))

        await self._alter("incremental_alter_configs", list(wanted), make, timeout_ms)

    async def _alter(self, what: str, wanted: list[ConfigResource],
                     make: Callable[[list[ConfigResource], ApiVersionTable], object], timeout_ms: int | None) -> None:
        by_node = _by_node(wanted)

        def handle(_: int | None, response: AlterConfigsResponse | IncrementalAlterConfigsResponse
                   ) -> dict[ConfigResource, tuple[int, str | None]]:
            return {_resource(r): (int(r.error_code), r.error_message or str(_resource(r)))
                    for r in response.responses if int(r.error_code) != 0}

        async def alter(node: int | None) -> dict[ConfigResource, tuple[int, str | None]]:
            request: MakeRequest = lambda versions: make(by_node[node], versions)  # noqa: E731
            return await self._call(what, request, handle, node=self._broker(node, or_any=True),
                                    timeout_ms=timeout_ms)

        errors: dict[ConfigResource, tuple[int, str | None]] = {}
        for part in (await self._each(by_node, alter)).values():
            errors.update(part)
        raise_first(errors, wanted)


def _config_entry(c: Any) -> ConfigEntry:  # a DescribeConfigs result's config, any version
    return ConfigEntry(
        str(c.name), c.value, ConfigSource(int(c.config_source)), bool(c.is_sensitive), bool(c.read_only),
        tuple(ConfigSynonym(str(s.name), s.value, ConfigSource(int(s.source))) for s in getattr(c, "synonyms", ())),
        ConfigType(int(getattr(c, "config_type", 0))), getattr(c, "documentation", None),
    )

"""Config vocabulary of the wire protocol, shared by the broker's DescribeConfigs,
AlterConfigs and IncrementalAlterConfigs and the admin client that sends them."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class ConfigResourceType(IntEnum):
    """ConfigResource.Type as sent on the wire."""

    UNKNOWN = 0
    TOPIC = 2
    GROUP = 32
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16


class AlterConfigOpType(IntEnum):
    """AlterConfigOp.OpType: how IncrementalAlterConfigs changes one config."""

    SET = 0
    DELETE = 1  # back to the default (or the broker's value for a topic or group config)
    APPEND = 2  # add values to a LIST config (cleanup.policy), starting from its default
    SUBTRACT = 3  # remove values from a LIST config


class ConfigType(IntEnum):
    """DescribeConfigsResponse.ConfigType (ConfigDef.Type as sent on the wire, KIP-569)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """Where a config's value comes from (DescribeConfigsResponse.ConfigSource)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    """One place a config's value could come from, in precedence order on the wire."""

    name: str
    value: str | None
    source: ConfigSource

"""Config vocabulary of the wire protocol, shared by the broker's DescribeConfigs and the
admin client that reads it."""

from __future__ import annotations

from enum import IntEnum


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

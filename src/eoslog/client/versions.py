"""API version negotiation, shared by the blocking and the asyncio connection.

What it owns: the ApiVersions exchange as a sans-I/O generator (``negotiation``), and the
choice of a request version from the broker's ranges, kio's and the caller's
(``ApiVersionTable.pick``). What it must never do: touch a socket — each connection drives
the generator with its own I/O::

    gen = negotiation()
    request = next(gen)
    while True:
        frame = exchange(request)          # send, read the response frame
        try:
            request = gen.send(frame)
        except StopIteration as done:
            table = done.value             # an ApiVersionTable
            break
"""

from __future__ import annotations

import struct
from collections.abc import Generator
from functools import cache
from typing import Any

from kio.schema.index import api_key_map, schema_name_map

from eoslog.client.errors import KafkaConnectionError, KafkaProtocolError, error_for
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.codec import decode_response
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import build, request_types

CLIENT_SOFTWARE_NAME = "eoslog"
_API_VERSIONS_PREFIX = struct.Struct(">ih")  # response header v0 + error_code


@cache
def kio_versions(api_key: int) -> tuple[int, int]:
    """The oldest and newest versions of ``api_key`` that kio can encode."""
    versions = schema_name_map[api_key_map[api_key]]
    return min(versions), max(versions)


def api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key_map.get(api_key, f"api key {api_key}"))


class ApiVersionTable:
    """The version ranges one broker advertised in ApiVersions, and (v3+) the finalized
    features (KIP-584) with their epoch (-1: none)."""

    def __init__(self, ranges: dict[int, tuple[int, int]], where: str = "broker",
                 finalized_features: dict[str, int] | None = None, finalized_features_epoch: int = -1) -> None:
        self.ranges = ranges
        self.where = where
        self.finalized_features = dict(finalized_features or {})
        self.finalized_features_epoch = finalized_features_epoch
        self._picked: dict[tuple[int, int, int], int] = {}

    def supports(self, api_key: int) -> bool:
        return api_key in self.ranges

    def pick(self, api_key: int, wanted_max: int, wanted_min: int = 0) -> int:
        """The highest version of ``api_key`` that the broker, kio and the caller all support."""
        picked = self._picked.get((api_key, wanted_max, wanted_min))
        if picked is not None:
            return picked
        name = api_name(api_key)
        if api_key not in self.ranges:
            raise KafkaProtocolError(
                ErrorCode.unsupported_version, f"{self.where} does not support {name}"
            )
        low, high = self.ranges[api_key]
        kio_low, kio_high = kio_versions(api_key)
        top = min(high, wanted_max, kio_high)
        if top < max(low, wanted_min, kio_low):
            raise KafkaProtocolError(
                ErrorCode.unsupported_version,
                f"{self.where} supports {name} v{low}-v{high}, eoslog needs v{wanted_min}-v{wanted_max}",
            )
        self._picked[(api_key, wanted_max, wanted_min)] = top
        return top


def negotiation(where: str = "broker") -> Generator[Any, bytes | None, ApiVersionTable]:
    """Ask for the broker's version ranges with the newest ApiVersions both know.

    Yields kio requests, receives each response frame (without its size prefix), returns
    the table. A broker that does not know our ApiVersions version answers in v0 format
    with UNSUPPORTED_VERSION and its ranges (KIP-511); we then retry with its newest.
    """
    version = kio_versions(ApiKey.API_VERSIONS)[1]
    for _ in range(2):
        m = request_types(ApiKey.API_VERSIONS, version)
        frame = yield build(
            m.ApiVersionsRequest,
            client_software_name=CLIENT_SOFTWARE_NAME,
            client_software_version=package_version(),
        )
        if frame is None or len(frame) < _API_VERSIONS_PREFIX.size:
            raise KafkaConnectionError(f"short ApiVersions response from {where}")
        _, error = _API_VERSIONS_PREFIX.unpack_from(frame, 0)
        if error == ErrorCode.unsupported_version and version > 0:
            _, fallback = decode_response(frame, ApiKey.API_VERSIONS, 0)
            ranges = {int(k.api_key): int(k.max_version) for k in fallback.api_keys}
            version = min(ranges.get(ApiKey.API_VERSIONS, 0), version - 1)
            continue
        _, response = decode_response(frame, ApiKey.API_VERSIONS, version)
        if int(response.error_code) != 0:
            raise error_for(int(response.error_code), "ApiVersions")
        return ApiVersionTable(
            {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys},
            where,
            {str(f.name): int(f.max_version_level) for f in getattr(response, "finalized_features", ())},
            int(getattr(response, "finalized_features_epoch", -1)),
        )
    raise KafkaProtocolError(ErrorCode.unsupported_version, "no common ApiVersions version")


@cache
def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("eoslog")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0"

"""Version-generic construction of kio messages.

kio generates one set of dataclasses per API *version*, and newer versions add fields.
Code that serves or sends a range of versions builds messages through ``build`` with
every field it knows of; ``build`` keeps those the chosen version defines. A few versions'
classes are eoslog's own copies of kio's where kio reads stricter than Kafka writes
(``_REPLACED``; each module says why), and a few requests carry tagged fields of eoslog's own
extension (``share_transactions``); everything here and in ``codec`` serves those.
"""

from __future__ import annotations

import dataclasses
import importlib
from types import ModuleType
from typing import Any, Literal

from kio.index import load_payload_module
from kio.static.constants import EntityType

from eoslog.protocol.api_keys import ApiKey

PayloadKind = Literal[EntityType.request, EntityType.response]

_fields: dict[type[Any], frozenset[str]] = {}
_modules: dict[tuple[int, int, PayloadKind], ModuleType] = {}
_REPLACED: dict[tuple[int, int, PayloadKind], str] = {
    (ApiKey.DESCRIBE_TRANSACTIONS, 0, EntityType.response): "eoslog.protocol.describe_transactions_v0",
}


def build(cls: type[Any], **values: Any) -> Any:
    """Instantiate a kio dataclass with the subset of ``values`` its version defines."""
    names = _fields.get(cls)
    if names is None:
        names = _fields[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return cls(**{k: v for k, v in values.items() if k in names})


def _module(api_key: int, version: int, kind: PayloadKind) -> ModuleType:
    key = (api_key, version, kind)
    module = _modules.get(key)
    if module is None:
        replaced = _REPLACED.get(key)
        module = importlib.import_module(replaced) if replaced else load_payload_module(api_key, version, kind)
        if kind == EntityType.request:
            module = _extended(module, api_key, version)
        _modules[key] = module
    return module


def _extended(module: ModuleType, api_key: int, version: int) -> ModuleType:
    """kio's request module with eoslog's extended classes in place of some of its classes
    (``share_transactions``: tagged fields of eoslog's own)."""
    from eoslog.protocol.share_transactions import REQUESTS

    classes = REQUESTS.get((api_key, version))
    if not classes:
        return module
    extended = ModuleType(module.__name__, module.__doc__)
    extended.__dict__.update({k: v for k, v in vars(module).items() if not k.startswith("__")})
    extended.__dict__.update(classes)
    return extended


def request_types(api_key: int, version: int) -> ModuleType:
    """The kio module holding the request classes of one API version."""
    return _module(api_key, version, EntityType.request)


def response_types(api_key: int, version: int) -> ModuleType:
    """The kio module holding the response classes of one API version."""
    return _module(api_key, version, EntityType.response)

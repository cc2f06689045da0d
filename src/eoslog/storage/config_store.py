"""Dynamic configs of brokers and groups, and client quotas, kept across restarts in
``dynamic-configs.json``.

KRaft keeps these as ConfigRecords in ``__cluster_metadata``; one node keeps them in one
atomically replaced file of the log directory (topic overrides stay in ``topics.json``)::

    {"version": 1,
     "broker": {"": {...cluster-wide defaults...}, "0": {...this broker...}},
     "group": {"payments": {"consumer.session.timeout.ms": "50000"}},
     "quota": {"users/alice": {"producer_byte_rate": "1048576"}, "clients/<default>": {...}}}

Values are the strings the AlterConfigs requests carried. What they mean, and whether they
may be set, is decided by ``broker/config_admin.py``; this module only stores them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

from eoslog.storage.fileio import atomic_write

log = logging.getLogger(__name__)

DYNAMIC_CONFIGS_FILE = "dynamic-configs.json"
BROKER = "broker"
GROUP = "group"
QUOTA = "quota"  # a client quota entity's path (quotas.entities) → its quotas
KINDS = (BROKER, GROUP, QUOTA)


class ConfigStore:
    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / DYNAMIC_CONFIGS_FILE
        self._data: dict[str, dict[str, dict[str, str]]] = {kind: {} for kind in KINDS}
        # Called with (kind, name) after each change is stored (the quota managers apply theirs).
        self.listeners: list[Callable[[str, str], None]] = []
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        try:
            doc = json.loads(self.path.read_text())
            for kind in KINDS:
                self._data[kind] = {
                    str(name): {str(k): str(v) for k, v in configs.items()}
                    for name, configs in doc.get(kind, {}).items()
                }
        except (ValueError, AttributeError, UnicodeDecodeError) as e:
            # Written atomically, so only a hand edit can break it: start without the
            # dynamic configs rather than refuse to start, and say so.
            log.error("ignoring unreadable %s (dynamic configs fall back to static ones): %s", self.path, e)
            self._data = {kind: {} for kind in KINDS}

    def get(self, kind: str, name: str) -> dict[str, str]:
        return dict(self._data[kind].get(name, {}))

    def names(self, kind: str) -> list[str]:
        return sorted(self._data[kind])

    def put(self, kind: str, name: str, configs: dict[str, str]) -> None:
        """Replace a resource's dynamic configs (none left: the resource is dropped) and
        write the file before returning."""
        data = {k: dict(v) for k, v in self._data.items()}
        data[kind] = dict(data[kind])
        if configs:
            data[kind][name] = dict(configs)
        else:
            data[kind].pop(name, None)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps({"version": 1, **data}, indent=1, sort_keys=True).encode())
        self._data = data
        for listener in list(self.listeners):
            listener(kind, name)

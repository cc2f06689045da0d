"""SCRAM credentials kept across restarts in ``scram-credentials.json`` of the log directory.

Kafka keeps them as UserScramCredentialRecords in its metadata log; one node keeps them in
one atomically replaced file (mode 0600), written before a change is acknowledged, so a
change takes effect at once and survives a restart. Only salted keys are stored (see
``scram.py``). ``eoslog users set-password --data-dir`` writes the same file offline.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from eoslog.protocol.scram import Mechanism
from eoslog.security.scram import ScramCredential
from eoslog.storage.fileio import atomic_write

log = logging.getLogger(__name__)

CREDENTIALS_FILE = "scram-credentials.json"


class CredentialStore:
    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / CREDENTIALS_FILE
        self._users: dict[str, dict[Mechanism, ScramCredential]] = {}
        if self.path.exists():
            doc = json.loads(self.path.read_text())  # unreadable: refuse to start rather than lock everyone out
            for user, mechs in doc.get("users", {}).items():
                self._users[str(user)] = {Mechanism(m): ScramCredential.from_json(c) for m, c in mechs.items()}

    def get(self, user: str, mechanism: Mechanism) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> dict[str, dict[Mechanism, ScramCredential]]:
        return {u: dict(m) for u, m in sorted(self._users.items())}

    def apply(self, upserts: list[tuple[str, Mechanism, ScramCredential]],
              deletions: list[tuple[str, Mechanism]]) -> None:
        """Apply a batch of changes and write the file before returning."""
        users = {u: dict(m) for u, m in self._users.items()}
        for user, mech in deletions:
            users.get(user, {}).pop(mech, None)
        for user, mech, cred in upserts:
            users.setdefault(user, {})[mech] = cred
        users = {u: m for u, m in users.items() if m}
        doc = {"version": 1, "users": {u: {str(k): c.to_json() for k, c in m.items()} for u, m in users.items()}}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps(doc, indent=1, sort_keys=True).encode())
        os.chmod(self.path, 0o600)
        self._users = users

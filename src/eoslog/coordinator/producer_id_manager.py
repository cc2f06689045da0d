"""Producer id allocation in durable blocks, never issuing an id twice.

As Kafka's ProducerIdManager with ZooKeeper's ``/latest_producer_id_block`` (its
ZkProducerIdManager), ids are handed out from blocks of ``PID_BLOCK_SIZE`` (1000). A new block is written to
``latest_producer_id_block`` (same JSON shape as the znode: version, broker, block_start,
block_end), fsynced and renamed into place *before* any id of it is used, so after a
``kill -9`` the next start continues with the following block: ids of a half-used block
are skipped, never reissued.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Protocol

from eoslog.storage.fileio import atomic_write

log = logging.getLogger(__name__)

PID_BLOCK_SIZE = 1000
BLOCK_FILE = "latest_producer_id_block"
LONG_MAX = 2**63 - 1


class ProducerIdsExhausted(Exception):
    pass


class ProducerIdsUnavailable(Exception):
    """No block is at hand yet (cluster mode: the next one is being fetched from ZooKeeper).
    Retriable: InitProducerId answers COORDINATOR_LOAD_IN_PROGRESS, as Kafka's
    RPCProducerIdManager does."""


class ProducerIdGenerator(Protocol):
    def generate_producer_id(self) -> int:
        """A producer id never issued before; raises ProducerIdsExhausted or
        ProducerIdsUnavailable."""
        ...


class ProducerIdManager:
    def __init__(self, log_dir: Path, broker_id: int) -> None:
        self.path = log_dir / BLOCK_FILE
        self.broker_id = broker_id
        self._next = 0
        self._block_end = -1  # nothing allocated yet: the first call fetches a block

    def _latest_block_end(self) -> int:
        if not self.path.exists():
            return -1
        try:
            return int(json.loads(self.path.read_text())["block_end"])
        except (ValueError, KeyError, TypeError) as e:
            # A corrupt file must not let ids be reused: refuse rather than restart at 0.
            raise RuntimeError(
                f"{self.path} is unreadable ({e}); restore it or move it aside knowingly"
            ) from None

    def _allocate_block(self) -> None:
        prev_end = self._latest_block_end()
        if prev_end > LONG_MAX - PID_BLOCK_SIZE:
            raise ProducerIdsExhausted(f"producer ids exhausted (last block ends at {prev_end})")
        start, end = prev_end + 1, prev_end + PID_BLOCK_SIZE
        doc = {"version": 1, "broker": self.broker_id, "block_start": str(start), "block_end": str(end)}
        atomic_write(self.path, json.dumps(doc).encode())
        self._next, self._block_end = start, end
        log.info("acquired producer id block [%d, %d]", start, end)

    def generate_producer_id(self) -> int:
        if self._next > self._block_end:
            self._allocate_block()
        pid = self._next
        self._next += 1
        return pid

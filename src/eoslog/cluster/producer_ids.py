"""Producer ids from ZooKeeper's ``/latest_producer_id_block``, as Kafka's ZkProducerIdManager.

A broker takes a block of ``PID_BLOCK_SIZE`` ids by reading the znode and its version,
writing the next block conditionally on that version, and starting over from the read when
another broker's write got there first. ZooKeeper accepts one write per version,
so no two brokers ever hold overlapping blocks; a block is only used after ZooKeeper accepted
it, so a broker killed half-way through a block leaves its rest unused, never reissued.

``generate_producer_id`` is called on the event loop and must not wait for ZooKeeper: the next
block is fetched in the background once 90% of the current one is used (as Kafka 3.x's
RPCProducerIdManager); with no block at hand it raises the retriable ProducerIdsUnavailable.
"""

from __future__ import annotations

import asyncio
import logging

from kazoo.exceptions import BadVersionError

from eoslog.cluster.zk import ZkSession
from eoslog.cluster.znodes import PRODUCER_ID_BLOCK, ProducerIdBlock
from eoslog.coordinator.producer_id_manager import (
    LONG_MAX,
    PID_BLOCK_SIZE,
    ProducerIdsExhausted,
    ProducerIdsUnavailable,
)

log = logging.getLogger(__name__)

PREFETCH_THRESHOLD = 0.9
RETRY_BACKOFF_S = 0.1


async def allocate_block(zk: ZkSession, broker_id: int, size: int = PID_BLOCK_SIZE) -> ProducerIdBlock:
    """Take the block after the latest one, by conditional update; retried on a lost race."""
    while True:
        node = await zk.get(PRODUCER_ID_BLOCK)
        if node is None:
            await zk.ensure_path(PRODUCER_ID_BLOCK)
            continue
        if node.data:
            last = ProducerIdBlock.decode(node.data).last
            if last > LONG_MAX - size:
                raise ProducerIdsExhausted(f"producer ids exhausted (last block ends at {last})")
        else:
            last = -1  # created empty by the first broker: ids start at 0
        block = ProducerIdBlock(broker_id, last + 1, last + size)
        try:
            version = await zk.set(PRODUCER_ID_BLOCK, block.encode(), node.version)
        except BadVersionError:
            log.debug("lost the race for producer id block after %d; reading again", last)
            continue
        log.info("acquired producer id block [%d, %d] (znode version %d)", block.first, block.last, version)
        return block


class ZkProducerIdManager:
    def __init__(self, zk: ZkSession, broker_id: int, block_size: int = PID_BLOCK_SIZE) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.block_size = block_size
        self._current: ProducerIdBlock | None = None
        self._next_id = 0
        self._prefetched: ProducerIdBlock | None = None
        self._fetch: asyncio.Task[None] | None = None
        self._exhausted: ProducerIdsExhausted | None = None

    def start(self) -> None:
        """Begin fetching the first block (call on the event loop)."""
        self._start_fetch()

    async def wait_ready(self) -> None:
        """Until a block is at hand (tests and start-up; InitProducerId never waits)."""
        while self._current is None and self._prefetched is None:
            self._start_fetch()
            assert self._fetch is not None
            await asyncio.shield(self._fetch)

    def stop(self) -> None:
        if self._fetch is not None:
            self._fetch.cancel()

    def _start_fetch(self) -> None:
        if self._fetch is None or self._fetch.done():
            self._fetch = asyncio.get_running_loop().create_task(self._fetch_block())

    async def _fetch_block(self) -> None:
        while self._prefetched is None:
            try:
                self._prefetched = await allocate_block(self.zk, self.broker_id, self.block_size)
            except ProducerIdsExhausted as e:
                self._exhausted = e
                return
            except Exception as e:  # ZooKeeper unreachable, session moving: try again
                log.warning("could not take a producer id block from ZooKeeper (%s); retrying", e)
                await asyncio.sleep(RETRY_BACKOFF_S)

    def generate_producer_id(self) -> int:
        current = self._current
        if current is None or self._next_id > current.last:
            if self._prefetched is None:
                if self._exhausted is not None:
                    raise self._exhausted
                self._start_fetch()
                raise ProducerIdsUnavailable("the next producer id block is being fetched")
            current, self._prefetched = self._prefetched, None
            self._current, self._next_id = current, current.first
        pid = self._next_id
        self._next_id += 1
        used = self._next_id - current.first
        if self._prefetched is None and used >= PREFETCH_THRESHOLD * self.block_size:
            self._start_fetch()
        return pid

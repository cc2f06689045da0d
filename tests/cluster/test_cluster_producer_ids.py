"""Producer-id blocks from ZooKeeper (seed 001): brokers racing for blocks by conditional
update never hold overlapping blocks, and a restarted allocator continues after the last block."""

from __future__ import annotations

import asyncio
import threading

from eoslog.cluster.producer_ids import ZkProducerIdManager, allocate_block
from eoslog.cluster.zk import ZkSession
from eoslog.cluster.znodes import PRODUCER_ID_BLOCK, ProducerIdBlock
from eoslog.cluster.zookeeper_server import ZooKeeperServer
from eoslog.coordinator.producer_id_manager import ProducerIdsUnavailable

SESSION_MS = 6000


async def _session(zookeeper: ZooKeeperServer, chroot: str) -> ZkSession:
    root = ZkSession(zookeeper.connect_string, SESSION_MS, SESSION_MS)
    await root.start()
    await root.ensure_path(chroot)
    await root.close()
    zk = ZkSession(zookeeper.connect_string + chroot, SESSION_MS, SESSION_MS)
    await zk.start()
    return zk


def test_racing_allocators_never_share_a_block(zookeeper: ZooKeeperServer) -> None:
    """Three allocators, each on its own event loop and ZooKeeper session (as three brokers),
    take 60 blocks of 10 ids at once: the blocks are disjoint and leave no gap."""
    blocks: dict[int, list[ProducerIdBlock]] = {}

    def broker(broker_id: int, start: threading.Barrier) -> None:
        async def run() -> None:
            zk = await _session(zookeeper, "/race")
            start.wait()
            blocks[broker_id] = [await allocate_block(zk, broker_id, size=10) for _ in range(60)]
            await zk.close()
        asyncio.run(run())

    barrier = threading.Barrier(3)
    threads = [threading.Thread(target=broker, args=(b, barrier)) for b in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    taken = sorted((b for bs in blocks.values() for b in bs), key=lambda b: b.first)
    assert len(taken) == 180
    assert [(b.first, b.last) for b in taken] == [(i * 10, i * 10 + 9) for i in range(180)]
    assert all(b.broker == owner for owner, bs in blocks.items() for b in bs)


def test_manager_prefetches_and_continues_after_restart(zookeeper: ZooKeeperServer) -> None:
    async def run() -> None:
        zk = await _session(zookeeper, "/restart")
        first = ZkProducerIdManager(zk, broker_id=1, block_size=10)
        try:
            first.generate_producer_id()
            raise AssertionError("an id was issued before any block was taken")
        except ProducerIdsUnavailable:
            pass
        await first.wait_ready()
        ids = [first.generate_producer_id() for _ in range(9)]  # 90% used: prefetch starts
        await asyncio.sleep(0)
        assert first._fetch is not None
        await first._fetch
        ids += [first.generate_producer_id() for _ in range(6)]
        assert ids == list(range(15))
        first.stop()  # a "kill": the rest of block [10, 19] is never issued
        second = ZkProducerIdManager(zk, broker_id=1, block_size=10)
        await second.wait_ready()
        assert second.generate_producer_id() == 20
        node = await zk.get(PRODUCER_ID_BLOCK)
        assert node is not None
        assert ProducerIdBlock.decode(node.data) == ProducerIdBlock(1, 20, 29)
        await zk.close()

    asyncio.run(run())

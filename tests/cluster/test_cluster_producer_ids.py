"""Producer-id blocks from ZooKeeper (Kafka's ZkProducerIdManager): brokers racing for blocks by conditional
update never hold overlapping blocks, a restarted allocator continues after the last block,
and three real brokers killed in turn never issue an id twice."""

from __future__ import annotations

import asyncio
import datetime
import threading
import time
from collections import Counter
from typing import Any

import pytest
from kio.static.primitive import i16, i64

from eoslog.cluster.producer_ids import ZkProducerIdManager, allocate_block
from eoslog.cluster.zk import ZkSession
from eoslog.cluster.znodes import PRODUCER_ID_BLOCK, ProducerIdBlock
from eoslog.cluster.zookeeper_server import ZooKeeperServer
from eoslog.coordinator.producer_id_manager import ProducerIdsUnavailable
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import build
from support.cluster_harness import Cluster
from support.harness import wait_until
from support.rawkafka import ConnectionClosed, RawClient, request_module

INIT_PRODUCER_ID = 22

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


def test_brokers_never_issue_an_id_twice_across_kills(zookeeper: ZooKeeperServer,
                                                      tmp_path_factory: pytest.TempPathFactory) -> None:
    """Issue 13, test 5: three brokers answer 10,000 InitProducerId calls (idempotent
    producers) at once while, in turn, each is killed with SIGKILL and restarted: every id is
    issued once."""
    cluster = Cluster(tmp_path_factory.mktemp("pid-cluster"), zookeeper=zookeeper).start()
    issued: list[int] = []
    lock = threading.Lock()
    done = threading.Event()
    total = 10_000

    def worker(broker_id: int) -> None:
        broker = cluster.brokers[broker_id]
        client: RawClient | None = None
        while not done.is_set():
            try:
                if client is None:
                    client = RawClient(broker.bootstrap, timeout_s=10)
                resp = client.call(_init_producer_id())
            except (OSError, ConnectionClosed):
                if client is not None:
                    client.close()
                client = None
                time.sleep(0.05)  # killed: connect again once it is back
                continue
            if resp.error_code == ErrorCode.coordinator_load_in_progress:
                continue  # the next block is on its way
            assert resp.error_code == ErrorCode.none, resp
            with lock:
                issued.append(int(resp.producer_id))
                if len(issued) >= total:
                    done.set()
        if client is not None:
            client.close()

    threads = [threading.Thread(target=worker, args=(b,), daemon=True) for b in cluster.brokers]
    for t in threads:
        t.start()
    try:
        for victim in (1, 2, 3):
            wait_until(lambda v=victim: len(issued) >= v * total // 4 or done.is_set(), "InitProducerId answers", 300)
            cluster.brokers[victim].kill()
            cluster.brokers[victim].start()
        wait_until(done.is_set, f"{total} producer ids", 300)
        for t in threads:
            t.join(30)
    finally:
        done.set()
        cluster.stop()
    assert len(issued) >= total
    assert len(set(issued)) == len(issued), sorted(p for p, n in Counter(issued).items() if n > 1)[:20]
    assert all(b.starts == 2 for b in cluster.brokers.values())
    # That a restarted broker takes a new block and never issues the rest of its old one is
    # test_manager_prefetches_and_continues_after_restart's claim, shown there exactly; here a
    # restart that went on with its old block would issue ids twice (the check above).  Gaps in
    # `issued` are not asserted: a broker killed with its block used up and its next one not yet
    # fetched loses no id, and in one run all three kills came at such moments (ids 0-9999).



def _init_producer_id() -> Any:
    m = request_module(INIT_PRODUCER_ID, 4)
    return build(m.InitProducerIdRequest, transactional_id=None,
                 transaction_timeout=datetime.timedelta(milliseconds=60000),
                 producer_id=i64(-1), producer_epoch=i16(-1))

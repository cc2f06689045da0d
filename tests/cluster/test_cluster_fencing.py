"""A deposed controller is fenced by ZooKeeper itself: once another broker has moved
``/controller_epoch`` on, every write of the old controller is refused (its transaction's
epoch check fails), and it steps down. Two controllers over one real ZooKeeper."""

from __future__ import annotations

import asyncio
import time

import pytest

from eoslog.cluster import znodes
from eoslog.cluster.controller.controller import Controller, ControllerMoved, ControllerSettings, register_controller
from eoslog.cluster.leadership import Leadership
from eoslog.cluster.metadata import ClusterMetadata
from eoslog.cluster.registry import create_topic, read_state, update_isr
from eoslog.cluster.zk import ZkSession
from eoslog.cluster.znodes import BrokerRegistration, LeaderAndIsr
from eoslog.cluster.zookeeper_server import ZooKeeperServer
from eoslog.errors import Errors
from eoslog.types import TopicPartition

SESSION_MS = 6000
TP = TopicPartition("fenced", 0)


async def _session(zookeeper: ZooKeeperServer) -> ZkSession:
    zk = ZkSession(zookeeper.connect_string, SESSION_MS, SESSION_MS)
    await zk.start()
    return zk


def test_deposed_controller_writes_nothing(zookeeper: ZooKeeperServer) -> None:
    async def run() -> None:
        zk_a, zk_b = await _session(zookeeper), await _session(zookeeper)
        for path in znodes.PERSISTENT_PATHS:
            await zk_a.ensure_path(path)
        for broker_id, zk in ((1, zk_a), (2, zk_b)):
            await zk.create(znodes.broker_path(broker_id),
                            BrokerRegistration(broker_id, "127.0.0.1", 9000 + broker_id).encode(0), ephemeral=True)
        # Broker 2 leads although broker 1 is preferred: a preferred election would move it.
        await create_topic(zk_a, TP.topic, {0: (1, 2)}, {})
        await zk_a.ensure_path(znodes.partition_path(*TP))
        await zk_a.create(znodes.partition_state_path(*TP), LeaderAndIsr(2, 0, (1, 2), 0).encode())

        deposed = asyncio.Event()
        a = Controller(zk_a, ClusterMetadata(), 1, ControllerSettings(auto_leader_rebalance=False), deposed.set)
        a.activate(*await register_controller(zk_a, 1, int(time.time() * 1000)))
        await asyncio.wait_for(a.metadata.wait_for(lambda: TP in a.metadata.states, 10), 15)

        # Broker 2 becomes controller while A still runs (as after A's session paused).
        await zk_b.delete(znodes.CONTROLLER)
        epoch_b, version_b = await register_controller(zk_b, 2, int(time.time() * 1000))
        assert epoch_b == a.epoch + 1

        with pytest.raises(ControllerMoved):
            await a.elect_leaders([TP])
        await asyncio.wait_for(deposed.wait(), 5)
        assert not a.active
        state = await read_state(zk_a, TP)
        assert state is not None and (state.leader, state.leader_epoch) == (2, 0)  # untouched

        b = Controller(zk_b, ClusterMetadata(), 2, ControllerSettings(auto_leader_rebalance=False), lambda: None)
        b.activate(epoch_b, version_b)
        assert await b.elect_leaders([TP]) == {TP: Errors.NONE}
        state = await read_state(zk_b, TP)
        assert state is not None and (state.leader, state.leader_epoch, state.controller_epoch) == (1, 1, epoch_b)
        b.deactivate()
        await zk_a.close()
        await zk_b.close()

    asyncio.run(run())


def test_leader_isr_change_is_conditional(zookeeper: ZooKeeperServer) -> None:
    """A leader's ISR write lands only on the state version it saw: after the controller
    elected another leader, the old leader's shrink is refused and the new state stays."""
    async def run() -> None:
        zk = await _session(zookeeper)
        tp = TopicPartition("isr", 0)
        await zk.ensure_path(znodes.partition_path(*tp))
        await zk.create(znodes.partition_state_path(*tp), LeaderAndIsr(1, 0, (1, 2, 3), 1).encode())
        seen = await read_state(zk, tp)
        assert seen is not None
        shrunk = await update_isr(zk, tp, seen, (1, 2))
        assert shrunk is not None and shrunk.isr == (1, 2) and shrunk.zk_version == seen.zk_version + 1
        # The controller moves leadership on (as after broker 1's session expired) ...
        await zk.set(znodes.partition_state_path(*tp), LeaderAndIsr(2, 1, (2,), 2).encode(), shrunk.zk_version)
        # ... and the old leader's next change, based on what it saw, does not land.
        assert await update_isr(zk, tp, shrunk, (1,)) is None
        now = await read_state(zk, tp)
        assert now is not None and (now.leader, now.leader_epoch, now.isr) == (2, 1, (2,))
        await zk.close()

    asyncio.run(run())


def test_leader_does_not_take_a_broker_that_asked_to_shut_down_back_into_the_isr(zookeeper: ZooKeeperServer) -> None:
    """The race behind a controlled shutdown that waited out its whole budget in CI: the
    leader's cache had applied the controller's ISR shrink but not yet the shutdown request that
    caused it, and a fetch the shutting-down broker sent before it stopped fetching took it back
    into the ISR, where nothing took it out again. The leader reads the request from ZooKeeper
    before writing an expansion. (Mutant: without that read the ISR becomes (2, 1) here.)"""
    async def run() -> None:
        zk = await _session(zookeeper)
        for path in znodes.PERSISTENT_PATHS:
            await zk.ensure_path(path)
        tp = TopicPartition("shutting", 0)
        await zk.create(znodes.broker_path(1), BrokerRegistration(1, "127.0.0.1", 9001).encode(0), ephemeral=True)
        registered = await zk.get(znodes.broker_path(1))
        assert registered is not None
        metadata = ClusterMetadata()  # the leader's cache: broker 1 registered, no request seen yet
        metadata.set_brokers({1: BrokerRegistration(1, "127.0.0.1", 9001, epoch=registered.czxid)})
        await zk.ensure_path(znodes.partition_path(*tp))
        await zk.create(znodes.partition_state_path(*tp), LeaderAndIsr(2, 0, (2,), 1).encode())
        shrunk = await read_state(zk, tp)
        assert shrunk is not None
        leadership = Leadership(2, zk, metadata, None, None, None, 30000, lambda: 0)  # type: ignore[arg-type]

        await zk.create(znodes.controlled_shutdown_path(1), str(registered.czxid).encode())
        await leadership._write_isr(tp, shrunk, (2, 1))
        now = await read_state(zk, tp)
        assert now is not None and now.isr == (2,)

        # A request left by an earlier life of broker 1 (another epoch) does not hold it out.
        await zk.set(znodes.controlled_shutdown_path(1), b"1", -1)
        await leadership._write_isr(tp, shrunk, (2, 1))
        now = await read_state(zk, tp)
        assert now is not None and now.isr == (2, 1)
        await zk.close()

    asyncio.run(run())

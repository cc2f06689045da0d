"""The follower's fetcher (cluster/fetcher.py) against an in-process leader
(test_group_commit.Loopback): how it backs off."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from test_group_commit import FOLLOWER_ID, Loopback, batch, replica_manager

from eoslog.client.versions import ApiVersionTable
from eoslog.cluster.channel import BrokerChannel
from eoslog.cluster.fetcher import FetcherSettings, ReplicaFetcher
from eoslog.errors import Errors
from eoslog.types import TopicPartition

REMOVED, ADDED = TopicPartition("t", 0), TopicPartition("t", 1)


def test_a_partition_added_while_the_fetcher_backs_off_is_fetched_at_once(tmp_path: Path) -> None:
    """Kafka's fetcher thread backs off on a condition that addPartitions signals. Here the
    fetcher's only partition is removed while its request is in flight (a reassignment deleting
    the replica) and, in the same instant, another is added (the next reassignment's new
    replica): the round made no progress, so the fetcher backs off for replica.fetch.backoff.ms
    — an hour here — and the added partition must not wait that out. (bench/reassignment.py
    saw moves of 96 MB take ~1.3 s instead of ~0.3 s, the new replica waiting out the 1 s
    default; mutant, not committed: the back-off a plain sleep again — this test then timed
    out after 30 s.)"""
    leader = replica_manager(tmp_path / "leader", 0, False)
    follower = replica_manager(tmp_path / "follower", FOLLOWER_ID, False)
    for tp in (REMOVED, ADDED):
        leader.create_partition(tp).make_leader(0, (0, FOLLOWER_ID), (0, FOLLOWER_ID))
        follower.create_partition(tp).make_follower(0, 0, (0, FOLLOWER_ID), (0, FOLLOWER_ID))
    loopback = Loopback(leader, follower)
    settings = FetcherSettings(broker_id=FOLLOWER_ID, max_wait_ms=100, min_bytes=1, max_bytes=1 << 20,
                               partition_max_bytes=1 << 20, backoff_s=3600)

    class Reassigned:
        """The channel: during the first request, the fetched partition goes and another comes."""

        def __init__(self) -> None:
            self.fetcher: ReplicaFetcher | None = None
            self.sends = 0

        async def send(self, broker_id: int, make: Callable[[ApiVersionTable], Any]) -> Any:
            self.sends += 1
            response = await loopback.send(broker_id, make)
            if self.sends == 1 and self.fetcher is not None:
                self.fetcher.remove(REMOVED)
                self.fetcher.add(ADDED, 0)
            return response

    async def run() -> int:
        appended = await leader.append_records({ADDED: batch(b"a")}, required_acks=1, timeout_ms=10_000)
        assert appended[ADDED].error is Errors.NONE
        channel = Reassigned()
        fetcher = channel.fetcher = ReplicaFetcher(0, cast(BrokerChannel, channel), follower, settings)
        fetcher.add(REMOVED, 0)
        try:
            async def copied() -> None:
                while follower.partition_or_error(ADDED).log.log_end_offset < 1:
                    await asyncio.sleep(0.01)

            await asyncio.wait_for(copied(), 30)  # an hour's back-off would not end in time
            return channel.sends
        finally:
            fetcher.close()

    assert asyncio.run(run()) >= 3  # the request the removal cut short, then truncation and a fetch

"""The inter-broker channel: a connection per destination from the metadata cache, version
negotiation, and a new connection after the destination restarted."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from eoslog.client.errors import KafkaConnectionError
from eoslog.client.versions import ApiVersionTable
from eoslog.cluster.channel import BrokerChannel
from eoslog.cluster.metadata import ClusterMetadata
from eoslog.cluster.znodes import BrokerRegistration
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.messages import build, request_types
from support.harness import BrokerProcess


def _metadata_request(versions: ApiVersionTable) -> Any:
    m = request_types(ApiKey.METADATA, versions.pick(ApiKey.METADATA, 12, 1))
    return build(m.MetadataRequest, topics=(), allow_auto_topic_creation=False,
                 include_cluster_authorized_operations=False, include_topic_authorized_operations=False)


def test_channel_reconnects_after_a_restart(broker: BrokerProcess) -> None:
    async def run() -> None:
        metadata = ClusterMetadata()
        metadata.set_brokers({0: BrokerRegistration(0, "127.0.0.1", broker.port)})
        channel = BrokerChannel(metadata, broker_id=7, request_timeout_ms=10_000)
        first = await channel.send(0, _metadata_request)
        assert [int(b.node_id) for b in first.brokers] == [0]
        conn = await channel.connection(0)
        assert await channel.connection(0) is conn  # one connection per destination
        broker.restart(kill=True)
        with pytest.raises(KafkaConnectionError):  # requests on the broken connection fail ...
            await channel.send(0, _metadata_request)
        again = await channel.send(0, _metadata_request)  # ... the next one reconnects
        assert [int(b.node_id) for b in again.brokers] == [0]
        with pytest.raises(KafkaConnectionError, match="not registered"):
            await channel.send(5, _metadata_request)
        channel.close()

    asyncio.run(run())
